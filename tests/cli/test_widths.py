"""Every command's text at COLUMNS=100, on the bundled recordings and the fixtures: no line, on
stdout or stderr, is wider than the terminal (the JSON and the one-line formats keep everything).
Each case starts a command: the module is left to ``-m slow``."""

from __future__ import annotations

import contextlib
import ctypes.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import DERIVED, FIXTURES, RECORDINGS, ROOT, scenario_path
from rich.cells import cell_len

from topodoctor.cli.commands import main
from topodoctor.rules import REGISTRY

pytestmark = pytest.mark.slow
WIDTH = 100
HANG = "x4-nvml-hang"
RECORDED = [p.stem for p in RECORDINGS]
HOSTS = [*RECORDED, *(str(scenario_path(e["name"])) for e in DERIVED if e["name"] != HANG)]
JOB = FIXTURES / "job"
COMMANDS = ["scan", "record", "check", "rules", "explain", "expect", "bandwidth", "collectives", "fleet"]
COMMANDS += ["nccl-topo", "nccl-log", "job"]


def _cases() -> list[tuple[str, list[str]]]:
    cases: list[tuple[str, list[str]]] = [("rules", ["rules"]), ("record", ["record", "--list"])]
    cases += [(f"help {c}", [c, "--help"]) for c in COMMANDS] + [("help", ["--help"])]
    from topodoctor.nccl.explain import EXPLANATIONS

    cases += [(f"explain {c}", ["explain", c]) for c in [*sorted(REGISTRY), *sorted(EXPLANATIONS)]]
    for host in HOSTS:
        name = Path(host).stem
        cases += [(f"scan {name}", ["scan", "--replay", host]), (f"check {name}", ["check", "--replay", host])]
    cases.append(("check hang", ["check", "--replay", str(scenario_path(HANG)), "--timeout", "0.5"]))
    cases.append(("expect", ["expect", "--replay", "h200-x4", "-o", "-"]))
    cases.append(("nccl-topo", ["nccl-topo", "--replay", "h200-x4", "-o", "-"]))
    for d in sorted((JOB / "nccl").iterdir()):
        cases.append((f"job {d.name}", ["job", str(d), "--map", str(d / "ranks.map")]))
    cases.append(("job ras", ["job", "--ras-file", str(JOB / "ras" / "hang.txt")]))
    cases += [
        (f"job live {p.stem}", ["job", "--replay-live", str(p)]) for p in sorted((JOB / "activity").glob("*.json"))
    ]
    return cases


def _others() -> list[object]:
    """The commands read from saved files: nccl-log, collectives, bandwidth, fleet."""
    cases: list[tuple[str, list[str]]] = []
    cases += [(f"nccl-log {d.name}", ["nccl-log", str(d)]) for d in sorted((FIXTURES / "nccl-logs").iterdir())]
    for f in sorted((FIXTURES / "collectives").glob("*/*.json")):
        if f.name != "index.json":
            cases.append((f"collectives {f.stem}", ["collectives", "--from", str(f)]))
    bw = FIXTURES / "bandwidth"
    for f in [*sorted(bw.glob("*.json")), *sorted((bw / "derived").glob("*.json"))]:
        if f.name != "index.json":
            cases.append((f"bandwidth {f.stem}", ["bandwidth", "--from", str(f)]))
    cases.append(("fleet simulated", ["fleet", "SIMULATED"]))
    return [pytest.param(argv, id=name) for name, argv in cases]


def _too_wide(text: str) -> list[str]:
    return [line for line in text.expandtabs().splitlines() if cell_len(line) > WIDTH]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    with contextlib.suppress(SystemExit):
        main(argv)
    out = capsys.readouterr()
    return out.out + out.err


@pytest.mark.parametrize("argv", [c[1] for c in _cases()], ids=[c[0] for c in _cases()])
def test_text_fits_100_columns(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _run(argv, capsys, monkeypatch)
    assert text.strip(), "printed nothing"
    assert not _too_wide(text), _too_wide(text)


@pytest.mark.parametrize("argv", _others())
def test_others_text_fits_100_columns(
    argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    if argv == ["fleet", "SIMULATED"]:
        sys.path.insert(0, str(FIXTURES / "fleet"))
        import simulate  # type: ignore[import-not-found]

        simulate.build(tmp_path / "fleet")
        argv = ["fleet", str(tmp_path / "fleet")]
    text = _run(argv, capsys, monkeypatch)
    assert text.strip(), "printed nothing"
    assert not _too_wide(text), _too_wide(text)


@pytest.mark.skipif(ctypes.util.find_library("nvidia-ml") is not None, reason="this machine has an NVIDIA driver")
@pytest.mark.parametrize(
    "argv", [["check"], ["scan"], ["job", "--live"], ["bandwidth"], ["record", "-o", "x.json"]], ids=" ".join
)
def test_no_driver_is_one_line_within_100_columns(argv: list[str], tmp_path: Path) -> None:
    """Without a driver every command says so in the same words, on one line that fits."""
    r = subprocess.run(
        [sys.executable, "-m", "topodoctor", *argv],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "COLUMNS": str(WIDTH)},
        timeout=60,
    )
    assert r.returncode == 3, r
    said = (r.stdout + r.stderr).strip()
    assert said == "topodoctor: error: no NVIDIA driver here: libnvidia-ml.so.1 not found (nvmlInit: LIBRARY_NOT_FOUND)"


def test_explain_renders_for_a_terminal_and_keeps_its_markdown(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = _run(["explain", "TD501"], capsys, monkeypatch)
    assert "###" not in text and "**" not in text and text.startswith("TD501 fabric-not-ready")
    assert "Why it matters: " in text and all(line == line.rstrip() for line in text.splitlines())
    raw = _run(["explain", "TD501", "--markdown"], capsys, monkeypatch)
    assert raw.startswith("### TD501 fabric-not-ready") and "**Why it matters:**" in raw


def test_expect_to_standard_output_says_so(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    main(["expect", "--replay", "h200-x4", "-o", "-"])
    out = capsys.readouterr()
    assert json.loads(out.out)["kind"] == "expectations" and out.out.endswith("}\n")
    assert out.err.startswith("wrote standard output: 4 x NVIDIA H200")
