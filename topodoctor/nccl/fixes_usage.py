"""Builders of `nccl-log` findings for the arguments NCCL's own checks reject (misc/argcheck.cc,
ncclInvalidArgument), for the API rules a program broke in NCCL's words (group.cc, init.cc,
enqueue.cc: ncclInvalidUsage), for a variable NCCL refuses by name, and for a program's own
peer-to-peer code that needs what NCCL's P2P needs. Data in, text out.

argcheck.cc prints the root's range as ``0..nRanks`` (the communicator's size, not its last rank)
from NCCL 2.13 to 2.30, so ``0..0`` is a communicator of no ranks: one not initialised (or already
destroyed) when the call was made."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from topodoctor.core.text import numbered
from topodoctor.nccl.evidence import Builder, LogContext, Said, with_general
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.parse import Event
from topodoctor.nccl.torch_reasons import NO_GPU, NO_NCCL

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


# NCCL's words for the rule broken -> what the program did, what keeps the rule (group.cc, init.cc, enqueue.cc,
# bootstrap.cc 2.7 - 2.30)
_RULES = (
    (
        "not in a group call",
        "ncclGroupEnd was called with no ncclGroupStart open (one end too many, or on another thread)",
        "Pair every ncclGroupEnd with a ncclGroupStart on the same thread.",
    ),
    (
        "Blocking and nonblocking",
        "one group held communicators made blocking and nonblocking (ncclConfig_t.blocking)",
        "Put blocking and nonblocking communicators in separate groups, or make them all the same kind.",
    ),
    (
        "before the previous operation",
        "a nonblocking communicator was called again while its previous call was still in progress",
        "Wait for ncclCommGetAsyncError to return ncclSuccess (not ncclInProgress) before the next call on a "
        "nonblocking communicator.",
    ),
    (
        "to self without a matching",
        "a send to the rank itself (or a receive from it) had no matching receive (send) in the same group",
        "Post a rank's send to itself and its receive in one group (ncclGroupStart / ncclGroupEnd; torch's "
        "batch_isend_irecv with both P2POps), with the same count and datatype.",
    ),
    (
        "graph captured",
        "a group mixed operations captured in a CUDA graph with uncaptured ones (or two graphs)",
        "Capture all of a group's operations in one CUDA graph, or none of them.",
    ),
    (
        "Streams given to",
        "a group mixed operations captured in a CUDA graph with uncaptured ones (or two graphs)",
        "Capture all of a group's operations in one CUDA graph, or none of them.",
    ),
    (
        "initialized via",
        "a struct was passed to NCCL without being set from its initializer",
        "Set the struct from the initializer NCCL names before changing its fields (it also fills its size and "
        "version), and build against the nccl.h of the libnccl loaded.",
    ),
    (
        "FP8 reduction",
        "an FP8 reduction (all-reduce, reduce-scatter, reduce) ran on a GPU older than Hopper (sm90)",
        "Reduce FP8 data in a wider type (bf16, fp16, fp32) on GPUs before sm90, or run on sm90 or newer; FP8 "
        "copies (all-gather, broadcast, send / receive) need no sm90.",
    ),
    (
        "Data type supplied",
        "a user reduction (ncclRedOpCreatePreMulSum) was used with another datatype than it was created for",
        "Create the reduction operator with the datatype of the collective that uses it.",
    ),
    (
        "ncclRedOpDestroy",
        "ncclRedOpDestroy was given an operator it cannot destroy (a built-in one, another communicator's, one "
        "already destroyed)",
        "Destroy each user reduction operator once, on the communicator that created it.",
    ),
    (
        "Invalid device",
        "ncclCommInitAll's device list names a GPU the process does not see",
        "List only GPUs below the count the process sees: CUDA_VISIBLE_DEVICES renumbers them from 0.",
    ),
    (
        "invalid device count",
        "ncclCommInitAll was asked for a number of devices below one",
        "Pass ncclCommInitAll the number of GPUs to use (at least 1).",
    ),
    (
        "improper usage of ncclCommInitRank",
        "ncclCommInitRankScalable was given no unique id, or more ids than ranks",
        "Pass between 1 and nranks unique ids, the same on every rank.",
    ),
    (
        "NCCL_COMM_ID is set",
        "a communicator was grown (ncclCommGetUniqueId, NCCL 2.29+) while NCCL_COMM_ID was set",
        "Unset NCCL_COMM_ID in the processes that grow a communicator: the grow's unique id comes from the "
        "communicator itself.",
    ),
)


def invalid_usage(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """NCCL refused a call for a rule of its API its message states (ncclInvalidUsage / ncclInvalidArgument)."""
    rule = f.get("rule", "")
    did, keep = next(
        ((d, k) for words, d, k in _RULES if words in rule), ("the program broke a rule of NCCL's API", "")
    )
    if f.get("struct"):
        did = f"{f['struct']} was passed to NCCL without being set from {f.get('init', 'its initializer')}"
    if f.get("dev"):
        did = f"ncclCommInitAll's device list names GPU {f['dev']}, but the process sees {f.get('ndev', '?')}"
    fix = with_general("TD095", keep)
    if ctx.frameworks:  # the refused call is the framework's own: its release is what changes it
        who = ctx.frameworks[0]
        fix = f"The call is {who}'s (its source is in the log): upgrade {who}, or report it there with this log. {fix}"
    return Said("TD095", f"{did} (NCCL: {rule.rstrip('.')})", fix, {"rule": rule})


# the variable NCCL refuses by name -> what it wants
_WANTS = {
    "NCCL_COMM_ID": "<address>:<port> of the root rank's host (an IPv6 address in brackets: [addr]:port)",
    "NCCL_RAS_ADDR": "<address>:<port> this host resolves (the default is localhost:28028)",
    "NCCL_WORK_FIFO_DEPTH": "a power of two, at least its minimum (NCCL 2.13 - 2.21)",
    "NCCL_IB_SUBNET_PREFIX_LEN": "a prefix length between 1 and 32",
    "NCCL_IB_MERGE_NICS": "1 (or unset) while NICs are to be merged into one virtual NIC",
    "NCCL_NVLS_ENABLE": "unset (or 0) while ranks share a GPU (MPS, or several ranks per GPU)",
    "NCCL_IB_HCA": "ports of one link layer only (all InfiniBand or all RoCE), the same kind on every node",
}


def named_setting(f: Mapping[str, str], ctx: LogContext) -> Said:
    """A variable NCCL refused by its name (bootstrap.cc, misc/socket.cc, enqueue.cc, net_ib), or NICs of
    different link layers selected together (net_ib 2.20+: NCCL's own words send the user to NCCL_IB_HCA)."""
    ras = "NCCL_RAS_ADDR" in ctx.env and "NCCL_COMM_ID" not in ctx.env  # socket.cc's parser serves both
    var = (
        "NCCL_COMM_ID"
        if f.get("commid") or (f.get("addrstr") and not ras)
        else "NCCL_RAS_ADDR"
        if f.get("addrstr")
        else "NCCL_IB_HCA"
        if f.get("layers")
        else f.get("setting") or f.get("setting2") or f.get("setting3") or "?"
    )
    value = f.get("set") or ctx.env.get(var, "")
    shown = f"{var}={value}" if value else var
    if var == "NCCL_IB_HCA":
        msg = "the RDMA ports NCCL is to connect or merge have different link layers (InfiniBand and RoCE)"
        msg += f"; the log shows {shown}" if value else ""
    else:
        msg = f"NCCL refuses {shown}"
    keep = f"Set {var} to {_WANTS.get(var, 'a value NCCL accepts')}, or unset it."
    return Said("TD077", msg, with_general("TD077", keep), {"variable": var, "value": value})


def _torch_usage(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """torch's checks of a collective's tensors (ProcessGroupNCCL.cpp check_gpu_single_tensor and its kin,
    ProcessGroup.hpp getBackend): the log states what the call passed."""
    msg = f"torch's NCCL backend refused the call: {f.get('what', 'its arguments')} ({f.get('said', '')[:120]})"
    if f.get("what") == NO_NCCL:
        fix = (
            "This torch has no NCCL: the Windows and macOS builds never do, nor a CPU build (`torch.cuda.nccl."
            "version()` fails, `torch.distributed.is_nccl_available()` is False). Use backend='gloo' there (on "
            "Windows, gloo is the backend torch ships), or run on Linux with a CUDA build of torch."
        )
        return Said("TD096", msg, fix, {"said": f.get("said", "")})
    if f.get("what") == NO_GPU:  # the process saw no GPU: its environment, not its call
        fix = f"Candidates, most likely first: {numbered(_NO_GPU_CAUSES)}."
        return Said("TD096", msg, fix, {"said": f.get("said", ""), "candidates": list(_NO_GPU_CAUSES)})
    return Said("TD096", msg, with_general("TD096", ""), {"said": f.get("said", "")})


# what leaves a rank's process without a GPU: CUDA (torch.cuda.device_count() == 0) in that process's environment
_NO_GPU_CAUSES = (
    "the launcher started the ranks without the environment CUDA needs: a launcher that passes only the variables "
    "it knows (deepspeed's pdsh runner and its .deepspeed_env, mpirun without -x, a scheduler's exec) drops "
    "LD_LIBRARY_PATH or CUDA_VISIBLE_DEVICES, so the CUDA libraries or the GPUs are not found in the ranks: pass "
    "them (`mpirun -x LD_LIBRARY_PATH`, a .deepspeed_env line) and compare `env` in a rank with the shell's",
    "CUDA_VISIBLE_DEVICES empty or naming no GPU of the node in the rank's environment, or a container started "
    "without the GPUs (`--gpus all`, the device plugin's nvidia.com/gpu request)",
    "a CPU build of torch (`torch.version.cuda` is None) or a driver the process cannot load (`nvidia-smi` in the "
    "same environment)",
)


def _separate_tests(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    procs, hosts = f.get("procs", "?"), f.get("hosts", "?")
    msg = (
        f"{procs} processes on {hosts} host{'s' if hosts != '1' else ''} each print themselves as rank 0 of their own "
    )
    msg += "nccl-tests run: they were not started as one MPI job, so each tested its own GPU alone and nothing "
    msg += "crossed between them"
    return Said("TD109", msg, EXPLANATIONS["TD109"].fix, {"processes": procs, "hosts": hosts})


USAGE: dict[str, Builder] = {
    "separate-tests": _separate_tests,
    "invalid-argument": invalid_argument,
    "invalid-usage": invalid_usage,
    "torch-usage": _torch_usage,
}
