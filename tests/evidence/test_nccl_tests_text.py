"""nccl-tests' text output read into the rows ``collectives --from`` judges: the same rows as its -J
JSON on the same run, several versions' layouts, and pastes cut or mangled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evidence_support import EVIDENCE, ROOT, kinds, only, read

from topodoctor.evidence.inputs import read_input
from topodoctor.model.collectives import from_nccl_tests

PAIRS = sorted((ROOT / "fixtures" / "nccl-tests" / "h200-x2").glob("*.txt"))


@pytest.mark.parametrize("text", PAIRS, ids=lambda p: p.stem)
def test_the_text_table_gives_the_rows_of_the_json_of_the_same_run(text: Path) -> None:
    got = read(text)
    run = got.parts[only(got, "nccl-tests")].collectives[0]
    want = from_nccl_tests(json.loads(text.with_suffix(".json").read_text()))
    assert len(run.rows) == len(want.rows) > 10
    for got_row, want_row in zip(run.rows, want.rows):
        key = ("op", "size_bytes", "count", "dtype", "redop", "root")
        assert [getattr(got_row, k) for k in key] == [getattr(want_row, k) for k in key]
        for g, w in ((got_row.out_of_place, want_row.out_of_place), (got_row.in_place, want_row.in_place)):
            assert g is not None and w is not None and g.wrong == w.wrong
            # the text prints what the JSON holds, rounded to at most 2 decimals
            for a, b in ((g.time_us, w.time_us), (g.algbw_gbps, w.algbw_gbps), (g.busbw_gbps, w.busbw_gbps)):
                assert a == pytest.approx(b, rel=5e-3, abs=0.006)
    assert run.nranks == want.world_size == 2
    # the JSON keeps only the first rank's line of a -g 2 run; the text has both
    assert run.ranks[0].bus_id == want.ranks[0].bus_id == "0000:00:06.0"
    assert [r.bus_id for r in run.ranks] == ["0000:00:06.0", "0000:00:07.0"]


def test_h200_x4_sweep_of_five_ops_is_five_runs_with_their_averages() -> None:
    got = read(EVIDENCE / "h200-x4" / "nccl.txt")
    runs = [p.collectives[0] for p in got.parts]
    assert [r.op for r in runs] == ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "sendrecv"]
    assert runs[0].avg_busbw_gbps == pytest.approx(111.237)
    assert runs[0].out_of_bounds == 0 and runs[0].nccl_version == "2.28.9" and runs[0].test_version == "2.19.6"
    assert all(p.cut == "" for p in got.pieces)
    assert got.parts[0].gpus[0].bus_id == "00000000:00:06.0"


def test_old_layout_with_pids_and_no_groups_two_hosts_and_ncclinfo_lines() -> None:
    got = read(EVIDENCE / "nccl-tests-2.4-v100-two-nodes.txt")
    assert kinds(got) == ["command-line", "nccl-tests", "nccl-log"]
    run = got.parts[1].collectives[0]
    assert run.op == "all_reduce"  # from the mpirun command line above the output
    assert (run.nranks, run.nodes, run.threads, run.gpus_per_thread) == (2, 2, 1, 1)
    assert {r.host for r in run.ranks} == {"ip-172-31-0-112", "ip-172-31-13-129"}
    assert run.ranks[0].bus_id is None  # "[0x00]": a bus number, not a bus id
    assert "no table" in got.pieces[1].cut
    assert got.pieces[2].version == "2.4.8+cuda10.1"


def test_a_paste_that_starts_inside_the_old_error_column_table() -> None:
    got = read(EVIDENCE / "nccl-tests-old-error-column-cut.txt")
    run = got.parts[0].collectives[0]
    assert len(run.rows) == 13 and run.avg_busbw_gbps == pytest.approx(6.6)
    last = run.rows[-1]
    assert (last.size_bytes, last.count, last.out_of_place and last.out_of_place.busbw_gbps) == (
        134217728,
        16777216,
        20.34,
    )
    assert last.out_of_place is not None and last.out_of_place.wrong is None  # "0e+00" is an error, not a count
    assert "starts inside the table" in got.pieces[0].cut and "told from the columns" in got.pieces[0].cut


def test_two_processes_without_mpi_each_a_world_of_one() -> None:
    got = read(EVIDENCE / "nccl-tests-two-worlds-of-one.txt")
    assert kinds(got) == ["command-line", "nccl-tests", "nccl-tests"]
    second = got.parts[2].collectives[0]
    assert [r.rank for r in second.ranks] == [0, 0] and second.nranks == 1 and second.nodes == 2


def test_markdown_ate_the_hashes_the_header_is_still_read() -> None:
    got = read(EVIDENCE / "nccl-tests-hashes-lost-a10g.txt")
    run = got.parts[only(got, "nccl-tests")].collectives[0]
    assert run.ranks[0].device_name == "NVIDIA A10G" and run.threads == 1
    assert got.pieces[1].cut == "the table ends inside the row of 8 B"  # its units line read past, as the header
    assert got.parts[0].settings[0].name == "FI_PROVIDER"


def test_a_table_cut_inside_its_first_row_says_so() -> None:
    got = read(EVIDENCE / "nccl-tests-rtx4090-tree-cut.txt")
    assert got.pieces[1].cut == "the table ends inside the row of 8 B"
    run = got.parts[1].collectives[0]
    assert run.nranks == 8 and run.ranks[7].device_name == "NVIDIA GeForce RTX 4090"
    assert got.parts[0].settings[0].name == "NCCL_ALGO" and got.parts[0].settings[0].value == "TREE"


def test_multinode_ranks_cut_before_the_table() -> None:
    got = read(EVIDENCE / "nccl-tests-h100-two-nodes-cut.txt")
    run = got.parts[0].collectives[0]
    assert run.nodes == 2 and len(run.ranks) == 12 and run.ranks[8].host == "h100-4"
    assert run.ranks[4].bus_id == "0003:00:01.0"


def test_a_row_wrapped_onto_two_lines_is_joined() -> None:
    text = (EVIDENCE.parent / "nccl-tests" / "h200-x2" / "all_reduce.txt").read_text().splitlines()
    k = next(i for i, line in enumerate(text) if line.strip().startswith("536870912"))
    head, tail = text[k][:70], text[k][70:]
    wrapped = "\n".join([*text[:k], head, tail, *text[k + 1 :]])
    whole = read_input("a", "\n".join(text)).parts[0].collectives[0]
    got = read_input("b", wrapped)
    assert got.parts[0].collectives[0].rows == whole.rows
    assert got.pieces[0].cut == ""


def test_an_interleaved_ncclinfo_line_does_not_end_the_table() -> None:
    text = (EVIDENCE.parent / "nccl-tests" / "h200-x2" / "all_reduce.txt").read_text().splitlines()
    k = next(i for i, line in enumerate(text) if line.strip().startswith("2048 "))
    noisy = [*text[:k], "vm:2553:2553 [0] NCCL INFO Connected all rings", *text[k:]]
    got = read_input("x", "\n".join(noisy))
    assert kinds(got) == ["nccl-tests", "nccl-log"]
    assert len(got.parts[0].collectives[0].rows) == 14


def test_a_header_and_a_rank_line_wrapped_by_a_narrow_terminal() -> None:
    text = (ROOT / "fixtures" / "nccl-tests" / "h200-x2" / "all_reduce.txt").read_text()
    text = text.replace("agg iters: 1 validation", "agg\niters: 1 validation").replace(
        "[0000:00:07] NVIDIA H200", "[0000:00:07] NVIDIA\nH200"
    )
    got = read_input("wrapped", text)
    assert kinds(got) == ["nccl-tests"]
    run = got.parts[0].collectives[0]
    assert len(run.rows) == 14 and run.ranks[1].device_name == "NVIDIA H200" and run.threads == 1


def test_a_binary_of_an_op_topodoctor_does_not_judge_is_read_without_rows() -> None:
    text = (ROOT / "fixtures" / "nccl-tests" / "h200-x2" / "broadcast.txt").read_text()
    got = read_input("gather", text.replace("broadcast_perf", "gather_perf"))
    run = got.parts[0].collectives[0]
    assert run.op == "gather" and run.rows == () and run.nranks == 2
    assert got.pieces[0].cut == "gather_perf's rows are not kept (an op topodoctor does not judge)"


def test_the_avg_bus_bandwidth_line_alone_is_a_run_without_a_table() -> None:
    """sendrecv_perf's average quoted on its own to compare two releases (nccl#1272)."""
    from topodoctor.evidence.inputs import read_input

    got = read_input("x", "# Avg bus bandwidth    : 24.2382 \n")
    (run,) = got.parts[0].collectives
    assert (got.pieces[0].kind, run.avg_busbw_gbps, run.rows, run.op) == ("nccl-tests", 24.2382, (), "")
    assert got.pieces[0].cut == "the Avg bus bandwidth line alone (no table)"


def test_two_closings_in_a_row_are_two_runs() -> None:
    """Each process of an nccl-tests build without MPI prints its own closing lines (nccl-tests#27): the
    second Out of bounds / Avg bus bandwidth after an average is the next run's, not a correction."""
    from topodoctor.evidence.inputs import read_input

    text = "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 3.94145 \n#\n"
    text += "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 3.94156 \n"
    got = read_input("x", text)
    runs = [r for p in got.parts for r in p.collectives]
    assert [r.avg_busbw_gbps for r in runs] == [3.94145, 3.94156]
