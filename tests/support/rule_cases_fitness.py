"""Rule cases of the fitness rules (TD530-TD534), the GPU's PCIe error counters (TD207-TD211)
and the NIC ports (TD420-TD423): part of the table in tests/support/rule_cases.py.

GPU cases start from the h200-x1 recording (nvidia-h200, recorded with the fitness calls)
or its derived scenarios; NIC cases from the derived NIC scenarios of hgx-8gpu-2socket.
The near misses sit on the thresholds: the SW power cap, a busy GPU that runs hot, a rate
just under the error rate, a counter that stands still however high it is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rule_case_kit import Case, SnapEdit, both

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


FITNESS_CASES: list[Case] = [
    # TD530: reasons active now
    Case(
        "TD530",
        False,
        X1,
        "SW power cap and idle set (0x5): the normal state at the power limit",
        fitness(clock_events=0x5),
    ),
    Case("TD530", False, X1, "applications clocks setting and sync boost (0x12)", fitness(clock_events=0x12)),
    Case("TD530", True, X1, "HW power brake slowdown (0x80)", fitness(clock_events=0x80), subjects=("GPU0",)),
    # TD531: violation time rising
    Case(
        "TD531",
        False,
        X1,
        "the power policy's violation time rises by 5 s (SW power cap at full load)",
        sample("end", "violation_ns", power=5_000_000_000),
    ),
    Case(
        "TD531",
        False,
        X1,
        "HW thermal slowdown time is 9 s at both readings (a slowdown long ago)",
        both(
            sample("start", "violation_ns", hw_thermal=9_000_000_000),
            sample("end", "violation_ns", hw_thermal=9_000_000_000),
        ),
    ),
    Case(
        "TD531",
        True,
        X1,
        "HW power brake time rises by 1 ms",
        sample("end", "violation_ns", hw_power_brake=1_000_000),
        subjects=("GPU0",),
    ),
    # TD532: applications clocks
    Case("TD532", False, X1, "as recorded: applications clocks at max (1980 / 3201 MHz)"),
    Case(
        "TD532",
        True,
        X1,
        "SM applications clock 1755 MHz (max 1980)",
        fitness(app_sm_clock_mhz=1755),
        subjects=("GPU0",),
    ),
    Case("TD532", True, X1, "memory applications clock 2619 MHz (max 3201)", fitness(app_memory_clock_mhz=2619)),
    # TD533: power limit
    Case("TD533", False, X1, "as recorded: 700 W enforced, 700 W default"),
    Case(
        "TD533",
        False,
        "x1-power-capped",
        "capped to 500 W on a node type whose expectations say 500 W",
        expect_from="x1-power-capped",
    ),
    Case(
        "TD533",
        True,
        X1,
        "700 W on a node type whose expectations say 700 W, enforced 699 W",
        fitness(power_limit_mw=699000),
        expect_from=X1,
    ),
    # TD534: idle temperature
    Case(
        "TD534",
        False,
        X1,
        "idle at 73 C, 16 C below slowdown at 89 C",
        fitness(temperature_c=73),
        at="IDLE_SLOWDOWN_MARGIN_C",
    ),
    Case("TD534", False, X1, "busy (no idle reason) at 85 C", fitness(temperature_c=85, clock_events=0x4)),
    Case(
        "TD534",
        True,
        X1,
        "idle at 74 C, 15 C below slowdown",
        fitness(temperature_c=74),
        subjects=("GPU0",),
        at="IDLE_SLOWDOWN_MARGIN_C",
    ),
    # TD207 / TD208: uncorrectable errors
    Case("TD207", False, X1, "as recorded: no fatal error (14 receiver errors, 15 bad TLPs standing)"),
    Case("TD208", False, X1, "as recorded: no non-fatal error"),
    Case(
        "TD208",
        True,
        X1,
        "non-fatal count 2 at both readings",
        both(sample("start", "pcie", non_fatal=2), sample("end", "pcie", non_fatal=2)),
    ),
    # TD209 / TD211: retries rising
    Case(
        "TD209",
        False,
        X1,
        "correctable count 5000 at both readings: high, but standing still",
        both(sample("start", "pcie", correctable=5000), sample("end", "pcie", correctable=5000)),
    ),
    Case("TD209", True, X1, "bad DLLP +1 over 0.03 s", sample("end", "pcie", bad_dllp=1)),
    Case(
        "TD211",
        False,
        X1,
        "NAKs sent +99 over 1 s: 99 per second, just under the error rate",
        both(sample("end", "pcie", naks_sent=13 + 99), at(100.0, 101.0)),
    ),
    Case(
        "TD211",
        True,
        X1,
        "NAKs sent +101 over 1 s",
        both(sample("end", "pcie", naks_sent=13 + 101), at(100.0, 101.0)),
        at="ERROR_RATE_PER_S",
    ),
    Case(
        "TD211",
        False,
        X1,
        "NAKs sent +100 over 1 s: the error rate itself",
        both(sample("end", "pcie", naks_sent=13 + 100), at(100.0, 101.0)),
        at="ERROR_RATE_PER_S",
    ),
    Case(
        "TD209",
        True,
        X1,
        "bad DLLP +1 over 5 ms, counted over the shortest window (10 ms): 100 per second",
        both(sample("end", "pcie", bad_dllp=1), at(100.0, 100.005)),
        at="MIN_WINDOW_S",
    ),
    Case(
        "TD211",
        False,
        X1,
        "bad DLLP +1 over 5 ms, counted over the shortest window (10 ms): 100 per second",
        both(sample("end", "pcie", bad_dllp=1), at(100.0, 100.005)),
        at="MIN_WINDOW_S",
    ),
    Case("TD211", True, X1, "replay rollover +1", sample("end", "pcie", replay_rollover=1)),
    # TD420-TD423: NIC ports
    Case("TD420", False, "hgx-nic-half-rate", "every port ACTIVE and LinkUp (one at half rate)"),
    Case("TD420", True, NIC, "mlx5_3 port DOWN / Polling", subjects=("nic:mlx5_3/1",)),
    Case(
        "TD420",
        True,
        "hgx-nic-half-rate",
        "mlx5_2 ACTIVE but physical state LinkErrorRecovery",
        port("mlx5_2", phys_state="LinkErrorRecovery"),
    ),
    Case("TD421", False, NIC, "every active port at 400 Gb/s; the down port is not judged on rate"),
    Case(
        "TD421",
        False,
        "hgx-nic-half-rate",
        "mlx5_5 at 200 Gb/s on a node type whose expectations hold 200 Gb/s for it",
        expect_from="hgx-nic-half-rate",
    ),
    Case(
        "TD421",
        True,
        NIC,
        "every port at 200 Gb/s (no peer faster) on a node type whose expectations hold 400 Gb/s",
        every_port(rate_gbps=200.0),
        expect_from=NIC,
    ),
    Case("TD422", False, NIC, "symbol_error 3 at both readings (from link training)"),
    Case(
        "TD422", False, NIC, "port_rcv_errors +5 (traffic errors, not link loss)", counters("mlx5_0", port_rcv_errors=5)
    ),
    Case(
        "TD422",
        True,
        NIC,
        "link_error_recovery +1 on mlx5_4",
        counters("mlx5_4", link_error_recovery=1),
        subjects=("nic:mlx5_4/1",),
    ),
    Case("TD423", False, NIC, "as derived: every counter standing still"),
    Case(
        "TD423",
        True,
        NIC,
        "port_xmit_discards +7 on mlx5_6",
        counters("mlx5_6", port_xmit_discards=7),
        subjects=("nic:mlx5_6/1",),
    ),
]
