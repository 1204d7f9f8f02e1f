"""Helpers of the rule cases at the edge of a count or a comparison: the helpers those cases are
written with (the cases themselves are in tests/rules/cases/, by family).

A rule that needs enough peers for a median, a range NCCL accepts from its first value, a prefix
that matches exactly two devices, an age in minutes rather than seconds or hours, one process rather
than several, a name NCCL would take in another case or with blanks: each has a case on the side
that changes the answer (or what it says), so a ``>=`` that slips to ``>``, a count moved by one or
a dropped ``.upper()`` is seen."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rule_case_kit import BwEdit, gpu
from rule_case_kit_edges import X4_ONEWAY, bw_value

from fixtures.derived_data_path import with_sm
from topodoctor.core.probed import ProbeError, Unsupported
from topodoctor.model.snapshot import ComputeProcess, HostSnapshot

HGX = "hgx-8gpu-2socket"  # eight InfiniBand devices, mlx5_0 to mlx5_7


def oneway_only(**pairs: float) -> BwEdit:
    """The x4 result with only these one-way copies measured (``p1_2=gbps`` for GPU1->GPU2)."""
    wanted = {(int(k[1]), int(k[3])): v for k, v in pairs.items()}

    def edit(r: dict[str, Any]) -> None:
        for m in r["measurements"]:
            if m["mode"] == "oneway" and (m["src"], m["dst"]) not in wanted:
                m["value"] = None
        for (src, dst), v in wanted.items():
            bw_value("oneway", src, dst, v)(r)

    return edit


def sm_latency_of_one_pair(scale: float) -> BwEdit:
    """The SM figures with the latency measured between GPU2 and GPU3 alone, GPU2->GPU3's x ``scale``."""

    def edit(r: dict[str, Any]) -> None:
        with_sm(r)
        for m in r["measurements"]:
            if m["mode"] == "sm_latency" and (m["src"], m["dst"]) not in ((2, 3), (3, 2)):
                m["value"] = None
        m = next(m for m in r["measurements"] if (m["mode"], m["src"], m["dst"]) == ("sm_latency", 2, 3))
        m["value"] = {k: (v * scale if k != "samples" else [x * scale for x in v]) for k, v in m["value"].items()}

    return edit


def renamed_nic(old: str, new: str) -> Any:
    def edit(s: HostSnapshot) -> HostSnapshot:
        return replace(s, nics=tuple(replace(n, name=new) if n.name == old else n for n in s.nics))

    return edit


def one_link_left(i: int) -> Any:
    """GPU ``i``'s links down but link 0."""

    def edit(s: HostSnapshot) -> HostSnapshot:
        g = s.gpu(i)
        links = tuple(k if k.link == 0 else replace(k, active=False) for k in g.nvlinks)
        return gpu(i, nvlinks=links)(s)

    return edit


def kernel_log(state: Unsupported) -> Any:
    def edit(s: HostSnapshot) -> HostSnapshot:
        return replace(s, kernel_events=state)

    return edit


def pcie_pair_2_3(r: dict[str, Any]) -> None:
    """The x4 result with GPU2's and GPU3's NVLinks down and unwired (their pairs PCIe pairs), and
    GPU2->GPU3 at a PCIe copy's 50 GB/s."""
    for g in r["snapshot"]["gpus"]:
        if g["index"] in (2, 3):
            for k in g["nvlinks"]:
                k.update(active=False, remote_type="unknown")
    bw_value("oneway", 2, 3, 50.0)(r)


COPY = X4_ONEWAY[(0, 1)]  # about 394 GB/s: a healthy NV18 one-way copy of the x4 host
SLOW = 0.7 * COPY  # under 0.85 of two healthy peers, above half of NV18's 478 GB/s
LONG_CMD = "python -m torch.distributed.run --nproc-per-node 4 train.py --config configs/llama-70b.yaml " + "--x " * 20
ONE_FOREIGN = ComputeProcess(4242, 2 << 30, 0, 1, LONG_CMD, False)  # its command shown to 120 characters
NVLINK_MBPS = 26562  # the x4 host's links (NV18 at 26.562 GB/s a lane group)
UNREAD = ProbeError("NO_PERMISSION", "nvmlDeviceGetFieldValues", 4)
