"""BandwidthResult: what the copy tester measured, as plain data (JSON round-trip).

GB/s means 1e9 bytes per second throughout. Rows are sources, columns destinations.
The runner measures and never judges; verdicts come from the rules.

Modes: ``oneway``, ``bidir`` and ``latency`` are the copy engine's (cuMemcpyPeerAsync; latency is
one small copy's round, as p2pBandwidthLatencyTest times it); ``sm_oneway`` and ``sm_bidir`` are
SM kernels copying across the link, the receiving GPU reading (nvbandwidth's
device_to_device_memcpy_read_sm and its bidirectional form); ``sm_latency`` is the load latency a
kernel on ``src`` sees reading memory of ``dst`` (a pointer chase, nvbandwidth's
device_to_device_latency_sm); ``h2d`` and ``d2h`` are host copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from topodoctor.core import codec
from topodoctor.core.stats import median
from topodoctor.model.during import RunSampling
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.model.stamp import Stamped

BANDWIDTH_SCHEMA_VERSION = 1

Path_ = Literal["p2p", "staged", "host", "unknown"]
Mode = Literal["oneway", "bidir", "latency", "h2d", "d2h", "sm_oneway", "sm_bidir", "sm_latency"]
PAIR_MODES: tuple[Mode, ...] = ("oneway", "bidir", "latency", "sm_oneway", "sm_bidir", "sm_latency")
LATENCY_MODES: tuple[Mode, ...] = ("latency", "sm_latency")
BOTH_WAYS_MODES: tuple[Mode, ...] = ("bidir", "sm_bidir")


@dataclass(frozen=True)
class Stats:
    """Samples of one measurement: median and spread ((max - min) / median)."""

    median: float
    min: float
    max: float
    samples: tuple[float, ...]

    @property
    def spread_pct(self) -> float:
        """The samples' range as a percentage of their median: how steady the measurement was."""
        return 100.0 * (self.max - self.min) / self.median if self.median else 0.0

    @staticmethod
    def of(samples: list[float]) -> Stats:
        """The median, minimum and maximum of a list of samples (kept, rounded, for the record)."""
        return Stats(median(samples), min(samples), max(samples), tuple(round(s, 4) for s in samples))


@dataclass(frozen=True)
class Measurement:
    """One timed copy between a source and a destination (a GPU, or the host) in one mode, or why
    it failed."""

    mode: Mode
    src: int  # NVML index; -1 for the host
    dst: int
    size_bytes: int
    value: Stats | None  # GB/s for bandwidth modes, microseconds for latency; None when it failed or was skipped
    path: Path_  # p2p: peer access on; staged: the driver copied through host memory
    nvlink_bytes: int | None  # bytes NVML's NVLink counters saw during the copies, where readable
    verified: bool | None  # data compared equal after the copies; None when not compared
    error: str | None  # "timeout after 20 s", "CUDA out of memory", ...
    reverse: Stats | None = None  # bidir: the dst -> src direction measured at the same time
    elapsed_s: float | None = None  # wall time of this measurement, set-up and checks included
    # why it was not measured where nothing failed: the driver cannot compile the SM kernels, the
    # pair has no peer access for a kernel to read through; never a verdict on the pair
    skipped: str | None = None


@dataclass(frozen=True)
class GpuIdentity:
    """A GPU as the copy worker saw it: NVML index, CUDA ordinal, bus id and name."""

    index: int  # NVML index
    cuda_ordinal: int  # in the worker, which runs with CUDA_DEVICE_ORDER=PCI_BUS_ID
    bus_id: str
    name: str


@dataclass(frozen=True)
class Activity:
    """What else ran on a GPU when measuring started (from NVML)."""

    index: int
    utilization_pct: int | None
    processes: int | None
    memory_used_bytes: int | None


@dataclass(frozen=True)
class BandwidthResult(Stamped):
    """What one run of the copy tester measured, with the settings, timings and the snapshot it ran on."""

    kind: Literal["bandwidth"]
    schema_version: int
    host: str
    torch_version: str
    cuda_version: str
    method: str  # which copy mechanism was timed
    gpus: tuple[GpuIdentity, ...]
    activity: tuple[Activity, ...]
    measurements: tuple[Measurement, ...]
    wall_s: float
    settings: dict[str, Any]
    snapshot: HostSnapshot | None = None  # the host as probed when measuring: --from needs no GPU
    # seconds per phase: python_start, worker_imports, waiting_for_imports (the part the probe
    # did not hide), cuda_init, contexts_and_peers, allocation, measurement, verification,
    # task_overhead, teardown, total_since_spawn
    timings: dict[str, float] = field(default_factory=dict)
    # when each step of the command was reached, seconds since its exec (where known): the
    # copy timer spawned and its CUDA ready, the probe done, the copies done
    timeline: dict[str, float] = field(default_factory=dict)
    during: RunSampling | None = None  # NVML while the copies ran; None: not sampled (older results)

    def find(self, mode: Mode, src: int, dst: int) -> Measurement | None:
        """The measurement of this mode from ``src`` to ``dst``, or None when it was not taken."""
        for m in self.measurements:
            if (m.mode, m.src, m.dst) == (mode, src, dst):
                return m
        return None

    def matrix(self, mode: Mode) -> dict[tuple[int, int], Measurement]:
        """Every measurement of one mode, keyed by (source, destination)."""
        return {(m.src, m.dst): m for m in self.measurements if m.mode == mode}


def result_to_json(r: BandwidthResult) -> str:
    """The result as JSON text, as ``bandwidth -o`` writes it."""
    return codec.dumps(r)


def load_result(path: Path | str) -> BandwidthResult:
    """Read a saved bandwidth result (``bandwidth -o``), its header checked."""
    data = codec.read_json(path, "bandwidth result")
    codec.check_header(data, "bandwidth", BANDWIDTH_SCHEMA_VERSION, f"bandwidth result {path}")
    return codec.from_jsonable(BandwidthResult, data, f"bandwidth result {path}")
