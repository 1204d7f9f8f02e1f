"""The measurements from Python: ``bandwidth`` (copies between GPUs and to the host),
``collectives`` (NCCL collectives through torch.distributed) and ``predict`` (the busbw the
topology gives each collective, nothing run). Each returns the plain result the command saves
with ``-o`` (``predict``: the rows of ``collectives --predict -f json``); where nothing could be
measured (no GPU, no torch, too few GPUs) it raises ``CannotMeasure``."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from topodoctor.api.host import Host, probed
from topodoctor.core.budget import Budget
from topodoctor.core.errors import CannotMeasure, InputError, ProbeUnavailable
from topodoctor.core.options import from_keywords
from topodoctor.model.collective_ops import parse_ops
from topodoctor.model.copy_modes import COPY_MODES
from topodoctor.service import copies
from topodoctor.service.collective_runs import run_collectives, run_of
from topodoctor.service.collective_sweeps import predict_for
from topodoctor.service.passes import Source
from topodoctor.service.request_bandwidth import BandwidthRequest
from topodoctor.service.request_collectives import Backend, CollectivesRequest

if TYPE_CHECKING:
    from topodoctor.model.collectives import CollectivesResult
    from topodoctor.model.copies import BandwidthResult
    from topodoctor.topology.busbw import Prediction

MODES = COPY_MODES  # `bandwidth --mode`'s choices, the same list


def _source(host: Host | None) -> Source:
    return Source() if host is None else probed(host)[1]


def _could_not(exc: ProbeUnavailable) -> CannotMeasure:
    return CannotMeasure(f"could not measure: {exc}")


def bandwidth(
    host: Host | None = None,
    *,
    modes: Iterable[str] = (),
    quick: bool = False,
    devices: Sequence[int] | None = None,
    size_bytes: int | str | None = None,
    iters: int | None = None,
    samples: int | None = None,
    sm_kernel: str | None = None,
    pair_timeout: float = 20.0,
    timeout: float = 900.0,
) -> BandwidthResult:
    """Time copies on the GPUs of ``host`` (None: this host, probed afresh) as ``topodoctor
    bandwidth`` does with the same options: ``modes`` among the command's (``MODES``: oneway,
    bidir, latency, h2d, d2h, host, sm, sm-oneway, sm-bidir, sm-latency, all; default: the
    command's); ``quick`` (a prolog's short pass); ``devices`` (NVML
    indices); ``size_bytes`` (bytes, or a size as ``--size`` reads it: "256M", a bare number MiB);
    ``sm_kernel`` (``--sm-kernel``). Every keyword is the command's option, read by its spec.
    The ``BandwidthResult`` holds every measurement and the snapshot it ran on.
    Raises ``CannotMeasure`` when the copies cannot run here (no GPU, no CUDA, no torch)."""
    if devices is not None and (
        isinstance(devices, (str, bytes))
        or not isinstance(devices, Iterable)
        or not all(isinstance(d, int) and not isinstance(d, bool) for d in devices)
    ):
        raise InputError(f"devices takes NVML indices (a sequence of integers), not {devices!r}")
    chosen = None if devices is None else ",".join(str(d) for d in devices)
    given = {
        "mode": modes,
        "quick": quick,
        "devices": chosen,
        "size_bytes": size_bytes,
        "iters": iters,
        "samples": samples,
        "sm_kernel": sm_kernel,
        "pair_timeout": pair_timeout,
        "timeout": timeout,
    }
    request = from_keywords(BandwidthRequest, given, {"mode": "modes"})
    try:
        return copies.measure(request, Budget.start(request.timeout), source=_source(host))
    except ProbeUnavailable as exc:
        raise _could_not(exc) from exc


def collectives(
    host: Host | None = None,
    *,
    ops: Iterable[str] = (),
    sizes: str = "8:1G",
    step_factor: int = 2,
    iters: int = 20,
    warmup: int = 1,
    check_data: bool = True,
    nprocs: int | None = None,
    backend: Backend = "nccl",
    op_timeout: float = 30.0,
    start_timeout: float = 120.0,
    log_dir: str | os.PathLike[str] | None = None,
    timeout: float = 0.0,
) -> CollectivesResult:
    """Run NCCL collectives on the GPUs of ``host`` (None: this host) as ``topodoctor collectives``
    does, one rank per GPU spawned here: ``ops`` (default all seven), ``sizes`` (a sweep
    ``MIN:MAX`` by ``step_factor``, or a list), ``backend="gloo"`` runs the ranks on CPU. The
    ``CollectivesResult`` holds nccl-tests' rows, NCCL's choices and any failure. Raises
    ``CannotMeasure`` when the ranks cannot run (no GPU, fewer than two, no torch)."""
    given = {
        "op": ops,
        "size": sizes,
        "step_factor": step_factor,
        "iters": iters,
        "warmup": warmup,
        "no_check": not check_data,
        "nprocs": nprocs,
        "backend": backend,
        "op_timeout": op_timeout,
        "start_timeout": start_timeout,
        "log_dir": log_dir,
        "timeout": timeout,
        "spawn": True,  # ranks of its own, even inside a launcher's job: a library call never joins the world
    }
    said = {"op": "ops", "size": "sizes", "no_check": "check_data"}
    request = from_keywords(CollectivesRequest, given, said)
    run = run_of(request, _source(host))
    try:
        out = run_collectives(run, Budget.start(request.limits.timeout))
    except ProbeUnavailable as exc:
        raise _could_not(exc) from exc
    assert out is not None  # spawned ranks: this process always reports
    return out.result


def predict(host: Host, *, ops: Iterable[str] = (), nodes: int = 1) -> tuple[Prediction, ...]:
    """The busbw the topology of ``host`` gives each collective at 1 GiB (``nodes`` such hosts
    joined by their NICs), as ``collectives --predict`` prints it: nothing runs, a recording will
    do. Raises ``CannotMeasure`` when the topology says too little (one GPU, links unread)."""
    found, _ = probed(host)
    asked = {"op": ops, "predict": True, "predict_nodes": nodes}
    request = from_keywords(CollectivesRequest, asked, {"op": "ops", "predict_nodes": "nodes"})
    return predict_for(
        found.snapshot, parse_ops(list(request.run.op) or None), request.predict.predict_nodes
    ).predictions
