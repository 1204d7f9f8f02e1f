"""NCCL's topology and graph dumps, whole, cut, and pasted from their middle."""

from __future__ import annotations

from evidence_support import EVIDENCE, ROOT, read

from topodoctor.evidence.inputs import read_input


def test_the_projects_h200_dump_gpus_nvlinks_and_the_socket_nic() -> None:
    got = read(ROOT / "fixtures" / "nccl" / "h200-x2.nccl-topo-dump.xml")
    assert got.pieces[0].kind == "nccl-topo-xml" and got.pieces[0].cut == ""
    part = got.parts[0]
    assert [(g.index, g.bus_id, g.pcie_gen, g.pcie_width, g.nvlinks_up) for g in part.gpus] == [
        (0, "00000000:00:06.0", 5, None, 18), (1, "00000000:00:07.0", 5, None, 18),
    ]  # fmt: skip
    assert [(n.name, n.rate_gbps, n.gdr) for n in part.nics] == [("eth0", 10.0, False)]


def test_a_dgx_a100_dump_pasted_from_its_middle() -> None:
    got = read(EVIDENCE / "nccl-topo-dump-dgx-a100-cut.xml")
    assert "starts inside the dump" in got.pieces[0].cut and "ends before </system>" in got.pieces[0].cut
    part = got.parts[0]
    assert [(g.index, g.pcie_gen, g.pcie_width, g.nvlinks_up) for g in part.gpus] == [(0, 4, 16, 12)]
    assert [(n.name, n.rate_gbps, n.gdr) for n in part.nics] == [("mlx5_0", 200.0, True)]


def test_a_v100_dump_without_link_speeds_cut_inside_a_tag() -> None:
    got = read(EVIDENCE / "nccl-topo-dump-v100-no-link-speed-cut.xml")
    part = got.parts[0]
    assert [g.index for g in part.gpus] == [0, 1, 2, 3, 4]
    assert part.gpus[0].pcie_gen is None and part.gpus[0].nvlinks_up is None  # not shown, not zero
    assert part.nics[0].gdr is False and got.pieces[0].cut == "the dump ends before </system>"


def test_graph_dump_each_graph_with_its_link_types() -> None:
    got = read(EVIDENCE / "nccl-graph-dump-two-gpus-ib.xml")
    assert got.pieces[0].kind == "nccl-graph-xml"
    graphs = got.parts[0].graphs
    assert [(g.pattern, g.channels, g.type_intra, g.type_inter, g.nets) for g in graphs] == [
        (4, 1, "LOC", "PXB", 1), (3, 1, "LOC", "PXB", 1), (3, 0, "LOC", "LOC", 0), (5, 0, "LOC", "LOC", 0),
    ]  # fmt: skip
    assert graphs[1].speed_intra_gbps == 48.0


def test_an_entity_is_refused_not_expanded() -> None:
    text = '<!DOCTYPE x [<!ENTITY a "aaaa">]>\n<system version="1">&a;</system>\n'
    got = read_input("x.xml", text)
    assert "undefined entity" in got.pieces[0].cut and not got.parts[0].gpus
    inside = read_input("y.xml", '<system version="1">\n<!DOCTYPE x [<!ENTITY a "aaaa">]>\n</system>\n')
    assert inside.pieces[0].cut.startswith("holds a DTD")
