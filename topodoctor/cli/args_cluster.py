"""The options of ``nccl-log``: one frozen object, each field one option (core/options.py); ``job``'s,
``fleet``'s and ``diagnose``'s are their services' requests (service/request_job.py,
fleet/request.py, service/request_diagnose.py)."""

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
