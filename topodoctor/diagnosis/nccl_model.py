"""What busbw NCCL's own model leaves a run under a setting: its tuning constants (``src/graph/
tuning.cc``, NCCL 2.28) applied to the topology's model of the plateau (topology/busbw.py).

Each function answers "if this setting were the only thing wrong, what would busbw be?", so the cause
engine can say how much of a shortfall the setting explains. Pure functions of plain values.
"""

from __future__ import annotations

from topodoctor.model.snapshot import HostSnapshot

# tuning.cc's algorithm and protocol names (NCCL_ALGO / NCCL_PROTO take them, case-blind)
ALGORITHMS = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTOCOLS = ("LL", "LL128", "Simple")
# tuning.cc ncclTopoTuneModel: the algorithms each collective can run with (broadcast and reduce
# only as a ring; all_gather and reduce_scatter never as a tree; all_reduce never as PAT).
ALGORITHMS_FOR = {
    "broadcast": ("Ring",),
    "reduce": ("Ring",),
    "all_gather": ("Ring", "PAT", "NVLS", "CollNetDirect"),
    "reduce_scatter": ("Ring", "PAT", "NVLS", "CollNetDirect"),
    "all_reduce": ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree"),
}
# NCCL's function names as NCCL_ALGO's per-operation form writes them ("allreduce:tree,ring")
FUNCTION_OF = {
    "broadcast": "broadcast",
    "reduce": "reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "allreduce": "all_reduce",
}
COLLECTIVES = tuple(ALGORITHMS_FOR)  # sendrecv and all_to_all are point-to-point: no ALGO / PROTO
# tuning.cc llMaxBws, one node, by architecture (Volta, Ampere, Hopper, Blackwell): the most busbw
# NCCL credits the LL protocol with; and ring LL carries half of what Simple does (busBw x .5).
LL_MAX_GBPS = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 282.0}
LL_SHARE = 0.5
# tuning.cc: ring LL128 busBw x 0.92 (120 of 128 bytes are data), at most nChannels x perChMaxRingLL128Bw
LL128_SHARE = 0.92
LL128_PER_CHANNEL_GBPS = {"volta": 20.0, "ampere": 20.0, "hopper": 36.7, "blackwell": 73.4}
TREE_LL_SHARE = 1.0 / 3.8
# init.cc DEFAULT_BUFFSIZE and NCCL_STEPS: Simple moves a channel's data in steps of BUFFSIZE / 8
DEFAULT_BUFFSIZE = 4 << 20
NCCL_STEPS = 8
# tuning.cc hwLatencies, NVLink, ring / Simple: what NCCL charges each step of a ring (us)
STEP_LATENCY_US = 3.4
# device.h NCCL_SIMPLE_MAX_NTHREADS: the threads per block NCCL uses for Simple on NVLink-class bandwidth
DEFAULT_NTHREADS = 512
# The bandwidth per channel NCCL's ring search settles on for the NVSwitch hosts (its GRAPH log line,
# docs/benchmarks.md, "The figures behind constants"); connect.cc doubles the channels after the
# search: the default channel count is about twice the ring bandwidth over this.
SEARCH_CHANNEL_GBPS = 30.0


def arch_of(snap: HostSnapshot) -> str | None:
    """NCCL's architecture class of the host's slowest GPU (tuning.cc's compCapIndex), or None."""
    caps = []
    for g in snap.gpus:
        cc = g.compute_capability
        if isinstance(cc, str) and cc.split(".", 1)[0].isdigit():
            caps.append(int(cc.split(".", 1)[0]))
    if not caps:
        return None
    major = min(caps)
    return "blackwell" if major >= 10 else "hopper" if major >= 9 else "ampere" if major >= 8 else "volta"


def allowed(value: str, universe: tuple[str, ...], op: str | None = None) -> frozenset[str] | None:
    """What ``NCCL_PROTO`` / ``NCCL_ALGO`` leaves NCCL for ``op``: a comma list, ``^`` to exclude, or
    per-function clauses ``allreduce:tree,ring;allgather:ring`` (a function not named keeps all).
    None when the value names nothing NCCL knows (NCCL then refuses it and keeps its default)."""
    text = value.strip()
    if ";" in text or (":" in text and text.split(":", 1)[0].strip().lower() in FUNCTION_OF):
        clause = ""
        for part in text.split(";"):
            fn, _, rest = part.partition(":")
            if FUNCTION_OF.get(fn.strip().lower()) == op:
                clause = rest
        if not clause:
            return frozenset(universe)
        text = clause.strip()
    exclude = text.startswith("^")
    names = {n.strip().lower() for n in text.lstrip("^").split(",") if n.strip()}
    known = {u for u in universe if u.lower() in names}
    if not known:
        return None
    return frozenset(set(universe) - known) if exclude else frozenset(known)


def protocol_busbw(model_gbps: float, protocols: frozenset[str], arch: str | None, channels: int | None) -> float:
    """The best busbw NCCL's model gives a large ring collective with only ``protocols`` allowed."""
    if "Simple" in protocols:
        return model_gbps
    best = 0.0
    if "LL128" in protocols:
        cap = LL128_PER_CHANNEL_GBPS.get(arch or "", 0.0) * (channels or 0)
        best = max(best, min(model_gbps * LL128_SHARE, cap) if cap else model_gbps * LL128_SHARE)
    if "LL" in protocols:
        best = max(best, min(model_gbps * LL_SHARE, LL_MAX_GBPS.get(arch or "", model_gbps)))
    return best


def default_channels(ring_gbps: float) -> int:
    """About how many channels NCCL builds by default for a ring of ``ring_gbps`` (see SEARCH_CHANNEL_GBPS)."""
    return max(2, 2 * round(ring_gbps / SEARCH_CHANNEL_GBPS))


def channels_busbw(model_gbps: float, channels: int, default: int) -> float:
    """busbw with ``channels`` where NCCL would build ``default``: each channel carries its share."""
    return model_gbps * min(1.0, channels / max(default, 1))


def buffer_busbw(model_gbps: float, buffsize: int, channels: int) -> float:
    """busbw with a staging buffer of ``buffsize`` bytes: each channel moves BUFFSIZE / NCCL_STEPS per
    step and every step pays NCCL's ring step latency, relative to the default buffer."""
    per_channel = model_gbps / max(channels, 1) * 1e3  # bytes per us

    def efficiency(size: int) -> float:
        step = size / NCCL_STEPS
        return (step / per_channel) / (step / per_channel + STEP_LATENCY_US)

    return model_gbps * min(1.0, efficiency(buffsize) / efficiency(DEFAULT_BUFFSIZE))


def threads_busbw(model_gbps: float, threads: int) -> float:
    """At most the busbw with ``threads`` per block where NCCL uses DEFAULT_NTHREADS: a channel's copy
    loop moves a fixed amount per thread and cycle (a bound: the links may saturate first)."""
    return model_gbps * min(1.0, threads / DEFAULT_NTHREADS)
