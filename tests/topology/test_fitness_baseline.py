"""check --baseline: counters judged by their rise since an earlier snapshot of the node."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from conftest import scenario_path

from topodoctor.cli.commands import main
from topodoctor.core.codec import to_jsonable
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.sources import probe_host

X1 = "h200-x1"  # recorded at uptime 154.12 -> 154.15 s; 14 receiver errors standing still


def _earlier(snap: HostSnapshot, at_s: float, **pcie: int) -> HostSnapshot:
    """GPU0 as an earlier snapshot saw it: taken at uptime ``at_s`` with ``pcie`` counts."""
    g = snap.gpus[0]
    end = replace(g.fitness.end, at_s=at_s, pcie=replace(g.fitness.end.pcie, **pcie))
    return replace(snap, gpus=(replace(g, fitness=replace(g.fitness, end=end)), *snap.gpus[1:]))


def _write(tmp_path: Path, snap: HostSnapshot, kind: str = "snapshot") -> str:
    doc: Any = to_jsonable(snap)
    if kind == "scan":
        doc = {"kind": "scan", "schema_version": 1, "snapshot": doc}
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _check(capsys: pytest.CaptureFixture[str], source: str, baseline: str) -> tuple[int, dict[str, Any]]:
    code = main(["check", "--replay", source, "--baseline", baseline, "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    return code, {f["code"]: f for f in doc["findings"]}


def test_errors_since_the_baseline_are_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = probe_host(X1).snapshot
    base = _write(tmp_path, _earlier(snap, 54.15, receiver_errors=14 - 9), kind="scan")
    code, found = _check(capsys, X1, base)
    assert code == 0 and set(found) == {"TD209"}
    assert found["TD209"]["evidence"] == {"rise": {"receiver_errors": 9}, "window_s": 100.0}
    assert "since the baseline" in found["TD209"]["message"]


def test_a_high_rate_since_the_baseline_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = probe_host(X1).snapshot
    code, found = _check(capsys, X1, _write(tmp_path, _earlier(snap, 54.15, bad_tlp=0, naks_sent=0)))
    assert (code, set(found)) == (0, {"TD209"})  # 28 in 100 s
    # the same 28 within 0.2 s: 140 per second
    code, found = _check(capsys, X1, _write(tmp_path, _earlier(snap, 153.95, bad_tlp=0, naks_sent=0)))
    assert code == 1 and set(found) == {"TD211"} and found["TD211"]["evidence"]["rate_per_s"] == 140.0


def test_a_baseline_from_another_boot_is_no_evidence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    snap = probe_host(X1).snapshot
    code, found = _check(capsys, X1, _write(tmp_path, _earlier(snap, 900.0, receiver_errors=0)))
    assert (code, found) == (0, {})


def test_a_nic_link_that_flapped_since_the_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = str(scenario_path("hgx-nic-half-rate"))
    snap = probe_host(source).snapshot
    nics = tuple(
        replace(
            n, ports=(replace(n.ports[0], at_end_s=5.0, counters_end=n.ports[0].counters_end | {"link_downed": 0}),)
        )
        if n.name == "mlx5_2"
        else n
        for n in snap.nics
    )
    now = replace(
        snap,
        nics=tuple(
            replace(
                n,
                ports=(
                    replace(
                        n.ports[0],
                        counters_start=n.ports[0].counters_start | {"link_downed": 2},
                        counters_end=n.ports[0].counters_end | {"link_downed": 2},
                    ),
                ),
            )
            if n.name == "mlx5_2"
            else n
            for n in snap.nics
        ),
    )
    current = tmp_path / "now.json"
    current.write_text(json.dumps(to_jsonable(now)))
    code, found = _check(capsys, str(current), _write(tmp_path, replace(snap, nics=nics)))
    assert code == 1 and found["TD422"]["subject"] == "nic:mlx5_2/1"
    assert found["TD422"]["evidence"] == {"rise": {"link_downed": 2}}


def test_a_bad_baseline_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"kind": "bandwidth"}')
    assert main(["check", "--replay", X1, "--baseline", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("topodoctor: error:") and "baseline" in err and len(err.splitlines()) == 1
