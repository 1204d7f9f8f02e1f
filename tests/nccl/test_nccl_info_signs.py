"""The INFO lines that tell a class's causes apart (topodoctor/nccl/info_signs.py, read with
nccl.grammar's shapes): each read from a real line of the corpus (fixtures/nccl-logs/, each README
names the thread) or, where the corpus holds none, from NCCL's own format string at the tag named;
and each narrowing tested both ways: the line that singles a cause out, and the log without it."""

from __future__ import annotations

from pathlib import Path

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.info_signs import gid_address, read_signs
from topodoctor.nccl.parse import parse_file

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs"
A = "node-a:4021:4090 [0]"  # host:pid:tid [cudaDev], NCCL's line prefix
TRAIL = f"{A} NCCL INFO init.cc:1462 -> 6\n{A} NCCL INFO group.cc:75 -> 6 [Async thread]\n"
# v2.27.3-1 src/transport/net_ib.cc: "NET/IB: %s %d IbDev %d Port %d qpn %d mtu %d GID %ld (%lX/%lX) fifoRkey=0x%x
# fifoLkey=0x%x"; the GID's halves as x86 prints the network-order bytes
QP_V2 = (
    f"{A} NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1170 mtu 5 GID 3 (0/B9D4E80AFFFF0000) fifoRkey=0x2 "
    "fifoLkey=0x3\n"
)
QP_LINK_LOCAL = (
    f"{A} NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 1170 mtu 5 GID 1 (80FE/549FDFFFFE3AD6AA) fifoRkey=0x2 "
    "fifoLkey=0x3\n"
)
# v2.27.3-1 misc/ibvwrap.cc: the RTR transition timed out
QP_TIMEOUT = f"{A} misc/ibvwrap.cc:262 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out\n"
# v2.21.5-1 transport/net_ib.cc: a completion error
STATUS_12 = (
    f"{A} transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.232.212.186<45317> with error 12, "
    "opcode 0, len 0, vendor err 129 (Send)\n"
)


def _lead(text: str, name: str = "rank0.log") -> Finding:
    return next(f for f in explain([parse_file(name, text)]) if f.severity == "error")


def test_the_gid_of_net_ibs_queue_pair_line_reads_as_an_address() -> None:
    """A line of the kind NCCL 2.2x prints (`GID 3 (0/B9D4E80AFFFF0000)`, an IPv4-mapped RoCE v2 GID), the
    link-local form, and 2.30's wording (v2.30.7-1 net_ib/connect.cc: the function's name first, qp_num)."""
    assert gid_address("0", "B9D4E80AFFFF0000") == "::ffff:10.232.212.185"
    assert gid_address("80FE", "549FDFFFFE3AD6AA") == "fe80::aad6:3afe:ffdf:9f54"
    v230 = (
        f"{A} NCCL INFO NET/IB: ncclIbConnect: NCCL Dev 0 IbDev 0 Port 1 qp_num 77 mtu 5 GID 3 (0/B9D4E80AFFFF0000) "
        "ctsFifoRkey=0x1 ctsFifoLkey=0x2"
    )
    v218 = f"{A} NCCL INFO NET/IB: Dev 0 Port 1 qpn 77 mtu 5 GID 0 (80FE/549FDFFFFE3AD6AA)"  # v2.18.1-1 net_ib.cc
    signs = read_signs([v230, v218])
    assert [(s.kind, s.host, s.value) for s in signs] == [
        ("gid", "node-a", "3 ::ffff:10.232.212.185"),
        ("gid", "node-a", "0 fe80::aad6:3afe:ffdf:9f54"),
    ]
    # an IB port: v2.22.3-1 "... mtu %d LID %d subnet-prefix %lu FLID %d", v2.18.1-1 "Dev %d Port %d qpn %d mtu %d
    # LID %d"
    ib_port = f"{A} NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 77 mtu 5 LID 12 subnet-prefix 33022 FLID 0"
    ib_218 = f"{A} NCCL INFO NET/IB: Dev 0 Port 1 qpn 77 mtu 5 LID 12"
    assert [s.kind for s in read_signs([ib_port, ib_218])] == ["ib-lid"]


def test_status_12_on_an_infiniband_port_rules_out_the_roce_causes() -> None:
    ib_port = f"{A} NCCL INFO NET/IB: NCCL Dev 0 IbDev 0 Port 1 qpn 77 mtu 5 LID 12 subnet-prefix 33022 FLID 0\n"
    listed = _lead(ib_port + STATUS_12 + TRAIL).evidence["candidates"]
    assert isinstance(listed, list) and not any("GID index" in c or "RoCE IPs" in c for c in listed)
    listed = _lead(STATUS_12 + TRAIL).evidence["candidates"]
    assert isinstance(listed, list) and any("RoCE IPs" in c for c in listed)


def test_a_qp_timeout_on_a_link_local_gid_is_narrowed_to_the_gid_index() -> None:
    f = _lead(QP_LINK_LOCAL + QP_TIMEOUT + TRAIL)
    assert f.code == "TD064" and f.evidence["cause"]["confidence"] == "shown by the log"
    assert "GID index 1, fe80::" in str(f.evidence["narrowed_by"]) and "node-a" in str(f.evidence["narrowed_by"])
    assert f.fix.startswith("The link is RoCE (GIDs in use: index 1 fe80::")


def test_a_qp_timeout_on_a_routable_gid_nccl_chose_rules_the_gid_index_out() -> None:
    listed = _lead(QP_V2 + QP_TIMEOUT + TRAIL).evidence["candidates"]
    assert isinstance(listed, list) and not any("GID index selects" in c for c in listed)
    assert any("NCCL_CROSS_NIC=0" in c for c in listed)


def test_status_12_on_a_routable_gid_ranks_the_route_first_and_a_forced_index_keeps_the_gid() -> None:
    routable = _lead(QP_V2 + STATUS_12 + TRAIL)
    assert routable.code == "TD045"
    listed = routable.evidence["candidates"]
    assert isinstance(listed, list) and "not routed to each other" in listed[0]
    assert not any("GID index selects" in c for c in listed)
    # the same GID at an index the environment forced: the address does not say its RoCE version
    forced = _lead(f"{A} NCCL INFO NCCL_IB_GID_INDEX set by environment to 2.\n" + QP_V2 + STATUS_12 + TRAIL)
    listed = forced.evidence["candidates"]
    assert isinstance(listed, list) and "GID index selects" in listed[0]
    v1 = _lead(f"{A} NCCL INFO NCCL_IB_ROCE_VERSION_NUM set by environment to 1.\n" + QP_V2 + STATUS_12 + TRAIL)
    listed = v1.evidence["candidates"]
    assert isinstance(listed, list) and "GID index selects" in listed[0]


def test_status_12_on_a_link_local_gid_is_the_gid_index() -> None:
    f = _lead(QP_LINK_LOCAL + STATUS_12 + TRAIL)
    assert f.code == "TD045" and "link-local" in str(f.evidence["narrowed_by"])


def test_the_plugin_loaded_narrows_a_qp_timeout_and_no_plugin_rules_ibext_out() -> None:
    """v2.21.5-1 src/net.cc: "NET/Plugin: Loaded net plugin %s (v%d)"; the real 2.28 line of the corpus
    (`NET/Plugin: Could not find: libnccl-net.so`) says NCCL runs its own IB."""
    loaded = _lead(f"{A} NCCL INFO NET/Plugin: Loaded net plugin IBext_v8 (v8)\n" + QP_TIMEOUT + TRAIL)
    assert loaded.evidence["cause"]["confidence"] == "shown by the log"
    assert "IBext_v8" in str(loaded.evidence["narrowed_by"]) and "NCCL_IBEXT_DISABLE" in loaded.fix.split("If not")[0]
    real = next(
        line
        for p in sorted(LOGS.rglob("*.log"))
        for line in p.read_text(errors="replace").splitlines()
        if line.endswith("NCCL INFO NET/Plugin: Could not find: libnccl-net.so")
    )
    own = _lead(real + "\n" + QP_TIMEOUT + TRAIL)
    listed = own.evidence["candidates"]
    assert isinstance(listed, list) and not any("IBext" in c for c in listed)
    unknown = _lead(QP_TIMEOUT + TRAIL).evidence["candidates"]
    assert isinstance(unknown, list) and any("IBext" in c for c in unknown)


def test_the_ofi_provider_line_is_the_ofi_plugin() -> None:
    """The corpus's aws-ofi-nccl line (`NET/OFI Selected Provider is efa`) and 1.14+'s wording."""
    real = next(
        line
        for p in sorted(LOGS.rglob("*.log"))
        for line in p.read_text(errors="replace").splitlines()
        if "NCCL INFO NET/OFI Selected Provider is efa" in line
    )
    newer = f"{A} NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 4 nics)"
    assert [s.value for s in read_signs([real, newer]) if s.kind == "ofi-provider"] == ["efa"] * 2
    attr = f"{A} graph/xml.h:77 NCCL WARN Attribute arch of node cpu not found\n" + TRAIL
    listed = _lead(real + "\n" + attr).evidence["candidates"]
    assert isinstance(listed, list) and "aws-ofi-nccl" in listed[0]


def test_status_4_without_gpudirect_rdma_rules_out_the_gpu_memory_causes() -> None:
    """NVIDIA/nccl#928's completion error 4; connections as v2.21.5-1 transport/net.cc prints them."""
    warn = (LOGS / "real/nccl-928-completion-4-acs.log").read_text(errors="replace")
    conn = f"{A} NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0"
    no_gdr = _lead(conn + "\n" + warn)
    assert no_gdr.code == "TD066"
    listed = no_gdr.evidence["candidates"]
    assert isinstance(listed, list) and len(listed) == 1 and "freed or re-registered" in listed[0]
    gdr = _lead(conn + "/GDRDMA\n" + warn)
    listed = gdr.evidence["candidates"]
    assert isinstance(listed, list) and "ACS" in listed[0]


def test_nccl_cross_nic_0_set_by_environment_rules_the_rail_out() -> None:
    kept = _lead(f"{A} NCCL INFO NCCL_CROSS_NIC set by environment to 0.\n" + QP_TIMEOUT + TRAIL)
    listed = kept.evidence["candidates"]
    assert isinstance(listed, list) and not any("NCCL_CROSS_NIC=0" in c for c in listed)
    crossing = _lead(f"{A} NCCL INFO NCCL_CROSS_NIC set by environment to 1.\n" + QP_TIMEOUT + TRAIL)
    listed = crossing.evidence["candidates"]
    assert isinstance(listed, list) and any("NCCL_CROSS_NIC=0" in c for c in listed)


def test_status_4_with_gdr_level_0_or_no_user_registration_rules_those_causes_out() -> None:
    warn = (LOGS / "real/nccl-928-completion-4-acs.log").read_text(errors="replace")
    no_gdr = _lead(f"{A} NCCL INFO NCCL_NET_GDR_LEVEL set by environment to LOC\n" + warn)
    listed = no_gdr.evidence["candidates"]
    assert isinstance(listed, list) and len(listed) == 1 and "freed or re-registered" in listed[0]
    unregistered = (
        f"{A} NCCL INFO NCCL_LOCAL_REGISTER set by environment to 0.\n"
        f"{A} NCCL INFO NCCL_GRAPH_REGISTER set by environment to 0.\n"
    )
    listed = _lead(unregistered + warn).evidence["candidates"]
    assert isinstance(listed, list) and "ACS" in listed[0] and not any("freed" in c for c in listed)
    one_off = _lead(f"{A} NCCL INFO NCCL_LOCAL_REGISTER set by environment to 0.\n" + warn).evidence["candidates"]
    assert isinstance(one_off, list) and any("freed" in c for c in one_off)  # graph registration still on


def test_error_13_rules_out_the_peers_gpu_memory_only_when_both_nodes_show_no_gdrdma() -> None:
    """v2.21.5-1 transport/net_ib.cc's completion error 13; both nodes' connection lines without /GDRDMA."""
    b = "node-b:5021:5090 [0]"
    warn = (
        f"{A} transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 13, "
        "opcode 0, len 0, vendor err 136\n"
    )
    conns = (
        f"{A} NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0\n"
        f"{b} NCCL INFO Channel 00/0 : 0[0] -> 1[0] [receive] via NET/IB/0\n"
    )
    both = next(f for f in explain([parse_file("job.log", conns + warn)]) if f.code == "TD068")
    listed = both.evidence["candidates"]
    assert isinstance(listed, list) and not any("registration" in c for c in listed)
    one = next(f for f in explain([parse_file("job.log", conns.splitlines()[0] + "\n" + warn)]) if f.code == "TD068")
    listed = one.evidence["candidates"]
    assert isinstance(listed, list) and any("registration" in c for c in listed)


def test_an_nvls_failure_at_destroy_ranks_the_early_release_first() -> None:
    """v2.27.3-1 init.cc's `commReclaim: cleanup comm %p rank %d failed in destroy/abort, error %d` after nvls.cc's
    failure: the communicator's teardown, where another component may have released the memory first."""
    nvls = f"{A} transport/nvls.cc:130 NCCL WARN Cuda failure 1 'invalid argument'\n"
    reclaim = f"{A} init.cc:2149 NCCL WARN commReclaim: cleanup comm 0x55 rank 0 failed in destroy/abort, error 1\n"
    at_end = _lead(nvls + TRAIL + reclaim).evidence["candidates"]
    assert isinstance(at_end, list) and "released NCCL's multicast memory first" in at_end[0]
    at_init = _lead(nvls + TRAIL).evidence["candidates"]
    assert isinstance(at_init, list) and "Fabric Manager" in at_init[0]


def test_status_4_where_nccl_disabled_gpudirect_rdma_for_every_hca_rules_out_the_gpu_memory_causes() -> None:
    """v2.21.5-1 graph/topo.cc: "NET/%s : GPU Direct RDMA %s for HCA %d '%s'" (the corpus holds it for
    sockets: `NET/Socket : GPU Direct RDMA Disabled for HCA 0 'lo'`), and no connection line."""
    warn = (LOGS / "real/nccl-928-completion-4-acs.log").read_text(errors="replace")
    off = f"{A} NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n"
    listed = _lead(off + warn).evidence["candidates"]
    assert isinstance(listed, list) and len(listed) == 1 and "freed" in listed[0]
    on = off + f"{A} NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 1 'mlx5_1'\n"
    listed = _lead(on + warn).evidence["candidates"]
    assert isinstance(listed, list) and "ACS" in listed[0]
