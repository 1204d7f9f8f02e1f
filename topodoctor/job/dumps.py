"""PyTorch flight-recorder dumps as plain data.

torch (2.5 to 2.13, dump format versions "2.2" to "2.10") writes one pickle per rank to
``$TORCH_FR_DUMP_TEMP_FILE<rank>`` on a timeout, or a JSON document of the same shape from
``_dump_nccl_trace_json`` / ``_dump_fr_trace_json``. A pickle from a shared job directory is
untrusted input: it is read by an unpickler that refuses every global (so no class, function
or ``__reduce__`` can run) and then walked to admit only dicts, lists, tuples, strings, bytes,
numbers, booleans and None. Field names changed across versions (``seq_id`` became
``collective_seq_id``, ``is_p2p`` and dtypes were added, timing fields are present only with
``TORCH_NCCL_ENABLE_TIMING=1``); every field is read with a default, so an older dump yields
fewer facts, never an error.
"""

from __future__ import annotations

import io
import pickle
import re
from dataclasses import dataclass
from typing import Any

from topodoctor.core import fileio
from topodoctor.core.errors import InputError

MAX_DUMP_BYTES = 256 * fileio.MiB  # 20,000 entries with stacks is ~60 MB
P2P_OPS = frozenset({"send", "recv", "_send", "_recv"})
_PLAIN = (dict, list, tuple, str, bytes, int, float, bool, type(None))
_RANK_IN_NAME = re.compile(r"(\d+)(?:\.(?:json|pkl|pickle|bin))?$")


class _PlainUnpickler(pickle.Unpickler):
    """Builds containers and numbers only: any reference to a class or function is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refers to {module}.{name}; a flight-recorder dump holds plain data only")

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("holds a persistent reference; a flight-recorder dump holds plain data only")


def _check_plain(data: Any) -> None:
    stack = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, _PLAIN):
            raise ValueError(f"holds a {type(node).__name__}")
        if depth > fileio.MAX_JSON_DEPTH:
            raise ValueError(f"is nested more than {fileio.MAX_JSON_DEPTH} deep")
        if isinstance(node, dict):
            stack.extend((k, depth + 1) for k in node)
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend((v, depth + 1) for v in node)


def loads(data: bytes, what: str) -> dict[str, Any]:
    """A dump's bytes (pickle or JSON) as plain data; InputError naming ``what`` otherwise."""
    if data[:1] in (b"{", b" ", b"\n"):
        doc = fileio.parse_json(data.decode("utf-8", "replace"), what)
    else:
        try:
            doc = _PlainUnpickler(io.BytesIO(data)).load()
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, MemoryError) as exc:
            raise InputError(f"{what} is not a flight-recorder dump: {exc}") from None
        except RecursionError:
            raise InputError(f"{what} is nested too deeply") from None
        try:
            _check_plain(doc)
        except ValueError as exc:
            raise InputError(f"{what} is not a flight-recorder dump: it {exc}") from None
    if not isinstance(doc, dict) or "entries" not in doc:
        raise InputError(f"{what} is not a flight-recorder dump (no 'entries')")
    return doc


@dataclass(frozen=True)
class DumpEntry:
    """One collective or point-to-point call as one rank recorded it."""

    pg: str  # the process group's name (torch's hashed name; "0" is the default group)
    pg_desc: str
    seq: int  # collective_seq_id, or p2p_seq_id for a send / recv
    p2p: bool
    op: str  # "all_reduce", "send", ... (the profiling name without its backend)
    backend: str
    input_sizes: tuple[tuple[int, ...], ...]
    output_sizes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_dtypes: tuple[str, ...]
    state: str  # scheduled, started, completed
    retired: bool
    created_ns: int | None
    duration_ms: float | None  # GPU time of the op, with TORCH_NCCL_ENABLE_TIMING=1
    timeout_ms: int | None
    frame: str  # the innermost caller outside torch: "train.py:88 step"


@dataclass(frozen=True)
class GroupInfo:
    """A process group as its pg_config describes it; ``ranks`` are global ranks."""

    name: str
    desc: str
    ranks: tuple[int, ...] | None


@dataclass(frozen=True)
class Progress:
    """A rank's counters for one group (pg_status): the last collective enqueued, started
    and completed (-1: none). They survive the ring buffer's overwriting of old entries."""

    pg: str
    enqueued: int
    started: int
    completed: int


@dataclass(frozen=True)
class RankDump:
    """One rank's flight recorder."""

    rank: int
    source: str
    version: str
    groups: tuple[GroupInfo, ...]
    progress: tuple[Progress, ...]
    entries: tuple[DumpEntry, ...]
    written_ns: int | None = None  # when the file was written (its mtime): how old an unfinished op was


def rank_from_name(name: str) -> int | None:
    """The rank in a dump's file name: torch writes ``<prefix><rank>``; ``.json`` may follow."""
    m = _RANK_IN_NAME.search(name)
    return int(m.group(1)) if m else None


def _int(value: Any, default: int | None = None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _seq(value: Any) -> int:
    v = _int(value)
    return v if v is not None else -1


def _sizes(value: Any) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(tuple(x for x in s if isinstance(x, int)) for s in value if isinstance(s, (list, tuple)))


def _strs(value: Any) -> tuple[str, ...]:
    return tuple(str(x) for x in value) if isinstance(value, (list, tuple)) else ()


def _frame(frames: Any) -> str:
    """The innermost frame that is not torch's own: where the program called the collective."""
    if not isinstance(frames, list):
        return ""
    for f in frames:
        if not isinstance(f, dict):
            continue
        filename = str(f.get("filename", ""))
        if "/torch/" in filename or filename.startswith("<"):
            continue
        return f"{filename.rsplit('/', 1)[-1]}:{f.get('line', '?')} {f.get('name', '')}".strip()
    return ""


def _entry(e: Any) -> DumpEntry | None:
    if not isinstance(e, dict):
        return None
    name = str(e.get("profiling_name", ""))
    backend, _, op = name.partition(":")
    if not op:
        backend, op = "", name
    op = op.split(" ", 1)[0]  # "send 0->1" carries its peers
    pg = e.get("process_group")
    pg_name, pg_desc = (str(pg[0]), str(pg[1])) if isinstance(pg, (list, tuple)) and len(pg) == 2 else ("", "")
    p2p = bool(e["is_p2p"]) if isinstance(e.get("is_p2p"), bool) else op in P2P_OPS
    coll = _int(e.get("collective_seq_id"), _int(e.get("seq_id"), -1))
    seq = _int(e.get("p2p_seq_id"), -1) if p2p else coll
    duration = e.get("duration_ms")
    return DumpEntry(
        pg=pg_name,
        pg_desc=pg_desc,
        seq=seq if seq is not None else -1,
        p2p=p2p,
        op=op,
        backend=backend,
        input_sizes=_sizes(e.get("input_sizes")),
        output_sizes=_sizes(e.get("output_sizes")),
        input_dtypes=_strs(e.get("input_dtypes")),
        output_dtypes=_strs(e.get("output_dtypes")),
        state=str(e.get("state", "")),
        retired=e.get("retired") is True,
        created_ns=_int(e.get("time_created_ns")),
        duration_ms=float(duration) if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None,
        timeout_ms=_int(e.get("timeout_ms")),
        frame=_frame(e.get("frames")),
    )


def _ranks(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, str):  # torch writes the list as text: "[0, 1, 2]"
        found = re.findall(r"-?\d+", value)
        return tuple(int(x) for x in found) if found or value.strip() == "[]" else None
    if isinstance(value, (list, tuple)):
        return tuple(x for x in value if isinstance(x, int))
    return None


def rank_dump(doc: dict[str, Any], rank: int, source: str, written_ns: int | None = None) -> RankDump:
    """A decoded dump as a RankDump; unreadable entries are skipped, never guessed."""
    groups = []
    config = doc.get("pg_config")
    if isinstance(config, dict):
        for key, g in config.items():
            if isinstance(g, dict):
                groups.append(GroupInfo(str(g.get("name", key)), str(g.get("desc", "")), _ranks(g.get("ranks"))))
    progress = []
    status = doc.get("pg_status")
    if isinstance(status, dict):
        for key, s in status.items():
            if isinstance(s, dict):
                progress.append(
                    Progress(
                        str(key),
                        _seq(s.get("last_enqueued_collective")),
                        _seq(s.get("last_started_collective")),
                        _seq(s.get("last_completed_collective")),
                    )
                )
    raw = doc.get("entries")
    entries = tuple(x for x in (_entry(e) for e in (raw if isinstance(raw, list) else [])) if x is not None)
    return RankDump(rank, source, str(doc.get("version", "")), tuple(groups), tuple(progress), entries, written_ns)


def parse_dump(data: bytes, name: str, rank: int | None = None, written_ns: int | None = None) -> RankDump:
    """One dump file's bytes as a RankDump; the rank comes from the file name unless given."""
    r = rank if rank is not None else rank_from_name(name.rsplit("/", 1)[-1])
    if r is None:
        raise InputError(f"flight-recorder dump {name}: no rank in its name (torch writes <prefix><rank>)")
    return rank_dump(loads(data, f"flight-recorder dump {name}"), r, name, written_ns)
