"""nccl-tests' conventions, checked against nccl-tests' own output on nvidia-h200-x2: every row's
size, count, algbw and busbw come out of our plan exactly as nccl-tests printed them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from collectives_support import NCCL_TESTS

from topodoctor.core.errors import InputError
from topodoctor.core.sizes import parse_size, parse_sizes
from topodoctor.core.text import human_size
from topodoctor.model.collective_ops import OPS, SPECS, Plan, bandwidth_gbps, parse_ops, shape
from topodoctor.model.collectives import load_result

RUNS = sorted(NCCL_TESTS.glob("*.json"))


def test_every_op_has_a_reference_run() -> None:
    assert {load_result(p).rows[0].op for p in RUNS} == set(OPS)


@pytest.mark.parametrize("path", RUNS, ids=lambda p: p.stem)
def test_sizes_counts_and_bandwidths_match_nccl_tests(path: Path) -> None:
    res = load_result(path)
    doc = json.loads(path.read_text())
    requested = [8 * 4**k for k in range(14)]  # -b 8 -e 1G -f 4
    assert doc["config"]["step_factor"] == 4
    rows = {r.size_bytes: r for r in res.rows}
    n = res.world_size
    assert n == 2
    for req in requested:
        sh = shape(res.rows[0].op, req, n)
        if sh.count == 0:
            continue
        row = rows[sh.size_bytes]  # nccl-tests prints max(send, recv) bytes
        assert row.count == sh.count
        for t in (row.out_of_place, row.in_place):
            assert t is not None
            alg, bus = bandwidth_gbps(row.op, row.count, t.time_us / 1e6, n)
            # nccl-tests prints %lf (6 decimals) of values computed from the unrounded time
            assert alg == pytest.approx(t.algbw_gbps, rel=1e-4, abs=2e-6)
            assert bus == pytest.approx(t.busbw_gbps, rel=1e-4, abs=2e-6)


def test_bus_factors() -> None:
    assert SPECS["all_reduce"].bus_factor(4) == 1.5
    assert SPECS["all_gather"].bus_factor(4) == SPECS["reduce_scatter"].bus_factor(4) == 0.75
    assert SPECS["all_to_all"].bus_factor(8) == 0.875
    assert SPECS["broadcast"].bus_factor(8) == SPECS["reduce"].bus_factor(8) == SPECS["sendrecv"].bus_factor(8) == 1


def test_gathering_ops_round_chunks_to_16_bytes() -> None:
    sh = shape("all_gather", 1024, 3)  # 256 floats / 3 = 85 -> 84 (a multiple of 4 floats)
    assert (sh.count, sh.send_elems, sh.recv_elems, sh.size_bytes) == (84, 84, 252, 1008)
    sh = shape("reduce_scatter", 1024, 3)
    assert (sh.send_elems, sh.recv_elems) == (252, 84)
    assert shape("all_to_all", 8, 2).count == 0  # nothing to send: no row


def test_size_parsing() -> None:
    assert parse_size("8") == 8 and parse_size("64K") == 65536 and parse_size("1G") == 1 << 30
    assert parse_size("2MiB") == 2 << 20
    assert parse_sizes("8:64", 2) == (8, 16, 32, 64)
    assert parse_sizes("64M,1G,8:32", 4) == (8, 32, 64 << 20, 1 << 30)
    assert len(Plan().sizes) == 28 and Plan().sizes[-1] == 1 << 30
    for bad in ("", "1X", "-4", "0", "64:8"):
        with pytest.raises(InputError):
            parse_sizes(bad)
    assert human_size(1 << 30) == "1G" and human_size(8) == "8B"


def test_op_names() -> None:
    assert parse_ops(None) == OPS
    assert parse_ops(["alltoall,all-reduce", "sendrecv_perf"]) == ("all_to_all", "all_reduce", "sendrecv")
    with pytest.raises(InputError, match="unknown op"):
        parse_ops(["allreduce2"])


def test_nccl_tests_json_reader_refuses_foreign_files(tmp_path: Path) -> None:
    doc = json.loads(RUNS[0].read_text())
    doc["args"] = ["/x/hypercube_perf"]
    p = tmp_path / "x.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="cannot tell the op"):
        load_result(p)
    p.write_text('{"kind": "bandwidth", "schema_version": 1}')
    with pytest.raises(InputError, match="not a topodoctor collectives"):
        load_result(p)


def test_a_row_averages_time_and_sums_wrong_over_ranks() -> None:
    from topodoctor.model.collective_ops import row_of

    nan = float("nan")
    row = row_of("all_reduce", 1 << 30, 4, 0, [[nan, 3000.0, nan, 0.0], [nan, 3100.0, nan, 2.0]] * 2)
    assert row["out_of_place"] is None and row["root"] == -1
    col = row["in_place"]
    assert col["time_us"] == 3050.0 and col["wrong"] == 4 and col["rank_wrong"] == [0, 2, 0, 2]
    assert col["busbw_gbps"] == pytest.approx((1 << 30) / 3050e-6 / 1e9 * 1.5)
    unchecked = row_of("broadcast", 1024, 2, 1, [[nan, 5.0, nan, nan], [nan, 5.0, nan, nan]])
    assert unchecked["in_place"]["wrong"] is None and unchecked["root"] == 1
