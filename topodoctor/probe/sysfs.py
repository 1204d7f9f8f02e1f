"""Reading /sys and /proc under an injectable root.

The probe sees the file system only through ``Sysfs``: text reads, binary reads (PCI config
space, as hex), directory listings and resolved links. ``LiveSysfs`` reads the real tree
(or a copy of one under ``root``); the recorder and replay fake in record.py / replay.py
implement the same four calls. Paths are always given as absolute host paths.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Protocol


class Sysfs(Protocol):
    """The file reads the probe makes; every implementation raises OSError as the real file system would."""

    def read(self, path: str) -> str:
        """File contents, stripped; raises OSError (FileNotFoundError, PermissionError, ...)."""
        ...

    def read_hex(self, path: str, limit: int) -> str:
        """The first ``limit`` bytes of a binary file, as lowercase hex."""
        ...

    def listdir(self, path: str) -> list[str]:
        """Sorted entry names; raises OSError."""
        ...

    def realpath(self, path: str) -> str:
        """The path with every link resolved, as an absolute host path; raises OSError."""
        ...

    def read_records(self, path: str, keep: str) -> list[str]:
        """The lines of a record device (/dev/kmsg) or a log file that contain ``keep``;
        never blocks; raises OSError."""
        ...


class LiveSysfs:
    """The real sysfs, or a copy of one under ``root`` (tests, ``--sysfs-root``)."""

    def __init__(self, root: str = "/") -> None:
        self.root = os.path.abspath(root)

    def _host(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def read(self, path: str) -> str:
        """File contents, stripped, bytes that are not UTF-8 replaced."""
        with open(self._host(path), encoding="utf-8", errors="replace") as f:
            return f.read().strip()

    def read_hex(self, path: str, limit: int) -> str:
        """The first ``limit`` bytes of a binary file, as lowercase hex."""
        with open(self._host(path), "rb") as f:
            return f.read(limit).hex()

    def listdir(self, path: str) -> list[str]:
        """Sorted entry names of a directory."""
        return sorted(os.listdir(self._host(path)))

    def realpath(self, path: str) -> str:
        """The path with every link resolved; under another root, a link that leaves it is absent."""
        host = self._host(path)
        if not os.path.lexists(host):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", path)
        real = os.path.realpath(host)
        if self.root != "/":
            rel = os.path.relpath(real, self.root)
            if rel.startswith(".."):
                raise FileNotFoundError(errno.ENOENT, "link leaves the sysfs root", path)
            return "/" + rel
        return real

    def read_records(self, path: str, keep: str) -> list[str]:
        """The lines of a record file (``/dev/kmsg``) that contain ``keep``, read without blocking."""
        return read_records(self._host(path), keep)


MAX_RECORDS = 1 << 18  # the kernel's ring buffer holds far fewer; a bound all the same
MAX_LOG_BYTES = 64 << 20


def read_records(host_path: str, keep: str) -> list[str]:
    """``/dev/kmsg`` answers one record per read() and blocks at the end unless opened
    non-blocking, so records are read until EAGAIN; EPIPE means the record was overwritten
    while reading, and the next read goes on with the oldest one left. A regular file (a
    saved log under a test root) is read whole, within a size bound."""
    fd = os.open(host_path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            with os.fdopen(os.dup(fd), "rb") as f:
                text = f.read(MAX_LOG_BYTES).decode("utf-8", errors="replace")
            return [line for line in text.splitlines() if keep in line]
        out: list[str] = []
        for _ in range(MAX_RECORDS):
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except BrokenPipeError:
                continue
            if not record:
                break
            out += [ln for ln in record.decode("utf-8", errors="replace").splitlines() if keep in ln]
        return out
    finally:
        os.close(fd)


class NotRecorded(OSError):
    """Replay only: the recording was made before the probe read this path."""


def os_error_name(exc: OSError) -> str:
    """A stable name for an OSError: ENOENT, EACCES, ... (NOT_RECORDED in a replay of a
    recording that never read the path)."""
    if isinstance(exc, NotRecorded):
        return "NOT_RECORDED"
    if exc.errno is not None and exc.errno in errno.errorcode:
        return errno.errorcode[exc.errno]
    return type(exc).__name__
