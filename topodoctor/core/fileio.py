"""Reading files the user names, and writing files, without hanging, exhausting memory or
leaving half a file behind.

A prolog hands us paths it does not control: a FIFO, ``/dev/zero``, a directory, a file on a
hung NFS mount, a 50 MB blob, JSON nested 10,000 deep or holding NaN. Every such read goes
through ``read_bytes``: only regular files, at most ``max_bytes``, within ``timeout_s``, each
failure one ``InputError`` line. Every file we write goes through ``write_atomic``: a
temporary file in the same directory, flushed, then renamed over the target, so a reader (a
textfile collector, the next job) sees the old file or the new one, never a torn one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from topodoctor.core.errors import InputError

T = TypeVar("T")
MiB = 1 << 20
DEFAULT_MAX_BYTES = 64 * MiB
DEFAULT_TIMEOUT_S = 5.0
MAX_JSON_DEPTH = 64  # our documents nest about 8 deep; json's own guard is ~1000 and costs a RecursionError
MAX_INT_DIGITS = 30  # no count, byte size or counter we store needs more


def _read(path: str, max_bytes: int) -> bytes:
    # O_NONBLOCK: opening a FIFO for reading must not wait for a writer; we refuse it below.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(st.st_mode):
            raise _NotRegular(path)
        if st.st_size > max_bytes:
            raise _TooBig(path)
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise _TooBig(path)
        return data
    finally:
        os.close(fd)


_TIMED_OUT = TimeoutError("timed out")


def _within(timeout_s: float, name: str, fn: Callable[[], T]) -> tuple[T | None, BaseException | None]:
    """``fn()`` on a daemon thread: (its value, None), (None, what it raised), or (None,
    _TIMED_OUT) when it is still running after ``timeout_s``; the thread is then abandoned
    (NFS waits are killable, so it dies with the process)."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=work, name=name, daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        return None, _TIMED_OUT
    return box.get("value"), box.get("error")


class _NotRegular(OSError):
    pass


class _TooBig(OSError):
    pass


def read_bytes(
    path: Path | str, what: str, max_bytes: int = DEFAULT_MAX_BYTES, timeout_s: float = DEFAULT_TIMEOUT_S
) -> bytes:
    """The bytes of a regular file, bounded in size and time; ``InputError`` otherwise.

    The read runs on a daemon thread so that a file on a wedged mount costs ``timeout_s``,
    not forever: the thread is abandoned (NFS waits are killable, so it dies with the process).
    """
    p = str(path)
    data, exc = _within(timeout_s, f"read {p}", lambda: _read(p, max_bytes))
    if exc is _TIMED_OUT:
        raise InputError(f"{what} {p}: not readable within {timeout_s:g} s (a hung mount or device?)")
    if exc is None and data is not None:
        return data
    if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
        raise InputError(f"cannot read {what} {p}: symbolic link loop")
    if isinstance(exc, FileNotFoundError):
        raise InputError(f"{what} not found: {p}")
    if isinstance(exc, IsADirectoryError):
        raise InputError(f"{what} is a directory, not a file: {p}")
    if isinstance(exc, _NotRegular):
        raise InputError(f"{what} is not a regular file (a FIFO, socket or device?): {p}")
    if isinstance(exc, _TooBig):
        raise InputError(
            f"{what} is larger than {max_bytes // MiB or max_bytes} {'MiB' if max_bytes >= MiB else 'B'}: {p}"
        )
    if isinstance(exc, OSError):
        reason = exc.strerror or type(exc).__name__
        raise InputError(f"cannot read {what} {p}: {reason}")
    raise InputError(f"cannot read {what} {p}: {type(exc).__name__}")


def read_text(
    path: Path | str, what: str, max_bytes: int = DEFAULT_MAX_BYTES, timeout_s: float = DEFAULT_TIMEOUT_S
) -> str:
    """A regular file as UTF-8 text (see ``read_bytes``); undecodable bytes are an input error."""
    data = read_bytes(path, what, max_bytes, timeout_s)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):  # 1e400 parses as infinity
        raise ValueError(f"{text[:20]} is not a finite number")
    return value


def _depth(data: Any, limit: int) -> None:
    stack = [(data, 1)]
    while stack:
        node, d = stack.pop()
        if d > limit:
            raise ValueError(f"nested more than {limit} deep")
        if isinstance(node, dict):
            stack.extend((v, d + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, d + 1) for v in node)


def parse_json(text: str, what: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON: no NaN / Infinity (nor 1e400), no integer of more than 30 digits, bounded nesting."""
    try:
        data = json.loads(text, parse_constant=_no_constant, parse_int=_int, parse_float=_float)
    except json.JSONDecodeError as exc:
        raise InputError(f"{what} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})") from None
    except ValueError as exc:
        raise InputError(f"{what} is not acceptable JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{what} is nested too deeply") from None
    try:
        _depth(data, max_depth)
    except ValueError as exc:
        raise InputError(f"{what} is {exc}") from None
    return data


def read_json(
    path: Path | str, what: str, max_bytes: int = DEFAULT_MAX_BYTES, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Any:
    """Load a JSON document from a user-named file, bounded and strict (see ``parse_json``)."""
    return parse_json(read_text(path, what, max_bytes, timeout_s), f"{what} {path}")


def dumps_strict(data: Any, **kwargs: Any) -> str:
    """JSON text that never carries NaN or Infinity (a ValueError is our bug, not the user's)."""
    return json.dumps(data, allow_nan=False, **kwargs)


def write_atomic(path: Path | str, text: str | bytes, what: str = "output") -> None:
    """Write ``text`` to ``path`` through a temporary file in the same directory and a rename.

    A full disk or a killed process leaves the previous file (or none), never a partial one.
    ``-`` writes to standard output instead.
    """
    if str(path) == "-":
        sys.stdout.write(text if isinstance(text, str) else text.decode("utf-8"))
        sys.stdout.flush()
        return
    p = Path(path)
    data = text.encode("utf-8") if isinstance(text, str) else text
    directory = p.parent if str(p.parent) else Path(".")
    try:
        if p.is_dir():
            raise IsADirectoryError(str(p))
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise InputError(f"cannot write {what} {p}: {exc.strerror or type(exc).__name__}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(OSError):
            # mkstemp makes 0600; a result file is meant to be read by others (collectors, admins).
            os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, p)
    except BaseException as exc:  # a full disk, or a budget alarm or signal mid-write
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise InputError(f"cannot write {what} {p}: {exc.strerror or type(exc).__name__}") from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def list_files(
    directory: Path | str, what: str, suffix: str, max_files: int = 100_000, timeout_s: float = DEFAULT_TIMEOUT_S
) -> list[Path]:
    """Regular files under ``directory`` (recursively) whose names end in ``suffix``, sorted.

    Bounded like ``read_bytes``: a directory on a wedged mount costs ``timeout_s``, a tree of
    more than ``max_files`` matches is refused, and symbolic links to directories are not
    followed (a loop would never end).
    """
    p = str(directory)

    def walk() -> list[Path]:
        found: list[Path] = []
        for root, _dirs, files in os.walk(p, onerror=_raise):
            for name in files:
                # Dot-files are skipped: write_atomic's temporaries are named ".NAME.*.tmp".
                if name.endswith(suffix) and not name.startswith("."):
                    found.append(Path(root) / name)
                    if len(found) > max_files:
                        raise _TooBig(p)
        return sorted(found)

    files, exc = _within(timeout_s, f"list {p}", walk)
    if exc is _TIMED_OUT:
        raise InputError(f"{what} {p}: not listable within {timeout_s:g} s (a hung mount?)")
    if isinstance(exc, _TooBig):
        raise InputError(f"{what} {p} holds more than {max_files} *{suffix} files")
    if isinstance(exc, OSError):
        raise InputError(f"cannot list {what} {p}: {exc.strerror or type(exc).__name__}")
    if exc is not None:
        raise InputError(f"cannot list {what} {p}: {type(exc).__name__}")
    return files or []


def _raise(exc: OSError) -> None:
    raise exc
