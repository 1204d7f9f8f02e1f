"""What single NCCL INFO lines say about the network and the peers, beyond the account (account.py):
which network NCCL chose, which RDMA devices it found, where GPUDirect RDMA was turned off and why,
and each peer connection with both ends' CUDA devices and its side. Text in, plain tuples out.

The wording is NCCL's own (2.18 - 2.30):

    init.cc        Using network IB | Socket | <plugin name>
    net_ib.cc      NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>
                   NET/IB : No device found.
    net_socket.cc  NET/Socket : Using [0]eth0:10.0.0.1<0>
    ibvsymbols.cc  Failed to open libibverbs.so[.1]
    paths.cc       GPU Direct RDMA Disabled for GPU 0 / HCA 0 (distance 7 > 5)
                   GPU Direct RDMA Enabled for GPU 0 / HCA 0 (distance 4 <= 5), read 1 mode Default
                   (older: GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module or not supported by GPU))
    transport.cc   Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NETWORK = re.compile(r"(?:^|INFO )Using network (\S+)")
_IB_USING = re.compile(r"NET/IB ?: Using((?: \[\d+\][^ ;]+)+)")
_IB_DEV = re.compile(r"\[\d+\]([^:\s]+):\d+/(\w+)")
_IB_NONE = re.compile(r"NET/IB ?: No device found")
_SOCKET_USING = re.compile(r"NET/Socket ?: Using((?: \[\d+\][^ ]+)+)")
_NO_VERBS = re.compile(r"Failed to open libibverbs")
# rdma-core's libibverbs (init.c) on a verbs device whose provider library (libmlx5, ...) is not installed
NO_PROVIDER = re.compile(r"(?:libibverbs: )?Warning: no userspace device-specific driver found for (\S+)")
_IB_OPEN = re.compile(r"NET/IB ?: Unable to open device (\S+)|Call to ibv_open_device failed")
_GDR = re.compile(r"GPU Direct RDMA (Disabled|Enabled) for (?:GPU (\S+) / )?HCA (\S+)(?: '([^']+)')?(?: \(([^)]*)\))?")
# the bracket holds the CUDA device (2.12+) or, in older releases, the GPU's bus id (1a000)
_CONN = re.compile(
    r"(?:Channel (\d+)(?:/\d+)? : )?(\d+)\[([0-9a-fA-F]+)\] -> (\d+)\[([0-9a-fA-F]+)\]"
    r"(?: \[(send|receive)\])? via (\S+)"
)


@dataclass(frozen=True)
class NetLine:
    """One line's meaning: ``what`` is network, ib-devices, ib-none, socket, no-verbs, gdr-off, gdr-on."""

    what: str  # also ib-open-failed (NCCL found the device and could not open it), no-provider (libibverbs'
    # own warning: a verbs device whose provider library is missing)
    value: str  # the network's name, the devices ("mlx5_0/IB mlx5_1/RoCE"), the HCA, ""
    detail: str = ""  # GDR's reason ("distance 7 > 5", "no module or not supported by GPU")


@dataclass(frozen=True)
class PeerLine:
    """One channel connection as NCCL printed it: both ranks and their CUDA devices, the side, the transport."""

    channel: int | None  # None where the paste kept only "0[0] -> 1[1] ... via"
    rank: int
    rank_dev: str  # the CUDA device ("0") or, before 2.12, the bus id ("1a000")
    peer: int
    peer_dev: str
    side: str  # send, receive, or "" where NCCL printed neither (P2P and SHM lines)
    via: str  # P2P/CUMEM/read, SHM/direct/direct, NET/IB/0/GDRDMA


def net_line(text: str) -> NetLine | None:
    """What a line says of the network, or None when it says nothing of it."""
    if m := _IB_OPEN.search(text):
        return NetLine("ib-open-failed", m.group(1) or "")
    if m := _NETWORK.search(text):
        return NetLine("network", m.group(1))
    if m := _IB_USING.search(text):
        devs = " ".join(f"{d}/{layer}" for d, layer in _IB_DEV.findall(m.group(1)))
        return NetLine("ib-devices", devs)
    if _IB_NONE.search(text):
        return NetLine("ib-none", "")
    if m := _SOCKET_USING.search(text):
        return NetLine("socket", m.group(1).strip())
    if _NO_VERBS.search(text):
        return NetLine("no-verbs", "")
    if m := NO_PROVIDER.search(text):
        return NetLine("no-provider", m.group(1).rstrip("/").rsplit("/", 1)[-1])  # the uverbs device
    if m := _GDR.search(text):
        hca = m.group(4) or m.group(3)
        return NetLine("gdr-off" if m.group(1) == "Disabled" else "gdr-on", hca, m.group(5) or "")
    return None


def peer_line(text: str) -> PeerLine | None:
    """A channel connection line's parts, or None."""
    m = _CONN.search(text)
    if m is None or " via " not in text:
        return None
    ch, r, rd, p, pd, side, via = m.groups()
    return PeerLine(int(ch) if ch else None, int(r), rd, int(p), pd, side or "", via)
