"""The options of the commands that read what other tools left (nccl-log, diagnose): one frozen
object per command, each field one option (core/options.py); ``job``'s and ``fleet``'s are their
services' requests (service/request_job.py, fleet/request.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from topodoctor.core.options import argument
from topodoctor.core.shared_options import fail_level, fmt, strict, timeout


@dataclass(frozen=True)
class NcclLogArgs:
    """``nccl-log``: the logs to read, and how to judge them."""

    paths: tuple[Path, ...] = argument("FILE...", kind=Path, many=True)
    fmt: str = fmt(("text", "json"), "text, or json.")
    timeout: float = timeout(60.0)
    fail_level: str = fail_level()
    strict: bool = strict()


@dataclass(frozen=True)
class DiagnoseArgs:
    """``diagnose``: the evidence to read (files, directories, ``-`` for standard input), and how to judge it."""

    paths: tuple[Path, ...] = argument("PATH...", kind=Path, many=True)
    fmt: str = fmt(("text", "json", "line"), "text, json or line.")
    timeout: float = timeout(60.0)
    fail_level: str = fail_level()
    strict: bool = strict()
