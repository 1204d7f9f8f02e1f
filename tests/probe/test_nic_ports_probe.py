"""The NIC port probe on a sysfs tree laid out as a ConnectX-7 host shows it (files' formats
as the mlx5 driver writes them), read through the same boundary as the live host."""

from __future__ import annotations

import os
from pathlib import Path

from topodoctor.core.probed import ProbeError, Unsupported
from topodoctor.model.fitness import NIC_PORT_COUNTERS
from topodoctor.probe import host as hostfacts
from topodoctor.probe import nic_ports
from topodoctor.probe.sysfs import LiveSysfs

BDF = "0000:18:00.0"


def _write(root: Path, path: str, text: str) -> None:
    p = root / path.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text + "\n")


def _tree(root: Path, state: str = "4: ACTIVE", symbol_errors: int = 3) -> None:
    pci = f"sys/devices/pci0000:17/0000:17:01.0/{BDF}"
    dev = "/sys/class/infiniband/mlx5_0"
    (root / pci / "net" / "ibp24s0").mkdir(parents=True)
    (root / "sys/class/infiniband/mlx5_0").mkdir(parents=True)
    os.symlink(root / pci, root / "sys/class/infiniband/mlx5_0/device")
    _write(root, f"/{pci}/net/ibp24s0/dev_port", "0")
    _write(root, f"{dev}/fw_ver", "28.39.1002")
    _write(root, f"{dev}/hca_type", "MT4129")
    port = f"{dev}/ports/1"
    _write(root, f"{port}/state", state)
    _write(root, f"{port}/phys_state", "5: LinkUp")
    _write(root, f"{port}/rate", "400 Gb/sec (4X NDR)")
    _write(root, f"{port}/link_layer", "InfiniBand")
    for name in NIC_PORT_COUNTERS:
        _write(root, f"{port}/counters/{name}", str(symbol_errors if name == "symbol_error" else 0))
    _write(root, f"{port}/hw_counters/rx_read_requests", "12")
    _write(root, "/proc/uptime", "154.12 1601.65")
    (root / "sys/class/net/ibp24s0").mkdir(parents=True)
    _write(root, "/sys/class/net/ibp24s0/operstate", "up")


def test_a_connectx_port_reads_as_the_driver_writes_it(tmp_path: Path) -> None:
    _tree(tmp_path)
    fs = LiveSysfs(str(tmp_path))
    problems: list[ProbeError] = []
    nics, _ = hostfacts.nics(fs, problems)
    (nic,) = [n for n in nics if n.name == "mlx5_0"]
    assert (nic.kind, nic.bus_id, nic.fw_ver, nic.hca_type) == ("infiniband", BDF, "28.39.1002", "MT4129")
    (port,) = nic.ports
    assert (port.port, port.state, port.phys_state, port.rate_gbps, port.link_layer) == (
        1,
        "ACTIVE",
        "LinkUp",
        400.0,
        "InfiniBand",
    )
    assert (port.netdev, port.netdev_state, port.at_start_s) == ("ibp24s0", "up", 154.12)
    assert port.counters_start["symbol_error"] == 3 and port.counters_start["hw:rx_read_requests"] == 12
    _write(tmp_path, "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error", "9")
    _write(tmp_path, "/proc/uptime", "154.40 1602.00")
    later = nic_ports.with_end(fs, nic).ports[0]
    assert later.counters_end["symbol_error"] == 9 and later.at_end_s == 154.40
    assert problems == []


def test_an_unreadable_counter_is_a_probe_error_not_zero(tmp_path: Path) -> None:
    _tree(tmp_path)
    os.remove(tmp_path / "sys/class/infiniband/mlx5_0/ports/1/counters/link_downed")
    os.mkdir(tmp_path / "sys/class/infiniband/mlx5_0/ports/1/counters/link_downed")  # reading it fails: EISDIR
    fs = LiveSysfs(str(tmp_path))
    nics, _ = hostfacts.nics(fs, [])
    counters = next(n for n in nics if n.name == "mlx5_0").ports[0].counters_start
    assert isinstance(counters["link_downed"], ProbeError)
    assert isinstance(counters["port_xmit_discards"], int)


def test_a_device_without_hw_counters_has_only_the_named_ones(tmp_path: Path) -> None:
    _tree(tmp_path)
    for f in (tmp_path / "sys/class/infiniband/mlx5_0/ports/1/hw_counters").iterdir():
        f.unlink()
    (tmp_path / "sys/class/infiniband/mlx5_0/ports/1/hw_counters").rmdir()
    nics, _ = hostfacts.nics(LiveSysfs(str(tmp_path)), [])
    port = next(n for n in nics if n.name == "mlx5_0").ports[0]
    assert set(port.counters_start) == set(NIC_PORT_COUNTERS)
    assert not isinstance(port.phys_state, Unsupported)
