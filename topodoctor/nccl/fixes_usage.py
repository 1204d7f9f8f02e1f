"""Builders of `nccl-log` findings for the arguments NCCL's own checks reject (misc/argcheck.cc,
ncclInvalidArgument) and for a program's own peer-to-peer code that needs what NCCL's P2P needs.
Data in, text out.

argcheck.cc prints the root's range as ``0..nRanks`` (the communicator's size, not its last rank)
from NCCL 2.13 to 2.30, so ``0..0`` is a communicator of no ranks: one not initialised (or already
destroyed) when the call was made."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from topodoctor.nccl.evidence import Builder, LogContext, Said, with_general
from topodoctor.nccl.parse import Event

# a program's own CUDA IPC / peer code, not NCCL's transport: its line names the program or the feature
_OWN_P2P = re.compile(r"\[TensorRT-LLM\]|IpcMemory|custom[ _]?all[ _-]?reduce|CustomAllReduce|ggml", re.I)


def _root(f: Mapping[str, str], op: str) -> Said:
    root, n = f["root"], int(f.get("n") or 0)
    if n <= 0:
        msg = (
            f"{op} was called on a communicator of nranks 0 (NCCL's range 0..{n}) with root or peer {root}: the "
            "communicator was not initialised, or was already destroyed, when the call was made"
        )
        specific = (
            "Call collectives and send/receive only on a communicator whose init has completed: a nonblocking "
            "init still in progress (ncclInProgress), a communicator destroyed or aborted before the call, or a "
            "handle read by another thread or process before it was set."
        )
    else:
        msg = (
            f"{op} named root or peer {root}, outside the communicator's nranks {n} (valid ranks 0..{n - 1}, "
            f"NCCL prints 0..{n})"
        )
        specific = (
            "Pass the rank within this communicator: a global rank given to a smaller communicator (torch's "
            "group_src / group_dst against src / dst) or a world size the launcher did not start is the usual "
            "cause."
        )
    return Said("TD089", msg, with_general("TD089", specific), {"argument": "root", "nranks": str(n)})


def invalid_argument(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """argcheck.cc's verdict on one argument of the call, by which check refused it."""
    op = f.get("op") or "the call"
    if f.get("root"):
        return _root(f, op)
    if f.get("buf"):
        msg = f"{op}'s {f['buf']} lives on GPU {f['dev']} but the communicator is on GPU {f['ncdev']}"
        specific = "Create the rank's tensors on its own GPU: torch.cuda.set_device(LOCAL_RANK) before allocating."
        arg = f["buf"]
    elif (arg := f.get("ptr") or f.get("null") or "") and not arg.endswith("buff"):
        msg = f"{op} was given no {arg} (a NULL pointer where NCCL writes or reads its result)"
        specific = f"Pass {op} a valid {arg}: the program's call is wrong (a handle not yet created, or freed)."
    elif arg:
        msg = f"{op}'s {arg} is not a device buffer NCCL can use (NULL, host memory or freed)"
        specific = "Pass CUDA device memory of the communicator's GPU; NCCL_CHECK_POINTERS=1 made NCCL check it."
    elif f.get("destroyed"):  # init.cc: ncclCommDestroy on a communicator already destroyed (a double free)
        arg, msg = "comm", f"ncclCommDestroy was called again on communicator {f['destroyed']}, already destroyed"
        specific = (
            "The program destroys the communicator twice (two destructors or finalisers, an explicit destroy and "
            "torch's own, a retry after an error): call ncclCommDestroy or ncclCommAbort once per communicator."
        )
    elif f.get("corrupt"):
        arg, msg = "comm", "the communicator passed is not a live communicator (destroyed, or never initialised)"
        specific = "Use a communicator only between its init and its destroy or abort."
    else:
        what = "datatype" if f.get("type") else "reduction operation"
        arg = what
        value = f.get("type") or f.get("redop") or f.get("userop") or "?"
        msg = f"{op} passed a {what} ({value}) this NCCL does not know"
        specific = (
            "The program was built against a newer nccl.h than the libnccl it loaded (a datatype or operation "
            "added later), or a user reduction created on another communicator or already destroyed."
        )
    return Said("TD089", msg, with_general("TD089", specific), {"argument": arg})


def own_p2p(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said | None:
    """CUDA's 'peer access is not supported' printed by a program's own peer code (TensorRT-LLM's custom
    all-reduce and its IpcMemory, vLLM's custom all-reduce, ggml), not by NCCL: NCCL_P2P_DISABLE does
    not reach it. None when the line is NCCL's."""
    ev = evs[0]
    if ev.source or "NCCL WARN" in ev.text or not _OWN_P2P.search(ev.text):
        return None
    who = "TensorRT-LLM" if "TensorRT-LLM" in ev.text else "the program"
    msg = (
        f"{who}'s own peer-to-peer code (a custom all-reduce over CUDA IPC, not NCCL) needs peer access these GPUs "
        "do not have"
    )
    fix = (
        "Turn the program's custom all-reduce off so its all-reduce goes through NCCL: TensorRT-LLM: build the "
        "engine without the custom all-reduce (--use_custom_all_reduce disable in releases that have it) or run "
        "with the NCCL all-reduce strategy; vLLM: --disable-custom-all-reduce. NCCL_P2P_DISABLE=1 does not reach "
        "the program's own kernels. Or run on GPUs with peer access (`nvidia-smi topo -p2p r`)."
    )
    return Said("TD055", msg, fix, {"own_p2p": who})


def _torch_usage(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """torch's checks of a collective's tensors (ProcessGroupNCCL.cpp check_gpu_single_tensor and its kin,
    ProcessGroup.hpp getBackend): the log states what the call passed."""
    msg = f"torch's NCCL backend refused the call: {f.get('what', 'its arguments')} ({f.get('said', '')[:120]})"
    return Said("TD096", msg, with_general("TD096", ""), {"said": f.get("said", "")})


USAGE: dict[str, Builder] = {"invalid-argument": invalid_argument, "torch-usage": _torch_usage}
