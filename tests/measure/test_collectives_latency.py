"""`collectives --latency`: the table, its speedups and crossovers, the assembly of what the ranks
reported (cells a stopped run never reached included), the reasons a path is "not available",
and the command end to end on gloo (real ranks on the CPU: the eager path runs, the GPU paths say
why they cannot)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from topodoctor.measure.collectives.assemble import Collected
from topodoctor.measure.collectives.latency_run import build_latency
from topodoctor.model.collective_latency import (
    MULTICAST_PATHS,
    LatencyCell,
    LatencyPlan,
    LatencyResult,
    cell_of,
    overtakes,
    speedup,
    unavailable,
)
from topodoctor.model.collectives import Failure
from topodoctor.report.collectives_latency import latency_json, latency_lines

ROOT = Path(__file__).resolve().parents[2]
K, M = 1 << 10, 1 << 20
# Measured on the 2 x H100 NVSwitch host (torch 2.11 cu130, NCCL 2.28.9, multicast off), two
# ranks, fp32, mean per call through torch: eager NCCL, NCCL in a CUDA graph, one_shot, two_shot.
H100 = {
    (1 * K): (25.5, 9.3, 13.4, 10.0),
    (1 * M): (40.6, 16.0, 17.1, 12.8),
    (100 * M): (382.0, 384.0, 597.0, 329.0),
}


def _h100() -> LatencyResult:
    cells = [LatencyCell("p2p", K, "nccl_eager", "ok", 31.5, (31.5, 31.5), 0)]
    cells.append(LatencyCell("p2p", K, "nvshmem", "not available", note="nvshmem4py is not installed"))
    for size, times in H100.items():
        for path, t in zip(("nccl_eager", "nccl_graph", "symm_one_shot", "symm_two_shot"), times, strict=True):
            cells.append(LatencyCell("all_reduce", size, path, "ok", t, (t, t), 0))
        cells.append(LatencyCell("all_reduce", size, "nvshmem", "not available", note="nvshmem4py is not installed"))
    return LatencyResult(
        "collectives-latency", 1, "h100-x2", "nccl", 2, "2.11.0", "2.28.9", (), tuple(cells), (), 20.0, {}
    )


def test_speedups_and_where_eager_nccl_catches_up() -> None:
    res = _h100()
    one_k = res.cell("all_reduce", K, "nccl_graph")
    assert one_k is not None and round(speedup(res, one_k) or 0, 2) == 2.74  # 25.5 / 9.3
    got = {(o.op, o.path): o for o in overtakes(res)}
    one = got[("all_reduce", "symm_one_shot")]
    assert (one.below, one.at, one.speedup) == (M, 100 * M, round(382 / 597, 3))  # caught between 1M and 100M
    two = got[("all_reduce", "symm_two_shot")]
    assert (two.below, two.at) == (100 * M, None) and two.speedup == round(382 / 329, 3)  # still ahead at 100M
    assert got[("all_reduce", "nccl_graph")].at == 100 * M  # 384 against 382: even there
    assert ("p2p", "nvshmem") not in got  # no figure, no crossover


def test_text_fits_the_width_and_says_why_a_path_has_no_figure() -> None:
    lines = latency_lines(_h100(), 100)
    assert all(len(line) <= 100 for line in lines), max(lines, key=len)
    text = "\n".join(lines)
    assert "symm-mem two_shot_all_reduce_" in text and "2.55x" in text  # 25.5 / 10.0
    assert "between 1M and 100M" in text and "not by 100M, still 1.16x" in text
    assert "# NVSHMEM: not available: nvshmem4py is not installed" in text
    assert all(p in text.replace("\n#   ", " ") for p, _ in MULTICAST_PATHS)  # skipped, never measured
    assert "NVSHMEM       " not in text  # a path with no figure gets no rows, one line of why
    doc = latency_json(_h100())
    cell = next(c for c in doc["cells"] if c["path"] == "symm_two_shot" and c["size_bytes"] == K)
    assert cell["speedup"] == 2.55 and doc["baseline"] == "nccl_eager"
    assert {(o["path"], o["at"]) for o in doc["overtakes"]} >= {("symm_one_shot", 100 * M)}


def test_cells_are_the_mean_over_ranks_and_a_break_is_a_failure() -> None:
    c = cell_of("all_reduce", K, "nccl_eager", [[10.0, 0.0], [12.0, 1.0]])
    assert (c["status"], c["time_us"], c["rank_time_us"], c["wrong"]) == ("ok", 11.0, [10.0, 12.0], 1)
    assert cell_of("all_reduce", K, "nccl_eager", [[10.0, float("nan")], [12.0, 0.0]])["wrong"] is None
    assert cell_of("p2p", K, "symm_put", [[float("nan"), 0.0], [3.0, 0.0]])["status"] == "failed"
    assert unavailable("p2p", K, "nvshmem", "why")["status"] == "not available"


def test_a_stopped_run_keeps_its_cells_and_names_the_rest() -> None:
    plan = LatencyPlan(p2p_sizes=(K,), all_reduce_sizes=(K,), paths=("nccl_eager", "symm_two_shot"))
    got = Collected(
        meta={"ranks": [_rank(0), _rank(1)], "torch": "2.11.0", "nccl": "2.28.9", "versions": {"libnvshmem": "3.4.5"}},
        rows=[cell_of("p2p", K, "nccl_eager", [[30.0, 0.0], [31.0, 0.0]])],
        failures=[Failure("hang", None, K, "symm_two_shot all_reduce at 1024 B did not finish within 30 s")],
    )
    res = build_latency(got, plan, "nccl", 12.3)
    assert res.world_size == 2 and res.versions == {"libnvshmem": "3.4.5"}
    missing = [c for c in res.cells if c.status == "failed"]
    assert [(c.op, c.path) for c in missing] == [("all_reduce", "nccl_eager"), ("all_reduce", "symm_two_shot")]
    assert all("not reached: symm_two_shot all_reduce" in c.note for c in missing)
    text = "\n".join(latency_lines(res))
    assert "# FAILED hang" in text and "failed" in text
    with pytest.raises(Exception, match="could not start: no rank reported"):
        build_latency(Collected(), plan, "nccl", 1.0)


def _rank(r: int) -> dict[str, Any]:
    return {"rank": r, "local_rank": r, "host": "h", "pid": 1, "device": r, "bus_id": None}


@pytest.mark.slow
def test_a_rank_without_nvshmem4py_says_how_to_get_it() -> None:
    pytest.importorskip("torch")
    from topodoctor.measure.collectives.rank.latency import said
    from topodoctor.measure.collectives.rank.nvshmem_path import Nvshmem

    try:
        import nvshmem  # noqa: F401
    except ImportError:
        why = Nvshmem(SimpleNamespace(cuda=True)).open()  # type: ignore[arg-type]
        assert why == "nvshmem4py is not installed (pip install 'topodoctor[nvshmem]')"
    assert Nvshmem(SimpleNamespace(cuda=False)).open().startswith("needs CUDA GPUs")  # type: ignore[arg-type]
    assert said([{"why": "x"}, {"why": "x"}]) == "x"  # every rank alike: said once
    assert said([{"why": ""}, {"why": "y"}]) == "rank 1: y"
    assert said([{"why": ""}, {"why": ""}]) == ""


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    cmd = [sys.executable, "-m", "topodoctor", "collectives", "--latency", "--backend", "gloo", *args]
    return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=240)


@pytest.mark.slow
def test_end_to_end_on_gloo() -> None:
    pytest.importorskip("torch")
    r = _cli("--iters", "2", "--size", "1K,64K", "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    cells = {(c["op"], c["size_bytes"], c["path"]): c for c in doc["cells"]}
    for op in ("p2p", "all_reduce"):
        for size in (K, 64 * K):
            eager = cells[(op, size, "nccl_eager")]
            assert eager["status"] == "ok" and eager["time_us"] > 0 and eager["wrong"] == 0, eager
            assert len(eager["rank_time_us"]) == 2 and eager["speedup"] == 1.0
            assert cells[(op, size, "nvshmem")]["status"] == "not available"
    assert cells[("all_reduce", K, "symm_two_shot")]["note"] == "needs CUDA GPUs (gloo runs the ranks on the CPU)"
    assert doc["world_size"] == 2 and doc["settings"]["iters"] == 2 and not doc["failures"]
    text = _cli("--iters", "2", "--op", "all_reduce", "--size", "1K", env={"COLUMNS": "100"})
    assert text.returncode == 0 and "NCCL, eager (a launch per call)" in text.stdout
    assert max(len(line) for line in text.stdout.splitlines()) <= 100


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--op", "broadcast"], {}, "--latency times all_reduce and sendrecv"),
        (["--algo", "ring"], {}, "--latency runs on its own"),
        (["--format", "prometheus"], {}, "text or json"),
        (["--size", "8:64M"], {}, "a few sizes, not a sweep"),
        (["--nprocs", "1"], {}, "--nprocs must be at least 2"),
        (
            [],
            {"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"},
            "without torchrun / srun",
        ),
    ],
)
def test_usage_errors_exit_2_before_anything_starts(args: list[str], env: dict[str, str], says: str) -> None:
    r = _cli(*args, env=env)
    assert r.returncode == 2 and says in r.stderr, (r.returncode, r.stderr)


class _FakeShmem:
    """nvshmem4py's host API as 0.1.3 declares it (the signatures only), recording each call."""

    class Teams:
        TEAM_WORLD = 0

    class SignalOp:
        SIGNAL_SET = 9

    class ComparisonType:
        CMP_GE = 5

    def __init__(self, torch: Any) -> None:
        self.torch = torch
        self.calls: list[tuple[Any, ...]] = []

    def tensor(self, shape: tuple[int, ...], dtype: Any = None) -> Any:
        return self.torch.zeros(shape, dtype=dtype)

    def put_signal(
        self,
        dst: Any,
        src: Any,
        signal_var: Any,
        signal_val: int,
        signal_op: int,
        remote_pe: int = -1,
        stream: Any = None,
    ) -> None:
        self.calls.append(("put_signal", signal_val, signal_op, remote_pe, stream))

    def signal_wait(self, signal_var: Any, signal_val: int, signal_op: int, stream: Any = None) -> None:
        self.calls.append(("signal_wait", signal_val, signal_op, stream))

    def reduce(self, team: Any, dst_array: Any, src_array: Any, op: str, stream: Any = None) -> None:
        self.calls.append(("reduce", team, op, stream, dst_array.numel()))


def test_the_nvshmem_calls_follow_nvshmem4pys_signatures(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ping-pong steps one signal value on both ranks, each waiting before it answers; all_reduce
    is NVSHMEM's on-stream reduce over the world team (the GPU run shows the rest)."""
    torch = pytest.importorskip("torch")
    from topodoctor.measure.collectives.rank.nvshmem_path import Nvshmem

    def bench(me: int) -> Any:
        rank = SimpleNamespace(pattern=lambda r, n: torch.full((n,), float(r)), synced=lambda: None, me=me)
        plan = LatencyPlan(iters=1, reps=1, warmup=0, check=False)
        return SimpleNamespace(rank=rank, me=me, peer=1 - me, plan=plan, cuda=True)

    monkeypatch.setattr(Nvshmem, "stream", lambda self: "stream")
    seen = {}
    for me in (0, 1):
        shmem = Nvshmem(bench(me))
        shmem.core, shmem.signal = _FakeShmem(torch), "signal"
        pong = shmem.prepare("p2p", K)
        shmem.bench.eager_us = lambda call, per=1: [call() for _ in range(2)] and 1.0
        shmem.bench.pong_wrong = lambda *a: 0.0
        assert pong() == (1.0, 0.0)
        seen[me] = [c[:2] for c in shmem.core.calls]
        puts = [c for c in shmem.core.calls if c[0] == "put_signal"]
        assert {(c[2], c[3], c[4]) for c in puts} == {(9, 1 - me, "stream")}  # SET, to the peer, on our stream
        shmem.prepare("all_reduce", M)()
        assert shmem.core.calls[-1] == ("reduce", 0, "sum", "stream", M // 4)
    assert seen[0] == [("put_signal", 1), ("signal_wait", 1), ("put_signal", 2), ("signal_wait", 2)]
    assert seen[1] == [("signal_wait", 1), ("put_signal", 1), ("signal_wait", 2), ("put_signal", 2)]
