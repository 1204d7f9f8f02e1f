"""Helpers of the rule cases of the text the rules match: the helpers those cases are written with (the
cases themselves are in tests/rules/cases/, by family).

Names and states reach the rules in more spellings than the recordings show (CUDA_VISIBLE_DEVICES
blank, by UUID or a prefix of one; the fabric's states besides completed): a device with its port
(``mlx5_1:1``), an exact entry (``=mlx5_1``) and a prefix that matches several devices, a name in
another case where NCCL compares case-sensitively and a value NCCL reads case-blind, and port states
other than DOWN. A NIC of another kind than InfiniBand or RoCE is not judged as one, and what the
probe could not read is never judged healthy or broken: it is a could-not-check (TD901) on its
subject."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rule_case_kit import Case, SnapEdit, bw_measure, gpu
from rule_case_kit_edges import bw_value

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
