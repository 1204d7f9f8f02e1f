"""`fleet --history` on generated histories from real results (fixtures/fleet/history.py): staged
drift, lemons, flapping, rising counters, a replaced GPU, a silent node; healthy nodes and the
near misses stay quiet; the store holds every result once and refuses what is not its own."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

from topodoctor.cli.commands import main

sys.path.insert(0, str(ROOT / "fixtures" / "fleet"))
import history as gen

AS_OF = "2026-11-30T12:00:00Z"


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("history")
    gen.build(d)
    return d


@pytest.fixture(scope="module")
def judged(staged: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], int]:
    db = tmp_path_factory.mktemp("db") / "fleet.db"
    code, out = _fleet([str(staged), "--history", str(db), "--as-of", AS_OF, "-f", "json"])
    return db, json.loads(out), code


def _fleet(argv: list[str]) -> tuple[int, str]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["fleet", *argv])
    return code, out.getvalue()


def _codes(doc: dict[str, Any]) -> dict[str, set[str]]:
    got: dict[str, set[str]] = {node: set() for node in gen.CASES}
    for f in doc["history"]["findings"]:
        got[f["node"]].add(f["code"])
    return got


def test_every_staged_case_says_what_it_must(judged: tuple[Path, dict[str, Any], int]) -> None:
    _, doc, code = judged
    assert code == 1  # lemons and drift drain
    codes = _codes(doc)
    state = {n["node"]: n for n in doc["nodes"]}
    outliers = {o["node"] for o in doc["outliers"]}
    for node, case in gen.CASES.items():
        if case.expect == "quiet":
            assert codes[node] == set(), (node, case.change, codes[node])
            assert state[node]["state"] == "healthy" and not state[node]["drain"], (node, state[node])
        elif case.expect == "outlier":
            assert codes[node] == set() and node in outliers and state[node]["state"] == "slow"
        else:
            assert set(case.expect.split()) <= codes[node], (node, case.change, codes[node])


def test_findings_carry_figures_and_dates(judged: tuple[Path, dict[str, Any], int]) -> None:
    _, doc, _ = judged
    by = {(f["node"], f["code"]): f for f in doc["history"]["findings"]}
    drift = by[("drift", "TD950")]
    ev = drift["evidence"]
    # Staged from day 20 (2026-11-21): the last 7 results are the drift itself, so the 7 before them
    # judge (days 14-20, five of them before the drift: their median is the healthy figure).
    assert ev["figure"] == "hbm ce GPU1" and 0.89 < ev["ratio"] < 0.91 and ev["since"].startswith("2026-11-21")
    assert ev["baseline_to"].startswith("2026-11-22") and 1485 < ev["baseline"] < 1500
    assert drift["subject"] == "GPU1" and drift["severity"] == "error"
    late = by[("drift-late", "TD950")]["evidence"]
    assert late["figure"] == "latency sm GPU0->host" and 1.29 < late["ratio"] < 1.31 and late["unit"] == "ns"
    lemon = by[("lemon", "TD951")]
    assert lemon["evidence"]["failed"] == 3 and lemon["evidence"]["failed_with"] == ["TD101 GPU1/nvlink5"]
    refail = by[("refail", "TD951")]["evidence"]
    assert refail["repaired_at"].startswith("2026-11-22") and refail["days"] == 5.0
    gpu = by[("gpu-b", "TD952")]
    assert gpu["evidence"]["nodes"] == ["gpu-a", "gpu-b"] and gpu["subject"].startswith("GPU-")
    flap = by[("flap-warning", "TD953")]
    assert flap["severity"] == "warning" and flap["evidence"]["clears"] == 2  # TD020 is a warning: no drain
    assert by[("flap", "TD953")]["severity"] == "error"
    counter = by[("counter", "TD954")]["evidence"]
    assert counter["counter"] == "pcie_replay" and counter["rise"] == 15 and len(counter["days"]) == 3
    assert by[("replaced", "TD955")]["severity"] == "info"
    assert by[("silent", "TD956")]["evidence"]["last_result"].startswith("2026-11-25")
    peers = {(p["node"], p["figure"]): p for p in doc["history"]["peers_since"]}
    assert peers[("slow-peer", "hbm ce GPU0")]["since"].startswith("2026-11-01")


def test_adding_the_same_results_again_changes_nothing(
    staged: Path, judged: tuple[Path, dict[str, Any], int], tmp_path: Path
) -> None:
    db, first, _ = judged
    code, out = _fleet([str(staged), "--history", str(db), "--as-of", AS_OF, "-f", "json"])
    again = json.loads(out)
    assert code == 1 and again["history"]["ingested"]["added"] == 0
    assert again["history"]["ingested"]["duplicates"] == first["history"]["ingested"]["added"] == 945
    # ... and the store alone says the same as the store with the files.
    code, out = _fleet(["--history", str(db), "--as-of", AS_OF, "-f", "json"])
    alone = json.loads(out)
    assert code == 1 and alone["history"]["findings"] == first["history"]["findings"]
    assert alone["nodes"] == first["nodes"] and alone["history"]["ingested"] == {}


def test_a_healthy_fleet_stays_quiet(tmp_path: Path) -> None:
    gen.build(tmp_path / "r", gen.healthy_fleet(12))
    code, out = _fleet([str(tmp_path / "r"), "--history", str(tmp_path / "f.db"), "--as-of", AS_OF, "-f", "json"])
    doc = json.loads(out)
    assert code == 0 and doc["history"]["findings"] == [] and doc["outliers"] == [] and doc["drain"] == []


def test_text_drain_prometheus_and_heat_strip(judged: tuple[Path, dict[str, Any], int], tmp_path: Path) -> None:
    db = judged[0]
    code, text = _fleet(["--history", str(db), "--as-of", AS_OF])
    assert code == 1 and "history: 945 results of 28 nodes" in text and "found: TD950 x" in text
    code, out = _fleet(["--history", str(db), "--as-of", AS_OF, "-f", "drain"])
    drained = [line.split(" ", 1)[0] for line in out.splitlines()]
    assert {"lemon", "drift", "flap", "gpu-b"} <= set(drained) and "flap-warning" not in drained
    code, prom = _fleet(["--history", str(db), "--as-of", AS_OF, "-f", "prometheus"])
    from prometheus_client.parser import text_string_to_metric_families

    fams = {f.name: f for f in text_string_to_metric_families(prom)}
    got = {(s.labels["Hostname"], s.labels["code"]) for s in fams["topodoctor_fleet_history_finding"].samples}
    assert ("lemon", "TD951") in got and ("counter", "TD954") in got
    ratio = [s for s in fams["topodoctor_fleet_drift_ratio"].samples if s.labels["Hostname"] == "drift"]
    assert ratio and 0.89 < ratio[0].value < 0.91
    svg = tmp_path / "heat.svg"
    code, _ = _fleet(["--history", str(db), "--as-of", AS_OF, "--heat-strip", str(svg), "--heat-figure", "hbm ce GPU1"])
    picture = svg.read_text()
    assert code == 1 and picture.startswith("<svg") and "<title>hbm ce GPU1 (GB/s)" in picture
    assert picture.index(">drift<") < picture.index(">ok01<")  # the node furthest off first


def test_as_of_judges_the_past(judged: tuple[Path, dict[str, Any], int]) -> None:
    """As of day 19 the staged drift has not happened and the lemon has not failed yet."""
    _code, out = _fleet(["--history", str(judged[0]), "--as-of", "2026-11-20T12:00:00Z", "-f", "json"])
    codes = _codes(json.loads(out))
    assert "TD950" not in codes["drift"] and "TD951" not in codes["lemon"]


# ---------------------------------------------------------------- a database that is not right


def _one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str], says: str) -> None:
    code = main(["fleet", *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and says in err and "Traceback" not in err, err


def test_a_corrupt_foreign_newer_or_missing_database_is_one_line(
    staged: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"not a database at all" * 100)
    _one_line_exit_2([str(staged / "day29"), "--history", str(garbage)], capsys, "is not a SQLite database")
    assert garbage.read_bytes() == b"not a database at all" * 100  # untouched

    good = tmp_path / "good.db"
    assert main(["fleet", str(staged / "day29"), "--history", str(good), "--as-of", AS_OF, "-f", "drain"]) == 1
    capsys.readouterr()
    damaged = tmp_path / "damaged.db"
    data = bytearray(good.read_bytes())
    data[100:4096] = b"\xff" * (4096 - 100)  # the header stays, the schema page is gone
    damaged.write_bytes(bytes(data))
    _one_line_exit_2(["--history", str(damaged)], capsys, "corrupt")

    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE accounts (id INTEGER)")
    _one_line_exit_2([str(staged / "day29"), "--history", str(foreign)], capsys, "another program")

    newer = tmp_path / "newer.db"
    newer.write_bytes(good.read_bytes())
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version = 99")
    _one_line_exit_2(["--history", str(newer)], capsys, "schema version 99")

    _one_line_exit_2(["--history", str(tmp_path / "absent.db")], capsys, "no history database")
    _one_line_exit_2(["--history", str(tmp_path)], capsys, "not a regular file")
    _one_line_exit_2([], capsys, "give RESULT")


def test_a_locked_database_is_one_line_and_loses_nothing(
    staged: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "fleet.db"
    assert main(["fleet", str(staged / "day28"), "--history", str(db), "--as-of", AS_OF, "-f", "drain"]) in (0, 1)
    capsys.readouterr()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another collector, mid-write
    try:
        from topodoctor.fleet.store import open_store
        from topodoctor.service import fleet as service

        # The command waits 10 s for the lock, then gives up; here 0.2 s.
        monkeypatch.setattr(service, "open_store", lambda path, create, timeout_s: open_store(path, create, 0.2))
        _one_line_exit_2([str(staged / "day29"), "--history", str(db)], capsys, "is locked by another process")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # Nothing was half-added: the next run adds day 29 whole.
    _code, out = _fleet([str(staged / "day29"), "--history", str(db), "--as-of", AS_OF, "-f", "json"])
    assert json.loads(out)["history"]["ingested"]["added"] == len(list((staged / "day29").iterdir()))


def test_unreadable_results_are_named_and_the_rest_added(staged: Path, tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for p in sorted((staged / "day29").iterdir())[:3]:
        (src / p.name).write_bytes(p.read_bytes())
    (src / "bad.check.json").write_text("{")
    code, out = _fleet([str(src), "--history", str(tmp_path / "f.db"), "--as-of", AS_OF, "-f", "json"])
    doc = json.loads(out)
    assert code == 3 and doc["history"]["ingested"] == {"added": 3, "duplicates": 0, "pruned": 0, "unreadable": 1}
    assert [Path(u["path"]).name for u in doc["unreadable"]] == ["bad.check.json"]


def test_a_result_without_measured_at_is_timed_by_its_file(staged: Path, tmp_path: Path) -> None:
    import os

    old = json.loads((staged / "day29" / "ok01.check.json").read_text())
    for key in ("measured_at", "node", "gpu_ids", "counters"):
        del old[key]  # as checks wrote it before these fields
    path = tmp_path / "in" / "ok01.check.json"
    path.parent.mkdir()
    path.write_text(json.dumps(old))
    when = 1_796_000_000.0
    os.utime(path, (when, when))
    _code, out = _fleet([str(path.parent), "--history", str(tmp_path / "f.db"), "--as-of", AS_OF, "-f", "json"])
    doc = json.loads(out)
    assert doc["history"]["timed_by_file"] == 1 and doc["history"]["last"] == "2026-11-30T00:53:20Z"
    _, text = _fleet(["--history", str(tmp_path / "f.db"), "--as-of", AS_OF])
    assert "1 result without measured_at: timed by the file's mtime" in text


def test_retention_bounds_age_and_size(staged: Path, tmp_path: Path) -> None:
    from topodoctor.fleet.rows import file_digest
    from topodoctor.fleet.store import Retention, open_store
    from topodoctor.model.stamp import utc_iso
    from topodoctor.service.fleet import FleetRequest, HistoryRequest, history

    db = tmp_path / "f.db"
    kept = HistoryRequest(history_db=db, as_of=utc_iso(gen.AS_OF), keep_days=0, max_mb=0)  # 0: no bound
    history(FleetRequest(results=(staged,), history=kept), 60.0)
    s = open_store(db, False)
    total, nodes, first, _ = s.span()
    assert (total, nodes) == (945, 28)
    # Age: results older than 10 days before now go.
    import time

    kept = s.ingest([], Retention(keep_days=(time.time() - gen.AS_OF) / 86400 + 10, max_mb=None))
    n, _, first, _ = s.span()
    assert kept.pruned == total - n and first is not None and first >= gen.AS_OF - 10.3 * 86400
    # Size: the oldest go until the file's pages fit.
    small = s.ingest([], Retention(None, max_mb=0.15))
    assert small.pruned > 0 and s._used_bytes() <= 0.15e6
    s.close()
    assert file_digest(b"x") == file_digest(b"x")


def test_a_migration_runs_once_in_one_transaction(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from topodoctor.core.errors import InputError
    from topodoctor.fleet import store

    db = tmp_path / "f.db"
    store.open_store(db, True).close()
    calls: list[int] = []

    def v2(conn: sqlite3.Connection) -> None:
        calls.append(2)
        conn.execute("ALTER TABLE results ADD COLUMN note TEXT")

    monkeypatch.setattr(store, "SCHEMA_VERSION", 2)
    monkeypatch.setitem(store.MIGRATIONS, 2, v2)
    store.open_store(db, False).close()
    store.open_store(db, False).close()
    assert calls == [2] and sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 2

    def broken(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE results ADD COLUMN other TEXT")
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "SCHEMA_VERSION", 3)
    monkeypatch.setitem(store.MIGRATIONS, 3, broken)
    with pytest.raises(InputError, match="disk I/O error"):
        store.open_store(db, False)
    cols = [r[1] for r in sqlite3.connect(db).execute("PRAGMA table_info(results)")]
    assert "other" not in cols and sqlite3.connect(db).execute("PRAGMA user_version").fetchone()[0] == 2


def test_a_network_file_system_is_warned_of(tmp_path: Path) -> None:
    from topodoctor.service.fleet import network_fs

    mounts = tmp_path / "mountinfo"
    mounts.write_text(
        f"22 1 0:21 / / rw - ext4 /dev/vda rw\n40 22 0:50 / {tmp_path}/shared rw,relatime - nfs4 server:/export rw\n"
    )
    assert network_fs(tmp_path / "shared" / "fleet.db", str(mounts)) == "nfs4"
    assert network_fs(tmp_path / "local" / "fleet.db", str(mounts)) is None


def test_explain_knows_the_history_codes(capsys: pytest.CaptureFixture[str]) -> None:
    from topodoctor.fleet.codes import CODES

    for code in CODES:
        assert main(["explain", code]) == 0
        assert capsys.readouterr().out.startswith(f"{code} {CODES[code].name}")  # rendered for a terminal
    assert set(CODES) == {f"TD95{i}" for i in range(7)}


def test_two_processes_parse_what_one_would(
    staged: Path, judged: tuple[Path, dict[str, Any], int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A collector's thousands of files are parsed by two processes where there are two CPUs: the
    same results; a child that dies costs its half again in the parent, never a result."""
    import os

    from topodoctor.service import fleet as service

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU: the files are parsed in one process")
    monkeypatch.setattr(service, "SPLIT_FROM", 10)
    monkeypatch.setattr(service.os, "getloadavg", lambda: (0.0, 0.0, 0.0))  # an idle host, whatever this one is
    _code, out = _fleet([str(staged), "--history", str(tmp_path / "a.db"), "--as-of", AS_OF, "-f", "json"])
    doc = json.loads(out)
    assert doc["history"]["ingested"]["added"] == 945 and doc["history"]["findings"] == judged[1]["history"]["findings"]
    monkeypatch.setattr(service.pickle, "dumps", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("child died")))
    _code, out = _fleet([str(staged), "--history", str(tmp_path / "b.db"), "--as-of", AS_OF, "-f", "json"])
    assert json.loads(out)["history"]["ingested"]["added"] == 945


def test_docs_hold_every_history_code_as_explain_prints_it() -> None:
    from topodoctor.fleet.codes import codes_markdown

    assert codes_markdown() in (ROOT / "docs" / "fleet.md").read_text(), (
        "docs/fleet.md's findings: paste topodoctor.fleet.codes.codes_markdown()"
    )
