"""The multi-node phases of a rank (imports torch: a measuring process only).

After the world's sweep, a world that spans nodes runs the plan's ops at its largest size on
process subgroups (``torch.distributed.new_group``): each node's ranks together (intra-node
figures) and each rail across the nodes (inter-node figures), every subgroup of a phase at
once. With pairwise on, ``topodoctor.model.pairwise.PairwiseFinder`` plans rounds of disjoint node
pairs; every rank runs the same planner on the same gathered outcomes, so all agree on the
next round without a coordinator.

Every rank creates every subgroup, in the same order, as torch requires. A pair's test is
timed on the host over its ``iters`` all_reduces (one warm-up before; the best of three loops) and polled against its
own deadline: a pair that does not finish is recorded as hung, its subgroup is aborted where
torch can, and the other pairs and later rounds go on. torch's own timeout on a pair's group
sits well past that deadline, so that its watchdog does not end the process first.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

import torch  # this module runs inside the measuring ranks
import torch.distributed as dist

from topodoctor.core.codec import to_jsonable
from topodoctor.measure.collectives.guard import Emit, Watchdog
from topodoctor.measure.collectives.nodes import Member, NodeSettings, nodes_of, rails
from topodoctor.measure.collectives.rank.worker import Rank
from topodoctor.model.collective_ops import Plan, bandwidth_gbps, shape
from topodoctor.model.pairwise import PairOutcome, PairwiseFinder

GATHER_WIDTH = 1 << 15  # bytes per rank for a phase's rows (a handful of rows at one size)
PAIR_REPEATS = 3  # timed loops per pair test; the fastest counts (noise only ever slows a loop)


def members(idents: list[dict[str, Any]], world_size: int) -> list[Member]:
    """The world's ranks as members of their nodes, from each rank's identity."""
    return [
        Member(int(i["rank"]), int(i["local_rank"]), str(i.get("node") or i["host"]), i.get("node_rank"), world_size)
        for i in idents
    ]


def _quiet(emit: Emit) -> Emit:
    """Begin / end events still reach a spawning parent (its hang watch); rows of subgroups
    are not the world's rows."""

    def send(ev: dict[str, Any]) -> None:
        if ev.get("ev") != "row":
            emit(ev)

    return send


def _sub(rank: Rank, plan: Plan, group: Any, emit: Emit) -> Rank:
    """This rank as a member of ``group``: its measurements and its own bookkeeping (start signals,
    gathering the rows) both on the group, numbered as the group numbers its ranks."""
    return Rank(plan, rank.world, _quiet(emit), group=group)


def _groups(lists: list[list[int]], timeout_s: float) -> list[Any]:
    return [dist.new_group(ranks, timeout=timedelta(seconds=timeout_s)) for ranks in lists]


def _phase(
    rank: Rank, plan: Plan, lists: list[list[int]], emit: Emit, watchdog: Watchdog
) -> list[list[dict[str, Any]]]:
    """Run ``plan`` on every subgroup in ``lists`` at once; each group's rows, on every rank."""
    groups = _groups(lists, plan.op_timeout_s + 5.0)
    rows: list[dict[str, Any]] = []
    for ranks, group in zip(lists, groups, strict=True):
        if rank.me in ranks:
            rows = _sub(rank, plan, group, emit).run(watchdog)["rows"]
    watchdog.begin("gather (node phases)", 0)
    got = rank.gather_json({"rows": rows}, GATHER_WIDTH)
    watchdog.end()
    return [got[ranks[0]]["rows"] for ranks in lists]


def node_phases(rank: Rank, plan: Plan, mems: list[Member], emit: Emit, watchdog: Watchdog) -> list[dict[str, Any]]:
    """Intra-node (each node's ranks) and inter-node (each rail) figures at the largest size."""
    by_node = nodes_of(mems)
    small = replace(plan, sizes=(max(plan.sizes),))
    out: list[dict[str, Any]] = []
    intra = [(n, rs) for n, rs in by_node.items() if len(rs) > 1]
    if intra:
        for (node, ranks), rows in zip(
            intra, _phase(rank, small, [rs for _, rs in intra], emit, watchdog), strict=True
        ):
            out.append({"scope": "intra", "name": node, "nodes": [node], "ranks": ranks, "rows": rows})
    node_of = {m.rank: m.node for m in mems}
    local = {m.rank: m.local_rank for m in mems}
    rail_lists = rails(mems)
    if rail_lists:
        for ranks, rows in zip(rail_lists, _phase(rank, small, rail_lists, emit, watchdog), strict=True):
            nodes = [node_of[r] for r in ranks]
            name = f"local rank {local[ranks[0]]}"
            out.append({"scope": "inter", "name": name, "nodes": nodes, "ranks": ranks, "rows": rows})
    return out


class _Hung(Exception):
    pass


def _wait(work: Any, deadline: float) -> None:
    while not work.is_completed():
        if time.monotonic() > deadline:
            raise _Hung
        time.sleep(0.0005)
    work.wait()  # raises the op's own error, if it had one


def pair_test(rank: Rank, group: Any, n: int, settings: NodeSettings) -> dict[str, Any]:
    """all_reduce of the pair's size on the pair's subgroup: busbw as this rank timed it."""
    count = shape("all_reduce", settings.pair_size_bytes, n).count
    deadline = time.monotonic() + settings.pair_timeout_s
    try:
        buf = torch.ones(max(count, 1), device=rank.device)
        _wait(dist.all_reduce(buf, group=group, async_op=True), deadline)  # warm-up: connections made here
        seconds = math.inf
        for _ in range(PAIR_REPEATS):  # the best of a few: a pair is judged on what it can do
            if rank.cuda:
                torch.cuda.synchronize(rank.device)
            t0 = time.perf_counter()
            works = [dist.all_reduce(buf, group=group, async_op=True) for _ in range(settings.pair_iters)]
            for w in works:
                _wait(w, deadline)
            if rank.cuda:
                torch.cuda.synchronize(rank.device)
            seconds = min(seconds, (time.perf_counter() - t0) / settings.pair_iters)
    except _Hung:
        return {"status": "hung", "error": f"did not finish within {settings.pair_timeout_s:g} s"}
    except Exception as exc:  # an NCCL or gloo error in this pair: the others go on
        first = (str(exc).strip().splitlines() or [""])[0][:160]
        return {"status": "failed", "error": f"{type(exc).__name__}: {first}"}
    return {"status": "ok", "busbw": bandwidth_gbps("all_reduce", count, seconds, n)[1]}


def _abort(group: Any) -> None:
    """Free a hung pair's communicator so its ranks can go on (best effort: torch's API)."""
    abort: Callable[[Any], None] | None = getattr(dist.distributed_c10d, "_abort_process_group", None)
    if abort is not None:
        try:
            abort(group)
        except Exception:  # nothing better to do: the pair is already recorded as hung
            return


def _outcome(a: str, b: str, views: list[dict[str, Any]]) -> PairOutcome:
    """One pair's outcome from every rank's view: the worst status, the slowest rank's busbw."""
    for status in ("hung", "failed"):
        bad = [v for v in views if v.get("status") == status]
        if bad:
            return PairOutcome(a, b, status, None, str(bad[0].get("error", "")))
    busbw = min(float(v["busbw"]) for v in views)
    return PairOutcome(a, b, "ok", round(busbw, 3))


def pairwise(rank: Rank, mems: list[Member], settings: NodeSettings, emit: Emit, watchdog: Watchdog) -> dict[str, Any]:
    """Rounds of disjoint node pairs until the finder has a verdict for every node."""
    by_node = nodes_of(mems)
    expected = list(settings.expect_nodes) or list(by_node)
    expected += [n for n in by_node if n not in expected]  # a node nobody expected still counts
    finder = PairwiseFinder(
        expected, list(by_node), settings.tolerance, settings.expected_gbps, max_rounds=settings.max_rounds
    )
    cache: dict[tuple[str, str], Any] = {}
    while (rnd := finder.next_round()) is not None:
        todo = [p for p in rnd.pairs if p not in cache]
        lists = [by_node[a] + by_node[b] for a, b in todo]
        cache.update(zip(todo, _groups(lists, 2 * settings.pair_timeout_s + 30.0), strict=True))
        mine: dict[str, Any] = {}
        for i, (a, b) in enumerate(rnd.pairs):
            ranks = by_node[a] + by_node[b]
            if rank.me in ranks:
                emit({"ev": "begin", "rank": rank.me, "op": f"pair {a}-{b}", "size": settings.pair_size_bytes})
                mine = {"pair": i, **pair_test(rank, cache[(a, b)], len(ranks), settings)}
                emit({"ev": "end", "rank": rank.me, "op": f"pair {a}-{b}", "size": settings.pair_size_bytes})
                if mine["status"] == "hung":
                    _abort(cache.pop((a, b)))
        watchdog.begin(f"pairwise round {rnd.index}", 0)
        views = rank.gather_json(mine)
        watchdog.end()
        outcomes = []
        for i, (a, b) in enumerate(rnd.pairs):
            got = [views[r] for r in by_node[a] + by_node[b] if views[r].get("pair") == i]
            outcomes.append(_outcome(a, b, got) if got else PairOutcome(a, b, "failed", None, "no rank reported"))
        finder.record(outcomes)
    report = {
        "op": "all_reduce",
        "size_bytes": shape("all_reduce", settings.pair_size_bytes, 2).size_bytes,
        "tolerance": settings.tolerance,
        "reference_gbps": finder.reference_gbps(),
        "expected_gbps": settings.expected_gbps,
        "rounds": finder.rounds,
        "outcomes": finder.outcomes,
        "verdicts": finder.verdicts(),
    }
    return dict(to_jsonable(report))


def run_nodes(
    rank: Rank, plan: Plan, idents: list[dict[str, Any]], settings: NodeSettings, emit: Emit
) -> dict[str, Any]:
    """The phases this world calls for: nothing on one node without pairwise."""
    mems = members(idents, rank.n)
    spans_multiple = len(nodes_of(mems)) > 1
    out: dict[str, Any] = {}
    if not spans_multiple and not settings.pairwise and not settings.nic_loopback:
        return out
    watchdog = rank.watchdog or Watchdog(plan.op_timeout_s, emit, rank.me)
    # a round of pairs polls its own deadline; the world's timeout covers the round's gather too
    watchdog.timeout_s = max(plan.op_timeout_s, settings.pair_timeout_s) + 10.0
    if spans_multiple and settings.phases:
        out["spans"] = node_phases(rank, plan, mems, emit, watchdog)
    if settings.nic_loopback:
        out["spans"] = [*out.get("spans", []), *loopback_spans(rank, mems, settings, watchdog)]
    if settings.pairwise:
        out["pairwise"] = pairwise(rank, mems, settings, emit, watchdog)
    return out


def loopback_spans(rank: Rank, mems: list[Member], settings: NodeSettings, watchdog: Watchdog) -> list[dict[str, Any]]:
    """Each node's run through its own NICs (made by its local rank 0 before it joined)."""
    watchdog.begin("gather (NIC loopback)", 0)
    got = rank.gather_json({"loopback": settings.loopback}, GATHER_WIDTH)
    watchdog.end()
    out = []
    for node, ranks in nodes_of(mems).items():
        done = next((got[r]["loopback"] for r in ranks if got[r].get("loopback")), None)
        if done is None:
            done = {"rows": [], "account": "no rank of this node ran it (local rank 0 not on this node?)"}
        out.append({"scope": "nic", "name": node, "nodes": [node], "ranks": [], **done})
    return out
