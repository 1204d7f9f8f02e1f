"""The NCCL settings a run had, judged against its own evidence: whether each could have touched this
op (the transports NCCL used, the channels it built, the op's algorithms), and what busbw NCCL's
model leaves under it. Yields candidates for a slow op, and for a failed one."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from topodoctor.core.text import plural
from topodoctor.diagnosis import nccl_model as nm
from topodoctor.diagnosis.rank import Candidate
from topodoctor.diagnosis.run import Seen
from topodoctor.model.collectives import NcclAccount
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.nccl.guide import BY_NAME
from topodoctor.topology.busbw import algorithm_busbw, pcie_gbps

CHANNEL_VARS = ("NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS", "NCCL_MIN_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MAX_P2P_NCHANNELS")
P2P_OFF = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_HOSTID")
DATA_PATH = ("p2p", "shm", "net", "memory", "buffer", "protocol", "multicast")
Found = tuple[list[Candidate], list[str]]


@dataclass(frozen=True)
class OpRun:
    """What the settings are judged against: the op and size, the run's account and GPUs, the model."""

    op: str
    size_bytes: int
    snap: HostSnapshot
    account: NcclAccount | None
    gpus: tuple[int, ...]
    nodes: int
    model: float | None  # the topology's busbw at this size
    ring: float | None  # the ring bandwidth NCCL's search fills
    # channel connections by transport NCCL sent off P2P between ranks of this node (fallback.py's
    # join, the one TD003 and diagnose read)
    fell: dict[str, int] = field(default_factory=dict)


def _int(v: str) -> int | None:
    try:
        return int(v.strip(), 0)
    except ValueError:
        return None


def _pcie_bound(run: OpRun) -> float | None:
    """Traffic staged through host memory crosses each GPU's PCIe link: the slowest bounds it."""
    rates = [pcie_gbps(g) for g in run.snap.gpus if g.index in run.gpus]
    known = [r for r in rates if r is not None]
    return min(known) if known and run.model is not None else None


def _named(s: Seen) -> str:
    return f"{s.name}={s.value}"


def _ev(s: Seen, **more: object) -> dict[str, object]:
    return {"variable": s.name, "value": s.value, "seen_in": s.where, **more}


def _protocol(s: Seen, run: OpRun) -> Found:
    if run.op not in nm.COLLECTIVES:
        return [], [f"{_named(s)}: point-to-point ops ({run.op}) choose their own protocol"]
    ok = nm.allowed(s.value, nm.PROTOCOLS, run.op)
    if ok is None:
        return [], [f"{_named(s)}: names no protocol NCCL knows (NCCL keeps its default)"]
    if run.model is None:
        return [Candidate(f"{_named(s)} restricts NCCL's protocols", BY_NAME[s.name].fix, _ev(s))], []
    channels = run.account.channels if run.account is not None else None
    left = nm.protocol_busbw(run.model, ok, nm.arch_of(run.snap), channels)
    if left >= run.model * 0.995:
        return [], [f"{_named(s)}: still allows Simple, which large messages use"]
    what = f"{_named(s)} forces {'/'.join(sorted(ok))} (NCCL's model: at most {left:.0f} GB/s here)"
    return [Candidate(what, BY_NAME[s.name].fix, _ev(s, allowed=sorted(ok)), left)], []


def _algorithm(s: Seen, run: OpRun) -> Found:
    if run.op not in nm.COLLECTIVES:
        return [], [f"{_named(s)}: point-to-point ops ({run.op}) use no collective algorithm"]
    ok = nm.allowed(s.value, nm.ALGORITHMS, run.op)
    if ok is None:
        return [], [f"{_named(s)}: names no algorithm NCCL knows (NCCL keeps its default)"]
    serve = set(nm.ALGORITHMS_FOR[run.op]) & ok
    if not serve:
        what = f"{_named(s)} leaves {run.op} no algorithm (it runs as {', '.join(nm.ALGORITHMS_FOR[run.op])})"
        return [Candidate(what, BY_NAME[s.name].fix, _ev(s, allowed=sorted(ok)), 0.0, confidence="high")], []
    if "Ring" in serve:
        return [], [f"{_named(s)}: still allows Ring for {run.op}"]
    got = [algorithm_busbw(run.snap, run.op, a.lower(), run.gpus) for a in sorted(serve)]
    left = max((g for g in got if g is not None), default=None)
    what = f"{_named(s)} runs {run.op} as {'/'.join(sorted(serve))} instead of NCCL's choice"
    return [Candidate(what, BY_NAME[s.name].fix, _ev(s, allowed=sorted(serve)), left)], []


def _channels(found: list[Seen], run: OpRun) -> Found:
    p2p = run.op in ("sendrecv", "all_to_all")
    acc = run.account
    built = (acc.p2p_channels if p2p else acc.channels) if acc is not None else None
    caps = [n for s in found if s.name.startswith("NCCL_MAX") and (n := _int(s.value)) is not None and n > 0]
    used = built if built is not None else (min(caps) if caps else None)
    names = ", ".join(_named(s) for s in found)
    if used is None or run.ring is None or run.model is None:
        return [Candidate(f"{names} limits NCCL's channels", BY_NAME[found[0].name].fix, {"variables": names})], []
    default = nm.default_channels(run.ring)
    if used >= default:
        return [], [f"{names}: NCCL built {plural(used, 'channel')}, no fewer than the {default} it builds here"]
    left = nm.channels_busbw(run.model, used, default)
    what = f"{names} holds NCCL to {plural(used, 'channel')} (about {default} by default here)"
    first = next(s for s in found if s.name.startswith("NCCL_MAX")) if caps else found[0]
    ev = {"variables": names, "channels": used, "default_channels": default}
    return [Candidate(what, BY_NAME[first.name].fix, ev, left)], []


def _threads(s: Seen, run: OpRun) -> Found:
    n = _int(s.value)
    if n is None or n >= nm.DEFAULT_NTHREADS or n <= 0:
        return [], [f"{_named(s)}: not fewer threads than NCCL's default {nm.DEFAULT_NTHREADS}"]
    left = nm.threads_busbw(run.model, n) if run.model is not None else None
    what = f"{_named(s)} runs NCCL's kernels with {n} threads per block ({nm.DEFAULT_NTHREADS} by default)"
    return [Candidate(what, BY_NAME[s.name].fix, _ev(s, default=nm.DEFAULT_NTHREADS), left)], []


def _buffer(s: Seen, run: OpRun) -> Found:
    n = _int(s.value)
    if n is None or n >= nm.DEFAULT_BUFFSIZE or n <= 0:
        return [], [f"{_named(s)}: not smaller than NCCL's default 4 MiB buffer"]
    acc = run.account
    channels = (acc.channels if acc is not None else None) or (nm.default_channels(run.ring) if run.ring else 1)
    left = nm.buffer_busbw(run.model, n, channels) if run.model is not None else None
    what = f"{_named(s)} stages data in {n // 1024} KiB buffers (4 MiB by default): every small step pays a sync"
    return [Candidate(what, BY_NAME[s.name].fix, _ev(s, default=nm.DEFAULT_BUFFSIZE), left)], []


def _transport(seen: dict[str, Seen], run: OpRun) -> Found:
    """P2P and SHM settings, judged by the transports NCCL logged between ranks of this node."""
    p2p_vars = [seen[k] for k in P2P_OFF if k in seen]
    shm = seen.get("NCCL_SHM_DISABLE")
    memcpy = seen.get("NCCL_P2P_USE_CUDA_MEMCPY")
    out: list[Candidate] = []
    ruled: list[str] = []
    fell = run.fell
    if memcpy is not None and _int(memcpy.value):
        what = f"{_named(memcpy)} moves P2P data with copy engines driven by NCCL's proxy thread"
        out.append(Candidate(what, BY_NAME[memcpy.name].fix, _ev(memcpy)))
    if fell:
        why = [*p2p_vars, *([shm] if shm is not None and any(t.startswith("NET") for t in fell) else [])]
        how = ", ".join(f"{t} ({n} channel connections)" for t, n in sorted(fell.items()))
        head = ", ".join(_named(s) for s in why) if why else "P2P was not available"
        what = f"{head}: NCCL sent this node's traffic through {how}"
        fix = BY_NAME[why[0].name].fix if why else "Find why NCCL could not use P2P (TD3xx, a container's IPC)."
        ev = {"transports": fell, "variables": [_named(s) for s in why]}
        out.append(Candidate(what, fix, ev, _pcie_bound(run), direct=True))
    elif run.account is not None and run.account.connections:
        staged = any(c.kind in ("shm", "net") for c in run.account.connections)
        note = (
            "NCCL joins these GPUs through host memory by default"
            if staged
            else "NCCL still connected the ranks over P2P"
        )
        for s in [*p2p_vars, *([shm] if shm is not None else [])]:
            ruled.append(f"{_named(s)}: no effect, {note}")
    else:  # no account of the transports: a setting that turns P2P off may have
        for s in p2p_vars:
            if s.name == "NCCL_P2P_LEVEL" or (s.name == "NCCL_P2P_DISABLE" and _int(s.value) == 1):
                what = f"{_named(s)} may keep NCCL off P2P (no NCCL log to show the transports)"
                out.append(Candidate(what, BY_NAME[s.name].fix, _ev(s), direct=False))
    return out, ruled


def _scope_only(s: Seen, run: OpRun) -> Found:
    """Settings of the network, memory, launch or multicast: say why they did not touch this op."""
    kind = BY_NAME[s.name].kind
    if kind == "net":
        if run.nodes > 1:
            return [Candidate(f"{_named(s)} changes NCCL's network transport", BY_NAME[s.name].fix, _ev(s))], []
        return [], [f"{_named(s)}: acts on the network transport, unused by this one-node run"]
    if kind == "launch":
        return [], [f"{_named(s)}: changes how kernels launch, not a {run.size_bytes >> 20} MiB op's bandwidth"]
    if kind == "memory":
        return [], [f"{_named(s)}: changes how NCCL allocates its buffers, not their bandwidth"]
    if kind == "multicast":
        return [], [f"{_named(s)}: the model is of NCCL's ring; NVLS could only add to it"]
    return [], []


def slow_candidates(seen: dict[str, Seen], run: OpRun) -> Found:
    """Every setting of the run, as a candidate cause of a slow op or as ruled out."""
    out: list[Candidate] = []
    ruled: list[str] = []

    def add(got: Found) -> None:
        out.extend(got[0])
        ruled.extend(got[1])

    chans = [seen[k] for k in CHANNEL_VARS if k in seen]
    if chans:
        add(_channels(chans, run))
    add(_transport(seen, run))
    for name, s in seen.items():
        st = BY_NAME.get(name)
        if (
            st is None
            or name in CHANNEL_VARS
            or name in P2P_OFF
            or name in ("NCCL_SHM_DISABLE", "NCCL_P2P_USE_CUDA_MEMCPY")
        ):
            continue
        if st.kind == "protocol":
            add(_protocol(s, run))
        elif st.kind == "algorithm":
            add(_algorithm(s, run))
        elif st.kind == "threads":
            add(_threads(s, run))
        elif st.kind == "buffer":
            add(_buffer(s, run))
        else:
            add(_scope_only(s, run))
    return out, ruled


def failure_candidates(seen: dict[str, Seen], run: OpRun, kind: str, warnings: Iterable[str]) -> Found:
    """Settings that explain an op that failed (an algorithm or protocol the op cannot use) or hung (a
    setting that changes how data moves); NCCL's own warning where it names the cause."""
    out: list[Candidate] = []
    ruled: list[str] = []
    warned = [w for w in warnings if "no algorithm/protocol available" in w]
    for name in ("NCCL_ALGO", "NCCL_PROTO"):
        s = seen.get(name)
        if s is None or run.op not in nm.COLLECTIVES:
            continue
        universe = nm.ALGORITHMS if name == "NCCL_ALGO" else nm.PROTOCOLS
        ok = nm.allowed(s.value, universe, run.op)
        serve = (set(nm.ALGORITHMS_FOR[run.op]) if name == "NCCL_ALGO" else set(nm.PROTOCOLS)) & (ok or set())
        if ok is not None and not serve:
            runs = nm.ALGORITHMS_FOR[run.op] if name == "NCCL_ALGO" else nm.PROTOCOLS
            noun = "algorithm" if name == "NCCL_ALGO" else "protocol"
            what = f"{_named(s)} leaves {run.op} no {noun} it can run with ({', '.join(runs)})"
            ev = _ev(s, nccl_warning=warned[0] if warned else None)
            out.append(Candidate(what, BY_NAME[name].fix, ev, confidence="high"))
        elif warned and ok is not None:
            ev = _ev(s, nccl_warning=warned[0])
            out.append(Candidate(f"{_named(s)}: NCCL found no algorithm for {run.op}", BY_NAME[name].fix, ev))
    if warned and not out:
        fix = "Unset NCCL_ALGO / NCCL_PROTO (and any tuner plugin) so NCCL can pick what the op supports."
        out.append(Candidate(f"NCCL: {warned[0][:120]}", fix, {"nccl_warning": warned[0]}, confidence="medium"))
    if kind in ("hang", "error", "died") and not out:
        path = [s for s in seen.values() if (st := BY_NAME.get(s.name)) is not None and st.kind in DATA_PATH]
        path = [s for s in path if not (s.name == "NCCL_NVLS_ENABLE" and _int(s.value) == 0)]
        for s in path:
            conf = "medium" if len(path) == 1 else "low"
            what = f"{_named(s)} was set when {run.op} {'hung' if kind == 'hang' else 'failed'}: {BY_NAME[s.name].harm}"
            out.append(Candidate(what, BY_NAME[s.name].fix, _ev(s), confidence=conf))  # type: ignore[arg-type]
        if not path:
            ruled.append("NCCL settings: none that changes how data moves")
    return out, ruled
