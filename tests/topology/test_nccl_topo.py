"""The NCCL topology file: written from recordings and derived hosts, read back the way NCCL
reads it, and the lint of a file against the host (TD608)."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import DERIVED, RECORDINGS, ROOT, scenario_path
from topodoctor.core.pci import short_bus_id
from topodoctor.model.snapshot import HostSnapshot, load_snapshot, snapshot_from_data
from topodoctor.probe.sources import probe_host
from topodoctor.report.nccl_topo import nccl_topology_xml
from topodoctor.topology.graph import build_graph
from topodoctor.topology.nccl_topo_lint import lint_topo_file
from topodoctor.topology.ncclxml import cpumask, parse_cpumask, speed_per_lane

SNAPSHOT_SCENARIOS = [
    s["name"] for s in DERIVED if json.loads(scenario_path(s["name"]).read_text())["kind"] == "snapshot"
]


def _snap(name: str) -> HostSnapshot:
    path = scenario_path(name)
    if path.exists():
        return probe_host(str(path)).snapshot
    return probe_host(name).snapshot


def _lint(snap: HostSnapshot, text: str) -> list[str]:
    return [f"{p.check}:{p.severity}" for p in lint_topo_file(text, snap, build_graph(snap))]


@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda p: p.stem)
def test_replay_writes_the_bytes_the_live_host_wrote(rec: Path) -> None:
    """A recording embeds the snapshot the live probe built: the file from it and from the replay agree."""
    live = snapshot_from_data(json.loads(rec.read_text())["snapshot"])
    assert nccl_topology_xml(probe_host(str(rec)).snapshot) == nccl_topology_xml(live)


@pytest.mark.parametrize("name", ["h200-x2", "h200-x4", "h100-x1", *SNAPSHOT_SCENARIOS])
def test_file_holds_every_gpu_and_passes_its_own_lint(name: str) -> None:
    snap = _snap(name)
    text = nccl_topology_xml(snap)
    root = ET.fromstring(text)
    assert root.tag == "system" and root.get("version") == "1"
    gpus = {short_bus_id(e.get("busid", "")) for e in root.iter("pci") if e.find("gpu") is not None}
    assert gpus == {short_bus_id(g.bus_id) for g in snap.gpus if isinstance(g.bus_id, str) and g.lost is None}
    for e in root.iter("pci"):
        assert e.get("link_speed") is None or speed_per_lane(e.get("link_speed", "")) is not None
    assert "\t" not in text and not text.startswith("<?")
    assert _lint(snap, text) == []


def test_vm_with_nvswitch_writes_the_invisible_target() -> None:
    root = ET.fromstring(nccl_topology_xml(_snap("h200-x2")))
    links = [(e.get("target"), e.get("count"), e.get("tclass")) for e in root.iter("nvlink")]
    assert links == [("fffffff:ffff:ff", "18", "0x068000")] * 2
    # The VM's devices say numa_node -1: NCCL then writes numaid -1 and no affinity, and so do we.
    (cpu,) = root.iter("cpu")
    assert cpu.get("numaid") == "-1" and cpu.get("affinity") is None


def test_two_sockets_put_each_gpu_and_nic_under_its_own_cpu_and_switch() -> None:
    root = ET.fromstring(nccl_topology_xml(_snap("pcie-2socket")))
    cpus = {c.get("numaid"): c for c in root.iter("cpu")}
    assert set(cpus) == {"0", "1"}
    under = {c: {e.get("busid") for e in cpus[c].iter("pci") if e.find("gpu") is not None} for c in cpus}
    assert under["1"] == {"0000:83:00.0", "0000:84:00.0"}
    # NCCL's walk: the GPU's parent is the switch's upstream port two levels up, nested switches kept.
    gpu0_parent = next(p for p in root.iter("pci") if any(c.get("busid") == "0000:05:00.0" for c in p))
    assert gpu0_parent.get("busid") == "0000:03:00.0"
    assert any(
        c.get("busid") == "0000:03:00.0" for c in next(p for p in root.iter("pci") if p.get("busid") == "0000:01:00.0")
    )
    nic = next(p for p in root.iter("pci") if p.find("nic") is not None and p.get("busid") == "0000:0b:00.0")
    assert nic.find("nic/net").get("name") == "mlx5_0"  # type: ignore[union-attr]


def test_lost_gpu_is_left_out() -> None:
    snap = _snap("x4-gpu-lost")
    root = ET.fromstring(nccl_topology_xml(snap))
    assert len([e for e in root.iter("gpu")]) == 3


def _flattened(snap: HostSnapshot) -> HostSnapshot:
    """The 8-GPU host as a VM shows it: every device right on one root bus, no bridges."""

    def flat(path: object) -> object:
        return ("pci0000:00", path[-1]) if isinstance(path, tuple) else path

    gpus = tuple(dataclasses.replace(g, pcie_path=flat(g.pcie_path)) for g in snap.gpus)
    nics = tuple(dataclasses.replace(n, pcie_path=flat(n.pcie_path)) for n in snap.nics)
    host = dataclasses.replace(snap.host, virtualization="vm")
    return dataclasses.replace(snap, host=host, gpus=gpus, nics=nics, bridges=())


def test_flat_vm_gets_one_invented_switch_per_gpu_with_its_nic() -> None:
    snap = _flattened(load_snapshot(scenario_path("hgx-8gpu-2socket")))
    text = nccl_topology_xml(snap)
    root = ET.fromstring(text)
    switches = [p for p in root.iter("pci") if p.get("class") == "0x060400"]
    assert len(switches) == 8
    for sw in switches:
        assert sw.get("busid", "").startswith("ffff:ff:") and sw.get("link_speed") == "32.0 GT/s PCIe"
        kinds = sorted("gpu" if c.find("gpu") is not None else "nic" for c in sw)
        assert kinds == ["gpu", "nic"]
    first = next(sw for sw in switches if any(c.get("busid") == "0000:18:00.0" for c in sw))
    assert {c.get("busid") for c in first} == {"0000:18:00.0", "0000:19:00.0"}
    assert _lint(snap, text) == []
    # Without grouping NCCL would see each NIC PHB from every GPU: no GPUDirect RDMA.
    assert '<pci busid="ffff' not in nccl_topology_xml(snap, group_flat=False)
    # On bare metal a flat tree is the truth: nothing is invented.
    metal = dataclasses.replace(snap, host=dataclasses.replace(snap.host, virtualization="bare-metal"))
    assert '<pci busid="ffff' not in nccl_topology_xml(metal)


# ---- the lint: one firing case per check, the healthy file above is the near miss ----------------


def test_lint_fires_on_each_thing_nccl_gets_wrong() -> None:
    snap = _snap("hgx-8gpu-2socket")
    good = nccl_topology_xml(snap)
    assert _lint(snap, good.replace('version="1"', 'version="2"')) == ["version:error"]
    # "32.0 GT/s" without "PCIe" matches none of NCCL's strings: silently Gen3.
    assert set(_lint(snap, good.replace("32.0 GT/s PCIe", "32.0 GT/s"))) == {"link-speed:warning"}
    # GPU6 replaced by one that is not here: its NIC is left with no GPU near it as well.
    assert _lint(snap, good.replace("0000:c0:00.0", "0000:c7:00.0")) == ["bus-id:error", "gdr-distance:warning"]
    assert _lint(snap, "<?xml version='1.0'?>\n" + good) == ["syntax:error"]
    assert _lint(snap, good.replace("\n  <cpu", "\n\t<cpu", 1)) == ["syntax:error"]
    assert _lint(snap, "<system version='1'><cpu>") == ["syntax:error"]
    assert _lint(snap, '<!DOCTYPE x [<!ENTITY a "b">]><system version="1"/>') == ["syntax:error"]


def test_lint_fires_when_a_nic_moves_away_from_its_gpu() -> None:
    snap = _snap("hgx-8gpu-2socket")
    root = ET.fromstring(nccl_topology_xml(snap))
    cpu0, cpu1 = list(root.iter("cpu"))
    nic = next(p for p in cpu0.iter("pci") if p.get("busid") == "0000:19:00.0")
    parent = next(p for p in cpu0.iter("pci") if nic in list(p))
    parent.remove(nic)
    cpu1.append(nic)
    found = _lint(snap, ET.tostring(root, encoding="unicode"))
    assert sorted(found) == ["affinity:warning", "gdr-distance:warning"]


def test_lint_fires_on_a_wrong_affinity_and_an_invented_bridge_without_speed() -> None:
    snap = _snap("pcie-2socket")
    good = nccl_topology_xml(snap)
    assert _lint(snap, good.replace(f'affinity="{cpumask(tuple(range(64)))}"', 'affinity="ff"')) == ["affinity:warning"]
    invented = good.replace(
        '<pci busid="0000:21:00.0" class="0x060400" vendor="0x10b5" device="0xc010" '
        'link_speed="16.0 GT/s PCIe" link_width="16">',
        '<pci busid="ffff:ff:01.0" class="0x060400">',
    )
    assert invented != good
    assert _lint(snap, invented) == ["link-speed:warning"]


def test_cpumask_round_trips() -> None:
    assert cpumask((0, 1, 2, 3)) == "0000000f"
    assert cpumask(tuple(range(64, 128))) == "ffffffff,ffffffff,00000000,00000000"
    assert parse_cpumask("ffffffff,ffffffff,00000000,00000000") == tuple(range(64, 128))
    assert parse_cpumask("zz") is None


def test_what_nccl_detected_on_the_recorded_host_matches_the_file() -> None:
    """fixtures/nccl/h200-x2.nccl-topo-dump.xml is NCCL 2.28.9's own NCCL_TOPO_DUMP_FILE on the
    host the h200-x2 recording comes from (host_hash zeroed); the file we write says the same."""
    from topodoctor.topology.nccl_topo_lint import topology_differences

    dump = (ROOT / "fixtures" / "nccl" / "h200-x2.nccl-topo-dump.xml").read_text()
    ours = nccl_topology_xml(_snap("h200-x2"))
    assert topology_differences(ours, dump) == []
    assert _lint(_snap("h200-x2"), dump) == []
    assert topology_differences(ours, dump.replace('count="18"', 'count="17"', 1)) != []


def nvlink_bridged(snap: HostSnapshot, pairs: dict[int, int], links: int = 4) -> HostSnapshot:
    """GPUs joined in pairs by NVLink bridges (no NVSwitch), as on PCIe cards with a bridge."""
    from topodoctor.model.snapshot import NvLink, NvLinkErrors

    bus = {g.index: g.bus_id for g in snap.gpus}
    gpus = tuple(
        dataclasses.replace(
            g,
            nvlinks=tuple(
                NvLink(k, True, 4, "gpu", bus[pairs[g.index]], ("p2p",), 25000, NvLinkErrors(0, 0, 0))
                for k in range(links)
            ),
        )
        if g.index in pairs
        else g
        for g in snap.gpus
    )
    return dataclasses.replace(snap, gpus=gpus)


def test_gpu_to_gpu_nvlinks_name_the_peer() -> None:
    snap = nvlink_bridged(load_snapshot(scenario_path("pcie-2socket")), {0: 1, 1: 0})
    text = nccl_topology_xml(snap)
    root = ET.fromstring(text)
    gpu0 = next(p for p in root.iter("pci") if p.get("busid") == "0000:05:00.0")
    assert [(e.get("target"), e.get("count"), e.get("tclass")) for e in gpu0.iter("nvlink")] == [
        ("0000:06:00.0", "4", "0x03")
    ]
    assert _lint(snap, text) == []
    assert _lint(snap, text.replace('target="0000:06:00.0"', 'target="0000:66:00.0"')) == ["bus-id:error"]


def test_cli_lints_a_file_against_the_host(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from topodoctor.cli.commands import main

    xml = tmp_path / "topo.xml"
    assert main(["nccl-topo", "--replay", "h200-x2", "-o", str(xml), "--timeout", "0"]) == 0
    assert main(["nccl-topo", "--replay", "h200-x2", "--lint", str(xml), "--timeout", "0"]) == 0
    xml.write_text(xml.read_text().replace("32.0 GT/s PCIe", "32.0 GT/s"))
    assert main(["nccl-topo", "--replay", "h200-x2", "--lint", str(xml), "--timeout", "0"]) == 0  # warnings only
    assert "silently rates it as PCIe Gen3" in capsys.readouterr().out
    xml.write_text(xml.read_text().replace('version="1"', 'version="2"'))
    assert main(["nccl-topo", "--replay", "h200-x2", "--lint", str(xml), "--timeout", "0"]) == 1
    assert main(["nccl-topo", "--replay", "h200-x2", "--timeout", "0"]) == 2
