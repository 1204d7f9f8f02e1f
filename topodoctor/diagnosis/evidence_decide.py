"""Which one output to ask for first when the evidence leaves several causes open: the one that tells the
two likeliest apart. Built from what each output shows (NCCL's source and the tools' own formats), never
from the threads it was tried on:

- NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,NET: `Using network IB|Socket` and `NET/IB : Using [0]mlx5_0:1/IB`
  (init.cc, net_ib.cc: only the devices NCCL_IB_HCA lets through and whose port is ACTIVE), `GPU Direct RDMA
  Disabled for HCA` (net.cc), each channel's `via P2P/IPC`, `via SHM`, `via NET/IB/0/GDRDMA` (transport.cc,
  INIT). It shows the network NCCL took, GPUDirect RDMA on each side, the NICs it uses, P2P against SHM; it
  prints no port's rate.
- `ibstat`: every port of every adapter, its state and rate; not what NCCL chose.
- `lspci -vvv`: each bridge's ACSCtl flags and each function's LnkCap / LnkSta (trained width and speed).
- `nvidia-smi -q`: each GPU's PCIe generation and width, current and max.
- `nvidia-smi topo -m`: the path class of each GPU pair and GPU-NIC pair, and every NIC of the host.
- p2pBandwidthLatencyTest: each pair's copy with P2P and staged through host memory (P2P slower than
  staged: ACS or the IOMMU redirecting peer traffic).
- `nvidia-smi nvlink -s`: each link up or down, and its rate.
- nccl-tests' output: the figure itself, per size, and the ranks' GPUs and hosts.
- `dmesg | grep -i iommu` with /proc/cmdline: whether the IOMMU translates DMA (AMD-Vi / DMAR, the default
  domain type Translated or Passthrough, iommu=pt on the command line).
- `numactl -H`: the NUMA nodes a socket is split into (an EPYC host's NPS setting: NPS1 one node a socket).
- `lspci -vvv` on a VM's devices: ATSCtl (Enable+ on the NICs and GPUs) beside each bridge's ACSCtl, which
  NVIDIA's VM guide needs set together for GPUDirect in a guest.
- NCCL's topology dump (NCCL_TOPO_DUMP_FILE=system.xml): the PCI tree and NIC speeds NCCL built its graph
  on; in a VM, the guest's flat tree against the host's.
- `ib_write_bw` between two nodes, with one queue pair and with two (`-q 1`, `-q 2`): one QP rides one port
  of a bonded RoCE device (mlx5's LAG gives each QP one port), so only more QPs reach both ports.
- `ethtool -S` of a RoCE interface: its pause and discard counters, and the switch's PFC / ECN setup.
- `nvidia-smi -q`'s Fabric section: the fabric manager's state on an NVSwitch host (Completed, Success).
- On a TCP network the same INIT,NET log shows the channels NCCL built (`Channel 00/02 :`, init.cc; each channel
  opens its own connection between the nodes, net_socket.cc) and the interfaces its sockets use (`NET/Socket :
  Using [0]eth0:... [1]eth1:...`); `iperf3 -c NODE -P 4` shows what one TCP stream and several reach on the line.
"""

from __future__ import annotations

from itertools import combinations

NCCL_LOG = "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET output of the run"
IBSTAT = "`ibstat` of each node"
LSPCI = "`lspci -vvv` (its ACSCtl and LnkSta lines)"
SMI_Q = "`nvidia-smi -q` (PCIe generation and width)"
TOPO = "`nvidia-smi topo -m`"
P2P_TEST = "p2pBandwidthLatencyTest's output"
NVLINK = "`nvidia-smi nvlink -s`"
NCCL_TESTS = "nccl-tests' output (all_reduce_perf -b 8 -e 8G -f 2)"
SMI_RUN = "`nvidia-smi` during the copy"
DMESG_IOMMU = "`dmesg | grep -i iommu` and /proc/cmdline"
NUMA = "`numactl -H` (the NUMA nodes per socket)"
LSPCI_ATS = "`lspci -vvv` in the VM (ATSCtl on the NICs and GPUs, ACSCtl on the bridges)"
TOPO_DUMP = "NCCL's topology dump (NCCL_TOPO_DUMP_FILE=system.xml) of a node"
IB_QPS = "`ib_write_bw` between two nodes with `-q 1` and `-q 2` on the bond"
ETHTOOL_S = "`ethtool -S` of the RoCE interfaces (pause and discard counters)"
SMI_FABRIC = "`nvidia-smi -q` (its Fabric section: State and Status)"
IPERF_P = "`iperf3 -c NODE -P 1` and `-P 4` between two nodes (one TCP stream against four)"

# the candidates of a shortfall the evidence does not explain, by key
SOCKETS = "sockets"  # NCCL on TCP sockets instead of the RDMA NICs
GDR = "gdr"  # GPUDirect RDMA off, or on one side only
PORTS = "ports"  # NIC ports down or below their rate
FEW_NICS = "few-nics"  # fewer NICs used than present (NCCL_IB_HCA), or GPUs far from the one NIC used
ACS_NIC = "acs-nic"  # ACS redirecting NIC-GPU traffic
P2P_OFF = "p2p-off"  # P2P off by a variable, or containers splitting the GPUs
PATH = "path"  # the GPUs' path (PCIe switch, host bridge, sockets)
PCIE_DOWN = "pcie-down"  # a PCIe link trained down
ACS_IOMMU = "acs-iommu"  # ACS or the IOMMU redirecting peer traffic
NVLINK_DOWN = "nvlink-down"  # NVLinks down against the model
HOST_OTHER = "host-other"  # another process on the GPU, or a far CPU
NO_FIGURE = "no-figure"  # nothing measured: whether anything is slow at all
IOMMU = "iommu"  # the IOMMU translating peer and host traffic (an EPYC host not in pass-through)
NPS = "nps"  # an EPYC socket kept one NUMA node (NPS1), slowing GPU traffic through host memory
ATS_VM = "ats-vm"  # in a VM, ATS off on the NICs or GPUs while ACS sends peer traffic to the root
VM_TOPO = "vm-topo"  # in a VM, a flat PCI tree: NCCL cannot see which GPU shares a switch with which NIC
BOND_QP = "bond-qp"  # a bonded RoCE NIC driven by one QP per connection: one port carries it
ROCE_FLOW = "roce-flow"  # RoCE without flow control (PFC / ECN): drops and retransmits under load
FABRIC = "fabric"  # an NVSwitch host whose fabric manager is not running or not done
CHANNELS_NET = "channels-net"  # on a TCP network, too few channels (each its own connection) for the line
STREAMS = "streams"  # on a TCP network, one TCP stream per connection (NCCL_SOCKET_NTHREADS x NSOCKS_PERTHREAD)
IFACES = "ifaces"  # on a TCP network, the interfaces NCCL's sockets use: one of several, or a slower one

# what each output rules in or out, in the order of preference when several would do (cheapest, most
# telling first); from the module's docstring
SHOWS: tuple[tuple[str, frozenset[str]], ...] = (
    (NCCL_LOG, frozenset({SOCKETS, GDR, FEW_NICS, P2P_OFF, CHANNELS_NET, IFACES})),
    (LSPCI, frozenset({ACS_NIC, ACS_IOMMU, PCIE_DOWN})),
    (TOPO, frozenset({PATH, FEW_NICS})),
    (IBSTAT, frozenset({PORTS, FEW_NICS})),
    (SMI_Q, frozenset({PCIE_DOWN})),
    (P2P_TEST, frozenset({ACS_IOMMU})),
    (NVLINK, frozenset({NVLINK_DOWN})),
    (SMI_RUN, frozenset({HOST_OTHER})),
    (NCCL_TESTS, frozenset({NO_FIGURE})),
    (DMESG_IOMMU, frozenset({IOMMU})),
    (NUMA, frozenset({NPS})),
    (LSPCI_ATS, frozenset({ATS_VM, ACS_NIC, ACS_IOMMU})),
    (TOPO_DUMP, frozenset({VM_TOPO, PATH, FEW_NICS})),
    (IB_QPS, frozenset({BOND_QP})),
    (ETHTOOL_S, frozenset({ROCE_FLOW})),
    (SMI_FABRIC, frozenset({FABRIC, NVLINK_DOWN})),
    (IPERF_P, frozenset({STREAMS})),
)


def _decides(a: str, b: str) -> str | None:
    """The first output that shows both candidates (so one run of it rules one in and the other out)."""
    return next((out for out, shown in SHOWS if a in shown and b in shown), None)


# candidate pair -> the output that tells them apart, where one output shows both
DECIDES: dict[frozenset[str], str] = {
    frozenset((a, b)): out
    for a, b in combinations(sorted({k for _, s in SHOWS for k in s}), 2)
    if (out := _decides(a, b)) is not None
}


def shows(key: str) -> str:
    """The first output that shows one candidate."""
    return next(out for out, shown in SHOWS if key in shown)


def first_ask(keys: list[str]) -> str | None:
    """The one output to post first for candidates ranked most likely first: the one that tells the top
    two apart, else what shows the likeliest."""
    if not keys:
        return None
    if len(keys) >= 2 and (out := DECIDES.get(frozenset(keys[:2]))) is not None:
        return out
    return shows(keys[0])
