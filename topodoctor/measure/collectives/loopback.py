"""A node through its own NICs: its GPUs in a run of their own with NCCL's P2P and SHM
transports off, so that every byte between them leaves through a NIC and comes back (NCCL's
NET transport: IB / RoCE loopback, or sockets). No torch here.

Why processes of their own: NCCL reads each of its variables once per process, at the first
communicator, and keeps the value (``NCCL_PARAM``'s cache in src/include/param.h); a later
process group in the same process cannot turn P2P or SHM off, and ``ncclConfig_t`` (what
``ProcessGroupNCCL.Options.config`` passes) has no field for either. So each node's local
rank 0 starts the node's ranks afresh with ``NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1``
before it joins the world; its peers wait in the rendezvous meanwhile. The launcher must give
local rank 0 every GPU of the node (torchrun does; ``srun --gpus-per-task`` does not).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from topodoctor.core import codec
from topodoctor.core.errors import TopodoctorError
from topodoctor.measure.collectives.world import World
from topodoctor.model.collective_ops import Plan
from topodoctor.model.nccl_summary import nccl_paragraph

LOOPBACK_ENV = {"NCCL_P2P_DISABLE": "1", "NCCL_SHM_DISABLE": "1"}
LAUNCHER_PREFIXES = ("TORCHELASTIC_", "SLURM_", "OMPI_", "PMI_", "PMIX_")
LAUNCHER_VARS = {
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "ROLE_NAME",
    "TORCH_NCCL_ASYNC_ERROR_HANDLING",
}


def nic_loopback(plan: Plan, world: World, budget_s: float, measure: Callable[..., Any]) -> dict[str, Any]:
    """The node's ops at the plan's largest size through its NICs: rows and NCCL's account,
    or why there are none. Never raises: the world run goes on either way. ``measure`` is the
    launcher's local run (``launch.measure``), handed in by the launcher that calls this."""
    n = world.local_world_size if plan.backend == "nccl" else 2
    if n < 2:
        return {"rows": [], "account": "one GPU on this node: nothing to send through its NICs"}
    small = replace(plan, sizes=(max(plan.sizes),), op_timeout_s=min(plan.op_timeout_s, budget_s))
    # The node's run is a world of its own: the launcher's variables (torchrun's agent store
    # above all, which its ranks would try to join) stay out of its ranks' environment.
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith(LAUNCHER_PREFIXES) or k in LAUNCHER_VARS}
    try:
        res = measure(
            small,
            n,
            deadline=time.monotonic() + budget_s,
            start_timeout_s=budget_s,
            extra_env=LOOPBACK_ENV,
        )
    except TopodoctorError as exc:
        return {"rows": [], "account": f"could not run: {exc}"}
    finally:
        os.environ.update(saved)
    why = "; ".join(f.message for f in res.failures)
    account = nccl_paragraph(res) + (f" Failed: {why}" if why else "")
    return {"rows": codec.to_jsonable(res.rows), "account": account}
