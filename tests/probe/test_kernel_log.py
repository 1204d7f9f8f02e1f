"""XID events from real kernel-log lines (fixtures/kernel-log), read through the probe's file
boundary as /dev/kmsg records, and the TD52x rules on a recorded host carrying them."""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import FIXTURES
from tests_support import judged

from topodoctor.core.probed import ProbeError, Unsupported
from topodoctor.model.snapshot import HostSnapshot, KernelEvents
from topodoctor.probe.environment import capture_environment
from topodoctor.probe.kernel_log import parse_line, parse_lines, read_kernel_events
from topodoctor.probe.replay import ReplaySysfs
from topodoctor.probe.sources import probe_host
from topodoctor.probe.sysfs import LiveSysfs
from topodoctor.rules import Context, evaluate

LOGS = FIXTURES / "kernel-log"
X4 = probe_host("h200-x4").snapshot
UPTIME_S = 700_000.0  # later than every dmesg time in the fixtures


def lines(name: str) -> list[str]:
    return [ln for ln in (LOGS / name).read_text().splitlines() if ln and not ln.startswith("#")]


def kmsg(line: str, seq: int, boot_s: float) -> str:
    """A /dev/kmsg record ("level,seq,microseconds,flags;message") carrying the driver's message."""
    message = line[line.index("NVRM:") :]
    return f"4,{seq},{int(boot_s * 1e6)},-;{message}"


def _on_gpu(line: str, gpu: int) -> str:
    """The same line, logged by GPU ``gpu`` of the recorded host (its PCI address put in place)."""
    bus = str(X4.gpu(gpu).bus_id)[: -len(".0")]
    return re.sub(r"\(PCI:[0-9A-Fa-f:.]+", f"(PCI:{bus}", line)


def replayed(records: list[str] | None, error: str | None = None, uptime: float = UPTIME_S) -> ReplaySysfs:
    entry: dict[str, object] = {"op": "read_records", "path": "/dev/kmsg"}
    entry.update({"error": error} if error else {"result": records})
    return ReplaySysfs([entry, {"op": "read", "path": "/proc/uptime", "result": f"{uptime} 1.0"}], "test")


def with_log(records: list[str], uptime: float = UPTIME_S) -> HostSnapshot:
    return replace(X4, kernel_events=read_kernel_events(replayed(records, uptime=uptime)))


def codes(snap: HostSnapshot, select: str = "TD52") -> dict[str, tuple[str, str]]:
    found = evaluate(Context(snap, capture_environment({})), select=[select, "TD901"])
    return {f.code: (f.severity, f.subject) for f in judged(found)}


@pytest.mark.parametrize(
    ("name", "xids", "buses"),
    [
        ("fallen-off-bus.log", [79], ["0000:44:00.0"]),
        ("nvlink.log", [74, 144, 149, 145], ["0003:00:00.0", "0000:01:00.0", "0000:00:00.0", "0018:01:00.0"]),
        ("ecc.log", [48, 94, 95], ["0000:07:00.0", "0000:01:00.0", "0000:01:00.0"]),
        ("row-remap.log", [63, 64, 63], ["0000:10:1c.0", "0000:07:00.0", "0000:3b:00.0"]),
        ("gsp.log", [119, 120], ["0000:65:00.0", "0000:01:00.0"]),
        ("application.log", [13, 31, 43, 45], ["0000:43:00.0", "0000:08:00.0", "0000:01:00.0", "0000:dc:00.0"]),
        ("other.log", [154, 62], ["0000:01:00.0", "0000:01:00.0"]),
        ("not-xid.log", [], []),
    ],
)
def test_real_lines_parse(name: str, xids: list[int], buses: list[str]) -> None:
    events = parse_lines(lines(name))
    assert [e.code for e in events] == xids
    assert [e.bus_id for e in events] == buses


def test_times_come_from_each_log_s_own_prefix() -> None:
    dmesg, journal_dmesg, bare = lines("nvlink.log")[0], lines("row-remap.log")[0], lines("gsp.log")[0]
    assert parse_line(dmesg).boot_s == pytest.approx(449410.332316)  # type: ignore[union-attr]
    assert parse_line(journal_dmesg).boot_s == pytest.approx(680111.646286)  # type: ignore[union-attr]
    assert parse_line(bare).boot_s is None  # type: ignore[union-attr]
    assert parse_line(kmsg(bare, 7, 1234.5)).boot_s == pytest.approx(1234.5)  # type: ignore[union-attr]
    event = parse_line(lines("ecc.log")[2])
    assert event is not None and event.text.startswith("pid=7062, Uncontained: LTC TAG")


def test_unreadable_log_is_could_not_check() -> None:
    got = read_kernel_events(replayed(None, error="EPERM"))
    assert isinstance(got, ProbeError) and got.error == "EPERM"
    found = codes(replace(X4, kernel_events=got))
    assert set(found) == {"TD901"} and found["TD901"][1] == "kernel-log"


def test_a_snapshot_from_before_kernel_events_says_nothing() -> None:
    old = replace(X4, kernel_events=Unsupported("NOT_PROBED"))
    assert codes(old) == {}


def test_the_recorded_hosts_log_is_read_and_quiet() -> None:
    assert X4.kernel_events == KernelEvents("/dev/kmsg", None, ())
    assert codes(X4) == {}


def test_a_quiet_log_raises_nothing() -> None:
    quiet = [kmsg(ln, i, 100.0) for i, ln in enumerate(lines("not-xid.log"))]
    snap = with_log(quiet)
    assert isinstance(snap.kernel_events, KernelEvents) and snap.kernel_events.xids == ()
    assert codes(snap) == {}


@pytest.mark.parametrize(
    ("name", "pick", "code", "severity"),
    [
        ("fallen-off-bus.log", 0, "TD520", "critical"),
        ("nvlink.log", 0, "TD521", "error"),  # 74
        ("nvlink.log", 1, "TD521", "warning"),  # 144 "Nonfatal"
        ("nvlink.log", 2, "TD521", "error"),  # 149 "Fatal"
        ("ecc.log", 0, "TD522", "error"),  # 48
        ("ecc.log", 1, "TD522", "warning"),  # 94 contained
        ("ecc.log", 2, "TD522", "error"),  # 95 uncontained
        ("row-remap.log", 0, "TD523", "warning"),  # 63
        ("row-remap.log", 1, "TD523", "error"),  # 64
        ("gsp.log", 0, "TD524", "error"),
        ("gsp.log", 1, "TD524", "error"),
        ("application.log", 0, "TD525", "info"),
        ("application.log", 2, "TD525", "info"),
        ("other.log", 0, "TD526", "error"),  # 154 asks for a reset
        ("other.log", 1, "TD526", "warning"),  # 62: not classified
    ],
)
def test_each_family_fires_on_its_gpu(name: str, pick: int, code: str, severity: str) -> None:
    line = _on_gpu(lines(name)[pick], 2)
    found = codes(with_log([kmsg(line, 1, UPTIME_S - 60)]))
    assert found == {code: (severity, "GPU2")}


def test_old_events_are_warnings_at_most() -> None:
    line = _on_gpu(lines("fallen-off-bus.log")[0], 1)
    found = codes(with_log([kmsg(line, 1, 1000.0)], uptime=1000.0 + 3 * 86400))
    assert found == {"TD520": ("warning", "GPU1")}


def test_events_gather_per_gpu_with_their_count() -> None:
    app = [_on_gpu(ln, 0) for ln in lines("application.log")] + [_on_gpu(lines("application.log")[0], 3)]
    found = evaluate(Context(with_log([kmsg(ln, i, 500.0 + i) for i, ln in enumerate(app)]), capture_environment({})))
    mine = [f for f in found if f.code == "TD525"]
    assert [(f.subject, f.evidence["count"], f.evidence["codes"]) for f in mine] == [
        ("GPU0", 4, [13, 31, 43, 45]),
        ("GPU3", 1, [13]),
    ]
    assert mine[0].evidence["last_age_s"] == pytest.approx(UPTIME_S - 503.0)


def test_an_event_for_a_gpu_nvml_does_not_list_names_its_address() -> None:
    found = codes(with_log([kmsg(lines("fallen-off-bus.log")[0], 1, UPTIME_S - 5)]))
    assert found == {"TD520": ("critical", "pci:00000000:44:00.0")}  # as nvidia-smi names a GPU


def test_the_live_reader_takes_a_saved_log_under_a_root(tmp_path: Path) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "kmsg").write_text("\n".join(lines("ecc.log") + lines("not-xid.log")) + "\n")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "uptime").write_text("123.4 99.0\n")
    got = read_kernel_events(LiveSysfs(str(tmp_path)))
    assert isinstance(got, KernelEvents) and [e.code for e in got.xids] == [48, 94, 95] and got.uptime_s == 123.4


def test_the_live_reader_never_blocks_on_a_record_device(tmp_path: Path) -> None:
    """A FIFO with a writer still attached blocks a plain read at its end, as /dev/kmsg does."""
    fifo = tmp_path / "kmsg"
    os.mkfifo(fifo)
    writer = os.open(fifo, os.O_RDWR)
    try:
        os.write(writer, ("\n".join(kmsg(ln, i, 1.0) for i, ln in enumerate(lines("gsp.log"))) + "\n").encode())
        from topodoctor.probe.sysfs import read_records

        assert [parse_line(r).code for r in read_records(str(fifo), "NVRM: Xid")] == [119, 120]  # type: ignore[union-attr]
    finally:
        os.close(writer)


def test_a_missing_log_is_could_not_check(tmp_path: Path) -> None:
    got = read_kernel_events(LiveSysfs(str(tmp_path)))
    assert isinstance(got, ProbeError) and got.error == "ENOENT"
