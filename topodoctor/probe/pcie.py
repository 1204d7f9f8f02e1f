"""The PCIe tree from sysfs: where each device hangs, and what the bridges above it are.

NVML gives a pair's common ancestor but not the bridges themselves; sysfs gives the chain
(``/sys/devices/pci0000:17/0000:17:01.0/0000:18:00.0``), each bridge's link speed and width,
and its config space, from which we read the port type and the ACS Control register.
"""

from __future__ import annotations

import re

from topodoctor.core.pci import is_bdf
from topodoctor.core.probed import Probed, ProbeError, Unsupported
from topodoctor.model.snapshot import PcieBridge, PortType
from topodoctor.probe.query import classify, sys_read, sys_realpath
from topodoctor.probe.sysfs import Sysfs

_ROOT = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")

# PCI Express Capabilities Register, Device/Port Type field (PCIe base spec 7.5.3.2).
_PORT_TYPES: dict[int, PortType] = {
    0x0: "endpoint",
    0x1: "endpoint",
    0x4: "root_port",
    0x5: "upstream",
    0x6: "downstream",
    0x7: "pci_bridge",
    0x8: "pci_bridge",
    0x9: "endpoint",
    0xA: "root_port",
}
_CAP_PCIE = 0x10
_EXT_CAP_ACS = 0x000D
CONFIG_BYTES = 4096  # the whole extended config space; non-root readers get 64 bytes


def pcie_path(fs: Sysfs, bus_id: str) -> Probed[tuple[str, ...]]:
    """Root complex first, then each bridge, then the device itself."""
    real = sys_realpath(fs, f"/sys/bus/pci/devices/{bus_id}")
    if not isinstance(real, str):
        return real
    parts = [p for p in real.split("/") if p]
    chain = [p for p in parts if is_bdf(p) or _ROOT.match(p)]
    if not chain or chain[-1] != bus_id:
        return ProbeError("UNEXPECTED_PATH", f"realpath {bus_id} -> {real}")
    return tuple(chain)


def parse_config(hex_text: str) -> tuple[PortType | None, Probed[int]]:
    """Port type and ACS Control from config space bytes given as hex.

    Returns (None, ...) for the port type when the PCIe capability is not readable, and
    Unsupported for ACS when the bridge has no ACS capability, ProbeError when the
    extended space could not be read (non-root readers see only 64 bytes).
    """
    cfg = bytes.fromhex(hex_text)

    def u8(o: int) -> int:
        return cfg[o]

    def u16(o: int) -> int:
        return cfg[o] | cfg[o + 1] << 8

    def u32(o: int) -> int:
        return u16(o) | u16(o + 2) << 16

    port: PortType | None = None
    if len(cfg) >= 0x40 and u16(0x06) & 0x10:  # Status: capabilities list present
        ptr, seen = u8(0x34) & 0xFC, 0
        while 0x40 <= ptr < len(cfg) - 3 and seen < 48:
            if u8(ptr) == _CAP_PCIE:
                port = _PORT_TYPES.get((u16(ptr + 2) >> 4) & 0xF, "unknown")
                break
            ptr, seen = u8(ptr + 1) & 0xFC, seen + 1
    if len(cfg) < 0x104:
        return port, ProbeError("CONFIG_TRUNCATED", "read config (extended space needs root)")
    off, seen = 0x100, 0
    while off and off + 8 <= len(cfg) and seen < 96:
        header = u32(off)
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == _EXT_CAP_ACS:
            return port, u16(off + 6)
        off, seen = (header >> 20) & 0xFFC, seen + 1
    return port, Unsupported("NO_ACS_CAPABILITY")


def _positional_port_type(index_after_root: int) -> PortType:
    """Fallback when config space is unreadable: root port, then switch up/down pairs."""
    if index_after_root == 0:
        return "root_port"
    return "upstream" if index_after_root % 2 == 1 else "downstream"


def _int(text: str) -> int:
    return int(text, 0)


def numa_of(fs: Sysfs, bus_id: str) -> Probed[int]:
    """The device's NUMA node; sysfs -1 (firmware did not say) is Unsupported."""
    got = sys_read(fs, f"/sys/bus/pci/devices/{bus_id}/numa_node", int)
    if isinstance(got, int) and got < 0:
        return Unsupported("NUMA_NODE_-1")
    return got


def read_bridge(fs: Sysfs, bus_id: str, index_after_root: int) -> PcieBridge:
    """A bridge's link (``current_link_speed`` / ``_width`` and their max in sysfs) and its port type and
    ACS control from config space, as ``lspci -vvv`` shows them."""
    base = f"/sys/bus/pci/devices/{bus_id}"
    port: PortType | None = None
    acs: Probed[int]
    try:
        port, acs = parse_config(fs.read_hex(f"{base}/config", CONFIG_BYTES))
    except OSError as exc:
        acs = classify(exc, f"read {base}/config")
    except (ValueError, IndexError):
        acs = ProbeError("UNPARSABLE", f"read {base}/config")
    return PcieBridge(
        bus_id=bus_id,
        port_type=port or _positional_port_type(index_after_root),
        vendor_id=sys_read(fs, f"{base}/vendor", str),
        device_id=sys_read(fs, f"{base}/device", str),
        link_speed=sys_read(fs, f"{base}/current_link_speed", str),
        link_width=sys_read(fs, f"{base}/current_link_width", _int),
        max_link_speed=sys_read(fs, f"{base}/max_link_speed", str),
        max_link_width=sys_read(fs, f"{base}/max_link_width", _int),
        acs_ctrl=acs,
        numa_node=numa_of(fs, bus_id),
    )


def bridges_on(paths: list[tuple[str, ...]]) -> list[tuple[str, int]]:
    """Distinct bridges above the given devices, with their depth below the root complex."""
    seen: dict[str, int] = {}
    for path in paths:
        for depth, bdf in enumerate(path[1:-1]):
            seen.setdefault(bdf, depth)
    return sorted(seen.items())
