"""TD210 and the GPU-NIC view it reads, on derived hosts with RDMA NICs (fixtures/derive.py)."""

from __future__ import annotations

from conftest import scenario_path

from topodoctor.probe.environment import capture_environment
from topodoctor.probe.sources import probe_host
from topodoctor.rules import Context, evaluate
from topodoctor.topology.nics import expected_rail_gbps, gdr_allowed, nearest_nics


def _findings(name: str, env: dict[str, str] | None = None) -> list:  # type: ignore[type-arg]
    snap = probe_host(str(scenario_path(name))).snapshot
    ctx = Context(snap, capture_environment(env or {}, system_conf="/nonexistent"))
    return [f for f in evaluate(ctx, select=["TD210"])]


def test_gpus_whose_nearest_nic_is_past_the_switch_are_named() -> None:
    found = _findings("pcie-2socket")
    assert [f.subject for f in found] == ["GPU4", "GPU5"]
    assert found[0].evidence == {"nic": "mlx5_0", "path": "NODE", "gdr_level": "PXB", "nic_rate_gbps": 200.0}


def test_a_nic_under_each_gpus_switch_is_quiet() -> None:
    assert _findings("hgx-8gpu-2socket") == []


def test_a_gdr_level_in_the_environment_moves_the_limit() -> None:
    assert _findings("pcie-2socket", {"NCCL_NET_GDR_LEVEL": "SYS"}) == []
    assert [f.subject for f in _findings("pcie-2socket", {"NCCL_NET_GDR_LEVEL": "PIX"})] == [
        "GPU0",
        "GPU1",
        "GPU4",
        "GPU5",
    ]


def test_hosts_without_rdma_nics_are_not_judged() -> None:
    assert _findings("x4-pcie-fallback") == []


def test_expected_rail_share_of_a_shared_nic() -> None:
    paths = nearest_nics(probe_host(str(scenario_path("pcie-2socket"))).snapshot)
    assert (paths[0].nic, paths[0].sharing, paths[6].nic, paths[6].sharing) == ("mlx5_0", 6, "mlx5_1", 2)
    # 200 Gb/s is 25 GB/s; six GPUs share mlx5_0, two share mlx5_1
    assert expected_rail_gbps(paths, [6, 7]) == 12.5
    assert expected_rail_gbps(paths, [0, 6]) == 25.0 / 6
    assert expected_rail_gbps(paths, [0, 42]) is None
    assert gdr_allowed("PXB") and not gdr_allowed("PHB") and gdr_allowed("PHB", "SYS")
