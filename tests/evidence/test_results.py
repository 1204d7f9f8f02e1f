"""nccl-tests' text as the result `collectives --from` judges."""

from __future__ import annotations

import pytest
from evidence_support import EVIDENCE, ROOT

from topodoctor.core.errors import InputError
from topodoctor.evidence.inputs import join, read_input
from topodoctor.evidence.results import collectives_result


def test_a_two_gpu_broadcast_with_nccls_banner_among_the_tools_lines() -> None:
    path = ROOT / "fixtures" / "nccl-logs" / "real" / "nccl-tests-183-healthy-two-gpus.log"
    res = collectives_result(join([read_input(path.name, path.read_text())]), str(path))
    assert (res.source, res.world_size, res.nccl_version, res.host) == ("nccl-tests", 2, "2.19.4", "dx-ai-node66")
    assert {r.op for r in res.rows} == {"broadcast"} and res.rows[0].root == 0
    assert res.settings["program"] == "broadcast_perf"


def test_five_runs_of_one_paste_are_one_result() -> None:
    ev = join([read_input("nccl.txt", (EVIDENCE / "h200-x4" / "nccl.txt").read_text())])
    res = collectives_result(ev, "nccl.txt")
    assert {r.op for r in res.rows} == {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv"}
    assert res.world_size == 4 and res.nccl is None  # no NCCL INFO lines: no account


def test_a_paste_without_a_table_is_an_input_error_that_points_to_diagnose() -> None:
    ev = join([read_input("topo.txt", (EVIDENCE / "topo-h100-nv6-nics.txt").read_text())])
    with pytest.raises(InputError, match=r"no nccl-tests table .*topo-matrix.*topodoctor diagnose"):
        collectives_result(ev, "topo.txt")


def test_text_of_no_kind_is_neither_json_nor_nccl_tests_output() -> None:
    ev = join([read_input("notes.txt", "the job was slow\n")])
    with pytest.raises(InputError, match=r"^notes\.txt is neither JSON nor nccl-tests' output$"):
        collectives_result(ev, "notes.txt")
