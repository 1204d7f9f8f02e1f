"""The HBM kernel sweep's own logic (tests/benchmarks/hbm_kernels.py) without a GPU: a stand-in
timer answers each kernel with a rate computed from its parameters, a stand-in nvbandwidth with
a fixed anchor; what is checked is which kernels the stages try, what they keep, the ratios and
the verdict, and that a timer which dies is replaced."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.benchmarks import fitness_bench, hbm_kernels
from topodoctor.measure.timer import copy_kernels
from topodoctor.measure.timer.copy_kernels import CopyKernel, parse

ANCHOR = 2000.0


def rate(k: CopyKernel) -> float:
    """A made-up landscape with one best point away from every default."""
    r = 1800.0 + 20 * min(k.unroll, 4) + (40 if k.style == "oneshot" else 0) + k.threads / 64
    r += {"nc": 15, "cs": 5}.get(k.load, 0) + {"cs": 12, "wt": -30}.get(k.store, 0) + (8 if k.prefetch else 0)
    r += 3 if k.skew == 4096 else 0
    return r + (6 if k.vec == "v4u32x2" else 0) - (200 if k.style == "bulk" else 0)


class FakeChild:
    instances: ClassVar[list[FakeChild]] = []
    poison = "stride-u8-t1024-b2"  # a kernel that kills its context
    wrong = "oneshot-u8-t128"  # a kernel that copies wrong
    hang = "bulk-s3"  # a kernel that never ends

    def __init__(self) -> None:
        self.hello = {"devices": [{"ordinal": 0, "bus_id": "0000:00:06.0", "name": "Fake H200"}]}
        self.tasks: list[dict[str, Any]] = []
        FakeChild.instances.append(self)

    def ask(self, task: dict[str, Any], timeout_s: float = 60.0) -> dict[str, Any]:
        self.tasks.append(task)
        if task["op"] == "chase":
            return {"samples": [1190.0, 1200.0, 1195.0], "verified": True}
        if task["engine"] == "ce":
            return {"samples": [ANCHOR * 1.008] * task["samples"], "verified": True}
        k = parse(task["kernel"])
        if task["kernel"].startswith(self.poison):
            return {"error": "RuntimeError: cuEventSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS"}
        if task["kernel"].startswith(self.hang):
            return {"error": f"no answer in {timeout_s:g} s", "dead": True}
        r = rate(k) * (1 + 0.002 * (task["size"] >> 20) / 1024)
        return {"samples": [r, r * 1.001], "verified": not k.name.startswith(self.wrong), "kernel": k.name}

    def close(self) -> None:
        pass


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    FakeChild.instances = []
    monkeypatch.setattr(hbm_kernels, "Child", FakeChild)
    nvb = {"device_local_copy": ANCHOR, "host_device_latency_sm": 1195.0}
    monkeypatch.setattr(hbm_kernels, "nvbandwidth", lambda path, tests, extra=(): {t: nvb[t] for t in tests})
    return argparse.Namespace(anchors=Path("/nowhere"), dev=0, size_mib=512, iters=16, samples=2, budget_s=600.0,
                              confirm=4, latency_rounds=3)  # fmt: skip


def test_the_sweep_keeps_the_fastest_verified_kernel(bench: argparse.Namespace) -> None:
    out = hbm_kernels.hbm(bench)
    measured = {r["name"] for r in out["records"] if r["size_mib"] == 512 and r.get("verified")}
    best = max(measured - {"ce"}, key=lambda n: rate(parse(n)))
    assert out["top"][0]["name"] == best and parse(best).style == "oneshot"
    # the hint stage combined the best load and the best store on the best oneshot shape
    assert parse(best).load == "nc" and parse(best).store == "cs" and parse(best).prefetch
    assert parse(best).vec == "v4u32x2" and parse(best).skew == 4096
    assert out["top"][0]["ratio_nvbandwidth"] == pytest.approx(out["top"][0]["gbps"] / ANCHOR, abs=1e-4)
    assert out["top"][0]["ratio_ce"] == pytest.approx(out["top"][0]["gbps"] / (ANCHOR * 1.008), abs=1e-4)
    # every stage ran; the leaders were measured again, at the other sizes too
    assert {r["stage"] for r in out["records"]} == {"start", "structure", "hints", "vector", "skew", "bulk", "confirm"}
    assert {r["size_mib"] for r in out["records"] if r["name"] == best} == {256, 512, 1024}
    assert out["default"]["name"] == copy_kernels.DEFAULT.name
    # a wrong copy is never a leader; a dead context costs one kernel and a new timer
    assert all(not r["name"].startswith(FakeChild.wrong) for r in out["top"])
    failed = {r["name"] for r in out["failed"]}
    assert any(n.startswith(FakeChild.poison) for n in failed) and any(n.startswith(FakeChild.wrong) for n in failed)
    lost = [r for r in out["records"] if "CUDA_ERROR" in str(r.get("error")) or "no answer" in str(r.get("error"))]
    assert len(FakeChild.instances) == 1 + len(lost)
    # after a bulk kernel hung, no other bulk kernel was tried
    bulk = [r["name"] for r in out["records"] if r["name"].startswith("bulk")]
    assert bulk[-1].startswith(FakeChild.hang) and bulk == [k.name for k in hbm_kernels.BULK[: len(bulk)]]
    assert out["hung_styles"] == ["bulk"]


def test_the_budget_cuts_the_sweep_short(bench: argparse.Namespace) -> None:
    bench.budget_s = 0.0
    out = hbm_kernels.hbm(bench)
    assert {r["stage"] for r in out["records"]} == {"start", "confirm"} and all(
        r["name"] == "ce" for r in out["records"]
    )


def test_the_verdict_reads_the_ratio_and_the_latency_rounds(bench: argparse.Namespace) -> None:
    part1, part2 = hbm_kernels.hbm(bench), hbm_kernels.latency(bench)
    lines = hbm_kernels.verdict(part1, part2)
    ratio = part1["top"][0]["gbps"] / ANCHOR
    assert f"= {ratio:.4f} x nvbandwidth" in lines[0]
    assert lines[1].endswith("NOT met" if ratio < hbm_kernels.TARGET else ": met")
    assert any(f"DEFAULT = parse('{part1['top'][0]['name']}')" in line for line in lines)
    assert part2["within_5_pct"] == "3 of 3" and len(part2["rounds"]) == 3
    assert all(t["op"] == "chase" and t["accesses"] == 1_000_000 for c in FakeChild.instances[-3:] for t in c.tasks)
    json.dumps({"hbm": part1, "latency": part2})  # the document is JSON


def test_stages_try_each_change_once() -> None:
    base = CopyKernel("oneshot", 2, 256)
    loads, stores, vecs = hbm_kernels.load_hints(base), hbm_kernels.store_hints(base), hbm_kernels.vectors(base)
    assert len(loads) == 2 * len(copy_kernels.LOAD_HINTS) - 1 and base not in loads
    assert {k.store for k in stores} == set(copy_kernels.STORE_HINTS) - {"def"}
    assert {(k.vec, k.unroll) for k in vecs} == {("v2u64", 2), ("v4u32x2", 2), ("v4u32x2", 1), ("u64", 2), ("u64", 4)}
    assert sorted(k.skew for k in hbm_kernels.skews(base)) == [256, 2048, 4096, 32768, 262144]
    assert len({k.name for k in hbm_kernels.structure()}) == len(hbm_kernels.structure())


def test_nvbandwidth_output_is_read() -> None:
    doc = {"nvbandwidth": {"testcases": [
        {"name": "device_local_copy", "status": "Passed", "bandwidth_matrix": [["2085.33"]]},
        {"name": "host_device_latency_sm", "status": "Passed", "bandwidth_matrix": [["N/A", "1195.2"]]},
        {"name": "device_to_device_latency_sm", "status": "Waived"},
    ]}}  # fmt: skip
    got = fitness_bench.parse_nvbandwidth(json.dumps(doc))
    assert got["device_local_copy"] == 2085.33 and got["host_device_latency_sm"] == 1195.2
    assert "Waived" in got["error"]
    assert "error" in fitness_bench.parse_nvbandwidth("Segmentation fault", "core dumped")
