"""Rule cases at the edge of a count or a comparison: part of the table in tests/support/rule_cases.py.

A rule that needs enough peers for a median, a range NCCL accepts from its first value, a prefix
that matches exactly two devices, an age in minutes rather than seconds or hours, one process
rather than several, a name NCCL would take in another case or with blanks: each has a case on
the side that changes the answer (or what it says), so a ``>=`` that slips to ``>``, a count moved
by one or a dropped ``.upper()`` is seen.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rule_case_kit import BwEdit, Case, both, bw_measure, gpu, host_error, link, nics, pcie
from rule_cases_edges import X4_ONEWAY, bw_value, unwired
from rule_cases_fitness import X1, at, sample
from rule_cases_more import _xid

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

COUNT_EDGE_CASES = [
    # TD701: three pairs of a connection give a median; two do not (only the nominal rate judges)
    Case(
        "TD701",
        True,
        "h200-x4",
        "three one-way pairs measured, GPU1->GPU2 at 0.7 of the other two",
        bandwidth=oneway_only(p0_1=COPY, p0_2=COPY, p1_2=SLOW),
        subjects=("GPU1-GPU2",),
        at="PEERS_FOR_MEDIAN",
    ),
    Case(
        "TD701",
        False,
        "h200-x4",
        "two one-way pairs measured, GPU1->GPU2 at 0.7 of the other (above half its path's rate)",
        bandwidth=oneway_only(p0_1=COPY, p1_2=SLOW),
        at="PEERS_FOR_MEDIAN",
    ),
    # TD725: two pairs of a connection are enough for a norm
    Case(
        "TD725",
        True,
        "h200-x4",
        "SM latency of GPU2->GPU3 and GPU3->GPU2 alone, the first 3.5x the second",
        bandwidth=sm_latency_of_one_pair(3.5),
        subjects=("GPU2-GPU3",),
    ),
    # TD609: NCCL takes 1 to 31
    Case("TD609", True, "h200-x4", "NCCL_IB_TIMEOUT=0", env={"NCCL_IB_TIMEOUT": "0"}),
    Case("TD609", False, "h200-x4", "NCCL_IB_TIMEOUT=1", env={"NCCL_IB_TIMEOUT": "1"}),
    # TD607: a prefix of exactly two devices is already ambiguous
    Case(
        "TD607",
        True,
        HGX,
        "NCCL_IB_HCA=mlx5_1 with mlx5_7 named mlx5_10",
        renamed_nic("mlx5_7", "mlx5_10"),
        env={"NCCL_IB_HCA": "mlx5_1"},
    ),
    # TD52x: an Xid's age in seconds up to two minutes, in minutes up to two hours, then in hours
    _xid("TD520", "fallen-off-bus.log", 79, "critical", 119.0),
    _xid("TD520", "fallen-off-bus.log", 79, "critical", 120.0),
    _xid("TD520", "fallen-off-bus.log", 79, "critical", 3000.0),
    _xid("TD520", "fallen-off-bus.log", 79, "critical", 7199.0),
    _xid("TD520", "fallen-off-bus.log", 79, "critical", 7200.0),
    # TD511: one process of another job, said in the singular
    Case(
        "TD511",
        True,
        "h200-x4",
        "one process of another job on GPU2",
        gpu(2, compute_processes=(ONE_FOREIGN,)),
        subjects=("GPU2",),
        severity="info",
    ),
    # TD620: a level name in lower case or padded, and nvidia-smi's NODE in lower case
    Case("TD620", True, "h200-x4", "NCCL_P2P_LEVEL=' nvl'", env={"NCCL_P2P_LEVEL": " nvl"}),
    Case("TD620", True, "h200-x4", "NCCL_P2P_LEVEL=node", env={"NCCL_P2P_LEVEL": "node"}),
    # TD610: LL128 excluded is a debugging choice; LL128 named alone is TD611's
    Case("TD610", True, "h200-x4", "NCCL_PROTO=^LL128", env={"NCCL_PROTO": "^LL128"}),
    Case("TD610", False, "h200-x4", "NCCL_PROTO=LL128 (TD611's)", env={"NCCL_PROTO": "LL128"}),
    # TD103: a link at the edge of the host's speed
    Case(
        "TD103",
        True,
        "h200-x4",
        "GPU2 link 7 at 25233 MB/s, just under 0.95 of 26562",
        link(2, 7, speed_mbps=25233),
        at="SLOW_LINK_SHARE",
    ),
    Case(
        "TD103",
        False,
        "h200-x4",
        "GPU2 link 7 at 25234 MB/s, just over 0.95 of 26562",
        link(2, 7, speed_mbps=25234),
        at="SLOW_LINK_SHARE",
    ),
    # TD102: one link left of 18 is fewer, not none
    Case(
        "TD102",
        True,
        "h200-x4",
        "GPU3 with link 0 alone active",
        one_link_left(3),
        subjects=("GPU0-GPU3", "GPU1-GPU3", "GPU2-GPU3"),
    ),
    # TD605: two prefixes, each selecting an interface that is up (not one matching both)
    Case("TD605", False, HGX, "NCCL_SOCKET_IFNAME=eth,ib", env={"NCCL_SOCKET_IFNAME": "eth,ib"}),
    Case("TD605", False, HGX, "NCCL_SOCKET_IFNAME=^eth0: the ib interfaces left", env={"NCCL_SOCKET_IFNAME": "^eth0"}),
    Case(
        "TD605",
        True,
        HGX,
        "NCCL_SOCKET_IFNAME=^eth,ib: every interface excluded",
        env={"NCCL_SOCKET_IFNAME": "^eth,ib"},
    ),
    # TD607: RoCE devices are matched as InfiniBand ones are
    Case("TD607", True, HGX, "NCCL_IB_HCA=mlx5 on RoCE devices", nics(kind="roce"), env={"NCCL_IB_HCA": "mlx5"}),
    # TD102: peers' norm over the pairs that have NVLink, not the unwired ones; none expected, none judged
    Case(
        "TD102",
        True,
        HGX,
        "GPUs 4-7 unwired (22 pairs without NVLink), GPU3's link 0 down",
        both(unwired(4, 5, 6, 7), link(3, 0, active=False)),
        subjects=("GPU0-GPU3", "GPU1-GPU3", "GPU2-GPU3"),
    ),
    Case("TD102", False, "pcie-2socket", "no NVLink, and the node type expects none", expect_from="pcie-2socket"),
    # TD209: a replay rollover is TD211's, whatever else rose
    Case(
        "TD209",
        False,
        X1,
        "replay +1 and replay rollover +1 (TD211's)",
        sample("end", "pcie", replay=1, replay_rollover=1),
    ),
    # TD209 / TD211: L0-to-recovery counts as a retry; a rate is reported to one decimal
    Case("TD209", True, X1, "L0 to recovery +1 over 0.03 s", sample("end", "pcie", l0_to_recovery=136 + 1)),
    Case(
        "TD211",
        True,
        X1,
        "NAKs sent +101 over 0.7 s: 144.29 per second",
        both(sample("end", "pcie", naks_sent=13 + 101), at(100.0, 100.7)),
    ),
    # TD901: a listing below /sys/class/infiniband that failed is the RDMA devices' listing failing
    Case(
        "TD901",
        True,
        HGX,
        "mlx5_3's ports could not be listed",
        host_error("list /sys/class/infiniband/mlx5_3/ports"),
        subjects=("host",),
    ),
    # TD901: a recording from before kernel events were read says nothing of them; a log that
    # could not be read is a could-not-check
    Case(
        "TD901",
        False,
        "h200-x4",
        "kernel events not probed (an older recording)",
        kernel_log(Unsupported("NOT_PROBED")),
    ),
    Case(
        "TD901",
        True,
        "h200-x4",
        "no kernel log to read",
        kernel_log(Unsupported("NO_ACCESS")),
        subjects=("kernel-log",),
    ),
    # TD901: a field inside a GPU's record and a link's field are named where they are
    Case(
        "TD901",
        True,
        "h200-x4",
        "GPU2's PCIe link width unreadable",
        pcie(2, width_current=UNREAD),
        subjects=("GPU2",),
    ),
    Case(
        "TD901",
        True,
        "h200-x4",
        "GPU2's link 3 state unreadable",
        link(2, 3, active=UNREAD),
    ),
    # TD620: a reading of 0 says what 0 does; padding around a name is reported with it
    Case("TD620", True, "h200-x4", "NCCL_IB_DISABLE=false (strtoll reads 0)", env={"NCCL_IB_DISABLE": "false"}),
    Case("TD620", True, "h200-x4", "NCCL_P2P_LEVEL=' NODE'", env={"NCCL_P2P_LEVEL": " NODE"}),
    # TD616 / TD617 / TD622: CUDA's variables with blanks, and indices among UUIDs
    Case("TD616", True, "h200-x4", "CUDA_VISIBLE_DEVICES='1, 1'", env={"CUDA_VISIBLE_DEVICES": "1, 1"}),
    Case(
        "TD617",
        True,
        "h200-x4",
        "CUDA_VISIBLE_DEVICES=a UUID, then an index",
        env={"CUDA_VISIBLE_DEVICES": "GPU-00000000-0000-4000-8000-000000000003,1"},
    ),
    Case("TD622", True, "h200-x4", "CUDA_LAUNCH_BLOCKING=' 1'", env={"CUDA_LAUNCH_BLOCKING": " 1"}),
    # TD702: the one-way copies through peer access are judged, not the bidirectional ones
    Case("TD702", False, "h200-x4", "bidirectional GPU2<->GPU3 at 0.1x", bandwidth=bw_measure("bidir", 2, 3, 0.1)),
    Case(
        "TD702",
        False,
        "h200-x4",
        "one-way GPU2->GPU3 at 0.1x, staged through the host",
        bandwidth=bw_measure("oneway", 2, 3, 0.1, path="staged"),
    ),
    # TD703: a pair joined over PCIe alone is not "NVLink at PCIe speed"
    Case("TD703", False, "h200-x4", "GPU2 and GPU3 unwired, GPU2->GPU3 at 50 GB/s over PCIe", bandwidth=pcie_pair_2_3),
]
