"""Every port of an RDMA device from sysfs: state, physical state, rate, link layer, the
net device's state, and the error counters (``counters/`` and, where the driver has them,
``hw_counters/``), read twice within the probe like the GPU counters.

Several port counters are 8 or 16 bits wide and stop at their maximum (symbol_error,
link_downed, link_error_recovery, ...): only their movement during the window says
something about the link today.
"""

from __future__ import annotations

from dataclasses import replace

from topodoctor.core.probed import Probed, ProbeError, Unsupported
from topodoctor.model.fitness import NIC_PORT_COUNTERS, NicPort
from topodoctor.model.snapshot import Nic
from topodoctor.probe.query import entries, sys_list, sys_read
from topodoctor.probe.sysfs import Sysfs

IB = "/sys/class/infiniband"
UPTIME = "/proc/uptime"


def _state(text: str) -> str:
    return text.split(":", 1)[-1].strip()  # "4: ACTIVE" -> "ACTIVE", "5: LinkUp" -> "LinkUp"


def _rate(text: str) -> float:
    return float(text.split()[0])  # "400 Gb/sec (4X NDR)"


def _uptime(text: str) -> float:
    return float(text.split()[0])


def _counters(fs: Sysfs, port_dir: str, problems: list[ProbeError]) -> dict[str, Probed[int]]:
    """The named counters, then every hw_counters file (keyed ``hw:NAME``)."""
    out: dict[str, Probed[int]] = {name: sys_read(fs, f"{port_dir}/counters/{name}", int) for name in NIC_PORT_COUNTERS}
    hw = sys_list(fs, f"{port_dir}/hw_counters")
    for name in entries(hw, problems):
        out[f"hw:{name}"] = sys_read(fs, f"{port_dir}/hw_counters/{name}", int)
    return out


def ports(fs: Sysfs, device: str, netdevs: tuple[str, ...], problems: list[ProbeError]) -> tuple[NicPort, ...]:
    """The ports of /sys/class/infiniband/DEVICE, with their first counter reading."""
    base = f"{IB}/{device}"
    # A net device's dev_port is the 0-based port of the device it belongs to (what ibdev2netdev
    # reads); without one, the only net device is taken for every port.
    by_port: dict[int, str] = {}
    for dev in netdevs:
        index = sys_read(fs, f"{base}/device/net/{dev}/dev_port", int)
        if isinstance(index, int):
            by_port.setdefault(index + 1, dev)
    out = []
    for name in entries(sys_list(fs, f"{base}/ports"), problems):
        if not name.isdigit():
            continue
        port_dir = f"{base}/ports/{name}"
        netdev = by_port.get(int(name), netdevs[0] if len(netdevs) == 1 else None)
        at = sys_read(fs, UPTIME, _uptime)
        out.append(
            NicPort(
                port=int(name),
                state=sys_read(fs, f"{port_dir}/state", _state),
                phys_state=sys_read(fs, f"{port_dir}/phys_state", _state),
                rate_gbps=sys_read(fs, f"{port_dir}/rate", _rate),
                link_layer=sys_read(fs, f"{port_dir}/link_layer", str),
                netdev=netdev,
                netdev_state=sys_read(fs, f"/sys/class/net/{netdev}/operstate", str)
                if netdev
                else Unsupported("NO_NETDEV"),
                counters_start=_counters(fs, port_dir, problems),
                at_start_s=at,
            )
        )
    return tuple(out)


def with_end(fs: Sysfs, nic: Nic) -> Nic:
    """The second counter reading of each port of ``nic``."""
    if not nic.ports:
        return nic
    problems: list[ProbeError] = []
    done = []
    for p in nic.ports:
        port_dir = f"{IB}/{nic.name}/ports/{p.port}"
        at = sys_read(fs, UPTIME, _uptime)
        done.append(replace(p, counters_end=_counters(fs, port_dir, problems), at_end_s=at))
    return replace(nic, ports=tuple(done))
