"""The probe, run over recordings of real hosts through the fake NVML and sysfs."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import RECORDINGS, TOPO_TEXT

from topodoctor.core.codec import to_jsonable
from topodoctor.core.errors import InputError, ReplayMismatch
from topodoctor.probe.record import RecordingNvml, RecordingSysfs, build_recording, scrub
from topodoctor.probe.replay import bundled_names, recording_from_data
from topodoctor.probe.sources import probe_host
from topodoctor.topology.topo_matrix import build_matrix, diff, parse_nvidia_smi


@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda p: p.stem)
def test_replay_equals_the_live_scan_it_was_recorded_with(rec: Path) -> None:
    data = json.loads(rec.read_text())
    assert data["snapshot"] is not None
    assert to_jsonable(probe_host(str(rec)).snapshot) == data["snapshot"]


@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda p: p.stem)
def test_matrix_equals_nvidia_smi_topo_of_the_same_host(rec: Path) -> None:
    theirs = parse_nvidia_smi((TOPO_TEXT / f"{rec.stem}.nvidia-smi-topo.txt").read_text())
    assert diff(build_matrix(probe_host(str(rec)).snapshot), theirs) == []


def test_matrix_diff_reports_a_changed_cell() -> None:
    rec = RECORDINGS[-1]  # h200-x4
    text = (TOPO_TEXT / f"{rec.stem}.nvidia-smi-topo.txt").read_text().replace("NV18", "NV12", 1)
    assert diff(build_matrix(probe_host(str(rec)).snapshot), parse_nvidia_smi(text))


def test_bundled_recordings_are_every_recording() -> None:
    assert bundled_names() == [p.stem for p in RECORDINGS] == ["h100-x1", "h100-x2", "h200-x1", "h200-x2", "h200-x4"]
    assert sorted(p.name for p in TOPO_TEXT.glob("*.json")) == []  # one copy, in the package


def test_bundled_name_replays() -> None:
    assert len(probe_host("h200-x4").snapshot.gpus) == 4


def test_x4_host_facts() -> None:
    snap = probe_host("h200-x4").snapshot
    assert snap.host.virtualization == "vm" and snap.host.container
    assert {g.name for g in snap.gpus} == {"NVIDIA H200"}
    assert all(len(g.nvlinks) == 18 and all(link.active for link in g.nvlinks) for g in snap.gpus)
    assert snap.nvswitches and snap.nvswitches[0].inferred
    assert all(p.p2p.read == "OK" and p.p2p.pci == "NOT_SUPPORTED" for p in snap.pairs)


def test_h100_without_nvlink_has_no_links() -> None:
    snap = probe_host("h100-x1").snapshot
    assert snap.gpus[0].nvlinks == () and snap.nvswitches == ()


def test_a_call_whose_arguments_contradict_the_recording_fails_loudly() -> None:
    data = json.loads(RECORDINGS[-1].read_text())
    # The recording asks GPU0..3 their minor number; losing GPU2's answer means the recording
    # does not match the host it claims (it holds the call, but not for that GPU).
    data["nvml"] = [c for c in data["nvml"] if not (c["fn"] == "nvmlDeviceGetMinorNumber" and c["args"] == ["gpu:2"])]
    nvml, fs = recording_from_data(data, "cut").fakes()
    from topodoctor.probe.collect import collect

    with pytest.raises(ReplayMismatch, match=r"nvmlDeviceGetMinorNumber\('gpu:2',\)"):
        collect(nvml, fs)


def test_a_call_the_recording_never_made_is_not_recorded() -> None:
    """An older recording lacks a whole call: it replays, and that field is a probe failure
    NOT_RECORDED naming the call, which a check reports as could-not-check."""
    data = json.loads(RECORDINGS[-1].read_text())
    data["nvml"] = [c for c in data["nvml"] if c["fn"] != "nvmlDeviceGetMinorNumber"]
    data["sysfs"] = [r for r in data["sysfs"] if r["path"] != "/proc/sys/kernel/osrelease"]
    nvml, fs = recording_from_data(data, "old").fakes()
    from topodoctor.core.probed import ProbeError
    from topodoctor.probe.collect import collect

    snap = collect(nvml, fs)
    assert snap.gpus[1].minor_number == ProbeError("NOT_RECORDED", "nvmlDeviceGetMinorNumber", -3)
    assert snap.host.kernel == ProbeError("NOT_RECORDED", "read /proc/sys/kernel/osrelease")
    assert snap.gpus[1].name == "NVIDIA H200"


# Recorded on 2026-11-22, before the fitness calls; h200-x1 (2026-11-25) and h100-x2 (2026-11-26) hold them.
FRESH = ("h200-x1", "h100-x2")
OLDER = [p for p in RECORDINGS if p.stem not in FRESH]


@pytest.mark.parametrize("rec", OLDER, ids=lambda p: p.stem)
def test_bundled_recordings_made_before_the_fitness_calls_replay(rec: Path) -> None:
    """The fitness calls came after these hosts were recorded: each replays, its fitness is
    "not recorded", and check says so once, naming the calls, as could-not-check."""
    from topodoctor.core.probed import ProbeError
    from topodoctor.rules import Context, Environment, evaluate

    snap = probe_host(str(rec)).snapshot
    fit = snap.gpus[0].fitness
    assert fit.clock_events == ProbeError("NOT_RECORDED", "nvmlDeviceGetCurrentClocksEventReasons", -3)
    assert fit.start.pcie.fatal == ProbeError("NOT_RECORDED", "nvmlDeviceGetFieldValues[180]", -3)
    found = evaluate(Context(snap, Environment({}, {}, {}, (), None)))
    unrecorded = [f for f in found if f.code == "TD901" and f.evidence.get("error") == "NOT_RECORDED"]
    assert len(unrecorded) == 1 and unrecorded[0].severity == "info" and unrecorded[0].subject == "recording"
    assert "nvmlDeviceGetViolationStatus" in unrecorded[0].evidence["calls"]
    # one line: what the recording lacks (by area, the calls in the evidence) and what that leaves unjudged
    message = unrecorded[0].message
    assert "clock-event reasons" in message and "nvmlDevice" not in message and len(message) < 300
    assert message.endswith("TD207-TD209, TD211, TD530-TD534") and "not judged on GPU0" in message
    assert unrecorded[0].evidence["names"]["TD530"] == "gpu-clock-slowdown"


@pytest.mark.parametrize("name", FRESH)
def test_a_recording_of_the_current_probe_needs_no_could_not_check(name: str) -> None:
    """The README's first command on a machine without a GPU replays h100-x2: every check judged."""
    from topodoctor.rules import Context, Environment, evaluate

    found = evaluate(Context(probe_host(name).snapshot, Environment({}, {}, {}, (), None)))
    assert [f for f in found if f.code == "TD901"] == [] and found.incomplete == ()
    readme = (RECORDINGS[0].parents[3] / "README.md").read_text()
    assert "topodoctor check --replay h100-x2\n" in readme.split("```bash\n")[1].split("```")[0]  # its Try it


def test_a_field_the_recording_never_asked_is_not_recorded_field_by_field() -> None:
    """A field-value batch the recording does not hold as asked is answered field by field:
    fields some batch asked of that GPU keep their answers, the others are not recorded."""
    data = json.loads(RECORDINGS[-1].read_text())
    nvml, _ = recording_from_data(data, "old").fakes()
    got = nvml.call("nvmlDeviceGetFieldValues", "gpu:1", [[165, 3], [180, 0]])
    assert got[0]["ret"] == 0 and got[0]["value"] == 1  # link 3's state, from the recorded link batch
    assert got[1]["ret"] == -3 and got[1]["value"] is None


def test_recorded_errors_replay_as_the_same_nvml_errors() -> None:
    snap = probe_host("h200-x4").snapshot
    # NUMA node id answered NOT_SUPPORTED on the host: replay must say unsupported, not failed.
    from topodoctor.core.probed import Unsupported

    assert snap.gpus[0].numa_node == Unsupported("NOT_SUPPORTED")


def test_gpu_lost_mid_scan_keeps_the_others() -> None:
    from conftest import scenario_path

    snap = probe_host(str(scenario_path("x4-gpu-lost"))).snapshot
    lost = [g.index for g in snap.gpus if g.lost is not None]
    assert lost == [3]
    assert snap.gpus[3].name == "NVIDIA H200"  # answered before it fell off
    assert snap.gpus[0].lost is None and len(snap.gpus[0].nvlinks) == 18


def test_scrub_replaces_identifiers_consistently() -> None:
    from tests_support import FakeHost

    host = FakeHost()
    nvml, fs = RecordingNvml(host), RecordingSysfs(host.sysfs())
    from topodoctor.probe.collect import collect

    snap = collect(nvml, fs)
    doc = scrub(build_recording(nvml, fs, snap, "fake"))
    text = json.dumps(doc)
    assert "GPU-12345678" not in text and "serial-secret" not in text and "secret-host" not in text
    replayed = probe_host_from(doc)
    assert to_jsonable(replayed) == doc["snapshot"]
    assert replayed.gpus[0].uuid != replayed.gpus[1].uuid


def probe_host_from(doc: dict) -> object:  # type: ignore[type-arg]
    from topodoctor.probe.collect import collect

    nvml, fs = recording_from_data(copy.deepcopy(doc), "doc").fakes()
    return collect(nvml, fs)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(kind="snapshot-ish"), "not a topodoctor recording"),
        (lambda d: d.update(schema_version=99), "schema_version 99"),
        (lambda d: d.update(nvml="x"), "nvml is not a list"),
        (lambda d: d["nvml"][0].pop("fn"), "malformed"),
    ],
)
def test_bad_recordings_are_refused(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    data = json.loads(RECORDINGS[0].read_text())
    mutate(data)
    with pytest.raises(InputError, match=message):
        recording_from_data(data, "bad")


def test_the_one_gpu_h200_recording_holds_every_fitness_call() -> None:
    """Recorded with the fitness calls: every field has a value, and the two counter
    readings are apart in time (the window the rules judge)."""
    import dataclasses

    from topodoctor.core.probed import ProbeError

    fit = probe_host("h200-x1").snapshot.gpus[0].fitness
    flat = dataclasses.asdict(fit)
    failed = [k for k, v in flat.items() if isinstance(v, ProbeError)]
    assert failed == []
    assert (fit.sm_clock_max_mhz, fit.memory_clock_max_mhz, fit.memory_bus_width_bits) == (1980, 3201, 6016)
    assert (fit.power_limit_mw, fit.power_default_mw, fit.slowdown_c) == (700000, 700000, 89)
    assert fit.clock_events == 0x1  # idle, as nvidia-smi -q showed
    assert isinstance(fit.start.at_s, float) and isinstance(fit.end.at_s, float) and fit.end.at_s >= fit.start.at_s
    assert fit.start.pcie.receiver_errors == fit.end.pcie.receiver_errors == 14  # counts from boot, standing still


@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda p: p.stem)
def test_a_topology_only_probe_reads_the_same_topology_and_no_fitness(rec: Path) -> None:
    """What a text scan reads: every field but the fitness readings, the processes and the kernel
    log's events equals the full probe's, and those are marked not asked rather than left looking
    measured or quiet; the process environment is not read at all."""
    import dataclasses

    from topodoctor.core.probed import Unsupported

    full = probe_host(str(rec)).snapshot
    topo_probe = probe_host(str(rec), topology_only=True)
    assert topo_probe.process is None  # nothing judges the process of a picture
    topo = topo_probe.snapshot
    not_asked = Unsupported("NOT_ASKED")
    for a, b in zip(full.gpus, topo.gpus, strict=True):
        if a.lost is None:
            assert b.compute_processes == not_asked
            readings = [getattr(b.fitness, f.name) for f in dataclasses.fields(b.fitness)]
            assert {v for v in readings if not dataclasses.is_dataclass(v) or isinstance(v, Unsupported)} == {not_asked}
            assert b.fitness.start.at_s == b.fitness.end.violation_ns.power == not_asked
        assert dataclasses.replace(b, fitness=a.fitness, compute_processes=a.compute_processes) == a
    assert [n.name for n in topo.nics] == [n.name for n in full.nics]
    assert topo.kernel_events == not_asked
    assert dataclasses.replace(topo, gpus=full.gpus, nics=full.nics, kernel_events=full.kernel_events) == full
    assert build_matrix(topo).cells == build_matrix(full).cells


def test_a_topology_only_probe_asks_half_the_calls() -> None:
    """On the recorded H200 (one GPU), the calls that cost most live are the fitness readings."""
    data = json.loads((RECORDINGS[0].parent / "h200-x1.json").read_text())
    nvml, fs = recording_from_data(data, "h200-x1").fakes()
    asked: list[str] = []
    real = nvml.call

    def call(fn: str, *args: object) -> object:
        asked.append(fn)
        return real(fn, *args)

    nvml.call = call  # type: ignore[method-assign]
    from topodoctor.probe.collect import collect

    collect(nvml, fs, fitness=False)
    assert "nvmlDeviceGetViolationStatus" not in asked and "nvmlDeviceGetComputeRunningProcesses" not in asked
    assert len(asked) * 2 <= len(data["nvml"])
