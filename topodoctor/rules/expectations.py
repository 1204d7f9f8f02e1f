"""Expectation rules (TD8xx): the host against its node type's expectations file."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.core.text import plural
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule


@rule(
    "TD801",
    "gpu-count-mismatch",
    "error",
    needs=("expect",),
)
def gpu_count_mismatch(ctx: Context) -> Iterator[Issue]:
    """The host has a different number of GPUs than its node type should.

    Why it matters: a job sized for the node type gets fewer GPUs than it asked for, or fails to
    start; a GPU missing from the bus is often a hardware fault.

    How to fix: a GPU is missing from the bus or hidden: check `lspci -d 10de:`, the kernel log and
    the BIOS; reseat or service it.
    """
    assert ctx.expect is not None
    n = len(ctx.snap.gpus)
    if n != ctx.expect.gpu_count:
        found = f"{plural(n, 'GPU')} found, {ctx.expect.gpu_count} expected"
        yield Issue("host", found, {"found": n, "expected": ctx.expect.gpu_count})


@rule(
    "TD802",
    "gpu-model-mismatch",
    "error",
    needs=("expect",),
)
def gpu_model_mismatch(ctx: Context) -> Iterator[Issue]:
    """A GPU's model differs from the expected model.

    Why it matters: jobs and schedulers choose the node by its type; a different model has other
    memory, speeds and links, and a job tuned for the type runs slower or does not fit.

    How to fix: the node holds a different GPU model than its type says: fix the inventory or the
    node.
    """
    assert ctx.expect is not None
    for g in ctx.live_gpus:
        name = ctx.need(g.name, f"GPU{g.index}", "name")
        if name is not None and ctx.expect.gpu_model and name != ctx.expect.gpu_model:
            yield Issue(
                f"GPU{g.index}",
                f"GPU{g.index} is {name}, expected {ctx.expect.gpu_model}",
                {"found": name, "expected": ctx.expect.gpu_model},
            )


@rule(
    "TD803",
    "nic-missing",
    "error",
    needs=("expect",),
)
def nic_missing(ctx: Context) -> Iterator[Issue]:
    """An RDMA NIC the node type should have is absent, or its port is not active.

    Why it matters: the node's share of inter-node traffic goes through the NICs it has left, or
    falls back to TCP sockets: the job's communication across nodes slows down.

    How to fix: an RDMA NIC is missing: check `ibv_devinfo`, the driver (mlx5_core), the cabling and
    the PCIe slot.
    """
    assert ctx.expect is not None
    present = {n.name: n for n in ctx.snap.nics}
    unlisted = ctx.host_errors("list /sys/class/infiniband") + ctx.host_errors("list /sys/class/net")
    for name in ctx.expect.nics:
        nic = present.get(name)
        if nic is None and unlisted:
            for err in unlisted:
                ctx.missing(f"nic:{name}", "nics", err.error, err.call)
        elif nic is None:
            yield Issue(f"nic:{name}", f"NIC {name} is missing", {"expected": list(ctx.expect.nics)})
        else:
            state = ctx.need(nic.state, f"nic:{name}", "state")
            if state is not None and state.upper() != "ACTIVE":
                yield Issue(f"nic:{name}", f"NIC {name} port is {state}", {"state": state})
