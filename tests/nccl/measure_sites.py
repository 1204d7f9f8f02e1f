"""Measure `nccl-log` on every message site of the catalogue, not on a corpus of logs.

    python tests/nccl/measure_sites.py [--list VERDICT] [--source nccl]

Each WARN (and torch's and the linker's ERROR) of ``topodoctor/nccl/data/messages.json`` is rendered
as a log would show it: the format with plausible values (an errno text that states no cause, a
device, an interface, small numbers), NCCL's prefix ``host:pid:tid [rank] file:line NCCL WARN ...``.
Three logs per site:

- ``failed``: the WARN, NCCLCHECK's trail up to init.cc and torch's ``NCCL error in: ..., <class>,
  NCCL version X`` with the WARN after ``Last error:`` (the class the site returns);
- ``bare``: the WARN and the trail up to init.cc, no version anywhere (a paste of the failing lines);
- ``went-on`` (sites whose source goes on after the WARN): the banner, the WARN and training steps.

Verdicts of a failing log: ``named`` (an error finding with a class, one cause), ``candidates`` (cause
not found, or a class, with the candidates ranked), ``not-found`` (cause not found, no candidates),
``missed`` (exit 0 on a failure), ``suspect`` (one cause of a class that no site of this message's
files raises: read by hand, it is either a class the words state or a confidently wrong answer). A
``went-on`` log is ``quiet`` (exit 0) or ``loud``.

A script, not a test: it prints the counts per verdict and per source file area; exit 0."""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator

from topodoctor.nccl.catalogue import Entry, entries
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

NOT_FOUND = ("TD049", "TD052")
PREFIX = "gpu-node-1:2741:2803 [0]"
# NCCL's result of each return the catalogue records, as torch names its class (init.cc's ncclGetErrorString)
TORCH_CLASS = {
    "ncclSystemError": ("unhandled system error", "System call (e.g. socket, malloc) or external library call failed"),
    "ncclInternalError": ("internal error", "Internal check failed."),
    "ncclInvalidUsage": ("invalid usage", "This usually reflects invalid usage of NCCL library."),
    "ncclInvalidArgument": ("invalid argument", "Invalid value for an argument."),
    "ncclUnhandledCudaError": ("unhandled cuda error", "Call to CUDA function failed."),
    "ncclRemoteError": (
        "remote process exited or there was a network error",
        "A call failed possibly due to a network error or a remote process exiting prematurely.",
    ),
}
RESULT_CODE = {
    "ncclUnhandledCudaError": 1,
    "ncclSystemError": 2,
    "ncclInternalError": 3,
    "ncclInvalidArgument": 4,
    "ncclInvalidUsage": 5,
    "ncclRemoteError": 6,
}
# a class's builder may give a sibling code from the evidence: a reverse path without a topology file is the
# topology detection's (TD071), not the file's (TD069)
ALSO = {"TD069": {"TD071"}}
_CONV = re.compile(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?([diouxXsfgcp%])")
_ERRNO_BEFORE = re.compile(r"(?i)(?:error|errno|failed|failure|reason|strerror|:)\s*[:=(]?\s*$")


def _value(fmt: str, m: re.Match[str]) -> str:
    """A plausible value for one conversion, from the words before it."""
    conv = m.group(1)
    before = fmt[: m.start()]
    if conv == "%":
        return "%"
    if conv == "p":
        return "0x7f3a2c000000"
    if conv in "xX":
        return "1f"
    if conv in "fg":
        return "1.5"
    if conv == "c":
        return "x"
    if conv != "s":
        return "1"
    tail = before[-24:].lower()
    if re.search(r"call to\s*$", tail) or tail.endswith("ibv_"):
        return "ibv_modify_qp" if not tail.endswith("ibv_") else "modify_qp"
    if re.search(r"(?:dev(?:ice)?|hca|net/ib\s*:?)\s*:?\s*$", tail) or re.search(r"net/ib\s*:\s*$", tail):
        return "mlx5_0"
    if re.search(r"(?:interface|ifname|if)\s*:?\s*$", tail):
        return "eth0"
    if re.search(r"(?:address|addr|to|from|peer)\s*:?\s*$", tail):
        return "10.0.0.2<43521>"
    if re.search(r"(?:file|path|segment|name)\s*:?\s*'?$", tail):
        return "/dev/shm/nccl-Ab12Cd"
    if re.search(r"status\s*=\s*$", tail):
        return "12"
    if _ERRNO_BEFORE.search(before):
        return "Input/output error"  # EIO: an errno text that states no cause of its own
    return "AllReduce"


# torch's messages with the values torch prints in them (ProcessGroupNCCL, ProcessGroupWrapper, the flight recorder)
TORCH_SAMPLES = {
    "Collectives differ": "Detected mismatch between collectives on ranks. Rank 0 is running collective: "
    "CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[1024], TensorDtypes=Float), but Rank 1 "
    "is running collective: CollectiveFingerPrint(SequenceNumber=12, OpType=BROADCAST, TensorShape=[1024], "
    "TensorDtypes=Float). Collectives differ in the following aspects:   Op type: ALLREDUCEvs BROADCAST",
    "Error type:": "Error type: COLLECTIVE_TYPE_MISMATCH, Expected collective type allreduce but got broadcast",
    "NCCL error in:": "NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system error "
    "(run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
    "Process group watchdog": "[PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with "
    "exception: NCCL error: remote process exited or there was a network error, NCCL version 2.21.5",
    "Last error:": "Last error:\nsocketProgress: Connection closed by remote peer gpu-node-2<45120>",
}


def render(fmt: str) -> str:
    """The format as a log shows it."""
    return _CONV.sub(lambda m: _value(fmt, m), fmt).replace("\\n", " ").strip()


def _warn(e: Entry, msg: str) -> str:
    where = f"{e.files[0]}:{411 if e.files else 0}" if e.files else "init.cc:411"
    return f"{PREFIX} {where} NCCL WARN {msg}"


def _returns(e: Entry) -> str:
    return next((r for r in e.returns if r in TORCH_CLASS), "ncclSystemError")


def logs(e: Entry) -> Iterator[tuple[str, str]]:
    """The logs of one site: (variant, text)."""
    msg = render(e.format)
    version = e.versions[-1].split("..")[-1]
    if e.source in ("torch", "ld.so"):
        msg = next((v for k, v in TORCH_SAMPLES.items() if e.format.startswith(k)), msg)
        yield "failed", f'[rank0]: Traceback (most recent call last):\n[rank0]:   File "train.py", line 3\n{msg}\n'
        return
    ret = _returns(e)
    cls, words = TORCH_CLASS[ret]
    code = RESULT_CODE[ret]
    trail = f"{PREFIX} NCCL INFO init.cc:1753 -> {code}\n{PREFIX} NCCL INFO init.cc:1802 -> {code} [Async thread]\n"
    warn = _warn(e, msg)
    if e.source != "nccl":
        version = "2.23.4"
    torch = (
        "[rank0]: Traceback (most recent call last):\n"
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: "
        "../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
        f"{cls}, NCCL version {version}\n[rank0]: nccl{ret[4:]}: {words}\n[rank0]: Last error:\n[rank0]: {msg}\n"
    )
    yield "failed", f"{warn}\n{trail}{torch}"
    yield "bare", f"{warn}\n{trail}"
    if not e.fatal:
        steps = "".join(f"step {i} loss 2.{i}\n" for i in range(1, 4))
        yield "went-on", f"{PREFIX} NCCL INFO NCCL version {version}+cuda12.4\n{warn}\n{steps}"


def codes_by_file() -> dict[str, set[str]]:
    """The finding codes each source file's messages carry in the catalogue."""
    out: dict[str, set[str]] = defaultdict(set)
    for e in entries():
        if e.code:
            for f in e.files:
                out[f].add(e.code)
    return out


def verdict(e: Entry, variant: str, text: str, by_file: dict[str, set[str]]) -> tuple[str, str]:
    """One log's verdict and the lead finding in a phrase."""
    found = explain([parse_file("site.log", text)])
    errors = [f for f in found if f.severity in ("error", "critical")]
    if variant == "went-on":
        return ("loud" if errors else "quiet"), (f"{errors[0].code}: {errors[0].message[:80]}" if errors else "")
    if not errors:
        return "missed", (f"{found[0].code} {found[0].severity}" if found else "no finding")
    lead = errors[0]
    cause = lead.evidence.get("cause")
    ranked = "candidates" in lead.evidence or (isinstance(cause, dict) and cause.get("confidence") == "candidates")
    said = f"{lead.code}: {lead.message[:100]}"
    if lead.code in NOT_FOUND or lead.code == "TD083":
        if lead.code == "TD083":
            return "named", said
        listed = ranked or "bug_candidates" in lead.evidence or "likely_causes" in lead.evidence
        return ("candidates" if listed else "not-found"), said
    if ranked:
        return "candidates", said
    known = set().union(*(by_file.get(f, set()) for f in e.files)) if e.files else set()
    known |= ALSO.get(e.code, set())
    if e.code and lead.code != e.code and lead.code not in known:
        return "suspect", said
    if not e.code and lead.code not in known and e.source in ("nccl", "aws-ofi-nccl", "nccl-rdma-sharp-plugins"):
        return "suspect", said
    return "named", said


def _area(e: Entry) -> str:
    if e.source != "nccl":
        return e.source
    f = e.files[0] if e.files else "?"
    return f.split("/")[0] + "/" if "/" in f and not f.startswith(("misc/", "include/")) else f


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--list", default="", help="print the sites of this verdict")
    p.add_argument("--source", default="", help="only this source (nccl, aws-ofi-nccl, ...)")
    p.add_argument("--variant", default="", help="with --list: only this variant")
    a = p.parse_args(argv)
    by_file = codes_by_file()
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    areas: dict[str, Counter[str]] = defaultdict(Counter)
    sites = [e for e in entries() if e.level in ("WARN", "ERROR") and (not a.source or e.source == a.source)]
    for e in sites:
        for variant, text in logs(e):
            v, said = verdict(e, variant, text, by_file)
            key = f"{variant}/{'error' if e.fatal or e.level == 'ERROR' else 'warning'}"
            counts[key][v] += 1
            if variant == "failed" and e.fatal:
                areas[_area(e)][v] += 1
            if a.list and v == a.list and (not a.variant or a.variant == variant):
                print(
                    f"{variant:8} {e.source[:5]} {e.files[0] if e.files else '-':32} "
                    f"{render(e.format)[:90]!r} -> {said}"
                )
    print(f"{len(sites)} sites")
    for key in sorted(counts):
        c = counts[key]
        print(f"  {key:16} {sum(c.values()):5}: " + ", ".join(f"{n} {v}" for v, n in c.most_common()))
    print("failed/error by area:")
    for area, c in sorted(areas.items(), key=lambda t: -sum(t[1].values())):
        print(f"  {area:28} {sum(c.values()):4}: " + ", ".join(f"{n} {v}" for v, n in c.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
