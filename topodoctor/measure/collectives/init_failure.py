"""Why a rank's NCCL communicator did not come up, in one line: the exception's text (torch
carries NCCL's last error in it) and the rank's own NCCL log, explained as `topodoctor nccl-log`
explains any log. No torch here."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path

from topodoctor.core import fileio
from topodoctor.core.errors import InputError, TopodoctorError
from topodoctor.measure.collectives.guard import FAULT_ENV
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

MAX_LOG_BYTES = 16 << 20


class InitFailed(TopodoctorError):
    """A rank could not join the world (exit 3, could not check): ``reason`` says why and the fix."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"collectives could not start: {reason}")
        self.reason = reason


def init_fault(environ: Mapping[str, str], rank: int) -> str | None:
    """The test hook ``init:RANK:FILE`` (guard.FAULT_ENV): RANK fails to init with FILE's text
    as its exception, as a recorded NCCL failure reads."""
    for f in environ.get(FAULT_ENV, "").split(","):
        parts = f.split(":", 2)
        if len(parts) == 3 and parts[0] == "init" and parts[1] == str(rank):
            return parts[2]
    return None


def explain_init_failure(exc_text: str, log_path: str | None, environ: Mapping[str, str]) -> str:
    """One line: NCCL's failure class with its code and fix when the texts show one, else the
    exception's first line (a gloo or store error, which explains itself)."""
    texts = [("exception", exc_text)]
    if log_path and Path(log_path).is_file():
        with contextlib.suppress(InputError):  # the exception's own text still says what it says
            texts.append((log_path, fileio.read_bytes(log_path, "NCCL log", MAX_LOG_BYTES).decode("utf-8", "replace")))
    env = {k: v for k, v in environ.items() if k.startswith("NCCL_")}
    files = [parse_file(name, text) for name, text in texts]
    findings = [f for f in explain(files, env) if f.severity in ("error", "critical", "warning")]
    first = next((ln.strip() for ln in exc_text.splitlines() if ln.strip()), "no reason given")[:240]
    if not findings:
        return first
    f = findings[0]
    return f"NCCL: {f.message} ({f.code} {f.name}); {f.fix}"
