"""The catalogue of messages (data/messages.json, written by fixtures/nccl_messages_extract.py
from NCCL's and aws-ofi-nccl's sources at every release tag, plus torch's and the dynamic
linker's): each message's format, the files and functions that print it, the versions that do,
what the code returns right after it (NCCL's own verdict: an error, or it goes on) and its class.
Read lazily, once, on the first message no narrower reading knew. Text in, an ``Entry`` out.

A message is matched without regard to case (NCCL changed "no algorithm" to "No algorithm" and
back between versions) and with its conversions as wildcards."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

from topodoctor.nccl.classify import Reading

# The finding code of each classify kind, as its builder gives it in the common case (a builder may
# pick another from the evidence: TD052 for a CUDA 'invalid argument' without its file)
KIND_CODE = {
    "net-plugin": "TD040",
    "net-plugin-broken": "TD099",
    "socket-ifname": "TD041",
    "duplicate-gpu": "TD042",
    "shm-full": "TD043",
    "cuda-driver": "TD044",
    "ib-status-12": "TD045",
    "peer-lost": "TD046",
    "watchdog-timeout": "TD047",
    "watchdog-stuck": "TD047",
    "watchdog-stack": "TD047",
    "version-mismatch": "TD048",
    "nccl-error": "TD052",
    "shm-create": "TD043",
    "secondary": "",
    "nvls": "TD053",
    "fabric-not-ready": "TD054",
    "p2p-unsupported": "TD055",
    "shm-register": "TD056",
    "cuda-failure": "TD057",
    "gpu-oom": "TD058",
    "rem-allocator": "TD059",
    "kernel-image": "TD060",
    "ib-memlock": "TD061",
    "ib-dmabuf": "TD062",
    "ib-device": "TD063",
    "ib-qp-connect": "TD064",
    "ib-verbs": "TD065",
    "ib-status-4": "TD066",
    "ib-status-5": "TD067",
    "ib-status-remote": "TD068",
    "topo-attr": "TD069",
    "topo-reverse": "TD069",
    "graph-file": "TD070",
    "topo-sysfs": "TD071",
    "connect": "TD072",
    "store": "TD072",
    "store-host": "TD072",
    "collective-mismatch": "TD073",
    "shm-attach": "TD074",
    "diag": "TD076",
    "invalid-setting": "TD077",
    "graph-capture": "TD077",
    "nvml": "TD078",
    "wrong-results": "TD079",
    "invalid-rank": "TD080",
    "invalid-argument": "TD089",
    "invalid-usage": "TD095",
    "mnnvl": "TD093",
    "sharp": "TD957",
    "ib-device-skipped": "TD081",
    "nvshmem-not-mlx5": "TD106",
    "ib-async-fatal": "TD107",
    "shm-permission": "TD082",
    "ofi": "TD084",
    "ofi-fallback": "TD108",
    "separate-tests": "TD109",
    "proxy-teardown": "TD075",
    "net-peer-gone": "TD092",
    "efa-memlock": "TD061",
    "bad-address": "TD041",
    "torch-mismatch": "TD073",
    "nccl-library": "TD085",
    "subnet": "TD086",
    "graph-search": "TD052",
    "cumem-host": "TD087",
    "cuda-compat": "TD097",
    "process-crash": "TD098",
    "cuda-interposer": "TD958",
    "run-stalled": "TD959",
    "said-failed": "TD049",
    "framework-p2p": "TD055",
    "tests-stopped": "TD960",
    "torch-usage": "TD096",
}
# the sources whose messages NCCL's own logger prints (``NCCL WARN ...``)
_PRINTED_BY_NCCL = ("nccl", "aws-ofi-nccl", "nccl-rdma-sharp-plugins")
_MIN_LITERAL = 10  # a format of less fixed text ("%s", "Error : %s") would match any line


def code_of_kind(kind: str) -> str:
    """The finding code of a classify kind; "" for no kind (a message no class covers)."""
    return KIND_CODE.get(kind, "") if kind else ""


@dataclass(frozen=True)
class Entry:
    """One message of the catalogue."""

    source: str  # nccl, aws-ofi-nccl, nccl-rdma-sharp-plugins, torch, ld.so
    level: str  # WARN, INFO, ERROR
    format: str
    files: tuple[str, ...]
    functions: tuple[str, ...]
    versions: tuple[str, ...]  # runs of consecutive release tags: 2.19.1..2.30.7
    returns: tuple[str, ...]  # what the code returns after it: ncclSystemError, "error" (a goto), none
    kind: str  # the classify kind, "" when no class covers it
    code: str
    severity: str  # error: the source fails after it; warning: it goes on; info

    @property
    def fatal(self) -> bool:
        """The source returns an error right after printing it."""
        return bool(self.returns)

    def span(self) -> str:
        """The versions that print it, as a range: ``2.19.3 - 2.30.7`` (``2.19.3`` alone; torch's and
        the linker's as written)."""
        first, last = self.versions[0].split("..")[0], self.versions[-1].split("..")[-1]
        return first if first == last else f"{first} - {last}"


def _pattern(fmt: str) -> re.Pattern[str]:
    parts = re.split(r"(%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?[diouxXsfgcp%])", fmt)
    out = []
    for i, p in enumerate(parts):
        if i % 2 == 0:
            lead, trail = (r"\s*" if p[:1].isspace() else ""), (r"\s*" if p[-1:].isspace() else "")
            out.append(lead + r"\s*".join(re.escape(w) for w in p.split()) + trail if p.strip() else lead)
        else:
            out.append("%" if p.endswith("%") else (r".*?" if p.endswith("s") else r"\S*?"))
    return re.compile("".join(out), re.IGNORECASE)


def _literal(fmt: str) -> str:
    return max(re.split(r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t)?[diouxXsfgcp%]", fmt), key=len).strip().lower()


@cache
def _doc() -> dict[str, object]:
    text = resources.files("topodoctor.nccl").joinpath("data/messages.json").read_text(encoding="utf-8")
    doc: dict[str, object] = json.loads(text)
    return doc


def cuda_calls_at(site: str) -> dict[str, tuple[str, ...]]:
    """The CUDA call NCCL checks at ``file:line`` (``transport/p2p.cc:298``), by the versions that
    make it there: {"cudaIpcOpenMemHandle": ("2.24.3..2.26.6",)}; {} for a line no check is on."""
    calls = _doc()["cuda_calls"]
    assert isinstance(calls, dict)
    return {call: tuple(runs) for call, runs in calls.get(site.removeprefix("src/"), {}).items()}


@cache
def entries() -> tuple[Entry, ...]:
    """Every message of the catalogue (read once)."""
    raw = _doc()["entries"]
    assert isinstance(raw, list)
    return tuple(
        Entry(
            str(e["source"]),
            str(e["level"]),
            str(e["format"]),
            tuple(e["files"]),
            tuple(e["functions"]),
            tuple(e["versions"]),
            tuple(e["returns"]),
            str(e["class"]),
            str(e["code"]),
            str(e["severity"]),
        )
        for e in raw
    )


_WORD = re.compile(r"[a-z][a-z_]{3,}")


@cache
def _index() -> dict[str, tuple[tuple[int, str, re.Pattern[str], Entry], ...]]:
    """The WARN entries by the longest word of their fixed text (a message holds that word), each
    with its order: the longer the fixed text, the narrower the message, the earlier it is tried."""
    rows = [(_literal(e.format), e) for e in entries() if e.source in _PRINTED_BY_NCCL and e.level == "WARN"]
    rows.sort(key=lambda r: -len(r[0]))
    index: dict[str, list[tuple[int, str, re.Pattern[str], Entry]]] = {}
    for order, (lit, e) in enumerate(rows):
        words = _WORD.findall(lit)
        if len(lit) >= _MIN_LITERAL and words:
            index.setdefault(max(words, key=len), []).append((order, lit, _pattern(e.format), e))
    return {w: tuple(v) for w, v in index.items()}


@lru_cache(maxsize=4096)  # a failing job repeats its message per rank and per retry
def lookup(message: str) -> Entry | None:
    """The catalogue's WARN entry of one NCCL (or NET plugin) message, as printed after ``WARN``;
    None when no WARN of the sources reads so."""
    low = message.lower()
    index = _index()
    found = sorted(r for w in set(_WORD.findall(low)) for r in index.get(w, ()))
    return next((e for _, lit, pat, e in found if lit in low and pat.search(message)), None)


# The classes whose message is the failure when nothing after it shows the run went on; in a run
# that went on they are an info finding like any WARN (a plugin that failed and NCCL fell back)
FATAL_KINDS = frozenset(
    ("graph-search", "invalid-setting", "ofi", "subnet", "cumem-host", "net-peer-gone", "nvshmem-not-mlx5",
     "ib-async-fatal")
)  # fmt: skip
SOFT_KINDS = frozenset(("graph-search", "ofi", "subnet", "nvshmem-not-mlx5", "ib-async-fatal"))


def area_kind(source: str, files: tuple[str, ...], fatal: bool) -> str:
    """The class of a message no narrower reading covers, from where its source prints it: a
    failing aws-ofi-nccl call is the plugin's (``ofi``), a failing graph/ step the topology
    search's (``graph-search``); "" for any other."""
    if not fatal:
        return ""
    if source == "aws-ofi-nccl":
        return "ofi"
    if source == "nccl" and files and all(f.startswith("graph/") for f in files):
        return "graph-search"
    return ""


def from_sources(message: str) -> Reading | None:
    """The reading of a message only the catalogue knows: its area's class, where it has one."""
    e = lookup(message)
    if e is None or e.kind not in ("ofi", "graph-search"):
        return None
    what = message.split("NET/OFI", 1)[-1].strip() if e.kind == "ofi" else message.strip()
    return Reading(e.kind, {"what": what[:160], "area": "1"} | sourced(message, e))


def sourced(message: str, entry: Entry | None = None) -> dict[str, str]:
    """What NCCL's sources say of a message: the file and function that print it, what the code
    returns after it (``fatal`` when an error), the versions that print it; {} when unknown."""
    e = entry or lookup(message)
    if e is None:
        return {}
    site = f"{e.files[0]} {e.functions[0]}" if e.functions else e.files[0]
    out = {"site": site, "span": e.span(), "source_of": e.source}
    if e.fatal:
        out |= {"fatal": "1", "returns": "/".join(e.returns)}
    return out
