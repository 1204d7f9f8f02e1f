"""Collectives against the topology's own model (TD020 - TD039): what NCCL should reach on these
GPUs, from their links as NCCL credits them (topology/busbw.py), against what a run measured."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.core.text import human_size
from topodoctor.rules.collectives import collectives_of, gpu_of_rank
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule
from topodoctor.topology.busbw import model_at, predict

MODEL_MIN_BYTES = 256 << 20  # the model is of large messages: from here busbw is within a few % of its plateau
BELOW_MODEL = 0.85
FAR_BELOW_MODEL = 0.6  # an error from here: the run lost two fifths of what the hardware gives


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
    foreign GEMM on one GPU of four H200 gave 0.49), whatever the nominal rate says (TD001).

    How to fix: the finding names the bottleneck the model assumed (links, switch or NIC): check
    those (TD1xx for NVLink, TD2xx for PCIe, `topodoctor bandwidth` for the pairs), NCCL's account
    (transports, channels) and other work on the GPUs; then run again.
    """
    res = collectives_of(ctx)
    if res is None or len(res.nodes) > 1:
        return
    gpus = tuple(sorted(set(gpu_of_rank(ctx, res).values())))
    if len(gpus) < 2 or len(gpus) != res.world_size:
        return
    expected = {p.op: p for p in predict(ctx.snap, gpus=gpus)}
    for op in dict.fromkeys(r.op for r in res.rows):
        row = res.largest(op)
        p = expected.get(op)
        if p is None or row is None or row.size_bytes < MODEL_MIN_BYTES or row.best is None:
            continue
        got = row.best.busbw_gbps
        model = model_at(p.busbw_gbps, row.size_bytes)
        if got < BELOW_MODEL * model:
            yield Issue(
                op,
                f"{op} busbw {got:.1f} GB/s at {human_size(row.size_bytes)} is {got / model:.2f} of the "
                f"{model:.1f} GB/s the topology gives at that size ({p.algorithm}; bottleneck {p.bottleneck.what})",
                {
                    "op": op,
                    "measured_gbps": round(got, 1),
                    "model_gbps": model,
                    "basis": "the topology's model",  # TD001's is the link rate, a measured copy or an expectation
                    "plateau_gbps": p.busbw_gbps,
                    "bottleneck": p.bottleneck.what,
                    "bottleneck_gpus": list(p.bottleneck.gpus),
                    "size_bytes": row.size_bytes,
                },
                severity="error" if got < FAR_BELOW_MODEL * model else None,
            )
