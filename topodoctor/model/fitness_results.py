"""FitnessResult: what the fitness tests measured, as plain data (JSON round-trip) beside the
snapshot. GB/s are 1e9 bytes per second of bytes copied (counted once, as nvbandwidth counts
them); TFLOP/s are 1e12 floating-point operations per second; latency is in nanoseconds.
Nothing here judges: the rules in topodoctor/rules/fitness_measured.py do."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from topodoctor.core import codec
from topodoctor.model.copies import Activity, GpuIdentity, Stats
from topodoctor.model.during import RunSampling
from topodoctor.model.fitness import CLOCK_EVENT_REASONS
from topodoctor.model.stamp import Stamped

FITNESS_SCHEMA_VERSION = 1
HOST = -1  # src / dst of a figure that is host memory

Kind = Literal["hbm", "compute", "sm_copy", "latency"]
Initiator = Literal["ce", "sm", "pull", "push", "bf16"]

# nvmlClocksEventReasons bits (nvml.h): the probe's table, one for the whole package
REASON_NAMES = CLOCK_EVENT_REASONS
HW_SLOWDOWN_BITS = 0x8 | 0x20 | 0x40 | 0x80  # a GPU held back by something other than its power budget


def reason_names(bits: int) -> list[str]:
    """The names of NVML's clock-event reason bits set in ``bits``."""
    return [name for bit, name in REASON_NAMES.items() if bits & bit]


@dataclass(frozen=True)
class GpuLimits:
    """A GPU's own limits from NVML, read when measuring."""

    index: int
    sm_mhz_max: int | None
    mem_mhz_max: int | None
    bus_width_bits: int | None
    power_limit_w: float | None
    hbm_peak_gbps: float | None  # memory traffic at most (read + write): bus width x max clock x 2


@dataclass(frozen=True)
class Figure:
    """One measured number with its samples.

    ``hbm``: a device-local copy on GPU ``src`` (= ``dst``), by the copy engine (``ce``) or
    the copy kernel (``sm``). ``compute``: bf16 GEMM on GPU ``src``. ``sm_copy``: the copy
    kernel moving ``src`` -> ``dst`` (-1 the host), run by the receiver (``pull``) or the
    sender (``push``); ``bidir`` with the reverse at the same time in ``reverse``.
    ``latency``: a pointer chase from GPU ``src`` into memory of ``dst`` (-1 host memory).
    ``refused``: not measured on purpose (GPU busy, kernels or torch missing): could not check.
    """

    kind: Kind
    src: int
    dst: int
    initiator: Initiator
    value: Stats | None
    unit: Literal["GB/s", "TFLOP/s", "ns"]
    verified: bool | None = None
    error: str | None = None
    refused: bool = False
    bidir: bool = False
    reverse: Stats | None = None
    size_bytes: int = 0
    elapsed_s: float | None = None

    @property
    def subject(self) -> str:
        """The finding subject this figure is about: one GPU, or a GPU pair for copies between GPUs."""
        if self.kind in ("hbm", "compute"):
            return f"GPU{self.src}"
        if self.src == HOST:
            return f"GPU{self.dst}"
        if self.dst == HOST:
            return f"GPU{self.src}"
        return f"GPU{self.src}-GPU{self.dst}"

    @property
    def label(self) -> str:
        """``hbm ce``, ``sm_copy pull bidir``..., for messages and metric labels."""
        return " ".join([self.kind, self.initiator] + (["bidir"] if self.bidir else []))


@dataclass(frozen=True)
class Stress:
    """NVML readings of one GPU while the GEMM loaded every GPU."""

    index: int
    samples: int
    sm_mhz_median: float | None
    sm_mhz_min: int | None
    power_w_max: float | None
    temp_c_max: int | None
    reasons_seen: int  # every clock-event reason bit seen in any sample
    reason_samples: dict[str, int] = field(default_factory=dict)  # reason name -> samples it was active in


@dataclass(frozen=True)
class FitnessResult(Stamped):
    """What one fitness run measured: per-GPU limits, the figures, the GEMM stress and what failed."""

    kind: Literal["fitness"]
    schema_version: int
    host: str
    level: str
    method: str
    gpus: tuple[GpuIdentity, ...]
    limits: tuple[GpuLimits, ...]
    activity: tuple[Activity, ...]
    figures: tuple[Figure, ...]
    stress: tuple[Stress, ...]
    wall_s: float
    errors: tuple[str, ...] = ()  # the run as a whole could not measure: why
    settings: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    during: RunSampling | None = None  # NVML while the kernels ran; None: not sampled (older results)

    def of(self, kind: Kind, initiator: str | None = None, bidir: bool | None = None) -> list[Figure]:
        """The figures of one kind, narrowed to an initiator and a direction where given."""
        return [
            f
            for f in self.figures
            if f.kind == kind
            and (initiator is None or f.initiator == initiator)
            and (bidir is None or f.bidir == bidir)
        ]

    def limit(self, index: int) -> GpuLimits | None:
        """The NVML limits read for the GPU with this index, or None when they were not read."""
        return next((g for g in self.limits if g.index == index), None)


def result_to_json(r: FitnessResult) -> str:
    """The result as JSON text."""
    return codec.dumps(r)


def load_result(path: Path | str) -> FitnessResult:
    """Read a saved fitness result, its header checked."""
    data = codec.read_json(path, "fitness result")
    codec.check_header(data, "fitness", FITNESS_SCHEMA_VERSION, f"fitness result {path}")
    return codec.from_jsonable(FitnessResult, data, f"fitness result {path}")
