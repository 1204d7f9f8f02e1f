"""Reading /sys and /proc under an injectable root.

The probe sees the file system only through ``Sysfs``: text reads, binary reads (PCI config
space, as hex), directory listings and resolved links. ``LiveSysfs`` reads the real tree
(or a copy of one under ``root``); the recorder and replay fake in record.py / replay.py
implement the same four calls. Paths are always given as absolute host paths.
"""

from __future__ import annotations

import errno
import os
from typing import Protocol


class Sysfs(Protocol):
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


class LiveSysfs:
    def __init__(self, root: str = "/") -> None:
        self.root = os.path.abspath(root)

    def _host(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def read(self, path: str) -> str:
        with open(self._host(path), encoding="utf-8", errors="replace") as f:
            return f.read().strip()

    def read_hex(self, path: str, limit: int) -> str:
        with open(self._host(path), "rb") as f:
            return f.read(limit).hex()

    def listdir(self, path: str) -> list[str]:
        return sorted(os.listdir(self._host(path)))

    def realpath(self, path: str) -> str:
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


def os_error_name(exc: OSError) -> str:
    """A stable name for an OSError: ENOENT, EACCES, ..."""
    if exc.errno is not None and exc.errno in errno.errorcode:
        return errno.errorcode[exc.errno]
    return type(exc).__name__
