"""Expectations per node type: what a known-good host of this kind looks like.

``topodoctor expect -o FILE`` writes one from a healthy host (live or replayed); ``check
--expect FILE`` compares against it. Without a file, rules compare each GPU with its peers.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from topodoctor.core import codec
from topodoctor.core.errors import InputError
from topodoctor.core.stats import median
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.topology.graph import build_graph, gpu_node, nvlink_count

if TYPE_CHECKING:
    from topodoctor.core.budget import Budget

EXPECT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Expectations:
    """What a node of one type should show (GPUs, NVLinks, PCIe, NICs, power limit, measured figures),
    as ``check --expect`` reads it."""

    kind: Literal["expectations"]
    schema_version: int
    gpu_count: int
    gpu_model: str
    nvlinks_per_gpu: int  # active NVLinks each GPU should have (0: none)
    nvlinks_per_pair: int  # bonded links nvidia-smi shows between any two GPUs (NV#); 0: PCIe only
    pcie_gen: int | None
    pcie_width: int | None
    nics: tuple[str, ...]  # RDMA devices that must be present
    mig_enabled: bool = False
    # What a known-good host of this type shows (None: not known, e.g. a file from before):
    power_limit_w: float | None = None  # the enforced power limit of its GPUs
    # the rate each RDMA port trains to, by DEVICE/PORT (mlx5_0/1)
    nic_rate_gbps: dict[str, float] = field(default_factory=dict)
    # measured on the known-good host (expect --level): the median over its GPUs per figure,
    # keyed by the figure's label ("hbm ce", "hbm sm", "compute bf16"); judged by TD714
    fitness: dict[str, float] = field(default_factory=dict)


def _mode(values: list[int]) -> int | None:
    return Counter(values).most_common(1)[0][0] if values else None


def from_snapshot(snap: HostSnapshot) -> Expectations:
    """Expectations taken from a host known to be healthy: its GPUs, links, NICs and limits as they are."""
    g = build_graph(snap)
    gpus = [x for x in snap.gpus if x.lost is None]
    names = [x.name for x in gpus if isinstance(x.name, str)]
    per_gpu = [sum(1 for link in x.nvlinks if link.is_up is True) for x in gpus]
    per_pair = [
        nvlink_count(g, gpu_node(a.index), gpu_node(b.index))[0] for i, a in enumerate(gpus) for b in gpus[i + 1 :]
    ]
    gens = [x.pcie.gen_max for x in gpus if isinstance(x.pcie.gen_max, int)]
    widths = [x.pcie.width_max for x in gpus if isinstance(x.pcie.width_max, int)]
    rates = {f"{n.name}/{p.port}": p.rate_gbps for n in snap.nics for p in n.ports if isinstance(p.rate_gbps, float)}
    return Expectations(
        kind="expectations",
        schema_version=EXPECT_SCHEMA_VERSION,
        gpu_count=len(snap.gpus),
        gpu_model=Counter(names).most_common(1)[0][0] if names else "",
        nvlinks_per_gpu=min(per_gpu) if per_gpu else 0,
        nvlinks_per_pair=min(per_pair) if per_pair else 0,
        pcie_gen=_mode(gens),
        pcie_width=_mode(widths),
        nics=tuple(sorted(n.name for n in snap.nics if n.kind in ("infiniband", "roce"))),
        mig_enabled=any(x.mig_mode is True for x in gpus),
        power_limit_w=_mode_w([x.fitness.power_limit_mw for x in gpus]),
        nic_rate_gbps=rates,
    )


def _mode_w(values: list[object]) -> float | None:
    mw = _mode([v for v in values if isinstance(v, int)])
    return mw / 1000 if mw is not None else None


def with_fitness(e: Expectations, result: Any) -> Expectations:
    """``e`` with the per-GPU figures of a fitness result (topodoctor.model.fitness_results): for
    each of HBM and compute, the median over the GPUs that measured it."""

    by_label: dict[str, list[float]] = {}
    for f in result.figures:
        if f.kind in ("hbm", "compute") and f.value is not None:
            by_label.setdefault(f.label, []).append(f.value.median)
    return replace(e, fitness={k: round(median(v), 3) for k, v in sorted(by_label.items())})


def load_expectations(path: Path | str, budget: Budget | None = None) -> Expectations:
    """Read an expectations file, within what is left of ``budget``; a file that breaks its
    schema anywhere (see ``validate``) is refused whole with InputError, never half-used."""
    if budget is not None and budget.limited and budget.left() <= 0:
        raise budget.exceeded(" (reading the expectations file)")
    timeout = budget.left() if budget is not None and budget.limited else None
    data = codec.read_json(path, "expectations file", timeout)
    codec.check_header(data, "expectations", EXPECT_SCHEMA_VERSION, f"expectations file {path}")
    validate(data, f"expectations file {path}")
    return codec.from_jsonable(Expectations, data, f"expectations file {path}")


# What a real host can have. GPUs: eight on an HGX board, sixteen on the largest boards built
# (HGX-2, some PCIe servers hold twenty); 64 leaves room without letting 10**18 through.
# NVLinks: NVML's NVML_NVLINK_MAX_LINKS is 18 (Hopper, Blackwell); twice that leaves room for a
# generation to come. PCIe: generations 1 to 7 (the last specification published), the widths
# the specification defines. Names: NVML's device names fit 96 bytes, Linux's RDMA device
# names 64; a host lists at most a few dozen RDMA devices.
MAX_GPUS = 64
MAX_NVLINKS = 36
PCIE_GENS = (1, 7)
PCIE_WIDTHS = (1, 2, 4, 8, 12, 16, 32)
MAX_GPU_MODEL_CHARS = 96
MAX_NIC_NAME_CHARS = 64
MAX_NICS = 64
MAX_POWER_W = 2000  # watts; B200 boards are specified at 1 kW, twice that leaves room
MAX_PORT_GBPS = 3200  # Gb/s; 800 Gb/s ports ship today


# A check returns None for a good value, else (where inside the value, what it must be, the bad part).
Bad = tuple[str, str, Any]
Check = Callable[[Any], "Bad | None"]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _count(lo: int, hi: int) -> Check:
    def check(v: Any) -> Bad | None:
        return None if _is_int(v) and lo <= v <= hi else ("", f"an integer {lo}..{hi}", v)

    return check


def _optional(inner: Check) -> Check:
    def check(v: Any) -> Bad | None:
        bad = None if v is None else inner(v)
        return None if bad is None else (bad[0], f"{bad[1]}, or null (not known)", bad[2])

    return check


def _width(v: Any) -> Bad | None:
    ok = _is_int(v) and v in PCIE_WIDTHS
    return None if ok else ("", f"a PCIe link width, one of {', '.join(map(str, PCIE_WIDTHS))}", v)


def _name(limit: int, empty: bool, word: bool = False) -> Check:
    """A printable name; a ``word`` (a device name, as Linux allows it) has no blank and no '/'."""
    kind = "name without blanks or '/'" if word else "name"
    want = f"a {'' if empty else 'non-empty '}printable {kind} of at most {limit} characters"

    def check(v: Any) -> Bad | None:
        ok = isinstance(v, str) and (empty or v) and len(v) <= limit and v.isprintable() and v == v.strip()
        ok = ok and not (word and any(c.isspace() or c == "/" for c in v))
        return None if ok else ("", want, v)

    return check


def _nics(v: Any) -> Bad | None:
    if not (isinstance(v, list) and len(v) <= MAX_NICS and len({json.dumps(x) for x in v}) == len(v)):
        return "", f"a list of at most {MAX_NICS} distinct RDMA device names", v
    name = _name(MAX_NIC_NAME_CHARS, empty=False, word=True)
    return next(((f"[{i}]", b[1], x) for i, x in enumerate(v) if (b := name(x)) is not None), None)


def _flag(v: Any) -> Bad | None:
    return None if isinstance(v, bool) else ("", "true or false", v)


def _watts(v: Any) -> Bad | None:
    # A GPU's power limit: NVML's constraints of today's parts span 100 W to about 1.2 kW.
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 10 <= v <= MAX_POWER_W
    return None if ok else ("", f"a power limit in watts, 10..{MAX_POWER_W}", v)


def _figures(v: Any) -> Bad | None:
    # Measured figures by label ("hbm ce", "compute bf16"): GB/s or TFLOP/s, none beyond 10**6.
    if not isinstance(v, dict) or len(v) > 64:
        return "", "a map of a figure's label to its measured value", v
    for key, value in v.items():
        if _name(64, empty=False)(key) is not None:
            return f"[{key!r}]", "a label of at most 64 printable characters", key
        if not (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < 1e6):
            return f"[{key!r}]", "a measured figure above 0 and below 1000000", value
    return None


def _port_rates(v: Any) -> Bad | None:
    if not (isinstance(v, dict) and len(v) <= MAX_NICS * 4):
        return "", "a map of DEVICE/PORT to a rate in Gb/s", v
    port = _name(MAX_NIC_NAME_CHARS + 4, empty=False)
    for key, rate in v.items():
        dev, slash, num = key.partition("/")
        if port(key) is not None or not slash or not num.isdigit() or not dev:
            return f"[{key!r}]", "a key DEVICE/PORT (mlx5_0/1)", key
        if not (isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0 < rate <= MAX_PORT_GBPS):
            return f"[{key!r}]", f"a rate in Gb/s, above 0 and at most {MAX_PORT_GBPS}", rate
    return None


SCHEMA: dict[str, Check] = {
    "gpu_count": _count(1, MAX_GPUS),
    "gpu_model": _name(MAX_GPU_MODEL_CHARS, empty=True),
    "nvlinks_per_gpu": _count(0, MAX_NVLINKS),
    "nvlinks_per_pair": _count(0, MAX_NVLINKS),
    "pcie_gen": _optional(_count(*PCIE_GENS)),
    "pcie_width": _optional(_width),
    "nics": _nics,
    "mig_enabled": _flag,
    "power_limit_w": _optional(_watts),
    "nic_rate_gbps": _port_rates,
    "fitness": _figures,
}
_HEADER = ("kind", "schema_version")


def _shown(v: Any) -> str:
    text = json.dumps(v)
    return text if len(text) <= 60 else text[:57] + "..."


def validate(data: dict[str, Any], what: str) -> None:
    """Refuse an expectations document (header already checked) with one line naming the key
    and what it may hold: unknown keys (with the closest known key), keys nested where they do
    not belong, missing keys, wrong types, values no real host has, links that contradict."""
    known = set(SCHEMA) | set(_HEADER)
    for key, value in data.items():
        if key in known:
            continue
        inner = sorted(set(value) & known) if isinstance(value, dict) else []
        if inner:
            raise InputError(f"{what}: {key!r} holds {', '.join(inner)}, which belong at the top level, not in {key!r}")
        import difflib

        close = difflib.get_close_matches(key, sorted(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else f" (known keys: {', '.join(SCHEMA)})"
        raise InputError(f"{what}: unknown key {key!r}{hint}")
    optional = {f.name for f in fields(Expectations) if f.default is not MISSING or f.default_factory is not MISSING}
    for key, check in SCHEMA.items():
        if key not in data:
            if key in optional:
                continue
            raise InputError(f"{what}: {key} is missing; it must be {check(MISSING)[1]}")  # type: ignore[index]
        bad = check(data[key])
        if bad is not None:
            raise InputError(f"{what}: {key}{bad[0]} must be {bad[1]}; got {_shown(bad[2])}")
    if data["nvlinks_per_pair"] > data["nvlinks_per_gpu"]:
        raise InputError(
            f"{what}: nvlinks_per_pair ({data['nvlinks_per_pair']}) exceeds nvlinks_per_gpu "
            f"({data['nvlinks_per_gpu']}): a pair's links are links of each of its GPUs"
        )
