"""Collectives against the topology's own model (TD020 - TD039): what NCCL should reach on these
GPUs, from their links as NCCL credits them (topology/busbw.py), against what a run measured."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.core.text import human_size
from topodoctor.diagnosis.run import run_expectation
from topodoctor.rules.collectives import LOW_VS_MODEL, collectives_of, judged_against
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule

MODEL_MIN_BYTES = 256 << 20  # the model is of large messages: from here busbw is within a few % of its plateau
BELOW_MODEL = 0.85
FAR_BELOW_MODEL = LOW_VS_MODEL  # an error from here, as TD001 (one finding: rules/one_cause.py folds them)


@rule(
    "TD020",
    "coll-below-model",
    "warning",
    tags=("prolog", "collectives"),
    also=("error",),
)
def coll_below_model(ctx: Context) -> Iterator[Issue]:
    """An op's busbw at its largest size (256 MiB or more) is under 0.85 of the topology's model at that size.

    The model (topology/busbw.py, docs/collectives.md) takes each GPU's bandwidth as NCCL credits it
    (NVLinks x NCCL's per-link rate, PCIe width x lane rate, the NICs across nodes), fills it with
    NCCL's channels and applies each algorithm's efficiency; on the H200 hosts it is within 5 % of
    nccl-tests at 1 GiB. Below 1 GiB the model's plateau is lowered by the fixed time every op pays
    (``at_size``): a 256 MiB sendrecv on a healthy 2 x H100 host reaches 0.83 of the plateau, 0.99 of
    the model at its size. One node only: across nodes the network model is not yet held against
    measurements.

    Why it matters: a run under 0.85 of the model lost a sixth of what the hardware gives: a slow
    link, a fallback transport, fewer channels or a busy GPU, and a job's collectives lose as much.
    Under 0.6 of the model it is an error: a job's collectives take two thirds longer or more (a
    foreign GEMM on one GPU of four H200 gave 0.49). TD001 judges the same row by the same figure
    (topology/busbw_expect.py) from 0.6 down: where both fire they are one finding, TD001 with this
    one under it (``also``).

    How to fix: the finding names the bottleneck the model assumed (links, switch or NIC): check
    those (TD1xx for NVLink, TD2xx for PCIe, `topodoctor bandwidth` for the pairs), NCCL's account
    (transports, channels) and other work on the GPUs; then run again.
    """
    res = collectives_of(ctx)
    if res is None or len(res.nodes) > 1:
        return
    for op in dict.fromkeys(r.op for r in res.rows):
        row = res.largest(op)
        if row is None or row.size_bytes < MODEL_MIN_BYTES or row.best is None:
            continue
        # the model whatever else TD001 was given: --expect-busbw is the site's number, not the hardware's
        e = run_expectation(ctx.snap, res, op, row.size_bytes, links=ctx.expected_bandwidth)
        if e is None or e.basis != "model" or e.prediction is None:
            continue
        got, p = row.best.busbw_gbps, e.prediction
        if got < BELOW_MODEL * e.gbps:
            yield Issue(
                op,
                f"{op} busbw {got:.1f} GB/s at {human_size(row.size_bytes)} is {got / e.gbps:.2f} of "
                f"{judged_against(e)} ({p.algorithm}; bottleneck {p.bottleneck.what})",
                {
                    "op": op,
                    "size_bytes": row.size_bytes,
                    "measured_gbps": round(got, 1),
                    **e.evidence(),
                    "ratio": round(got / e.gbps, 3),
                },
                severity="error" if got < FAR_BELOW_MODEL * e.gbps else None,
            )
