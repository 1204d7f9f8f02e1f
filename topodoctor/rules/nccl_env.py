"""NCCL and CUDA environment rules (TD6xx), read from the process environment and NCCL's
config files (/etc/nccl.conf, NCCL_CONF_FILE). A setting in the environment wins over a file,
as in NCCL itself."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

from topodoctor.errors import InputError
from topodoctor.fileio import read_text
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule

MAX_TOPO_FILE_BYTES = 4 * 1024 * 1024  # NCCL holds at most 256 nodes of 16 attributes

# NCCL variables known to current NCCL (2.2x) and still honoured.
KNOWN = frozenset(
    [
        "NCCL_SOCKET_IFNAME",
        "NCCL_SOCKET_FAMILY",
        "NCCL_SOCKET_RETRY_CNT",
        "NCCL_SOCKET_RETRY_SLEEP_MSEC",
        "NCCL_SOCKET_NTHREADS",
        "NCCL_NSOCKS_PERTHREAD",
        "NCCL_CROSS_NIC",
        "NCCL_IB_HCA",
        "NCCL_IB_TIMEOUT",
        "NCCL_IB_RETRY_CNT",
        "NCCL_IB_GID_INDEX",
        "NCCL_IB_ADDR_FAMILY",
        "NCCL_IB_ADDR_RANGE",
        "NCCL_IB_ROCE_VERSION_NUM",
        "NCCL_IB_SL",
        "NCCL_IB_TC",
        "NCCL_IB_FIFO_TC",
        "NCCL_IB_RETURN_ASYNC_EVENTS",
        "NCCL_IB_DISABLE",
        "NCCL_IB_AR_THRESHOLD",
        "NCCL_IB_QPS_PER_CONNECTION",
        "NCCL_IB_SPLIT_DATA_ON_QPS",
        "NCCL_IB_PCI_RELAXED_ORDERING",
        "NCCL_IB_ADAPTIVE_ROUTING",
        "NCCL_IB_ECE_ENABLE",
        "NCCL_IB_MERGE_NICS",
        "NCCL_IB_MERGE_VFS",
        "NCCL_IB_USE_INLINE",
        "NCCL_IB_PKEY",
        "NCCL_IB_MQP_RETRY_ALL",
        "NCCL_IB_MQP_RETRY_CNT",
        "NCCL_IB_MQP_RETRY_SLEEP_MSEC",
        "NCCL_IB_DATA_DIRECT",
        "NCCL_OOB_NET_ENABLE",
        "NCCL_OOB_NET_IFNAME",
        "NCCL_UID_STAGGER_THRESHOLD",
        "NCCL_UID_STAGGER_RATE",
        "NCCL_NET",
        "NCCL_NET_PLUGIN",
        "NCCL_TUNER_PLUGIN",
        "NCCL_PROFILER_PLUGIN",
        "NCCL_ENV_PLUGIN",
        "NCCL_IGNORE_CPU_AFFINITY",
        "NCCL_CONF_FILE",
        "NCCL_DEBUG",
        "NCCL_DEBUG_FILE",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_DEBUG_TIMESTAMP_FORMAT",
        "NCCL_DEBUG_TIMESTAMP_LEVELS",
        "NCCL_COLLNET_ENABLE",
        "NCCL_COLLNET_NODE_THRESHOLD",
        "NCCL_TOPO_FILE",
        "NCCL_TOPO_DUMP_FILE",
        "NCCL_SET_THREAD_NAME",
        "NCCL_P2P_DISABLE",
        "NCCL_P2P_LEVEL",
        "NCCL_P2P_DIRECT_DISABLE",
        "NCCL_P2P_NET_CHUNKSIZE",
        "NCCL_P2P_PCI_CHUNKSIZE",
        "NCCL_P2P_NVL_CHUNKSIZE",
        "NCCL_P2P_USE_CUDA_MEMCPY",
        "NCCL_P2P_READ_ENABLE",
        "NCCL_SHM_DISABLE",
        "NCCL_SHM_USE_CUDA_MEMCPY",
        "NCCL_SHM_MEMCPY_MODE",
        "NCCL_SHM_LOCALITY",
        "NCCL_BUFFSIZE",
        "NCCL_NTHREADS",
        "NCCL_MAX_NCHANNELS",
        "NCCL_MIN_NCHANNELS",
        "NCCL_MAX_CTAS",
        "NCCL_MIN_CTAS",
        "NCCL_CHECK_POINTERS",
        "NCCL_LAUNCH_MODE",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_NET_GDR_READ",
        "NCCL_NET_GDR_C2C",
        "NCCL_NET_SHARED_BUFFERS",
        "NCCL_NET_SHARED_COMMS",
        "NCCL_NET_FORCE_FLUSH",
        "NCCL_NET_OVERHEAD",
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_NVB_DISABLE",
        "NCCL_PXN_DISABLE",
        "NCCL_P2P_PXN_LEVEL",
        "NCCL_PXN_C2C",
        "NCCL_RUNTIME_CONNECT",
        "NCCL_GRAPH_REGISTER",
        "NCCL_LOCAL_REGISTER",
        "NCCL_LEGACY_CUDA_REGISTER",
        "NCCL_SET_STACK_SIZE",
        "NCCL_GRAPH_MIXING_SUPPORT",
        "NCCL_DMABUF_ENABLE",
        "NCCL_CUMEM_ENABLE",
        "NCCL_CUMEM_HOST_ENABLE",
        "NCCL_MNNVL_ENABLE",
        "NCCL_MNNVL_UUID",
        "NCCL_MNNVL_CLIQUE_ID",
        "NCCL_RAS_ENABLE",
        "NCCL_RAS_ADDR",
        "NCCL_RAS_TIMEOUT_FACTOR",
        "NCCL_NVLS_ENABLE",
        "NCCL_NVLS_CHUNKSIZE",
        "NCCL_NVLSTREE_MAX_CHUNKSIZE",
        "NCCL_WORK_FIFO_BYTES",
        "NCCL_CTA_POLICY",
        "NCCL_COMM_BLOCKING",
        "NCCL_GDRCOPY_ENABLE",
        "NCCL_GDRCOPY_SYNC_ENABLE",
        "NCCL_GDRCOPY_FLUSH_ENABLE",
        "NCCL_ALLOC_P2P_NET_LL_BUFFERS",
        "NCCL_NCHANNELS_PER_NET_PEER",
        "NCCL_IGNORE_DISABLED_P2P",
        "NCCL_NVLS_NCHANNELS",
        "NCCL_LL128_NTHREADS",
        "NCCL_COMM_ID",
        "NCCL_HOSTID",
        "NCCL_MAX_P2P_NCHANNELS",
        "NCCL_MIN_P2P_NCHANNELS",
        "NCCL_NCHANNELS_PER_PEER",
        "NCCL_PROXY_PROFILE",
        "NCCL_CHUNK_SIZE",
        "NCCL_WIN_ENABLE",
        "NCCL_SYM_KERNEL",
        "NCCL_PROFILE_EVENT_MASK",
        "NCCL_TOPO_SIMPLE",
        "NCCL_IB_PREFIX_MATCH",
    ]
)
# NCCL_* names that are not NCCL settings: container images (NCCL_VERSION in NVIDIA's CUDA
# images) and build systems (PyTorch's setup reads NCCL_ROOT and friends) set them.
NOT_SETTINGS = frozenset(
    {
        "NCCL_VERSION",
        "NCCL_HOME",
        "NCCL_ROOT",
        "NCCL_ROOT_DIR",
        "NCCL_INCLUDE_DIR",
        "NCCL_LIB_DIR",
        "NCCL_LIBRARY",
        "NCCL_PKG_VERSION",
    }
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
_TRUE = ("1", "true", "yes", "on")
_LEVELS = {"LOC": 0, "0": 0}


def _set(ctx: Context, name: str) -> str | None:
    v = ctx.environment.get(name)
    return v.strip() if v is not None else None


def _ev(ctx: Context, name: str, value: str) -> dict[str, str]:
    return {"variable": name, "value": value, "from": ctx.environment.where(name)}


def _enabled(ctx: Context, name: str) -> str | None:
    """The value of a switch variable when it is on (1, true, yes, on), else None."""
    v = _set(ctx, name)
    return v if v is not None and v.lower() in _TRUE else None


def _env_issue(ctx: Context, name: str, value: str, message: str, **extra: Any) -> Issue:
    return Issue(f"env:{name}", message, dict(_ev(ctx, name, value), **extra))


@rule(
    "TD601",
    "nccl-p2p-disabled",
    "error",
    fix="Unset NCCL_P2P_DISABLE: on an NVLink host it sends all GPU traffic through host memory.",
)
def nccl_p2p_disabled(ctx: Context) -> Iterator[Issue]:
    """NCCL_P2P_DISABLE is set on a host whose GPUs have NVLink (or working P2P)."""
    v = _enabled(ctx, "NCCL_P2P_DISABLE")
    if v and ctx.has_nvlink:
        yield _env_issue(ctx, "NCCL_P2P_DISABLE", v, f"NCCL_P2P_DISABLE={v} on an NVLink host")


@rule(
    "TD602",
    "nccl-p2p-level-loc",
    "error",
    fix="Unset NCCL_P2P_LEVEL (NCCL picks the right level) or set it to NVL or wider.",
)
def nccl_p2p_level_loc(ctx: Context) -> Iterator[Issue]:
    """NCCL_P2P_LEVEL is LOC (or 0), which disables P2P, on an NVLink host."""
    v = _set(ctx, "NCCL_P2P_LEVEL")
    if v is not None and v.upper() in _LEVELS and ctx.has_nvlink:
        yield Issue(
            "env:NCCL_P2P_LEVEL", f"NCCL_P2P_LEVEL={v} disables P2P on an NVLink host", _ev(ctx, "NCCL_P2P_LEVEL", v)
        )


@rule(
    "TD603",
    "nccl-shm-disabled",
    "warning",
    fix="Unset NCCL_SHM_DISABLE: without shared memory NCCL uses the network between GPUs of one node.",
)
def nccl_shm_disabled(ctx: Context) -> Iterator[Issue]:
    """NCCL_SHM_DISABLE is set: intra-node traffic that cannot use P2P goes over the network."""
    v = _enabled(ctx, "NCCL_SHM_DISABLE")
    if v:
        yield _env_issue(ctx, "NCCL_SHM_DISABLE", v, f"NCCL_SHM_DISABLE={v}")


@rule(
    "TD604",
    "nccl-ib-disabled",
    "warning",
    fix="Unset NCCL_IB_DISABLE: this host has RDMA NICs, and without them NCCL falls back to TCP sockets.",
)
def nccl_ib_disabled(ctx: Context) -> Iterator[Issue]:
    """NCCL_IB_DISABLE is set on a host with InfiniBand or RoCE NICs."""
    v = _enabled(ctx, "NCCL_IB_DISABLE")
    rdma = [n.name for n in ctx.snap.nics if n.kind in ("infiniband", "roce")]
    if v and rdma:
        yield _env_issue(
            ctx, "NCCL_IB_DISABLE", v, f"NCCL_IB_DISABLE={v} but the host has {', '.join(rdma)}", nics=rdma
        )


def _filter(spec: str) -> tuple[bool, list[tuple[bool, str]]]:
    """NCCL's interface / HCA filter: leading ^ excludes; '=' makes an entry exact."""
    exclude = spec.startswith("^")
    body = spec[1:] if exclude else spec
    entries = []
    for raw in body.split(","):
        raw = raw.strip()
        if raw:
            exact = raw.startswith("=")
            entries.append((exact, raw.lstrip("=")))
    return exclude, entries


def _matches(name: str, exact: bool, pattern: str) -> bool:
    return name == pattern if exact else name.startswith(pattern)


@rule(
    "TD605",
    "nccl-socket-ifname-nomatch",
    "error",
    fix="Set NCCL_SOCKET_IFNAME to an interface that is up (see `ip -br link`), or unset it.",
)
def nccl_socket_ifname(ctx: Context) -> Iterator[Issue]:
    """NCCL_SOCKET_IFNAME selects no network interface that is up: NCCL fails to bootstrap."""
    v = _set(ctx, "NCCL_SOCKET_IFNAME")
    if not v:
        return
    up = [i.name for i in ctx.snap.interfaces if i.operstate in ("up", "unknown")]
    exclude, entries = _filter(v)
    if exclude:
        left = [n for n in up if n != "lo" and not any(_matches(n, e, p) for e, p in entries)]
    else:
        left = [n for n in up if any(_matches(n, e, p) for e, p in entries)]
    if not left:
        yield Issue(
            "env:NCCL_SOCKET_IFNAME",
            f"NCCL_SOCKET_IFNAME={v} selects no interface that is up (up: {', '.join(up) or 'none'})",
            dict(_ev(ctx, "NCCL_SOCKET_IFNAME", v), up=up),
        )


@rule(
    "TD606",
    "nccl-ib-hca-nomatch",
    "error",
    fix="Name devices that exist (see `ls /sys/class/infiniband`), e.g. NCCL_IB_HCA==mlx5_0,=mlx5_1.",
)
def nccl_ib_hca_nomatch(ctx: Context) -> Iterator[Issue]:
    """An NCCL_IB_HCA entry matches no RDMA device on the host."""
    for v, devs, exact, pat, hits in _hca_entries(ctx):
        if not any(_matches(d, exact, pat.split(":")[0]) for d in hits):
            yield Issue(
                "env:NCCL_IB_HCA",
                f"NCCL_IB_HCA entry {pat!r} matches no RDMA device (present: {', '.join(devs) or 'none'})",
                dict(_ev(ctx, "NCCL_IB_HCA", v), entry=pat),
            )


def _hca_entries(ctx: Context) -> Iterator[tuple[str, list[str], bool, str, list[str]]]:
    """(value, RDMA devices, exact?, entry, devices the entry's name is a prefix of), per entry."""
    v = _set(ctx, "NCCL_IB_HCA")
    if not v:
        return
    devs = [n.name for n in ctx.snap.nics if n.kind in ("infiniband", "roce")]
    for exact, pat in _filter(v)[1]:
        yield v, devs, exact, pat, [d for d in devs if d.startswith(pat.split(":")[0])]


@rule(
    "TD607",
    "nccl-ib-hca-ambiguous",
    "warning",
    fix="Prefix each entry with '=' for an exact match (NCCL_IB_HCA==mlx5_1), or list every device you mean.",
)
def nccl_ib_hca_ambiguous(ctx: Context) -> Iterator[Issue]:
    """A bare NCCL_IB_HCA entry is a prefix that matches several devices (mlx5_1 also picks mlx5_10..)."""
    for v, _, exact, pat, hits in _hca_entries(ctx):
        if not exact and len(hits) > 1:
            yield Issue(
                "env:NCCL_IB_HCA",
                f"NCCL_IB_HCA entry {pat!r} matches {', '.join(hits)}",
                dict(_ev(ctx, "NCCL_IB_HCA", v), entry=pat, matches=hits),
            )


@rule(
    "TD608",
    "nccl-topo-file-bad",
    "error",
    fix="Point NCCL_TOPO_FILE at a topology file written for this host (NCCL_TOPO_DUMP_FILE writes one), or unset it.",
)
def nccl_topo_file_bad(ctx: Context) -> Iterator[Issue]:
    """NCCL_TOPO_FILE is missing, or NCCL would refuse or misread it on this host.

    NCCL trusts the file over what it detects, and falls back silently where it cannot read
    a value. The file is checked as NCCL reads it (src/graph/xml.cc, topo.cc):

    - syntax: NCCL's own parser refuses an XML declaration, a DTD, and tabs between elements;
    - version: `<system version="1">`, or NCCL refuses to start;
    - bus ids: every GPU and NIC must exist here (a file from another host model routes traffic
      over devices that do not exist); bridges may be invented, as VM topology files do, but
      must not reuse a device's id;
    - link speeds: each `link_speed` must be a string NCCL knows ("32.0 GT/s PCIe"); any other
      is silently rated as PCIe Gen3, and an invented bridge without one is too;
    - affinity: each GPU and NIC under the CPU of the NUMA node the host puts it on;
    - GPUDirect RDMA distance: a NIC no further from its nearest GPU than on the host (NCCL
      uses GPUDirect RDMA only up to PXB).

    `topodoctor nccl-topo -o FILE` writes a file for this host.
    """
    v = _set(ctx, "NCCL_TOPO_FILE")
    if not v:
        return
    ev = _ev(ctx, "NCCL_TOPO_FILE", v)
    try:
        text = read_text(v, "NCCL_TOPO_FILE", max_bytes=MAX_TOPO_FILE_BYTES)
    except InputError as exc:
        yield Issue("env:NCCL_TOPO_FILE", str(exc), ev)
        return
    from topodoctor.nccl_topo_lint import lint_topo_file  # networkx: only when a file is set

    for p in lint_topo_file(text, ctx.snap, ctx.graph):
        yield Issue(
            "env:NCCL_TOPO_FILE",
            f"NCCL_TOPO_FILE {v}: {p.message}",
            {**ev, "check": p.check, **p.evidence},
            severity=p.severity,
        )


@rule(
    "TD609",
    "nccl-ib-timeout-range",
    "error",
    fix="Set NCCL_IB_TIMEOUT between 1 and 31 (the default, 20 in current NCCL, suits most fabrics), or unset it.",
)
def nccl_ib_timeout(ctx: Context) -> Iterator[Issue]:
    """NCCL_IB_TIMEOUT is 0 or 32 and above (the verbs timeout is 4.096 us x 2^value, 5 bits)."""
    v = _set(ctx, "NCCL_IB_TIMEOUT")
    if v is None:
        return
    try:
        n = int(v)
    except ValueError:
        yield Issue("env:NCCL_IB_TIMEOUT", f"NCCL_IB_TIMEOUT={v!r} is not a number", _ev(ctx, "NCCL_IB_TIMEOUT", v))
        return
    if n <= 0 or n >= 32:
        yield Issue("env:NCCL_IB_TIMEOUT", f"NCCL_IB_TIMEOUT={n} is outside 1..31", _ev(ctx, "NCCL_IB_TIMEOUT", v))


@rule(
    "TD610",
    "nccl-debug-setting",
    "warning",
    fix="Remove debugging settings from job scripts and nccl.conf once the issue they worked around is fixed.",
)
def nccl_debug_setting(ctx: Context) -> Iterator[Issue]:
    """A setting NCCL documents as for debugging only is left set (ALGO, PROTO, NTHREADS, ...)."""
    for name in DEBUG_ONLY:
        v = _set(ctx, name)
        if v is not None and not (name == "NCCL_PROTO" and "LL128" in v.upper() and "^" not in v):
            yield Issue(f"env:{name}", f"{name}={v} is a debugging setting", _ev(ctx, name, v))
    v = _set(ctx, "NCCL_DEBUG")
    if v is not None and v.upper() == "TRACE":
        yield Issue("env:NCCL_DEBUG", "NCCL_DEBUG=TRACE slows every collective", _ev(ctx, "NCCL_DEBUG", v))


@rule(
    "TD611",
    "nccl-ll128-forced",
    "error",
    fix="Unset NCCL_PROTO. NCCL enables LL128 only where the platform keeps its ordering guarantees; forcing "
    "it elsewhere can corrupt data silently.",
)
def nccl_ll128_forced(ctx: Context) -> Iterator[Issue]:
    """NCCL_PROTO forces the LL128 protocol."""
    v = _set(ctx, "NCCL_PROTO")
    if v is not None and "LL128" in v.upper() and "^" not in v:
        yield Issue("env:NCCL_PROTO", f"NCCL_PROTO={v} forces LL128", _ev(ctx, "NCCL_PROTO", v))


@rule(
    "TD612",
    "nccl-ignore-disabled-p2p",
    "warning",
    fix="Unset NCCL_IGNORE_DISABLED_P2P; if P2P is disabled, find out why (TD301) instead.",
)
def nccl_ignore_disabled_p2p(ctx: Context) -> Iterator[Issue]:
    """NCCL_IGNORE_DISABLED_P2P is set: NCCL will not warn when P2P is unexpectedly off."""
    v = _enabled(ctx, "NCCL_IGNORE_DISABLED_P2P")
    if v:
        yield _env_issue(ctx, "NCCL_IGNORE_DISABLED_P2P", v, f"NCCL_IGNORE_DISABLED_P2P={v}")


@rule(
    "TD613",
    "nccl-deprecated-variable",
    "warning",
    fix="Replace the variable as the message says; NCCL ignores removed ones silently.",
)
def nccl_deprecated(ctx: Context) -> Iterator[Issue]:
    """A removed or renamed NCCL variable is set: it has no effect (or a new name)."""
    for name in ctx.environment.names():
        if name in DEPRECATED:
            yield Issue(
                f"env:{name}",
                f"{name} is removed or renamed: use {DEPRECATED[name]}",
                _ev(ctx, name, ctx.environment.get(name) or ""),
            )


@rule(
    "TD614",
    "nccl-unknown-variable",
    "warning",
    fix="Check the spelling against the NCCL documentation; NCCL ignores names it does not know.",
)
def nccl_unknown(ctx: Context) -> Iterator[Issue]:
    """An NCCL_* variable NCCL does not know is set (often a typo); the closest real name is offered."""
    for name in ctx.environment.names():
        if name.startswith("NCCL_") and name not in KNOWN | NOT_SETTINGS and name not in DEPRECATED:
            close = difflib.get_close_matches(name, sorted(KNOWN | set(DEPRECATED)), n=1, cutoff=0.75)
            hint = f"; did you mean {close[0]}?" if close else ""
            yield Issue(
                f"env:{name}",
                f"{name} is not an NCCL variable{hint}",
                dict(_ev(ctx, name, ctx.environment.get(name) or ""), suggestion=close[0] if close else None),
            )


def _visible(ctx: Context) -> tuple[str, list[str]] | None:
    v = ctx.environment.get("CUDA_VISIBLE_DEVICES")
    if v is None:
        return None
    return v, [e.strip() for e in v.split(",")]


@rule(
    "TD615",
    "cuda-visible-devices-invalid",
    "error",
    fix="List GPU indices (0..N-1) or UUIDs (GPU-...) that exist; CUDA ignores every entry after the first "
    "invalid one.",
)
def cuda_visible_invalid(ctx: Context) -> Iterator[Issue]:
    """CUDA_VISIBLE_DEVICES holds an entry that names no GPU (CUDA drops it and all after it)."""
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
    fix="List each GPU once in CUDA_VISIBLE_DEVICES; CUDA fails to initialise with duplicates.",
)
def cuda_visible_duplicate(ctx: Context) -> Iterator[Issue]:
    """CUDA_VISIBLE_DEVICES lists the same GPU twice."""
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


@rule(
    "TD617",
    "cuda-device-order",
    "warning",
    fix="export CUDA_DEVICE_ORDER=PCI_BUS_ID so CUDA numbers GPUs as nvidia-smi and NVML do, or use UUIDs.",
)
def cuda_device_order(ctx: Context) -> Iterator[Issue]:
    """CUDA_VISIBLE_DEVICES uses indices without CUDA_DEVICE_ORDER=PCI_BUS_ID.

    CUDA's default order is fastest-first, which can differ from the PCI order nvidia-smi,
    NVML and schedulers use: index 0 may not be the GPU the scheduler meant.
    """
    got = _visible(ctx)
    if got is None:
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
    "TD618",
    "nccl-nvls-disabled",
    "warning",
    fix="NVLink SHARP (NVLS) speeds up all-reduce on NVSwitch hosts; leave NCCL_NVLS_ENABLE unset unless it "
    "is off on purpose (shared hosts, known driver issues).",
)
def nccl_nvls_disabled(ctx: Context) -> Iterator[Issue]:
    """NCCL_NVLS_ENABLE=0 on an NVSwitch host: a warning, never a failure (it may be on purpose)."""
    v = _set(ctx, "NCCL_NVLS_ENABLE")
    if v is not None and v in ("0", "false", "no", "off") and ctx.has_nvswitch:
        yield Issue(
            "env:NCCL_NVLS_ENABLE", f"NCCL_NVLS_ENABLE={v} on an NVSwitch host", _ev(ctx, "NCCL_NVLS_ENABLE", v)
        )


@rule("TD619", "nccl-conf-unreadable", "warning", fix="Fix or remove the file: NCCL skips lines it cannot parse.")
def nccl_conf_unreadable(ctx: Context) -> Iterator[Issue]:
    """An NCCL config file (/etc/nccl.conf, NCCL_CONF_FILE) cannot be read or has a malformed line."""
    for err in ctx.environment.conf_errors:
        yield Issue("conf:" + err.split(":")[0], err, {"error": err})
