"""The host graph and the topo -m matrix on real and derived hosts: link counting (direct
GPU-GPU NVLink, NVSwitches seen and unseen), PCIe classes and their bottleneck rates."""

from __future__ import annotations

import pytest
from conftest import scenario_path

from topodoctor.core.probed import Unsupported
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.sources import probe_host
from topodoctor.topology.graph import (
    BestPath,
    build_graph,
    connection,
    connection_matrix,
    gpu_node,
    nic_node,
    nvlink_count,
    nvlink_link_gbps,
    pcie_class,
    pcie_gbps,
    pcie_gen_of,
)
from topodoctor.topology.topo_matrix import Matrix, build_matrix, diff, parse_nvidia_smi, render

NV4_LINK = 26.5625


def snap(name: str) -> HostSnapshot:
    path = scenario_path(name)
    return probe_host(str(path) if path.exists() else name).snapshot


@pytest.mark.parametrize(
    ("text", "gen"),
    [
        ("2.5 GT/s PCIe", 1),
        ("5.0 GT/s", 2),
        ("8.0 GT/s PCIe", 3),
        ("16.0 GT/s PCIe", 4),
        ("32.0 GT/s PCIe", 5),
        ("64.0 GT/s PCIe", 6),
        (" 32 GT/s", 5),
        ("Unknown", None),
        ("128.0 GT/s PCIe", None),
        ("32.0 Gb/s", None),
    ],
)
def test_pcie_generation_from_sysfs_speed(text: str, gen: int | None) -> None:
    assert pcie_gen_of(text) == gen


@pytest.mark.parametrize(
    ("gen", "width", "gbps"),
    [
        (5, 16, 63.008),
        (4, 16, 31.504),
        (3, 8, 7.88),
        (1, 1, 0.25),
        (6, 4, 30.252),
        (None, 16, None),
        (5, None, None),
        (5, 0, None),
        (7, 16, None),
    ],
)
def test_pcie_rate(gen: int | None, width: int | None, gbps: float | None) -> None:
    assert pcie_gbps(gen, width) == gbps


def test_nvswitch_links_counted_through_an_unseen_fabric() -> None:
    s = snap("h200-x4")
    g = build_graph(s)
    assert [n for n, k in g.nodes(data="kind") if k == "nvswitch"] == ["nvswitch:fabric"]
    assert g.edges[gpu_node(0), "nvswitch:fabric"]["links"] == 18
    assert nvlink_count(g, gpu_node(0), gpu_node(3)) == (18, round(18 * NV4_LINK, 3))
    assert nvlink_link_gbps(s.gpus[0]) == NV4_LINK


def test_visible_nvswitches_are_counted_switch_by_switch() -> None:
    s = snap("x4-visible-nvswitch")
    assert [(sw.bus_id, sw.inferred, len(sw.gpu_links)) for sw in s.nvswitches] == [
        ("0000:80:00.0", False, 20),
        ("0000:81:00.0", False, 20),
        ("0000:82:00.0", False, 16),
        ("0000:83:00.0", False, 16),
    ]
    g = build_graph(s)
    assert [g.edges[gpu_node(1), sw.id]["links"] for sw in s.nvswitches] == [5, 5, 4, 4]
    assert nvlink_count(g, gpu_node(1), gpu_node(2)) == (18, round(18 * NV4_LINK, 3))
    assert build_matrix(s).cells[("GPU1", "GPU2")] == "NV18"


def test_direct_gpu_links_are_counted_once() -> None:
    s = snap("x2-direct-nvlink")
    assert s.nvswitches == ()
    g = build_graph(s)
    e = g.edges[gpu_node(0), gpu_node(1)]
    assert (e["kind"], e["links"], e["gbps"]) == ("nvlink", 18, round(18 * NV4_LINK, 3))
    assert connection(s, g, gpu_node(1), gpu_node(0)) == BestPath("NV", 18, round(18 * NV4_LINK, 3), "PHB")


def test_a_down_link_leaves_its_pairs_one_short() -> None:
    s = snap("x4-nvlink-down")
    g = build_graph(s)
    assert nvlink_count(g, gpu_node(1), gpu_node(0))[0] == 17
    assert nvlink_count(g, gpu_node(0), gpu_node(2))[0] == 18


def test_a_gpu_without_links_falls_back_to_pcie() -> None:
    s = snap("x4-pcie-fallback")
    g = build_graph(s)
    assert nvlink_count(g, gpu_node(0), gpu_node(3)) == (0, None)
    assert connection(s, g, gpu_node(0), gpu_node(3)).cls == "PHB"  # NVML's common ancestor, as nvidia-smi


NIC0_ROW = {
    "GPU0": "PXB",
    "GPU1": "PXB",
    "GPU2": "PIX",
    "GPU3": "PIX",
    "GPU4": "NODE",
    "GPU5": "NODE",
    "GPU6": "SYS",
    "GPU7": "SYS",
    "NIC1": "SYS",
}


def test_pcie_classes_follow_the_tree() -> None:
    s = snap("pcie-2socket")
    names, cells = connection_matrix(s)
    assert names == [*(f"GPU{i}" for i in range(8)), "NIC0", "NIC1"]
    assert {b: cells[("NIC0", b)].cls for b in names if b != "NIC0"} == NIC0_ROW
    assert cells[("NIC1", "GPU6")].cls == cells[("NIC1", "GPU7")].cls == "PIX"
    assert cells[("NIC0", "GPU2")].gbps == 31.504  # Gen4 x16 is the narrowest hop
    assert cells[("GPU0", "GPU0")] == BestPath("X", 0, None, None)
    g = build_graph(s)
    assert pcie_class(g, gpu_node(0), gpu_node(1)) == ("PIX", 31.504)
    assert pcie_class(g, gpu_node(0), gpu_node(2))[0] == "PXB"
    assert pcie_class(g, gpu_node(0), gpu_node(4))[0] == "NODE"
    assert pcie_class(g, gpu_node(0), gpu_node(7))[0] == "SYS"
    assert pcie_class(g, gpu_node(0), "no-such-node") == (None, None)


def test_numa_and_sockets_in_the_graph() -> None:
    g = build_graph(snap("hgx-8gpu-2socket"))
    assert g.edges["numa:0", "numa:1"]["kind"] == "smp"
    assert g.edges["numa:1", "socket:1"]["kind"] == "cpu"
    attach = sorted((u, v) for u, v, k in g.edges(data="kind") if k == "attach")
    assert len(attach) == 8 and all("numa:0" in e for e in attach[:4])
    assert g.nodes[nic_node(0)]["name"] == "mlx5_0"
    assert g.nodes[gpu_node(7)]["lost"] is False


def test_a_lost_gpu_shows_as_err_in_the_matrix() -> None:
    m = build_matrix(snap("x4-gpu-lost"))
    assert m.cells[("GPU0", "GPU3")] == m.cells[("GPU3", "GPU1")] == "ERR"
    assert m.cells[("GPU3", "GPU3")] == " X "


def test_render_and_parse_round_trip() -> None:
    m = build_matrix(snap("pcie-2socket"))
    back = parse_nvidia_smi(render(m))
    assert diff(m, back) == []
    assert back.nic_names == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert back.affinity["GPU6"][0] == "64-127"


def test_diff_names_each_difference() -> None:
    m = build_matrix(snap("h200-x4"))
    other = Matrix(
        m.names[:-1],
        {**m.cells, ("GPU0", "GPU1"): "NV12"},
        {**{k: v for k, v in m.affinity.items() if k != "GPU3"}, "GPU2": ("0-31", "0", "N/A")},
        {"NIC0": "mlx5_0"},
    )
    got = diff(m, other)
    assert any("rows differ" in d for d in got)
    assert "GPU0/GPU1: ours 'NV18' vs nvidia-smi 'NV12'" in got
    assert "GPU2 CPU Affinity: ours '0-63' vs nvidia-smi '0-31'" in got
    assert any(d.startswith("GPU3 affinity") for d in got)
    assert any(d.startswith("NIC legend") for d in got)


def test_text_that_is_not_a_matrix_is_refused() -> None:
    with pytest.raises(ValueError, match="header"):
        parse_nvidia_smi("GPU0 GPU1\n")


@pytest.mark.parametrize("name", ["h200-x4", "h200-x2", "h100-x1"])
def test_render_is_byte_for_byte_what_nvidia_smi_printed(name: str) -> None:
    from conftest import TOPO_TEXT

    from topodoctor.topology.topo_matrix import _ANSI

    theirs = _ANSI.sub("", (TOPO_TEXT / f"{name}.nvidia-smi-topo.txt").read_text())
    assert render(build_matrix(snap(name))) == theirs


def test_render_lists_nics_after_the_gpus() -> None:
    text = render(build_matrix(snap("pcie-2socket")))
    lines = text.splitlines()
    assert lines[1].startswith("GPU0\t X \tPIX\tPXB\t") and lines[1].endswith("\t0-63\t0\t\tN/A")
    assert lines[9] == "NIC0\t" + "\t".join(NIC0_ROW[f"GPU{i}"] for i in range(8)) + "\t X \tSYS"
    assert text.endswith("\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n")
    assert "\n\nLegend:\n\n  X    = Self\n" in text


def test_parse_reads_a_matrix_between_other_lines() -> None:
    text = (
        "\t\x1b[4mGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\x1b[0m\n"
        "GPU0\t X \tNV4\tPIX\t0-7\t0\n"
        "MIG0\tjunk\n"
        "GPU1\tNV4\t X \tSYS\t8-15\t1\n"
        "NIC0\tPIX\tSYS\t X \n"
        "\n"
        "GPU9\tnot\tpart\n"
        "Legend:\n\n  NIC0: mlx5_0:1\n  NIC Legend: none\n"
    )
    m = parse_nvidia_smi(text)
    assert m.names == ["GPU0", "GPU1", "NIC0"]
    assert m.cells[("GPU0", "GPU1")] == "NV4" and m.cells[("GPU1", "GPU1")] == " X "
    assert m.cells[("NIC0", "GPU1")] == "SYS" and ("GPU9", "GPU0") not in m.cells
    assert m.affinity == {"GPU0": ("0-7", "0", ""), "GPU1": ("8-15", "1", "")}
    assert m.nic_names == {"NIC0": "mlx5_0:1"}


def test_graph_nodes_carry_their_facts() -> None:
    g = build_graph(snap("hgx-8gpu-2socket"))
    assert g.nodes["numa:1"] == {"kind": "numa", "id": 1, "cpus": tuple(range(64, 128))}
    assert g.nodes["socket:1"] == {"kind": "cpu", "id": 1}
    assert g.nodes[gpu_node(2)]["bus_id"] == "0000:40:00.0" and g.nodes[gpu_node(2)]["index"] == 2
    assert g.nodes["nvswitch:fabric"] == {"kind": "nvswitch", "inferred": True}
    up = g.edges[gpu_node(0), "pci:0000:17:00.0"]
    assert (up["kind"], up["gen"], up["gen_max"], up["width"], up["width_max"], up["gbps"]) == (
        "pcie",
        5,
        5,
        16,
        16,
        63.008,
    )


def test_affinity_columns_say_na_for_what_is_unknown() -> None:
    from dataclasses import replace

    from topodoctor.core.probed import ProbeError
    from topodoctor.topology.topo_matrix import _na

    assert [_na(v) for v in (None, (), Unsupported(), ProbeError("x", "y"), (0, 1, 2, 5), 3)] == [
        "N/A",
        "N/A",
        "N/A",
        "N/A",
        "0-2,5",
        "3",
    ]
    s = snap("h200-x4")
    s = replace(s, gpus=(replace(s.gpus[0], cpu_affinity=()), *s.gpus[1:]))
    assert build_matrix(s).affinity["GPU0"] == ("N/A", "0", "N/A")


def test_nvml_level_names_the_pcie_class_of_an_nvlink_pair() -> None:
    from dataclasses import replace

    from topodoctor.core.probed import ProbeError

    s = snap("h200-x4")
    g = build_graph(s)
    assert connection(s, g, gpu_node(0), gpu_node(1)).pcie_cls == "PHB"
    system = replace(s, pairs=(replace(s.pairs[0], common_ancestor="SYSTEM"), *s.pairs[1:]))
    assert connection(system, g, gpu_node(0), gpu_node(1)) == BestPath("NV", 18, round(18 * NV4_LINK, 3), "SYS")
    failed = replace(s, pairs=(replace(s.pairs[0], common_ancestor=ProbeError("NO_PERMISSION", "x", 4)), *s.pairs[1:]))
    assert connection(failed, g, gpu_node(0), gpu_node(1)).pcie_cls == "PHB"  # the graph's own answer
    unknown = replace(s, pairs=(replace(s.pairs[0], common_ancestor="level_99"), *s.pairs[1:]))
    assert connection(unknown, g, gpu_node(0), gpu_node(1)).pcie_cls == "PHB"


def test_pcie_path_connections_are_exact() -> None:
    s = snap("x4-pcie-fallback")
    g = build_graph(s)
    assert connection(s, g, gpu_node(0), gpu_node(3)) == BestPath("PHB", 0, 63.008, "PHB")
    assert pcie_class(g, gpu_node(0), gpu_node(3)) == ("PHB", 63.008)


def test_an_endpoint_without_a_pcie_path_is_sys() -> None:
    from dataclasses import replace

    s = snap("hgx-8gpu-2socket")
    s = replace(s, nics=(replace(s.nics[0], pcie_path=Unsupported("ABSENT")), *s.nics[1:]))
    g = build_graph(s)
    assert connection(s, g, gpu_node(0), nic_node(0)) == BestPath("SYS", 0, None, None)


def test_one_link_through_a_switch_is_nv1() -> None:
    from dataclasses import replace

    s = snap("x4-visible-nvswitch")
    g1 = s.gpus[1]
    g1 = replace(g1, nvlinks=tuple(replace(k, active=k.link == 0) for k in g1.nvlinks))
    s = replace(s, gpus=(s.gpus[0], g1, *s.gpus[2:]))
    s = replace(
        s,
        nvswitches=tuple(
            replace(sw, gpu_links=tuple((i, k) for i, k in sw.gpu_links if i != 1 or k == 0)) for sw in s.nvswitches
        ),
    )
    assert nvlink_count(build_graph(s), gpu_node(0), gpu_node(1)) == (1, 26.562)


def test_links_of_unknown_version_count_without_a_rate() -> None:
    from dataclasses import replace

    from topodoctor.core.probed import ProbeError

    s = snap("h200-x4")
    err = ProbeError("NO_PERMISSION", "x", 4)
    s = replace(s, gpus=tuple(replace(g, nvlinks=tuple(replace(k, version=err) for k in g.nvlinks)) for g in s.gpus))
    assert nvlink_link_gbps(s.gpus[0]) is None
    assert nvlink_count(build_graph(s), gpu_node(0), gpu_node(1)) == (18, None)


def test_switch_levels_make_pix_and_pxb() -> None:
    import itertools

    import networkx as nx

    g = nx.Graph()
    g.add_node("A", kind="gpu")
    g.add_node("B", kind="gpu")
    for n, port in (
        ("d1", "downstream"),
        ("u1", "upstream"),
        ("d0", "downstream"),
        ("u2", "upstream"),
        ("d2", "downstream"),
    ):
        g.add_node(n, kind="pcie_bridge", port_type=port)
    chain = ["A", "d1", "u1", "d0", "u2", "d2", "B"]
    for a, b in itertools.pairwise(chain):
        g.add_edge(a, b, kind="pcie", gbps=31.504)
    assert pcie_class(g, "A", "B") == ("PXB", 31.504)  # two switches between them
    assert pcie_class(g, "A", "d0") == ("PIX", 31.504)  # one switch
    g.add_edge("d1", "d2", kind="pcie", gbps=None)
    assert pcie_class(g, "A", "B") == ("PIX", 31.504)  # siblings under one switch; unknown rates skipped


def test_host_bridges_hang_off_their_numa_node() -> None:
    x4 = build_graph(snap("h200-x4"))  # one NUMA node: every host bridge hangs off it
    assert x4.nodes["hostbridge:pci0000:00"] == {"kind": "host_bridge", "domain": "pci0000:00"}
    assert x4.edges["hostbridge:pci0000:00", "numa:0"]["kind"] == "attach"
    hgx = build_graph(snap("hgx-8gpu-2socket"))
    assert hgx.edges["hostbridge:pci0000:95", "numa:1"]["kind"] == "attach"
    assert not hgx.has_edge("hostbridge:pci0000:95", "numa:0")
    unknown = build_graph(snap("hgx-numa-unsupported"))  # two nodes, firmware silent: attach nothing
    assert [e for e in unknown.edges(data="kind") if e[2] == "attach"] == []


def test_bridge_links_carry_the_bridge_s_own_rates() -> None:
    from dataclasses import replace

    s = snap("hgx-8gpu-2socket")
    s = replace(
        s,
        bridges=tuple(
            replace(b, link_speed="16.0 GT/s PCIe", link_width=8, max_link_width=16)
            if b.bus_id == "0000:17:00.0"
            else b
            for b in s.bridges
        ),
    )
    g = build_graph(s)
    e = g.edges["pci:0000:17:00.0", "pci:0000:16:00.0"]
    assert (e["gen"], e["gen_max"], e["width"], e["width_max"], e["gbps"]) == (4, 5, 8, 16, 31.504)
    assert g.nodes["pci:0000:16:00.0"] == {"kind": "pcie_bridge", "bus_id": "0000:16:00.0", "port_type": "upstream"}
    assert g.nodes[nic_node(0)] == {"kind": "nic", "name": "mlx5_0", "nic_kind": "infiniband"}
    assert g.nodes[gpu_node(0)]["name"] == s.gpus[0].name
