"""A slow run of a communication library other than NCCL, in the reporter's words, with no output of NCCL's: UCX
(and the MPI, Dask or NIXL runs over it), the transfer engines, torch's Gloo and BytePS's ps-lite choose their
devices, transports and protocols by their own rules, so their own outputs are what decide it, not NCCL's log. Data
in, asks out; no I/O."""

from __future__ import annotations

from topodoctor.diagnosis.evidence_asks import Ask
from topodoctor.diagnosis.evidence_facts import Facts

# UCX's usual causes of a slow GPU transfer (its docs' tuning and GPU pages), and the outputs that show each
UCX_CAUSES = (
    "a NIC other than the one under the GPU's PCIe switch (UCX picks devices by its own distance rules unless "
    "UCX_NET_DEVICES pins them)",
    "a transport missing: cuda_copy, cuda_ipc or gdr_copy not in UCX_TLS or not built, so the data falls to tcp or "
    "is staged through host memory",
    "the GPU and the NIC, or the two GPUs, on different CPU sockets (SYS, another NUMA node)",
    "the protocol chosen for the sizes: eager or rendezvous (rndv), zero-copy or a pipeline through host bounce "
    "buffers",
    "cuda_ipc mapping each new buffer's IPC handle again (the IPC cache off: UCX_CUDA_IPC_CACHE=n, or no memory pool, "
    "so every buffer is new): a first transfer or fresh allocations slow, reused ones fast",
    "the two GPUs tested not the NVLink pair: CUDA numbers the GPUs fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID "
    "(and a VM may order them otherwise), while `nvidia-smi topo -m` shows them by PCI bus",
)
UCX_POST = (
    "`ucx_info -d` on each host (the devices and transports UCX sees)",
    "UCX_NET_DEVICES and UCX_TLS as the run sets them",
    "the run with UCX_LOG_LEVEL=info and UCX_PROTO_INFO=y (the lanes, devices and protocol chosen per message size "
    "and memory type)",
    "`nvidia-smi topo -m` (which NIC and CPU is near each GPU)",
)
# a transfer engine over RDMA (Mooncake's, NIXL's own backends): the NIC's own rate between the same hosts first
ENGINE_POST = (
    "`ib_write_bw` / `ib_read_bw` between the same NICs (with --use_cuda for GPU memory): the path's own rate",
    "`ibv_devinfo` (each port's state, rate and MTU)",
    "`numactl -H` and where the engine's threads run, against `nvidia-smi topo -m`",
    "`lspci -vvv` (the NIC's and the GPU's LnkSta)",
)
# torch's Gloo backend (CPU tensors over TCP): the network between the hosts and the CPU the processes get
GLOO_CAUSES = (
    "the network between the hosts or pods (TCP through an overlay or a VM's virtual NIC, often far below the "
    "host's own line)",
    "the CPU each process may use (a pod's CPU limit, threads pinned or oversubscribed): Gloo reduces on the CPU",
    "a small model whose step is mostly the exchange's latency, which more workers only add to",
)
GLOO_POST = (
    "`iperf3` between the hosts or pods the ranks run in",
    "the pods' CPU limits (`kubectl describe pod`) and `top` on a node during the run",
    "GLOO_SOCKET_IFNAME and the interface the ranks use (`ip -br addr`)",
)
# BytePS moves tensors between workers and servers through ps-lite's own van (TCP, or RDMA over verbs): NCCL only
# inside a node, so a slow RDMA run is the van's RoCE or InfiniBand setup and the servers', not NCCL's
BYTEPS_CAUSES = (
    "the RDMA van on a GID or interface the peers do not route (a RoCE v1 or link-local GID, the wrong interface)",
    "no lossless class (PFC or ECN) for RoCE on the switches: drops and retransmits under load",
    "too few servers, or servers on too few cores, for the workers' traffic",
)
BYTEPS_POST = (
    "`ib_send_bw` / `ib_write_bw` between the same hosts, as text (the path's own rate)",
    "`show_gids` and `ibv_devinfo` on each host (the RoCE GID and port the van uses)",
    "the run with PS_VERBOSE=2 (ps-lite's van: the device and connections it set up)",
)
STACKS = {
    "BytePS": ("BytePS", BYTEPS_CAUSES, BYTEPS_POST),
    "Gloo": ("Gloo", GLOO_CAUSES, GLOO_POST),
    "UCX": ("UCX", UCX_CAUSES, UCX_POST),
    "a transfer engine": ("the transfer engine", (), ENGINE_POST),
}


def other_stack_asks(f: Facts) -> list[Ask]:
    """The outputs of the library the slow run's post is about, where it is not NCCL and no NCCL output is given."""
    if f.nccl_logged or f.measured or f.averages:
        return []
    for c in f.prose:
        # over TCP a transfer engine runs at what its sockets give, not the RDMA path these outputs measure
        over_tcp = c.stack == "a transfer engine" and c.nic_kind in ("TCP", "Ethernet")
        if c.stack in STACKS and (c.slow or c.asks) and not over_tcp:
            name, causes, post = STACKS[c.stack]
            msg = f"cannot tell why {name}'s run is slow: the reporter's words, but not what {name} chose. "
            msg += f"Its usual causes: {'; '.join(causes)}. " if causes else ""
            msg += "Post: " + "; ".join(post)
            return [Ask("warning", "transport", msg, {"post": list(post[:2]), "piece": c.piece, "library": name})]
    return []
