"""Each failure class `nccl-log` names (TD041 - TD079): a line that fires it, with the severity
and the evidence-specific fix, and a near miss that must not (the same call's retry at INFO, a
sibling error with another fix, the narrow texts). The lines follow NCCL's format strings
(src/include/checks.h, misc/ibvwrap.cc, transport/net_ib, transport/nvls.cc, misc/shmutils.cc,
misc/socket.cc, graph/xml.h, graph/search.cc, enqueue.cc, misc/nvmlwrap.cc), as the real logs
in fixtures/nccl-logs/real/ print them."""

from __future__ import annotations

import pytest

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

H = "gpu7:4021:4090 [3]"  # host:pid:tid [cudaDev], NCCL's line prefix
TRAIL = f"{H} NCCL INFO init.cc:1462 -> 1\n{H} NCCL INFO group.cc:75 -> 1 [Async thread]\n"


def _explain(text: str, name: str = "rank3.log") -> list[Finding]:
    return explain([parse_file(name, text)])


# (code, severity, a line that fires it, a word its fix or message must hold)
FIRING = [
    (
        "TD053",
        "error",
        f"{H} transport/nvls.cc:598 NCCL WARN Cuda failure 1 'invalid argument'\n" + TRAIL,
        "Fabric Manager",
    ),
    (
        "TD053",
        "error",
        "Last error:\nFailed to bind NVLink SHARP (NVLS) Multicast memory of size 2097152 : CUDA error "
        "401 'the operation cannot be performed in the present state'.\n",
        "NCCL_NVLS_ENABLE=0",
    ),
    (
        "TD054",
        "error",
        "[rank0]: Last error:\n[rank0]: Cuda failure 802 'system not yet initialized'\n",
        "nvidia-fabricmanager",
    ),
    (
        "TD055",
        "error",
        f"{H} transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer access is not "
        "supported between these two devices\n",
        "NCCL_P2P_DISABLE=1",
    ),
    ("TD056", "error", f"{H} misc/shmutils.cc:103 NCCL WARN Cuda failure 'invalid argument'\n", "NCCL_SHM_DISABLE=1"),
    (
        "TD057",
        "error",
        f"{H} enqueue.cc:1510 NCCL WARN Cuda failure 700 'an illegal memory access was encountered'\n",
        "xid",
    ),
    ("TD058", "error", f"{H} include/alloc.h:178 NCCL WARN Cuda failure 'out of memory'\n" + TRAIL, "NCCL_BUFFSIZE"),
    (
        "TD059",
        "warning",
        f"{H} bootstrap.cc:279 NCCL WARN [Rem Allocator] Allocation failed (segment 0, fd 130)\n",
        "Upgrade NCCL",
    ),
    ("TD060", "error", f"{H} enqueue.cc:58 NCCL WARN Cuda failure 'named symbol not found'\n", "NVCC_GENCODE"),
    (
        "TD061",
        "error",
        f"{H} misc/ibvwrap.cc:200 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory\n",
        "memlock",
    ),
    (  # RCCL names the HIP call itself: its IPC candidates, not CUDA's cuMem ones
        "TD057",
        "error",
        f"{H} transport/p2p.cc:256 NCCL WARN hipIpcGetMemHandle failed : invalid argument\n",
        "--ipc=host",
    ),
    (  # NVSHMEM beside NCCL: IBGDA drives mlx5 NICs only
        "TD106",
        "error",
        "WARN: device erdma_0 is not enumerated as an mlx5 device. Skipping...\n",
        "ConnectX",
    ),
    (  # libfabric's own line, the plugin's not pasted
        "TD084",
        "error",
        "libfabric:1:1:core:core:fi_getinfo_():1391<warn> fi_getinfo: provider efa output empty list\n",
        "fi_info -p efa",
    ),
    (  # a queue, not a registration: the limit and the adapter's own queues are both candidates
        "TD065",
        "error",
        f"{H} misc/ibvwrap.cc:190 NCCL WARN Call to ibv_create_cq failed with error Cannot allocate memory\n",
        "max_cq",
    ),
    (
        "TD062",
        "error",
        f"{H} misc/ibvwrap.cc:288 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Operation not supported\n",
        "NCCL_DMABUF_ENABLE=0",
    ),
    (
        "TD063",
        "error",
        f"{H} misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error No such device\n",
        "NCCL_IB_HCA",
    ),
    (
        "TD064",
        "error",
        f"{H} misc/ibvwrap.cc:376 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, "
        "on dev mlx5_3:1, curr state INIT, next state RTR, local GID index 3\n",
        "NCCL_CROSS_NIC=0",
    ),
    (
        "TD064",
        "error",
        f"{H} NCCL INFO NCCL_IB_GID_INDEX set by environment to 5.\n{H} misc/ibvwrap.cc:376 NCCL WARN "
        "Call to ibv_modify_qp failed with 22 Invalid argument, on dev mlx5_0:1, curr state INIT\n",
        "NCCL_IB_GID_INDEX=5",
    ),
    ("TD065", "error", f"{H} misc/ibvwrap.cc:280 NCCL WARN Call to ibv_create_qp failed\n", "ibv_devinfo"),
    (
        "TD066",
        "error",
        f"{H} transport/net_ib/p2p.cc:688 NCCL WARN NET/IB: Got completion from peer 10.0.0.2<4021> "
        "with status=IBV_WC_LOC_PROT_ERR(4) opcode=IBV_WC_SEND(0) vendor_err=81 hca mlx5_3\n",
        "ACS",
    ),
    (  # a flushed request alone: what failed first is not in the log (TD067 follows the lead)
        "TD052",
        "error",
        f"{H} ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<54862> with "
        "status=5 opcode=32656 len=32659 vendor err 249 (Recv)\n",
        "first completion error",
    ),
    (
        "TD068",
        "error",
        f"{H} transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with "
        "error 13, opcode 0, len 0, vendor err 136\n",
        "receive",
    ),
    (
        "TD045",
        "error",
        f"{H} NCCL INFO NET/IB : Using [0]mlx5_2:1/RoCE [RO]; OOB eth0:10.0.0.1<0>\n{H} "
        "transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12, opcode 0, "
        "len 0, vendor err 129\n",
        "The link is RoCE",
    ),
    (
        "TD069",
        "error",
        f"{H} NCCL INFO NCCL_TOPO_FILE set by environment to /opt/topo.xml\n{H} graph/xml.h:77 NCCL "
        "WARN Attribute arch of node cpu not found\n",
        "/opt/topo.xml",
    ),
    (
        "TD070",
        "error",
        f"{H} NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/g.xml\n{H} graph/search.cc:703 "
        "NCCL WARN XML Import Channel : dev 1 not found.\n",
        "NCCL_GRAPH_FILE=/opt/g.xml",
    ),
    (
        "TD071",
        "error",
        f"{H} graph/xml.cc:332 NCCL WARN Could not find real path of /sys/class/pci_bus/0000:01/../../0000:01:00.0\n",
        "WSL2",
    ),
    (
        "TD072",
        "error",
        f"{H} misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<45763> failed : "
        "Connection refused\n",
        "MASTER_ADDR",
    ),
    (
        "TD072",
        "error",
        f"{H} misc/socket.cc:533 NCCL WARN socketPollConnect: Connect to 10.0.0.4<56849> returned "
        "113(No route to host) errno 115(Operation now in progress)\n",
        "NCCL_SOCKET_IFNAME",
    ),
    (
        "TD073",
        "error",
        f"{H} transport/net_socket.cc:200 NCCL WARN NET/Socket : message truncated : receiving 696320 "
        "bytes instead of 32768\n",
        "env | grep NCCL",
    ),
    (
        "TD074",
        "error",
        f"{H} misc/shmutils.cc:129 NCCL WARN Error while attaching to shared memory segment "
        "/dev/shm/nccl-glnlGK (size 14156128), error: No such file or directory (2)\n",
        "--ipc=host",
    ),
    ("TD076", "info", f"{H} NCCL DIAG the fabric is degraded on one plane\n", "NCCL's text"),
    (
        "TD077",
        "error",
        f"{H} NCCL INFO NCCL_ALGO set by environment to Tree\n{H} enqueue.cc:2063 NCCL WARN No "
        "algorithm/protocol available for function AllGather with datatype ncclInt8. NCCL_ALGO was set to Tree.\n",
        "NCCL_ALGO=Tree",
    ),
    (
        "TD078",
        "error",
        f"{H} misc/nvmlwrap.cc:142 NCCL WARN nvmlInit_v2() failed: Driver/library version mismatch\n",
        "reboot",
    ),
    ("TD079", "error", "# Out of bounds values : 12 FAILED\n# Avg bus bandwidth    : 91.2\n", "dcgmi diag"),
    (
        "TD043",
        "error",
        f"{H} misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-Ab12 to 9637892 "
        "bytes, error: No space left on device (28)\n",
        "--shm-size",
    ),
    (
        "TD046",
        "error",
        f"{H} misc/socket.cc:58 NCCL WARN socketProgress: Connection closed by remote peer n2<4>\n",
        "failed first",
    ),
    (
        "TD052",
        "error",
        f"{H} transport.cc:33 NCCL WARN something NCCL has never said before\n" + TRAIL,
        "NCCL_DEBUG=INFO",
    ),
]


@pytest.mark.parametrize(
    ("code", "severity", "text", "word"), FIRING, ids=[f"{c}-{i}" for i, (c, *_) in enumerate(FIRING)]
)
def test_class_fires_with_its_severity_and_a_specific_fix(code: str, severity: str, text: str, word: str) -> None:
    first = _explain(text)[0]
    assert (first.code, first.severity) == (code, severity), first
    assert word in first.fix + " " + first.message, (word, first.fix)


# (code that must not appear, text): the near misses
NEAR = [
    ("TD053", f"{H} NCCL INFO NVLS multicast support is available on dev 3 (NVLS_NCHANNELS 16)\n"),
    ("TD057", f"{H} NCCL INFO Cuda failure 'peer access is already enabled'\n"),  # CUDACHECKIGNORE prints INFO
    (
        "TD058",
        f"{H} bootstrap.cc:279 NCCL WARN [Rem Allocator] Allocation failed (segment 0, fd 130)\n"
        f"{H} include/alloc.h:48 NCCL WARN Cuda failure 'out of memory'\n",
    ),  # old NCCL's allocator, not the job's memory
    ("TD061", f"{H} misc/ibvwrap.cc:200 NCCL WARN Call to ibv_reg_mr failed with error Bad address\n"),
    ("TD062", f"{H} misc/ibvwrap.cc:288 NCCL WARN Call to ibv_reg_dmabuf_mr failed with error Bad file descriptor\n"),
    (
        "TD063",
        f"{H} misc/ibvwrap.cc:376 NCCL WARN Call to ibv_modify_qp failed with 22 Invalid argument, on dev m:1,\n",
    ),
    (
        "TD064",
        f"{H} NCCL INFO Call to ibv_modify_qp failed with 110 Connection timed out, on dev mlx5_3:1, curr state "
        "INIT, next state RTR, retrying 1/5 after 1000 msec of sleep\n",
    ),
    (
        "TD066",
        f"{H} transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12, "
        "opcode 0, len 0, vendor err 129\n",
    ),
    (
        "TD067",
        f"{H} ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 1.2.3.4<5> with status=12 opcode=0 "
        f"len=0 vendor err 129 (Recv)\n{H} ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer 1.2.3.4<5> "
        "with status=5 opcode=32656 len=32659 vendor err 249 (Recv)\n",
    ),
    ("TD069", f"{H} NCCL INFO Loading topology file /opt/microsoft/ncv4/topo.xml\n"),
    ("TD070", f"{H} NCCL INFO NCCL_GRAPH_FILE set by environment to /opt/g.xml\n"),
    (
        "TD071",
        f"{H} NCCL INFO NCCL_TOPO_FILE set by environment to /t.xml\n{H} graph/paths.cc:82 NCCL WARN Failed to "
        "find reverse path from remNode 0/200000 nlinks 3 to node 0/700000\n",
    ),
    (
        "TD072",
        f"{H} NCCL INFO socketPollConnect: connect returned Connection refused, retrying (1/34) after sleep for "
        "100 msec\n",
    ),
    ("TD073", f"{H} NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/IPC\n"),
    (
        "TD074",
        f"{H} misc/shmutils.cc:132 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-a (size "
        "9637888), error: No space left on device (28)\n",
    ),
    (
        "TD043",
        f"{H} misc/shmutils.cc:114 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-a (size "
        "0)\n" + TRAIL,
    ),  # a size of 0 is no segment NCCL sizes: a peer's cuMem descriptor read as a path
    ("TD043", f"{H} misc/shmutils.cc:93 NCCL WARN Call to open failed: No such file or directory\n"),
    ("TD077", f"{H} NCCL INFO NCCL_ALGO set by environment to Tree\n"),
    ("TD079", "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 91.2\n"),
    (
        "TD046",
        f"{H} misc/socket.cc:58 NCCL WARN socketProgress: Connection closed by remote peer n2<4>\n"
        "Train Epoch: 1 [2700/246000 (18%)]\tLoss: 0.000002425569619\n",
    ),  # the run went on: a warning (TD075)
    ("TD052", f"{H} graph/search.cc:765 NCCL WARN Could not find a path for pattern 4, falling back to simple order\n"),
]


@pytest.mark.parametrize(("code", "text"), NEAR, ids=[f"not-{c}-{i}" for i, (c, _) in enumerate(NEAR)])
def test_near_miss_does_not_fire(code: str, text: str) -> None:
    assert code not in [f.code for f in _explain(text)]


def test_near_misses_land_where_they_belong() -> None:
    went_on = _explain(NEAR[-2][1])
    assert [(f.code, f.severity) for f in went_on] == [("TD075", "warning")]
    benign = _explain(NEAR[-1][1])
    assert [(f.code, f.severity) for f in benign] == [("TD051", "info")]
    assert _explain(NEAR[0][1]) == [] and _explain(NEAR[1][1]) == []
    (flushed_after_12, *_) = _explain(NEAR[8][1])
    assert flushed_after_12.code == "TD045"  # status 5 follows the first error, it is not the cause
    assert _explain(NEAR[11][1])[0].code == "TD069"  # a reverse path with a topology file set: the file
    size_0 = _explain(NEAR[15][1])
    assert (size_0[0].code, size_0[0].severity) == ("TD087", "error")  # failed, the SHM transport's cuMem class


def test_status_12_fix_follows_the_link_layer_the_log_names() -> None:
    line = (
        f"{H} transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 12, "
        "opcode 0, len 0, vendor err 129\n"
    )
    ib = _explain(f"{H} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>\n" + line)[0]
    assert "The link is InfiniBand" in ib.fix and "The link is RoCE" not in ib.fix
    unknown = _explain(line)[0]  # the log names no link layer: the candidates, the GID index first (RoCE is common)
    assert unknown.evidence["cause"]["confidence"] == "candidates"
    assert "(1) the GID index" in unknown.fix and "ibstat" in unknown.fix and "NCCL_IB_TIMEOUT" in unknown.fix


def test_the_trail_to_the_top_means_the_job_failed_whatever_the_warn_says() -> None:
    warn = f"{H} misc/utils.cc:12 NCCL WARN a message of no known class\n"
    assert [(f.code, f.severity) for f in _explain(warn)] == [("TD051", "info")]
    for top in (
        f"{H} NCCL INFO group.cc:64 -> 2 [Async thread]\n",
        f"{H} NCCL INFO init.cc:1303 -> 2\n",
        f"{H} NCCL INFO proxy.cc:878 -> 6 [Progress Thread]\n",
    ):
        (f,) = _explain(warn + top)
        assert (f.code, f.severity) == ("TD052", "error") and "a message of no known class" in f.message
    below = _explain(warn + f"{H} NCCL INFO bootstrap.cc:229 -> 2\n")  # not the top: a helper thread's error
    assert [f.code for f in below] == ["TD051"]


def test_a_trail_without_any_warn_names_its_path() -> None:
    text = (
        f"{H} NCCL INFO misc/socket.cc:564 -> 2\n{H} NCCL INFO bootstrap.cc:270 -> 2\n"
        f"{H} NCCL INFO init.cc:1303 -> 2\n{H} NCCL INFO group.cc:64 -> 2 [Async thread]\n"
    )
    (f,) = _explain(text)
    assert f.code == "TD052" and "misc/socket.cc -> bootstrap.cc -> init.cc" in f.message
    assert "unhandled system error" in f.message


def test_connection_fix_names_the_bridge_interface_nccl_used() -> None:
    boot = f"{H} NCCL INFO Bootstrap : Using [0]ens5:172.31.0.137<0> [1]veth75fa783:fe80::14ad%veth75fa783<0>\n"
    warn = f"{H} misc/socket.cc:424 NCCL WARN Connect to 10.0.0.2<33719> failed : Network is unreachable\n"
    (f,) = _explain(boot + warn)
    assert f.code == "TD072" and "veth75fa783" in f.fix and "NCCL_SOCKET_IFNAME=ens5" in f.fix
    (g,) = _explain(f"{H} NCCL INFO Bootstrap : Using [0]ens5:172.31.0.137<0>\n" + warn)
    assert "bridge" not in g.fix  # only a routed interface: nothing to say about it


def test_watchdog_on_geforce_gpus_points_at_p2p() -> None:
    timeout = (
        "[E ProcessGroupNCCL.cpp:474] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
        "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for 1800762 milliseconds before timing "
        "out.\n"
    )
    device = "#  Rank  0 Group  0 Pid 1896106 on node device  0 [0x16] NVIDIA {}\n"
    (f,) = _explain(device.format("GeForce RTX 4090") + timeout)
    assert (f.code, f.severity) == ("TD047", "error") and "NCCL_P2P_DISABLE=1" in f.fix
    (g,) = _explain(device.format("H100 80GB HBM3") + timeout.replace("SeqNum=1,", "SeqNum=812,"))
    assert "NCCL_P2P_DISABLE" not in g.fix and "GeForce" not in g.fix
    (h,) = _explain(device.format("H100 80GB HBM3") + timeout)  # the first work: NCCL connects its peers on it
    assert "GeForce" not in h.fix and "the first collective never completes" in h.fix


def test_every_finding_says_how_sure_its_cause_is() -> None:
    by_code = {code: _explain(text)[0] for code, _, text, _ in FIRING}
    # a message never seen, printed by transport.cc: cause not found, with that part of NCCL's candidates
    assert by_code["TD052"].evidence["cause"] == {"what": "not found", "confidence": "candidates"}
    (bare,) = _explain("NCCL WARN something NCCL has never said before\nNCCL INFO init.cc:1462 -> 1 [Async thread]\n")
    assert bare.evidence["cause"] == {"what": "not found", "confidence": "not found"}  # no site, no telling words
    # ENOMEM on a registration: the locked-memory limit first, a kernel that fails it where the limit allows it
    assert by_code["TD061"].evidence["cause"]["confidence"] == "candidates"
    assert by_code["TD066"].evidence["cause"]["confidence"] == "candidates"  # status 4 alone: ACS, peermem, a buffer
    assert all("cause" in f.evidence for f in by_code.values())
