"""What a reporter's sentences say of how a job scales, as plain data: the speeds they state (step times,
throughputs, times to finish) with the GPUs and nodes each was measured on, the links they name in words
("10 Gb/s interconnect", "HDR InfiniBand", "no NVLink", "NVLink inactive"), and what they say of the
count of GPUs or nodes ("fine with 1 to 6 cards, slow with 7 or 8", "the more machines, the longer").
Read by ``evidence/scaling.py``, judged by ``diagnosis/evidence_scaling.py``. A claim is weaker evidence
than a tool's output; fields not stated stay empty (``None``, ``""``, ``False``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# What a speed measures: a rate (more is faster: samples/s, it/s, tokens/s, words/s, TFLOPS), one step's time
# (less is faster, the step's work fixed per GPU as frameworks keep it: s/it, ms per iteration, s per batch),
# or a fixed amount of work's time (an epoch, the whole run, an ETA: less is faster, and N GPUs share it).
SpeedKind = Literal["rate", "step", "total"]
# How the GPUs share the work, where the sentences name it: tensor parallel (activations exchanged every layer),
# data parallel (gradients all-reduced every step), sharded data parallel (ZeRO-3, FSDP: parameters gathered
# every step too), pipeline parallel.
Parallel = Literal["", "tensor", "data", "sharded", "pipeline"]
# A link as the words name it: between nodes (Ethernet, InfiniBand, EFA, RoCE, a network of no stated kind),
# inside a node (NVLink, PCIe).
LinkKind = Literal["ethernet", "infiniband", "efa", "roce", "network", "nvlink", "pcie"]


@dataclass(frozen=True)
class SpeedSaid:
    """One speed as a sentence states it, with where it was measured."""

    line: int  # 1-based, in the piece's input
    value: float  # in ``unit``
    unit: str  # normalised: "s/it", "it/s", "samples/s", "tokens/s", "words/s", "TFLOPS", "s" (a total)
    kind: SpeedKind
    text: str  # as written: "2.20s/it", "10K wps", "34 hours"
    per_gpu: bool = False  # stated per GPU ("30/s/gpu", "tokens/gpu/second")
    gpus: int | None = None  # GPUs it was measured on, where its sentence says
    nodes: int | None = None  # nodes it was measured on, where its sentence says
    sentence: str = ""  # cut to a few hundred characters


@dataclass(frozen=True)
class LinkSaid:
    """A link named in words, with its rate where stated."""

    line: int
    kind: LinkKind
    gbit_s: float | None = None  # one link's rate, Gb/s, where stated or fixed by the name (HDR: 200)
    absent: bool = False  # said to be missing or down ("no NVLink", "NVLink <inactive>")
    text: str = ""  # the words: "10Gbps interconnect", "HDR InfiniBand"


@dataclass(frozen=True)
class ScalingSaid:
    """What one input's sentences say of how the job scales with GPUs and nodes."""

    piece: int
    speeds: tuple[SpeedSaid, ...] = ()
    links: tuple[LinkSaid, ...] = ()
    worse_with_nodes: bool = False  # said slower, or no faster, as nodes are added (no figures needed)
    worse_with_gpus: bool = False  # said slower, or no faster, with more GPUs of one node than with fewer
    good_up_to: int | None = None  # a count sweep: normal with up to this many GPUs ...
    slow_from: int | None = None  # ... and slow from this many on
    slow_gpu: int | None = None  # a GPU said to be the slow or faulty one, its index as CUDA counts (from 0)
    slow_gpu_text: str = ""  # the words that name it: "my seventh card is problematic"
    parallel: Parallel = ""
    distributed: bool = False  # the sentences speak of a multi-GPU or multi-node run at all
    lines: tuple[int, ...] = ()  # the lines the claims come from, 1-based
