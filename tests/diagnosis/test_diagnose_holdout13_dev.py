"""The thirteenth to fifteenth blind sets (fixtures/diagnose/holdout13, holdout14, holdout15), scored once and now
development sets: a copy figure the reporter's sentences speak of, with no output of the run, asks for that copy test's
own output; a question about speed in words alone asks for a measurement; a container started without /dev/infiniband
is no network cause on a host of one node; P2P and SHM both off send a node's traffic through the network."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judged_with

from topodoctor.model.findings import Finding

SET = FIXTURES / "diagnose" / "holdout13"


def _case(name: str, *replace: tuple[str, str]) -> list[Finding]:
    return judged_with(SET / name, *replace)


def test_a_copy_test_the_sentences_name_is_the_output_asked_for() -> None:
    found = _case("d13-02")  # "p2pBandwidthLatencyTest memory bandwidth low on H200", nvidia-smi's head only
    ask = [f for f in found if f.code == "TD022"]
    assert len(ask) == 1 and "p2pBandwidthLatencyTest and nvbandwidth's whole output" in ask[0].message
    assert not [f for f in found if f.severity in ("warning", "error")]
    plain = _case("d13-02", ("p2pBandwidthLatencyTest", "a test"), ("nvbandwidth", "another tool"))
    assert "nccl-tests' output" in next(f for f in plain if f.code == "TD022").message


def test_a_container_without_infiniband_on_a_host_of_one_node_is_no_network_cause() -> None:
    found = judged_with(FIXTURES / "diagnose" / "holdout14" / "d14-04")  # 8 x 1080 Ti, topo -m, a docker image named
    assert "TD025" not in [f.code for f in found]


def test_a_question_about_speed_in_words_alone_asks_for_a_measurement() -> None:
    for case in ("d15-06", "d15-10"):  # NVSHMEM's 396 of 26 x 18 NVLink; TGI's latency per token on A100 and H100
        found = judged_with(FIXTURES / "diagnose" / "holdout15" / case)
        asks = [f for f in found if f.code == "TD022"]
        assert asks and "nccl-tests' output" in asks[0].message
        assert not [f for f in found if f.severity in ("warning", "error")]


def test_p2p_off_with_shm_off_sends_a_nodes_traffic_through_the_network() -> None:
    found = judged_with(SET / "d13-04")  # NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 on the command line
    td023 = next(f for f in found if f.code == "TD023")
    assert "through the network" in td023.message and "NCCL_SHM_DISABLE" in td023.fix


def test_a_table_whose_in_place_half_was_cut_from_every_row_is_read() -> None:
    found = judged_with(FIXTURES / "diagnose" / "holdout16" / "d16-02")  # all_reduce rows ending at the first N/A
    judged = [f for f in found if f.code == "TD022" and "all_reduce busbw 4.9 GB/s" in f.message]
    assert judged, [f.message for f in found]


def test_four_sxm_gpus_of_an_hgx_board_have_no_fabric_manager_to_suspect() -> None:
    found = judged_with(FIXTURES / "diagnose" / "holdout17" / "d17-04")  # 4x A100 40GB SXM, TensorRT-LLM PP latency
    assert "TD986" not in [f.code for f in found]
