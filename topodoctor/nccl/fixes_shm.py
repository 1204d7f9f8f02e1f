"""Builders of `nccl-log` findings for shared memory on the host: NCCL's /dev/shm segments (full, refused,
missing at a peer, not registered with CUDA) and UCX's receive FIFO in /dev/shm. Data in, text out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topodoctor.nccl.cuda_errors import cuda_text
from topodoctor.nccl.evidence import Builder, LogContext, Said
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.parse import Event


def _shm_register(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said(
        "TD056", f"cudaHostRegister of NCCL's /dev/shm segment failed ({cuda_text(f)})", EXPLANATIONS["TD056"].fix
    )


def _shm_permission(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    seg = f.get("seg") or next((e.fields["seg"] for e in ctx.secondary if e.fields.get("seg")), "")
    what = f"its segment {seg}" if seg else "its segment"
    return Said("TD082", f"/dev/shm refused NCCL {what}: Permission denied", EXPLANATIONS["TD082"].fix)


def _shm_full(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    seg = f.get("seg") or f.get("seg2") or f.get("seg3") or ""
    size = f.get("size") or f.get("size2") or ""
    if not seg:  # the fallocate line names no segment: the summary line after it does
        summary = next((e.fields for e in ctx.secondary if e.fields.get("seg")), {})
        seg, size = summary.get("seg", ""), summary.get("size", "")
    err = (f.get("err") or f.get("err2") or f.get("err3") or "No space left on device").strip()
    if err == "failed to allocate receive FIFO":  # UCX's words: its segment in /dev/shm, not NCCL's
        msg = "UCX's shared-memory transport failed to allocate its receive FIFO in /dev/shm (too small, or full)"
        return Said("TD043", msg, EXPLANATIONS["TD043"].fix)
    msg = (
        f"shared memory segment {seg} of {size} bytes could not be created: {err}"
        if seg and size
        else (f"shared memory segment {seg} could not be created: {err}" if seg else f"/dev/shm: {err}")
    )
    return Said("TD043", msg, EXPLANATIONS["TD043"].fix)


CONTAINER_SHM_BYTES = 64 * 1024 * 1024  # docker's default /dev/shm size (--shm-size)


def _shm_create(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """The segment's summary line alone: NCCL failed to create (or attach to) it, and the line before
    it that says why is not in the log. Its candidates are the class's (nccl.causes_host)."""
    seg, size = f.get("seg", ""), int(f.get("size") or 0)
    err = f" (errno {f['errno']}: {f['err'].strip()})" if f.get("errno") else ""
    why = "; the line that says why is not in the log"
    if f.get("err") and not f.get("how"):  # include/shm.h before 2.4 says why on the line itself
        err, why = f": {f['err'].strip()}", ""
    if f.get("how") == "attaching to":
        msg = f"NCCL could not attach to a local peer's shared-memory segment {seg}{err}{why}"
        return Said("TD074", msg, EXPLANATIONS["TD074"].fix)
    if not err and any("cuda" in c for c in ctx.classes):  # ncclUnhandledCudaError: the file was made, not pinned
        msg = (
            f"NCCL could not create its shared-memory segment {seg} of {size} bytes, and the run failed with "
            "'unhandled cuda error': the file and its mapping were made, the CUDA driver's pinning of them "
            "(cudaHostRegister) failed"
        )
        return Said("TD056", msg, EXPLANATIONS["TD056"].fix)
    room = (
        f" ({size / 2**20:.1f} MiB: NCCL makes one per connection to a local peer, so a container's default 64 MiB "
        f"/dev/shm holds {CONTAINER_SHM_BYTES // size} of them)"
        if size
        else ""
    )
    msg = f"NCCL could not create its shared-memory segment {seg} of {size} bytes{room}{err}{why}"
    return Said("TD043", msg, EXPLANATIONS["TD043"].fix)


def _shm_attach(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    return Said(
        "TD074",
        f"a local peer's segment {f.get('seg', '')} was missing: {f.get('err', '').strip()}",
        EXPLANATIONS["TD074"].fix,
    )


SHM: dict[str, Builder] = {
    "shm-register": _shm_register,
    "shm-full": _shm_full,
    "shm-attach": _shm_attach,
    "shm-permission": _shm_permission,
    "shm-create": _shm_create,
}
