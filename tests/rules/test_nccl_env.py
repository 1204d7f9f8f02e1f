"""The process environment: captured in the probe (bounded reads), recorded, replayed, and read
by the TD6xx rules the way NCCL's own parsers read it."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import FIXTURES, ROOT, scenario_path

from topodoctor.core.codec import from_jsonable, to_jsonable
from topodoctor.core.errors import InputError
from topodoctor.core.probed import ProbeError, Unsupported
from topodoctor.model.environment import ConfFile, Environment, ProcessEnvironment, kept_conf, parse_conf
from topodoctor.model.findings import Finding
from topodoctor.nccl.values import read_integer, read_level
from topodoctor.probe.environment import TOPO_MAX_BYTES, capture_process, conf_paths
from topodoctor.probe.sources import probe_host
from topodoctor.rules import Context, evaluate


def lint(env: dict[str, str], host: str = "h200-x4", system_conf: str = "/nonexistent/nccl.conf") -> list[Finding]:
    process = capture_process(env, system_conf=system_conf, affinity=Unsupported())
    return evaluate(Context(probe_host(_source(host)).snapshot, Environment.of(process)), select=["TD6"])


def _source(host: str) -> str:
    return str(scenario_path(host)) if scenario_path(host).exists() else host


def codes(env: dict[str, str], host: str = "h200-x4", **kw: Any) -> set[str]:
    return {f.code for f in lint(env, host, **kw)}


def only(code: str, found: list[Finding]) -> Finding:
    (f,) = [f for f in found if f.code == code]
    return f


# --- how NCCL reads a value


@pytest.mark.parametrize(
    ("text", "value", "clean"),
    [
        ("1", 1, True),
        (" 1 ", 1, True),
        ("0x14", 20, True),
        ("-1", -1, True),
        ("true", 0, False),
        ("1abc", 1, False),
        ("010", 8, False),  # octal
        ("08", 0, False),  # octal stops at 8
        ("0x", 0, False),
        ("", None, False),  # empty: NCCL keeps its default
        ("99999999999999999999", None, False),  # out of range: the default
    ],
)
def test_integers_read_like_strtoll(text: str, value: int | None, clean: bool) -> None:
    r = read_integer(text)
    assert (r.value, r.clean) == (value, clean)


@pytest.mark.parametrize(
    ("text", "level"),
    [
        *[("LOC", "LOC"), ("NVL", "NVL"), ("SYS", "SYS"), ("0", "LOC"), ("1", "PIX"), ("3", "PHB"), ("9", "SYS")],
        *[("2abc", "PXB"), ("nvl", None), (" NVL", None), ("NODE", None), ("DIS", None), ("", None), ("X", None)],
    ],
)
def test_levels_read_like_ncclGetLevel(text: str, level: str | None) -> None:
    assert read_level(text) == level


# --- rules: each a firing and a near-miss case


@pytest.mark.parametrize(
    ("env", "host", "fires", "silent"),
    [
        ({"NCCL_P2P_DISABLE": "1"}, "h200-x4", {"TD601"}, {"TD620"}),
        ({"NCCL_P2P_DISABLE": "1abc"}, "h200-x4", {"TD601", "TD620"}, set()),
        ({"NCCL_P2P_DISABLE": "true"}, "h200-x4", {"TD620"}, {"TD601"}),
        ({"NCCL_P2P_DISABLE": "2"}, "h200-x4", {"TD620"}, {"TD601"}),
        ({"NCCL_P2P_DISABLE": "0"}, "h200-x4", set(), {"TD601", "TD620"}),
        ({"NCCL_P2P_DISABLE": "99999999999999999999"}, "h200-x4", {"TD620"}, {"TD601"}),
        ({"NCCL_P2P_LEVEL": "0"}, "h200-x4", {"TD602"}, {"TD620"}),
        ({"NCCL_P2P_LEVEL": "LOC"}, "h200-x4", {"TD602"}, set()),
        ({"NCCL_P2P_LEVEL": "loc"}, "h200-x4", {"TD620"}, {"TD602"}),
        ({"NCCL_P2P_LEVEL": "LOC", "NCCL_P2P_DISABLE": "1"}, "h200-x4", {"TD601"}, {"TD602"}),
        ({"NCCL_P2P_LEVEL": "NVL"}, "h200-x4", set(), {"TD602", "TD620"}),
        ({"NCCL_SHM_DISABLE": "1"}, "h200-x4", {"TD603"}, set()),
        ({"NCCL_SHM_DISABLE": "yes"}, "h200-x4", {"TD620"}, {"TD603"}),
        ({"NCCL_IB_DISABLE": "1"}, "hgx-8gpu-2socket", {"TD604"}, set()),
        ({"NCCL_IB_DISABLE": "0"}, "hgx-8gpu-2socket", set(), {"TD604", "TD620"}),
        ({"NCCL_IB_TIMEOUT": "08"}, "h200-x4", {"TD609", "TD620"}, set()),
        ({"NCCL_IB_TIMEOUT": "0x14"}, "h200-x4", set(), {"TD609", "TD620"}),
        ({"NCCL_IGNORE_DISABLED_P2P": "1"}, "h200-x4", {"TD612"}, set()),
        ({"NCCL_IGNORE_DISABLED_P2P": "0"}, "h200-x4", set(), {"TD612"}),
        ({"NCCL_NVLS_ENABLE": "false"}, "h200-x4", {"TD618", "TD620"}, set()),
        ({"NCCL_NVLS_ENABLE": "1"}, "h200-x4", set(), {"TD618"}),
        ({"NCCL_NET_GDR_LEVEL": "phb"}, "h200-x4", {"TD620"}, set()),
        ({"NCCL_NET_GDR_LEVEL": "PHB"}, "h200-x4", set(), {"TD620"}),
        ({"NCCL_BUFFSIZE": "4M"}, "h200-x4", {"TD620"}, set()),
        ({"NCCL_BUFFSIZE": "4194304"}, "h200-x4", set(), {"TD620"}),
        ({"NCCL_DEBUG": "INF0"}, "h200-x4", {"TD620"}, set()),
        ({"NCCL_DEBUG": "info"}, "h200-x4", set(), {"TD620"}),
        ({"NCCL_SOCKET_FAMILY": "inet6"}, "h200-x4", {"TD620"}, set()),
        ({"NCCL_SOCKET_FAMILY": "AF_INET6"}, "h200-x4", set(), {"TD620"}),
        ({"NCCL_PAT_ENABLE": "0"}, "h200-x4", set(), {"TD614"}),  # a variable of current NCCL
    ],
    ids=lambda v: str(sorted(v) if isinstance(v, set) else v),
)
def test_rule_cases(env: dict[str, str], host: str, fires: set[str], silent: set[str]) -> None:
    found = codes(env, host)
    assert fires <= found and not silent & found, found


def test_true_says_p2p_stays_on() -> None:
    f = only("TD620", lint({"NCCL_P2P_DISABLE": "true"}))
    assert f.severity == "warning" and f.subject == "env:NCCL_P2P_DISABLE"
    assert "as 0" in f.message and "P2P stays on" in f.message and "disabled" not in f.message


def test_level_typo_names_the_level() -> None:
    assert "NVL" in only("TD620", lint({"NCCL_P2P_LEVEL": "nvl"})).message
    assert "PHB" in only("TD620", lint({"NCCL_P2P_LEVEL": "NODE"})).message
    assert "as PXB" in only("TD620", lint({"NCCL_P2P_LEVEL": "2abc"})).message


def test_ib_timeout_says_how_nccl_read_it() -> None:
    assert "reads as 0" in only("TD609", lint({"NCCL_IB_TIMEOUT": "08"})).message


# --- config files, read as NCCL reads them


def test_conf_parsing_follows_setEnvFile() -> None:
    text = "# c\r\nNCCL_A=1\r\nNCCL_A=2\nNCCL_B = 3\n  # indented note\njunk line\nNCCL_C= x \n"
    pairs, problems = parse_conf("/f", text)
    assert pairs == [("NCCL_A", "1"), ("NCCL_A", "2"), ("NCCL_C", " x ")]
    assert [p.message.split(": ")[0] for p in problems] == ["/f:4", "/f:6"]
    assert "NCCL_B is not set" in problems[0].message
    # a line that is not an NCCL setting is counted at its number, never quoted
    assert problems[1].message == "/f:6: not NAME=value, not an NCCL setting (not shown)"
    # what a recording keeps parses the same, line for line
    assert parse_conf("/f", kept_conf(text)) == (pairs, problems) and "junk" not in kept_conf(text)


def test_first_file_and_first_line_win_and_the_environment_wins_over_all(tmp_path: Path) -> None:
    user, system = tmp_path / "user.conf", tmp_path / "nccl.conf"
    user.write_text("NCCL_IB_TIMEOUT=14\nNCCL_IB_TIMEOUT=40\n")
    system.write_text("NCCL_IB_TIMEOUT=40\nNCCL_P2P_DISABLE=1\nNCCL_SHM_DISABLE=1\n")
    env = Environment.of(capture_process({"NCCL_CONF_FILE": str(user), "NCCL_SHM_DISABLE": "0"}, str(system)))
    assert (env.get("NCCL_IB_TIMEOUT"), env.where("NCCL_IB_TIMEOUT")) == ("14", str(user))
    assert (env.get("NCCL_P2P_DISABLE"), env.where("NCCL_P2P_DISABLE")) == ("1", str(system))
    assert (env.get("NCCL_SHM_DISABLE"), env.where("NCCL_SHM_DISABLE")) == ("0", "environment")


def test_home_conf_is_read_only_without_NCCL_CONF_FILE() -> None:
    assert conf_paths({"HOME": "/h"}, "/etc/nccl.conf") == ["/h/.nccl.conf", "/etc/nccl.conf"]
    assert conf_paths({"HOME": "/h", "NCCL_CONF_FILE": "/u"}, "/etc/nccl.conf") == ["/u", "/etc/nccl.conf"]
    assert conf_paths({"NCCL_CONF_FILE": ""}, "/etc/nccl.conf") == ["/etc/nccl.conf"]


def test_missing_NCCL_CONF_FILE_warns_and_a_missing_system_file_does_not(tmp_path: Path) -> None:
    f = only("TD619", lint({"NCCL_CONF_FILE": str(tmp_path / "nope.conf")}))
    assert f.severity == "warning" and "does not exist" in f.message
    assert "TD619" not in codes({}, system_conf=str(tmp_path / "nccl.conf"))


def test_spaces_around_equals_warn(tmp_path: Path) -> None:
    conf = tmp_path / "c.conf"
    conf.write_text("NCCL_P2P_DISABLE = 1\n")
    found = lint({"NCCL_CONF_FILE": str(conf)})
    assert "TD619" in {f.code for f in found} and "TD601" not in {f.code for f in found}


def test_a_binary_conf_file_is_one_finding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A binary file named by mistake: NUL bytes, invalid UTF-8, thousands of lines without '='."""
    conf = tmp_path / "libfoo.so"
    conf.write_bytes(b"\x7fELF\x02\x01\x00\x00" + b"\xff\xfe garbage \x00 line\n" * 4000 + b"a b=c\n" * 100)
    found = lint({"NCCL_CONF_FILE": str(conf)})
    f = only("TD619", found)
    assert "is a binary file" in f.message and f.evidence["errors"] == [f.message] and f.evidence["more"] == 0
    from topodoctor.cli.commands import main

    monkeypatch.setenv("NCCL_CONF_FILE", str(conf))
    assert main(["check", "--replay", "h200-x4"]) == 0
    assert len(capsys.readouterr().out.splitlines()) < 60  # one finding per file, not a line per byte


def test_bad_lines_of_a_conf_file_are_one_finding_with_capped_evidence(tmp_path: Path) -> None:
    conf = tmp_path / "c.conf"
    conf.write_text("NCCL_DEBUG=INFO\n" + "".join(f"line {i} without an equals sign\n" for i in range(50)))
    f = only("TD619", lint({"NCCL_CONF_FILE": str(conf)}))
    assert f.message.startswith(f"{conf}:2: not NAME=value") and "(and 49 more problems in this file)" in f.message
    assert len(f.evidence["errors"]) == 3 and f.evidence["more"] == 47


def _fifo(tmp_path: Path) -> str:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return str(path)


def _huge(tmp_path: Path) -> str:
    path = tmp_path / "huge"
    with open(path, "wb") as f:
        f.truncate(TOPO_MAX_BYTES + 1)  # sparse: costs no disk
    return str(path)


@pytest.mark.parametrize("make", [_fifo, lambda _: "/dev/zero", _huge, str], ids=["fifo", "zero", "huge", "dir"])
def test_hostile_setting_files_become_could_not_read(tmp_path: Path, make: Any) -> None:
    path = make(tmp_path)
    t0 = time.monotonic()
    process = capture_process({"NCCL_CONF_FILE": path, "NCCL_TOPO_FILE": path}, "/nonexistent/nccl.conf")
    assert time.monotonic() - t0 < 3
    assert isinstance(process.conf_files[0].text, ProbeError)
    assert process.topo_file is not None and isinstance(process.topo_file.text, ProbeError)
    found = evaluate(Context(probe_host("h200-x4").snapshot, Environment.of(process)), select=["TD6"])
    assert "could not read" in only("TD619", found).message
    assert "could not be read" in only("TD608", found).message


# --- NCCL_TOPO_FILE, from the captured text


def test_topo_file_checks_bus_ids_of_the_captured_text(tmp_path: Path) -> None:
    xml = tmp_path / "topo.xml"
    snap = probe_host("h200-x4").snapshot
    from topodoctor.report.nccl_topo import nccl_topology_xml

    good = nccl_topology_xml(snap)
    xml.write_text(good.replace("</cpu>", '<pci busid="0000:9a:00.0" link_speed="32.0 GT/s PCIe"/></cpu>', 1))
    process = capture_process({"NCCL_TOPO_FILE": str(xml)}, "/nonexistent/nccl.conf")
    xml.unlink()  # the rule reads what the probe captured, never the file
    found = evaluate(Context(snap, Environment.of(process)), select=["TD6"])
    bad = [f for f in found if f.code == "TD608" and f.evidence.get("check") == "bus-id"]
    assert [f.evidence["busid"] for f in bad] == ["0000:9a:00.0"]
    xml.write_text(good)
    assert "TD608" not in codes({"NCCL_TOPO_FILE": str(xml)})
    assert "TD608" in codes({"NCCL_TOPO_FILE": str(tmp_path / "absent.xml")})


def test_topo_file_named_in_a_conf_file_is_captured(tmp_path: Path) -> None:
    xml, conf = tmp_path / "topo.xml", tmp_path / "c.conf"
    xml.write_text("<system></system>")
    conf.write_text(f"NCCL_TOPO_FILE={xml}\n")
    process = capture_process({"NCCL_CONF_FILE": str(conf)}, "/nonexistent/nccl.conf")
    assert process.topo_file == ConfFile(str(xml), "<system></system>")
    xml.write_text("<system>")  # cut short: not NCCL's XML, so not kept; TD608 says why
    topo = capture_process({"NCCL_CONF_FILE": str(conf)}, "/nonexistent/nccl.conf").topo_file
    assert topo is not None and isinstance(topo.text, ProbeError)
    assert topo.text.error.startswith("not an NCCL topology file: is not well-formed XML (no element found")


# --- recorded and replayed


def test_process_round_trips_through_json() -> None:
    p = ProcessEnvironment(
        {"NCCL_DEBUG": "INFO"},
        (ConfFile("/etc/nccl.conf", Unsupported("absent")), ConfFile("/u", ProbeError("no", "read /u"))),
        ConfFile("/t.xml", "<system/>"),
        (0, 1, 2),
    )
    assert from_jsonable(ProcessEnvironment, json.loads(json.dumps(to_jsonable(p)))) == p


def test_capture_keeps_only_what_nccl_and_the_job_scope_need() -> None:
    env = {"NCCL_X": "1", "CUDA_VISIBLE_DEVICES": "0", "TORCH_NCCL_Y": "1", "SLURM_JOB_GPUS": "0", "PATH": "/bin"}
    p = capture_process(env, "/nonexistent/nccl.conf")
    assert set(p.environ) == {"NCCL_X", "CUDA_VISIBLE_DEVICES", "TORCH_NCCL_Y", "SLURM_JOB_GPUS"}
    assert p.cpu_affinity == tuple(sorted(os.sched_getaffinity(0)))


def test_replay_judges_the_recorded_affinity_not_this_machines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    process = probe_host("h200-x4").process
    assert process is not None and process.cpu_affinity == tuple(range(64))


def test_bundled_recordings_hold_their_processs_affinity() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("backfill_process", FIXTURES / "backfill_process.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    for path in sorted((ROOT / "topodoctor" / "probe" / "recordings").glob("*.json")):
        rec = json.loads(path.read_text())
        assert rec["process"]["cpu_affinity"] == script.online_cpus(rec), path.name
        assert not script.backfill(rec)  # already done: the transform is idempotent


def _with_process(tmp_path: Path, source: Path, process: Any) -> str:
    data = json.loads(source.read_text())
    if process is None:
        data.pop("process", None)
    else:
        data["process"] = process
    out = tmp_path / "rec.json"
    out.write_text(json.dumps(data))
    return str(out)


def test_replay_uses_the_recorded_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = to_jsonable(ProcessEnvironment({"NCCL_P2P_LEVEL": "LOC"}, (), None, (0, 1)))
    rec = _with_process(tmp_path, ROOT / "topodoctor" / "probe" / "recordings" / "h200-x4.json", recorded)
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")  # the replaying process's: not the one judged
    p = probe_host(rec)
    assert p.process is not None
    found = {f.code for f in evaluate(Context(p.snapshot, Environment.of(p.process)), select=["TD6"])}
    assert found == {"TD602"}


def test_recording_without_a_process_lints_this_environment_and_cannot_judge_affinity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rec = _with_process(tmp_path, ROOT / "topodoctor" / "probe" / "recordings" / "h200-x4.json", None)
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "nosuch")
    p = probe_host(rec)
    assert p.process is not None and p.process.environ["NCCL_SOCKET_IFNAME"] == "nosuch"
    found = evaluate(Context(p.snapshot, Environment.of(p.process)))
    assert "TD605" in {f.code for f in found}
    assert any(f.code == "TD901" and "TD403" in f.evidence["rules"] for f in found)


@pytest.mark.parametrize(("cpus", "fires"), [(list(range(64, 128)), True), (list(range(128)), False)])
def test_affinity_rule_reads_the_recorded_affinity(tmp_path: Path, cpus: list[int], fires: bool) -> None:
    rec = _with_process(tmp_path, scenario_path("hgx-8gpu-2socket"), {"cpu_affinity": cpus})
    p = probe_host(rec)
    assert p.process is not None
    found = evaluate(Context(p.snapshot, Environment.of(p.process)), select=["TD403"])
    assert bool(found) is fires


@pytest.mark.parametrize("bad", [5, {"cpu_affinity": "0-3"}, {"environ": {}}, {"other": 1}])
def test_a_corrupt_process_is_an_input_error(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(InputError, match="process"):
        probe_host(_with_process(tmp_path, ROOT / "topodoctor" / "probe" / "recordings" / "h200-x4.json", bad))
