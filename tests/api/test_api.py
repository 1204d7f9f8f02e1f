"""The Python API (topodoctor/api, docs/api.md): its names, its cost at import, its independence
from the command line, its typed errors, and its verdict held to `topodoctor check`'s on every
bundled recording and derived scenario."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import networkx as nx
import pytest
from conftest import DERIVED, RECORDINGS, ROOT, scenario_path
from typer.testing import CliRunner

import topodoctor
from topodoctor.cli.commands import app
from topodoctor.core.budget import run_with_budget
from topodoctor.core.errors import EXIT_CANNOT_CHECK, EXIT_USAGE
from topodoctor.model.findings import finding_json
from topodoctor.probe import nvml, warm_up

PUBLIC = {
    "__version__",
    "scan",
    "Host",
    "check",
    "Report",
    "bandwidth",
    "collectives",
    "predict",
    "diagnose",
    "Diagnosis",
    "TopodoctorError",
    "InputError",
    "ReplayMismatch",
    "ProbeUnavailable",
    "BudgetExceeded",
    "CannotMeasure",
    "BandwidthUnavailable",
    "CollectivesUnavailable",
    "Finding",
    "HostSnapshot",
    "BandwidthResult",
    "CollectivesResult",
    "Prediction",
}
# Every host the tests know: the bundled recordings by name, the derived scenarios by path.
HOSTS = [p.stem for p in RECORDINGS] + [str(scenario_path(s["name"])) for s in DERIVED]
HANGS = str(scenario_path("x4-nvml-hang"))  # NVML never answers: the budget ends it
NO_GPU = not Path("/proc/driver/nvidia/gpus").exists()
REAL_NVML = (nvml.LiveNvml.call, warm_up.LIBRARY)  # before the tests' guard replaces them


@pytest.fixture
def real_nvml_without_a_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real library calls, on a machine that has no driver: they fail as they would for a user."""
    if not NO_GPU:
        pytest.skip("a machine without a GPU")
    monkeypatch.setattr(nvml.LiveNvml, "call", REAL_NVML[0])
    monkeypatch.setattr(warm_up, "LIBRARY", REAL_NVML[1])


def _python(code: str) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_public_names_are_exactly_these_and_each_resolves() -> None:
    assert set(topodoctor.__all__) == PUBLIC
    assert len(topodoctor.__all__) == len(PUBLIC)
    for name in PUBLIC:
        assert getattr(topodoctor, name) is not None, name
    assert set(dir(topodoctor)) >= PUBLIC
    assert set(topodoctor._LAZY) == PUBLIC  # every name loads from somewhere
    assert issubclass(topodoctor.CannotMeasure, topodoctor.TopodoctorError)
    assert issubclass(topodoctor.BandwidthUnavailable, topodoctor.CannotMeasure)
    assert issubclass(topodoctor.CollectivesUnavailable, topodoctor.CannotMeasure)
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        topodoctor.nothing_here  # noqa: B018


def test_import_topodoctor_loads_nothing_else_of_it() -> None:
    loaded = _python("import sys, topodoctor; print(sorted(m for m in sys.modules if m.startswith('topodoctor')))")
    assert loaded.strip() == "['topodoctor']"


@pytest.mark.slow
def test_the_api_runs_without_the_command_line_torch_or_the_driver() -> None:
    code = (
        "import sys, topodoctor; h = topodoctor.scan(replay='h200-x4'); h.graph; r = topodoctor.check(h); "
        "topodoctor.predict(h); assert r.exit_code == 0, r.reason; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'typer', 'click', 'torch', 'pynvml'}), "
        "sorted(m for m in sys.modules if m.startswith('topodoctor.cli')))"
    )
    assert _python(code).strip() == "[] []"


def test_the_package_ships_its_type_marker() -> None:
    assert (ROOT / "topodoctor" / "py.typed").is_file()
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in data["tool"]["setuptools"]["package-data"]["topodoctor"]


def _cli_check(replay: str, *args: str) -> tuple[int, dict[str, Any]]:
    r = CliRunner().invoke(app, ["check", "--replay", replay, "-f", "json", *args])
    return r.exit_code, json.loads(r.stdout)


def _in_process(replay: str) -> tuple[tuple[int, dict[str, Any]], topodoctor.Report]:
    """The command and the API on one host, both probing in this process (--timeout 0)."""
    return _cli_check(replay, "--timeout", "0"), topodoctor.check(topodoctor.scan(replay=replay, timeout=0), timeout=0)


def _without_elapsed(doc: dict[str, Any]) -> dict[str, Any]:
    """A check's JSON without what measures the run rather than the host (its time and length)."""
    return {k: v for k, v in doc.items() if k not in ("elapsed_s", "measured_at")}


@pytest.mark.parametrize("replay", [h for h in HOSTS if h != HANGS], ids=lambda h: Path(h).stem)
def test_check_judges_as_the_command_does(replay: str) -> None:
    (code, doc), report = _in_process(replay)
    assert (report.exit_code, report.verdict, report.reason) == (code, doc["verdict"], doc["reason"])
    assert json.loads(json.dumps([finding_json(f) for f in report.findings])) == doc["findings"]
    assert _without_elapsed(json.loads(json.dumps(report.to_json()))) == _without_elapsed(doc)


@pytest.mark.slow
def test_check_judges_as_the_command_does_through_the_budgeted_child() -> None:
    replay = str(scenario_path("x4-nvlink-down"))
    code, doc = _cli_check(replay)
    report = topodoctor.check(topodoctor.scan(replay=replay))
    assert (
        (report.exit_code, [finding_json(f) for f in report.findings])
        == (code, doc["findings"])
        == (1, doc["findings"])
    )


@pytest.mark.parametrize(
    ("options", "args"),
    [
        ({"fail_level": "warning"}, ["--strict"]),
        ({"prolog": True}, ["--prolog"]),
        ({"select": ["TD1", "TD5"]}, ["--select", "TD1,TD5"]),
        ({"ignore": "TD901"}, ["--ignore", "TD901"]),
        ({"fail_level": "critical"}, ["--fail-level", "critical"]),
    ],
    ids=["strict", "prolog", "select", "ignore", "fail-level"],
)
def test_check_options_judge_as_the_command_s(options: dict[str, Any], args: list[str]) -> None:
    replay = str(scenario_path("x4-nvlink-errors"))
    code, doc = _cli_check(replay, *args)
    report = topodoctor.check(topodoctor.scan(replay=replay), **options)
    assert (report.exit_code, [f.code for f in report.findings]) == (code, [f["code"] for f in doc["findings"]])
    assert [f.severity for f in report.failing] == [
        f["severity"]
        for f in doc["findings"]
        if f["severity"]
        in {"warning": ("warning", "error", "critical"), "critical": ("critical",)}.get(
            doc["fail_level"], ("error", "critical")
        )
    ]


@pytest.mark.slow
def test_a_probe_that_hangs_ends_in_the_budget_as_the_command_does() -> None:
    code, doc = _cli_check(HANGS, "--timeout", "1")
    with pytest.raises(topodoctor.BudgetExceeded, match="1 s budget") as caught:
        topodoctor.scan(replay=HANGS, timeout=1)
    assert caught.value.exit_code == code == EXIT_CANNOT_CHECK and doc["verdict"] == "unknown"


def test_a_bad_source_raises_its_own_kind() -> None:
    with pytest.raises(topodoctor.InputError, match="no such file or bundled recording") as caught:
        topodoctor.scan(replay="no-such-host")
    assert caught.value.exit_code == EXIT_USAGE
    with pytest.raises(topodoctor.InputError, match="not valid JSON"):
        topodoctor.scan(replay=ROOT / "pyproject.toml")
    with pytest.raises(topodoctor.InputError, match="--timeout must be 0"):
        topodoctor.scan(replay="h100-x1", timeout=-1)


def test_bad_options_are_input_errors_before_anything_runs() -> None:
    host = topodoctor.scan(replay="h100-x1", timeout=0)
    with pytest.raises(topodoctor.InputError, match="fail_level must be one of"):
        topodoctor.check(host, fail_level="fatal")  # type: ignore[arg-type]
    with pytest.raises(topodoctor.InputError, match="scope must be one of"):
        topodoctor.check(host, scope="rack")  # type: ignore[arg-type]
    with pytest.raises(topodoctor.InputError, match="no rule matches 'TD77x'"):
        topodoctor.check(host, select=["TD77x"])
    with pytest.raises(TypeError, match=r"expected a topodoctor\.Host"):
        topodoctor.check(host.snapshot)  # type: ignore[arg-type]
    with pytest.raises(topodoctor.InputError, match=r"modes must be one of oneway, .*, not 'sideways'"):
        topodoctor.bandwidth(host, modes=["sideways"])
    with pytest.raises(topodoctor.InputError, match="unknown op 'all_sum'"):
        topodoctor.collectives(host, ops=["all_sum"])
    with pytest.raises(topodoctor.InputError, match="nodes must be at least 1, not 0"):
        topodoctor.predict(host, nodes=0)


def test_an_error_keeps_its_kind_through_the_budgeted_child() -> None:
    def mismatch(deadline: float) -> dict[str, Any]:
        raise topodoctor.ReplayMismatch("the recording never asked nvmlDeviceGetX(gpu:9)")

    with pytest.raises(topodoctor.ReplayMismatch, match="never asked") as caught:
        run_with_budget(mismatch, 30)
    assert caught.value.exit_code == EXIT_USAGE

    def own(deadline: float) -> dict[str, Any]:
        raise OSError("not ours")

    with pytest.raises(topodoctor.TopodoctorError, match="internal error: OSError") as other:
        run_with_budget(own, 30)
    assert type(other.value) is topodoctor.TopodoctorError and other.value.exit_code == EXIT_CANNOT_CHECK


@pytest.mark.usefixtures("real_nvml_without_a_driver")
def test_a_live_probe_without_a_driver_is_probe_unavailable() -> None:
    with pytest.raises(topodoctor.ProbeUnavailable, match="no NVIDIA driver here") as caught:
        topodoctor.scan()
    assert caught.value.exit_code == EXIT_CANNOT_CHECK


@pytest.mark.usefixtures("real_nvml_without_a_driver")
@pytest.mark.parametrize(
    "measure",
    [
        lambda: topodoctor.bandwidth(quick=True),
        lambda: topodoctor.collectives(ops=["all_reduce"], sizes="1M"),
        pytest.param(
            lambda: topodoctor.collectives(ops=["all_reduce"], sizes="1M", nprocs=2, start_timeout=60),
            marks=pytest.mark.slow,
        ),
    ],
    ids=["bandwidth", "collectives", "collectives-2-ranks"],
)
def test_without_a_gpu_the_measurements_could_not_measure(measure: Any) -> None:
    with pytest.raises(topodoctor.CannotMeasure) as caught:
        measure()
    assert caught.value.exit_code == EXIT_CANNOT_CHECK


@pytest.mark.slow
def test_collectives_on_gloo_return_the_result_the_command_saves() -> None:
    from topodoctor.model.collectives import result_to_json

    host = topodoctor.scan(replay="h200-x2")  # the ranks run on CPU; the host judged is a recording
    res = topodoctor.collectives(host, backend="gloo", nprocs=2, ops="all_reduce", sizes="1M", iters=2, warmup=0)
    assert isinstance(res, topodoctor.CollectivesResult)
    ((row),) = res.rows
    assert (row.op, row.size_bytes, row.in_place.wrong) == ("all_reduce", 1 << 20, 0)
    assert row.in_place.busbw_gbps > 0 and res.failures == ()
    assert json.loads(result_to_json(res))["rows"][0]["op"] == "all_reduce"


def test_predict_is_collectives_predict() -> None:
    from topodoctor.report.collectives import prediction_doc

    host = topodoctor.scan(replay="h200-x4", timeout=0)
    out = CliRunner().invoke(app, ["collectives", "--predict", "--replay", "h200-x4", "-f", "json", "--timeout", "0"])
    assert out.exit_code == 0
    got = json.loads(json.dumps(prediction_doc(topodoctor.predict(host))))
    assert got["predictions"] == json.loads(out.stdout)["predictions"]
    with pytest.raises(topodoctor.CannotMeasure, match="no prediction: 1 GPU on this host"):
        topodoctor.predict(topodoctor.scan(replay="h100-x1", timeout=0))  # one GPU: nothing to predict


def test_the_graph_is_networkx_with_every_part_of_the_host() -> None:
    host = topodoctor.scan(replay=str(scenario_path("hgx-8gpu-2socket")), timeout=0)
    g = host.graph
    assert isinstance(g, nx.Graph) and not g.is_directed()
    kinds = {k for _, k in g.nodes(data="kind")}
    assert kinds == {"gpu", "nvswitch", "nic", "cpu", "numa", "pcie_bridge", "host_bridge"}
    assert sorted(n for n, k in g.nodes(data="kind") if k == "gpu") == [f"GPU{i}" for i in range(8)]
    assert g.nodes["GPU0"]["bus_id"] == host.gpus[0].bus_id
    assert {k for _, _, k in g.edges(data="kind")} == {"nvlink", "pcie", "attach", "smp", "cpu"}
    assert nx.shortest_path(g, "GPU0", "NIC0")[0] == "GPU0"
    switched = topodoctor.scan(replay="h200-x4", timeout=0).graph
    assert {k for _, k in switched.nodes(data="kind")} >= {"gpu", "nvswitch"}
    assert (
        switched.edges["GPU0", next(iter(n for n, k in switched.nodes(data="kind") if k == "nvswitch"))]["kind"]
        == "nvlink"
    )
    assert host.graph is g  # built once
