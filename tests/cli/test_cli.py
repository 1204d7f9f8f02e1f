"""The command line through typer's CliRunner and the console entry point: exit codes,
JSON, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from conftest import RECORDINGS, ROOT, scenario_path
from tests_support import judged
from typer.testing import CliRunner

from topodoctor.cli.commands import app, main
from topodoctor.core.pci import long_bus_id

runner = CliRunner()


def test_help_runs_without_torch_or_pynvml() -> None:
    code = (
        "import sys; from topodoctor.cli.commands import main; rc = main(['--help']); "
        "assert 'torch' not in sys.modules and 'pynvml' not in sys.modules, sorted(sys.modules); print('clean')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "clean" in out.stdout, out.stderr


def test_replayed_scan_imports_neither_torch_nor_pynvml() -> None:
    code = (
        "import sys; from topodoctor.cli.commands import main; "
        "rc = main(['scan', '--replay', 'h200-x4', '-f', 'json']); "
        "assert 'torch' not in sys.modules and 'pynvml' not in sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


@pytest.mark.slow
def test_scan_json() -> None:
    r = runner.invoke(app, ["scan", "--replay", "h200-x4", "--format", "json"])
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["kind"] == "scan" and doc["topology"]["matrix"]["GPU0"]["GPU3"] == "NV18"
    assert doc["topology"]["nominal_gbps"]["GPU0"]["GPU1"] == pytest.approx(478.125)
    assert doc["topology"]["affinity"]["GPU0"] == {"cpu": "0-63", "numa": "0", "gpu_numa_id": "N/A"}


def test_scan_text_shows_matrix_and_legend() -> None:
    r = runner.invoke(app, ["scan", "--replay", str(scenario_path("pcie-2socket"))])
    assert r.exit_code == 0
    assert "PXB" in r.stdout and "Legend" in r.stdout and "NIC Legend" in r.stdout


@pytest.mark.parametrize("ext", [".graphml", ".dot", ".json"])
def test_export_graph(tmp_path: Path, ext: str) -> None:
    out = tmp_path / f"g{ext}"
    r = runner.invoke(app, ["scan", "--replay", str(scenario_path("hgx-8gpu-2socket")), "--export-graph", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    if ext == ".graphml":
        g = nx.read_graphml(out)
        assert g.nodes["GPU0"]["kind"] == "gpu" and g.edges["GPU0", "nvswitch:fabric"]["links"] == 18
    elif ext == ".json":
        doc = json.loads(text)
        assert {n["kind"] for n in doc["nodes"]} >= {"gpu", "nvswitch", "nic", "numa", "host_bridge", "pcie_bridge"}
    else:
        assert text.startswith("graph topodoctor {") and '"GPU0" -- "nvswitch:fabric"' in text


def test_export_graph_unknown_extension(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scan", "--replay", "h200-x4", "--export-graph", str(tmp_path / "g.png")]) == 2
    assert "unknown extension" in capsys.readouterr().err


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], code: int) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("topodoctor: error:")
    return err


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{", "not valid JSON"),
        ('{"kind": "recording", "schema_version": 1, "nvml": [], "sy', "not valid JSON"),  # truncated
        ('{"kind": "recording", "schema_version": 7, "nvml": [], "sysfs": []}', "schema_version 7"),
        ('{"kind": "bandwidth", "schema_version": 1}', "not a topodoctor recording"),
        ("[1, 2]", "top level is not an object"),
        ('{"kind": "snapshot", "schema_version": 1, "host": {}}', "does not match its schema"),
        (
            '{"kind": "recording", "schema_version": 1, "nvml": [{"fn": "nvmlInit", "args": [], "result": null}], '
            '"sysfs": []}',
            "holds no answer",
        ),
        ("\\xff\\xfe", "not valid JSON"),
    ],
)
def test_bad_recordings_give_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    err = one_line_error(capsys, ["scan", "--replay", str(bad)], 2)
    assert message in err


def test_truncated_real_recording(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "cut.json"
    bad.write_text(RECORDINGS[-1].read_text()[:5000])
    assert "not valid JSON" in one_line_error(capsys, ["scan", "--replay", str(bad)], 2)


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["scan", "--replay", "/nonexistent/rec.json"], 2, "not found"),
        (["scan", "--replay", "nosuchname"], 2, "no such file or bundled recording"),
        (["scan", "--bogus"], 2, "No such option"),
        (["scan", "--format", "xml"], 2, "xml"),
        (["check", "--select", "TD999"], 2, "no rule matches"),
        (["check", "--timeout", "-1"], 2, "timeout"),
        (["explain", "TD000"], 2, "no rule"),
        (["bandwidth", "--devices", "a,b", "--replay", "h200-x4"], 2, "--devices"),
        (["bandwidth", "--from", "/nonexistent.json"], 2, "not found"),
        (["record"], 2, "--output"),
        (["frobnicate"], 2, "No such command"),
    ],
)
def test_usage_errors_are_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    assert message in one_line_error(capsys, argv, code)


def test_scan_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert "is a directory" in one_line_error(capsys, ["scan", "--replay", str(tmp_path) + "/"], 2)


def test_live_scan_without_a_driver_says_so(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from topodoctor.probe import nvml
    from topodoctor.probe.api import LIBRARY_NOT_FOUND, NvmlCallError

    def no_library(self: object, fn: str, *args: object) -> object:
        raise NvmlCallError(LIBRARY_NOT_FOUND)

    monkeypatch.setattr(nvml.LiveNvml, "call", no_library)
    err = one_line_error(capsys, ["scan"], 3)
    assert "no NVIDIA driver here: libnvidia-ml.so.1 not found" in err


def test_record_list() -> None:
    r = runner.invoke(app, ["record", "--list"])
    assert r.exit_code == 0 and r.stdout.split() == [p.stem for p in RECORDINGS]


# --- check
def test_check_healthy_host_exits_0() -> None:
    r = runner.invoke(app, ["check", "--replay", "h200-x4", "--format", "json"])
    assert r.exit_code == 0
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "healthy" and doc["exit_code"] == 0 and doc["schema_version"] == 1


def test_check_fault_exits_1_with_a_reason_line() -> None:
    r = runner.invoke(app, ["check", "--replay", str(scenario_path("x4-nvlink-down")), "--format", "line"])
    assert r.exit_code == 1
    line = r.stdout.strip()
    assert "\n" not in line and line.startswith("topodoctor FAIL TD101 GPU1/nvlink5")


def test_check_strict_fails_on_warnings() -> None:
    src = str(scenario_path("consumer-no-p2p"))
    assert runner.invoke(app, ["check", "--replay", src]).exit_code == 0
    assert runner.invoke(app, ["check", "--replay", src, "--strict"]).exit_code == 1
    assert runner.invoke(app, ["check", "--replay", src, "--fail-level", "warning"]).exit_code == 1


def test_check_ignore_lets_a_known_fault_pass() -> None:
    src = str(scenario_path("x4-nvlink-down"))
    assert runner.invoke(app, ["check", "--replay", src, "--ignore", "TD1"]).exit_code == 0


def test_check_with_env_variable() -> None:
    r = runner.invoke(app, ["check", "--replay", "h200-x4", "-f", "json"], env={"NCCL_P2P_DISABLE": "1"})
    assert r.exit_code == 1 and "TD601" in {f["code"] for f in json.loads(r.stdout)["findings"]}


def test_check_with_expectations(tmp_path: Path) -> None:
    exp = tmp_path / "hgx.json"
    assert (
        runner.invoke(app, ["expect", "-o", str(exp), "--replay", str(scenario_path("hgx-8gpu-2socket"))]).exit_code
        == 0
    )
    r = runner.invoke(app, ["check", "--replay", "h200-x4", "--expect", str(exp), "-f", "json"])
    assert r.exit_code == 1
    assert {"TD801", "TD803"} <= {f["code"] for f in json.loads(r.stdout)["findings"]}


def test_check_gpu_lost_is_critical() -> None:
    r = runner.invoke(app, ["check", "--replay", str(scenario_path("x4-gpu-lost")), "-f", "json"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["findings"][0]["code"] == "TD507" and doc["findings"][0]["severity"] == "critical"


@pytest.mark.slow
def test_hung_probe_is_cut_at_the_budget(capsys: pytest.CaptureFixture[str]) -> None:
    import time

    t0 = time.monotonic()
    err = one_line_error(capsys, ["check", "--replay", str(scenario_path("x4-nvml-hang")), "--timeout", "1.5"], 3)
    assert time.monotonic() - t0 < 5
    assert "1.5 s budget" in err


def test_rules_import_neither_networkx_nor_the_probe() -> None:
    # The parent loads the rules while the probe child runs; networkx is loaded only to build a graph.
    code = (
        "import sys; import topodoctor.rules; "
        "bad = [m for m in sys.modules if m.startswith(('networkx', 'topodoctor.probe.', 'torch'))]; "
        "assert not bad, bad"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_check_forks_the_probe_before_loading_the_rules() -> None:
    # A short budget is kept only if the parent's own work overlaps the probe, not precedes it:
    # the entry point forks the probe before typer, the rules or the command's code load.
    code = (
        "import os, sys; real = os.fork\n"
        "def spy():\n"
        "    heavy = ('topodoctor.rules', 'typer', 'topodoctor.cli.check', 'topodoctor.model.snapshot')\n"
        "    loaded = sorted(m for m in sys.modules if m.startswith(heavy))\n"
        "    pid = real()\n"
        "    if pid: os.write(2, f'forked with {loaded}\\n'.encode())\n"
        "    return pid\n"
        "os.fork = spy\n"
        "sys.argv = ['topodoctor', 'check', '--replay', 'h200-x4', '-f', 'line', '--select', 'TD7']\n"
        "from topodoctor.cli import run\n"
        "run()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.startswith("topodoctor OK"), out.stderr
    assert out.stderr == "forked with []\n"


def test_a_budget_below_start_up_says_so() -> None:
    cmd = [sys.executable, "-m", "topodoctor", "check", "--replay", str(scenario_path("x4-nvml-hang"))]
    p = subprocess.run([*cmd, "--timeout", "0.001", "-f", "line"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 3 and p.stderr == ""
    assert "0.001 s budget was spent before the check could start (start-up took" in p.stdout


def test_rules_and_explain() -> None:
    r = runner.invoke(app, ["rules", "--format", "json"])
    rules = json.loads(r.stdout)
    assert len({x["code"] for x in rules}) == len(rules) > 40
    r = runner.invoke(app, ["explain", "nvlink-down"])
    assert r.exit_code == 0 and "TD101" in r.stdout and "fix:" in r.stdout


@pytest.mark.slow
def test_could_not_check_still_answers_in_json(monkeypatch: pytest.MonkeyPatch) -> None:
    r = runner.invoke(app, ["check", "--replay", str(scenario_path("x4-nvml-hang")), "--timeout", "1", "-f", "json"])
    assert r.exit_code == 3
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "unknown" and doc["exit_code"] == 3 and "budget" in doc["reason"]
    r = runner.invoke(app, ["check", "--replay", str(scenario_path("x4-nvml-hang")), "--timeout", "1", "-f", "line"])
    assert r.exit_code == 3 and r.stdout.startswith("topodoctor UNKNOWN:")


# --- help and layout
COMMANDS = ["scan", "check", "bandwidth", "record", "expect", "rules", "explain"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_documents_exit_codes_and_defaults(command: str) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "topodoctor", command, "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "Exit codes:" in text and "  0  " in text and "  2  usage or input error" in text
    assert "<" not in text and "{" not in text, text  # no <list[str]>, <float range> or {CODE} placeholders
    assert all(len(line) <= 80 for line in text.splitlines()), text
    if command in ("scan", "check", "expect", "bandwidth", "record"):
        assert "[default: " in text and "--timeout SECONDS" in text


def _snapshot_with(tmp_path: Path, change: Any) -> str:
    from topodoctor.core.codec import to_jsonable
    from topodoctor.probe.sources import probe_host

    data = to_jsonable(probe_host("h200-x4").snapshot)
    change(data)
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_incomplete_checks_are_counted_never_a_bare_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def no_permission(d: dict[str, Any]) -> None:
        d["gpus"][2]["pcie"]["width_current"] = {
            "probe_error": "NO_PERMISSION",
            "call": "nvmlDeviceGetCurrPcieLinkWidth",
        }

    src = _snapshot_with(tmp_path, no_permission)
    assert main(["check", "--replay", src, "-f", "line"]) == 0
    # Two: the field set to NO_PERMISSION, and TD403 (a saved snapshot records no process affinity);
    # the third is the info that the x4 host was recorded before the fitness calls.
    assert capsys.readouterr().out.strip() == "topodoctor OK: 4 GPUs, 2 warnings, 1 info; 3 checks incomplete"
    assert main(["check", "--replay", src, "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["incomplete"] == 3


def test_one_gpu_is_singular(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--replay", "h200-x1", "-f", "line"]) == 0
    assert capsys.readouterr().out.strip() == "topodoctor OK: 1 GPU, no findings"


def test_check_text_fits_80_columns(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from topodoctor.rules import REGISTRY

    monkeypatch.setenv("COLUMNS", "80")
    assert main(["check", "--replay", str(scenario_path("pcie-2socket-acs"))]) == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "bridge:0000:04:00.0" in out  # a subject is never cut
    words = set(" ".join(line.strip(" │┃") for line in lines).split())
    fix = REGISTRY["TD304"].fix
    assert all(w in words for w in fix.split()), "a hint was broken inside a word"


def test_latency_table_says_microseconds(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bandwidth", "--from", str(ROOT / "fixtures/bandwidth/h200-x4.full.json")]) in (0, 1)
    out = capsys.readouterr().out
    title = next(line for line in out.splitlines() if "Latency" in line)
    assert "microseconds" in title and "GB/s" not in title


def test_service_layer_returns_outcomes() -> None:
    from topodoctor.service import check as doctor

    outcome = doctor.check(doctor.CheckRequest(replay=str(scenario_path("x4-nvlink-down")), timeout=10))
    assert outcome.exit_code == 1 and outcome.verdict == "unhealthy"
    assert outcome.findings[0].code == "TD101" and outcome.meta.gpus == 4 and judged(outcome.incomplete) == []
    assert all(type(f).__name__ == "Finding" for f in outcome.findings)


def test_scan_fits_80_columns_and_keeps_bus_ids(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from topodoctor.probe.sources import probe_host

    src = str(scenario_path("hgx-8gpu-2socket"))
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["scan", "--replay", src]) == 0
    out = capsys.readouterr().out
    # Tables fit; the connection matrix and its legend are nvidia-smi's text, kept as it prints them.
    tables = [line for line in out.splitlines() if any(c in line for c in "│┃┏└")]
    assert len(tables) > 20 and all(len(line) <= 80 for line in tables)
    for gpu in probe_host(src).snapshot.gpus:  # as nvidia-smi prints them
        assert isinstance(gpu.bus_id, str) and f" {long_bus_id(gpu.bus_id)} " in out


def test_the_version_is_the_package_s() -> None:
    """One version: pyproject.toml's, read by every stage from core/version.py."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11's

    import topodoctor
    from topodoctor.core.version import __version__

    with open(Path(__file__).parents[2] / "pyproject.toml", "rb") as f:
        assert tomllib.load(f)["project"]["version"] == __version__ == topodoctor.__version__
