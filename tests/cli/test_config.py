"""The settings file (topodoctor/cli/config.py): the spec's settings read from a TOML table per
command, the environment above it and the command line above both; `topodoctor config` shows
them; a bad file is exit 2 in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from topodoctor.cli import config
from topodoctor.cli.commands import main
from topodoctor.cli.table import COMMANDS
from topodoctor.core.options import specs

FILE = """[check]
fail-level = "warning"

[fleet]
tolerance = 0.1

[fleet.history]
counter-min-rise = ["nvlink_crc=50"]
"""


@pytest.fixture
def settings_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.startswith("TOPODOCTOR_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(config, "SYSTEM_FILE", tmp_path / "absent.toml")  # this machine's own stays out
    path = tmp_path / "config.toml"
    path.write_text(FILE)
    return path


def _value(command: str, key: str, given: dict[str, object], path: Path | None, environ: dict[str, str]) -> tuple:
    v = next(v for v in config.resolve(command, given, path, environ) if v.setting.key == key)
    return v.value, v.source


def test_a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default(settings_file: Path) -> None:
    env = {"TOPODOCTOR_FLEET_TOLERANCE": "0.2"}
    assert _value("fleet", "tolerance", {"tolerance": 0.3}, settings_file, env) == (0.3, "flag")
    assert _value("fleet", "tolerance", {}, settings_file, env) == (0.2, "environment TOPODOCTOR_FLEET_TOLERANCE")
    assert _value("fleet", "tolerance", {}, settings_file, {}) == (0.1, f"file {settings_file}")
    assert _value("fleet", "tolerance", {}, None, {}) == (0.05, "default")
    assert _value("fleet", "counter-min-rise", {}, settings_file, {}) == (
        ("nvlink_crc=50",),
        f"file {settings_file}",
    )


def test_the_file_is_named_by_the_flag_then_the_environment_then_the_system(
    settings_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other.toml"
    assert config.config_path(settings_file, {config.FILE_ENV: str(other)}) == (settings_file, "--config")
    assert config.config_path(None, {config.FILE_ENV: str(other)}) == (other, config.FILE_ENV)
    assert config.config_path(None, {}) == (None, "")
    monkeypatch.setattr(config, "SYSTEM_FILE", settings_file)
    assert config.config_path(None, {}) == (settings_file, "system")


def test_the_settings_are_the_specs_own_defaults() -> None:
    """One list: every setting is an option of its command's class, with that option's default."""
    seen = 0
    for name in COMMANDS:
        defaults = {n: d for n, _, d in specs(COMMANDS[name].options_class())}
        for s in config.settings(name):
            assert defaults[s.name] == s.default, (name, s.key)
            seen += 1
    assert seen >= 30


def test_a_check_runs_with_the_files_setting_and_the_flag_wins(
    settings_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv, level in (([], "warning"), (["--fail-level", "critical"], "critical")):
        main(["check", "--replay", "h200-x4", "-f", "json", "--config", str(settings_file), *argv])
        assert json.loads(capsys.readouterr().out)["fail_level"] == level


def test_fleet_keeps_a_dozen_flags_and_its_thresholds_still_take_one() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "topodoctor", "fleet", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    flags = {w for w in shown.split() if w.startswith("--")}
    assert "--drift-tolerance" not in flags and "--tolerance" not in flags and "--config" in flags
    assert len(flags) <= 13, sorted(flags)
    for threshold in ("--drift-tolerance", "--tolerance"):  # still read, for one run
        r = subprocess.run([sys.executable, "-m", "topodoctor", "fleet", threshold, "0.95", "x"], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
        assert r.returncode == 2 and "0.95" in r.stderr and "0.9" in r.stderr


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[fleet\n", "is not TOML: Expected ']'"),
        ("[fleet]\ntolerence = 0.1\n", "no key 'tolerence' in [fleet]"),
        ("[flet]\ntolerance = 0.1\n", "no table [flet]"),
        ("tolerance = 0.1\n", "no key 'tolerance' outside a table"),
        ('[fleet]\ntolerance = "x"\n', "[fleet]: tolerance must be a number"),
        ("[fleet]\ntolerance = 0.95\n", "[fleet]: 0.95 is above 0.9"),
        ("[fleet.history]\nlemon-k = 1.5\n", "[fleet.history]: lemon-k must be an integer"),
        ('[check]\nfail-level = "fatal"\n', "'fatal' is not one of"),
        ('[fleet.history]\ncounter-min-rise = "x=1"\n', "counter-min-rise must be a list of strings"),
    ],
)
def test_a_bad_file_is_one_line_and_exit_2(text: str, said: str, tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    for argv in (["config"], ["fleet", str(tmp_path)], ["check", "--replay", "h200-x4", "-f", "line"]):
        r = subprocess.run([sys.executable, "-m", "topodoctor", *argv, "--config", str(path)], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
        out = (r.stdout + r.stderr).strip()
        assert r.returncode == 2 and said in out and len(out.splitlines()) == 1, (argv, out)


def test_a_missing_file_or_one_that_is_no_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, said in ((tmp_path / "missing.toml", "not found"), (fifo, "config file")):
        r = subprocess.run([sys.executable, "-m", "topodoctor", "config", "--config", str(path)], capture_output=True,
                           text=True, timeout=60)  # fmt: skip
        assert r.returncode == 2 and said in r.stderr and len(r.stderr.splitlines()) == 1, r.stderr


def test_without_a_toml_reader_a_file_is_one_line(settings_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> object:
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(config.importlib, "import_module", missing)  # Python 3.10 without tomli
    with pytest.raises(config.InputError, match=r"needs Python 3.11 or later, or `pip install tomli`"):
        config.load(settings_file)
    assert config.resolve("fleet", {}, None, {})[0].source == "default"  # no file: nothing to read


def test_config_shows_every_setting_its_value_and_where_it_came_from(
    settings_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TOPODOCTOR_FLEET_HISTORY_DRIFT_TOLERANCE", "0.25")
    assert main(["config", "--config", str(settings_file), "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {(r["table"], r["key"]): r for r in doc["settings"]}
    assert len(rows) == len(list(config.every_setting())) and doc["file"] == str(settings_file)
    assert rows[("fleet.history", "drift-tolerance")]["value"] == 0.25
    assert (
        rows[("fleet.history", "drift-tolerance")]["source"] == "environment TOPODOCTOR_FLEET_HISTORY_DRIFT_TOLERANCE"
    )
    assert rows[("check", "fail-level")]["source"] == f"file {settings_file}"
    assert main(["config", "fleet", "--config", str(settings_file)]) == 0
    text = capsys.readouterr().out
    assert "[fleet]\ntolerance = 0.1  # file" in text and "[check]" not in text and "[fleet.history]" in text


def test_docs_config_names_every_setting() -> None:
    page = (ROOT / "docs" / "config.md").read_text()
    missing = [f"[{s.table}] {s.key}" for s in config.every_setting() if f"`{s.key}`" not in page]
    assert not missing, missing
    assert "flag > environment > file > default" in page
