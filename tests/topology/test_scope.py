"""Job scope on real recordings: which GPUs Slurm and CUDA_VISIBLE_DEVICES name, what the copy
timer is shown, and which findings a job's prolog reports."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import scenario_path
from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.core.errors import InputError
from topodoctor.core.probed import ProbeError
from topodoctor.model.findings import Finding
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.probe.sources import probe_host
from topodoctor.topology.scope import Scope, asked_label, concerns, cuda_visible, resolve, within

X4 = probe_host("h200-x4").snapshot
HGX = probe_host(str(scenario_path("hgx-8gpu-2socket"))).snapshot
runner = CliRunner()


def _swap_bus_ids(snap: HostSnapshot, a: int, b: int) -> HostSnapshot:
    """NVML index order and PCI bus order disagree (NVML numbers GPUs as the driver lists them)."""
    ga, gb = snap.gpu(a), snap.gpu(b)
    swapped = {a: replace(ga, bus_id=gb.bus_id), b: replace(gb, bus_id=ga.bus_id)}
    return replace(snap, gpus=tuple(swapped.get(g.index, g) for g in snap.gpus))


def test_no_job_variables_means_the_node() -> None:
    s = resolve(X4, {})
    assert (s.kind, s.gpus, s.source) == ("node", (0, 1, 2, 3), "node")


@pytest.mark.parametrize(
    ("env", "gpus", "source"),
    [
        ({"SLURM_JOB_GPUS": "1,3"}, (1, 3), "SLURM_JOB_GPUS"),
        ({"SLURM_JOB_GPUS": "0-2"}, (0, 1, 2), "SLURM_JOB_GPUS"),
        ({"SLURM_STEP_GPUS": "2", "SLURM_JOB_GPUS": "1,2", "CUDA_VISIBLE_DEVICES": "0"}, (2,), "SLURM_STEP_GPUS"),
        ({"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, (1,), "CUDA_VISIBLE_DEVICES"),
        ({"CUDA_VISIBLE_DEVICES": "GPU-00000000-0000-4000-8000-000000000002"}, (2,), "CUDA_VISIBLE_DEVICES"),
        ({"CUDA_VISIBLE_DEVICES": "GPU-00000000-0000-4000-8000-00000000000"}, (), "CUDA_VISIBLE_DEVICES"),
        ({"CUDA_VISIBLE_DEVICES": "MIG-GPU-00000000-0000-4000-8000-000000000003/1/0"}, (3,), "CUDA_VISIBLE_DEVICES"),
        ({"CUDA_VISIBLE_DEVICES": "3,0"}, (0, 3), "CUDA_VISIBLE_DEVICES"),
        ({"SLURM_JOB_GPUS": "NoDevFiles"}, (), "SLURM_JOB_GPUS"),
    ],
)
def test_the_job_s_gpus(env: dict[str, str], gpus: tuple[int, ...], source: str) -> None:
    s = resolve(X4, env)
    assert (s.kind, s.gpus, s.source) == ("job", gpus, source)


def test_a_uuid_prefix_that_matches_several_gpus_names_none() -> None:
    s = resolve(X4, {"CUDA_VISIBLE_DEVICES": "GPU-00000000"})
    assert s.gpus == () and s.unresolved == ("GPU-00000000",)


def test_cuda_stops_at_the_first_entry_that_names_no_gpu() -> None:
    s = resolve(X4, {"CUDA_VISIBLE_DEVICES": "1,7,2"})
    assert s.gpus == (1,) and s.unresolved == ("7", "2")


def test_every_gpu_named_is_the_node() -> None:
    assert resolve(X4, {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}).kind == "node"


def test_a_slurm_job_given_every_gpu_is_the_jobs_check_of_them() -> None:
    """Slurm gave the job the whole node: its prolog is still the job's (a process of another
    job on any GPU is then someone else's, and its metrics are the job's, not the node's)."""
    s = resolve(X4, {"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "0,1,2,3", "CUDA_VISIBLE_DEVICES": "0,1,2,3"})
    assert (s.kind, s.gpus, s.source, s.job, s.label) == ("job", (0, 1, 2, 3), "SLURM_JOB_GPUS", "7", "job")
    assert resolve(X4, {"SLURM_JOB_ID": "7", "SLURM_JOB_GPUS": "0,1,2,3"}, "node").label == "node"


def test_a_slurm_job_without_gpus_judges_the_node_as_the_jobs() -> None:
    """A job without --gres: Slurm names no GPU; the whole node is judged, labelled the job's."""
    s = resolve(X4, {"SLURM_JOB_ID": "7"})
    assert (s.kind, s.gpus, s.job, s.label) == ("node", (0, 1, 2, 3), "7", "job")
    assert "Slurm job 7 named no GPU" in s.describe()
    assert resolve(X4, {}).label == "node"


@pytest.mark.parametrize(
    ("env", "choice", "label"),
    [
        ({}, "auto", "node"),
        ({"SLURM_JOB_ID": "7"}, "auto", "job"),
        ({"CUDA_VISIBLE_DEVICES": "1"}, "auto", "job"),
        ({"SLURM_JOB_ID": "7"}, "node", "node"),
        ({}, "job", "job"),
    ],
)
def test_the_label_of_a_check_that_saw_no_gpu(env: dict[str, str], choice: str, label: str) -> None:
    assert asked_label(env, choice) == label  # type: ignore[arg-type]


def test_indices_follow_pci_bus_order() -> None:
    snap = _swap_bus_ids(X4, 0, 1)
    env = {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert resolve(snap, env).gpus == (1,)


def test_fastest_first_indices_are_ambiguous_on_mixed_models() -> None:
    mixed = replace(X4, gpus=(replace(X4.gpus[0], name="NVIDIA H100 PCIe"), *X4.gpus[1:]))
    assert resolve(mixed, {"CUDA_VISIBLE_DEVICES": "1"}).gpus == ()
    assert resolve(mixed, {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}).gpus == (1,)
    assert resolve(X4, {"CUDA_VISIBLE_DEVICES": "1"}).gpus == (1,)  # one model: the orders agree


def test_slurm_ids_are_device_minor_numbers() -> None:
    renumbered = replace(X4, gpus=tuple(replace(g, minor_number=3 - g.index) for g in X4.gpus))
    assert resolve(renumbered, {"SLURM_JOB_GPUS": "0"}).gpus == (3,)


def test_mig_uuid_through_a_table() -> None:
    env = {"CUDA_VISIBLE_DEVICES": "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"}
    assert resolve(X4, env, mig_parents={env["CUDA_VISIBLE_DEVICES"]: 2}).gpus == (2,)
    assert resolve(X4, env).gpus == ()


def test_forced_scopes() -> None:
    assert resolve(X4, {"SLURM_JOB_GPUS": "1"}, "node").gpus == (0, 1, 2, 3)
    with pytest.raises(InputError, match="none of"):
        resolve(X4, {}, "job")
    with pytest.raises(InputError, match="names no GPU"):
        resolve(X4, {"SLURM_JOB_GPUS": "9"}, "job")


def test_the_copy_timer_is_shown_the_scope_by_uuid() -> None:
    assert (
        cuda_visible(X4, [2, 0]) == "GPU-00000000-0000-4000-8000-000000000000,GPU-00000000-0000-4000-8000-000000000002"
    )
    # a GPU whose UUID failed to probe is named by its place in PCI bus order
    snap = _swap_bus_ids(X4, 0, 1)
    snap = replace(snap, gpus=tuple(replace(g, uuid=ProbeError("UNKNOWN", "x")) for g in snap.gpus))
    assert cuda_visible(snap, [0]) == "1"


def _finding(subject: str) -> Finding:
    return Finding("TD000", "x", "error", subject, "", "", {})


@pytest.mark.parametrize(
    ("subject", "mine"),
    [
        ("GPU1", True),
        ("GPU0", False),
        ("GPU1-GPU2", True),
        ("GPU0-GPU1", False),
        ("GPU2/nvlink7", True),
        ("GPU3/nvlink0", False),
        ("env:NCCL_P2P_LEVEL", True),
        ("conf:/etc/nccl.conf", True),
        ("host", True),
    ],
)
def test_what_concerns_a_job_on_gpus_1_and_2(subject: str, mine: bool) -> None:
    scope = Scope("job", (1, 2), "SLURM_JOB_GPUS", "1,2")
    assert concerns(subject, scope, X4) is mine


def test_bridges_and_nics_follow_their_gpus() -> None:
    g0 = HGX.gpu(0)
    assert isinstance(g0.pcie_path, tuple)
    scope0 = Scope("job", (0,), "SLURM_JOB_GPUS", "0")
    scope1 = Scope("job", (1,), "SLURM_JOB_GPUS", "1")
    switch = f"bridge:{g0.pcie_path[2]}"
    assert concerns(switch, scope0, HGX) and not concerns(switch, scope1, HGX)
    near0 = next(n.name for n in HGX.nics if isinstance(n.pcie_path, tuple) and n.pcie_path[2] == g0.pcie_path[2])
    assert concerns(f"nic:{near0}", scope0, HGX) and not concerns(f"nic:{near0}", scope1, HGX)
    # the VM's only NIC hangs off the root complex, near no GPU: a node-wide fact
    assert concerns("nic:eth0", Scope("job", (1,), "x", "1"), X4)


def test_within_splits_findings() -> None:
    kept, outside = within(
        [_finding("GPU3"), _finding("GPU1"), _finding("env:X")], resolve(X4, {"SLURM_JOB_GPUS": "1"}), X4
    )
    assert [f.subject for f in kept] == ["GPU1", "env:X"] and [f.subject for f in outside] == ["GPU3"]


def test_another_job_s_lost_gpu_does_not_fail_this_job(monkeypatch: pytest.MonkeyPatch) -> None:
    lost = str(scenario_path("x4-gpu-lost"))  # GPU3 fell off the bus
    monkeypatch.setenv("SLURM_JOB_GPUS", "0,1")
    mine = runner.invoke(app, ["check", "--replay", lost, "-f", "json", "--timeout", "0"])
    doc = json.loads(mine.stdout)
    assert mine.exit_code == 0, doc["reason"]
    assert doc["scope_gpus"] == [0, 1] and doc["findings_outside_scope"] >= 1
    node = runner.invoke(app, ["check", "--replay", lost, "-f", "json", "--timeout", "0", "--scope", "node"])
    assert node.exit_code == 1 and "TD507" in {f["code"] for f in json.loads(node.stdout)["findings"]}
    monkeypatch.setenv("SLURM_JOB_GPUS", "3")
    theirs = runner.invoke(app, ["check", "--replay", lost, "-f", "json", "--timeout", "0"])
    assert theirs.exit_code == 1
