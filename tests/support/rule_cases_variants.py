"""Rule cases of the text the rules match: part of the table in tests/support/rule_cases.py.

Names and states reach the rules in more spellings than the recordings show (CUDA_VISIBLE_DEVICES
blank, by UUID or a prefix of one; the fabric's states besides completed): a device with its
port (``mlx5_1:1``), an exact entry (``=mlx5_1``) and a prefix that matches several devices, a
name in another case where NCCL compares case-sensitively and a value NCCL reads case-blind, and
port states other than DOWN. A NIC of another kind than InfiniBand or RoCE is not judged as one,
and what the probe could not read is never judged healthy or broken: it is a could-not-check
(TD901) on its subject.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rule_case_kit import Case, SnapEdit, both, bw_measure, gpu, link, nics
from rule_cases_edges import bw_value
from rule_cases_fitness import port

from topodoctor.core.probed import ProbeError
from topodoctor.model.snapshot import HostSnapshot

UNREAD = ProbeError("NO_PERMISSION", "nvmlDeviceGetFieldValues", 4)

HGX = "hgx-8gpu-2socket"  # eight InfiniBand devices, mlx5_0 to mlx5_7; eth0 and eight ib interfaces up
NIC = "hgx-nic-port-down"  # as HGX, mlx5_3's port down


def nic_kind(name: str, kind: str) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        return replace(s, nics=tuple(replace(n, kind=kind) if n.name == name else n for n in s.nics))

    return edit


def x16_at_x8(gpu_index: int, h2d_gbps: float) -> Any:
    """A bandwidth edit: the GPU's link at x8 of x16 in the measured host, its host->GPU copy at ``h2d_gbps``."""

    def edit(r: dict[str, Any]) -> None:
        r["snapshot"]["gpus"][gpu_index]["pcie"]["width_current"] = 8
        bw_value("h2d", -1, gpu_index, h2d_gbps)(r)

    return edit


def _h2d_failed(r: dict[str, Any]) -> None:
    bw_value("oneway", 2, 3, 10.0)(r)
    bw_measure("h2d", -1, 3, error="timeout: no answer after 20 s", value=None)(r)


STAGED_2_3 = 55.26119650844938  # the slower of GPU2->host and host->GPU3 in the measured x4 result


UUID3 = "GPU-00000000-0000-4000-8000-000000000003"  # GPU3's UUID in the h200-x4 recording (anonymised)


def fabric(gpu_index: int, **fields: str) -> SnapEdit:
    def edit(s: HostSnapshot) -> HostSnapshot:
        g = s.gpu(gpu_index)
        return gpu(gpu_index, fabric=replace(g.fabric, **fields))(s)  # type: ignore[type-var]

    return edit


def _env(code: str, fires: bool, source: str, name: str, value: str, why: str) -> Case:
    return Case(code, fires, source, f"{name}={value}: {why}", env={name: value})


VARIANT_CASES = [
    _env("TD606", False, HGX, "NCCL_IB_HCA", "=mlx5_1:1", "an exact device with its port"),
    _env("TD606", False, HGX, "NCCL_IB_HCA", "mlx5_1:1", "a device with its port"),
    _env("TD606", True, HGX, "NCCL_IB_HCA", "mlx5_9:1", "no such device, whatever its port"),
    _env("TD606", True, HGX, "NCCL_IB_HCA", "=mlx5", "exact: no device is named mlx5"),
    _env("TD606", True, HGX, "NCCL_IB_HCA", "MLX5_1", "NCCL compares device names case-sensitively"),
    _env("TD607", True, HGX, "NCCL_IB_HCA", "mlx5_", "a prefix of all eight devices"),
    _env("TD607", False, HGX, "NCCL_IB_HCA", "mlx5_1:1", "a prefix of one device, with its port"),
    _env("TD605", False, HGX, "NCCL_SOCKET_IFNAME", "=eth0", "exact, and up"),
    _env("TD605", True, HGX, "NCCL_SOCKET_IFNAME", "=eth", "exact: no interface is named eth"),
    _env("TD605", True, HGX, "NCCL_SOCKET_IFNAME", "ETH0", "interface names are case-sensitive"),
    _env("TD621", True, "h200-x4", "NCCL_NET", "ib", "NCCL reads the network's name case-blind"),
    _env("TD621", True, "h200-x4", "NCCL_NET", "Ib", "NCCL reads the network's name case-blind"),
    _env("TD621", False, "h200-x4", "NCCL_NET", "socket", "sockets need no RDMA device"),
    _env("TD611", True, "h200-x4", "NCCL_PROTO", "ll128", "NCCL reads protocol names case-blind"),
    _env("TD610", True, "h200-x4", "NCCL_DEBUG", "trace", "NCCL reads the level case-blind"),
    _env("TD610", True, "h200-x4", "NCCL_DEBUG", " TRACE ", "spaces around it, as a job script may leave them"),
    _env("TD610", False, "h200-x4", "NCCL_DEBUG", "INFO", "a level that costs little"),
    _env("TD601", True, "h200-x4", "NCCL_P2P_DISABLE", " 1 ", "spaces around it"),
    _env("TD611", False, "h200-x4", "NCCL_PROTO", "^ll128", "LL128 excluded"),
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
    # what could not be read is neither up nor down
    Case(
        "TD102",
        False,
        "x4-nvlink-down",
        "GPU1's link count unreadable: its pairs not judged short",
        gpu(1, nvlink_count=UNREAD),
    ),
    Case(
        "TD901",
        True,
        "x4-nvlink-down",
        "GPU1's link count unreadable: GPU1 and its pairs could not be checked",
        gpu(1, nvlink_count=UNREAD),
        subjects=("GPU0-GPU1", "GPU1", "GPU1-GPU2", "GPU1-GPU3"),
        severity="warning",
    ),
    Case(
        "TD101", False, "x4-nvlink-down", "GPU1 link 5's state unreadable: not judged down", link(1, 5, active=UNREAD)
    ),
    Case("TD201", False, "x4-pcie-fallback", "GPU3's bus id unreadable: its pairs not judged", gpu(3, bus_id=UNREAD)),
    # RDMA is InfiniBand or RoCE, for every rule that asks
    Case(
        "TD402",
        True,
        "hgx-numa-unsupported",
        "RoCE NICs with no NUMA node",
        nics(kind="roce"),
        subjects=tuple(f"nic:mlx5_{i}" for i in range(8)),
    ),
    Case(
        "TD604", True, HGX, "NCCL_IB_DISABLE=1 on a host of RoCE NICs", nics(kind="roce"), env={"NCCL_IB_DISABLE": "1"}
    ),
    _env("TD610", False, "h200-x4", "NCCL_PROTO", "ll128", "LL128 turned on is TD611's, not a debugging leftover"),
    # host copies: named by their GPU, judged against the link the GPU should have
    Case(
        "TD706",
        True,
        "h200-x4",
        "host->GPU1 copy timed out",
        bandwidth=bw_measure("h2d", -1, 1, error="timeout: no answer after 20 s"),
        subjects=("GPU1",),
    ),
    Case(
        "TD704",
        True,
        "h200-x4",
        "GPU2 at x8 of x16, host->GPU2 at 40 GB/s: below 0.7 of the x16 it should have",
        bandwidth=x16_at_x8(2, 40.0),
        subjects=("GPU2",),
    ),
    # P2P against staging through the host: 0.9 of the slower host copy
    Case(
        "TD702",
        False,
        "h200-x4",
        "one-way GPU2->GPU3 at 0.9 of staging",
        bandwidth=bw_value("oneway", 2, 3, 0.9 * STAGED_2_3),
    ),
    Case(
        "TD702",
        True,
        "h200-x4",
        "one-way GPU2->GPU3 at 0.895 of staging",
        bandwidth=bw_value("oneway", 2, 3, 0.895 * STAGED_2_3),
    ),
    Case(
        "TD702",
        False,
        "h200-x4",
        "one-way GPU2->GPU3 at 10 GB/s, host->GPU3 failed: staging unknown",
        bandwidth=_h2d_failed,
    ),
    # CUDA_VISIBLE_DEVICES as a job script may leave it: blanks, a UUID or its prefix, an entry mid-list
    _env("TD615", True, "h200-x4", "CUDA_VISIBLE_DEVICES", "  ", "blanks only: CUDA sees no GPU"),
    _env("TD615", False, "h200-x4", "CUDA_VISIBLE_DEVICES", f"{UUID3},0", "a GPU's whole UUID, then an index"),
    _env("TD615", False, "h200-x4", "CUDA_VISIBLE_DEVICES", "GPU-00000000", "a prefix of the GPUs' UUIDs"),
    _env("TD615", True, "h200-x4", "CUDA_VISIBLE_DEVICES", "0,GPU-ffffffff,1,2", "a UUID no GPU has, mid-list"),
    # the fabric's states in words: registered but failed, and not yet registered
    Case("TD501", True, "h200-x4", "GPU1 registered with the fabric, status failed", fabric(1, status="NVML_ERROR")),
    Case("TD501", True, "h200-x4", "GPU1's registration in progress", fabric(1, state="in_progress")),
    Case("TD501", False, "h200-x4", "GPU1's fabric state not supported", fabric(1, state="not_supported")),
]
