"""``scan``'s request: every option of the command, declared once by the spec (core/options.py).
Light on purpose: the console entry point reads a ``scan`` command line with it before anything
else loads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from topodoctor.core.options import option
from topodoctor.core.shared_options import fmt, picture, replay, sysfs_root, timeout
from topodoctor.service.passes import Source


@dataclass(frozen=True)
class ScanRequest:
    """``scan``: the host, how to print it, and the files to write. The command line's options and
    the Python API's keywords (``topodoctor.scan``) both build it."""

    replay: str | None = replay()
    fmt: str = fmt(("text", "json"), "text or json.", probes=True)
    export_graph: Path | None = option(
        "--export-graph",
        default=None,
        metavar="FILE",
        kind=Path,
        probes=True,
        help="Write the topology graph: .graphml, .dot or .json.",
    )
    draw: Path | None = picture("--draw", "it, with the findings marked", probes=True)
    sysfs_root: str = sysfs_root()
    timeout: float = timeout(60.0)

    def source(self) -> Source:
        """The host to probe. The text shows no fitness reading, so a text scan with no file to
        write reads the topology alone (half the NVML calls)."""
        return Source(
            self.replay, self.sysfs_root, self.fmt == "text" and self.draw is None and self.export_graph is None
        )

    def early_source(self) -> Source | None:
        """What the early probe reads for this command line: its host, or None with no budget
        (``--timeout 0`` promises no child process)."""
        return self.source() if self.timeout > 0 else None
