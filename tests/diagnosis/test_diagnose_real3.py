"""The graph search's development set (fixtures/diagnose/real3/, its README names each thread): every case
holds its verdict by the scorer's own rules (tests/diagnosis/score_corpus.py), read by the real readers; and
the behaviour each rests on: a search that fell back names the release whose search fails where the log's
version is in its range (and only there), a ring short of the hardware or on a worse path is a warning with
the candidates, and the same line on a healthy host is information."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests_support_evidence import SCORER
from tests_support_evidence import judge as judge_hardware

from topodoctor.diagnosis.evidence import judge
from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.evidence import Evidence
from topodoctor.model.findings import Finding, finding_json
from topodoctor.nccl.account import account
from topodoctor.nccl.choices import parse_choices

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "fixtures" / "diagnose" / "real3"
scorer = SCORER
CASES = {c.name: c for c in scorer.read_cases(SET / "README.md")}


def _case(name: str) -> Evidence:
    files = sorted((SET / name).glob("evidence-*.txt"))
    return join([read_input(p.name, p.read_text()) for p in files])


def _as_scored(f: Finding) -> dict[str, object]:
    """A finding as `diagnose -f json` prints it for the scorer (its cause under `diagnosis`)."""
    doc = finding_json(f)
    doc["diagnosis"] = doc.pop("cause", None)
    return doc


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_holds_its_verdict(name: str) -> None:
    verdict, _ = scorer.judge(CASES[name], [_as_scored(f) for f in judge(_case(name))])
    assert verdict in ("named-right", "normal-right"), (name, verdict)


def test_the_tree_search_fallback_without_a_version_puts_the_regression_first() -> None:
    """nccl#1946: `NCCL INFO Could not find a path for pattern 1, falling back to simple order` on A800 hosts,
    the release said only in words ("nccl2.27"): the 2.25.1 - 2.28.9 regression leads, the version asked for."""
    (f,) = [x for x in judge_hardware(_case("tree-search-a800-two-hosts")) if x.code == "TD985"]
    assert f.severity == "warning"
    assert "one channel for all of them" in f.message
    first = f.evidence["candidates"][0]  # type: ignore[index]
    assert first.startswith("if the job runs NCCL 2.25.1 - 2.28.9") and "2.29.2" in first
    assert "the NCCL version" in f.evidence["post"][0]  # type: ignore[index]


_H200 = "\n".join(f"GPU {i}: NVIDIA H200 (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)" for i in range(8))
_A100 = "\n".join(f"GPU {i}: NVIDIA A100-SXM4-80GB (UUID: GPU-{i:08d}-0000-0000-0000-000000000000)" for i in range(4))
_COMM = "n1:11:11 [0] NCCL INFO comm 0x1 rank 0 nRanks {r} nNodes {n} localRanks {lr} localRank 0 MNNVL 0\n"


def _log(version: str, lines: str, ranks: int = 8, nodes: int = 1) -> str:
    head = f"n1:11:11 [0] NCCL INFO NCCL version {version}+cuda12.4\n"
    return head + _COMM.format(r=ranks, n=nodes, lr=ranks // nodes) + lines


def _judged(*texts: str) -> list[Finding]:
    return [f for f in judge_hardware(join([read_input(f"e{k}.txt", t) for k, t in enumerate(texts)]))]


_TREE_FAILED = "n1:11:20 [0] NCCL INFO Could not find a path for pattern 1, falling back to simple order\n"


def test_the_tree_search_fallback_in_the_regression_s_range_is_named() -> None:
    found = _judged(_A100, _log("2.27.3", _TREE_FAILED, ranks=8, nodes=2))
    (f,) = [x for x in found if x.code == "TD985"]
    assert "likely: NCCL 2.27.3's known regression" in f.message and "2.29.2" in f.message


def test_the_tree_search_fallback_past_the_fix_is_no_regression() -> None:
    (f,) = [x for x in _judged(_A100, _log("2.29.2", _TREE_FAILED, ranks=8, nodes=2)) if x.code == "TD985"]
    assert "regression" not in f.message and "cannot tell among" in f.message


def test_the_tree_search_fallback_on_hopper_is_not_that_regression() -> None:
    (f,) = [x for x in _judged(_H200, _log("2.27.3", _TREE_FAILED, ranks=16, nodes=2)) if x.code == "TD985"]
    assert "regression" not in f.message


def _ring(n: int, bw: str, kind: str) -> str:
    return (
        f"n1:11:20 [0] NCCL INFO Pattern 4, crossNic 0, nChannels {n}, bw {bw}/{bw}, type {kind}/PIX, sameChannels 1\n"
    )


def test_a_healthy_ring_on_eight_h200_is_information() -> None:
    """The search NCCL 2.28.9 printed on the 8 x H200 host (docs/benchmarks.md): 12 channels x 30 GB/s."""
    (f,) = [x for x in _judged(_H200, _log("2.28.9", _ring(12, "30.000000", "NVL"))) if x.code == "TD984"]
    assert f.severity == "info" and "what this hardware allows" in f.message


def test_a_ring_through_the_host_bridge_on_nvswitch_gpus_is_a_warning_naming_the_setting_shown() -> None:
    lines = "n1:11:11 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC\n" + _ring(2, "12.000000", "PHB")
    (f,) = [x for x in _judged(_H200, _log("2.28.9", lines)) if x.code == "TD984"]
    assert f.severity == "warning"
    assert "24 GB/s over PHB" in f.message and "about 360 GB/s over NVL" in f.message
    assert "likely: NCCL_P2P_LEVEL=LOC" in f.message


def test_a_short_ring_beside_a_normal_figure_is_only_information() -> None:
    table = "\n".join(
        ["#  Rank  0 Group  0 Pid 1 on n1 device  0 [0x18] NVIDIA H200"]
        + [f"#  Rank  {i} Group  0 Pid {i + 1} on n1 device  {i} [0x{i + 24:02x}] NVIDIA H200" for i in range(1, 8)]
        + ["#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
           "   busbw #wrong",
           "  1073741824     268435456     float     sum      -1   5520.0  194.52  340.41      0   5519.0  194.55"
           "  340.47      0"]
    )  # fmt: skip
    found = _judged(_H200, table, _log("2.28.9", _ring(6, "40.000000", "NVL")))
    (f,) = [x for x in found if x.code == "TD984"]
    assert f.severity == "info" and "normal all the same" in f.message


def test_nccl_s_own_paths_give_the_expectation_where_no_gpu_model_is_shown() -> None:
    """nccl#1358: two GPUs across the sockets; NCCL's path line says SYS at 10 GB/s, and so does its ring."""
    (f,) = [x for x in judge_hardware(_case("numa-pair-sys-ring")) if x.code == "TD984"]
    assert f.severity == "info" and "over SYS" in f.message and "NCCL's own paths" in f.message


def test_the_search_lines_read_as_data() -> None:
    text = (
        "h:1:2 [0] graph/search.cc:765 NCCL WARN Could not find a path for pattern 4, falling back to simple order\n"
        "h:1:2 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 1, bw 0.100000/0.100000, type SYS/SYS, sameChannels 1\n"
        "g:1:2 [0] NCCL INFO Pattern 4, crossNic 0, nChannels 4, speed 1.200000/1.2, type SYS/SYS, sameChannels 0\n"
        "h:1:2 [0] NCCL INFO GPU/0-2a000 :GPU/0-2a000 (0/5000.0/LOC) GPU/0-ab000 (3/10.0/SYS) CPU/0-0 (1/24.0/PHB)\n"
    )
    c = parse_choices(text.splitlines())
    assert c.failed == (4,)
    assert [(g.number, g.channels, g.bw_intra_gbps, g.fallback) for g in c.graphs] == [
        (4, 1, 0.1, True),
        (4, 4, 1.2, False),
    ]
    assert c.paths == (("SYS", 10.0),)
    acc = account([text])
    assert acc is not None and acc.search_failed == (4,) and len(acc.searches) == 2
    assert "(no path found: simple order)" in acc.graphs[0]


def test_the_channel_line_of_releases_before_2_17_gives_the_channels() -> None:
    text = "node:1:2 [0] NCCL INFO NCCL version 2.7.5+cuda10.2\n"
    text += "node:1:2 [0] NCCL INFO 2 coll channels, 2 p2p channels, 1 p2p channels per peer\n"
    acc = account([text])
    assert acc is not None and acc.channels == 2 and acc.p2p_channels == 2 and acc.nvls_channels is None


def test_across_nodes_the_ring_s_channels_are_not_held_to_the_nvlinks() -> None:
    """nccl#1189's search (2 nodes of 2 H20, 4 channels x 24 GB/s over NVL): the NICs set the channels."""
    found = _judged(_H200, _log("2.21.5", _ring(4, "24.000000", "NVL"), ranks=4, nodes=2))
    assert [x.severity for x in found if x.code == "TD984"] == ["info"]
    worse = _judged(_H200, _log("2.21.5", _ring(4, "24.000000", "SYS"), ranks=4, nodes=2))
    assert [x.severity for x in worse if x.code == "TD984"] == ["warning"]
