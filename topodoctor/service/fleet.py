"""The fleet roll-up as a command runs it: many nodes' result files read under one time budget,
then judged together; with a history database, added to it first and judged over time."""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from topodoctor.core import codec, fileio
from topodoctor.core.errors import InputError
from topodoctor.core.text import plural
from topodoctor.fleet.history import HistoryReport, judge
from topodoctor.fleet.inputs import MAX_RESULT_BYTES, parse_document, read_files, read_results, result_files
from topodoctor.fleet.parse import parse_result
from topodoctor.fleet.request import FleetRequest, FleetThresholds, HistoryRequest
from topodoctor.fleet.results import NodeResult, Unreadable
from topodoctor.fleet.rollup import FleetOutcome, roll_up
from topodoctor.fleet.rows import file_digest, row_of
from topodoctor.fleet.store import Retention, open_store
from topodoctor.fleet.timeline import DAY_S
from topodoctor.model.copies import BandwidthResult
from topodoctor.model.stamp import parse_iso
from topodoctor.service import copies

__all__ = ["FleetOutcome", "FleetRequest", "HistoryReport", "HistoryRequest", "Retention", "history", "roll_up_paths"]

# File systems on which SQLite's locks and WAL's shared memory cannot be trusted (mountinfo's type).
NETWORK_FS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "ceph", "glusterfs", "beegfs", "9p", "afs")


def roll_up_paths(
    paths: Sequence[Path], name_from: Literal["host", "file"], timeout_s: float, settings: FleetThresholds
) -> FleetOutcome:
    """Read every result under ``paths`` (bounded; a bad file is one line of the report) and roll
    them up; no readable result at all is an input error."""
    nodes, unreadable = read_results(paths, name_from, timeout_s, judged)
    if not nodes:
        first = f" ({unreadable[0].error})" if unreadable else ""
        raise InputError(f"no readable result among {plural(len(paths), 'path')}{first}")
    return roll_up(nodes, unreadable, settings)


def judged(doc: Any, r: NodeResult) -> NodeResult:
    """A bandwidth result saved without its findings (``bandwidth -o``) judged by the bandwidth
    rules, as ``bandwidth --from`` judges it (service/copies.py): the fleet never calls "ok" what
    the command calls unhealthy. Any other result as it is."""
    if r.kind != "bandwidth" or r.state != "measured" or r.findings:
        return r
    try:
        result = codec.from_jsonable(BandwidthResult, doc, f"bandwidth result {r.path}")
        findings = copies.bandwidth_findings(result)
    except InputError:
        return r  # read as figures only, as before: the roll-up still compares them
    return replace(r, findings=findings) if findings else r


def _parsed(
    files: list[Path], name_from: Literal["host", "file"], deadline: float, bad: list[Unreadable]
) -> Iterator[tuple[Any, ...]]:
    for path, data, mtime, error in read_files(files, "result", MAX_RESULT_BYTES, fileio.DEFAULT_TIMEOUT_S, deadline):
        guess = path.name.split(".", 1)[0]
        if error is not None or data is None:
            bad.append(Unreadable(str(path), error or f"{path}: not read", guess))
            continue
        try:
            doc = parse_document(data, f"result {path}")
            r = judged(doc, parse_result(doc, path, name_from, mtime))
        except InputError as exc:
            bad.append(Unreadable(str(path), str(exc), guess))
            continue
        yield row_of(r, file_digest(data))


SPLIT_FROM = 2000  # fewer files than this are parsed in one process: a fork costs more than it saves


def parsed(
    files: list[Path], name_from: Literal["host", "file"], deadline: float, bad: list[Unreadable]
) -> list[tuple[Any, ...]]:
    """Every file read and parsed; a collector's thousands on two CPUs where it has two idle:
    a forked child parses the second half and sends its rows back (plain values, pickled, through
    our own pipe) while this process parses the first. A child that fails or runs out of time
    costs its half again here, never a result."""
    cpus = len(os.sched_getaffinity(0))
    # A second process helps only where a CPU is free: on a busy host the parent would wait for it.
    if len(files) < SPLIT_FROM or cpus < 2 or os.getloadavg()[0] > cpus - 1:
        return list(_parsed(files, name_from, deadline, bad))
    half = len(files) // 2
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: parse the second half, send it, leave without running the parent's exit code
        code = 1
        try:
            os.close(read_fd)
            theirs: list[Unreadable] = []
            done = list(_parsed(files[half:], name_from, deadline, theirs))
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(pickle.dumps((done, theirs), protocol=pickle.HIGHEST_PROTOCOL))
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    mine = list(_parsed(files[:half], name_from, deadline, bad))
    answer = _collect(read_fd, pid, deadline)
    if answer is None:
        return mine + list(_parsed(files[half:], name_from, deadline, bad))
    got: list[tuple[Any, ...]] = answer[0]
    bad.extend(answer[1])
    return mine + got


def _collect(read_fd: int, pid: int, deadline: float) -> Any:
    """The child's answer, or None (killed) when it fails or is still at it past the deadline."""
    chunks = []
    try:
        with os.fdopen(read_fd, "rb") as pipe:
            while True:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([pipe], [], [], left)[0]:
                    raise TimeoutError
                chunk = os.read(pipe.fileno(), 1 << 20)
                if not chunk:
                    break
                chunks.append(chunk)
        _, status = os.waitpid(pid, 0)
        return pickle.loads(b"".join(chunks)) if status == 0 and chunks else None
    except (TimeoutError, OSError, pickle.UnpicklingError, EOFError):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        return None


def network_fs(path: Path, mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The type of the network file system ``path``'s directory is on, or None (local, or unknown)."""
    try:
        text = fileio.read_text(mountinfo, "mount table", 4 * fileio.MiB, 2.0)
    except InputError:
        return None
    try:
        is_dir = path.is_dir()
    except OSError:  # a directory this user may not search: the store's open says so, in one line
        is_dir = False
    where = os.path.realpath(path if is_dir else path.parent)
    best, kind = "", None
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if len(fields) < 5 or not rest:
            continue
        mount = fields[4].replace("\\040", " ")
        if (where == mount or where.startswith(mount.rstrip("/") + "/")) and len(mount) >= len(best):
            best, kind = mount, rest[0]
    return kind if kind in NETWORK_FS or kind == "fuse.sshfs" else None


def history(request: FleetRequest, timeout_s: float, lock_timeout_s: float = 10.0) -> tuple[HistoryReport, list[str]]:
    """Add the request's results to its history database (one transaction: all or none), then
    judge the fleet over time from the database, within ``timeout_s``. Returns the report and
    warnings (one line each)."""
    st = request.history
    if st.history_db is None:
        raise InputError("no history database named (--history DB)")
    db, paths = st.history_db, request.results
    name_from: Literal["host", "file"] = "file" if request.name_from == "file" else "host"
    _ = st.min_rises  # read now: a bad --counter-min-rise is refused before the database is touched
    as_of = time.time() if st.as_of is None else _time(st.as_of)
    retention = Retention(st.keep_days or None, st.max_mb or None)
    warnings = []
    fs = network_fs(db)
    if fs is not None:
        warnings.append(
            f"{fileio.shown(db)} is on {fs}, a network file system, where SQLite's locks do not hold: "
            "keep the database on the collector's local disk (docs/fleet.md)"
        )
    deadline = time.monotonic() + timeout_s
    bad: list[Unreadable] = []
    store = open_store(db, create=bool(paths), timeout_s=lock_timeout_s)
    try:
        ingested = {}
        if paths:
            files, bad = result_files(paths, fileio.DEFAULT_TIMEOUT_S)
            done = store.ingest(parsed(files, name_from, deadline, bad), retention)
            ingested = {
                "added": done.added,
                "duplicates": done.duplicates,
                "pruned": done.pruned,
                "unreadable": len(bad),
            }
        since = as_of - st.window_days * DAY_S
        blobs = store.blobs()
        report = judge(
            store.rows(since, as_of),
            blobs,
            st,
            request.thresholds,
            as_of,
            rows_of=lambda node: store.rows(since, as_of, node),
            unreadable=bad,
        )
    finally:
        store.close()
    if report.results == 0:
        span = f" ({plural(len(bad), 'file')} unreadable: {bad[0].error})" if bad else ""
        raise InputError(
            f"no result in {fileio.shown(db)} from the {st.window_days:g} days before "
            f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(as_of))} UTC{span}"
        )
    return replace(report, ingested=ingested), warnings


def _time(text: str) -> float:
    try:
        return parse_iso(text)
    except ValueError:
        raise InputError(f"--as-of takes an ISO 8601 time (2026-11-30T12:00:00Z); got {text!r}") from None
