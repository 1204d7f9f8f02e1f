"""Reading files the user names, and writing files, without hanging, exhausting memory or
leaving half a file behind.

A prolog hands us paths it does not control: a FIFO, ``/dev/zero``, a directory, a file on a
hung NFS mount, a 50 MB blob, JSON nested 10,000 deep or holding NaN. Every such read goes
through ``read_bytes``: only regular files, at most ``max_bytes``, within ``timeout_s``, each
failure one ``InputError`` line. Every file we write goes through ``write_atomic``: a regular
file is replaced whole (a temporary file, then a rename), never a device, FIFO or link: those
are written through, bounded in time.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import select
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from topodoctor.core import decode
from topodoctor.core.errors import InputError, OutputLost, WriteError
from topodoctor.core.json_errors import json_errors, no_constant

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


TIMED_OUT = TimeoutError("timed out")


def within(timeout_s: float, name: str, fn: Callable[[], T]) -> tuple[T | None, BaseException | None]:
    """``fn()`` on a daemon thread: (its value, None), (None, what it raised), or (None,
    TIMED_OUT) when it is still running after ``timeout_s``; the thread is then abandoned
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
        return None, TIMED_OUT
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
    data, exc = within(timeout_s, f"read {p}", lambda: _read(p, max_bytes))
    if exc is TIMED_OUT:
        raise InputError(f"{what} {shown(p)}: not readable within {timeout_s:g} s (a hung mount or device?)")
    if exc is None and data is not None:
        return data
    if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
        raise InputError(f"cannot read {what} {shown(p)}: symbolic link loop")
    if isinstance(exc, FileNotFoundError):
        raise InputError(f"{what} not found: {shown(p)}")
    if isinstance(exc, IsADirectoryError):
        raise InputError(f"{what} is a directory, not a file: {shown(p)}")
    if isinstance(exc, _NotRegular):
        raise InputError(f"{what} is not a regular file (a FIFO, socket or device?): {shown(p)}")
    if isinstance(exc, _TooBig):
        raise InputError(
            f"{what} is larger than {max_bytes // MiB or max_bytes} {'MiB' if max_bytes >= MiB else 'B'}: {shown(p)}"
        )
    if isinstance(exc, OSError):
        reason = exc.strerror or type(exc).__name__
        raise InputError(f"cannot read {what} {shown(p)}: {reason}")
    raise InputError(f"cannot read {what} {shown(p)}: {type(exc).__name__}")


def read_text(
    path: Path | str, what: str, max_bytes: int = DEFAULT_MAX_BYTES, timeout_s: float = DEFAULT_TIMEOUT_S
) -> str:
    """A regular file as text (see ``read_bytes``): UTF-8, or UTF-16/32 by its byte-order mark, and
    decompressed where it is compressed (``decode.document``); undecodable bytes are an input error."""
    return decode.document(read_bytes(path, what, max_bytes, timeout_s), what, shown(path), max_bytes)


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
    with json_errors(what):
        data = json.loads(text, parse_constant=no_constant, parse_int=_int, parse_float=_float)
    try:
        _depth(data, max_depth)
    except ValueError as exc:
        raise InputError(f"{what} is {exc}") from None
    return data


def read_json(
    path: Path | str, what: str, max_bytes: int = DEFAULT_MAX_BYTES, timeout_s: float = DEFAULT_TIMEOUT_S
) -> Any:
    """Load a JSON document from a user-named file, bounded and strict (see ``parse_json``)."""
    if not (text := read_text(path, what, max_bytes, timeout_s)).strip():
        raise InputError(f"{what} {shown(path)} is empty")
    return parse_json(text, f"{what} {path}")


def dumps_strict(data: Any, **kwargs: Any) -> str:
    """JSON text that never carries NaN or Infinity (a ValueError is our bug, not the user's)."""
    return json.dumps(data, allow_nan=False, **kwargs)


WRITE_TIMEOUT_S = 5.0  # how long a FIFO or device may keep us waiting for a reader, or for room
_MAX_LINKS = 40  # the kernel's own limit on symbolic links in one lookup
_FD_ALIAS = re.compile(r"/(?:dev/fd|proc/self/fd|proc/(\d+)/fd)/(\d+)")
_write_deadline: ContextVar[float | None] = ContextVar("write_deadline", default=None)


@contextlib.contextmanager
def write_deadline(deadline: float | None) -> Iterator[None]:
    """Writes in the block wait for a reader until ``deadline`` (monotonic) at most: a
    command's budget covers the files it writes, a FIFO nobody reads included."""
    token = _write_deadline.set(deadline)
    try:
        yield
    finally:
        _write_deadline.reset(token)


def write_atomic(path: Path | str, text: str | bytes, what: str = "output", timeout_s: float | None = None) -> None:
    """Write ``text`` to the file the user named, by what is at ``path``; every writer uses this.

    Nothing or a regular file: a temporary file in the same directory renamed over it (a
    collector sees the old file or the new, never a torn one), keeping a replaced file's mode
    and, where we may, its owner; 0644 under the umask when new. A symbolic link: its final
    target, so written in its own directory. ``-``, /dev/stdout, /dev/fd/N, a character device,
    a FIFO: written through, never replaced, as long as the reader takes data at least every
    ``timeout_s`` (``WRITE_TIMEOUT_S``) and within ``write_deadline``. Anything else: refused.

    A failure is one ``WriteError`` line, "cannot write PATH: reason" (exit 2; ``what`` is the
    caller's word for the file); standard output that refuses it is ``OutputLost`` (exit 3).
    """
    del what  # the path is what the user knows the file by
    name = str(path)
    stall, limit = WRITE_TIMEOUT_S if timeout_s is None else timeout_s, _write_deadline.get()
    data = text.encode("utf-8", "backslashreplace") if isinstance(text, str) else text
    try:
        target = _final_target(name)
        if target == 1:
            return _to_stdout(data)
        if isinstance(target, int):
            return _stream(target, data, stall, limit)
        st = os.lstat(target) if os.path.lexists(target) else None
        if st is None or stat.S_ISREG(st.st_mode):
            _replace(target, st, data)
        elif stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            opened_by = min(time.monotonic() + stall, limit if limit is not None else math.inf)
            fd = _open_stream(target, stat.S_ISFIFO(st.st_mode), opened_by)
            try:
                _stream(fd, data, stall, limit)
            finally:
                os.close(fd)
        else:
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a file (a block device or socket)"
            raise OSError(errno.EINVAL, f"it is {kind}")
    except OSError as exc:
        reason = "symbolic link loop" if exc.errno == errno.ELOOP else exc.strerror or type(exc).__name__
        raise WriteError(f"cannot write {shown(name)}: {reason}") from None


def shown(path: Path | str, limit: int = 240) -> str:
    """A path for a one-line message: whole, or its two ends around ``...`` when longer than ``limit``."""
    text = str(path)
    return text if len(text) <= limit else f"{text[: limit // 2]}...{text[-(limit // 2 - 3) :]}"


def _final_target(name: str) -> str | int:
    """The path a write lands on, symbolic links followed one at a time, or the descriptor
    that /dev/stdout, /dev/fd/N or /proc/self/fd/N stand for: resolving those further would
    name a pipe or terminal, or swap the shell's file for another behind its back."""
    if name == "-":
        return 1
    p = os.path.abspath(name)
    for _ in range(_MAX_LINKS):
        m = _FD_ALIAS.fullmatch(p)
        if m and (m.group(1) is None or int(m.group(1)) == os.getpid()):
            return int(m.group(2))
        try:
            if not stat.S_ISLNK(os.lstat(p).st_mode):
                return p
        except FileNotFoundError:
            return p  # a new file, or a missing directory that _replace names
        p = os.path.join(os.path.realpath(os.path.dirname(p)), os.readlink(p))
    raise OSError(errno.ELOOP, "symbolic link loop")


def _replace(target: str, st: os.stat_result | None, data: bytes) -> None:
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        why = f"{shown(directory)} is not a directory" if os.path.lexists(directory) else "no such directory"
        raise OSError(errno.ENOENT, why)
    if st is not None and not os.access(target, os.W_OK, effective_ids=os.access in os.supports_effective_ids):
        if os.statvfs(directory).f_flag & os.ST_RDONLY:  # access() says no for a read-only filesystem too
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        raise PermissionError(errno.EACCES, "Permission denied")  # a read-only file stays as it is
    # The temporary's name is bounded (the target's own may be near NAME_MAX); a new file's
    # mode is 0644 under the umask, as the kernel applies it (mkstemp's 0600 hides it from a
    # collector running as another user).
    tmp = os.path.join(directory, f".{os.path.basename(target)[:64]}.{os.urandom(6).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if st is not None:
            with contextlib.suppress(OSError):  # only root may give a file away; others keep their own
                os.chown(tmp, st.st_uid, st.st_gid)
            os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, target)
    except BaseException:  # a full disk, or a budget alarm or signal mid-write
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _open_stream(path: str, fifo: bool, deadline: float) -> int:
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    while True:
        try:
            return os.open(path, flags)
        except OSError as exc:  # a FIFO without a reader refuses a non-blocking open: wait for one
            if not (fifo and exc.errno == errno.ENXIO):
                raise
            if time.monotonic() >= deadline:
                raise OSError(errno.ETIMEDOUT, "no reader opened the FIFO in time") from None
        time.sleep(0.02)


def _stream(fd: int, data: bytes, stall_s: float, limit: float | None) -> None:
    """All of ``data`` into ``fd``, the reader taking some every ``stall_s``, by ``limit``. Each write
    waits for room and is at most PIPE_BUF: a descriptor we did not open (blocking) never blocks."""
    view = memoryview(data)
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    while view:
        wait = stall_s if limit is None else min(stall_s, limit - time.monotonic())
        if not poller.poll(max(0, int(wait * 1000))):
            raise OSError(errno.ETIMEDOUT, "the reader took no more data in time")
        try:
            view = view[os.write(fd, view[: select.PIPE_BUF]) :]
        except BlockingIOError:
            continue


def _to_stdout(data: bytes) -> None:
    """Standard output, in order with what was printed through it before."""
    stream: Any = sys.stdout
    try:
        stream.flush()
        raw = getattr(stream, "buffer", stream)  # a text-only stream is a test's capture
        raw.write(data if raw is not stream else data.decode("utf-8", "backslashreplace"))
        raw.flush()
    except BrokenPipeError:
        silence_stdout()  # the reader left: nothing more to say, and no error
    except OSError as exc:
        raise OutputLost(f"cannot write to standard output: {exc.strerror or type(exc).__name__}") from None


def silence_stdout() -> None:
    """Point descriptor 1 at /dev/null: a reader that left (``| head -1``) stops every later
    write, and the final flush, from failing."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def list_files(
    directory: Path | str,
    what: str,
    suffix: str | tuple[str, ...],
    max_files: int = 100_000,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> list[Path]:
    """Regular files under ``directory`` (recursively) whose names end in ``suffix`` (or one of them), sorted.

    Bounded like ``read_bytes``: a directory on a wedged mount costs ``timeout_s``, a tree of
    more than ``max_files`` matches is refused, and symbolic links to directories are not
    followed (a loop would never end).
    """
    p = str(directory)

    def walk() -> list[Path]:
        found: list[Path] = []
        for root, _dirs, files in os.walk(p, onerror=lambda exc: _raise(exc, p)):
            for name in files:
                # Dot-files are skipped: write_atomic's temporaries are named ".NAME.*.tmp".
                if name.endswith(suffix) and not name.startswith("."):
                    found.append(Path(root) / name)
                    if len(found) > max_files:
                        raise _TooBig(p)
        return sorted(found)

    files, exc = within(timeout_s, f"list {p}", walk)
    if exc is TIMED_OUT:
        raise InputError(f"{what} {p}: not listable within {timeout_s:g} s (a hung mount?)")
    if isinstance(exc, _TooBig):
        raise InputError(
            f"{what} {p} holds more than {max_files} {'*' + suffix if isinstance(suffix, str) else ''} files"
        )
    if isinstance(exc, OSError):
        raise InputError(f"cannot list {what} {p}: {exc.strerror or type(exc).__name__}")
    if exc is not None:
        raise InputError(f"cannot list {what} {p}: {type(exc).__name__}")
    return files or []


def _raise(exc: OSError, top: str) -> None:
    if not isinstance(exc, FileNotFoundError) or exc.filename == top:  # a subdirectory removed mid-walk: empty
        raise exc
