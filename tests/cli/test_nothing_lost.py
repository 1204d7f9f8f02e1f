"""Nothing lost: a file a command cannot write (-o, --metrics, a picture) never takes its verdict
with it: the verdict and the drain list still reach the terminal, and exit 1 stands; the fleet
calls a node's bandwidth what the bandwidth rules call it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from topodoctor.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
SLOW_LINK = str(ROOT / "fixtures/bandwidth/derived/slow-link.json")
P2P_OFF = str(ROOT / "fixtures/collectives/derived/x2-p2p-disabled.json")
NVLINK_DOWN = str(ROOT / "fixtures/derived/x4-nvlink-down.json")
NOWHERE = "/nonexistent/topodoctor/out"


def _run(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    got = capsys.readouterr()
    return code, got.out, got.err


@pytest.fixture
def fleet_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """Three healthy nodes and one with a link down, as `check -f json` writes them."""
    for name, host in (("a", "h200-x4"), ("b", "h200-x4"), ("c", "h200-x4"), ("bad", NVLINK_DOWN)):
        main(["check", "--replay", host, "-f", "json"])
        (tmp_path / f"{name}.json").write_text(capsys.readouterr().out)
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "verdict"),
    [
        (["check", "--replay", NVLINK_DOWN, "--metrics", f"{NOWHERE}.prom"], "UNHEALTHY"),
        (["check", "--replay", NVLINK_DOWN, "-f", "line", "--metrics", f"{NOWHERE}.prom"], "topodoctor FAIL TD101"),
        (["bandwidth", "--from", SLOW_LINK, "-o", f"{NOWHERE}.json"], "TD307"),
        (["bandwidth", "--from", SLOW_LINK, "--metrics", f"{NOWHERE}.prom"], "TD307"),
        (["bandwidth", "--from", SLOW_LINK, "--heatmap", f"{NOWHERE}.svg"], "TD307"),
        (["collectives", "--from", P2P_OFF, "-o", f"{NOWHERE}.json"], "NCCL_P2P_DISABLE=1"),
        (["collectives", "--from", P2P_OFF, "--metrics", f"{NOWHERE}.prom"], "NCCL_P2P_DISABLE=1"),
        (["collectives", "--from", P2P_OFF, "--plot", f"{NOWHERE}.svg"], "NCCL_P2P_DISABLE=1"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else v,
)
def test_an_unwritable_file_keeps_the_verdict_and_exit_1(
    capsys: pytest.CaptureFixture[str], argv: list[str], verdict: str
) -> None:
    code, out, err = _run(capsys, argv)
    assert code == 1 and verdict in out, (out, err)
    assert "cannot write /nonexistent/topodoctor/out" in out + err


@pytest.mark.parametrize("fmt", ["text", "json", "drain", "scontrol", "prometheus"])
def test_fleet_into_an_unwritable_path_still_says_what_to_drain(
    capsys: pytest.CaptureFixture[str], fleet_dir: Path, fmt: str
) -> None:
    code, out, err = _run(capsys, ["fleet", str(fleet_dir), "--name-from", "file", "-f", fmt, "-o", f"{NOWHERE}.txt"])
    assert code == 1 and "topodoctor: error: cannot write /nonexistent/topodoctor/out.txt" in err
    assert "bad" in out and ("TD101" in out or fmt == "prometheus"), out
    if fmt == "json":
        assert [n["node"] for n in json.loads(out)["nodes"] if n["drain"]] == ["bad"]


def test_the_fleet_judges_a_bandwidth_result_as_bandwidth_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for f in ("slow-link.json", "sm-healthy.json"):
        shutil.copy(ROOT / "fixtures/bandwidth/derived" / f, tmp_path / f)
    code, _, _ = _run(capsys, ["bandwidth", "--from", str(tmp_path / "slow-link.json")])
    assert code == 1  # UNHEALTHY, as the bandwidth rules judge it
    code, out, _ = _run(capsys, ["fleet", str(tmp_path), "--name-from", "file", "-f", "json"])
    nodes = {n["node"]: n for n in json.loads(out)["nodes"]}
    assert code == 1 and nodes["slow-link"]["sources"]["bandwidth"] == "unhealthy" and nodes["slow-link"]["drain"]
    assert nodes["sm-healthy"]["sources"]["bandwidth"] != "unhealthy"
    _, text, _ = _run(capsys, ["fleet", str(tmp_path), "--name-from", "file"])
    row = next(line for line in text.splitlines() if line.startswith("slow-link"))
    assert " FAIL " in row and "TD307 GPU1-GPU2: 18 NVLinks up" in row
