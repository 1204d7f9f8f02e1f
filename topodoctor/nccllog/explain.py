"""Why it failed: the events of NCCL logs turned into findings (codes TD040 - TD059), each with
the evidence line, what it means and the fix. Data in, findings out; no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from topodoctor.model.findings import Finding, Severity
from topodoctor.nccllog.parse import Event, LogFile


@dataclass(frozen=True)
class Explanation:
    """One failure class: its stable code and name, severity, what it means, and the fix."""

    code: str
    name: str
    severity: Severity
    title: str
    fix: str


EXPLANATIONS: dict[str, Explanation] = {
    e.code: e
    for e in (
        Explanation(
            "TD040",
            "nccl-log-no-net-plugin",
            "error",
            "NCCL found no network it may use: NCCL_NET (or a plugin) names a network with no usable device here",
            "Unset NCCL_NET (NCCL then picks IB when an RDMA device is up, else sockets) or set NCCL_NET=Socket; "
            "`ls /sys/class/infiniband` and `ibv_devinfo` show whether the host has an IB device at all; "
            "`topodoctor check` lints NCCL_NET and NCCL_IB_HCA against the host.",
        ),
        Explanation(
            "TD041",
            "nccl-log-no-socket-interface",
            "error",
            "NCCL_SOCKET_IFNAME matches no network interface: NCCL cannot bootstrap",
            "Set NCCL_SOCKET_IFNAME to an interface that is up on every node (`ip -br link`; a prefix such as "
            "`eth` matches eth0, `=eth0` only eth0), or unset it; `topodoctor check` lints it against the host.",
        ),
        Explanation(
            "TD042",
            "nccl-log-duplicate-gpu",
            "error",
            "Two ranks of one host use the same GPU",
            "Give each rank its own GPU: torch.cuda.set_device(LOCAL_RANK) before init_process_group (or "
            "device_id=...), and check CUDA_VISIBLE_DEVICES per rank and the launcher's --nproc-per-node.",
        ),
        Explanation(
            "TD043",
            "nccl-log-shm-exhausted",
            "error",
            "NCCL could not create its shared-memory segment: /dev/shm is full or too small",
            "In a container give /dev/shm room: `docker run --shm-size=1g` (or `--ipc=host`), a Kubernetes "
            "emptyDir with medium: Memory on /dev/shm; `df -h /dev/shm` shows its size. NCCL_SHM_DISABLE=1 "
            "avoids it at a cost in speed.",
        ),
        Explanation(
            "TD044",
            "nccl-log-cuda-driver-too-old",
            "error",
            "The NVIDIA driver is older than the CUDA runtime the program was built for",
            "Install a driver that supports the CUDA version the program's torch/NCCL were built with "
            "(`nvidia-smi` shows the driver's CUDA version), or use a build for the installed driver's CUDA.",
        ),
        Explanation(
            "TD045",
            "nccl-log-ib-completion-error",
            "error",
            "An InfiniBand/RoCE transfer completed with an error",
            "Status 12 (retry exceeded) means the peer's NIC stopped answering: check its link (`ibstat`, port "
            "counters, cable, switch port), then whether the peer process died first; NCCL_IB_TIMEOUT (default 20) "
            "and NCCL_IB_RETRY_CNT (default 7) only widen the window. Drain the node whose link errors.",
        ),
        Explanation(
            "TD046",
            "nccl-log-peer-lost",
            "error",
            "A peer went away in the middle of a collective (remote process exited or a network error)",
            "This rank is a victim: find the rank that failed first (its own log's last lines: an exception, "
            "out of memory, an XID in `dmesg`, a killed process) and fix that; then the network between the nodes.",
        ),
        Explanation(
            "TD047",
            "nccl-log-watchdog-timeout",
            "error",
            "A collective did not finish within the process group's timeout (torch's watchdog)",
            "A rank never joined the collective (a hang, a different code path, a dead process) or the network "
            "stalled: compare each rank's last completed sequence number; TORCH_NCCL_TRACE_BUFFER_SIZE and "
            "the flight recorder show where each rank stood. Raise the timeout only for known-slow first steps.",
        ),
        Explanation(
            "TD048",
            "nccl-log-version-mismatch",
            "error",
            "Ranks run different NCCL versions",
            "Run every rank from one image or environment (`python -c 'import torch; print(torch.cuda.nccl."
            "version())'` on each node); LD_LIBRARY_PATH or a system libnccl can shadow the one torch ships.",
        ),
        Explanation(
            "TD049",
            "nccl-log-no-reason",
            "warning",
            "NCCL failed without saying why (NCCL_DEBUG was not set)",
            "Run again with NCCL_DEBUG=WARN (NCCL_DEBUG=INFO for transports and interfaces) and "
            "NCCL_DEBUG_FILE=/tmp/nccl.%h.%p.log, then `topodoctor nccl-log` on those files; `topodoctor check` "
            "on the node lints the NCCL variables that cause most init failures.",
        ),
        Explanation(
            "TD050",
            "nccl-log-ib-fallback",
            "warning",
            "InfiniBand was asked for but NCCL found no IB device and fell back to TCP sockets",
            "Name RDMA devices that exist in NCCL_IB_HCA (`ls /sys/class/infiniband`), or unset it; on a host "
            "without RDMA NICs sockets are all there is.",
        ),
        Explanation(
            "TD051",
            "nccl-log-warning",
            "info",
            "NCCL printed a warning no other explanation covers",
            "Read the line; `topodoctor nccl-log --format json` lists every event with its file and line.",
        ),
        Explanation(
            "TD052",
            "nccl-log-error",
            "error",
            "NCCL reported an error of a class topodoctor does not explain",
            "Read NCCL's reason in the evidence; run with NCCL_DEBUG=INFO for the lines before it.",
        ),
    )
}
CODE_OF = {e.name: e.code for e in EXPLANATIONS.values()}


def explanation_text(code: str) -> str | None:
    """``topodoctor explain`` for a code of ours (TD040) or its name; None for any other."""
    e = EXPLANATIONS.get(code.upper()) or EXPLANATIONS.get(CODE_OF.get(code, ""))
    if e is None:
        return None
    return f"# {e.code} {e.name} ({e.severity}, from `topodoctor nccl-log`)\n\n{e.title}.\n\nFix: {e.fix}\n"


KIND_CODE = {
    "net-plugin": "TD040",
    "no-socket-interface": "TD041",
    "duplicate-gpu": "TD042",
    "shm": "TD043",
    "cuda-driver": "TD044",
    "ib-completion": "TD045",
    "peer-lost": "TD046",
    "watchdog-timeout": "TD047",
    "version-mismatch": "TD048",
}
# ibv_wc_status (rdma-core's verbs.h): the statuses an NCCL completion error names
IBV_WC_STATUS = {
    4: "local protection error",
    5: "work request flushed (the queue pair had already failed)",
    9: "remote invalid request",
    10: "remote access error",
    11: "remote operation error",
    12: "transport retry counter exceeded: the peer's NIC did not acknowledge in time",
    13: "RNR retry counter exceeded: the peer had no receive posted",
}
# What an NCCL error class usually means when NCCL left no reason (init.cc's ncclGetErrorString)
LIKELY = {
    "invalid usage": "at init: NCCL_NET naming an absent network, NCCL_SOCKET_IFNAME matching nothing, or two "
    "ranks on one GPU",
    "unhandled system error": "/dev/shm too small in a container, sockets refused or unreachable, or IB verbs failing",
    "unhandled cuda error": "a driver too old for the CUDA runtime, out of GPU memory, or a GPU fault (see dmesg)",
    "remote process exited": "another rank died or its node dropped off the network",
    "internal error": "an NCCL bug or a mix of NCCL builds",
}


def _finding(code: str, subject: str, message: str, ev: Event | None, **extra: object) -> Finding:
    e = EXPLANATIONS[code]
    evidence: dict[str, object] = {}
    if ev is not None:
        evidence.update(file=ev.file, line=ev.line_no, text=ev.text)
        if ev.rank is not None:
            evidence["rank"] = ev.rank
    evidence.update(extra)
    return Finding(code, e.name, e.severity, subject, message, e.fix, evidence)


def _subject(evs: Sequence[Event]) -> str:
    ranks = sorted({e.rank for e in evs if e.rank is not None})
    if ranks:
        return "rank" + ",".join(str(r) for r in ranks[:8]) + ("..." if len(ranks) > 8 else "")
    return evs[0].file.rsplit("/", 1)[-1]


def _after_watchdog(ev: Event, files: Sequence[LogFile]) -> bool:
    """A peer-lost line printed after its own file's watchdog timeout: the teardown, not the cause."""
    for f in files:
        if f.name == ev.file:
            first = next((e.line_no for e in f.events if e.kind == "watchdog-timeout"), None)
            return first is not None and ev.line_no > first
    return False


def explain(files: Sequence[LogFile], env: Mapping[str, str] | None = None) -> list[Finding]:
    """Every failure the logs show, worst and earliest first; nothing when the logs are healthy.
    ``env``: the NCCL variables of the process that wrote them, where known (a rank we started)."""
    events = [e for f in files for e in f.events]
    by_kind: dict[str, list[Event]] = {}
    for e in events:
        by_kind.setdefault(e.kind, []).append(e)
    env = {**(env or {}), **_env(files)}
    out: list[Finding] = []
    for kind, code in KIND_CODE.items():
        evs = by_kind.get(kind, [])
        if kind == "peer-lost":
            # the teardown after a timeout, or the NIC error already explained, is no second cause
            evs = [] if by_kind.get("ib-completion") else [e for e in evs if not _after_watchdog(e, files)]
        if evs:
            out.append(_explain_kind(kind, code, evs, env))
    out += _versions(files, by_kind)
    if (hca := env.get("NCCL_IB_HCA")) and by_kind.get("ib-no-device") and "TD040" not in {f.code for f in out}:
        ev = by_kind["ib-no-device"][0]
        out.append(_finding("TD050", "env:NCCL_IB_HCA", f"NCCL_IB_HCA={hca} but NCCL found no IB device", ev))
    explained = {f.code for f in out if f.severity in ("error", "critical")}
    if not explained:
        out += _unexplained_errors(files, by_kind.get("nccl-error", []), env)
    out += _other_warnings(by_kind.get("warn", []))
    return out


def _env(files: Iterable[LogFile]) -> dict[str, str]:
    env: dict[str, str] = {}
    for f in files:
        env.update(f.env)
    return env


def _explain_kind(kind: str, code: str, evs: list[Event], env: dict[str, str]) -> Finding:
    ev = evs[0]
    g = ev.groups
    subject = _subject(evs)
    extra: dict[str, object] = {"events": len(evs)}
    if kind == "net-plugin":
        net = env.get("NCCL_NET") or (g[0] if g and g[0] else None)
        msg = f"no NCCL network could be initialised{f' (NCCL_NET={net})' if net else ''}"
    elif kind == "no-socket-interface":
        ifname = env.get("NCCL_SOCKET_IFNAME")
        msg = "NCCL found no socket interface" + (f" matching NCCL_SOCKET_IFNAME={ifname}" if ifname else "")
    elif kind == "duplicate-gpu":
        msg = (
            f"ranks {g[0]} and {g[1]} both use the GPU at bus {g[2]}"
            if g[0] is not None
            else "several ranks use the same GPU"
        )
    elif kind == "shm":
        size = f" of {g[2]} bytes" if g[2] else ""
        msg = f"shared memory segment {g[1]}{size} could not be created" if g[1] else "no shared memory"
        if g[3]:
            msg += f": {g[3].strip()}"
    elif kind == "cuda-driver":
        msg = "the CUDA driver is too old for the CUDA runtime"
    elif kind == "ib-completion":
        status = int(g[2] or g[3] or -1)
        extra.update(status=status, peer=g[0])
        msg = f"completion from peer {g[0]} with status {status}: {IBV_WC_STATUS.get(status, 'see ibv_wc_status')}"
    elif kind == "peer-lost":
        peer = next((e.groups[0] for e in evs if e.groups and e.groups[0]), None)
        msg = (
            "a peer closed its connection"
            + (f" ({peer})" if peer else "")
            + ": remote process exited or a network error"
        )
    elif kind == "watchdog-timeout":
        seq, op, timeout_ms, ran_ms = g[:4]
        extra.update(seq=int(seq or 0), op=op, timeout_ms=int(timeout_ms or 0))
        msg = f"{op} (sequence {seq}) ran {ran_ms} ms, past the {timeout_ms} ms timeout: a rank did not join it"
    else:  # version-mismatch
        msg = f"rank {g[0]} runs NCCL {_code_version(g[1])}, rank {g[2]} NCCL {_code_version(g[3])}"
    return _finding(code, subject, msg, ev, **extra)


def _code_version(code: str | None) -> str:
    """NCCL_VERSION_CODE (22809) as 2.28.9."""
    n = int(code or 0)
    return f"{n // 10000}.{n // 100 % 100}.{n % 100}" if n >= 10000 else str(n)


def _versions(files: Sequence[LogFile], by_kind: dict[str, list[Event]]) -> list[Finding]:
    if by_kind.get("version-mismatch"):
        return []
    seen: dict[str, list[str]] = {}
    for f in files:
        for v in f.versions:
            seen.setdefault(v.split("+")[0], []).append(f.name)
    if len(seen) < 2:
        return []
    parts = "; ".join(f"{v} in {', '.join(n.rsplit('/', 1)[-1] for n in names[:3])}" for v, names in seen.items())
    return [_finding("TD048", "logs", f"the logs name {len(seen)} NCCL versions: {parts}", None, versions=list(seen))]


def _unexplained_errors(files: Sequence[LogFile], errors: list[Event], env: dict[str, str]) -> list[Finding]:
    if not errors:
        return []
    ev = errors[0]
    text, _, inline = (ev.groups[0] or "").partition(" / ")  # nccl-tests: 'class / ncclGetLastError()'
    cls = text.split(" (run with")[0].strip()
    reasons = [r for r in [inline.strip()] if r] + [r for f in files for r in f.last_errors if r]
    if reasons:
        return [_finding("TD052", _subject(errors), f"NCCL error '{cls}': {reasons[0]}", ev, reason=reasons[0])]
    likely = next((v for k, v in LIKELY.items() if cls.startswith(k)), "see NCCL's error class")
    shown = {k: v for k, v in env.items() if k in ("NCCL_NET", "NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_SHM_DISABLE")}
    msg = f"NCCL error '{cls}' with no reason in the log (NCCL_DEBUG unset); likely: {likely}"
    if shown:
        msg += "; the log shows " + ", ".join(f"{k}={v}" for k, v in shown.items())
    return [_finding("TD049", _subject(errors), msg, ev, error_class=cls, debug_set="NCCL_DEBUG=WARN")]


def _other_warnings(rest: list[Event]) -> list[Finding]:
    """WARN lines no specific pattern matched (a line names one event: the first pattern it matches)."""
    if not rest:
        return []
    texts = list(dict.fromkeys((w.groups[0] or "").strip()[:160] for w in rest))
    return [_finding("TD051", _subject(rest), f"NCCL WARN: {texts[0]}", rest[0], warnings=texts[:10])]
