"""NCCL's account, read from NCCL INFO logs captured on nvidia-h200-x2 (NCCL 2.28.9, two ranks of
torch.distributed, one log per rank through NCCL_DEBUG_FILE): fixtures/nccl-logs/<variant>/."""

from __future__ import annotations

from pathlib import Path

import pytest
from collectives_support import NCCL_LOGS

from topodoctor.core.errors import InputError
from topodoctor.nccl import account as nccl_log


def _account(variant: str):  # type: ignore[no-untyped-def]
    acc = nccl_log.read_logs(NCCL_LOGS / variant)
    assert acc is not None
    return acc


def _transports(acc) -> dict[str, int]:  # type: ignore[no-untyped-def]
    out: dict[str, int] = {}
    for c in acc.connections:
        out[c.transport] = out.get(c.transport, 0) + c.channels
    return out


@pytest.mark.parametrize("variant", ["default", "subsys-all"])
def test_default_run_nvlink_p2p(variant: str) -> None:
    acc = _account(variant)
    assert (acc.version, acc.ranks, acc.nodes, acc.logs) == ("2.28.9+cuda13.0", 2, 1, 2)
    assert (acc.channels, acc.p2p_channels, acc.nvls_channels, acc.nvls) == (24, 32, 0, False)
    assert set(_transports(acc)) == {"P2P/CUMEM"}
    assert {(c.rank, c.peer) for c in acc.connections} == {(0, 1), (1, 0)}
    assert acc.rings == ("0 1",) and acc.gdr is None
    assert acc.env["NCCL_NVLS_ENABLE"] == "0"


def test_default_counts_ring_and_p2p_connections() -> None:
    # each rank logs 24 ring connections (Channel NN/0) and 32 point-to-point ones (NN/1)
    assert _transports(_account("default")) == {"P2P/CUMEM": 2 * (24 + 32)}


def test_p2p_disabled_falls_back_to_shm() -> None:
    acc = _account("p2p-disable")
    assert _transports(acc) == {"SHM": 8} and acc.channels == 4
    assert acc.env["NCCL_P2P_DISABLE"] == "1"


def test_one_channel() -> None:
    acc = _account("maxch1")
    assert acc.channels == 1 and acc.env["NCCL_MAX_NCHANNELS"] == "1"  # NCCL's trailing dot dropped


def test_two_host_ids_use_the_network() -> None:
    acc = _account("two-nodes")
    assert acc.nodes == 2 and acc.gdr is False
    # both ends log each network connection ([send] and [receive]): counted once
    assert _transports(acc) == {"NET/Socket": 8}
    assert acc.env["NCCL_SOCKET_IFNAME"] == "lo"


def test_rank_to_nvml_device() -> None:
    texts = [p.read_text() for p in sorted((NCCL_LOGS / "default").glob("*.log"))]
    assert nccl_log.nvml_devices(texts) == {0: 0, 1: 1}


def test_documented_lines_not_on_these_hosts() -> None:
    """Wordings the H200 hosts cannot show: NVLS on, InfiniBand with GPUDirect RDMA, a warning."""
    text = "\n".join(
        [
            "h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
            "h:1:1 [0] NCCL INFO comm 0x5 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0",
            "h:1:1 [0] NCCL INFO 32 coll channels, 32 collnet channels, 16 nvls channels, 32 p2p channels, 2 p2p "
            "channels per peer",
            "h:1:1 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA",
            "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC/read",
            "h:1:1 [0] NCCL WARN NET/IB : Got completion from peer 10.0.0.2 with error 12",
        ]
    )
    acc = nccl_log.account([text])
    assert acc is not None
    assert (acc.ranks, acc.nodes, acc.nvls, acc.nvls_channels, acc.gdr) == (16, 2, True, 16, True)
    assert _transports(acc) == {"NET/IB": 1, "P2P/IPC": 1}
    assert acc.warnings[0].startswith("NET/IB : Got completion")


def test_no_nvls_line_and_unrelated_text() -> None:
    acc = nccl_log.account(["x NCCL INFO NVLS multicast support is not available on dev 0\n"])
    assert acc is None  # a line without version, comm or connection is not an account
    both = "y NCCL INFO NCCL version 2.19.3\ny NCCL INFO NVLS multicast support is not available on dev 0\n"
    acc = nccl_log.account([both])
    assert acc is not None and acc.nvls is False
    assert nccl_log.account(["", "garbage\n\x00\n"]) is None


def test_logs_are_read_bounded(tmp_path: Path) -> None:
    (tmp_path / "nccl.0.log").mkdir()  # a directory named like a log: one clear error
    with pytest.raises(InputError, match="is a directory"):
        nccl_log.read_logs(tmp_path)


def test_subgroup_connections_are_not_the_worlds() -> None:
    """A real two-node run with --pairwise (x2, 2026-11-22): after the world's communicator, each
    subgroup's (ncclCommSplit) connection lines follow; they are set apart, not counted."""
    for path in sorted((NCCL_LOGS / "two-nodes-subgroups").glob("*.log")):
        log = nccl_log.parse_log(path.read_text())
        assert len(log.comms) == 3 and len(log.conns) == 8 and log.other_conns == 12, path.name


def test_subgroup_ranks_are_not_read_as_world_ranks() -> None:
    """A rail of a 2 x 2 world: the subgroup's ranks 0 and 1 are the world's 0 and 2, and its
    network link must not show up as one between the world's ranks 0 and 1 (same node)."""
    text = "\n".join(
        [
            "h:1:1 [0] NCCL INFO comm 0xaa rank 0 nRanks 4 nNodes 2 localRanks 2 localRank 0 MNNVL 0",
            "h:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
            "h:1:9 [0] NCCL INFO ncclCommSplit comm 0xbb rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 60 parent 0xaa",
            "h:1:9 [0] NCCL INFO comm 0xbb rank 0 nRanks 2 nNodes 2 localRanks 1 localRank 0 MNNVL 0",
            "h:1:9 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Socket/0",
        ]
    )
    acc = nccl_log.account([text])
    assert acc is not None and acc.ranks == 4
    assert [(c.rank, c.peer, c.transport) for c in acc.connections] == [(0, 1, "P2P/CUMEM")]


def test_two_nodes_of_two_gpus_nvlink_inside_network_between() -> None:
    """A real 2 x 2 world (x2, 2026-11-22: two torchrun launches of two ranks, NCCL_HOSTID apart):
    inside a node NCCL connects over P2P, between nodes over NET, and the rails' subgroup lines
    (ranks 0 and 1 of a rail are the world's 0 and 2) do not turn into a link inside a node."""
    acc = _account("two-by-two")
    assert (acc.ranks, acc.nodes) == (4, 2)
    node = {0: "A", 1: "A", 2: "B", 3: "B"}
    for c in acc.connections:
        same = node[c.rank] == node[c.peer]
        assert c.kind == ("p2p" if same else "net"), c
    assert _transports(acc) == {"P2P/CUMEM": 8, "NET/Socket": 8}
