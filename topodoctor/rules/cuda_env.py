"""CUDA environment rules: which GPUs CUDA_VISIBLE_DEVICES lets a job see, and in which order."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule


def _visible(ctx: Context) -> tuple[str, list[str]] | None:
    v = ctx.environment.get("CUDA_VISIBLE_DEVICES")
    if v is None:
        return None
    return v, [e.strip() for e in v.split(",")]


@rule(
    "TD615",
    "cuda-visible-devices-invalid",
    "error",
)
def cuda_visible_invalid(ctx: Context) -> Iterator[Issue]:
    """CUDA_VISIBLE_DEVICES holds an entry that names no GPU (CUDA drops it and all after it).

    Why it matters: CUDA ignores every entry after the first invalid one, so the job sees fewer GPUs
    than it was given, or none.

    How to fix: list GPU indices (0..N-1) or UUIDs (GPU-...) that exist.
    """
    got = _visible(ctx)
    if got is None:
        return
    v, entries = got
    n = len(ctx.snap.gpus)
    uuids = [str(g.uuid) for g in ctx.snap.gpus]
    if v.strip() == "":
        yield Issue("env:CUDA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES is empty: CUDA sees no GPU", {"value": v})
        return
    for pos, e in enumerate(entries):
        ok = (e.isdigit() and int(e) < n) or (e.startswith(("GPU-", "MIG-")) and any(u.startswith(e) for u in uuids))
        if not ok:
            yield Issue(
                "env:CUDA_VISIBLE_DEVICES",
                f"CUDA_VISIBLE_DEVICES entry {e!r} names no GPU; CUDA ignores it "
                f"and {len(entries) - pos - 1} entries after it",
                {"value": v, "entry": e, "gpus": n},
            )
            return


@rule(
    "TD616",
    "cuda-visible-devices-duplicate",
    "error",
)
def cuda_visible_duplicate(ctx: Context) -> Iterator[Issue]:
    """CUDA_VISIBLE_DEVICES lists the same GPU twice.

    Why it matters: CUDA fails to initialise with duplicates: the job cannot start.

    How to fix: list each GPU once in CUDA_VISIBLE_DEVICES.
    """
    got = _visible(ctx)
    if got is None:
        return
    v, entries = got
    seen: set[str] = set()
    for e in entries:
        if e in seen and e:
            yield Issue("env:CUDA_VISIBLE_DEVICES", f"CUDA_VISIBLE_DEVICES lists {e!r} twice", {"value": v, "entry": e})
            return
        seen.add(e)


SLURM_SCRIPTS = ("prolog", "epilog")  # SLURM_SCRIPT_CONTEXT of slurmd's and slurmctld's scripts


@rule(
    "TD617",
    "cuda-device-order",
    "warning",
)
def cuda_device_order(ctx: Context) -> Iterator[Issue]:
    """CUDA_VISIBLE_DEVICES uses indices without CUDA_DEVICE_ORDER=PCI_BUS_ID.

    Not in Slurm's prolog or epilog (SLURM_SCRIPT_CONTEXT): slurmd sets CUDA_VISIBLE_DEVICES there
    to name the job's GPUs, without CUDA_DEVICE_ORDER, for the script alone; no CUDA program of the
    job reads it, and the check judges those GPUs by their NVML indices.

    Why it matters: CUDA's default order is fastest-first, which can differ from the PCI order
    nvidia-smi, NVML and schedulers use: index 0 may not be the GPU the scheduler meant.

    How to fix: export CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA numbers GPUs as nvidia-smi and NVML do,
    or use UUIDs.
    """
    got = _visible(ctx)
    if got is None or (ctx.environment.get("SLURM_SCRIPT_CONTEXT") or "").startswith(SLURM_SCRIPTS):
        return
    v, entries = got
    order = ctx.environment.get("CUDA_DEVICE_ORDER")
    if any(e.isdigit() for e in entries) and (order or "").upper() != "PCI_BUS_ID":
        yield Issue(
            "env:CUDA_DEVICE_ORDER",
            f"CUDA_VISIBLE_DEVICES={v} by index, CUDA_DEVICE_ORDER={order or 'unset'}",
            {"CUDA_VISIBLE_DEVICES": v, "CUDA_DEVICE_ORDER": order},
        )


@rule(
    "TD622",
    "cuda-launch-blocking",
    "warning",
)
def cuda_launch_blocking(ctx: Context) -> Iterator[Issue]:
    """CUDA_LAUNCH_BLOCKING=1: every kernel launch waits for the kernel to finish.

    Meant for debugging: an error then points at the launch that caused it.

    Why it matters: it serialises the whole program, so compute and communication no longer overlap
    and NCCL's kernels wait for the host. Training runs much slower with no error to show why.

    How to fix: unset CUDA_LAUNCH_BLOCKING outside debugging sessions.
    """
    v = ctx.environment.get("CUDA_LAUNCH_BLOCKING")
    if v is not None and v.strip() == "1":
        yield Issue("env:CUDA_LAUNCH_BLOCKING", "CUDA_LAUNCH_BLOCKING=1 serialises every kernel launch", {"value": v})
