"""The Prometheus output of `topodoctor collectives`. No torch here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from topodoctor.cli.io import Outputs
from topodoctor.report.prometheus import collectives_metrics, write_textfile


def emit_metrics(out: Any, path: Path | None, outputs: Outputs, stdout: bool = False) -> None:
    """The run's metrics in Prometheus' text format: to ``path`` (through ``outputs``, which
    keeps a failed write for after the verdict), and/or stdout."""
    res, findings = out.result, list(out.findings)
    text = collectives_metrics(res.host, res.rows, findings, out.exit_code, elapsed_s=res.wall_s, snapshot=res.snapshot)
    if path is not None:
        outputs.write(lambda: write_textfile(path, text))
    if stdout:
        outputs.env.write(text)
