"""Helpers of the rule cases of the fitness rules (TD530-TD534), the GPU's PCIe error counters
(TD207-TD211) and the NIC ports (TD420-TD423): the helpers those cases are written with (the cases
themselves are in tests/rules/cases/, by family).

GPU cases start from the h200-x1 recording (nvidia-h200, recorded with the fitness calls) or its
derived scenarios; NIC cases from the derived NIC scenarios of hgx-8gpu-2socket. The near misses sit
on the thresholds: the SW power cap, a busy GPU that runs hot, a rate just under the error rate, a
counter that stands still however high it is."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rule_case_kit import SnapEdit

from topodoctor.model.fitness import CounterSample, GpuFitness
from topodoctor.model.snapshot import HostSnapshot

X1 = "h200-x1"
NIC = "hgx-nic-port-down"  # every NIC with port 1; mlx5_3's is down, the others are healthy


def fitness(**fields: Any) -> SnapEdit:
    """GPU0's fitness with ``fields`` changed."""

    def edit(s: HostSnapshot) -> HostSnapshot:
        g = s.gpu(0)
        return replace(s, gpus=(replace(g, fitness=replace(g.fitness, **fields)), *s.gpus[1:]))

    return edit


def sample(which: str, part: str, **fields: Any) -> SnapEdit:
    """GPU0's ``start`` or ``end`` counter sample with ``part`` (pcie, violation_ns) changed."""

    def edit(s: HostSnapshot) -> HostSnapshot:
        f: GpuFitness = s.gpu(0).fitness
        old: CounterSample = getattr(f, which)
        new = replace(old, **{part: replace(getattr(old, part), **fields)})
        return fitness(**{which: new})(s)

    return edit


def at(start_s: float, end_s: float) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        f = s.gpu(0).fitness
        return fitness(start=replace(f.start, at_s=start_s), end=replace(f.end, at_s=end_s))(s)

    return edit


def port(nic: str, **fields: Any) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        nics = tuple(replace(n, ports=(replace(n.ports[0], **fields),)) if n.name == nic else n for n in s.nics)
        return replace(s, nics=nics)

    return edit


def every_port(**fields: Any) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        return replace(s, nics=tuple(replace(n, ports=tuple(replace(p, **fields) for p in n.ports)) for n in s.nics))

    return edit


def counters(nic: str, **rise: int) -> SnapEdit:
    """``nic``'s port counters rise by ``rise`` between the two readings."""

    def edit(s: HostSnapshot) -> HostSnapshot:
        p = next(n for n in s.nics if n.name == nic).ports[0]
        end = {k: v + rise.get(k, 0) if isinstance(v, int) else v for k, v in p.counters_start.items()}
        return port(nic, counters_end=end)(s)

    return edit
