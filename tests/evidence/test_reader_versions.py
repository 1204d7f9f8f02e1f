"""The readers on each tool's real output of several versions (fixtures/evidence/versions/, sources in its
README): the kinds told, the GPUs, each pair's class, the tables' rows and the matrices' cells a person
reading the file sees, and what is cut where the paste is cut (nothing where it is whole)."""

from __future__ import annotations

import pytest
from evidence_support import EVIDENCE, kinds, only, read

from topodoctor.evidence.inputs import Read

VERSIONS = EVIDENCE / "versions"

# file -> (the kinds read in order, the GPUs the main piece shows, a part of its cut or "" when whole)
EXPECTED: dict[str, tuple[list[str], int, str]] = {
    "topo-m-p100-soc-2017.txt": (["topo-matrix"], 2, ""),
    "topo-m-8gpu-mlx4-cpu-affinity-only-2017-cut.txt": (
        ["topo-matrix"],
        5,
        "GPU5, GPU6, GPU7 (the paste ends after 5 of 8 rows)",
    ),
    "topo-m-l4-pair-sys.txt": (["topo-matrix"], 2, ""),
    "topo-m-rtx4090x8-nic-rows-no-legend-gpu-numa-id.txt": (["topo-matrix"], 8, ""),
    "topo-m-dgx-a100-nv12-twelve-nics-cut.txt": (["topo-matrix"], 5, "the row of GPU4 is cut"),
    "topo-m-h100-nv8-numa-no-gpu-numa-id-cut.txt": (["topo-matrix"], 8, "no row for NIC0 and 8 more"),
    "topo-mp-h100-fourteen-nics-cut.txt": (["topo-matrix"], 5, "the row of GPU4 is cut"),
    "topo-m-rtx5070-header-on-the-command-line.txt": (["topo-matrix"], 2, ""),
    "topo-m-and-p2p-p-five-gpus-prompts.txt": (["topo-matrix", "topo-p2p"], 5, ""),
    "topo-p2p-rw-rtx5090-spaces.txt": (["topo-p2p"], 0, ""),
    "smi-query-k80-azure-domain-driver396-cut.txt": (["smi-query"], 1, "(at 'Pending')"),
    "smi-query-gtx1080-driver396-cut.txt": (["smi-query"], 1, "(at 'Virtualization mode')"),
    "smi-query-quadro-p2000-driver418-cut.txt": (["smi-query"], 1, "(at 'OEM Object')"),
    "smi-query-v100-pass-through-driver418-cut.txt": (["smi-query"], 1, "(at 'Host VGPU Mode')"),
    "smi-query-rtx3070ti-laptop-driver555-cut.txt": (["smi-query"], 1, "(at 'Board Part Number')"),
    "smi-query-d-memory-performance-driver580-cut.txt": (["smi-query"], 1, "(at 'Spars')"),
    "smi-summary-titanxp-driver450.txt": (["smi-summary"], 1, ""),
    "smi-summary-h100-driver550-cut.txt": (["smi-summary"], 2, "the table ends inside the rows of GPU 1"),
    "smi-summary-v100-driver470-cut.txt": (["smi-summary"], 1, ""),  # cut in the processes box, not read
    "p2pbw-v100x4-samples-2018-cut.txt": (["p2p-bandwidth-latency"], 4, "no matrix"),
    "p2pbw-a100x8-cuda11.5-samples-cut.txt": (["p2p-bandwidth-latency"], 8, "no matrix"),
    "p2pbw-h100x8-from-the-connectivity-matrix-cut.txt": (["p2p-bandwidth-latency"], 0, "2 of the 6 matrices"),
    "nvbandwidth-v0.7-a100x8-assert-before-any-matrix.txt": (["nvbandwidth"], 8, "no testcase ran"),
    "nvbandwidth-v0.2-rtx2080ti-waived.txt": (["nvbandwidth"], 2, "(device_to_device_memcpy_write_ce waived)"),
    "nccl-tests-error-column-v100-sxm3-backtick-cut.txt": (["nccl-tests"], 4, "the table ends after the row of 128 B"),
    "nccl-tests-nccl2.5.6-v100-azure-info-lines-cut.txt": (
        ["command-line", "nccl-tests", "nccl-log"],
        2,
        "the output ends before the column header",
    ),
    "nccl-tests-a100-two-gpus-one-process-info-after.txt": (
        ["command-line", "nccl-tests", "nccl-log"],
        2,
        "the output ends before the column header",
    ),
    "nccl-tests-2.20.0-gb10-two-nodes-cut.txt": (["nccl-tests"], 2, "the table ends inside the row of 131072 B"),
    "nccl-tests-rows-from-the-units-line-cut.txt": (["nccl-tests"], 0, "the table ends inside the row of 8192 B"),
    "nccl-tests-rows-wide-wrong-column-cut.txt": (["nccl-tests"], 0, "inside the row of 67108864 B"),
    "nccl-tests-rows-max-min-ops-cut.txt": (["nccl-tests"], 0, "inside the row of 201728 B"),
    "rccl-tests-tail-avg-bus-bandwidth-concluded.txt": (["nccl-tests"], 0, "the paste starts inside the table"),
    "nvlink-status-a100-integer-rates-elided.txt": (["nvlink-status"], 3, "GPU 2 lists 1 of the 12 links"),
    "nvlink-remote-h100-cut.txt": (["smi-list"], 2, ""),  # -R's lines are read past, not taken for links
    "nccl-topo-dump-v100-version1-cut.xml": (["nccl-topo-xml"], 2, "inside the element of GPU dev 1"),
    "nccl-topo-dump-h100-host-hash-cut.xml": (["nccl-topo-xml"], 1, "the dump ends before </system>"),
}
MAIN = {"command-line", "nccl-log"}  # pieces around the main one


def _main(got: Read) -> int:
    return next(k for k, p in enumerate(got.pieces) if p.kind not in MAIN)


def _links(got: Read, k: int = 0) -> dict[tuple[str, str], str]:
    return {(p.a, p.b): p.link for p in got.parts[k].pairs}


def test_every_file_is_listed_with_its_source_and_expected_here() -> None:
    files = sorted(p.name for p in VERSIONS.iterdir() if p.name != "README.md")
    readme = (VERSIONS / "README.md").read_text()
    assert len(files) >= 15 and sorted(EXPECTED) == files
    assert all(f"`{f}` | https://github.com/" in readme for f in files)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_kinds_gpus_and_what_is_cut(name: str) -> None:
    want_kinds, gpus, cut = EXPECTED[name]
    got = read(VERSIONS / name)
    assert kinds(got) == want_kinds and not got.unreadable
    k = _main(got)
    assert len(got.parts[k].gpus) == gpus
    if cut:
        assert cut in got.pieces[k].cut, got.pieces[k].cut
    else:
        assert got.pieces[k].cut == ""


# --- nvidia-smi topo -m / -p2p ---------------------------------------------------------------------


def test_soc_of_a_2017_driver_is_read_as_sys_with_the_cpu_affinities() -> None:
    got = read(VERSIONS / "topo-m-p100-soc-2017.txt")
    assert _links(got) == {("GPU0", "GPU1"): "SYS", ("GPU1", "GPU0"): "SYS"}
    assert [(g.cpu_affinity, g.numa_affinity) for g in got.parts[0].gpus] == [("0-5", ""), ("6-11", "")]


def test_a_nic_named_in_the_header_has_no_row_to_miss() -> None:
    got = read(VERSIONS / "topo-m-8gpu-mlx4-cpu-affinity-only-2017-cut.txt")
    links = _links(got)
    assert links[("GPU0", "GPU1")] == "PIX" and links[("GPU2", "GPU3")] == "PIX" and links[("GPU0", "GPU4")] == "SYS"
    assert links[("GPU3", "mlx4_0")] == "PHB" and links[("GPU4", "mlx4_0")] == "SYS"
    assert [n.name for n in got.parts[0].nics] == ["mlx4_0"]
    assert got.parts[0].gpus[4].cpu_affinity == "10-19,30-39"


def test_current_layout_with_nic_rows_that_carry_no_affinity() -> None:
    got = read(VERSIONS / "topo-m-rtx4090x8-nic-rows-no-legend-gpu-numa-id.txt")
    links = _links(got)
    assert links[("GPU6", "NIC0")] == "PHB" and links[("NIC0", "NIC1")] == "PIX" and links[("GPU0", "GPU7")] == "SYS"
    assert len(got.parts[0].pairs) == 90  # 10 x 10 cells less the diagonal
    assert [g.numa_affinity for g in got.parts[0].gpus] == ["0"] * 4 + ["1"] * 4
    assert got.parts[0].gpus[7].cpu_affinity == "56-111,168-223"


def test_l4_pair_across_sockets() -> None:
    got = read(VERSIONS / "topo-m-l4-pair-sys.txt")
    assert _links(got)[("GPU0", "GPU1")] == "SYS"
    assert [(g.cpu_affinity, g.numa_affinity) for g in got.parts[0].gpus] == [("0-7,32-39", "0"), ("16-23,48-55", "2")]


def test_a_cell_the_paste_cut_is_not_read_as_a_value() -> None:
    a100 = read(VERSIONS / "topo-m-dgx-a100-nv12-twelve-nics-cut.txt")
    assert _links(a100)[("GPU4", "GPU7")] == "NV12" and _links(a100)[("GPU4", "NIC6")] == "PXB"
    gpu4 = a100.parts[0].gpus[4]
    assert gpu4.cpu_affinity == ""  # "112-127,240-25" is a cut cell, not an affinity
    assert a100.parts[0].gpus[0].cpu_affinity == "48-63,176-191" and a100.parts[0].gpus[2].numa_affinity == "1"
    h100 = read(VERSIONS / "topo-mp-h100-fourteen-nics-cut.txt")
    links = _links(h100)
    assert "SY" not in set(links.values()) and ("GPU4", "NIC7") not in links and links[("GPU4", "NIC6")] == "SYS"
    assert links[("GPU3", "NIC7")] == "PIX" and links[("GPU3", "NIC13")] == "SYS"
    assert [n.alias for n in h100.parts[0].nics][-3:] == ["NIC11", "NIC12", "NIC13"]


def test_a_row_cut_before_its_last_column_and_the_nic_rows_lost_with_it() -> None:
    got = read(VERSIONS / "topo-m-h100-nv8-numa-no-gpu-numa-id-cut.txt")
    links = _links(got)
    assert links[("GPU0", "GPU7")] == "NV8" and links[("GPU4", "NIC1")] == "PIX" and links[("GPU3", "NIC8")] == "PIX"
    assert links[("GPU7", "GPU2")] == "NV8" and ("GPU7", "GPU3") not in links  # its last cell may be cut
    assert got.parts[0].gpus[4].numa_affinity == "1" and got.parts[0].gpus[7].cpu_affinity == ""
    assert got.pieces[0].cut.startswith("no row for NIC0 and 8 more (the paste ends after 8 of 17 rows)")


def test_a_header_pasted_on_the_commands_line() -> None:
    got = read(VERSIONS / "topo-m-rtx5070-header-on-the-command-line.txt")
    assert _links(got) == {("GPU0", "GPU1"): "PHB", ("GPU1", "GPU0"): "PHB"}
    assert [(g.cpu_affinity, g.numa_affinity) for g in got.parts[0].gpus] == [("0-23", "0")] * 2


def test_topo_and_p2p_between_prompts_keep_their_modes() -> None:
    got = read(VERSIONS / "topo-m-and-p2p-p-five-gpus-prompts.txt")
    links = _links(got)
    assert links[("GPU3", "GPU4")] == "PHB" and links[("GPU0", "GPU4")] == "NODE"
    p2p = got.parts[1].pairs
    assert len(p2p) == 20 and {tuple(p.p2p.items()) for p in p2p} == {(("p", "OK"),)}


def test_p2p_matrix_with_spaces_takes_its_mode_from_the_summary_line() -> None:
    got = read(VERSIONS / "topo-p2p-rw-rtx5090-spaces.txt")
    assert [(p.a, p.b, p.p2p) for p in got.parts[0].pairs] == [
        ("GPU0", "GPU1", {"rw": "GNS"}), ("GPU1", "GPU0", {"rw": "GNS"}),
    ]  # fmt: skip


# --- nvidia-smi -q and plain nvidia-smi -------------------------------------------------------------


def test_query_of_old_and_new_drivers() -> None:
    k80 = read(VERSIONS / "smi-query-k80-azure-domain-driver396-cut.txt").parts[0]
    assert (k80.driver_version, k80.cuda_version) == ("396.37", "")  # 396 printed no CUDA Version line
    assert (k80.gpus[0].name, k80.gpus[0].bus_id) == ("Tesla K80", "3E3F8E05:00:00.0")
    assert k80.gpus[0].uuid == "GPU-daade63e-6b82-4c36-32c5-8929377b9e2b"
    p2000 = read(VERSIONS / "smi-query-quadro-p2000-driver418-cut.txt").parts[0]
    assert (p2000.driver_version, p2000.cuda_version, p2000.gpus[0].bus_id) == ("418.56", "10.1", "00000000:04:00.0")
    laptop = read(VERSIONS / "smi-query-rtx3070ti-laptop-driver555-cut.txt").parts[0]
    assert laptop.gpus[0].name == "NVIDIA GeForce RTX 3070 Ti Laptop GPU" and laptop.cuda_version == "12.5"
    passthrough = read(VERSIONS / "smi-query-v100-pass-through-driver418-cut.txt").parts[0].gpus[0]
    assert (passthrough.name, passthrough.virtualization) == ("Tesla V100-PCIE-16GB", "Pass-Through")
    gtx = read(VERSIONS / "smi-query-gtx1080-driver396-cut.txt").parts[0].gpus[0]
    assert gtx.virtualization == ""  # the line is there, its value is not: not shown, not "None"


def test_query_of_driver_580_filtered_with_d_and_a_heading_above_the_gpus() -> None:
    got = read(VERSIONS / "smi-query-d-memory-performance-driver580-cut.txt")
    part = got.parts[0]
    assert (part.driver_version, part.cuda_version) == ("580.105.06", "")  # "Not Found": not shown
    gpu = part.gpus[0]
    assert (gpu.bus_id, gpu.name, gpu.clock_event_reasons) == ("00000000:42:00.0", "", ())  # all Not Active


def test_whole_query_outputs_are_not_said_cut() -> None:
    whole = read(EVIDENCE / "h200-x4" / "smi_q.txt")
    assert [p.cut for p in whole.pieces] == [""] and len(whole.parts[0].gpus) == 4
    older = read(EVIDENCE / "smi-query-v100-driver410-cut.txt")  # ends on a value, before Processes
    assert "before its Processes line" in older.pieces[0].cut


def test_plain_tables_of_drivers_450_470_and_550() -> None:
    titan = read(VERSIONS / "smi-summary-titanxp-driver450.txt")
    part = titan.parts[0]
    assert (part.driver_version, part.cuda_version, titan.pieces[0].version) == ("450.57", "11.0", "450.57")
    assert [(g.index, g.name, g.bus_id) for g in part.gpus] == [(0, "TITAN Xp", "00000000:17:00.0")]
    h100 = read(VERSIONS / "smi-summary-h100-driver550-cut.txt").parts[0]
    assert (h100.driver_version, h100.cuda_version) == ("550.54.15", "12.4")
    assert [(g.index, g.name, g.bus_id) for g in h100.gpus] == [
        (0, "NVIDIA H100 80GB HBM3", "00000000:18:00.0"), (1, "NVIDIA H100 80GB HBM3", "00000000:2A:00.0"),
    ]  # fmt: skip
    v100 = read(VERSIONS / "smi-summary-v100-driver470-cut.txt").parts[0]
    assert (v100.driver_version, v100.cuda_version) == ("470.182.03", "11.4")
    assert [(g.name, g.bus_id) for g in v100.gpus] == [("Tesla V100-SXM2", "00000000:00:04.0")]


# --- p2pBandwidthLatencyTest and nvbandwidth ------------------------------------------------------


def test_p2p_samples_of_2018_and_cuda_11_5_devices_and_peer_access() -> None:
    v100 = read(VERSIONS / "p2pbw-v100x4-samples-2018-cut.txt").parts[0]
    assert [(g.index, g.name, g.bus_id) for g in v100.gpus][3] == (3, "Tesla V100-SXM2-16GB", "00000000:89:00.0")
    assert len(v100.pairs) == 12 and all(p.p2p == {"can-access-peer": "yes"} for p in v100.pairs)
    a100 = read(VERSIONS / "p2pbw-a100x8-cuda11.5-samples-cut.txt").parts[0]
    assert a100.gpus[7].bus_id == "00000000:D2:00.0" and a100.gpus[0].ordinal_kind == "cuda"
    assert len(a100.pairs) == 12  # 7 of device 0, 5 of device 1 before the cut line
    assert (a100.pairs[-1].a, a100.pairs[-1].b) == ("cuda1", "cuda5")


def test_p2p_matrices_from_a_paste_that_starts_at_the_connectivity_matrix() -> None:
    got = read(VERSIONS / "p2pbw-h100x8-from-the-connectivity-matrix-cut.txt")
    disabled, writes = got.parts[0].copies
    assert (disabled.direction, disabled.p2p, disabled.unit) == ("unidirectional", False, "GB/s")
    assert disabled.values[0][0] == 2474.76 and disabled.values[1][3] == 36.32 and disabled.values[7][7] == 2503.38
    assert len(disabled.rows) == 8 and disabled.columns == tuple(str(n) for n in range(8))
    assert writes.p2p is True and writes.values[0][:2] == (2494.76, 371.02)
    assert writes.values[0][7] is None  # "375.6": the paste ended inside the figure
    assert "the paste starts after the tool's first lines" in got.pieces[0].cut
    assert "the matrix unidirectional p2p=enabled is cut" in got.pieces[0].cut


def test_nvbandwidth_v0_7_devices_and_versions_before_its_assert() -> None:
    got = read(VERSIONS / "nvbandwidth-v0.7-a100x8-assert-before-any-matrix.txt")
    part = got.parts[0]
    assert got.pieces[0].version == "v0.7" and part.copies == []
    assert (part.driver_version, part.cuda_version) == ("550.127.08", "12.4")
    assert [g.bus_id for g in part.gpus][::7] == ["00000000:34:00.0", "00000000:9E:00.0"]


def test_nvbandwidth_v0_2_waives_a_testcase_without_peer_access() -> None:
    got = read(VERSIONS / "nvbandwidth-v0.2-rtx2080ti-waived.txt")
    part = got.parts[0]
    assert (got.pieces[0].version, part.driver_version, part.cuda_version) == ("v0.2", "525.125.06", "12.1")
    assert [(g.index, g.name, g.bus_id) for g in part.gpus] == [(n, "NVIDIA GeForce RTX 2080 Ti", "") for n in (0, 1)]
    assert part.copies == []


# --- nccl-tests ---------------------------------------------------------------------------------------


def _run(name: str) -> tuple[Read, int]:
    got = read(VERSIONS / name)
    return got, only(got, "nccl-tests")


def test_nccl_tests_2_20_header_ranks_on_two_nodes_and_rows() -> None:
    got, k = _run("nccl-tests-2.20.0-gb10-two-nodes-cut.txt")
    run = got.parts[k].collectives[0]
    assert got.pieces[k].version == "2.20.0" and run.test_version == "2.20.0"
    assert (run.op, run.nranks, run.nodes, run.threads, run.gpus_per_thread) == ("all_reduce", 2, 2, 1, 1)
    assert [r.size_bytes for r in run.rows] == [8192, 16384, 32768, 65536]
    last = run.rows[-1]
    assert (last.out_of_place.busbw_gbps, last.in_place.busbw_gbps, last.in_place.wrong) == (0.96, 1.01, 0)
    assert run.avg_busbw_gbps is None  # the paste ends before it


def test_nccl_tests_of_2019_with_error_columns() -> None:
    got, k = _run("nccl-tests-error-column-v100-sxm3-backtick-cut.txt")
    run = got.parts[k].collectives[0]
    assert [r.size_bytes for r in run.rows] == [8, 16, 32, 64, 128]
    assert run.rows[3].in_place.time_us == 278.1 and run.rows[0].redop == "sum"
    assert run.rows[0].out_of_place.wrong is None  # an error column holds a figure, not a count


def test_nccl_tests_headers_of_nccl_2_5_and_2_21_then_their_logs() -> None:
    old, k = _run("nccl-tests-nccl2.5.6-v100-azure-info-lines-cut.txt")
    run = old.parts[k].collectives[0]
    assert (run.nranks, run.nodes, run.gpus_per_thread) == (2, 2, 1)
    assert [(g.host, g.name) for g in old.parts[k].gpus] == [
        ("pkb-aa8dbd1b-0", "Tesla V100-PCIE-16GB"), ("pkb-aa8dbd1b-1", "Tesla V100-PCIE-16GB"),
    ]  # fmt: skip
    assert old.pieces[only(old, "nccl-log")].version == "2.5.6+cuda10.0"
    new, k = _run("nccl-tests-a100-two-gpus-one-process-info-after.txt")
    run = new.parts[k].collectives[0]
    assert (run.nranks, run.nodes, run.gpus_per_thread, run.rows) == (2, 1, 2, ())
    assert new.pieces[only(new, "nccl-log")].version == "2.21.5+cuda11.8"


@pytest.mark.parametrize(
    ("name", "sizes", "last_busbw"),
    [
        ("nccl-tests-rows-from-the-units-line-cut.txt", (8, 4096, 10), (0.18, 0.18)),
        ("nccl-tests-rows-wide-wrong-column-cut.txt", (32768, 33554432, 11), (300.51, 300.52)),
        ("nccl-tests-rows-max-min-ops-cut.txt", (199680, 200704, 11), (2.99, 3.0)),
        ("rccl-tests-tail-avg-bus-bandwidth-concluded.txt", (2147483648, 17179869184, 4), (360.98, 361.17)),
    ],
)
def test_rows_pasted_without_their_header(
    name: str, sizes: tuple[int, int, int], last_busbw: tuple[float, float]
) -> None:
    got, k = _run(name)
    run = got.parts[k].collectives[0]
    assert (run.rows[0].size_bytes, run.rows[-1].size_bytes, len(run.rows)) == sizes
    assert (run.rows[-1].out_of_place.busbw_gbps, run.rows[-1].in_place.busbw_gbps) == last_busbw
    assert all(r.root == -1 and r.dtype == "float" for r in run.rows)


def test_max_then_min_rows_keep_their_reduction() -> None:
    got, k = _run("nccl-tests-rows-max-min-ops-cut.txt")
    assert [r.redop for r in got.parts[k].collectives[0].rows] == ["max"] * 6 + ["min"] * 5


def test_closing_lines_of_the_table_name_the_program() -> None:
    got, k = _run("rccl-tests-tail-avg-bus-bandwidth-concluded.txt")
    run = got.parts[k].collectives[0]
    assert (run.op, run.avg_busbw_gbps, run.out_of_bounds) == ("all_reduce", 142.652, 0)
    assert "not named" not in got.pieces[k].cut  # "Collective test concluded: all_reduce_perf" names it


# --- nvidia-smi nvlink and NCCL's topology dump -------------------------------------------------------


def test_nvlink_status_with_whole_number_rates_and_an_elided_listing() -> None:
    got = read(VERSIONS / "nvlink-status-a100-integer-rates-elided.txt")
    shown = [(g.index, g.name, g.nvlinks_up, g.nvlinks_listed, g.nvlink_gbps) for g in got.parts[0].gpus]
    assert shown[:2] == [(0, "NVIDIA A100-SXM4-80GB", 12, 12, 25.0), (1, "NVIDIA A100-SXM4-80GB", 12, 12, 25.0)]
    assert shown[2][2:] == (1, 1, 25.0)  # as shown: the cut says the rest was left out
    assert got.parts[0].gpus[1].uuid == "GPU-0c512562-871f-8257-6187-b5ae1b986d5e"
    assert got.pieces[0].cut.endswith("the paste leaves lines out after GPU 2 (......)")


def test_nvlink_remote_lines_are_not_links_down() -> None:
    got = read(VERSIONS / "nvlink-remote-h100-cut.txt")
    assert [(g.index, g.nvlinks_up, g.nvlinks_listed) for g in got.parts[0].gpus] == [(0, None, None), (1, None, None)]


def test_whole_nvlink_listings_are_not_said_cut() -> None:
    for path in (EVIDENCE / "h200-x4" / "host.txt", EVIDENCE / "nvlink-status-v100-inactive.txt"):
        got = read(path)
        assert got.pieces[only(got, "nvlink-status")].cut == ""


def test_older_topology_dump_cut_inside_a_gpu() -> None:
    got = read(VERSIONS / "nccl-topo-dump-v100-version1-cut.xml")
    assert got.pieces[0].version == "1"
    gpus = [(g.index, g.bus_id, g.pcie_gen, g.pcie_width, g.nvlinks_up) for g in got.parts[0].gpus]
    assert gpus == [(0, "00000000:39:00.0", 3, 16, 6), (1, "00000000:3B:00.0", 3, 16, None)]


def test_recent_topology_dump_with_host_hash_and_a_nic() -> None:
    got = read(VERSIONS / "nccl-topo-dump-h100-host-hash-cut.xml")
    gpu = got.parts[0].gpus[0]
    assert (gpu.bus_id, gpu.pcie_gen, gpu.pcie_width, gpu.nvlinks_up) == ("00000000:18:00.0", 5, 16, 18)
    assert [(n.name, n.rate_gbps, n.gdr) for n in got.parts[0].nics] == [("mlx5_0", 400.0, False)]
