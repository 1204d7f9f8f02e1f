"""Rules on real recordings (must stay silent) and on derived fault scenarios (must fire
exactly what each scenario says, and no other error)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import DERIVED, FIXTURES, RECORDINGS, scenario_path
from tests_support import judged

from topodoctor.probe.environment import capture_environment
from topodoctor.probe.sources import probe_host
from topodoctor.rules import REGISTRY, Context, Environment, evaluate
from topodoctor.rules.registry import rule
from topodoctor.topology.expect import from_snapshot

QUIET_ENV = Environment({}, {}, {}, (), None)
FAULTS = [s for s in DERIVED if s["codes"]]


def run(source: str, env: Environment = QUIET_ENV, **kw: object) -> list:  # type: ignore[type-arg]
    """Findings, less the one info finding that a recording older than the fitness calls
    always carries (tests/probe/test_replay.py holds that one)."""
    return judged(evaluate(Context(probe_host(source).snapshot, env, **kw)))  # type: ignore[arg-type]


@pytest.mark.parametrize("rec", RECORDINGS, ids=lambda p: p.stem)
def test_real_hosts_are_healthy(rec: Path) -> None:
    assert [f for f in run(str(rec)) if f.severity in ("error", "critical", "warning")] == []


@pytest.mark.parametrize("sc", [s for s in DERIVED if s["name"] != "x4-nvml-hang"], ids=lambda s: s["name"])
def test_scenario_raises_exactly_its_codes(sc: dict) -> None:  # type: ignore[type-arg]
    found = run(str(scenario_path(sc["name"])))
    assert {f.code for f in found} == set(sc["codes"])
    errors = {f.code for f in found if f.severity in ("error", "critical")}
    assert errors <= set(sc["codes"])


def test_nvlink_down_names_the_link() -> None:
    found = run(str(scenario_path("x4-nvlink-down")))
    down = [f for f in found if f.code == "TD101"]
    assert [f.subject for f in down] == ["GPU1/nvlink5"]
    fewer = sorted(f.subject for f in found if f.code == "TD102")
    assert fewer == ["GPU0-GPU1", "GPU1-GPU2", "GPU1-GPU3"]
    assert all(f.evidence["links"] == 17 and f.evidence["expected"] == 18 for f in found if f.code == "TD102")
    assert next(f for f in found if f.code == "TD102").message == "GPU0-GPU1 has 17 NVLinks; its peers have 18"


def test_acs_finding_names_bridge_and_pairs() -> None:
    f = next(f for f in run(str(scenario_path("pcie-2socket-acs"))) if f.code == "TD304")
    assert f.subject == "bridge:0000:04:00.0"
    assert "GPU0-GPU1" in f.evidence["pairs"] and "GPU2-GPU3" not in f.evidence["pairs"]


def test_expectations_catch_what_peers_cannot() -> None:
    x4 = probe_host("h200-x4").snapshot
    exp = from_snapshot(x4)
    assert (exp.gpu_count, exp.nvlinks_per_pair, exp.pcie_gen, exp.pcie_width) == (4, 18, 5, 16)
    codes = {f.code for f in run("h200-x2", expect=exp)}
    assert "TD801" in codes  # 2 GPUs where 4 belong
    assert {f.code for f in run("h200-x4", expect=exp)} == set()
    model = {f.code for f in run("h100-x1", expect=exp)}
    assert {"TD801", "TD802"} <= model
    hgx = probe_host(str(scenario_path("hgx-8gpu-2socket"))).snapshot
    assert {f.code for f in run("h200-x4", expect=from_snapshot(hgx))} >= {"TD801", "TD803"}


def test_expectations_make_every_down_link_count() -> None:
    exp = from_snapshot(probe_host("h200-x4").snapshot)
    found = run(str(scenario_path("x4-nvlink-down")), expect=exp)
    assert {f.code for f in found} == {"TD101", "TD102"}
    fewer = next(f for f in found if f.code == "TD102")
    assert fewer.message == "GPU0-GPU1 has 17 NVLinks; the expectations file says 18"


def test_process_affinity_far_from_gpus() -> None:
    env = Environment({}, {}, {}, (), tuple(range(64, 128)))
    found = run(str(scenario_path("hgx-8gpu-2socket")), env=env)
    assert sorted(f.subject for f in found if f.code == "TD403") == ["GPU0", "GPU1", "GPU2", "GPU3"]
    near = Environment({}, {}, {}, (), tuple(range(128)))
    assert not [f for f in run(str(scenario_path("hgx-8gpu-2socket")), env=near) if f.code == "TD403"]


def test_probe_failure_is_reported_not_passed() -> None:
    snap = probe_host("h200-x4").snapshot
    from topodoctor.core.probed import ProbeError

    err = ProbeError("NO_PERMISSION", "nvmlDeviceGetCurrPcieLinkWidth", 4)
    g = replace(snap.gpus[0], pcie=replace(snap.gpus[0].pcie, width_current=err))
    found = evaluate(Context(replace(snap, gpus=(g, *snap.gpus[1:])), QUIET_ENV))
    inc = [f for f in judged(found) if f.code == "TD901"]
    assert [(f.subject, f.evidence["field"], f.evidence["rules"]) for f in inc] == [
        ("GPU0", "pcie.width_current", ["TD203"])
    ]
    assert "NO_PERMISSION" in inc[0].message


def test_select_and_ignore() -> None:
    src = str(scenario_path("x4-pcie-downtrained"))
    snap = probe_host(src).snapshot
    assert {f.code for f in evaluate(Context(snap, QUIET_ENV), select=["TD20"], ignore=["TD205", "TD206"])} == {
        "TD203",
        "TD204",
    }
    found = evaluate(Context(snap, QUIET_ENV), ignore=["pcie-replays", "TD204", "TD206"])
    assert {f.code for f in judged(found)} == {"TD203"}


# --- NCCL / CUDA environment: each case sets variables and checks the code on a recording.
ENV_CASES = [
    ({"NCCL_P2P_DISABLE": "1"}, "h200-x4", "TD601"),
    ({"NCCL_P2P_LEVEL": "LOC"}, "h200-x4", "TD602"),
    ({"NCCL_P2P_LEVEL": "0"}, "h200-x4", "TD602"),
    ({"NCCL_SHM_DISABLE": "1"}, "h200-x4", "TD603"),
    ({"NCCL_IB_DISABLE": "1"}, "hgx-8gpu-2socket", "TD604"),
    ({"NCCL_SOCKET_IFNAME": "ib"}, "h200-x4", "TD605"),
    ({"NCCL_SOCKET_IFNAME": "^eth"}, "h200-x4", "TD605"),
    ({"NCCL_IB_HCA": "mlx5_9"}, "hgx-8gpu-2socket", "TD606"),
    ({"NCCL_IB_HCA": "mlx5"}, "hgx-8gpu-2socket", "TD607"),
    ({"NCCL_TOPO_FILE": "/nonexistent/topo.xml"}, "h200-x4", "TD608"),
    ({"NCCL_IB_TIMEOUT": "0"}, "h200-x4", "TD609"),
    ({"NCCL_IB_TIMEOUT": "32"}, "h200-x4", "TD609"),
    ({"NCCL_ALGO": "Tree"}, "h200-x4", "TD610"),
    ({"NCCL_PROTO": "Simple"}, "h200-x4", "TD610"),
    ({"NCCL_PROTO": "LL128"}, "h200-x4", "TD611"),
    ({"NCCL_IGNORE_DISABLED_P2P": "1"}, "h200-x4", "TD612"),
    ({"NCCL_MAX_RINGS": "8"}, "h200-x4", "TD613"),
    ({"NCCL_ASYNC_ERROR_HANDLING": "1"}, "h200-x4", "TD613"),
    ({"NCCL_SOCKET_IFNAM": "eth0"}, "h200-x4", "TD614"),
    ({"CUDA_VISIBLE_DEVICES": "0,7"}, "h200-x4", "TD615"),
    ({"CUDA_VISIBLE_DEVICES": "GPU-ffffffff"}, "h200-x4", "TD615"),
    ({"CUDA_VISIBLE_DEVICES": ""}, "h200-x4", "TD615"),
    ({"CUDA_VISIBLE_DEVICES": "1,1"}, "h200-x4", "TD616"),
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, "h200-x4", "TD617"),
    ({"NCCL_NVLS_ENABLE": "0"}, "h200-x4", "TD618"),
]


def _source(name: str) -> str:
    return str(scenario_path(name)) if (FIXTURES / "derived" / f"{name}.json").exists() else name


@pytest.mark.parametrize(("env", "host", "code"), ENV_CASES, ids=lambda v: str(v))
def test_env_case_fires(env: dict, host: str, code: str) -> None:  # type: ignore[type-arg]
    found = run(_source(host), env=capture_environment(env, system_conf="/nonexistent"))
    assert code in {f.code for f in found}


@pytest.mark.parametrize(
    ("env", "host"),
    [
        ({"NCCL_P2P_DISABLE": "1"}, "consumer-no-p2p"),  # no NVLink: disabling P2P is no loss there
        ({"NCCL_SOCKET_IFNAME": "eth"}, "h200-x4"),
        ({"NCCL_SOCKET_IFNAME": "=eth0"}, "h200-x4"),
        ({"NCCL_IB_HCA": "=mlx5_1,=mlx5_2"}, "hgx-8gpu-2socket"),
        ({"NCCL_IB_TIMEOUT": "20"}, "h200-x4"),
        ({"NCCL_PROTO": "^LL128"}, "h200-x4"),
        ({"CUDA_VISIBLE_DEVICES": "0,1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, "h200-x4"),
        ({"NCCL_NVLS_ENABLE": "0"}, "h100-x1"),
        ({"NCCL_VERSION": "2.27.3"}, "h200-x4"),
        ({"NCCL_DEBUG": "WARN", "NCCL_SOCKET_IFNAME": "eth0"}, "h200-x4"),
    ],
)
def test_env_case_quiet(env: dict, host: str) -> None:  # type: ignore[type-arg]
    found = run(_source(host), env=capture_environment(env, system_conf="/nonexistent"))
    assert not [f for f in found if f.code.startswith("TD6") and f.code != "TD610"], found


def test_nccl_conf_files(tmp_path: Path) -> None:
    system = tmp_path / "nccl.conf"
    system.write_text("# site settings\nNCCL_P2P_DISABLE=1\n")
    user = tmp_path / "user.conf"
    user.write_text("NCCL_IB_TIMEOUT=99\nnot a setting\n")
    env = capture_environment({"NCCL_CONF_FILE": str(user)}, system_conf=str(system))
    found = {f.code: f for f in run("h200-x4", env=env)}
    assert found["TD601"].evidence["from"] == str(system)
    assert found["TD609"].evidence["from"] == str(user)
    assert "TD619" in found  # the malformed line
    # the environment wins over the files, as in NCCL
    env = capture_environment({"NCCL_P2P_DISABLE": "0"}, system_conf=str(system))
    assert "TD601" not in {f.code for f in run("h200-x4", env=env)}


# --- the registry itself (cases per rule: tests/rules/cases/)


def test_every_rule_is_documented() -> None:
    for code, r in REGISTRY.items():
        assert r.title and r.fix and r.doc, code


def test_prolog_rules_need_no_measurement() -> None:
    prolog = {c for c, r in REGISTRY.items() if "prolog" in r.tags}
    assert prolog and prolog != set(REGISTRY)
    assert all("bandwidth" not in REGISTRY[c].needs for c in prolog)
    assert {c for c in REGISTRY if c.startswith("TD7")}.isdisjoint(prolog)
    with pytest.raises(ValueError, match="prolog"):
        rule("TD799", "measured-prolog", "error", tags=("prolog",), needs=("bandwidth",))(_documented)


def _documented(ctx: object) -> object:
    """A rule body for registry tests.

    Why it matters: the registry refuses a rule documented without it.

    How to fix: nothing to fix.
    """
    return iter(())


def test_registry_refuses_duplicates_and_bad_codes() -> None:
    with pytest.raises(ValueError, match="twice"):
        rule("TD101", "another", "error")(lambda ctx: iter(()))
    with pytest.raises(ValueError, match="TD \\+ 3 digits"):
        rule("X1", "bad", "error")(lambda ctx: iter(()))
    with pytest.raises(ValueError, match="no documentation"):
        rule("TD999", "undocumented", "error")(lambda ctx: iter(()))
