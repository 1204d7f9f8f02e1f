"""Reading many nodes' result files for the fleet: bounded, and one bad file is one line in the
report, never the end of it (the documents themselves: fleet/parse.py).

A collector reads ten thousand files at a time. ``core.fileio.read_bytes`` bounds each read with
a thread of its own (0.1-0.4 ms a file, more than the parse); here one reader thread reads the
files in turn and the caller waits for each within the per-file timeout: a file on a wedged
mount costs that timeout, its reader is abandoned, and a fresh one reads on. The parse is
strict as ``fileio.parse_json`` is (no NaN or Infinity; integers of more than 4300 digits are
refused by Python itself; nesting by json's own guard), without a hook on every number: the
fleet checks each number it uses.
"""

from __future__ import annotations

import os
import queue
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from topodoctor.core import decode, fileio
from topodoctor.core.errors import InputError
from topodoctor.core.json_errors import STRICT_DECODER, json_errors
from topodoctor.fleet.parse import NameFrom, node_type, parse_result
from topodoctor.fleet.results import NodeResult, Unreadable

__all__ = ["MAX_RESULT_BYTES", "NameFrom", "node_type", "parse_result", "read_files", "read_results", "result_files"]

MAX_RESULT_BYTES = 16 * fileio.MiB  # a bandwidth result with its snapshot is ~0.2 MB
_DONE = object()


def _read_one(path: str, max_bytes: int) -> tuple[bytes, float]:
    # O_NONBLOCK: opening a FIFO must not wait for a writer; anything but a regular file is refused.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            raise OSError("not a regular file of the size allowed")
        data = os.read(fd, st.st_size + 1)
        while len(data) <= max_bytes and (more := os.read(fd, 1 << 20)):
            data += more
        if len(data) > max_bytes:
            raise OSError("grew past the size allowed")
        return data, st.st_mtime
    finally:
        os.close(fd)


def _reader(paths: list[Path], max_bytes: int, out: queue.SimpleQueue[Any]) -> None:
    for p in paths:
        try:
            out.put((p, *_read_one(str(p), max_bytes), None))
        except BaseException as exc:  # handed to the caller, who names the file
            out.put((p, None, None, exc))
    out.put(_DONE)


def read_files(
    paths: list[Path], what: str, max_bytes: int, timeout_s: float, deadline: float
) -> Iterator[tuple[Path, bytes | None, float | None, str | None]]:
    """(path, bytes, mtime, None) per file read, or (path, None, None, one-line error): each within
    ``timeout_s``, and none begun after ``deadline`` (time.monotonic)."""
    todo = list(paths)
    while todo:
        out: queue.SimpleQueue[Any] = queue.SimpleQueue()
        threading.Thread(target=_reader, args=(todo, max_bytes, out), name="read results", daemon=True).start()
        done = 0
        while done < len(todo):
            left = deadline - time.monotonic()
            if left <= 0:
                for p in todo[done:]:
                    yield p, None, None, f"{p}: not read, the budget for reading was spent"
                return
            try:
                item = out.get(timeout=min(timeout_s, left))
            except queue.Empty:
                p = todo[done]
                if deadline - time.monotonic() <= 0:
                    continue  # the budget, not the file: said as such above
                yield p, None, None, f"{what} {fileio.shown(p)}: not readable within {timeout_s:g} s (a hung mount?)"
                todo, done = todo[done + 1 :], 0
                break  # this reader is stuck in that file: a fresh one reads the rest
            if item is _DONE:
                return
            p, data, mtime, exc = item
            done += 1
            if exc is None:
                yield p, data, mtime, None
                continue
            try:  # the one place that words every read error the same way
                fileio.read_bytes(p, what, max_bytes, timeout_s)
            except InputError as err:
                yield p, None, None, str(err)
            else:
                yield p, None, None, f"cannot read {what} {fileio.shown(p)}: {type(exc).__name__}"
        else:
            return


def parse_document(data: bytes, what: str) -> Any:
    """A result's JSON, strict as ``fileio.parse_json`` is, without a hook on every number."""
    with json_errors(what):
        if not (text := decode.document(data, what, "", MAX_RESULT_BYTES)).strip():
            raise InputError(f"{what} is empty")
        return STRICT_DECODER.decode(text)


def result_files(paths: Iterable[str | Path], timeout_s: float) -> tuple[list[Path], list[Unreadable]]:
    """The files named and the ``*.json`` below the directories named, each once, in order; a
    path that cannot be listed is one ``Unreadable``."""
    files: list[Path] = []
    bad: list[Unreadable] = []
    for p in paths:
        path = Path(p)
        try:
            if path.is_dir():
                files.extend(fileio.list_files(path, "results directory", ".json", timeout_s=timeout_s))
            else:
                files.append(path)
        except InputError as exc:
            bad.append(Unreadable(str(path), str(exc)))
        except OSError as exc:  # is_dir() on a path we may not stat
            bad.append(Unreadable(str(path), f"cannot read {fileio.shown(path)}: {exc.strerror or type(exc).__name__}"))
    return list(dict.fromkeys(files)), bad


def read_results(
    paths: Iterable[str | Path],
    name_from: NameFrom = "host",
    budget_s: float = 60.0,
    judge: Callable[[Any, NodeResult], NodeResult] | None = None,
) -> tuple[list[NodeResult], list[Unreadable]]:
    """Read result files and directories (``*.json`` below them). Every failure is one
    ``Unreadable`` naming its file; past ``budget_s`` the files not yet read are listed so.
    ``judge`` (the decoded document, its result) judges a result saved without its findings."""
    deadline = time.monotonic() + budget_s
    files, bad = result_files(paths, fileio.DEFAULT_TIMEOUT_S)
    out: list[NodeResult] = []
    for path, data, mtime, error in read_files(files, "result", MAX_RESULT_BYTES, fileio.DEFAULT_TIMEOUT_S, deadline):
        guess = path.name.split(".", 1)[0]
        if error is not None:
            bad.append(Unreadable(str(path), error.replace("the budget", f"the {budget_s:g} s budget"), guess))
            continue
        try:
            what = f"result {path}"
            doc = parse_document(data or b"", what)
            got = parse_result(doc, path, name_from, mtime)
            out.append(judge(doc, got) if judge is not None else got)
        except InputError as exc:
            bad.append(Unreadable(str(path), str(exc), guess))
    return out, bad
