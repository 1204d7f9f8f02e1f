"""A figure stated in the reporter's words judged against the one expectation, on real threads
(fixtures/diagnose/holdout4 and fixtures/diagnose/prose: each README names its thread): normal with the
expected figure and why the figure compared with differs, below it with the candidates and what to post,
or not judged; never an error on the words alone, and never beside a tool's own figure."""

from __future__ import annotations

from pathlib import Path

from evidence_support import ROOT
from tests_support_evidence import judge

from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.findings import Finding

DIAGNOSE = ROOT / "fixtures" / "diagnose"
WORDS = "the reporter's words"


def findings(case: Path) -> tuple[Finding, ...]:
    return judge(join([read_input(p.name, p.read_text()) for p in sorted(case.glob("evidence-*.txt"))]))


def one(case: Path, code: str) -> Finding:
    got = [f for f in findings(case) if f.code == code and WORDS in f.message + str(f.evidence)]
    assert len(got) == 1, [(f.code, f.severity, f.message[:120]) for f in findings(case)]
    return got[0]


def test_nvls_all_reduce_on_8_h100_is_normal_and_900_is_both_directions() -> None:
    """nccl#1442: 480 GB/s against "the NVLink bw is 900 GB/s"."""
    f = one(DIAGNOSE / "holdout4" / "e-04", "TD021")
    assert f.severity == "info" and "normal for this hardware" in f.message
    assert "NVLink SHARP" in f.message and "both directions together" in f.message
    assert f.evidence["expected_gbps"] == 353.7 and 470 < float(str(f.evidence["nvls_gbps"])) < 480


def test_algbw_is_converted_to_busbw_and_the_count_assumed_is_said() -> None:
    """nccl-tests#212: "the algbw is about 250GB/S", no count of GPUs stated."""
    f = one(DIAGNOSE / "holdout4" / "e-05", "TD021")
    assert "algbw 250GB/S is busbw 438 GB/s on 8 GPUs" in f.message and "taken as 8" in f.message
    assert "line rate one way" in f.message  # the 450 GB/s NVIDIA quotes


def test_busbw_above_the_nic_on_two_nodes_is_the_tree() -> None:
    """nccl-tests#196 (a bound: "exceeds 100Gbps") and nccl-tests#22 (125 Gbps on 100 Gbps EFA, nodes unsaid)."""
    for case in ("e-03", "e-06"):
        f = one(DIAGNOSE / "holdout4" / case, "TD021")
        assert "NCCL's tree gives on two nodes" in f.message and "NCCL_ALGO=Ring" in f.message, case


def test_a_shortfall_across_nodes_asks_for_the_outputs_that_decide() -> None:
    """nccl#412: 15.3 GB/s on 12 nodes of one HDR 200G NIC; the maintainer's answer hangs on the NIC's path
    and GPUDirect RDMA, which the sentences do not show."""
    f = one(DIAGNOSE / "holdout4" / "e-07", "TD022")
    assert f.severity == "warning" and f.cause is not None and not f.cause.found
    assert "0.64 of the 24 GB/s" in f.message and "`nvidia-smi topo -m`" in f.message
    assert "other traffic shares the network" in f.message


def test_a_shortfall_with_its_figure_in_gbps() -> None:
    """nccl#495: "8 *100 Gbps network nic ... Bandwidth can reach 600Gbps": a bit low, as the maintainers said."""
    f = one(DIAGNOSE / "prose" / "p-02", "TD022")
    assert f.severity == "warning" and "busbw 75.0 GB/s is 0.76" in f.message and "NCCL_DEBUG=INFO" in f.message


def test_two_port_nics_cannot_tell() -> None:
    """nccl-tests#175: 86 GB/s on "IB 200Gb * 4 (dual port)": normal at one port a NIC, short at two."""
    f = one(DIAGNOSE / "prose" / "p-05", "TD022")
    assert f.severity == "info" and "cannot tell" in f.message and "NCCL_TOPO_DUMP_FILE" in f.message


def test_a_figure_called_high_and_found_short_is_a_misreading_not_a_fault() -> None:
    """nccl-tests#153: "the busbw can reach as high as 161Gbps" on two nodes of 8 x 100 Gbps NICs."""
    f = one(DIAGNOSE / "prose" / "p-07", "TD022")
    assert f.severity == "info" and "0.20 of" in f.message and "calls it high: cannot tell" in f.message


def test_nothing_judged_without_the_nics_or_without_a_figure() -> None:
    """nccl-tests#160 (the hardware as screenshots) and nccl#946 (A100 x 2 nodes, no figure)."""
    assert "the NICs are posted as images" in one(DIAGNOSE / "prose" / "p-03", "TD022").message
    assert "no figure" in one(DIAGNOSE / "prose" / "p-06", "TD022").message


def test_the_words_alone_never_give_an_error_or_a_warning_on_a_normal_case() -> None:
    for case in sorted((DIAGNOSE / "prose").glob("p-*")) + sorted((DIAGNOSE / "holdout4").glob("e-0[3-7]")):
        got = findings(case)
        assert not any(f.severity in ("error", "critical") for f in got), case.name
        if case.name not in ("p-02", "e-07"):
            assert not any(f.severity == "warning" for f in got), case.name


def test_a_tools_figure_is_judged_and_the_sentences_are_not() -> None:
    """nccl#450: the reporter's "bus-bw is between 4~6GB/s" beside nccl-tests' own table."""
    got = findings(DIAGNOSE / "holdout4" / "e-02")
    assert not any(WORDS in f.message for f in got)
    assert any(f.code == "TD022" and "1.4 GB/s" in f.message for f in got)  # the table's figure, as before
