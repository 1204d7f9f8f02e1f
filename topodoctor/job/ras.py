"""NCCL's RAS service: its answer to ``verbose status`` (text, or JSON since NCCL 2.28.7) as
plain data, and a bounded query of a live job.

RAS (on by default since NCCL 2.24, port 28028) asks every process of the job about its
communicators and reports, per communicator, ``MISMATCH`` (ranks that launched different
numbers of operations, or differ in status), ``INCOMPLETE`` (ranks that did not answer) and
``ERROR``, and job-wide ``DEAD`` processes. It counts launches, not progress: the rank that
launched fewest operations is the one its peers wait for. Ranks in RAS are communicator
ranks; they are the job's global ranks only in a communicator of the whole world.
"""

from __future__ import annotations

import re
import socket
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal

from topodoctor.core.errors import InputError
from topodoctor.core.fileio import parse_json as strict_json

RasKind = Literal["MISMATCH", "INCOMPLETE", "ERROR", "DEAD"]
DEFAULT_PORT = 28028
MAX_ANSWER_BYTES = 16 << 20

_SECTION = re.compile(r"^#(\d+)-(\d+) \(([0-9a-fA-F]+)\) (MISMATCH|INCOMPLETE|ERROR)\s*$")
_RANK = re.compile(
    r"^\s*Rank (\d+)(?: has launched up to operation (\d+)| has not launched any operations"
    r"| has status (\S+)| reported (.+?))? -- (?:GPU (\S+)(?: \(NVML \d+\))? managed by process (\d+) on node (\S+)"
    r"|\[process information not found\])"
)
_GROUP = re.compile(r"^\s*\d+ ranks have (?:launched up to operation (\d+)|not launched any operations)")
_PROCESS = re.compile(r"^\s*Process (\d+) on node (\S+) managing GPUs? (.+?)\s*$")
_TABLE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S*)\s*$")


@dataclass(frozen=True)
class RasRank:
    """A rank (or, for DEAD / job-wide INCOMPLETE, a process) RAS names."""

    rank: int | None
    host: str
    gpu: str
    pid: int | None
    launched: int | None = None  # operations launched, where RAS says


@dataclass(frozen=True)
class RasIssue:
    """One error RAS reports; ``culprits`` are the ranks it points at (the ones behind)."""

    kind: RasKind
    comm: str  # "#0-0 (c5a2...)"; "" for a job-wide report
    comm_size: int | None
    culprits: tuple[RasRank, ...]
    text: str


@dataclass(frozen=True)
class RasReport:
    """What RAS reported; no issues means every communicator agreed."""

    nccl_version: str
    issues: tuple[RasIssue, ...]


def _behind(ranks: list[RasRank], values: list[int]) -> tuple[RasRank, ...]:
    """The ranks that launched fewest operations; all listed ranks when RAS gave no counts."""
    counts = [r.launched for r in ranks if r.launched is not None] + values
    if not counts:
        return tuple(ranks)
    low = min(counts)
    behind = tuple(r for r in ranks if r.launched == low)
    return behind or tuple(r for r in ranks if r.launched is None)


def parse_text(text: str) -> RasReport:
    """The text answer to ``status`` / ``verbose status`` (or the ``ncclras`` tool's output)."""
    version = re.search(r"NCCL version (\S+)", text)
    sizes: dict[str, int] = {}
    issues: list[RasIssue] = []
    kind: RasKind | None = None
    comm = ""
    ranks: list[RasRank] = []
    values: list[int] = []
    lines: list[str] = []
    in_errors = False

    def close() -> None:
        if kind is not None:
            culprits = _behind(ranks, values) if kind == "MISMATCH" else tuple(ranks)
            size = sizes.get(comm.split("-", 1)[0]) if comm else None
            issues.append(RasIssue(kind, comm, size, culprits, "\n".join(lines).strip()))

    for line in text.splitlines():
        stripped = line.strip()
        m = _TABLE.match(line)
        if m and not in_errors:
            sizes[f"#{m.group(1)}"] = int(m.group(5))
        if stripped in ("Errors", "Warnings"):
            in_errors = True
        section = _SECTION.match(stripped)
        if section or stripped in ("INCOMPLETE", "DEAD") or stripped in ("Warnings", "Errors"):
            close()
            kind, comm, ranks, values, lines = None, "", [], [], []
            if section:
                kind = section.group(4)  # type: ignore[assignment]
                comm = f"#{section.group(1)}-{section.group(2)} ({section.group(3)})"
            elif stripped in ("INCOMPLETE", "DEAD") and in_errors:
                kind = stripped  # type: ignore[assignment]
            if kind is not None:
                lines.append(stripped)
            continue
        if kind is None:
            continue
        if stripped:
            lines.append(stripped)
        if (g := _GROUP.match(line)) is not None:
            values.append(int(g.group(1) or 0))
        elif (r := _RANK.match(line)) is not None:
            launched = int(r.group(2)) if r.group(2) else (0 if "not launched" in line else None)
            ranks.append(
                RasRank(
                    int(r.group(1)),
                    r.group(7) or "",
                    r.group(5) or "",
                    int(r.group(6)) if r.group(6) else None,
                    launched,
                )
            )
        elif (p := _PROCESS.match(line)) is not None:
            ranks.append(RasRank(None, p.group(2), p.group(3), int(p.group(1))))
    close()
    return RasReport(version.group(1) if version else "", tuple(issues))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_json(doc: Any, what: str = "RAS answer") -> RasReport:
    """The JSON answer (``SET FORMAT json``, NCCL 2.28.7 and later)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("communicators"), list):
        raise InputError(f"{what} is not NCCL RAS JSON (no 'communicators' list)")
    issues: list[RasIssue] = []
    for c in doc["communicators"]:
        if not isinstance(c, dict):
            continue
        comm = f"({c.get('hash', '?')})"
        size = _int(c.get("size"))
        present = [r for r in c.get("ranks") or [] if isinstance(r, dict)]
        missing = [r for r in c.get("missing_ranks") or [] if isinstance(r, dict)]

        def rank(r: dict[str, Any], launched: int | None = None) -> RasRank:
            return RasRank(
                _int(r.get("rank")), str(r.get("host", "")), str(r.get("cuda_dev", "")), _int(r.get("pid")), launched
            )

        launched = {
            id(r): sum(v for v in (r.get("collective_counts") or {}).values() if isinstance(v, int)) for r in present
        }
        if len(set(launched.values())) > 1:
            low = min(launched.values())
            culprits = tuple(rank(r, launched[id(r)]) for r in present if launched[id(r)] == low)
            common = Counter(launched.values()).most_common(1)[0][0]
            issues.append(RasIssue("MISMATCH", comm, size, culprits, f"operation counts differ (most ranks: {common})"))
        dead = [r for r in missing if (r.get("status") or {}).get("considered_dead") is True]
        if missing:
            issues.append(RasIssue("INCOMPLETE", comm, size, tuple(rank(r) for r in missing), "ranks did not answer"))
        if dead:
            issues.append(RasIssue("DEAD", comm, size, tuple(rank(r) for r in dead), "ranks considered dead"))
        errs = [r for r in present if _int((r.get("status") or {}).get("async_error"))]
        if errs:
            issues.append(RasIssue("ERROR", comm, size, tuple(rank(r) for r in errs), "asynchronous NCCL errors"))
    return RasReport(str(doc.get("nccl_version", "")), tuple(issues))


def parse(text: str, what: str = "RAS answer") -> RasReport:
    """Text or JSON, whichever it is."""
    if text.lstrip().startswith("{"):
        return parse_json(strict_json(text, what), what)
    if "NCCL version" not in text and "Errors" not in text and "Communicators" not in text:
        raise InputError(f"{what} is not an NCCL RAS status answer")
    return parse_text(text)


def query(address: str, timeout_s: float = 15.0, fmt: Literal["text", "json"] = "text") -> str:
    """Ask a live job's RAS service for its verbose status, within ``timeout_s`` in all.

    ``address`` is ``HOST:PORT`` or ``HOST``. The RAS collective itself waits up to its own
    timeout for unresponsive peers; we ask for a third of ours so the answer arrives in time.
    """
    host, _, port_text = address.rpartition(":") if ":" in address else (address, "", str(DEFAULT_PORT))
    if not port_text.isdigit():
        raise InputError(f"--ras {address!r}: expected HOST:PORT")
    deadline = time.monotonic() + timeout_s
    try:
        sock = socket.create_connection((host or "localhost", int(port_text)), timeout=min(timeout_s, 5.0))
    except OSError as exc:
        raise RasUnavailable(f"NCCL RAS at {address}: {exc.strerror or exc} (is a job running, RAS on?)") from None
    with sock:
        reader = _Lines(sock, deadline, address)
        reader.send("CLIENT PROTOCOL 2\n")
        if not reader.line().upper().startswith("SERVER PROTOCOL"):
            raise RasUnavailable(f"{address} does not speak the NCCL RAS protocol")
        reader.send(f"TIMEOUT {max(1, int(timeout_s / 3))}\n")
        reader.line()
        if fmt == "json":
            reader.send("SET FORMAT json\n")
            if reader.line().strip().upper() != "OK":
                raise RasUnavailable(f"NCCL RAS at {address} has no JSON output (NCCL before 2.28.7): use text")
        reader.send("VERBOSE STATUS\n")
        return reader.rest()


class RasUnavailable(Exception):
    """The RAS service could not be asked (no job, RAS off, timed out)."""


class _Lines:
    def __init__(self, sock: socket.socket, deadline: float, address: str) -> None:
        self.sock, self.deadline, self.address, self.buf = sock, deadline, address, b""

    def _recv(self) -> bytes:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RasUnavailable(f"NCCL RAS at {self.address}: no complete answer in time")
        self.sock.settimeout(left)
        try:
            return self.sock.recv(1 << 16)
        except OSError as exc:
            raise RasUnavailable(f"NCCL RAS at {self.address}: {exc.strerror or 'timed out'}") from None

    def send(self, text: str) -> None:
        try:
            self.sock.sendall(text.encode())
        except OSError as exc:
            raise RasUnavailable(f"NCCL RAS at {self.address}: {exc.strerror or exc}") from None

    def line(self) -> str:
        while b"\n" not in self.buf:
            chunk = self._recv()
            if not chunk:
                raise RasUnavailable(f"NCCL RAS at {self.address} closed the connection")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode("utf-8", "replace")

    def rest(self) -> str:
        """Everything until the service closes the connection (it does after a status)."""
        while len(self.buf) <= MAX_ANSWER_BYTES:
            try:
                chunk = self._recv()
            except RasUnavailable:
                if self.buf:  # what arrived is still evidence; the parser takes partial sections
                    break
                raise
            if not chunk:
                break
            self.buf += chunk
        return self.buf.decode("utf-8", "replace")
