"""Any program's NCCL output as plain data: one ``LogFile`` per file, the lines that matter as
``Event``s. Text in, data out; nothing here reads a file or judges.

A file may be one rank's ``NCCL_DEBUG_FILE``, a job's stderr holding every rank (torch prefixes
its own lines ``[rank3]:``), or nccl-tests' output. NCCL_DEBUG decides how much NCCL says:

- unset: nothing from NCCL itself; torch's exception carries ``ncclGetLastError()`` after
  ``Last error:`` (recent torch) or only the error class ("invalid usage (run with NCCL_DEBUG=WARN
  for details)").
- WARN: ``NCCL version 2.28.9+cuda13.0`` once per process and the ``NCCL WARN`` lines.
- INFO: all of it (``measure/collectives/nccl_log.py`` reads transports and channels from it).

The failure lines (NCCL 2.18 - 2.28, torch 2.x wording; NCCL's ``src/`` names where each is
printed) are in ``PATTERNS``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from topodoctor.model.collectives import NcclAccount
from topodoctor.nccllog.account import account
from topodoctor.nccllog.choices import Choices, parse_choices

Level = Literal["unset", "VERSION", "WARN", "INFO"]
MAX_EVENTS_PER_KIND = 20  # a hung job repeats its error per rank and per retry; the first few say it

# (kind, pattern): the first pattern a line matches names its event. Order matters where two
# could match one line (the watchdog's timeout line also names WorkNCCL).
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # plugin/net.cc: no network plugin (NCCL_NET=IB with no IB device, a plugin that failed)
    ("net-plugin", re.compile(r"Failed to initialize any NET plugin|Error: network (\S+) not found")),
    # transport/net_ib: no RDMA device; NCCL then takes sockets unless NCCL_NET insists
    ("ib-no-device", re.compile(r"NET/IB ?: No device found")),
    # bootstrap.cc / misc/socket.cc: NCCL_SOCKET_IFNAME matched nothing
    ("no-socket-interface", re.compile(r"no socket interface found|No usable listening interface found")),
    # init.cc: two ranks of one host on one GPU
    (
        "duplicate-gpu",
        re.compile(
            r"Duplicate GPU detected : rank (\d+) and rank (\d+) both on CUDA device (\w+)"
            r"|Multiple Ranks are using the same GPU"
        ),
    ),
    # misc/shmutils.cc (2.18 - 2.29; os/linux.cc after): /dev/shm full or too small (a container's 64 MB); the
    # fallocate or mkstemp that failed comes first, then the segment's summary line
    (
        "shm",
        re.compile(
            r"Error while (creating|attaching to) shared memory segment (\S+) \(size (\d+)\)(?:, error: ([^(]*))?"
            r"|unable to allocate shared memory"
        ),
    ),
    ("shm", re.compile(r"Error: failed to (extend) (\S+) to (\d+) bytes, error: ([^(]*)")),
    ("shm", re.compile(r"Error: failed to (create) shared memory file (\S+)(), error ([^(]*)")),
    # CUDA: a driver older than the runtime NCCL / torch were built for
    (
        "cuda-driver",
        re.compile(
            r"CUDA driver version is insufficient for CUDA runtime version|driver on your system is too old"
            r"|cudaErrorInsufficientDriver"
        ),
    ),
    # transport/net_ib/p2p.cc (2.28) and net_ib.cc (earlier): a work completion with an error status
    (
        "ib-completion",
        re.compile(r"Got completion from peer (\S+) with (?:status=([^(]*)\((\d+)\)|error (\d+))"),
    ),
    # torch's watchdog: a collective that did not finish within the process group's timeout
    (
        "watchdog-timeout",
        re.compile(
            r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)[^)]*?Timeout\(ms\)=(\d+)\) ran for (\d+) milliseconds "
            r"before timing out"
        ),
    ),
    # init.cc: peers that loaded different NCCL builds
    (
        "version-mismatch",
        re.compile(r"Mismatched NCCL version detected : rank (\d+) version (\d+) rank (\d+) version (\d+)"),
    ),
    # misc/socket.cc, init.cc (ncclRemoteError): the other end went away
    (
        "peer-lost",
        re.compile(
            r"Connection closed by remote peer (\S+)|remote process exited or there was a network error"
            r"|Connection reset by peer|Socket recv failed"
        ),
    ),
    # torch's exception: the error class (init.cc's ncclGetErrorString) and the version
    ("nccl-error", re.compile(r"NCCL error(?: in: \S+,|:) (.+?)(?:, NCCL version (\S+))?$")),
    # nccl-tests: "Test NCCL failure common.cu:1234 'invalid usage (run with NCCL_DEBUG=WARN for details)'"
    ("nccl-error", re.compile(r"Test NCCL failure \S+ '(.+?)'()")),
    ("warn", re.compile(r"NCCL WARN (.*)$")),
)
_ANY = re.compile("|".join(f"(?:{p.pattern})" for _, p in PATTERNS))
_VERSION_LINE = re.compile(r"(?:NCCL INFO |^|\] )NCCL version (\d+\.\d+\.\d+\S*)")
_TORCH_RANK = re.compile(r"^\[rank(\d+)\]:")
_INIT_RANK = re.compile(r"ncclCommInit\w* comm 0x[0-9a-f]+ rank (\d+) nranks (\d+)")
_NCCL_PREFIX = re.compile(r"^(\S+):(\d+):(\d+) \[(-?\d+)\] NCCL (INFO|WARN)")  # host:pid:tid [dev]
_FILE_RANK = re.compile(r"(?:rank|nccl[._-])(\d+)(?:\.\w+)?$")
_LAST_ERROR = "Last error:"
_NT_LIBRARY = re.compile(r"^# nccl-tests version \S+ .*nccl-library=(\d+)")
_NT_RANK = re.compile(r"^#\s+Rank\s+(\d+) Group\s+\d+ Pid\s+\d+ on\s+(\S+) device")
_SET_TO = re.compile(r"NCCL INFO (NCCL_\w+) set (?:by environment )?to (.*?)\.?\s*$")


@dataclass(frozen=True)
class Event:
    """A line that says something went wrong (or, ``ib-no-device``, may go wrong)."""

    kind: str
    file: str
    line_no: int  # 1-based
    text: str  # the line, trimmed to 300 characters
    groups: tuple[str | None, ...] = ()  # the pattern's groups
    rank: int | None = None


@dataclass(frozen=True)
class LogFile:
    """What one file says."""

    name: str
    level: Level  # how much NCCL said: the most verbose kind of line seen
    versions: tuple[str, ...]  # NCCL versions named (banners and torch's error text)
    ranks: tuple[int, ...]  # ranks the file speaks for
    hosts: tuple[str, ...]  # hosts in NCCL's line prefix (host:pid:tid)
    events: tuple[Event, ...]
    last_errors: tuple[str, ...]  # what followed torch's "Last error:" ("" when NCCL left none)
    env: dict[str, str] = field(default_factory=dict)  # NCCL_* NCCL reported as set (INFO)
    account: NcclAccount | None = None  # transports, channels, nodes (INFO)
    choices: Choices | None = None  # cost table, graphs, per-call algorithms (INFO + TUNING)
    nccl_tests: bool = False  # nccl-tests' own output (its "# nThread" header)


def _file_rank(name: str) -> int | None:
    stem = name.rsplit("/", 1)[-1]
    m = _FILE_RANK.search(stem.rsplit(".", 1)[0] if stem.count(".") > 1 else stem)
    return int(m.group(1)) if m else None


def parse_file(name: str, text: str) -> LogFile:
    """One file's NCCL output."""
    lines = text.splitlines()
    level: Level = "unset"
    versions: dict[str, None] = {}
    ranks: dict[int, None] = {}
    hosts: dict[str, None] = {}
    events: list[Event] = []
    per_kind: dict[str, int] = {}
    last_errors: list[str] = []
    env: dict[str, str] = {}
    order = {"unset": 0, "VERSION": 1, "WARN": 2, "INFO": 3}
    file_rank = _file_rank(name)
    if file_rank is not None:
        ranks[file_rank] = None
    for i, raw in enumerate(lines):
        line = raw.rstrip()
        seen: Level = "unset"
        if m := _NCCL_PREFIX.search(line):
            hosts[m.group(1)] = None
            seen = "INFO" if m.group(5) == "INFO" else "WARN"
        elif "NCCL WARN" in line:
            seen = "WARN"
        if m := _VERSION_LINE.search(line):
            versions[m.group(1)] = None
            if seen == "unset":
                seen = "VERSION"
        if order[seen] > order[level]:
            level = seen
        rank = file_rank
        if m := _TORCH_RANK.search(line):
            rank = int(m.group(1))
            ranks[rank] = None
        if seen != "unset":
            if m := _INIT_RANK.search(line):
                ranks[int(m.group(1))] = None
            if m := _SET_TO.search(line):
                env[m.group(1)] = m.group(2)
        if line.startswith("#"):
            if m := _NT_LIBRARY.search(line):
                n = int(m.group(1))
                versions[f"{n // 10000}.{n // 100 % 100}.{n % 100}"] = None
            if m := _NT_RANK.search(line):
                ranks[int(m.group(1))] = None
                hosts[m.group(2)] = None
        if line.strip() == _LAST_ERROR:
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            # an empty "Last error:" is followed by torch's next message, not NCCL's reason
            last_errors.append("" if not nxt or nxt.startswith(("[", "Exception raised", "frame #")) else nxt[:300])
        if not _ANY.search(line):  # one pass over the line: most of a job's log is not NCCL's
            continue
        for kind, pat in PATTERNS:
            if m := pat.search(line):
                per_kind[kind] = per_kind.get(kind, 0) + 1
                if per_kind[kind] <= MAX_EVENTS_PER_KIND:
                    events.append(Event(kind, name, i + 1, line.strip()[:300], m.groups(), rank))
                if kind == "nccl-error" and m.group(2):
                    versions.setdefault(m.group(2), None)
                break
    nccl_lines = [ln for ln in lines if "NCCL" in ln]
    info = level == "INFO"
    return LogFile(
        name=name,
        level=level,
        versions=tuple(_dedupe_versions(versions)),
        ranks=tuple(sorted(ranks)),
        hosts=tuple(hosts),
        events=tuple(events),
        last_errors=tuple(last_errors),
        env=env,
        account=account(["\n".join(nccl_lines)]) if info else None,
        choices=parse_choices(nccl_lines) if info else None,
        nccl_tests=any(ln.startswith("# nThread") for ln in lines[:40]),
    )


def _dedupe_versions(found: dict[str, None]) -> list[str]:
    """``2.28.9`` (torch's error text) and ``2.28.9+cuda13.0`` (NCCL's banner) are one version."""
    full = list(found)
    return [v for v in full if not any(o != v and o.startswith(v + "+") for o in full)]
