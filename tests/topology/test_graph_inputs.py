"""The host graph on inputs the recorded hosts do not show: a link whose state or far end could not
be read, a link to a GPU the probe did not list, NICs of other kinds, a bridge whose NUMA node is
unknown or names a node the host does not have, path rates that differ along the way, and
nvidia-smi's matrix with the spacing, line endings and text around it that real terminals add."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from conftest import TOPO_TEXT, scenario_path

from topodoctor.core.probed import ProbeError, Unsupported
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.sources import probe_host
from topodoctor.topology.graph import (
    build_graph,
    connection,
    gpu_node,
    nic_node,
    nvlink_count,
    nvlink_link_gbps,
    pcie_gbps,
    rdma_nics,
)
from topodoctor.topology.topo_matrix import parse_nvidia_smi

UNREAD = ProbeError("NO_PERMISSION", "nvmlDeviceGetFieldValues", 4)


def snap(name: str) -> HostSnapshot:
    path = scenario_path(name)
    return probe_host(str(path) if path.exists() else name).snapshot


def with_gpu(s: HostSnapshot, i: int, **fields: object) -> HostSnapshot:
    return replace(s, gpus=tuple(replace(g, **fields) if g.index == i else g for g in s.gpus))


def with_link(s: HostSnapshot, i: int, li: int, **fields: object) -> HostSnapshot:
    g = s.gpu(i)
    return with_gpu(s, i, nvlinks=tuple(replace(k, **fields) if k.link == li else k for k in g.nvlinks))


def test_a_link_whose_state_could_not_be_read_is_not_counted_up() -> None:
    s = snap("h200-x4")
    for state in (UNREAD, Unsupported("NOT_SUPPORTED")):
        g = build_graph(with_link(s, 1, 5, active=state))
        assert g.edges[gpu_node(1), "nvswitch:fabric"]["links"] == 17
        assert g.edges[gpu_node(1), "nvswitch:fabric"]["gbps"] == 451.562  # 17 x 26.5625, to a thousandth
        assert g.edges[gpu_node(0), "nvswitch:fabric"]["links"] == 18
    every = with_gpu(s, 1, nvlinks=tuple(replace(k, active=UNREAD) for k in s.gpu(1).nvlinks))
    assert not build_graph(every).has_edge(gpu_node(1), "nvswitch:fabric")


def test_the_link_rate_comes_from_a_link_that_is_up() -> None:
    g = snap("h200-x4").gpu(0)
    first, *rest = g.nvlinks
    older = (replace(first, active=False, version=4), *rest)  # a down link of NVLink 3.0 first
    assert nvlink_link_gbps(replace(g, nvlinks=older)) == nvlink_link_gbps(g) == 26.5625
    unread = (replace(first, active=UNREAD, version=4), *rest)
    assert nvlink_link_gbps(replace(g, nvlinks=unread)) == 26.5625
    odd = (replace(first, version=99), *rest)  # a version NVML added after us: the next link says
    assert nvlink_link_gbps(replace(g, nvlinks=odd)) == 26.5625
    assert nvlink_link_gbps(replace(g, nvlinks=tuple(replace(k, active=False) for k in g.nvlinks))) is None


def test_links_to_switches_of_two_generations_are_rated_by_the_slower_side() -> None:
    s = snap("h200-x4")
    s = with_gpu(s, 1, nvlinks=tuple(replace(k, version=4) for k in s.gpu(1).nvlinks))  # NVLink 3.0: 25 GB/s
    g = build_graph(s)
    assert g.edges[gpu_node(1), "nvswitch:fabric"]["gbps"] == 18 * 25.0
    assert nvlink_count(g, gpu_node(0), gpu_node(1)) == (18, 18 * 25.0)
    assert nvlink_count(g, gpu_node(0), gpu_node(2)) == (18, 18 * 26.5625)


def test_links_the_graph_cannot_place_are_left_out() -> None:
    s = snap("x2-direct-nvlink")
    before = build_graph(s)
    ((a, b, links),) = [(u, v, d["links"]) for u, v, d in before.edges(data=True) if d["kind"] == "nvlink"]
    assert (a, b) == (gpu_node(0), gpu_node(1)) and links > 0  # each direct link counted once, from GPU0
    k = s.gpu(0).nvlinks[0]
    stray = (
        replace(k, link=90, active=True, remote_type="gpu", remote_bus_id="0000:FF:00.0"),  # a GPU not listed
        replace(k, link=91, active=True, remote_type="unknown", remote_bus_id=UNREAD),  # far end unread
        replace(k, link=92, active=True, remote_type="switch", remote_bus_id="0000:FE:00.0"),  # a switch not seen
    )
    after = build_graph(with_gpu(s, 0, nvlinks=(*s.gpu(0).nvlinks, *stray)))
    assert list(after.edges(data=True)) == list(before.edges(data=True))
    assert list(after.nodes) == list(before.nodes)


def test_only_rdma_nics_are_graph_nodes_and_matrix_columns() -> None:
    s = snap("hgx-8gpu-2socket")
    names = [n.name for n in rdma_nics(s)]
    kinds = {n.name: n.kind for n in s.nics}
    assert set(kinds.values()) <= {"infiniband", "roce", "ethernet"} and len(names) >= 2
    first = names[0]
    as_eth = replace(s, nics=tuple(replace(n, kind="ethernet") if n.name == first else n for n in s.nics))
    as_roce = replace(s, nics=tuple(replace(n, kind="roce") if n.name == first else n for n in s.nics))
    assert [n.name for n in rdma_nics(as_eth)] == names[1:]
    assert [n.name for n in rdma_nics(as_roce)] == names
    g = build_graph(as_eth)
    assert [d["name"] for _, d in g.nodes(data=True) if d["kind"] == "nic"] == names[1:]
    assert g.nodes[nic_node(0)]["name"] == names[1]
    assert build_graph(as_roce).nodes[nic_node(0)] == {"kind": "nic", "name": first, "nic_kind": "roce"}


def test_two_sockets_are_joined_once() -> None:
    g = build_graph(snap("hgx-8gpu-2socket"))
    assert [(u, v) for u, v, k in g.edges(data="kind") if k == "smp"] == [("numa:0", "numa:1")]
    assert [n for n, k in g.nodes(data="kind") if k == "numa"] == ["numa:0", "numa:1"]


def _attached(g: Any, node: str) -> list[str]:
    """The NUMA nodes ``node`` is attached to (either end of its attach edges)."""
    return [b if a == node else a for a, b, k in g.edges(data="kind") if k == "attach" and node in (a, b)]


def test_a_host_bridge_takes_its_numa_node_from_what_hangs_below_it() -> None:
    s = snap("hgx-8gpu-2socket")
    gpu0 = s.gpu(0)
    root = gpu0.pcie_path[0]
    hb = f"hostbridge:{root}"
    under = {b for g in s.gpus if g.pcie_path[0] == root for b in g.pcie_path[1:-1]} | {
        b for n in s.nics if isinstance(n.pcie_path, tuple) and n.pcie_path[0] == root for b in n.pcie_path[1:-1]
    }
    numa = _attached(build_graph(s), hb)
    assert numa == ["numa:0"]  # the bridges below say which node
    # What hangs below the other root complexes says the other node: only what is below this one counts.
    assert [n.name for n in s.nics if isinstance(n.pcie_path, tuple) and n.pcie_path[0] == root] == ["mlx5_0"]
    quiet = replace(
        s,
        bridges=tuple(replace(b, numa_node=UNREAD) if b.bus_id in under else b for b in s.bridges),
        gpus=tuple(g if g.pcie_path[0] == root else replace(g, sysfs_numa_node=1) for g in s.gpus),
        nics=tuple(replace(n, numa_node=UNREAD if n.name == "mlx5_0" else 1) for n in s.nics),
    )
    assert _attached(build_graph(quiet), hb) == numa  # no bridge nor NIC says: the GPU below it does (sysfs)
    gpu_quiet = with_gpu(quiet, 0, sysfs_numa_node=UNREAD)
    nic_says = replace(gpu_quiet, nics=tuple(replace(n, numa_node=0) if n.name == "mlx5_0" else n for n in quiet.nics))
    assert _attached(build_graph(nic_says), hb) == numa  # nor the GPU: the NIC below it does
    assert _attached(build_graph(gpu_quiet), hb) == []  # nothing below it says: not attached, not guessed
    elsewhere = replace(s, bridges=tuple(replace(b, numa_node=7) if b.bus_id in under else b for b in s.bridges))
    g = build_graph(elsewhere)  # a node this host does not have: not invented, not attached
    assert "numa:7" not in g and _attached(g, hb) == []


def test_a_pcie_path_is_as_fast_as_its_slowest_link() -> None:
    s = snap("hgx-8gpu-2socket")
    g0 = s.gpu(0)
    upstream = g0.pcie_path[-2]  # the bridge GPU0 hangs off
    narrow = replace(
        s,
        bridges=tuple(
            replace(b, link_speed="8.0 GT/s PCIe", link_width=4, max_link_speed="8.0 GT/s PCIe", max_link_width=4)
            if b.bus_id == upstream
            else b
            for b in s.bridges
        ),
    )
    g = build_graph(narrow)
    c = connection(narrow, g, gpu_node(0), nic_node(0))
    assert c.gbps == pcie_gbps(3, 4) == 3.94
    wide = connection(s, build_graph(s), gpu_node(0), nic_node(0))
    assert wide.gbps is not None and wide.gbps > 3.94


def _topo_text() -> str:
    return (TOPO_TEXT / "h200-x4.nvidia-smi-topo.txt").read_text()


def test_the_matrix_reads_the_same_with_crlf_trailing_spaces_and_text_around_it() -> None:
    plain = parse_nvidia_smi(_topo_text())
    crlf = "\r\n".join(ln.rstrip() + "  " for ln in _topo_text().splitlines()) + "\r\n"
    framed = "$ nvidia-smi topo -m\n" + _topo_text() + "\nLegend:\n\n  X    = Self\n"
    spaced = _topo_text().replace("\t", "\t ")  # a cell with a blank after its tab, as pasted from a terminal
    for text in (crlf, framed, spaced):
        again = parse_nvidia_smi(text)
        assert (again.names, again.cells, again.affinity, again.nic_names) == (
            plain.names,
            plain.cells,
            plain.affinity,
            plain.nic_names,
        )


def test_the_matrix_stops_at_its_legend_and_skips_rows_it_does_not_know() -> None:
    text = _topo_text()
    header = next(ln for ln in text.splitlines() if ln.startswith("\t") and "GPU0" in ln)
    first_row = text.splitlines()[text.splitlines().index(header) + 1]
    stray = "\t".join(["mlx5_9", *first_row.split("\t")[1:]])  # a row named like no column
    extra = text.replace(first_row, first_row + "\n" + stray, 1)
    assert parse_nvidia_smi(extra).cells == parse_nvidia_smi(text).cells
    legend_first = text.replace(first_row, "Legend:\n" + first_row, 1)
    assert parse_nvidia_smi(legend_first).cells == {}


def test_the_nic_legend_is_read_whatever_its_indent() -> None:
    legend = "\nNIC Legend:\n\n  NIC0: mlx5_0\nNIC1:mlx5_1 \n"
    assert parse_nvidia_smi(_topo_text() + legend).nic_names == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
