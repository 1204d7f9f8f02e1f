"""The expectations file is validated whole before any rule sees it: every key's type and the
range a real host can have, unknown keys (named with the closest known key), keys nested where
they do not belong. A bad file is one line and exit 2 naming the key and what it may hold; every
file `expect` writes from the bundled recordings and derived scenarios validates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import DERIVED, RECORDINGS, scenario_path
from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.core import codec
from topodoctor.core.errors import EXIT_USAGE, InputError
from topodoctor.probe.sources import probe_host
from topodoctor.topology.expect import SCHEMA, from_snapshot, load_expectations

runner = CliRunner()
GOOD: dict[str, Any] = {
    "kind": "expectations",
    "schema_version": 1,
    "gpu_count": 8,
    "gpu_model": "NVIDIA H200",
    "nvlinks_per_gpu": 18,
    "nvlinks_per_pair": 18,
    "pcie_gen": 5,
    "pcie_width": 16,
    "nics": ["mlx5_0", "mlx5_1"],
    "mig_enabled": False,
}
# Per key: values of a wrong type, then values out of what a real host can have.
WRONG_TYPE: dict[str, list[Any]] = {
    "gpu_count": ["8", 8.0, True, None, [8], {"n": 8}],
    "gpu_model": [7, None, ["NVIDIA H200"], True],
    "nvlinks_per_gpu": ["18", 18.5, False, None],
    "nvlinks_per_pair": ["18", 1.5, None, {}],
    "pcie_gen": ["5", 5.0, True, []],
    "pcie_width": ["x16", 16.0, True, {}],
    "nics": ["mlx5_0", None, {"mlx5_0": 1}, [1], [None], [["mlx5_0"]]],
    "mig_enabled": [0, 1, "false", None],
    "power_limit_w": ["700", True, [700], {"w": 700}],
    "nic_rate_gbps": ["400", [400], None, {"mlx5_0/1": "400"}, {"mlx5_0": 400}],
    "fitness": ["2100", [2100], None, {"hbm ce": "2100"}, {"hbm ce": True}],
}
OUT_OF_RANGE: dict[str, list[Any]] = {
    "gpu_count": [0, -1, 65, 10**18],
    "gpu_model": ["x" * 97, "NVIDIA\x1bH200", " NVIDIA H200", "NVIDIA H200\n"],
    "nvlinks_per_gpu": [-5, 37, 10**18],
    "nvlinks_per_pair": [-5, 37, 10**18],
    "pcie_gen": [0, -1, 8, 99],
    "pcie_width": [0, 3, 64, -16],
    "nics": [[""], ["mlx5 0"], ["m" * 65], ["mlx5_0", "mlx5_0"], [f"mlx5_{i}" for i in range(65)]],
    "power_limit_w": [0, -700, 5, 10**18],
    "nic_rate_gbps": [{"mlx5_0/1": 0}, {"mlx5_0/1": -400}, {"mlx5_0/1": 10**9}, {"mlx5_0/x": 400}],
    "fitness": [{"hbm ce": 0}, {"hbm ce": -2100}, {"hbm ce": 10**18}, {"x" * 65: 2100}],
}


def _load(tmp_path: Path, doc: Any) -> Any:
    p = tmp_path / "exp.json"
    p.write_text(json.dumps(doc))
    return load_expectations(p)


def _refused(tmp_path: Path, doc: Any) -> str:
    with pytest.raises(InputError) as err:
        _load(tmp_path, doc)
    msg = str(err.value)
    assert err.value.exit_code == EXIT_USAGE and "\n" not in msg and msg.startswith("expectations file ")
    return msg


def test_the_good_file_loads(tmp_path: Path) -> None:
    e = _load(tmp_path, GOOD)
    assert (e.gpu_count, e.nvlinks_per_pair, e.nics) == (8, 18, ("mlx5_0", "mlx5_1"))
    assert _load(tmp_path, {**GOOD, "pcie_gen": None, "pcie_width": None, "gpu_model": "", "nics": []})
    assert set(WRONG_TYPE) == set(SCHEMA) and set(OUT_OF_RANGE) == set(SCHEMA) - {"mig_enabled"}


@pytest.mark.parametrize(("key", "value"), [(k, v) for k, vs in WRONG_TYPE.items() for v in vs])
def test_every_key_with_a_wrong_type_is_refused_by_name(tmp_path: Path, key: str, value: Any) -> None:
    msg = _refused(tmp_path, {**GOOD, key: value})
    assert f": {key}" in msg and " must be " in msg


@pytest.mark.parametrize(("key", "value"), [(k, v) for k, vs in OUT_OF_RANGE.items() for v in vs])
def test_every_key_out_of_range_is_refused_with_the_range(tmp_path: Path, key: str, value: Any) -> None:
    msg = _refused(tmp_path, {**GOOD, key: value})
    assert f": {key}" in msg and " must be " in msg


def test_messages_name_the_key_path_and_the_allowed_range(tmp_path: Path) -> None:
    msg = _refused(tmp_path, {**GOOD, "gpu_count": -1})
    assert msg.endswith("gpu_count must be an integer 1..64; got -1")
    assert _refused(tmp_path, {**GOOD, "gpu_count": 10**18}).endswith("got 1000000000000000000")
    assert "nvlinks_per_pair must be an integer 0..36; got -5" in _refused(tmp_path, {**GOOD, "nvlinks_per_pair": -5})
    assert "nics[1] must be a non-empty printable name" in _refused(tmp_path, {**GOOD, "nics": ["mlx5_0", ""]})
    assert "pcie_width must be a PCIe link width, one of 1, 2, 4, 8, 12, 16, 32, or null" in _refused(
        tmp_path, {**GOOD, "pcie_width": 3}
    )


@pytest.mark.parametrize(
    ("key", "meant"),
    [
        ("gpu_cout", "gpu_count"),
        ("GPU_COUNT", None),
        ("nvlink_per_pair", "nvlinks_per_pair"),
        ("nvlinks_per_gpus", "nvlinks_per_gpu"),
        ("pcie_generation", "pcie_gen"),
        ("pcie_widht", "pcie_width"),
        ("nic", "nics"),
        ("mig_enable", "mig_enabled"),
        ("gpu_modle", "gpu_model"),
        ("schema_versio", "schema_version"),
        ("zzz", None),
    ],
)
def test_unknown_keys_are_named_with_the_closest_known_key(tmp_path: Path, key: str, meant: str | None) -> None:
    msg = _refused(tmp_path, {**GOOD, key: 1})
    assert f"unknown key {key!r}" in msg
    if meant is not None:
        assert msg.endswith(f"(did you mean {meant!r}?)")
    else:
        assert "(did you mean" in msg or "(known keys: gpu_count," in msg


def test_keys_nested_where_they_do_not_belong(tmp_path: Path) -> None:
    doc = {k: v for k, v in GOOD.items() if k not in ("gpu_count", "gpu_model")}
    msg = _refused(tmp_path, {**doc, "gpu": {"gpu_count": 8, "gpu_model": "NVIDIA H200"}})
    assert "'gpu' holds gpu_count, gpu_model, which belong at the top level" in msg
    wrapped = {"kind": "expectations", "schema_version": 1, "expectations": GOOD}
    assert "'expectations' holds" in _refused(tmp_path, wrapped)


def test_missing_keys_and_contradicting_links(tmp_path: Path) -> None:
    doc = {k: v for k, v in GOOD.items() if k != "nvlinks_per_gpu"}
    assert _refused(tmp_path, doc).endswith("nvlinks_per_gpu is missing; it must be an integer 0..36")
    assert _load(tmp_path, {k: v for k, v in GOOD.items() if k != "mig_enabled"}).mig_enabled is False
    msg = _refused(tmp_path, {**GOOD, "nvlinks_per_gpu": 12})
    assert "nvlinks_per_pair (18) exceeds nvlinks_per_gpu (12)" in msg


def test_check_refuses_a_bad_file_with_one_line_exit_2(tmp_path: Path) -> None:
    """The file is refused whole, in one line; the host is still judged without it (a real fault
    would still fail), and with no fault the check ends exit 2, misconfigured."""
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({**GOOD, "gpu_count": -1}))
    r = runner.invoke(app, ["check", "--replay", "h200-x4", "--expect", str(p)])
    assert r.exit_code == EXIT_USAGE and r.stderr.count("\n") == 1 and "UNKNOWN" in r.stdout
    assert "gpu_count must be an integer 1..64; got -1" in r.stderr


@pytest.mark.slow
def test_every_file_expect_writes_validates(tmp_path: Path) -> None:
    """From every bundled recording through the command, from every derived scenario through
    the same function (most scenarios carry a fault: `expect --force` would write them)."""
    for rec in RECORDINGS:
        out = tmp_path / f"{rec.stem}.json"
        r = runner.invoke(app, ["expect", "--force", "-o", str(out), "--replay", rec.stem])
        assert r.exit_code == 0, r.output
        assert load_expectations(out) == from_snapshot(probe_host(rec.stem).snapshot)
    for name in (d["name"] for d in DERIVED if d["name"] != "x4-nvml-hang"):  # a wedged driver: no host
        out = tmp_path / f"{name}.json"
        out.write_text(codec.dumps(from_snapshot(probe_host(str(scenario_path(name))).snapshot)))
        load_expectations(out)
