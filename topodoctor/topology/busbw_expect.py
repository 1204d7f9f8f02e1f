"""The busbw one op should reach at one size on a run's GPUs, and what that figure rests on.

One function (``expected_busbw``) gives the figure every output states: TD001 and TD020 judge a
row by it, the collectives table's model column prints it, ``collectives --predict`` prints it (at
1 GiB, or at the sizes asked), and the findings' JSON carry it with its basis. The basis is the
first of these that applies:

- ``expectation``: the user's own number for this node type (``--expect-busbw``);
- ``model``: the topology's model at that size (busbw.py's ``predict`` and ``model_at``), one node;
- ``copy``: the slowest one-way copy measured between the run's GPUs (a bandwidth result of the host);
- ``link``: the slowest pair's nominal rate per direction (copy_rates.py).

A user's number wins because it is what the site holds this node type to. The model comes before a
measured copy and a link rate because it knows the op and its size: a copy or a link's rate is the
same figure for all_reduce at 64 MiB and sendrecv at 1 GiB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from topodoctor.topology.busbw import Prediction, model_at, predict
from topodoctor.topology.copy_rates import Expected, expected_pairs

if TYPE_CHECKING:  # annotations only: a static check loads the rules, and no result class
    from topodoctor.model.copies import BandwidthResult
    from topodoctor.model.snapshot import HostSnapshot

# basis -> the words every output names it by
BASES = {
    "expectation": "the expectation given (--expect-busbw)",
    "model": "the topology's model",
    "copy": "the measured one-way copy bandwidth",
    "link": "the link rate",
}


@dataclass(frozen=True)
class Expectation:
    """What one op should reach at one size, in GB/s busbw with one decimal (as every output
    prints it), and what that rests on."""

    op: str
    size_bytes: int
    gbps: float
    basis: str  # a key of BASES
    source: str  # the basis in words, with its particulars ("the nominal NV18 rate per direction")
    prediction: Prediction | None = None  # the model's, where the basis is the model

    def evidence(self) -> dict[str, Any]:
        """The fields every finding judged by it carries in its JSON."""
        out: dict[str, Any] = {"expected_gbps": self.gbps, "basis": self.basis, "basis_source": self.source}
        if self.prediction is not None:
            p = self.prediction
            out |= {
                "plateau_gbps": p.busbw_gbps,
                "algorithm": p.algorithm,
                "bottleneck": p.bottleneck.what,
                "bottleneck_gpus": list(p.bottleneck.gpus),
            }
        return out


def model_expectation(prediction: Prediction, size_bytes: int) -> Expectation:
    """The model's figure for ``prediction``'s op at ``size_bytes``: the one the table, ``--predict``
    and TD020 print."""
    return Expectation(
        prediction.op,
        size_bytes,
        model_at(prediction.busbw_gbps, size_bytes),
        "model",
        BASES["model"],
        prediction,
    )


def expected_busbw(
    snap: HostSnapshot,
    op: str,
    size_bytes: int,
    gpus: tuple[int, ...],
    nodes: int = 1,
    *,
    expect_gbps: float | None = None,
    copies: BandwidthResult | None = None,
    links: Mapping[tuple[int, int], Expected] | None = None,
    model: bool = True,
) -> Expectation | None:
    """What ``op`` should reach at ``size_bytes`` on ``gpus`` of ``snap`` (``nodes`` such hosts), on
    the first basis that applies (the module's list); None where none does. ``links`` is the host's
    expected pairs where the caller has them (copy_rates.expected_pairs); ``model`` False where the
    run's ranks are not all known to be on ``gpus`` (the model is of exactly those GPUs)."""
    if expect_gbps is not None and expect_gbps > 0:
        return Expectation(op, size_bytes, round(float(expect_gbps), 1), "expectation", BASES["expectation"])
    if nodes > 1 or len(gpus) < 2:
        return None  # across nodes the network bounds the world: only the user's number says what it should be
    pred = next((p for p in predict(snap, (op,), gpus) if p.op == op), None) if model else None
    if pred is not None:
        return model_expectation(pred, size_bytes)
    pairs = [(a, b) for a in gpus for b in gpus if a != b]
    if copies is not None:
        got = [
            m.value.median for a, b in pairs if (m := copies.find("oneway", a, b)) is not None and m.value is not None
        ]
        if got and len(got) == len(pairs):
            return Expectation(op, size_bytes, round(min(got), 1), "copy", BASES["copy"])
    exp = links if links is not None else expected_pairs(snap)
    rates = [e.nominal_gbps for p in pairs if (e := exp.get(p)) is not None and e.nominal_gbps]
    if rates and len(rates) == len(pairs):
        cls = exp[pairs[0]].cls
        return Expectation(op, size_bytes, round(min(rates), 1), "link", f"the nominal {cls} rate per direction")
    return None
