"""NCCL's and nvidia-smi's own names in a reporter's sentences: the algorithm a run used ("when using
NVLSTree algorithm"), an NCCL release ("NCCL 2.19.3 is slower than 2.19.1"), a GPU path class said
against NVLink ("it was going over PHB rather than NVLink"), a rented or cloud instance, a PCIe switch the
NICs share and how many NICs or rings NCCL used ("only used 1 HDR HCA", "use both 2 rings").

These are names, never claims of a figure: the prose reader (prose.py) reads the figures and the hardware.
This reader takes no line from it: it reads the same free sentences after it and keeps what they name, so
a sentence stays the prose reader's too. The names are NCCL's own (NCCL_ALGO's algorithms: Tree, Ring,
CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT; src/graph/tuning.cc ncclAlgoStr) and nvidia-smi's path
classes (PIX, PXB, PHB, NODE, SYS), written as those tools print them, so a common word is not taken for
one: "ring" and "tree" only beside "algorithm"/"algo", a path class only in capitals.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from topodoctor.evidence.lines import Block, Parts
from topodoctor.evidence.prose import MAX_FREE, is_sentence
from topodoctor.evidence.prose import _code_input as code_input  # the prose reader's one test of a program's source
from topodoctor.model.evidence import NcclSaid

# NCCL's algorithm names as people write them, to NCCL_ALGO's spelling
_ALGOS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("NVLSTree", re.compile(r"\bNVLS[ _-]?Tree\b", re.I)),
    ("NVLS", re.compile(r"\bNVLS\b(?![ _-]?Tree)", re.I)),
    ("CollNetDirect", re.compile(r"\bCollNet[ _-]?Direct\b", re.I)),
    ("CollNetChain", re.compile(r"\bCollNet[ _-]?Chain\b", re.I)),
    ("CollNet", re.compile(r"\bCollNet\b(?![ _-]?(?:Direct|Chain))", re.I)),
    ("PAT", re.compile(r"\bPAT\b(?= algo)")),
    ("Tree", re.compile(r"\b(?:Tree|TREE)\b(?= algo)|\balgo(?:rithm)?s?\s*(?:=|:|is|of)?\s*tree\b", re.I)),
    ("Ring", re.compile(r"\b(?:Ring|RING)\b(?= algo)|\balgo(?:rithm)?s?\s*(?:=|:|is|of)?\s*ring\b", re.I)),
)
# "NCCL 2.19.3", "nccl v2.19.3", "NCCL version 2.19.3", "nccl==2.19.3", "NCCL-2.19.3-1"
_VERSION = re.compile(r"\bnccl(?:\s+version)?\s*(?:[:=]=?|-)?\s*v?(\d+\.\d+\.\d+)\b", re.I)
_PATH = re.compile(r"\b(PIX|PXB|PHB|NODE|SYS)\b")
_NVLINK = re.compile(r"\bNV[- ]?Link\b|\bNVL\b|\bSXM", re.I)
_NV = r"NV[- ]?Links?"
_NVLINK_ABSENT = re.compile(
    rf"\bnot (?:using|use|used|seeing|see|seen|showing|show)\s+(?:the |any )?{_NV}|\bno {_NV}|\bwithout {_NV}"
    rf"|\b(?:rather|other) than {_NV}|\binstead of {_NV}|\b{_NV} (?:are |is )?(?:inactive|not active|missing|"
    r"not (?:seen|shown|detected|enabled|working))",
    re.I,
)
# a GPU host someone rents: a cloud's instance, a provider's machine
_RENTED = re.compile(
    r"\b(?:instances?|rent(?:ed|ing)?|cloud|(?:GPU |cloud )?providers?|vast\.ai|runpod|lambda ?labs|paperspace|"
    r"coreweave|AWS|EC2|Azure|GCP|Google Cloud|OCI)\b",
    re.I,
)
_SWITCH = re.compile(r"\bPCI(?:e|-E)?\s+switch(?:es)?\b|\bPLX\b|\bPEX\s?\d+", re.I)
_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "single": 1, "both": 2}
_N = r"(\d+|one|two|three|four|single|both)"
# "only used 1 HDR HCA", "uses only one NIC", "a single NIC is used"
_NICS_USED = re.compile(rf"\bonly\s+(?:used?|using|uses)\s+{_N}\s+(?:\w+\s+){{0,2}}(?:HCAs?|NICs?)\b", re.I)
_DEVICES = re.compile(r"\b(mlx5_\d+|mlx4_\d+|ibp\w+|bnxt_re\d+|irdma\d+|rdmap\w+)\b")
_RINGS = re.compile(rf"\b{_N}\s+(?:\w+\s+)?(?:rings?|channels?)\b", re.I)
MAX_SAID = 400  # sentences looked at, as the prose reader bounds its own


# an algorithm's name alone as the label of the figures under it ("NVLSTree:", "Ring:")
_ALGO_LABEL = re.compile(r"^(?:NCCL_ALGO\s*=\s*)?(?:Tree|Ring|NVLS|NVLSTree|NVLS_TREE|CollNet\w*|PAT)\s*:?\s*$", re.I)


def _count(word: str) -> int:
    return int(word) if word.isdigit() else _WORDS[word.lower()]


def _said(k: int, text: str, piece: int) -> NcclSaid | None:
    algos = tuple(dict.fromkeys(name for name, rx in _ALGOS if rx.search(text)))
    versions = tuple(dict.fromkeys(_VERSION.findall(text)))
    nvlink = bool(_NVLINK.search(text))
    paths = tuple(dict.fromkeys(_PATH.findall(text))) if nvlink or "PCI" in text.upper() else ()
    used = _NICS_USED.search(text)
    rings = tuple(_count(m.group(1)) for m in _RINGS.finditer(text))
    absent = bool(_NVLINK_ABSENT.search(text))
    said = NcclSaid(piece, k + 1, text[:300], algos, versions, paths, nvlink, absent, bool(_RENTED.search(text)),
                    bool(_SWITCH.search(text)), _count(used.group(1)) if used else None,
                    tuple(dict.fromkeys(_DEVICES.findall(text))), rings)  # fmt: skip
    named = algos or versions or paths or said.pcie_switch or said.nics_used is not None or rings
    return said if named or said.rented or nvlink else None


def read(lines: list[str], taken: Iterable[int], piece: int) -> Block | None:
    """What the sentences among ``lines`` name of NCCL and the GPUs' links; None where they name nothing.
    ``taken``: the lines the tools' readers took (the prose reader's are not among them: they are read here too)."""
    skip = set(taken)
    if code_input([ln for k, ln in enumerate(lines[: 2 * MAX_FREE]) if k not in skip and ln.strip()][:MAX_FREE]):
        return None  # a program's source or configuration: its sentences are comments and strings
    found: list[NcclSaid] = []
    looked = 0
    for k, line in enumerate(lines):
        if k in skip or not line.strip():
            continue
        text = re.sub(r"^\s*(?:[*+-]|\d+[.)])\s+", "", line).replace("**", "").strip()
        if not is_sentence(text, text != line.strip()) and not _ALGO_LABEL.match(text):
            continue
        looked += 1
        if looked > MAX_SAID:
            break
        if (got := _said(k, text, piece)) is not None:
            found.append(got)
    if not found:
        return None
    return Block("nccl-words", found[0].line - 1, found[-1].line, Parts(nccl_said=found),
                 lines=tuple(s.line - 1 for s in found))  # fmt: skip


def stands_alone(parts: Parts) -> bool:
    """Whether the names make an input that holds nothing else: an algorithm, a release or a path class is
    something to judge; a rented instance, NVLink or a release named is context only, for other inputs."""
    # a release alone is not: a sentence's version may be the one compared with, and names no symptom
    return any(s.algorithms or s.paths or s.nics_used is not None or (s.pcie_switch and s.rings)
               for s in parts.nccl_said)  # fmt: skip
