"""What the reporter's sentences say was looked at, set or changed already (``Checked``): flow control on RoCE,
the fabric manager, the IOMMU, ACS, ATS, the NPS setting, GPUDirect RDMA's module and its trouble, P2P on; and what
they say differed between runs (slower with GPUDirect RDMA on, slower with one release than another) or how the
ranks were placed (a pod or container of one GPU each). The words the prose reader (prose.py) matches, one table."""

from __future__ import annotations

import re

from topodoctor.model.evidence_prose import Checked

_CHECKED: tuple[tuple[Checked, re.Pattern[str]], ...] = (
    (
        "flow-control",
        re.compile(r"\bPFC\b|\bECN\b|\bDCQCN\b|\bpause[ -]?frames?\b|\bflow[ -]control\b|\blossless\b", re.I),
    ),
    ("fabric-manager", re.compile(r"\bfabric[ -]?manager\b|\bfabricmanager\b", re.I)),
    ("iommu", re.compile(r"\bIOMMU\b|\biommu=|\bamd_iommu\b|\bintel_iommu\b|\bVT-d\b", re.I)),
    ("acs", re.compile(r"\bACS(?:Ctl)?\b|\bnoacs\b")),
    ("ats", re.compile(r"\bATS\b")),
    ("nps", re.compile(r"\bNPS ?[124]?\b|\bNUMA nodes? per socket\b", re.I)),
    (
        "gdr",
        re.compile(r"\bnvidia[-_]peermem\b|\bnv_peer_mem(?:ory)?\b|\bGPU ?Direct(?: RDMA)?\b|\bGDR(?:DMA)?\b", re.I),
    ),
    # the reporter says peer access works (on GeForce: a patched kernel module, such as tinygrad's, turns it on):
    # "I have confirmed that I am able to use P2P", "P2P is enabled", "with the P2P driver"
    (
        "p2p-on",
        re.compile(
            r"\b(?:able to|can|could|managed to)\s+(?:use|enable|run)\s+P2P\b|\bP2P\s+(?:is\s+|was\s+|now\s+)?"
            r"(?:enabled|working|works|supported|unlocked)\b|\bP2P[ -](?:driver|patch\w*|(?:kernel )?module)"
            r"|\btinygrad\W+(?:open[ -]gpu[ -]kernel[ -]modules|driver|kernel module|patch)",
            re.I,
        ),
    ),
    # the reporter cannot get GPUDirect RDMA on: "a problem with enabling GDR", "GDR is not used", "how to enable
    # GPUDirect RDMA", "GDR does not work"
    (
        "gdr-trouble",
        re.compile(
            r"(?:problem|issue|trouble|fail\w*|unable|can(?:no|')t|could ?n[o']t|how (?:to|do I|can I|should I))\W+"
            r"(?:\w+\W+){0,4}?(?:enabl\w*|us(?:e|ing)|turn\w* on|get\w*|activat\w*)\W+(?:\w+\W+){0,2}?"
            r"(?:GDR(?:DMA)?|GPU ?Direct)\b"
            r"|\b(?:GDR(?:DMA)?|GPU ?Direct(?: RDMA)?)\W+(?:\w+\W+){0,3}?(?:is\s+|was\s+|does\s+|did\s+)?"
            r"(?:not|n't|never)\W+(?:\w+\W+){0,1}?(?:enabled|used|working|work|active|on|supported)\b",
            re.I,
        ),
    ),
    # the reporter says GPUDirect RDMA on makes the run slower than off, within one sentence: GDR the agent of the
    # loss ("nv_peer_memory severely deteriorating all_reduce_perf"), or set against the run without it ("once I
    # turn on GPU Direct RDMA, the bandwidth gets dramatically worse than without"); slower than another release
    # is no such claim
    (
        "gdr-slower",
        re.compile(
            r"\b(?:GDR(?:DMA)?|GPU ?Direct(?: RDMA)?|nvidia[-_]peermem|nv_peer_mem(?:ory)?)"
            r"(?:(?:\W+\w+){0,2}?\W+(?:deteriorat\w*|degrad\w*|slows? (?:it |\w+ )?down|hurts?)\b"
            r"|[^.?!\n]{0,80}?\b(?:worse|slower|drops?|lower)\b[^.?!\n]{0,60}?\b(?:without|off|disabl\w*)\b)",
            re.I,
        ),
    ),
    # each pod or container of the node sees one GPU: "in the pod we can just see the only one gpu that has been
    # allocated", "one GPU per container", "8 pods with 1 GPU each", "two separate Pods ... each allocated with one GPU"
    (
        "one-gpu-each",
        re.compile(
            r"\b(?:pods?|containers?)\b[^.?!\n]{0,80}?\b(?:only|just)\b[^.?!\n]{0,20}?\b(?:one|1|a single) GPU\b"
            r"|\b(?:pods?|containers?)\b[^.?!\n]{0,80}?\beach\b[^.?!\n]{0,30}?\b(?:one|1|a single) GPU\b"
            r"|\b(?:one|1|a single) GPU (?:per|to each|in each|for each|inside each) (?:pod|container)\b"
            r"|\b(?:pods?|containers?) (?:with|of|each (?:with|having)) (?:one|1|a single) GPU(?: each)?\b",
            re.I,
        ),
    ),
    # Horovod said to run on Gloo or without NCCL, within one sentence: "no way for Horovod with Gloo to use NCCL",
    # "Horovod was built without NCCL"
    (
        "horovod-gloo",
        re.compile(
            r"\bHorovod\b[^.?!\n]{0,60}?\b(?:Gloo\b|without NCCL\b|no NCCL\b)"
            r"|\bGloo\b[^.?!\n]{0,60}?\bHorovod\b",
            re.I,
        ),
    ),
    # a collective said to take long on one rank or device, as a profile shows it, within one sentence: "a long
    # all-reduce wait time on 1 device", "the allreduce kernel takes much longer on GPU 3 than on the others"
    (
        "one-rank-waits",
        re.compile(
            r"\b(?:all[ _-]?reduce|all[ _-]?gather|reduce[ _-]?scatter|collective|NCCL kernel)s?\b[^.?!\n]{0,60}?"
            r"\b(?:long|longer|slow|slower|wait\w*)\b[^.?!\n]{0,40}?\b(?:on|for|in)\s+(?:one|1|a single|the first"
            r"|only one|GPU\s*\d+|rank\s*\d+|device\s*\d+)\b"
            r"|\blong\s+all[ _-]?reduce\s+wait",
            re.I,
        ),
    ),
    # the run said to be slower with one release than another, within one sentence: "Bandwidth was lower with ucx
    # 1.15.0rc3 than with 1.13.1", "slower after upgrading to 2.19", "2.18 is faster than 2.19"
    (
        "version-slower",
        re.compile(
            r"\b(?:slower|lower|worse|drops?|dropped|regress\w*)\b[^.?!\n]{0,40}?\b(?:with|in|on|since|after)\b"
            r"[^.?!\n]{0,30}?\bv?\d+\.\d+[\w.+-]*[^.?!\n]{0,40}?\bthan\b[^.?!\n]{0,30}?\bv?\d+\.\d+"
            r"|\b(?:slower|lower|worse|drops?|dropped|regress\w*)\b[^.?!\n]{0,40}?\bafter (?:upgrad|updat)\w*"
            r"[^.?!\n]{0,30}?\bv?\d+\.\d+",
            re.I,
        ),
    ),
)


# what the sentences say that is a claim of its own about the run, with no figure beside it
CLAIMS: frozenset[Checked] = frozenset(("one-gpu-each", "version-slower", "horovod-gloo", "one-rank-waits"))


def checked_of(text: str) -> tuple[Checked, ...]:
    """What the text says was looked at or set already (flow control, the fabric manager, the IOMMU ...)."""
    return tuple(kind for kind, rx in _CHECKED if rx.search(text))
