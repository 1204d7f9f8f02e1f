"""Any program's NCCL output as plain data: one ``LogFile`` per file, the lines that matter as
``Event``s. Text in, data out; nothing here reads a file or judges.

A file may be one rank's ``NCCL_DEBUG_FILE``, a job's stderr holding every rank (torch prefixes
its lines ``[rank3]:``, mpirun ``[1,3]<stdout>:``, Ray ``(RayWorker pid=..., ip=...)``, pdsh and
srun ``host: `` / ``0: ``, many add a timestamp), or nccl-tests' output. NCCL's own structure is
found wherever it sits in the line: ``host:pid:tid [dev] file.cc:line NCCL WARN msg`` (before
2.5 without ``NCCL``, 1.x ``WARN file.cu:line msg``), the return-code trail ``NCCL INFO
file.cc:line -> N [Async thread]`` (include/checks.h's NCCLCHECK), torch's ``NCCL error ... Last
error:`` block and nccl-tests' ``Test NCCL/CUDA failure``. What a message means is
``nccl.classify``'s part (then the catalogue's); how the run ended, ``nccl.outcome``'s.

NCCL_DEBUG decides how much NCCL says: unset, only the framework's error (and ``Last error:``);
WARN, the version banner and the WARN lines; INFO, all of it (transports, channels, the trail).
"""

from __future__ import annotations

import re

from topodoctor.nccl.account import account
from topodoctor.nccl.choices import parse_choices
from topodoctor.nccl.classify import CONSEQUENCE, ROOT, Reading, classify
from topodoctor.nccl.continuation import ends_in_trail, wrapped
from topodoctor.nccl.grammar import ANSI as _ANSI
from topodoctor.nccl.grammar import ASSIGNED as _ASSIGNED
from topodoctor.nccl.grammar import BARE_OK as _BARE_OK
from topodoctor.nccl.grammar import DIAG as _DIAG
from topodoctor.nccl.grammar import IB_DEV as _IB_DEV
from topodoctor.nccl.grammar import IB_USING as _IB_USING
from topodoctor.nccl.grammar import INIT_RANK as _INIT_RANK
from topodoctor.nccl.grammar import OLD_INFO as _OLD_INFO
from topodoctor.nccl.grammar import OLD_WARN as _OLD_WARN
from topodoctor.nccl.grammar import SET_TO as _SET_TO
from topodoctor.nccl.grammar import SOCK_IF as _SOCK_IF
from topodoctor.nccl.grammar import SOCK_USING as _SOCK_USING
from topodoctor.nccl.grammar import TOPO_FILE as _TOPO_FILE
from topodoctor.nccl.grammar import TRAIL as _TRAIL
from topodoctor.nccl.grammar import V1_WARN as _V1_WARN
from topodoctor.nccl.grammar import VERSION as _VERSION
from topodoctor.nccl.grammar import VERSION_TAIL as _VERSION_TAIL
from topodoctor.nccl.grammar import VERSION_WRAPPED as _WRAPPED
from topodoctor.nccl.grammar import WARN as _WARN
from topodoctor.nccl.info_signs import read_signs
from topodoctor.nccl.logfile import Event, Level, LogFile, dedupe_versions
from topodoctor.nccl.outcome import Outcome

__all__ = ["Event", "LogFile", "parse_file"]
MAX_EVENTS_PER_KIND = 20  # a hung job repeats its error per rank and per retry; the first few say it
# where a trail means the call failed all the way up: the init / group thread, a proxy thread
_TOP_TAGS = ("Async thread", "Proxy Thread", "Progress Thread", "Proxy Service", "bthread")
_TOP_SRC = re.compile(r"(?:^|/)(?:init|group|enqueue|collectives)\.(?:cc|cu)$")
_TORCH_ERROR = re.compile(
    r"NCCL [Ee]rror(?: in: \S+,| \d+:|:) (?P<cls>[a-z][a-z ]*[a-z])(?=\s*\(run with|,|\.?\s*$)"
    r"(?:.*?NCCL version (?P<v>\d+\.\d+\.\d+\S*))?"
)
_NCCL_RESULT = re.compile(r"\bnccl(?P<cls>UnhandledCuda|System|Internal|InvalidArgument|InvalidUsage|Remote)Error\b")
_LAST_ERROR = re.compile(r"(?:Last error:|Original reason for failure was:)\s*(?P<rest>.*)$")
# any framework's words for NCCL's error class (horovod "ncclCommInitRank failed: ...", XLA "NCCL operation ...
# failed: ...", TensorFlow "NCCL failure: ..."): a failed call even without torch's header
_NCCL_CLASS = re.compile(
    r"(?i)nccl.*?\b(?P<cls>unhandled cuda error|unhandled system error|internal error|invalid usage"
    r"|remote process exited or there was a network error)"
)
# torch's c10d store, which carries NCCL's unique id, failed: rank 0 (the store) died or is unreachable
_STORE = re.compile(r"retrieving ncclUniqueId from \[\d+\] via c10d key-value store.*?got error: (?P<err>.+)$")
# what follows an empty "Last error:": torch's own next message (glog [W1125 ...], a traceback)
_NOT_REASON = re.compile(r"\s*(?:\[rank|\[[WEIF]\d{4}|Exception raised|frame #|Traceback|\s*File \")")
# torch's own CUDA check (c10_cuda_check_implementation) raised in a rank or in the NCCL watchdog:
# "RuntimeError: CUDA error: ...", "what():  CUDA error: ...", "terminated with exception: CUDA error: ..."
_TORCH_CUDA = re.compile(
    r"(?:[Ee]xception|Error|what\(\)):\s+CUDA error: (?P<msg>.+?)\.?(?=\s*(?:CUDA kernel errors|Compile with|$))"
)
# the watchdog's next line names the process group of the work that timed out
_WATCHDOG_PG = re.compile(r"\[PG (?:ID )?(?P<pg>\S+)[^\]]*?Rank (?P<rank>\d+)\] Exception .*? at work: (?P<seq>\d+)")
# (the next line " .. host pid N: Test failure common.cu:891" may be pasted onto it)
_TEST_FAIL = re.compile(
    r"(?:Test )?(?P<what>NCCL|CUDA|Cuda) failure (?P<where>\S+:\d+) '(?P<text>[^\n]*?)'?"
    r"(?:\s+\.\. \S+ pid \d+: .*)?\s*$"
)
_TEST_ABORT = re.compile(r"Test failure \S+:\d+")
_TORCH_RANK = re.compile(r"\[rank(\d+)\]:")
_FILE_RANK = re.compile(r"(?:rank|nccl[._-])(\d+)(?:\.\w+)?$")
_NT_LIBRARY = re.compile(r"^# nccl-tests version \S+ .*nccl-library=(\d+)|^# NCCL Tests compiled with NCCL (\d+\.\d+)")
_NT_RANK = re.compile(r"^#\s+Rank\s+(\d+) Group\s+\d+ Pid\s+\d+ on\s+(\S+) device")
_GPU_NAME = re.compile(r"NVIDIA (?:GeForce|RTX|TITAN|Quadro)[\w -]*?(?=\s*$|\s{2}|\)|,)")
_PROGRESS = re.compile(
    r"(?i)\b(?:epoch|step|iter(?:ation)?)\b\s*[:=\[]?\s*\d|\bloss(?: is)?\s*[:=]?\s*-?[\d.]"
    r"|\d\s*(?:it|samples|tokens)/s\b|^\s*\d+\s+\d+\s+\w+\s+\w+\s+-?\d+\s+[\d.]+\s+[\d.]+"
    r"|# Avg bus bandwidth"
)


def _file_rank(name: str) -> int | None:
    stem = name.rsplit("/", 1)[-1]
    m = _FILE_RANK.search(stem.rsplit(".", 1)[0] if stem.count(".") > 1 else stem)
    return int(m.group(1)) if m else None


class _Reader:
    """One pass over a file's lines, gathering what ``LogFile`` holds."""

    def __init__(self, name: str, lines: list[str]) -> None:
        self.name, self.lines = name, lines
        self.level: Level = "unset"
        self.versions: dict[str, None] = {}
        self.ranks: dict[int, None] = {}
        self.hosts: dict[str, None] = {}
        self.events: list[Event] = []
        self.per_kind: dict[str, int] = {}
        self.last_errors: list[str] = []
        self.env: dict[str, str] = {}
        self.shown: dict[str, tuple[str, int]] = {}  # NCCL_* the log shows set: name -> (value, 1-based line)
        self.layers: dict[str, str] = {}
        self.socket_ifs: dict[str, str] = {}
        self.gpus: dict[str, None] = {}
        self.topo_file = ""
        self.failed_at: list[int] = []
        self.trail_src: dict[str, None] = {}
        self.trail_path: list[str] = []  # the sources of the trail being read, from the failed call up
        self.consumed = -1  # a line already read as the reason after "Last error:"
        self.nccl_seen = False  # a line so far named NCCL
        self.prefixes: set[str] = set()
        self.progress_at: list[int] = []
        self.outcome = Outcome()
        self.file_rank = _file_rank(name)
        if self.file_rank is not None:
            self.ranks[self.file_rank] = None

    def add(
        self,
        kind: str,
        i: int,
        text: str,
        rank: int | None,
        reading: Reading | None = None,
        source: str = "",
        fields: dict[str, str] | None = None,
    ) -> None:
        self.per_kind[kind] = self.per_kind.get(kind, 0) + 1
        if self.per_kind[kind] > MAX_EVENTS_PER_KIND:
            return
        f = (fields or {}) | dict(reading.fields if reading else {})  # what the reading names wins
        order = reading.rank if reading else (CONSEQUENCE if kind in ("nccl-error", "trail") else ROOT)
        self.events.append(Event(kind, self.name, i + 1, text.strip()[:300], f, rank, source, order))

    def seen(self, level: Level) -> None:
        order = {"unset": 0, "VERSION": 1, "WARN": 2, "INFO": 3}
        if order[level] > order[self.level]:
            self.level = level

    def line(self, i: int, raw: str) -> None:
        # Most of a long log is NCCL INFO: substring checks guard every pattern (a 64 MiB log in seconds)
        line = (_ANSI.sub("", raw) if "\x1b" in raw else raw).rstrip()
        self.nccl_seen = self.nccl_seen or "NCCL" in line
        rank = self.file_rank
        if "[rank" in line and (m := _TORCH_RANK.search(line)):
            rank = int(m.group(1))
            self.ranks[rank] = None
        if "NCCL version" in line or line.endswith("NCCL"):
            self._version(i, line)
        if ": Using " in line and (m := _SOCK_USING.search(line)):  # at INFO, or the line pasted bare
            self.socket_ifs.update({d.group("name"): d.group("addr") for d in _SOCK_IF.finditer(m.group(1))})
        if (at := line.find("NCCL INFO ")) >= 0:
            self.seen("INFO")
            self._host(line, at)
            self._info(i, line, line[at + 10 :], rank)
        elif "WARN" in line and ((m := _WARN.search(line)) or (m := _OLD_WARN.search(line) or _V1_WARN.search(line))):
            self.seen("WARN")
            self._host(line, line.find("WARN"))
            msg = m.group("msg").rstrip("*").strip()
            src = m.group("src") or ""
            # a WARN wrapped at a space reads whole first: its first half may read as a vaguer class
            reading, known = self.outcome.warn(i, line, self._wrapped(i, msg, src, (" ",)) or classify(msg, src), msg)
            known |= {"said": msg, "at": m.group("line") or ""}
            self.add(reading.kind if reading else "warn", i, line, rank, reading, src, known)
        elif " INFO " in line and (m := _OLD_INFO.search(line)):  # NCCL before 2.5: "INFO" without "NCCL"
            self.seen("INFO")
            self._info(i, line, m.group("msg"), rank)
        elif "NCCL DIAG" in line and (
            m := _DIAG.search(line)
        ):  # 2.31+: NCCL's own diagnosis; a known text is its class
            self.seen("INFO")
            reading = classify(m.group("msg"))
            self.add(reading.kind if reading else "diag", i, line, rank, reading, fields={"said": m.group("msg")})
        else:
            self._other(i, line, rank)
            if "NCCL" not in line and _PROGRESS.search(line) and not (self.events and self.events[-1].line_no == i + 1):
                self.progress_at.append(i)

    def _host(self, line: str, end: int) -> None:
        """The host of NCCL's ``host:pid:tid [dev]`` prefix before position ``end``."""
        prefix = line[: line.find(" [", 0, end)]
        if prefix in self.prefixes:  # one parse per process and thread
            return
        self.prefixes.add(prefix)
        head = prefix.rsplit(" ", 1)[-1].rsplit(":", 3)
        if len(head) >= 3 and head[-1].isdigit() and head[-2].isdigit():
            host = head[-3].rsplit("]", 1)[-1].rsplit(">:", 1)[-1]
            if host:
                self.hosts[host] = None

    def _version(self, i: int, line: str) -> None:
        if m := _VERSION.search(line):
            self.versions[m.group("v") + (m.group("suffix") or "")] = None
            self.seen("VERSION")
        elif (
            (t := _VERSION_TAIL.search(line))  # the banner or torch's text wrapped after "version" or "NCCL"
            and i + 1 < len(self.lines)
            and (m := _WRAPPED[bool(t["word"])].match(self.lines[i + 1]))
        ):
            self.versions[m.group(1) + (m.group(2) or "")] = None
            self.seen("VERSION")

    def _info(self, i: int, line: str, msg: str, rank: int | None) -> None:
        self.outcome.info(i, line, msg)
        if " -> " in msg and (".c" in msg or ".h:" in msg) and (m := _TRAIL.search(msg)):
            tag = m.group("tag") or ""
            self.trail_src[m.group("src").rsplit("/", 1)[-1]] = None
            self.trail_path.append(m.group("src"))
            if tag.startswith(_TOP_TAGS) or _TOP_SRC.search(m.group("src")):
                self.failed_at.append(i)
                if self.per_kind.get("trail", 0) == 0:
                    path = " -> ".join(dict.fromkeys(self.trail_path[-6:]))
                    self.add(
                        "trail",
                        i,
                        line,
                        rank,
                        source=self.trail_path[0],
                        fields={"code": m.group("code"), "tag": tag, "path": path},
                    )
            return
        self.trail_path = []
        if " set " in msg and (m := _SET_TO.search(msg)):
            self.env[m.group(1)] = m.group(2)
            if "set by environment" in msg:
                self.shown.setdefault(m.group(1), (m.group(2), i + 1))
            if m.group(1) == "NCCL_TOPO_FILE":
                self.topo_file = m.group(2)
        if "comm 0x" in msg and (m := _INIT_RANK.search(msg)):
            self.ranks[int(m.group(1) or m.group(3))] = None
        if "NET/IB" in msg and (m := _IB_USING.search(msg)):
            self.layers.update({d.group("dev"): d.group("layer") for d in _IB_DEV.finditer(m.group(1))})
        if "NET/IB" in msg and "No device found" in msg:
            self.add("ib-no-device", i, line, rank)
        if "topology file" in msg and (m := _TOPO_FILE.search(msg)):
            self.topo_file = m.group(1)

    def _other(self, i: int, line: str, rank: int | None) -> None:
        if "NCCL_" in line and "=" in line:  # a command line or an environment dump: the variables it sets
            for a in _ASSIGNED.finditer(line):
                self.shown.setdefault(a.group(1), (a.group(2), i + 1))
        if ("GeForce" in line or "RTX" in line or "TITAN" in line) and (m := _GPU_NAME.search(line)):
            self.gpus[m.group(0).strip()] = None
        if line.startswith("#"):
            if (reading := classify(line)) and reading.kind == "wrong-results":
                self.failed_at.append(i)
                self.add(reading.kind, i, line, rank, reading, fields={"said": line.strip("# ")})
            if m := _NT_LIBRARY.search(line):  # nccl-library=22703, or NCCL 1's "compiled with NCCL 1.0"
                n = int(m.group(1) or 0)
                self.versions[f"{m.group(2)}.0" if m.group(2) else f"{n // 10000}.{n // 100 % 100}.{n % 100}"] = None
            if m := _NT_RANK.search(line):
                self.ranks[int(m.group(1))] = None
                self.hosts[m.group(2)] = None
            return
        if m := _LAST_ERROR.search(line):
            self._last_error(i, line, m, rank)
            return
        if m := _TORCH_ERROR.search(line):
            self.failed_at.append(i)
            if m.group("v"):
                self.versions.setdefault(m.group("v"), None)
            self.add("nccl-error", i, line, rank, fields={"class": m.group("cls").strip()})
            return
        if m := _NCCL_RESULT.search(line):
            self.failed_at.append(i)
            self.add("nccl-error", i, line, rank, fields={"class": m.group("cls")})
            return
        if m := _TEST_FAIL.search(line):
            self._test_failure(i, line, m, rank)
            return
        # torch's CUDA error counts in its NCCL watchdog, or in a log that already spoke of NCCL
        if "CUDA error: " in line and (self.nccl_seen or "watchdog" in line) and (m := _TORCH_CUDA.search(line)):
            self.failed_at.append(i)
            reading = classify(f"Cuda failure '{m.group('msg')}'")
            self.add(reading.kind if reading else "cuda-failure", i, line, rank, reading, fields={"said": m.group(0)})
            return
        if "ncclUniqueId" in line and (m := _STORE.search(line)):
            self.failed_at.append(i)
            self.add("store", i, line, rank, fields={"err": m.group("err").strip()})
            return
        if "Cuda failure" not in line and (m := _NCCL_CLASS.search(line)):
            self.failed_at.append(i)
            self.add("nccl-error", i, line, rank, fields={"class": m.group("cls").lower()})
            return
        if _TEST_ABORT.search(line):
            self.failed_at.append(i)
            return
        if self.outcome.other(i, line, self.nccl_seen):  # torch's own words that NCCL failed
            self.failed_at.append(i)
        if i != self.consumed and _BARE_OK.search(line) and (reading := classify(line) or self._wrapped(i, line)):
            if reading.kind == "nvls" and not reading.fields.get("msg") and i + 1 < len(self.lines):
                reading = classify(f"{line} {self.lines[i + 1]}") or reading  # the CUDA error on the next line
                self.consumed = i + 1
            fields = {"said": line.strip()}
            self.failed_at += self.outcome.bare(i, line, reading)
            if reading.kind == "watchdog-timeout":
                who = reading.fields.get("wrank") or ("" if rank is None else str(rank))
                fields |= self._watchdog_pg(i, reading.fields.get("seq", ""), who)
            self.add(reading.kind, i, line, rank, reading, fields=fields)

    def _wrapped(self, i: int, text: str, src: str = "", joins: tuple[str, ...] = ("", " ")) -> Reading | None:
        """``continuation.wrapped``, the next line then read."""
        reading = wrapped(self.lines, i, text, src, joins) if i + 1 != self.consumed else None
        if reading:
            self.consumed = i + 1
        return reading

    def _watchdog_pg(self, i: int, seq: str, rank: str) -> dict[str, str]:
        """The process group of a timed-out work, from torch's next lines (``[PG 1 Rank 0] Exception
        ... at work: 1580``), where printed."""
        for nxt in self.lines[i + 1 : i + 4]:
            if "at work:" in nxt and (m := _WATCHDOG_PG.search(nxt)) and (m["seq"], m["rank"]) == (seq, rank):
                return {"pg": m.group("pg")}
        return {}

    def _last_error(self, i: int, line: str, m: re.Match[str], rank: int | None) -> None:
        """torch's ``Last error:`` and the line after it, whatever prefix both carry."""
        reason, at, text = m.group("rest").strip(), i, line
        if not reason and i + 1 < len(self.lines):
            prefix = line[: m.start()]
            nxt = _ANSI.sub("", self.lines[i + 1]).rstrip()
            said = nxt[len(prefix) :] if prefix.strip() and nxt.startswith(prefix) else nxt
            # an empty "Last error:" is followed by torch's next message, not NCCL's reason
            if said.strip() and not _NOT_REASON.match(said):
                reason, at, text = said.strip(), i + 1, nxt
                self.consumed = i + 1
        self.failed_at.append(i)
        self.last_errors.append(reason[:300])
        if reading := classify(reason) if reason else None:
            self.add(reading.kind, at, text, rank, reading, fields={"said": reason})

    def _test_failure(self, i: int, line: str, m: re.Match[str], rank: int | None) -> None:
        """nccl-tests: ``host: Test NCCL failure common.cu:1005 'class / ncclGetLastError()'``,
        ``Test CUDA failure common.cu:941 'CUDA error string'`` (older: ``Cuda failure common.cu:891``)."""
        self.failed_at.append(i)
        text = m.group("text").strip().rstrip("'")
        if m.group("what") == "NCCL":
            cls, _, reason = text.removesuffix(" /").partition(" / ")  # "'class / '": no last error
            reading = classify(reason) if reason.strip() else None
            if reading is None:
                self.add("nccl-error", i, line, rank, fields={"class": cls.strip(), "reason": reason.strip()})
                return
        else:
            reading = classify(f"Cuda failure '{text}'")
        assert reading is not None  # a CUDA error string always reads as some CUDA kind
        self.add(reading.kind, i, line, rank, reading, m.group("where"), {"said": text})


def parse_file(name: str, text: str) -> LogFile:
    """One file's NCCL output."""
    lines = text.splitlines()
    r = _Reader(name, lines)
    for i, raw in enumerate(lines):
        r.line(i, raw)
    if (end := ends_in_trail(lines, r.trail_path)) is not None:
        r.failed_at.append(end)
    r.failed_at += r.outcome.failed_on_warn(r.failed_at, r.progress_at)
    for i, said in r.outcome.symptoms:  # INFO lines that show a known bug of the version (nccl.known_bugs)
        r.add("bug-symptom", i, r.lines[i], r.file_rank, fields={"said": said})
    nccl_lines = [ln for ln in lines if "NCCL" in ln]
    info = r.level == "INFO"
    failing = [
        e.line_no - 1 for e in r.events if e.kind not in ("warn", "ib-no-device", "diag", "bug-symptom")
    ] + r.failed_at
    last_failure = max(failing, default=-1)
    return LogFile(
        name=name,
        level=r.level,
        versions=tuple(dedupe_versions(r.versions)),
        ranks=tuple(sorted(r.ranks)),
        hosts=tuple(r.hosts),
        events=r.outcome.settled(r.events, bool(r.failed_at)),
        last_errors=tuple(r.last_errors),
        env=r.env,
        account=account(["\n".join(nccl_lines)]) if info else None,
        choices=parse_choices(nccl_lines) if info else None,
        nccl_tests=any(ln.startswith("# nThread") for ln in lines[:40]),
        failed=bool(r.failed_at),
        went_on=last_failure >= 0 and any(p > last_failure for p in r.progress_at),
        link_layers=r.layers,
        socket_ifs=r.socket_ifs,
        gpu_names=tuple(r.gpus),
        topo_file=r.topo_file,
        trail_sources=tuple(r.trail_src),
        variables=tuple((n, v, at) for n, (v, at) in r.shown.items()),
        signs=read_signs(nccl_lines) if info else (),
    )
