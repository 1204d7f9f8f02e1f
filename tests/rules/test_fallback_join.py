"""The one fallback join (diagnosis/fallback.py) behind TD003, the cause engine of a slow run (the
collectives command and check's collectives pass) and diagnose: SHM where NCCL would run P2P is a
fallback, SHM where NCCL joins the GPUs through host memory by default is the expectation."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from topodoctor.model.collectives import load_result
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.service.collectives import judge
from topodoctor.topology.busbw import predict
from topodoctor.topology.view import HostView

RUN = Path(__file__).resolve().parents[2] / "fixtures/collectives/derived/x2-p2p-disabled.json"


def _links_down(snap: HostSnapshot) -> HostSnapshot:
    """The same two GPUs with every NVLink down: their path is the host bridge (PHB)."""
    return replace(
        snap, gpus=tuple(replace(g, nvlinks=tuple(replace(k, active=False) for k in g.nvlinks)) for g in snap.gpus)
    )


def test_td003_and_the_cause_read_one_join() -> None:
    res = load_result(str(RUN))
    (f,) = judge(res, None)
    (fell,) = [a for a in f.evidence["also"] if a["code"] == "TD003"]
    assert f.cause is not None and f.cause.confidence == "high"
    assert f.cause.evidence["transports"] == fell["evidence"]["transports"] == {"SHM": 8}


def test_shm_between_gpus_nccl_joins_through_host_memory_is_the_expectation() -> None:
    res = load_result(str(RUN))
    assert res.snapshot is not None
    phb = _links_down(res.snapshot)
    assert {k: c.label for k, c in HostView(phb).connections.items()} == {(0, 1): "PHB"}
    # the model of that host is NCCL's SHM: half of what its PCIe link is credited
    (p,) = predict(phb, ("all_reduce",))
    assert p.bottleneck.ring_gbps == 24.0 and "GPU0-GPU1 (PHB) through host memory" in p.bottleneck.what
    # and the run with NCCL_P2P_DISABLE=1 on it is what NCCL does there anyway: nothing to say
    found = judge(replace(res, snapshot=phb), phb)
    assert [f for f in found if f.severity in ("warning", "error", "critical")] == []
    # on the NVLink host the same SHM is a fallback, named by both
    assert {f.subject for f in judge(res, None)} == {"env:NCCL_P2P_DISABLE"}


def test_a_slow_run_on_such_gpus_is_not_blamed_on_the_setting_that_changed_nothing() -> None:
    """The PHB run at 0.3 of its figures: slow, but NCCL_P2P_DISABLE=1 changed nothing there (SHM is
    NCCL's default between them): cause not found, the setting ruled out saying why."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("derive", RUN.parents[2] / "derive_collectives.py")
    assert spec is not None and spec.loader is not None
    derive = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(derive)
    res = load_result(str(RUN))
    assert res.snapshot is not None
    phb = _links_down(res.snapshot)
    found = judge(derive.scale_large(replace(res, snapshot=phb), 0.3), phb)
    assert found and all(f.code == "TD001" and f.cause is not None for f in found)
    for f in found:
        assert f.cause is not None and f.cause.what == "cause not found"
        assert (
            "NCCL_P2P_DISABLE=1: no effect, NCCL joins these GPUs through host memory by default" in f.cause.ruled_out
        )
