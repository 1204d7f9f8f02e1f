"""Nothing leaves the host that should not: a secret file (a password file, as a prolog running as
root can read) behind every variable that names a file is quoted by no output format, no finding
and no recording; only NCCL's own settings (``NCCL_...=value`` lines) and topology XML are shown or
kept, and a recording judges the same as the files it was made from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topodoctor.cli.commands import main
from topodoctor.core.codec import to_jsonable
from topodoctor.model.environment import Environment, ProcessEnvironment
from topodoctor.probe import sources
from topodoctor.probe.environment import capture_process, replayed_process

MARK = "s3cr3t-hash"
# What /etc/shadow holds, with a line shaped like a setting and one like NCCL's own
SECRET = f"root:$6${MARK}:20228:0:99999:7:::\ndaemon:*:20228:0:99999:7:::\npassword={MARK}\n=${MARK}\n"
# Every NCCL variable whose value is a path (NCCL's src/misc/param.cc and its docs)
FILE_VARIABLES = (
    "NCCL_CONF_FILE",
    "NCCL_TOPO_FILE",
    "NCCL_GRAPH_FILE",
    "NCCL_DEBUG_FILE",
    "NCCL_TOPO_DUMP_FILE",
    "NCCL_GRAPH_DUMP_FILE",
)
FORMATS = (["-f", "text"], ["-f", "json"], ["-f", "line"], ["-f", "prometheus"])


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    p = tmp_path / "shadow"
    p.write_text(SECRET)
    return p


def _clean(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    for name in FILE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(home))


def _outputs(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> str:
    """Everything `check` and `scan` print and write, in every format, of the bundled 4 x H200."""
    seen = []
    for fmt in FORMATS:
        main(["check", "--replay", "h200-x4", *fmt])
        got = capsys.readouterr()
        seen += [got.out, got.err]
    metrics = tmp_path / "check.prom"
    main(["check", "--replay", "h200-x4", "-f", "line", "--metrics", str(metrics)])
    seen += [capsys.readouterr().out, metrics.read_text()]
    for fmt in (["-f", "json"], []):
        main(["scan", "--replay", "h200-x4", *fmt])
        seen.append(capsys.readouterr().out)
    return "\n".join(seen)


@pytest.mark.parametrize("variable", FILE_VARIABLES)
def test_no_output_quotes_the_file_a_variable_names(
    variable: str, secret: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _clean(monkeypatch, tmp_path)
    monkeypatch.setenv(variable, str(secret))
    out = _outputs(capsys, tmp_path)
    assert MARK not in out and "root:" not in out and "daemon:" not in out
    if variable == "NCCL_CONF_FILE":  # named, judged, counted: never quoted
        assert f"{secret} holds no NCCL setting: 3 lines not NAME=value (not shown)" in out
    if variable == "NCCL_TOPO_FILE":
        assert "not an NCCL topology file: is not well-formed XML" in out
    recorded = json.dumps(to_jsonable(sources._process(None)))  # what `record` writes as "process"
    assert MARK not in recorded and "root:" not in recorded


def test_home_nccl_conf_and_a_topology_file_named_in_it(
    secret: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _clean(monkeypatch, tmp_path)
    (tmp_path / ".nccl.conf").write_text(f"NCCL_TOPO_FILE={secret}\n# a comment: {MARK}\n{SECRET}NCCL_DEBUG=WARN\n")
    out = _outputs(capsys, tmp_path)
    assert MARK not in out and "root:" not in out
    assert f"{tmp_path}/.nccl.conf:3: not NAME=value, not an NCCL setting (not shown)" in out
    recorded = to_jsonable(sources._process(None))
    text = json.dumps(recorded)
    assert MARK not in text and "root:" not in text
    # the recording keeps the settings, line for line, and judges as the files did
    (conf,) = [f for f in recorded["conf_files"] if f["path"].endswith(".nccl.conf")]
    assert conf["text"].split("\n")[0] == f"NCCL_TOPO_FILE={secret}" and "NCCL_DEBUG=WARN" in conf["text"]
    live = Environment.of(capture_process())
    replayed = Environment.of(replayed_process(recorded, "recording"))
    assert replayed.conf_errors == live.conf_errors
    # a variable that is not a setting is set as NCCL sets it, its value not kept, even in memory
    assert live.conf["password"] == replayed.conf["password"] == "<not kept>"
    assert replayed.conf == live.conf and replayed.conf["NCCL_DEBUG"] == "WARN" and replayed.topo_file is not None


def test_an_old_recording_with_a_whole_file_still_quotes_nothing(tmp_path: Path) -> None:
    # recorded before topodoctor kept only the settings: the whole text is in it
    old = {"environ": {"NCCL_CONF_FILE": "/etc/shadow"}, "conf_files": [{"path": "/etc/shadow", "text": SECRET}],
           "topo_file": None, "cpu_affinity": [0]}  # fmt: skip
    env = Environment.of(replayed_process(old, "old.json"))
    (only,) = env.conf_errors
    assert only.message == "/etc/shadow holds no NCCL setting: 3 lines not NAME=value (not shown)"


def test_a_topology_file_that_is_nccl_xml_is_kept_as_it_is(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _clean(monkeypatch, tmp_path)
    topo = tmp_path / "topo.xml"
    topo.write_text('<system version="1">\n  <cpu numaid="0"/>\n</system>\n')
    monkeypatch.setenv("NCCL_TOPO_FILE", str(topo))
    got = capture_process().topo_file
    assert got is not None and got.text == topo.read_text()
    other = tmp_path / "other.xml"
    other.write_text(f"<secrets><key>{MARK}</key></secrets>")
    monkeypatch.setenv("NCCL_TOPO_FILE", str(other))
    kept = ProcessEnvironment({}, (), capture_process().topo_file, ()).topo_file
    assert kept is not None and MARK not in json.dumps(to_jsonable(kept))
