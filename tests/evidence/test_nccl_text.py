"""NCCL's own lines (through nccl-log's reader) and NCCL Inspector's records."""

from __future__ import annotations

import pytest
from evidence_support import EVIDENCE, ROOT, only, read

from topodoctor.evidence.inputs import read_input


def test_nccl_27_log_settings_and_version_though_no_connection_line() -> None:
    got = read(EVIDENCE / "nccl-log-2.7-socket-channels.txt")
    piece = got.pieces[0]
    assert piece.kind == "nccl-log" and piece.version == "2.7.8+cuda10.0"
    assert {s.name: s.value for s in got.parts[0].settings}["NCCL_MAX_NCHANNELS"] == "4"
    assert all(s.how == "NCCL INFO" for s in got.parts[0].settings)


def test_a_real_rank_log_gets_nccls_account() -> None:
    logs = sorted((ROOT / "fixtures" / "nccl-logs" / "two-nodes").rglob("*"))
    path = next(p for p in logs if p.is_file() and "Channel" in p.read_text(errors="replace"))
    got = read_input(path.name, path.read_text(errors="replace"))
    k = only(got, "nccl-log")
    account = got.parts[k].nccl
    assert account is not None and account.connections and account.version


def test_inspector_records_one_run_per_communicator_and_op() -> None:
    got = read(EVIDENCE / "nccl-inspector-readme-records.jsonl")
    assert [p.kind for p in got.pieces] == ["nccl-inspector"]
    runs = got.parts[0].collectives
    assert [(r.op, r.nranks, r.nodes) for r in runs] == [("all_reduce", 8, 1), ("reduce_scatter", 8, 1)]
    row = runs[0].rows[0]
    assert row.size_bytes == 17179869184 and row.out_of_place is not None
    assert row.out_of_place.busbw_gbps == pytest.approx(485.119099) and row.count == 0 and row.dtype == ""


def test_inspector_records_cut_in_the_middle_of_one() -> None:
    text = (EVIDENCE / "nccl-inspector-readme-records.jsonl").read_text()
    got = read_input("cut.jsonl", text[: len(text) - 40])
    assert len(got.parts[0].collectives) == 1 and "breaks at line 2" in got.pieces[0].cut


def test_a_frameworks_nccl_error_without_info_lines_is_an_nccl_log() -> None:
    path = ROOT / "fixtures" / "nccl-logs" / "real" / "dekr-18-system-error-docker-ipc.log"
    got = read_input(path.name, path.read_text())
    assert [p.kind for p in got.pieces] == ["nccl-log"] and got.pieces[0].version.startswith("2.7.8")
