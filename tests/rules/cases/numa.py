"""The rule cases of NUMA (TD4xx):
for every rule of the family, cases where it must fire and near misses where it must stay silent,
thresholds and spellings included (tests/rules/test_rule_cases.py holds the table to the registry)."""

from __future__ import annotations

from dataclasses import replace

from rule_case_kit import NA, Case, both, gpu, nics
from rule_case_kit_fitness import NIC, counters, every_port, port
from rule_case_kit_shapes import baseline_port, one_nic, standing
from rule_case_kit_variants import nic_kind

from topodoctor.core.probed import ProbeError

CASES = [
    # numa
    Case("TD401", False, "h200-x4", "one NUMA node, GPU numa_node -1"),
    Case(
        "TD401",
        False,
        "hgx-8gpu-2socket",
        "GPU0's NUMA node unreadable (TD901)",
        gpu(0, sysfs_numa_node=ProbeError("EACCES", "read numa_node")),
    ),
    Case(
        "TD401",
        True,
        "hgx-8gpu-2socket",
        "GPU0's local CPUs span both sockets",
        gpu(0, cpu_affinity=tuple(range(128))),
        subjects=("GPU0",),
    ),
    Case("TD401", False, "hgx-8gpu-2socket", "GPU0's local CPUs unknown", gpu(0, cpu_affinity=NA)),
    Case(
        "TD401", True, "hgx-numa-unsupported", "no NUMA node for any GPU", subjects=tuple(f"GPU{i}" for i in range(8))
    ),
    Case("TD402", False, "hgx-numa-unsupported", "Ethernet NICs with no NUMA node", nics(kind="ethernet")),
    Case(
        "TD402",
        False,
        "hgx-8gpu-2socket",
        "NIC NUMA nodes unreadable (TD901)",
        nics(numa_node=ProbeError("EACCES", "read numa_node")),
    ),
    Case("TD402", False, "hgx-8gpu-2socket", "every NIC on a known NUMA node"),
    Case(
        "TD403",
        True,
        "hgx-8gpu-2socket",
        "process bound to CPUs 64-127",
        process_cpus=tuple(range(64, 128)),
        subjects=("GPU0", "GPU1", "GPU2", "GPU3"),
    ),
    Case(
        "TD403",
        True,
        "hgx-8gpu-2socket",
        "process on 64-127, GPU0's local CPUs unknown",
        gpu(0, cpu_affinity=NA),
        process_cpus=tuple(range(64, 128)),
        subjects=("GPU1", "GPU2", "GPU3"),
    ),
    Case("TD403", False, "h200-x4", "process on CPU 5 of a host where every CPU is local", process_cpus=(5,)),
    Case(
        "TD403",
        False,
        "hgx-8gpu-2socket",
        "process bound to CPUs 63-64: one local to each socket",
        process_cpus=(63, 64),
    ),
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
    *(
        Case(
            "TD420",
            True,
            NIC,
            f"mlx5_2 port {state}",
            port("mlx5_2", state=state),
            subjects=("nic:mlx5_2/1", "nic:mlx5_3/1"),
        )
        for state in ("INIT", "ARMED")
    ),
    Case(
        "TD420",
        True,
        NIC,
        "mlx5_2 ACTIVE but Polling",
        port("mlx5_2", phys_state="Polling"),
        subjects=("nic:mlx5_2/1", "nic:mlx5_3/1"),
    ),
    Case("TD420", False, NIC, "the down port's device is Ethernet, not RDMA", nic_kind("mlx5_3", "ethernet")),
    Case("TD420", True, NIC, "the down port's device is RoCE", nic_kind("mlx5_3", "roce"), subjects=("nic:mlx5_3/1",)),
    Case(
        "TD420",
        True,
        "hgx-nic-half-rate",
        "RoCE mlx5_2 ACTIVE and LinkUp, its net device down",
        both(nic_kind("mlx5_2", "roce"), port("mlx5_2", netdev_state="down")),
        subjects=("nic:mlx5_2/1",),
    ),
    Case(
        "TD420",
        False,
        "hgx-nic-half-rate",
        "RoCE mlx5_2 ACTIVE and LinkUp, its net device's state unknown (as the kernel says of many)",
        both(nic_kind("mlx5_2", "roce"), port("mlx5_2", netdev_state="unknown")),
    ),
    # RDMA is InfiniBand or RoCE, for every rule that asks
    Case(
        "TD402",
        True,
        "hgx-numa-unsupported",
        "RoCE NICs with no NUMA node",
        nics(kind="roce"),
        subjects=tuple(f"nic:mlx5_{i}" for i in range(8)),
    ),
]

# the rarer shapes of a NIC: a recording from before ports were probed (the device's own state and
# rate stand for port 1), and a host of one NUMA node, where there is nothing to pair a NIC by
CASES += [
    Case(
        "TD420",
        True,
        "hgx-8gpu-2socket",
        "a snapshot without ports, mlx5_3 DOWN on the device itself: its port 1",
        both(nics(ports=()), one_nic("mlx5_3", state="DOWN")),
        subjects=("nic:mlx5_3/1",),
    ),
    Case(
        "TD402",
        False,
        "hgx-numa-unsupported",
        "the NICs' NUMA node unknown on a host of one NUMA node",
        lambda s: replace(s, host=replace(s.host, numa_nodes=s.host.numa_nodes[:1])),
    ),
]

# check --baseline: a NIC port's counters that stood still during the check but rose since an earlier
# snapshot of the node, each rule taking its own counters; a baseline from another boot is no evidence
_ROSE = standing("mlx5_2", link_downed=2, port_rcv_errors=4)
_BEFORE = baseline_port("mlx5_2", 5.0, link_downed=0, port_rcv_errors=1)
CASES += [
    Case(
        "TD422",
        True,
        "hgx-nic-half-rate",
        "mlx5_2 link_downed 0 at the baseline, 2 now (standing during the check)",
        _ROSE,
        context=_BEFORE,
        subjects=("nic:mlx5_2/1",),
    ),
    Case(
        "TD423",
        True,
        "hgx-nic-half-rate",
        "mlx5_2 port_rcv_errors 1 at the baseline, 4 now (standing during the check)",
        _ROSE,
        context=_BEFORE,
        subjects=("nic:mlx5_2/1",),
    ),
    Case(
        "TD422",
        False,
        "hgx-nic-half-rate",
        "the baseline taken later in uptime than now (another boot)",
        _ROSE,
        context=baseline_port("mlx5_2", 9999.0, link_downed=0, port_rcv_errors=1),
    ),
    Case("TD422", False, "hgx-nic-half-rate", "link_downed 2 standing during the check, no baseline", _ROSE),
]
