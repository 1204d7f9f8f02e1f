"""nvidia-smi topo -m and topo -p2p, as printed (tabs, ANSI escapes) and as pasted (spaces), on several
drivers' layouts: NIC rows and legend, NICs named in the header (old drivers), no NUMA columns."""

from __future__ import annotations

from pathlib import Path

import pytest
from evidence_support import EVIDENCE, ROOT, kinds, only, read

from topodoctor.evidence.inputs import read_input
from topodoctor.topology.topo_matrix import parse_nvidia_smi

RECORDED = sorted((ROOT / "fixtures" / "recordings").glob("*.nvidia-smi-topo.txt"))


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name.split(".")[0])
def test_every_recorded_host_reads_as_the_projects_own_parser_reads_it(path: Path) -> None:
    got = read(path)
    k = only(got, "topo-matrix")
    theirs = parse_nvidia_smi(path.read_text())
    cells = {(p.a, p.b): p.link for p in got.parts[k].pairs}
    assert cells == {(a, b): c.strip() for (a, b), c in theirs.cells.items() if a != b}
    for g in got.parts[k].gpus:
        cpu, numa, _ = theirs.affinity[f"GPU{g.index}"]
        assert g.cpu_affinity == ("" if cpu == "N/A" else cpu) and g.numa_affinity == ("" if numa == "N/A" else numa)


def test_h200_x4_with_ansi_underline_and_four_p2p_matrices() -> None:
    got = read(EVIDENCE / "h200-x4" / "host.txt")
    assert kinds(got).count("topo-p2p") == 4
    matrix = got.parts[only(got, "topo-matrix")]
    assert {p.link for p in matrix.pairs} == {"NV18"} and len(matrix.pairs) == 12
    modes = [next(iter(got.parts[k].pairs[0].p2p)) for k, p in enumerate(got.pieces) if p.kind == "topo-p2p"]
    assert modes == ["r", "w", "n", "a"]  # from the command line above each matrix


def test_pcie_pair_of_consumer_gpus_and_gpu_not_supported_p2p() -> None:
    got = read(EVIDENCE / "topo-rtx5090-phb-and-p2p.txt")
    assert kinds(got) == ["topo-matrix", "topo-p2p"]
    assert [p.link for p in got.parts[0].pairs] == ["PHB", "PHB"]
    assert got.parts[0].gpus[0].cpu_affinity == "0-63"
    assert [p.p2p for p in got.parts[1].pairs] == [{"rw": "GNS"}, {"rw": "GNS"}]


def test_nic_rows_without_a_legend_and_spaces_for_tabs() -> None:
    got = read(EVIDENCE / "topo-h100-nv6-nics.txt")
    part = got.parts[0]
    assert [n.alias for n in part.nics] == ["NIC0", "NIC1", "NIC2", "NIC3"]
    links = {(p.a, p.b): p.link for p in part.pairs}
    assert links[("GPU0", "GPU3")] == "NV6" and links[("GPU1", "NIC1")] == "PIX" and links[("NIC3", "GPU0")] == "SYS"
    assert [g.numa_affinity for g in part.gpus] == ["3", "1", "7", "5"]


def test_old_driver_names_nics_in_the_header_and_the_paste_is_cut() -> None:
    got = read(EVIDENCE / "topo-v100x16-mlx5-columns-cut.txt")
    part = got.parts[0]
    assert [n.name for n in part.nics][:2] == ["mlx5_0", "mlx5_1"] and len(part.nics) == 10
    assert {(p.a, p.b): p.link for p in part.pairs}[("GPU2", "mlx5_1")] == "PIX"
    assert "no row for GPU5" in got.pieces[0].cut and "5 of 16 rows" in got.pieces[0].cut


def test_driver_450_v100_mixed_nv1_nv2_two_numa_column() -> None:
    got = read(EVIDENCE / "topo-v100-nv1-nv2-driver450.txt")
    links = {(p.a, p.b): p.link for p in got.parts[0].pairs}
    assert links[("GPU0", "GPU1")] == "NV1" and links[("GPU0", "GPU2")] == "NV2"
    assert got.parts[0].gpus[0].numa_affinity == "0-1"


def test_soc_of_old_drivers_is_sys_and_a_wrapped_row_is_joined() -> None:
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tSOC\t0-11\nGPU1\tSOC\n\t X \t12-23\n"
    got = read_input("paste", text)
    assert {(p.a, p.b): p.link for p in got.parts[0].pairs} == {("GPU0", "GPU1"): "SYS", ("GPU1", "GPU0"): "SYS"}
    assert got.parts[0].gpus[1].cpu_affinity == "12-23" and got.pieces[0].cut == ""


def test_nine_nics_cut_in_the_nic_rows_and_a_nic_legend() -> None:
    got = read(EVIDENCE / "topo-h100-nine-nics-cut-in-nic-rows.txt")
    part = got.parts[0]
    links = {(p.a, p.b): p.link for p in part.pairs}
    assert links[("GPU0", "NIC8")] == "PIX" and links[("GPU4", "GPU7")] == "NV18" and links[("NIC5", "GPU3")] == "PIX"
    assert got.pieces[0].cut == "no row for NIC6, NIC7, NIC8 (the paste ends after 14 of 17 rows)"
    legend = (
        "\tGPU0\tNIC0\tCPU Affinity\nGPU0\t X \tPIX\t0-31\nNIC0\tPIX\t X \n\n"
        "Legend:\n\n  X    = Self\n\nNIC Legend:\n\n  NIC0: mlx5_0\n"
    )
    named = read_input("legend", legend).parts[0].nics
    assert [(n.name, n.alias) for n in named] == [("mlx5_0", "NIC0")]


def test_underline_escapes_whose_esc_a_copy_lost() -> None:
    text = (EVIDENCE / "h200-x4" / "host.txt").read_text().replace("\x1b", "")
    assert "[4mGPU0" in text
    got = read_input("copied", text)
    assert kinds(got).count("topo-p2p") == 4 and len(got.parts[only(got, "topo-matrix")].pairs) == 12
