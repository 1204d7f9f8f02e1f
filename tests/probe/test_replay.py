"""The probe, run over recordings of real hosts through the fake NVML and sysfs."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from conftest import RECORDINGS, TOPO_TEXT

from topodoctor.core.codec import to_jsonable
from topodoctor.core.errors import InputError, ReplayMismatch
from topodoctor.probe import probe_host
from topodoctor.probe.record import RecordingNvml, RecordingSysfs, build_recording, scrub
from topodoctor.probe.replay import bundled_names, recording_from_data
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
    assert bundled_names() == [p.stem for p in RECORDINGS] == ["h100-x1", "h200-x2", "h200-x4"]
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


def test_a_call_missing_from_the_recording_fails_loudly() -> None:
    data = json.loads(RECORDINGS[-1].read_text())
    data["nvml"] = [c for c in data["nvml"] if c["fn"] != "nvmlDeviceGetMinorNumber"]
    nvml, fs = recording_from_data(data, "cut").fakes()
    from topodoctor.probe.collect import collect

    with pytest.raises(ReplayMismatch, match="nvmlDeviceGetMinorNumber"):
        collect(nvml, fs)


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
