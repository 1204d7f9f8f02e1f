"""What one pass over a file's lines gathers for ``LogFile``, and how a line becomes an ``Event``: the
state ``nccl.parse`` (NCCL's own lines) and ``nccl.framework_lines`` (the framework's and the tests'
lines) fill. Text in, data out."""

from __future__ import annotations

import re

from topodoctor.nccl.classify import CONSEQUENCE, ROOT, Reading
from topodoctor.nccl.connect_retries import Retries, unroutable, with_attempts_left
from topodoctor.nccl.continuation import wrapped
from topodoctor.nccl.grammar import origin_host
from topodoctor.nccl.logfile import Event, Level
from topodoctor.nccl.outcome import Outcome, process

MAX_EVENTS_PER_KIND = 20  # a hung job repeats its error per rank and per retry; the first few say it
_FILE_RANK = re.compile(r"(?:rank|nccl[._-])(\d+)(?:\.\w+)?$")


def _file_rank(name: str) -> int | None:
    stem = name.rsplit("/", 1)[-1]
    m = _FILE_RANK.search(stem.rsplit(".", 1)[0] if stem.count(".") > 1 else stem)
    return int(m.group(1)) if m else None


class ReadState:
    """One pass over a file's lines: what ``LogFile`` holds, gathered."""

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
        self.layers: dict[str, dict[str, str]] = {}  # host -> RDMA device -> IB or RoCE
        self.socket_ifs: dict[str, str] = {}
        self.gpus: dict[str, None] = {}
        self.topo_file = ""
        self.failed_at: list[int] = []
        self.trail_src: dict[str, None] = {}
        self.trail_path: list[str] = []  # the sources of the trail being read, from the failed call up
        self.consumed = -1  # a line already read as the reason after "Last error:"
        self.nccl_seen = False  # a line so far named NCCL
        self.run_words: bool | None = None  # any line names NCCL or a distributed run's launcher (read when asked)
        self.prefixes: set[str] = set()
        self.progress_at: list[int] = []
        self.stack: dict[str, int] = {}  # what a ProcessGroupNCCL stack's frames say raised -> its first line
        self.outcome = Outcome()
        self.retries = Retries()
        self.retry_ends: list[tuple[int, str, int | None, dict[str, str]]] = []  # connect retries out of count
        self.retry_open: list[tuple[int, str, int | None, dict[str, str]]] = []  # retries with attempts left
        # (host, commId) -> rank -> (bus id, line): each communicator's ranks as their init lines place them
        self.inits: dict[tuple[str, str], dict[str, tuple[str, int]]] = {}
        self.launch_nodes: int | None = None  # the nodes a launch line asks for
        self.overcommit = ""  # a launch line that starts more processes per node than it leaves GPUs visible
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
        """One event of ``kind`` read at line ``i`` (the first few of each kind kept: a hung job repeats its
        error per rank and retry)."""
        self.per_kind[kind] = self.per_kind.get(kind, 0) + 1
        if self.per_kind[kind] > MAX_EVENTS_PER_KIND:
            return
        f = (fields or {}) | dict(reading.fields if reading else {})  # what the reading names wins
        order = reading.rank if reading else (CONSEQUENCE if kind in ("nccl-error", "trail") else ROOT)
        host = origin_host(text)
        self.events.append(Event(kind, self.name, i + 1, text.strip()[:300], f, rank, source, order, host))

    def retry_end(self, i: int, line: str, rank: int | None, fields: dict[str, str]) -> None:
        """A connect retry that reached its count at line ``i``: the run fails there unless its process went on."""
        self.outcome.last_retry(i, line)
        self.retry_ends.append((i, line, rank, fields))

    def retry(self, i: int, line: str, rank: int | None, msg: str, proc: str) -> bool:
        """A connect retry: the one that reached its count (True), or one with attempts left (kept, a few)."""
        if f := self.retries.last(msg, proc):
            self.retry_end(i, line, rank, f)
            return True
        if (f := with_attempts_left(msg)) and len(self.retry_open) < MAX_EVENTS_PER_KIND:
            self.retry_open.append((i, line, rank, f))
        return False

    def retries_end(self, said_ended: bool = False) -> None:
        """The connections whose last retry ended the process's NCCL output: each a failed connection; where
        none did, the last retry to an address no other node reaches, when the run failed after it; or the last of
        old retries (no count) that are the paste alone or that the post says the run ended on (``said_ended``)."""
        for i, line, rank, fields in self.retry_ends:
            if any(e.kind == "connect" and e.line_no > i for e in self.events):  # NCCL's own WARN was pasted
                continue
            if not self.outcome.went_on(i, process(line)) and not any(p > i for p in self.progress_at):
                self.add("connect", i, line, rank, fields=fields)
        if self.per_kind.get("connect"):
            return
        odd = [r for r in self.retry_open if unroutable(r[3]["addr"], self.socket_ifs, len(self.hosts))]
        if odd and (i := odd[-1][0]) < max(self.failed_at, default=-1) and not any(p > i for p in self.progress_at):
            _, line, rank, fields = odd[-1]
            self.add("connect", i, line, rank, fields=fields | {"open": "1"})
        elif (
            self.retry_open
            and not self.retry_open[-1][3]["retries"]  # the old form: no count tells how many attempts were left
            and not any(p > self.retry_open[-1][0] for p in self.progress_at)
        ):
            alone = len(self.retry_open) == sum(1 for ln in self.lines if ln.strip())  # the paste is the retries alone
            if alone or said_ended:  # or the post says the run failed or hangs
                i, line, rank, fields = self.retry_open[-1]
                self.failed_at.append(i)
                self.add("connect", i, line, rank, fields=fields | {"lone": "1" if alone else "said"})

    def seen(self, level: Level) -> None:
        """Note that a line of ``level`` was read; the log's level is the most detailed seen."""
        order = {"unset": 0, "VERSION": 1, "WARN": 2, "INFO": 3}
        if order[level] > order[self.level]:
            self.level = level

    def wrapped(self, i: int, text: str, src: str = "", joins: tuple[str, ...] = ("", " ")) -> Reading | None:
        """``continuation.wrapped``, the next line then read (and not read again)."""
        reading = wrapped(self.lines, i, text, src, joins) if i + 1 != self.consumed else None
        if reading:
            self.consumed = i + 1
        return reading
