"""Sockets between nodes (TD025): the fix follows the network the evidence shows, read by the real readers
from text people posted (each test names its thread)."""

from __future__ import annotations

from pathlib import Path

from tests_support_evidence import judge

from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.findings import Finding

ROOT = Path(__file__).resolve().parents[2]
REAL2 = ROOT / "fixtures/diagnose/real2"


def _td025(*texts: str) -> Finding:
    ev = join([read_input(f"evidence-{k}.txt", t) for k, t in enumerate(texts)])
    return next(f for f in judge(ev) if f.code == "TD025")


def test_sockets_between_two_hosts_without_a_nic_listing_ask_for_one_and_give_both_fixes() -> None:
    """nccl-tests#284 (https://github.com/NVIDIA/nccl-tests/issues/284): every channel between agzen-master
    and agzen-worker `via NET/Socket/0`, nothing that lists their NICs."""
    text = (REAL2 / "sockets-two-hosts-no-nic-listing/evidence-1.txt").read_text()
    f = _td025(text)
    assert f.severity == "warning"
    assert "`ibv_devinfo`" in f.message and "topo -m" in f.message
    assert "If `ibv_devinfo` lists RDMA devices" in f.fix and "/dev/infiniband" in f.fix
    assert "NCCL_NSOCKS_PERTHREAD" in f.fix and "slowest stream" in f.fix


SOCKET_OVER_IPOIB = """
node013:37715:38896 [0] NCCL INFO NET/IB : No device found.
node013:37715:38896 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.
node013:37715:38896 [0] NCCL INFO NET/Socket : Using [0]ibp60s0:10.149.0.32<0>
node013:37715:38896 [0] NCCL INFO Using network Socket
node014:41802:42117 [0] NCCL INFO NET/IB : No device found.
node014:41802:42117 [0] NCCL INFO NET/Socket : Using [0]ibp60s0:10.149.0.33<0>
node014:41802:42117 [0] NCCL INFO Using network Socket
"""


def test_sockets_over_an_ipoib_interface_are_sockets_where_infiniband_is() -> None:
    """pytorch#111424 (https://github.com/pytorch/pytorch/issues/111424) and nccl#952
    (https://github.com/NVIDIA/nccl/issues/952): `NET/IB : No device found` on nodes whose interface for
    NCCL is ibp12s0 / ibp60s0 (IP over InfiniBand; the lines after the first two are the shape NCCL prints
    next, net_socket.cc): the HCA is there, so the RDMA fix, at error, and not the socket tuning."""
    f = _td025(SOCKET_OVER_IPOIB)
    assert f.severity == "error"
    assert "ibp60s0 (IPoIB)" in f.message and "NCCL found no IB device" in f.message
    assert "/dev/infiniband" in f.fix and "NCCL_IB_HCA" in f.fix and "NSOCKS" not in f.fix


AZURE_TCP = (
    "$ mpirun --bind-to none --mca pml ob1 --mca btl tcp,self -x NCCL_DEBUG=WARN -x NCCL_ALGO=Ring "
    "-x NCCL_PROTO=Simple -x NCCL_IB_DISABLE=1 -x NCCL_NSOCKS_PERTHREAD=8 -x NCCL_SOCKET_NTHREADS=4 "
    "-x NCCL_MAX_NCHANNELS=2 -x NCCL_MIN_NCHANNELS=2 -x NCCL_SOCKET_IFNAME=eth0 -np 2 "
    "--host 10.0.0.48:1,10.0.0.52:1 ./build/broadcast_perf -b 8 -e 2G -w 10 -f 2 -g 1 -n 100 -c 0\n"
    "v100-gpu-1:14926:14926 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
    "NCCL version 2.9.6+cuda11.2\n"
    "v100-gpu-5:9210:9210 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]\n"
)


def test_a_tcp_only_network_gets_the_socket_transport_limits_not_enable_rdma() -> None:
    """nccl-tests#82 (https://github.com/NVIDIA/nccl-tests/issues/82), the Azure VMs over TCP: IB disabled,
    no verbs, the socket transport tuned by hand (4 threads x 8 sockets) and no RDMA device anywhere: the
    rate is the slowest socket's times the sockets, and the fix is about those streams."""
    f = _td025(AZURE_TCP)
    assert f.severity == "warning"
    assert "TCP-only network" in f.message and "NCCL_IB_DISABLE=1" in f.message
    assert "slowest stream's rate times the streams" in f.fix
    assert "at most 16 threads and 64 sockets" in f.fix and "32 streams per connection" in f.fix
    assert "/dev/infiniband" not in f.fix and "libibverbs" not in f.fix


ETHTOOL = """
$ ethtool eth0
Settings for eth0:
	Supported ports: [ ]
	Speed: 25000Mb/s
	Duplex: Full
	Link detected: yes
"""


def test_an_ethernet_listing_without_rdma_is_a_tcp_only_network() -> None:
    """The socket lines of nccl-tests#284 beside an `ethtool` listing of a plain Ethernet interface (the
    form of fixtures/evidence's ethtool readers): the network shown has no RDMA device."""
    text = (REAL2 / "sockets-two-hosts-no-nic-listing/evidence-1.txt").read_text()
    f = _td025(text, ETHTOOL)
    assert f.severity == "warning" and "(eth0) are Ethernet" in f.message
    assert "/dev/infiniband" not in f.fix and "NCCL_SOCKET_NTHREADS" in f.fix


def test_rdma_nics_listed_give_the_rdma_fix_with_them_named() -> None:
    """nccl#451's lines (fixtures/diagnose/real/container-ib-open-fails-socket): the device NCCL could not
    open is an RDMA NIC, so the fix names it and the container's device access, at error."""
    case = ROOT / "fixtures/diagnose/real/container-ib-open-fails-socket"
    f = _td025(*(p.read_text() for p in sorted(case.glob("evidence-*.txt"))))
    assert f.severity == "error" and "mlx5_bond_0" in f.fix and "NSOCKS" not in f.fix


def test_nics_named_by_nccl_ib_hca_but_not_listed_are_said_and_the_listing_asked_for() -> None:
    """LlamaFactory#6111's log (fixtures/diagnose/holdout2/c-02): NCCL_IB_HCA names eight mlx5 ports, NCCL
    found no IB device and ran on sockets; a setting names NICs, it does not show them, so the listing that
    would is asked for, with both fixes."""
    case = ROOT / "fixtures/diagnose/holdout2/c-02"
    f = _td025(*(p.read_text() for p in sorted(case.glob("evidence-*.txt"))))
    assert f.severity == "warning" and "the RDMA NICs NCCL_IB_HCA names (mlx5_0," in f.message
    assert "`ibv_devinfo`" in f.message and "If `ibv_devinfo` lists RDMA devices" in f.fix
