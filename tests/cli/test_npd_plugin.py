"""The node-problem-detector custom plugin (docs/examples/npd-topodoctor.json): its command run as
NPD runs it (its timeout, its output cut to max_output_length, its exit mapping: 0 OK, 1 NonOK,
anything else Unknown; pkg/custompluginmonitor/plugin/plugin.go) on healthy, faulty and unreadable
hosts, and the node condition it sets: True only for a fault, Unknown for a check that could not
run, cleared when the node is healthy again (custom_plugin_monitor.go's generateStatus)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = json.loads((ROOT / "docs/examples/npd-topodoctor.json").read_text())
RULE = next(r for r in CONFIG["rules"] if r["type"] == "permanent")
GLOBAL = CONFIG["pluginConfig"]
DERIVED = ROOT / "fixtures/derived"


def _seconds(text: str) -> float:
    assert text.endswith("s"), text  # Go durations as the config writes them: "45s"
    return float(text[:-1])


@dataclass
class Ran:
    status: str  # OK, NonOK, Unknown
    message: str


def npd_runs(args: list[str], timeout_s: float | None = None) -> Ran:
    """The rule's command as NPD runs it: the shorter of the rule's and the global timeout, then a
    kill; stdout trimmed and cut at max_output_length; the exit code mapped."""
    limit = timeout_s or min(_seconds(RULE["timeout"]), _seconds(GLOBAL["timeout"]))
    assert RULE["path"] == "/usr/local/bin/topodoctor"  # the console script: here, the same entry point
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [sys.executable, "-m", "topodoctor", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
        start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = p.communicate(timeout=limit)
        code, output = p.returncode, out.decode().strip()
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        code, output = -1, f"Timeout when running plugin {RULE['path']!r}: output - {out.decode().strip()!r}"
    output = output[: GLOBAL["max_output_length"]]
    return Ran("OK" if code == 0 else "NonOK" if code == 1 else "Unknown", output)


class Condition:
    """The node condition the permanent rule sets, as NPD's generateStatus moves it."""

    def __init__(self) -> None:
        (default,) = CONFIG["conditions"]
        self.default = default
        self.status, self.reason, self.message = "False", default["reason"], default["message"]

    def update(self, ran: Ran) -> None:
        status = {"OK": "False", "NonOK": "True"}.get(ran.status, "Unknown")
        if status == "True":
            self.reason, self.message = RULE["reason"], ran.message
        else:  # back to the default reason; Unknown keeps the result's message, for whoever debugs it
            self.reason = self.default["reason"]
            self.message = self.default["message"] if status == "False" else ran.message
        self.status = status


def _args(host: str, **replace: str) -> list[str]:
    args = list(RULE["args"])
    for flag, value in replace.items():
        args[args.index(f"--{flag}") + 1] = value
    return [*args, "--replay", host]


def test_the_config_is_npds_and_the_check_ends_before_npd_kills_it() -> None:
    assert CONFIG["plugin"] == "custom" and RULE["condition"] == CONFIG["conditions"][0]["type"]
    assert {"invoke_interval", "timeout", "max_output_length"} <= set(GLOBAL)
    assert GLOBAL["max_output_length"] == 80  # NPD's default: the message fits it as shipped
    budget = float(RULE["args"][RULE["args"].index("--timeout") + 1])
    assert budget < _seconds(RULE["timeout"]) <= _seconds(GLOBAL["timeout"])  # exit 3 (Unknown) first
    assert RULE["args"][RULE["args"].index("--line-limit") + 1] == str(GLOBAL["max_output_length"])
    # the DaemonSet's ConfigMap ships the same monitor
    text = (ROOT / "docs/examples/npd-daemonset.yaml").read_text()
    block = text.split("topodoctor-monitor.json: |\n", 1)[1].split("\n---", 1)[0]
    assert json.loads(block) == CONFIG


def test_healthy_faulty_unreadable_and_healthy_again() -> None:
    cond = Condition()
    healthy = npd_runs(_args("h200-x4"))
    assert healthy.status == "OK" and healthy.message.startswith("topodoctor OK: 4 GPUs")
    cond.update(healthy)
    assert cond.status == "False"

    fault = npd_runs(_args(str(DERIVED / "x4-fabric-not-started.json")))
    assert fault.status == "NonOK" and len(fault.message) <= 80
    assert fault.message.startswith("topodoctor FAIL TD501 GPU0: fabric manager not ready")
    assert fault.message.count("(") == fault.message.count(")")  # cut at a word, by topodoctor, not NPD
    cond.update(fault)
    assert (cond.status, cond.reason, cond.message) == ("True", "TopodoctorFault", fault.message)

    corrupt = Path(os.environ.get("TMPDIR", "/tmp")) / f"npd-corrupt-{os.getpid()}.json"
    corrupt.write_text('{"kind": "recording", "sche')
    try:
        unreadable = npd_runs(_args(str(corrupt)))
    finally:
        corrupt.unlink()
    assert unreadable.status == "Unknown" and unreadable.message.startswith("topodoctor UNKNOWN: recording")
    cond.update(unreadable)
    assert cond.status == "Unknown"  # never True: a check that could not run is not a fault

    again = npd_runs(_args("h200-x4"))
    cond.update(again)
    healthy_again = ("False", "TopodoctorHealthy", CONFIG["conditions"][0]["message"])
    assert (cond.status, cond.reason, cond.message) == healthy_again


def test_a_check_that_could_not_finish_is_unknown() -> None:
    # NVML hangs: the check's own budget (here 2 s, as shipped 30 s) ends it with exit 3 and its line
    ran = npd_runs(_args(str(DERIVED / "x4-nvml-hang.json"), timeout="2"))
    assert ran.status == "Unknown" and ran.message.startswith("topodoctor UNKNOWN: could not check")
    assert len(ran.message) <= 80


def test_npds_own_kill_is_unknown_too() -> None:
    ran = npd_runs(_args(str(DERIVED / "x4-nvml-hang.json")), timeout_s=1.0)
    assert ran.status == "Unknown" and ran.message.startswith("Timeout when running plugin")
