"""``bandwidth``'s request: every option of the command, declared once by the spec
(core/options.py). Light on purpose: the console entry point reads a ``bandwidth`` command line
with it before anything else loads (to fork the copy timer first), and the Python API builds the
same object from its keywords."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from topodoctor.core.options import option
from topodoctor.core.shared_options import (
    MEASURE_FORMATS,
    fail_level,
    fmt,
    metrics,
    output,
    picture,
    replay,
    strict,
    timeout,
)
from topodoctor.core.sizes import MAX_BYTES, parse_mib
from topodoctor.core.text import human_size
from topodoctor.model.copy_modes import COPY_MODES
from topodoctor.model.findings import Severity, fail_from


@dataclass(frozen=True)
class BandwidthRequest:
    """``bandwidth``: what to copy and how long, a saved result instead, and the outputs. The
    command line's options and the Python API's keywords (``topodoctor.bandwidth``) both build it;
    the service (service/copies.py ``measure``) runs it as it is."""

    matrix: bool = option("--matrix/--no-matrix", default=True, kind=bool, help="Print the pair matrices.")
    mode: tuple[str, ...] = option(
        "--mode",
        "-m",
        default=(),
        metavar="MODE",
        probes=True,
        choices=COPY_MODES,
        many=True,
        help="oneway, bidir, latency (copy engine), h2d, d2h or host (both), sm (SM kernels: sm-oneway, "
        "sm-bidir, sm-latency) or all (repeatable). Default: the copy engine's and the host's.",
    )
    quick: bool = option("--quick", default=False, kind=bool, help="A short pass sized for a prolog.")
    size_bytes: int | None = option(
        "--size",
        default=None,
        metavar="SIZE",
        parse=parse_mib,
        help=f"Buffer per copy: 256M, 1G, 64KiB (a bare number is MiB; at most {human_size(MAX_BYTES)}).",
    )
    iters: int | None = option("--iters", default=None, metavar="N", kind=int, minimum=1, help="Copies per sample.")
    samples: int | None = option("--samples", default=None, metavar="N", kind=int, minimum=1, help="Samples each.")
    devices: str | None = option("--devices", default=None, metavar="LIST", probes=True, help="NVML indices, e.g. 0,1.")
    sm_kernel: str | None = option(
        "--sm-kernel",
        default=None,
        metavar="NAME",
        probes=True,
        help="The SM copies' kernel (default stride-u4; nvbandwidth's: stride-u12).",
    )
    pair_timeout: float = option(
        "--pair-timeout", default=20.0, metavar="SECONDS", kind=float, minimum=0.1, help="When a copy counts as hung."
    )
    from_file: Path | None = option(
        "--from",
        default=None,
        metavar="FILE",
        kind=Path,
        probes=True,
        help="Judge a saved result instead of measuring, or p2pBandwidthLatencyTest / nvbandwidth output "
        "with --replay of the host it ran on.",
    )
    output: Path | None = output()
    heatmap: Path | None = picture("--heatmap", "the matrices")
    replay: str | None = replay()
    fmt: str = fmt(MEASURE_FORMATS, "text, json or prometheus.")
    metrics: Path | None = metrics()
    fail_level: str = fail_level()
    strict: bool = strict()
    timeout: float = timeout(900.0)

    @property
    def fails_from(self) -> Severity:
        """The lowest severity that fails the command (--fail-level, or warning with --strict)."""
        return fail_from(self.fail_level, self.strict)

    def early_timer(self) -> tuple[str, ...] | None:
        """The modes of the copy timer the entry point forks first of all (service/early_copies.py):
        its CUDA start then overlaps everything after. None where the command line narrows the GPUs
        or the kernel (the timer's hello waits for the probe), reads a saved result or a recording,
        or has no budget (no child at all)."""
        if self.devices is not None or self.sm_kernel is not None or self.timeout <= 0:
            return None
        return None if self.from_file is not None or self.replay is not None else self.mode
