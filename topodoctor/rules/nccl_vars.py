"""NCCL's variables: which names it knows, how it parses their values, which are obsolete.

Read from NCCL's own source (2.2x): ``src/misc/param.cc`` (``NCCL_PARAM`` integers go through
``strtoll(value, NULL, 0)``; an empty value or one out of range leaves the default),
``src/graph/paths.cc`` (``ncclGetLevel``: NCCL_P2P_DISABLE through ``strtol`` and only 1
disables; the level names compared case-sensitively, else a value starting with a digit in
the old numbering), ``src/misc/socket.cc`` and ``src/init.cc`` (the string choices). The
point is to lint a value as NCCL will read it, not as a person would.
"""

from __future__ import annotations

from dataclasses import dataclass


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Read by NCCL through NCCL_PARAM: integers, parsed by strtoll with base 0.
INTEGER = _names(
    """
    NCCL_ALLGATHERV_ENABLE NCCL_ALLOC_P2P_NET_LL_BUFFERS NCCL_BUFFSIZE NCCL_CGA_CLUSTER_SIZE NCCL_CHECK_POINTERS
    NCCL_CHUNK_SIZE NCCL_COLLNET_ENABLE NCCL_COLLNET_NODE_THRESHOLD NCCL_COMM_BLOCKING
    NCCL_COMM_SHRINK_SHARE_RESOURCES NCCL_COMM_SPLIT_SHARE_RESOURCES NCCL_CONNECT_ROUND_MAX_PEERS NCCL_CROSS_NIC
    NCCL_CUMEM_ENABLE NCCL_CUMEM_HOST_ENABLE NCCL_DEV_API_JIT NCCL_DISABLE_MEM_MANAGER NCCL_DMABUF_ENABLE
    NCCL_ELASTIC_BUFFER_REGISTER NCCL_ENABLE_VERSION_CHECK NCCL_GDAKI_USE_RELIABLE_DB NCCL_GDRCOPY_ENABLE
    NCCL_GDRCOPY_FIFO_ENABLE NCCL_GDRCOPY_FLUSH_ENABLE NCCL_GDRCOPY_SYNC_ENABLE NCCL_GDR_FLUSH_DISABLE
    NCCL_GIN_ENABLE NCCL_GIN_ERROR_QUERY_SEC NCCL_GIN_GDAKI_MAX_DEST_RD_ATOMIC NCCL_GIN_GDAKI_MAX_QP_RD_ATOMIC
    NCCL_GIN_GDAKI_NIC_HANDLER NCCL_GIN_GDAKI_QP_DEPTH NCCL_GIN_IB_TC NCCL_GIN_NCONNECTIONS
    NCCL_GIN_PLUGIN_REF_COUNT NCCL_GIN_PROXY_QUEUE_SIZE NCCL_GIN_TYPE NCCL_GRAPH_DUMP_FILE_RANK
    NCCL_GRAPH_HELPER_DISABLE NCCL_GRAPH_MIXING_SUPPORT NCCL_GRAPH_REGISTER NCCL_GRAPH_STREAM_ORDERING
    NCCL_GROUP_CUDA_STREAM NCCL_IB_ADAPTIVE_ROUTING NCCL_IB_AR_THRESHOLD NCCL_IB_DATA_DIRECT
    NCCL_IB_DEVICE_PCI_ORDER NCCL_IB_DISABLE NCCL_IB_ECE_ENABLE NCCL_IB_FIFO_TC NCCL_IB_GID_INDEX
    NCCL_IB_MERGE_NICS NCCL_IB_MERGE_VFS NCCL_IB_MQP_RETRY_ALL NCCL_IB_MQP_RETRY_CNT
    NCCL_IB_MQP_RETRY_SLEEP_MSEC NCCL_IB_OOO_RQ NCCL_IB_PCI_RELAXED_ORDERING NCCL_IB_PKEY
    NCCL_IB_PREPOST_RECEIVE_WORK_REQUESTS NCCL_IB_QPS_PER_CONNECTION NCCL_IB_QUERY_PORT_SPEED
    NCCL_IB_RECEIVER_SIDE_MATCHING_SCHEME NCCL_IB_RETRY_CNT NCCL_IB_RETURN_ASYNC_EVENTS NCCL_IB_ROCE_VERSION_NUM
    NCCL_IB_ROUTABLE_FLID_GID_INDEX NCCL_IB_SL NCCL_IB_SPLIT_DATA_ON_QPS NCCL_IB_SUBNET_AWARE_ROUTING
    NCCL_IB_SUBNET_PREFIX_LEN NCCL_IB_TC NCCL_IB_TIMEOUT NCCL_IB_USE_INLINE NCCL_IB_WARN_RAIL_LOCAL
    NCCL_IGNORE_COLLNET_MISMATCH NCCL_IGNORE_CPU_AFFINITY NCCL_IGNORE_DISABLED_P2P NCCL_IGNORE_NET_MISMATCH
    NCCL_IPC_USE_ABSTRACT_SOCKET NCCL_L1_SHARED_MEMORY_CARVEOUT NCCL_LAUNCH_ORDER_IMPLICIT
    NCCL_LAUNCH_RACE_FATAL NCCL_LEGACY_CUDA_REGISTER NCCL_LL128_BUFFSIZE NCCL_LL128_C2C NCCL_LL128_NTHREADS
    NCCL_LL_BUFFSIZE NCCL_LOCAL_REGISTER NCCL_LSA_TEAM_SIZE NCCL_MAX_CTAS NCCL_MAX_NCHANNELS NCCL_MAX_NRINGS
    NCCL_MAX_P2P_NCHANNELS NCCL_MEM_SYNC_DOMAIN NCCL_MIN_CTAS NCCL_MIN_NCHANNELS NCCL_MIN_NRINGS
    NCCL_MIN_P2P_NCHANNELS NCCL_MLOPART_RDMA_ENABLE NCCL_MNNVL_CLIQUE_ID NCCL_MNNVL_CROSS_CLIQUE
    NCCL_MNNVL_ENABLE NCCL_MNNVL_RAIL_PER_HOST NCCL_MNNVL_SCATTER_NETS_ENABLE NCCL_MNNVL_UUID
    NCCL_MULTI_RANK_GPU_ENABLE NCCL_MULTI_SEGMENT_REGISTER NCCL_NCHANNELS_PER_NET_PEER NCCL_NET_DISABLE_INTRA
    NCCL_NET_FORCE_FLUSH NCCL_NET_GDR_C2C NCCL_NET_GDR_MLOPART NCCL_NET_GDR_READ
    NCCL_NET_OPTIONAL_RECV_COMPLETION NCCL_NET_OVERHEAD NCCL_NET_PLUGIN_REF_COUNT NCCL_NET_SHARED_BUFFERS
    NCCL_NET_SHARED_COMMS NCCL_NSOCKS_PERTHREAD NCCL_NTHREADS NCCL_NUM_RMA_CTX NCCL_NVB_DISABLE
    NCCL_NVB_PRECONNECT NCCL_NVLINK_UTIL_CENTRIC_SCHED_ENABLE NCCL_NVLSTREE_MAX_CHUNKSIZE NCCL_NVLS_CHUNKSIZE
    NCCL_NVLS_ENABLE NCCL_NVLS_NCHANNELS NCCL_NVTX_DISABLE NCCL_OOB_NET_ENABLE NCCL_P2P_DIRECT_DISABLE
    NCCL_P2P_EPOCH_ENABLE NCCL_P2P_LL_THRESHOLD NCCL_P2P_MAX_PEERS NCCL_P2P_NET_CHUNKSIZE NCCL_P2P_NVL_CHUNKSIZE
    NCCL_P2P_PCI_CHUNKSIZE NCCL_P2P_PER_CHANNEL_NET_BW NCCL_P2P_PXN_LEVEL NCCL_P2P_READ_ENABLE
    NCCL_P2P_SCHEDULE_GROUP_SIZE NCCL_P2P_USE_CUDA_MEMCPY NCCL_PAT_ENABLE NCCL_PROGRESS_APPENDOP_FREQ
    NCCL_PROXY_APPEND_BATCH_SIZE NCCL_PROXY_DUMP_SIGNAL NCCL_PXN_C2C NCCL_PXN_DISABLE NCCL_RAS_ENABLE
    NCCL_RAS_TIMEOUT_FACTOR NCCL_REPORT_CONNECT_PROGRESS NCCL_RMA_DISABLE NCCL_RMA_PLUGIN_REF_COUNT
    NCCL_RMA_PROXY_DUMP_SIGNAL NCCL_RMA_PROXY_QUEUE_SIZE NCCL_RUNTIME_CONNECT NCCL_SET_CPU_STACK_SIZE
    NCCL_SET_STACK_SIZE NCCL_SHADOW_MEMPOOL_MAX_SIZE NCCL_SHM_DISABLE NCCL_SHM_LOCALITY
    NCCL_SINGLE_PROC_MEM_REG_ENABLE NCCL_SOCKET_INLINE NCCL_SOCKET_MIN_TASKSIZE NCCL_SOCKET_NTHREADS
    NCCL_SOCKET_POLL_TIMEOUT_MSEC NCCL_SOCKET_RCVBUF NCCL_SOCKET_RETRY_CNT NCCL_SOCKET_RETRY_SLEEP_MSEC
    NCCL_SOCKET_SNDBUF NCCL_SYM_CE_THRESHOLD NCCL_SYM_CTAS NCCL_SYM_GIN_KERNELS_ENABLE NCCL_SYM_NOWIN_ENABLE
    NCCL_SYM_REUSE_SYSMEM_HANDLES NCCL_SYM_RS_GIN_CHUNK_SIZE NCCL_SYM_TMA_ENABLE NCCL_TOPO_DUMP_FILE_RANK
    NCCL_TOPO_SPLIT_MLOPART NCCL_UID_STAGGER_RATE NCCL_UID_STAGGER_THRESHOLD NCCL_UNPACK_DOUBLE_NCHANNELS
    NCCL_WIN_ENABLE NCCL_WIN_STRIDE NCCL_WORK_ARGS_BYTES NCCL_WORK_FIFO_BYTES
    NCCL_IB_RESILIENCY_PORT_FAILOVER NCCL_IB_RESILIENCY_PORT_FAILOVER_MAX_ATTEMPTS
    NCCL_IB_RESILIENCY_PORT_FAILOVER_PROBE_DELAY NCCL_IB_RESILIENCY_PORT_RECOVERY
    NCCL_IB_RESILIENCY_PORT_RECOVERY_ACK_TIMEOUT NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_INTERVAL
    NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_BATCH_SIZE NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_SEQUENCE_SIZE
    NCCL_IB_RESILIENCY_PORT_RECOVERY_ALIVE_MSG_TIMEOUT NCCL_IB_RESILIENCY_PORT_RECOVERY_ATTEMPTS_MAX
    NCCL_IB_RESILIENCY_PORT_RECOVERY_START_DELAY
    """
)
# Read as strings (ncclGetEnv / getenv), or by other parsers below.
STRING = _names(
    """
    NCCL_ALGO NCCL_CHECK_MODE NCCL_COMM_ID NCCL_CONF_FILE NCCL_CTA_POLICY NCCL_DEBUG NCCL_DEBUG_FILE
    NCCL_DEBUG_SUBSYS NCCL_DEBUG_TIMESTAMP_FORMAT NCCL_DEBUG_TIMESTAMP_LEVELS NCCL_ENV_PLUGIN NCCL_GIN_PLUGIN
    NCCL_GRAPH_DUMP_FILE NCCL_GRAPH_FILE NCCL_HOSTID NCCL_IBVERBS_LIB NCCL_IB_ADDR_FAMILY NCCL_IB_ADDR_RANGE
    NCCL_IB_HCA NCCL_IB_PREFIX_MATCH NCCL_LAUNCH_MODE NCCL_NET NCCL_NETDEVS_POLICY NCCL_NET_FORCE_MERGE
    NCCL_NET_MERGE_LEVEL NCCL_NET_MERGE_POLICY NCCL_NET_PLUGIN NCCL_OOB_NET_IFNAME NCCL_PROFILER_PLUGIN
    NCCL_PROFILE_EVENT_MASK NCCL_PROTO NCCL_PROXY_CPUSET NCCL_PROXY_PROFILE NCCL_RAS_ADDR NCCL_RMA_PLUGIN
    NCCL_SET_THREAD_NAME NCCL_SOCKET_FAMILY NCCL_SOCKET_IFNAME NCCL_SOCKET_MAGIC NCCL_SYM_KERNEL
    NCCL_THREAD_THRESHOLDS NCCL_TOPO_DUMP_FILE NCCL_TOPO_FILE NCCL_TOPO_SIMPLE NCCL_TUNER_PLUGIN
    """
)
# ncclGetLevel: a path type NCCL accepts by name (index = its PATH_* value, LOC..SYS) ...
LEVEL_NAMES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
# ... or, starting with a digit, the old numbering (strtol; 5 and above mean SYS).
OLD_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")
LEVEL = frozenset({"NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL"})
# NCCL_P2P_DISABLE is read by strtol in ncclGetLevel, and only the value 1 disables P2P.
P2P_DISABLE = "NCCL_P2P_DISABLE"
# Choices NCCL compares against: (values, compared case-sensitively?, what another value does).
CHOICES: dict[str, tuple[tuple[str, ...], bool, str]] = {
    "NCCL_SOCKET_FAMILY": (("AF_INET", "AF_INET6"), True, "NCCL takes any address family"),
    "NCCL_LAUNCH_MODE": (("PARALLEL", "GROUP"), False, "NCCL launches in PARALLEL mode"),
    "NCCL_DEBUG": (("VERSION", "WARN", "INFO", "ABORT", "TRACE"), False, "NCCL does not recognise it"),
}

# Read by earlier 2.x releases and gone from current source: still worth no "unknown" warning.
EARLIER = frozenset({"NCCL_SHM_USE_CUDA_MEMCPY", "NCCL_SHM_MEMCPY_MODE", "NCCL_NCHANNELS_PER_PEER"})
KNOWN = INTEGER | STRING | LEVEL | EARLIER | {P2P_DISABLE}
# NCCL_* names that are not NCCL settings: container images (NCCL_VERSION in NVIDIA's CUDA
# images) and build systems (PyTorch's setup reads NCCL_ROOT and friends) set them.
NOT_SETTINGS = _names(
    """
    NCCL_VERSION NCCL_HOME NCCL_ROOT NCCL_ROOT_DIR NCCL_INCLUDE_DIR NCCL_LIB_DIR NCCL_LIBRARY NCCL_PKG_VERSION
    """
)
# Removed or renamed: what to use instead.
DEPRECATED = {
    "NCCL_MAX_RINGS": "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_NRINGS": "NCCL_MIN_NCHANNELS",
    "NCCL_RINGS": "nothing: NCCL builds its own rings",
    "NCCL_SINGLE_RING_THRESHOLD": "nothing: removed in NCCL 2.4",
    "NCCL_LL_THRESHOLD": "NCCL_PROTO, and only to debug",
    "NCCL_TREE_THRESHOLD": "NCCL_ALGO, and only to debug",
    "NCCL_IB_CUDA_SUPPORT": "NCCL_NET_GDR_LEVEL",
    "NCCL_CHECKS_DISABLE": "nothing: removed in NCCL 2.2.12",
    "NCCL_WORK_FIFO_DEPTH": "NCCL_WORK_FIFO_BYTES",
    "NCCL_ASYNC_ERROR_HANDLING": "TORCH_NCCL_ASYNC_ERROR_HANDLING (PyTorch renamed it)",
    "NCCL_BLOCKING_WAIT": "TORCH_NCCL_BLOCKING_WAIT (PyTorch renamed it)",
    "NCCL_DESYNC_DEBUG": "TORCH_NCCL_DESYNC_DEBUG (PyTorch renamed it)",
}
# Settings NCCL documents as for debugging only: kept in production they cost speed or stability.
DEBUG_ONLY = (
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_NTHREADS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_CHECK_POINTERS",
    "NCCL_LAUNCH_MODE",
    "NCCL_BUFFSIZE",
    "NCCL_P2P_DIRECT_DISABLE",
    "NCCL_NVB_DISABLE",
    "NCCL_PXN_DISABLE",
    "NCCL_GRAPH_MIXING_SUPPORT",
    "NCCL_RUNTIME_CONNECT",
)
# What a switch left at 0 means, for the variables people most often set to a word.
ZERO_MEANS = {
    "NCCL_P2P_DISABLE": "P2P stays on",
    "NCCL_SHM_DISABLE": "shared memory stays on",
    "NCCL_IB_DISABLE": "InfiniBand / RoCE stays on",
    "NCCL_IGNORE_DISABLED_P2P": "NCCL still warns about disabled P2P",
    "NCCL_NVLS_ENABLE": "NVLink SHARP is off",
    "NCCL_COLLNET_ENABLE": "CollNet is off",
}
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
# NCCL_ALGO / NCCL_PROTO tokens (ALGORITHMS, PROTOCOLS: nccl/choices.py) and their per-function
# prefixes, compared case-blind by tuning.cc's parseList: ncclFuncStr in src/init.cc (2.28).
FUNCTIONS = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
# Integer settings with a closed domain: (low, high, what the value is, where NCCL reads it).
# NCCL_IB_TIMEOUT has a rule of its own (TD609).
DOMAINS: dict[str, tuple[int, int, str]] = {
    # src/graph/search.cc: 0 rings stay on one rail, 1 may cross NICs, 2 (default) lets NCCL choose
    "NCCL_CROSS_NIC": (0, 2, "0 same NIC on every rank, 1 cross NICs, 2 let NCCL choose"),
    # src/transport/net_ib/connect.cc -> ibv_qp_attr.retry_cnt, a 3-bit field
    "NCCL_IB_RETRY_CNT": (0, 7, "the IB retry count, a 3-bit field"),
    # connect.cc -> ibv_ah_attr.sl, a 4-bit service level
    "NCCL_IB_SL": (0, 15, "the IB service level, 4 bits"),
    # connect.cc -> ibv_ah_attr.grh.traffic_class, 8 bits
    "NCCL_IB_TC": (0, 255, "the traffic class, 8 bits"),
    # src/transport/nvls.cc: 0 off, 1 on, 2 (default) on where the fabric supports it
    "NCCL_NVLS_ENABLE": (0, 2, "0 off, 1 on, 2 where supported"),
    # src/graph/tuning.cc ncclPatEnable: 0 off, 1 on, 2 (default) NCCL decides
    "NCCL_PAT_ENABLE": (0, 2, "0 off, 1 on, 2 NCCL decides"),
    # src/graph/paths.cc: 0 off, 1 PXN for NVLink-reachable NICs, 2 (default) also through PCIe
    "NCCL_P2P_PXN_LEVEL": (0, 2, "0 no PXN, 1 over NVLink, 2 also over PCIe"),
}


def list_problem(text: str, tokens: tuple[str, ...]) -> str | None:
    """What NCCL's parseList (src/graph/tuning.cc) refuses in an NCCL_ALGO / NCCL_PROTO value,
    failing init with "invalid usage"; None when NCCL accepts it. Form: ``[func:][^]tok,tok;func:...``."""
    lower = {t.lower() for t in tokens}
    funcs = {f.lower() for f in FUNCTIONS}
    for n, entry in enumerate(e for e in text.split(";") if e):
        prefix, sep, body = entry.partition(":")
        if not sep:
            if n > 0:
                return f"entry {entry!r} has no function prefix (only the first may omit it)"
            body, prefix = prefix, ""
        if prefix and prefix.lower() not in funcs:
            return f"{prefix!r} is not a function ({', '.join(FUNCTIONS)})"
        for tok in (t for t in body.removeprefix("^").split(",") if t):
            if tok.lower() not in lower:
                return f"{tok!r} is not one of {', '.join(tokens)}"
    return None


@dataclass(frozen=True)
class Reading:
    """How NCCL reads an integer variable's text."""

    value: int | None  # None: NCCL keeps its default (empty, or out of range)
    clean: bool  # the whole text is one integer, read as it looks (no octal surprise)
    why: str = ""  # when not clean: what NCCL does with the rest


def strtoll(text: str) -> tuple[int | None, str, bool]:
    """C ``strtoll(text, &end, 0)``: (value or None on overflow, the unread rest, octal?)."""
    s = text.lstrip(" \t\n\v\f\r")
    sign, i = 1, 0
    if s[:1] in "+-" and s[:1]:
        sign, i = (-1 if s[0] == "-" else 1), 1
    base, digits = 10, "0123456789"
    if s[i : i + 2].lower() == "0x" and s[i + 2 : i + 3].lower() in set("0123456789abcdef") and s[i + 2 : i + 3]:
        base, digits, i = 16, "0123456789abcdef", i + 2
    elif s[i : i + 1] == "0":
        base, digits = 8, "01234567"
    j = i
    while j < len(s) and s[j].lower() in digits:
        j += 1
    if j == i:  # no digits at all: strtoll returns 0 and leaves the whole text unread
        return 0, text, False
    n = sign * int(s[i:j], base)
    octal = base == 8 and j - i > 1
    return (n if INT64_MIN <= n <= INT64_MAX else None), s[j:], octal


def read_integer(text: str) -> Reading:
    """An NCCL_PARAM value as ``ncclLoadParam`` reads it."""
    if text == "":
        return Reading(None, False, "it is empty, so NCCL keeps its default")
    n, rest, octal = strtoll(text)
    if n is None:
        return Reading(None, False, "it is out of range, so NCCL keeps its default")
    if rest.strip() == text.strip():
        return Reading(n, False, "it is not a number; NCCL parses integers only")
    if rest.strip():
        return Reading(n, False, f"NCCL stops at {rest.strip()[:20]!r}")
    if octal:
        return Reading(n, False, "a leading 0 makes it octal")
    return Reading(n, True)


def read_level(text: str) -> str | None:
    """NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL as ``ncclGetLevel`` reads them; None when ignored."""
    if text in LEVEL_NAMES:
        return text
    if text[:1] in set("0123456789") and text[:1]:
        n, _, _ = strtoll(text)
        return OLD_LEVELS[min(n if n is not None else len(OLD_LEVELS), len(OLD_LEVELS) - 1)]
    return None
