"""Finding the bad node: which pairs to test in each round, and what the results say per node.

Pure logic (no torch, no I/O); the runner drives it inside one launched world:

    finder = PairwiseFinder(nodes=all_expected, joined=who_met)
    while (rnd := finder.next_round()) is not None:
        outcomes = run_pairs_at_once(rnd.pairs)      # process subgroups, one per pair
        finder.record(outcomes)
    verdicts = finder.verdicts()

An all_reduce over N nodes only says that something is slow. Split into disjoint pairs, a
slow pair still names two nodes; so each node of a slow (or hung, or failed) pair becomes a
*suspect* and is tested again with a node that passed. Paired with a node known to be good,
a suspect is slow, hung or healthy on its own account, and the verdict names the node.

The reference a pair is judged against is the expectation when the runner has one (from the
NICs the probe found), else the upper median of the busbw of the first round's pairs that
finished (every node once; later rounds are mostly suspects): the median when there are
many (robust to a few slow ones, and to pairs under one leaf switch running faster than
pairs across the spine), the better of two when there are two. A pair below
``(1 - tolerance)`` of it is slow. Without an expectation, a fleet where most pairs are slow
sets a low reference and flags nothing: that is a fleet-wide problem, which the expectation
exposes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from topodoctor.core.stats import median_high

Verdict = Literal["healthy", "slow", "hung", "failed", "failed_to_join", "undetermined"]
PairStatus = Literal["ok", "hung", "failed"]


@dataclass(frozen=True)
class Round:
    """One round of pair tests: disjoint pairs of nodes, and the joined nodes left out of it."""

    index: int
    pairs: tuple[tuple[str, str], ...]  # disjoint: every node in at most one pair
    idle: tuple[str, ...]  # joined nodes not tested this round


@dataclass(frozen=True)
class PairOutcome:
    """How one pair test ended: finished with its busbw, hung, or failed with an error."""

    a: str
    b: str
    status: PairStatus  # ok: finished; hung: cut by its timeout; failed: an error (NCCL, out of memory)
    busbw_gbps: float | None = None
    error: str | None = None


@dataclass(frozen=True)
class NodeVerdict:
    """What the pair tests say about one node: its verdict, how slow, and the evidence."""

    node: str
    verdict: Verdict
    slow_by: float | None  # share below the reference, 0.12 = 12 % slow
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class LaunchError:
    """The ranks never formed the intended world: a launch problem, never a slow node."""

    cause: str
    fix: str


def check_launch(expected_world: int, world_sizes: Mapping[str, int]) -> LaunchError | None:
    """Judge the launch from the world size each process saw (keyed by a rank or host name).

    Every process alone in a world of one is the classic trap (nccl-tests started by a
    launcher that did not hand over its world: busbw 0, "fast" and meaningless).
    """
    if not world_sizes:
        return LaunchError("no process reported its world", "check that the launcher started topodoctor at all")
    sizes = set(world_sizes.values())
    if expected_world > 1 and sizes == {1}:
        return LaunchError(
            f"the ranks never met: {len(world_sizes)} processes each ran alone "
            f"(world size 1, expected {expected_world})",
            "start the ranks through torchrun (--nnodes, --rdzv-backend c10d, one --rdzv-id) or srun, so that "
            "RANK, WORLD_SIZE and MASTER_ADDR reach every process",
        )
    if len(sizes) > 1:
        shown = ", ".join(f"{n}: {s}" for n, s in sorted(world_sizes.items()))
        return LaunchError(
            f"the processes joined different worlds ({shown})",
            "give every node the same --nnodes and rendezvous id, and one launch per rendezvous id",
        )
    return None


@dataclass
class _Record:
    passed_with: list[tuple[str, float]] = field(default_factory=list)  # (partner, busbw)
    bad: list[tuple[str, PairOutcome]] = field(default_factory=list)  # (partner, outcome)
    confirmed: Verdict | None = None
    slow_by: float | None = None


class PairwiseFinder:
    """Plans the rounds and turns pair results into one verdict per node."""

    def __init__(
        self,
        nodes: Sequence[str],
        joined: Collection[str],
        tolerance: float = 0.1,
        expected_gbps: float | None = None,
        max_rounds: int = 8,
    ) -> None:
        if len(set(nodes)) != len(nodes):
            raise ValueError("node names must be unique")
        self.nodes = tuple(nodes)
        self.joined = tuple(n for n in nodes if n in set(joined))
        self.tolerance = tolerance
        self.expected_gbps = expected_gbps
        self.max_rounds = max_rounds
        self.rounds: list[Round] = []
        self.outcomes: list[tuple[int, PairOutcome]] = []  # (round index, outcome)
        self._rec = {n: _Record() for n in self.joined}

    # ------------------------------------------------------------ planning

    def reference_gbps(self) -> float | None:
        """What a healthy pair reaches: the expectation when given (from the NICs), else the
        upper median of the first round's pairs that finished."""
        if self.expected_gbps is not None:
            return self.expected_gbps
        # Round one only: every node once, an unbiased sample; later rounds are mostly suspects.
        done = [o.busbw_gbps for i, o in self.outcomes if i == 1 and o.status == "ok" and o.busbw_gbps is not None]
        return median_high(done) if done else None

    def _good(self) -> list[str]:
        return [n for n in self.joined if self._state(n) == "healthy"]

    def _suspects(self) -> list[str]:
        return [n for n in self.joined if self._state(n) == "suspect"]

    def _state(self, node: str) -> str:
        r = self._rec[node]
        if r.confirmed is not None:
            return "confirmed"
        if r.passed_with:
            return "healthy"
        if r.bad:
            return "suspect"
        return "untested"

    def next_round(self) -> Round | None:
        """The next set of disjoint pairs, or None when nothing more can be learned."""
        if len(self.rounds) >= self.max_rounds:
            return None
        if not self.rounds:
            pairs = [(self.joined[i], self.joined[i + 1]) for i in range(0, len(self.joined) - 1, 2)]
        else:
            pairs = list(zip(self._suspects(), self._good()))
            untested = [n for n in self.joined if self._state(n) == "untested"]
            partners = [g for g in self._good() if g not in {b for _, b in pairs}]
            pairs += list(zip(untested, partners))  # the odd node out of round one
        if not pairs:
            return None
        busy = {n for p in pairs for n in p}
        rnd = Round(len(self.rounds) + 1, tuple(pairs), tuple(n for n in self.joined if n not in busy))
        self.rounds.append(rnd)
        return rnd

    # ------------------------------------------------------------ results

    def record(self, outcomes: Iterable[PairOutcome]) -> None:
        """Results of the last round's pairs (all of them, hung and failed included)."""
        got = list(outcomes)
        if not self.rounds:
            raise ValueError("record() before next_round()")
        planned = set(self.rounds[-1].pairs)
        for o in got:
            if (o.a, o.b) not in planned:
                raise ValueError(f"pair {o.a}-{o.b} was not planned for round {self.rounds[-1].index}")
        self.outcomes.extend((self.rounds[-1].index, o) for o in got)
        ref = self.reference_gbps()
        for o in got:
            for me, other in ((o.a, o.b), (o.b, o.a)):
                self._judge(me, other, o, ref)

    def _judge(self, me: str, other: str, o: PairOutcome, ref: float | None) -> None:
        rec = self._rec[me]
        if rec.confirmed is not None:
            return
        partner_good = self._state(other) == "healthy"
        slow = o.status == "ok" and (
            ref is not None and o.busbw_gbps is not None and o.busbw_gbps < (1.0 - self.tolerance) * ref
        )
        if o.status == "ok" and not slow:
            rec.passed_with.append((other, o.busbw_gbps or 0.0))
            return
        rec.bad.append((other, o))
        if partner_good:  # the partner passed with someone else: this node is the cause
            if o.status == "ok":
                rec.confirmed = "slow"
                rec.slow_by = 1.0 - (o.busbw_gbps or 0.0) / ref if ref else None
            else:
                rec.confirmed = o.status

    # ------------------------------------------------------------ verdicts

    def verdicts(self) -> list[NodeVerdict]:
        """One verdict per expected node, in the order given."""
        ref = self.reference_gbps()
        out = []
        joined = set(self.joined)
        for n in self.nodes:
            if n not in joined:
                out.append(NodeVerdict(n, "failed_to_join", None, ("never joined the world",)))
                continue
            rec = self._rec[n]
            ev = tuple(self._evidence(n, ref))
            if rec.confirmed is not None:
                out.append(NodeVerdict(n, rec.confirmed, rec.slow_by, ev))
            elif rec.passed_with:
                out.append(NodeVerdict(n, "healthy", None, ev))
            elif rec.bad:
                out.append(NodeVerdict(n, "undetermined", None, (*ev, "no node that passed was left to pair it with")))
            else:
                out.append(NodeVerdict(n, "undetermined", None, ("not tested: no partner",)))
        return out

    def _evidence(self, node: str, ref: float | None) -> Iterable[str]:
        for i, o in self.outcomes:
            if node not in (o.a, o.b):
                continue
            other = o.b if o.a == node else o.a
            if o.status == "ok" and o.busbw_gbps is not None:
                share = f" ({o.busbw_gbps / ref:.0%} of {ref:.1f})" if ref else ""
                yield f"round {i} with {other}: busbw {o.busbw_gbps:.1f} GB/s{share}"
            else:
                yield f"round {i} with {other}: {o.status}" + (f": {o.error}" if o.error else "")
