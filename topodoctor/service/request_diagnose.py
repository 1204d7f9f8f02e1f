"""``diagnose``'s request: every option of the command, declared once by the spec (core/options.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from topodoctor.core.options import argument
from topodoctor.core.shared_options import fail_level, fmt, strict, timeout
from topodoctor.model.findings import Severity, fail_from


@dataclass(frozen=True)
class DiagnoseRequest:
    """``diagnose``: the evidence to read (files, directories, ``-`` for standard input), and how to
    judge it. The command line's options and the Python API's keywords (``topodoctor.diagnose``)
    both build it."""

    paths: tuple[Path, ...] = argument("PATH...", kind=Path, many=True)
    fmt: str = fmt(("text", "json", "line"), "text, json or line.")
    timeout: float = timeout(60.0)
    fail_level: str = fail_level()
    strict: bool = strict()

    @property
    def fails_from(self) -> Severity:
        """The lowest severity that fails the command (--fail-level, or warning with --strict)."""
        return fail_from(self.fail_level, self.strict)
