"""The reporter's sentences read for their claims, on real threads (fixtures/diagnose/holdout4 and
fixtures/diagnose/prose: each README names its thread), and what is not prose left alone."""

from __future__ import annotations

import json
from pathlib import Path

from evidence_support import ROOT, kinds

from topodoctor.core import codec
from topodoctor.evidence.inputs import join, read_input
from topodoctor.evidence.prose import figures, is_sentence
from topodoctor.model.evidence import Evidence
from topodoctor.model.evidence_prose import FigureSaid, ProseSaid

DIAGNOSE = ROOT / "fixtures" / "diagnose"


def said(path: Path) -> ProseSaid:
    got = read_input(path.name, path.read_text())
    claims = [c for part in got.parts for c in part.prose]
    assert len(claims) == 1, kinds(got)
    return claims[0]


def measured(c: ProseSaid) -> list[FigureSaid]:
    return [f for f in c.figures if f.role == "measured" and not f.tool]


def test_gpus_from_an_instance_and_a_count_nvls_and_a_spec_figure() -> None:
    """nccl#1442: "a AWS p5.48x server that has 8 H100s ... a wire bw of 480 GB/s ... the NVLink bw is 900 GB/s"."""
    c = said(DIAGNOSE / "holdout4" / "e-04" / "evidence-1.txt")
    assert (c.gpu_model, c.gpu_count, c.op, c.nvls) == ("H100 SXM", 8, "all_reduce", True)
    assert [(f.gbps, f.kind) for f in measured(c)] == [(480.0, "busbw")]  # "wire bw" is the bus bandwidth
    spec = [f for f in c.figures if f.role == "expected"]
    assert [(f.gbps, f.nvlink) for f in spec] == [(900.0, True)]
    assert c.nodes is None and not c.across_nodes


def test_a_list_of_hardware_the_nic_its_count_and_other_traffic() -> None:
    """nccl#412: "* 8 NVLink a800 GPU * 1 HDR 200G IB card ... 12 compute nodes ... 15.3 GB/s"."""
    c = said(DIAGNOSE / "holdout4" / "e-07" / "evidence-1.txt")
    assert (c.gpu, c.gpu_model, c.gpu_count) == ("a800", "A800 SXM", 8)  # the SXM board: NVLink across 8 GPUs
    assert (c.nodes, c.nic_kind, c.nic_gbit_s, c.nics, c.shared) == (12, "HDR", 200.0, 1, True)
    assert max(measured(c), key=lambda f: f.kind == "busbw").gbps == 15.3
    assert [f.gbps for f in c.figures if f.role == "expected"] == [24.0]  # "the peak for 200G HDR is 24GB/s"


def test_bits_are_eighths_of_bytes_and_the_nic_rate_is_told_from_the_measured_figure() -> None:
    """nccl-tests#22: "125 Gbps reported by all_reduce_perf ... EFA network is advertised to be only 100 Gbps"."""
    c = said(DIAGNOSE / "holdout4" / "e-06" / "evidence-1.txt")
    assert [f.gbps for f in measured(c)] == [15.625]
    assert c.nic_kind == "EFA" and c.nic_gbit_s == 100.0
    assert all(f.role != "measured" for f in c.figures if f.gbps == 12.5)


def test_a_figure_stated_as_a_bound() -> None:
    """nccl-tests#196: "with 2 nodes, reported busbw exceeds 100Gbps"."""
    c = said(DIAGNOSE / "holdout4" / "e-03" / "evidence-1.txt")
    assert (c.gpu_model, c.gpu_count, c.nodes, c.nics) == ("H100 PCIe", 8, 2, 1)
    assert [(f.gbps, f.kind, f.bound) for f in measured(c)] == [(12.5, "busbw", "above")]


def test_algbw_images_and_a_gpu_without_count() -> None:
    """nccl-tests#212: "the algbw is about 250GB/S ... ![WechatIMG19](image)"."""
    c = said(DIAGNOSE / "holdout4" / "e-05" / "evidence-1.txt")
    assert (c.gpu, c.gpu_model, c.gpu_count, c.images) == ("H100", "H100 SXM", None, True)
    assert measured(c)[0].kind == "algbw" and measured(c)[0].gbps == 250.0  # GB/S written loud is bytes


def test_a_range_and_the_kind_said_once_for_the_sentence() -> None:
    """nccl#1455: "busbw is about 365-370 GBps ... Busbw increase from 370 to 420, 440, 460, and 480 GBps"."""
    c = said(DIAGNOSE / "prose" / "p-01" / "evidence-1.txt")
    assert (c.gpu_model, c.gpu_count) == ("H100 SXM", 8)
    assert {(f.gbps, f.kind) for f in measured(c)} >= {(370.0, "busbw"), (480.0, "busbw")}
    assert [f.gbps for f in c.figures if f.nvlink] == [450.0]


def test_quoted_and_computed_figures_are_not_measured() -> None:
    """nccl#1374: "According to GTC talk S62129 ... is 480GB/s", "370 *2 *(8-1)/8 = 647GB/s"."""
    c = said(DIAGNOSE / "prose" / "p-04" / "evidence-1.txt")
    first = [f for f in c.figures if f.line == 1]
    assert [(f.gbps, f.role) for f in first] == [(480.0, "expected")]
    assert all(f.role == "expected" for f in c.figures if f.gbps in (555.0, 647.0))


def test_two_port_nics_counted_after_the_rate_and_the_ideographic_full_stop() -> None:
    """nccl-tests#175: "IB 200Gb * 4 (dual port)", "only 86GB/s。There is a big gap compared to the theoretical
    value(100 GB/s)"; its one-node line is a command line, its reader's."""
    path = DIAGNOSE / "prose" / "p-05" / "evidence-1.txt"
    assert kinds(read_input(path.name, path.read_text())) == ["command-line", "prose"]
    c = said(path)
    assert (c.nodes, c.nic_gbit_s, c.nics, c.dual_port) == (2, 200.0, 4, True)
    assert [f.gbps for f in measured(c)] == [86.0]
    assert [f.gbps for f in c.figures if f.role == "expected"] == [100.0]


def test_a_figure_by_its_own_gpu_count() -> None:
    """nccl#1639 (fixtures/diagnose/holdout3/d-02): "GPU: 5090 *8 ... 8 GPU max performance : bwbus 28GB/s"."""
    c = said(DIAGNOSE / "holdout3" / "d-02" / "evidence-1.txt")
    assert (c.gpu_model, c.gpu_count) == ("RTX 5090", 8)
    assert sorted((f.gpus, f.gbps) for f in measured(c)) == [(4, 35.0), (8, 28.0)]


def test_another_tools_figure_is_not_ncclss() -> None:
    """nccl-tests#83: "25Gbps unidirectional ... (based on NTTTCP) ... but it maxed out at 1.7GBps"; the
    command line and the table stay their readers'."""
    path = DIAGNOSE / "holdout4" / "e-01" / "evidence-1.txt"
    assert kinds(read_input(path.name, path.read_text())) == ["command-line", "nccl-tests", "prose"]
    c = said(path)
    assert [f.gbps for f in measured(c)] == [1.7]
    assert {f.tool for f in c.figures if f.gbps in (3.125, 2.625) and f.role == "measured"} == {"NTTTCP"}
    assert c.lines == (1,)


def test_a_table_of_figures_is_not_prose() -> None:
    """nccl#450's nccl-tests table and its iperf3 table (markdown rows) claim nothing as sentences; the
    table's title ("performance with `NCCL_MIN_NCHANNELS=4 NCCL_SOCKET_NTHREADS=2`") names its settings."""
    table = DIAGNOSE / "holdout4" / "e-02" / "evidence-2.txt"
    got = read_input(table.name, table.read_text())
    assert kinds(got) == ["nccl-tests", "prose"]
    assert [c.figures for p in got.parts for c in p.prose] == [()]
    assert [(s.name, s.value) for p in got.parts for s in p.settings] == [
        ("NCCL_MIN_NCHANNELS", "4"),
        ("NCCL_SOCKET_NTHREADS", "2"),
    ]
    flows = DIAGNOSE / "holdout4" / "e-02" / "evidence-3.txt"
    assert read_input(flows.name, flows.read_text()).unreadable.endswith("holds no kind of text diagnose reads")


def test_what_is_not_a_sentence_or_claims_nothing() -> None:
    for line in ("sudo sysctl -w net.core.rmem_max=67108864", "| 2    | 42.1      | 17.8          |",
                 "x = 480  # GB/s", "def judge(ev: Evidence) -> tuple[Finding, ...]:",
                 "[    9.8] mlx5_core 0000:02:00.0: 126.016 Gb/s available PCIe bandwidth"):  # fmt: skip
        assert not is_sentence(line), line
    assert is_sentence("GPU: 5090 *8") and is_sentence("8 NVLink a800 GPU", item=True)
    assert figures("we ran it for 480 seconds on 8 GPUs", 1) == []  # a number is a bandwidth only with its unit
    for name, text in (
        ("notes.txt", "the job was slow yesterday, what could it be?\n"),
        ("derived_hosts.py", (ROOT / "fixtures" / "derived_hosts.py").read_text()),  # GPUs and NICs in its strings
        ("pyproject.toml", (ROOT / "pyproject.toml").read_text()),
        ("comment.txt", "# die P100 ist GPU0\n"),
    ):
        got = read_input(name, text)
        assert not got.pieces and got.unreadable == f"{name}: holds no kind of text diagnose reads", name


def test_units_as_people_write_them() -> None:
    got = figures("we get 1.7GBps, then 25 Gb/s, 3200 MB/s and 2 TB/s, algbw 250 GiB/s, 1000 MiB/s", 3)
    assert [f.gbps for f in got] == [1.7, 3.125, 3.2, 2000.0, 268.4355, 1.0486]  # GiB/s is 2^30 bytes a second
    assert [f.unit for f in got] == ["GBps", "Gb/s", "MB/s", "TB/s", "GiB/s", "MiB/s"]


def test_the_claims_round_trip_through_json() -> None:
    for case in ("holdout4/e-07", "prose/p-05"):
        path = DIAGNOSE / case / "evidence-1.txt"
        ev = join([read_input(path.name, path.read_text())])
        assert ev.prose and codec.from_jsonable(Evidence, json.loads(json.dumps(codec.to_jsonable(ev)))) == ev


def test_nics_named_by_their_make_and_a_size_is_no_count() -> None:
    """nccl-tests#153: "8 H800 GPU and 8 100Gbps Mellanox CX-6"; nccl#1168: "The message size used is 256MB.
    thought the NIC has capability of ~200GB/s of theoretical bandwidth"."""
    c = said(DIAGNOSE / "prose" / "p-07" / "evidence-1.txt")
    assert (c.gpu, c.gpu_model, c.gpu_count, c.nodes, c.nics, c.nic_gbit_s) == ("H800", "H800 SXM", 8, 2, 8, 100.0)
    text = (
        "NCCL Allreduce results reports ~45GB/s with 4 GPUs per node  and ~90GB/s on 8 GPUs per node configured "
        "cluster when run on 4 nodes. THe message size used is 256MB. thought the NIC has capability of ~200GB/s "
        "of theoretical bandwidth.\n"
    )
    got = read_input("issue.txt", text).parts[0].prose[0]
    assert got.nics is None and got.nodes == 4 and got.size_bytes == 256 << 20
    assert [(f.gpus, f.gbps, f.role) for f in got.figures] == [
        (4, 45.0, "measured"), (8, 90.0, "measured"), (None, 200.0, "expected")
    ]  # fmt: skip


def test_a_long_input_is_read_up_to_its_first_sentences_and_says_so() -> None:
    """A program's chatter that reads like sentences (e-04's line, repeated) is bounded work: the first 400."""
    line = (DIAGNOSE / "holdout4" / "e-04" / "evidence-1.txt").read_text().strip()
    got = read_input("long.txt", "\n".join([line] * 1000) + "\n")
    assert kinds(got) == ["prose"] and got.pieces[0].cut == "the sentences read up to line 400 (the first 400)"
    assert len(got.parts[0].prose[0].figures) == 400 * 2
