"""The cause engine's parts on real results with documented changes: NCCL's reading of its settings,
what its model leaves under each, the ranking, "cause not found", the GPUs' own state behind a slow
copy or low HBM, and the rules it made quiet on a healthy host (TD007, TD020, TD618)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import FIXTURES
from rule_case_kit import bandwidth_result, bw_measure, snapshot
from rule_case_kit_measured import fitness_result

from topodoctor.diagnosis import nccl_model as nm
from topodoctor.diagnosis.load import BUSY_UTIL_PCT, loads
from topodoctor.model.collectives import CollectivesResult, load_result
from topodoctor.model.copies import Activity
from topodoctor.model.findings import NOT_FOUND, Finding
from topodoctor.model.snapshot import ComputeProcess, HostSnapshot
from topodoctor.probe.environment import capture_environment
from topodoctor.rules import Context, evaluate
from topodoctor.service.collectives import judge
from topodoctor.topology.busbw import at_size, nvls_all_reduce_busbw, predict

RUNS = FIXTURES / "diagnosis" / "h100-x2"


def _gpu_edit(snap: HostSnapshot, index: int, **fields: object) -> HostSnapshot:
    return replace(snap, gpus=tuple(replace(g, **fields) if g.index == index else g for g in snap.gpus))


# --- NCCL's reading of NCCL_PROTO / NCCL_ALGO, and its model under them


@pytest.mark.parametrize(
    ("value", "op", "left"),
    [
        ("LL", "all_reduce", {"LL"}),
        ("^LL128,LL", "all_reduce", {"Simple"}),
        ("ll128", "all_gather", {"LL128"}),
        ("allreduce:tree;allgather:ring", "all_reduce", {"Tree"}),
        ("allreduce:tree;allgather:ring", "broadcast", set(nm.ALGORITHMS)),
    ],
)
def test_allowed_reads_the_value_as_nccl_does(value: str, op: str, left: set[str]) -> None:
    universe = nm.ALGORITHMS if value.startswith("allreduce") else nm.PROTOCOLS
    assert nm.allowed(value, universe, op) == frozenset(left)


def test_a_value_naming_nothing_nccl_knows_changes_nothing() -> None:
    assert nm.allowed("fast", nm.PROTOCOLS, "all_reduce") is None


def test_protocol_model_is_nccls_tuning_table() -> None:
    # tuning.cc: ring LL busBw x .5 capped at llMaxBw (141 on Hopper, one node); LL128 x 0.92
    assert nm.protocol_busbw(320.0, frozenset({"LL"}), "hopper", 24) == pytest.approx(141.0)
    assert nm.protocol_busbw(200.0, frozenset({"LL"}), "hopper", 24) == pytest.approx(100.0)
    assert nm.protocol_busbw(320.0, frozenset({"LL128"}), "hopper", 24) == pytest.approx(294.4)
    assert nm.protocol_busbw(320.0, frozenset({"LL", "Simple"}), "hopper", 24) == 320.0


def test_a_smaller_buffer_and_fewer_threads_leave_less() -> None:
    assert nm.buffer_busbw(320.0, nm.DEFAULT_BUFFSIZE, 24) == pytest.approx(320.0)
    assert nm.buffer_busbw(320.0, 65536, 24) < 0.2 * 320.0
    assert nm.threads_busbw(320.0, 64) == pytest.approx(40.0)
    assert nm.default_channels(360.0) == 24  # 12 channels of 30 GB/s, doubled (NCCL's GRAPH log, H100 / H200)


# --- the model at the size measured, and NVLS by the data it moves


def test_the_plateau_holds_from_1_gib_and_a_smaller_size_gets_less() -> None:
    assert at_size(360.0, 1 << 30) == 360.0 and at_size(360.0, 2 << 30) == 360.0
    assert at_size(360.0, 256 << 20) == pytest.approx(302.9, abs=0.5)
    assert at_size(360.0, 64 << 20) < at_size(360.0, 256 << 20)


def test_nvls_moves_more_than_a_ring_on_two_gpus_and_less_on_eight() -> None:
    x2 = load_result(RUNS / "coll-default.json").snapshot
    assert x2 is not None
    ring = next(p.busbw_gbps for p in predict(x2, ("all_reduce",)))
    nvls = nvls_all_reduce_busbw(x2)
    assert nvls is not None and nvls < ring  # 2 x (n-1)/(n+1) of the link: two thirds on two GPUs
    x8 = snapshot("hgx-8gpu-2socket")
    got = nvls_all_reduce_busbw(x8)
    assert got == pytest.approx(360 * 0.85 * 2 * 7 / 9, rel=0.01)  # about 476 GB/s


# --- TD618: information where NVLS would add busbw, with its cost; a warning only for a malformed value


def _td618(source: str, value: str = "0") -> list[Finding]:
    ctx = Context(snapshot(source), capture_environment({"NCCL_NVLS_ENABLE": value}, system_conf="/nonexistent"))
    return [f for f in evaluate(ctx, select=["TD618"])]


@pytest.mark.parametrize(("source", "gpus"), [("h200-x2", 2), ("h200-x4", 4), ("hgx-8gpu-2socket", 8)])
def test_td618_is_information_where_nvls_would_add_something_stating_the_cost(source: str, gpus: int) -> None:
    if gpus == 2:  # 2 x (n-1)/(n+1) of the link: less than the ring moves, so nothing to say
        assert _td618(source) == []
        return
    (f,) = _td618(source)
    ev = f.evidence
    assert f.severity == "info" and ev["gpus"] == gpus and "a deliberate setting" in f.message
    assert ev["nvls_adds_gbps"] == pytest.approx(max(0.0, ev["nvls_gbps"] - ev["ring_gbps"]), abs=0.1)
    assert ev["nvls_adds_gbps"] > 0 and f"about {ev['nvls_adds_gbps']:.0f} GB/s" in f.message
    if gpus == 8:
        assert ev["nvls_adds_gbps"] > 100  # about 476 against 354 on 8 x H100


@pytest.mark.parametrize("value", ["false", "true", "off", "0 # off", "00"])
def test_td618_warns_where_the_value_is_malformed(value: str) -> None:
    (f,) = _td618("hgx-8gpu-2socket", value)
    assert f.severity == "warning" and f.evidence["malformed"] and "reads it as 0" in f.message


@pytest.mark.parametrize(("value", "found"), [("0", ["info"]), (" 0 ", ["info"]), ("1", []), ("2", []), ("1x", [])])
def test_td618_near_misses(value: str, found: list[str]) -> None:
    assert [f.severity for f in _td618("h200-x4", value)] == found


def test_td618_is_quiet_without_nvswitch() -> None:
    assert _td618("h100-x1") == []


# --- who else was on the GPUs: topodoctor's own workers never count


def _procs(*ours: bool) -> tuple[ComputeProcess, ...]:
    return tuple(ComputeProcess(100 + i, 1 << 30, 0, 1, f"python3 job{i}.py", o) for i, o in enumerate(ours))


def test_own_workers_are_not_load_but_someone_elses_process_is() -> None:
    snap = snapshot("h200-x2")
    acts = (Activity(0, 99, 1, 1 << 30), Activity(1, 9, 0, 0))
    own = loads(_gpu_edit(snap, 0, compute_processes=_procs(True)), acts)
    assert not own[0].busy and not own[1].busy
    foreign = loads(_gpu_edit(snap, 0, compute_processes=_procs(False)), acts)
    assert foreign[0].busy and foreign[0].contenders == 1 and "job0.py" in foreign[0].describe()


@pytest.mark.parametrize(("util", "busy"), [(BUSY_UTIL_PCT, True), (BUSY_UTIL_PCT - 1, False)])
def test_utilisation_alone_counts_only_from_half(util: int, busy: bool) -> None:
    snap = _gpu_edit(snapshot("h200-x2"), 1, compute_processes=())
    assert loads(snap, (Activity(1, util, 0, 0),))[1].busy is busy


def test_td007_names_a_foreign_process_and_ignores_our_ranks() -> None:
    res = load_result(RUNS / "coll-foreign-gemm.json")
    assert res.snapshot is not None
    mine = replace(res, snapshot=_gpu_edit(res.snapshot, 1, compute_processes=_procs(True)))
    assert not [f for f in judge(mine, None) if f.code == "TD007"]


# --- ranking, and an honest "cause not found"


def _scaled(name: str, k: float, **env: str) -> CollectivesResult:
    res = load_result(RUNS / f"coll-{name}.json")
    rows = []
    for r in res.rows:
        t = r.in_place or r.out_of_place
        assert t is not None
        scaled = replace(t, busbw_gbps=t.busbw_gbps * k, algbw_gbps=t.algbw_gbps * k)
        rows.append(
            replace(r, in_place=scaled if r.in_place else None, out_of_place=scaled if r.out_of_place else None)
        )
    return replace(res, rows=tuple(rows), env={**res.env, **env})


def test_a_slow_run_with_nothing_to_blame_says_cause_not_found() -> None:
    # Transform: the healthy default run with every busbw x 0.3 and nothing else changed.
    f = next(f for f in judge(_scaled("default", 0.3), None) if f.code == "TD001")
    assert f.severity == "error" and f.cause is not None and f.cause.what == NOT_FOUND
    assert f.cause.confidence == "none" and NOT_FOUND in f.message
    assert any("other processes: none" in r for r in f.cause.ruled_out)
    assert any("NVLinks: all 18 up" in r for r in f.cause.ruled_out)


def test_the_cause_that_explains_more_leads() -> None:
    # Transform: the foreign-GEMM run (GPU1 99 % busy: half its time left) with NCCL_MAX_NCHANNELS=1
    # added to its environment, NCCL's account of one channel, and busbw x 0.14 (21 GB/s, as the
    # one-channel run measured).
    res = _scaled("foreign-gemm", 0.14, NCCL_MAX_NCHANNELS="1")
    assert res.nccl is not None
    res = replace(res, nccl=replace(res.nccl, channels=1))
    f = next(f for f in judge(res, None) if f.code == "TD001")
    assert f.cause is not None and f.cause.what.startswith("NCCL_MAX_NCHANNELS=1")
    assert any("foreign_gemm.py" in o for o in f.cause.others)


def test_a_setting_that_explains_little_is_ruled_out_not_blamed() -> None:
    # Transform: the LL128 run (NCCL's model: 294 GB/s) with busbw x 0.3: LL128 explains a tenth of it.
    f = next(f for f in judge(_scaled("proto-ll128", 0.3), None) if f.code == "TD001")
    assert f.cause is not None and not f.cause.what.startswith("NCCL_PROTO")


# --- copies and HBM: the GPUs' own state


def test_a_slow_copy_over_a_link_that_is_down_names_the_link() -> None:
    # Transform: the x4 host's copies with GPU1->GPU2 at 0.6x, and six of GPU1's 18 NVLinks inactive.
    bw = bandwidth_result(bw_measure("oneway", 1, 2, 0.6))
    snap = bw.snapshot or snapshot("h200-x4")
    g1 = snap.gpu(1)
    links = tuple(replace(ln, active=False) if i < 6 else ln for i, ln in enumerate(g1.nvlinks))
    ctx = Context(_gpu_edit(snap, 1, nvlinks=links), capture_environment({}), bandwidth=bw)
    f = next(f for f in evaluate(ctx, select=["TD701"]) if f.subject == "GPU1-GPU2")
    assert f.severity == "error" and f.cause is not None
    assert f.cause.what == "GPU1 has 12 of 18 NVLinks up" and f.message.startswith(f.cause.what)


def test_a_slow_copy_with_nothing_wrong_says_what_was_ruled_out() -> None:
    bw = bandwidth_result(bw_measure("oneway", 1, 2, 0.6))
    ctx = Context(bw.snapshot or snapshot("h200-x4"), capture_environment({}), bandwidth=bw)
    f = next(f for f in evaluate(ctx, select=["TD701"]) if f.subject == "GPU1-GPU2")
    assert f.cause is not None and not f.cause.found and f.cause.ruled_out


def test_low_hbm_on_a_gpu_held_down_names_its_clocks() -> None:
    # Transform: the derived slow-HBM GPU2 with HW slowdown (0x8) among its clock-event reasons.
    snap = snapshot("h200-x4")
    snap = _gpu_edit(snap, 2, fitness=replace(snap.gpu(2).fitness, clock_events=0x8))
    ctx = Context(snap, capture_environment({}), fitness=fitness_result("hbm-slow-gpu2"))
    f = next(f for f in evaluate(ctx, select=["TD711"]))
    assert f.cause is not None and "hw_slowdown" in f.cause.what and f.severity == "error"


def test_a_fault_in_the_engine_leaves_the_finding_as_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    from topodoctor.diagnosis import explain as ex

    def broken(*_: object) -> None:
        raise KeyError("gpu 7")

    monkeypatch.setattr(ex, "collective_cause", broken)
    f = next(f for f in judge(load_result(RUNS / "coll-proto-ll.json"), None) if f.code == "TD001")
    assert f.severity == "error" and f.cause is not None and not f.cause.found
    assert "the cause engine failed" in f.cause.ruled_out[0]


def test_docs_list_every_setting_the_engine_knows() -> None:
    from conftest import ROOT

    from topodoctor.nccl.guide import SETTINGS

    text = (ROOT / "docs" / "diagnosis.md").read_text()
    assert [s.name for s in SETTINGS if f"`{s.name}" not in text] == []


def test_nccls_own_choice_is_evidence_and_without_a_setting_a_cause() -> None:
    from topodoctor.model.collectives import NcclChoice

    # Transform: NCCL's TUNING account of the 1 GiB call added (Ring / LL on 24 channels).
    ll = NcclChoice("all_reduce", 1 << 30, "Ring", "LL", 24, 141.0)
    res = load_result(RUNS / "coll-proto-ll.json")
    assert res.nccl is not None
    res = replace(res, nccl=replace(res.nccl, choices=(ll,)))
    f = next(f for f in judge(res, None) if f.code == "TD001")
    assert f.cause is not None and f.cause.evidence["nccl_choice"]["protocol"] == "LL"
    assert f.cause.what.startswith("NCCL_PROTO=LL")
    # Transform: the same with NCCL_PROTO gone from the environment and from NCCL's log.
    env = {k: v for k, v in res.env.items() if k != "NCCL_PROTO"}
    ranks = tuple(replace(r, env={k: v for k, v in r.env.items() if k != "NCCL_PROTO"}) for r in res.ranks)
    bare = replace(res, env=env, ranks=ranks, nccl=replace(res.nccl, env={"NCCL_NVLS_ENABLE": "0"}, choices=(ll,)))
    g = next(f for f in judge(bare, None) if f.code == "TD001")
    assert g.cause is not None and g.cause.what.startswith("NCCL chose Ring/LL for all_reduce at 1024 MiB")
