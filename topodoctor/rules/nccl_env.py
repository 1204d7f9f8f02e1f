"""NCCL and CUDA environment rules (TD6xx), read from the process environment and NCCL's
config files as the probe captured them. A setting in the environment wins over a file, as in
NCCL itself; values are read the way NCCL's own parsers read them (``nccl.values``), and names are
judged against the releases of NCCL that read them (``nccl.variables``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from topodoctor.core.text import plural
from topodoctor.nccl.values import P2P_DISABLE, IntegerReading, read_integer, read_level, strtoll
from topodoctor.nccl.variables import DEBUG_ONLY
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule
from topodoctor.topology.busbw import nvls_all_reduce_busbw, predict


def setting(ctx: Context, name: str) -> str | None:
    """A variable's value as NCCL would see it (environment over config files), stripped; None if unset."""
    v = ctx.environment.get(name)
    return v.strip() if v is not None else None


def evidence(ctx: Context, name: str, value: str) -> dict[str, str]:
    """A finding's evidence for a variable: its name, value, and where the value came from."""
    return {"variable": name, "value": value, "from": ctx.environment.where(name)}


def _int(ctx: Context, name: str) -> tuple[str, IntegerReading] | None:
    """An integer variable's text and how NCCL reads it; None when it is not set."""
    v = ctx.environment.get(name)
    return None if v is None else (v, read_integer(v))


def _p2p_disable(v: str) -> int | None:
    """NCCL_P2P_DISABLE as ``ncclGetLevel`` reads it: plain ``strtol`` (no default on empty)."""
    return strtoll(v)[0]


def int_is(ctx: Context, name: str, test: Any) -> str | None:
    """The text of an integer variable when NCCL's reading of it passes ``test``, else None."""
    got = _int(ctx, name)
    return got[0] if got is not None and got[1].value is not None and test(got[1].value) else None


def env_issue(ctx: Context, name: str, value: str, message: str, **extra: Any) -> Issue:
    """An issue about a variable, its subject ``env:NAME`` and its evidence attached."""
    return Issue(f"env:{name}", message, dict(evidence(ctx, name, value), **extra))


@rule(
    "TD601",
    "nccl-p2p-disabled",
    "error",
)
def nccl_p2p_disabled(ctx: Context) -> Iterator[Issue]:
    """NCCL_P2P_DISABLE reads as 1 (the one value that disables P2P) on a host whose GPUs have NVLink.

    Links that are down count too: the setting keeps NCCL off them once they are repaired.

    NCCL reads the value with ``strtol``: ``1``, ``01`` and ``1abc`` disable P2P; ``true``, ``yes``
    and ``2`` do not (TD620 says so).

    Why it matters: with P2P disabled, NCCL sends all traffic between the GPUs of the node through
    host memory instead of NVLink, at a fraction of the bandwidth.

    How to fix: unset NCCL_P2P_DISABLE (in the job's environment or the NCCL config file that sets
    it).
    """
    v = ctx.environment.get(P2P_DISABLE)
    if v is not None and _p2p_disable(v) == 1 and ctx.has_nvlinks():
        yield env_issue(ctx, P2P_DISABLE, v, f"NCCL_P2P_DISABLE={v} disables P2P on an NVLink host")


@rule(
    "TD602",
    "nccl-p2p-level-loc",
    "error",
)
def nccl_p2p_level_loc(ctx: Context) -> Iterator[Issue]:
    """NCCL_P2P_LEVEL reads as LOC (``LOC``, or ``0`` in the old numbering), which disables P2P, on an NVLink host.

    NCCL ignores the level when NCCL_P2P_DISABLE=1 (TD601 covers that); ``loc`` in lower case is no
    level at all to NCCL (TD620).

    Why it matters: LOC allows P2P between no pair of GPUs, so NCCL stages all traffic of the node
    through host memory instead of NVLink.

    How to fix: unset NCCL_P2P_LEVEL (NCCL picks the right level) or set it to NVL or wider.
    """
    v = ctx.environment.get("NCCL_P2P_LEVEL")
    dis = ctx.environment.get(P2P_DISABLE)
    if v is not None and read_level(v) == "LOC" and (dis is None or _p2p_disable(dis) != 1) and ctx.has_nvlinks():
        yield Issue(
            "env:NCCL_P2P_LEVEL",
            f"NCCL_P2P_LEVEL={v} disables P2P on an NVLink host",
            evidence(ctx, "NCCL_P2P_LEVEL", v),
        )


@rule(
    "TD603",
    "nccl-shm-disabled",
    "warning",
)
def nccl_shm_disabled(ctx: Context) -> Iterator[Issue]:
    """NCCL_SHM_DISABLE reads as 1: intra-node traffic that cannot use P2P goes over the network.

    Why it matters: without shared memory, NCCL sends the traffic between GPUs of one node that
    cannot use P2P through the network stack, far slower than host memory.

    How to fix: unset NCCL_SHM_DISABLE.
    """
    v = int_is(ctx, "NCCL_SHM_DISABLE", lambda n: n == 1)
    if v:
        yield env_issue(ctx, "NCCL_SHM_DISABLE", v, f"NCCL_SHM_DISABLE={v}")


@rule(
    "TD609",
    "nccl-ib-timeout-range",
    "error",
)
def nccl_ib_timeout(ctx: Context) -> Iterator[Issue]:
    """NCCL_IB_TIMEOUT reads as 0 or 32 and above (the verbs timeout is 4.096 us x 2^value, 5 bits).

    The value is read as NCCL reads it: ``abc`` is 0 to NCCL, ``014`` is 12 (octal).

    Why it matters: the timeout field holds 5 bits, so a value outside 1-31 does not mean what it
    says: 0 is an infinite wait to the verbs library, so a lost packet hangs the job instead of
    failing it, and a larger value does not fit the field and gives a timeout nobody chose.

    How to fix: set NCCL_IB_TIMEOUT between 1 and 31 (the default, 20 in current NCCL, suits most
    fabrics), or unset it.
    """
    got = _int(ctx, "NCCL_IB_TIMEOUT")
    if got is None or got[1].value is None:
        return
    v, n = got[0], got[1].value
    if n <= 0 or n >= 32:
        shown = f"{v!r}, which NCCL reads as {n}," if not got[1].clean else str(n)
        yield Issue(
            "env:NCCL_IB_TIMEOUT", f"NCCL_IB_TIMEOUT={shown} is outside 1..31", evidence(ctx, "NCCL_IB_TIMEOUT", v)
        )


@rule(
    "TD610",
    "nccl-debug-setting",
    "warning",
)
def nccl_debug_setting(ctx: Context) -> Iterator[Issue]:
    """A setting NCCL documents as for debugging only is left set (ALGO, PROTO, NTHREADS, ...).

    Why it matters: kept in production they cost speed or stability. Most override what NCCL chooses
    from the topology and the message size (algorithm, protocol, threads, channels, buffer size,
    paths); left in a job script or nccl.conf after the debugging, they hold every later job to one
    choice, which is rarely the fastest.

    How to fix: remove debugging settings from job scripts and nccl.conf once the issue they worked
    around is fixed.
    """
    for name in DEBUG_ONLY:
        v = setting(ctx, name)
        if v is not None and not (name == "NCCL_PROTO" and "LL128" in v.upper() and "^" not in v):
            yield Issue(f"env:{name}", f"{name}={v} is a debugging setting", evidence(ctx, name, v))
    v = setting(ctx, "NCCL_DEBUG")
    if v is not None and v.upper() == "TRACE":
        yield Issue("env:NCCL_DEBUG", "NCCL_DEBUG=TRACE slows every collective", evidence(ctx, "NCCL_DEBUG", v))


@rule(
    "TD611",
    "nccl-ll128-forced",
    "error",
)
def nccl_ll128_forced(ctx: Context) -> Iterator[Issue]:
    """NCCL_PROTO forces the LL128 protocol.

    Why it matters: NCCL enables LL128 only where the platform keeps the ordering guarantees it
    relies on; forcing it elsewhere can corrupt data silently.

    How to fix: unset NCCL_PROTO and let NCCL choose the protocol.
    """
    v = setting(ctx, "NCCL_PROTO")
    if v is not None and "LL128" in v.upper() and "^" not in v:
        yield Issue("env:NCCL_PROTO", f"NCCL_PROTO={v} forces LL128", evidence(ctx, "NCCL_PROTO", v))


@rule(
    "TD612",
    "nccl-ignore-disabled-p2p",
    "warning",
)
def nccl_ignore_disabled_p2p(ctx: Context) -> Iterator[Issue]:
    """NCCL_IGNORE_DISABLED_P2P reads as non-zero: NCCL will not warn when P2P is unexpectedly off.

    Why it matters: the warning is what tells a user that traffic is staged through host memory
    instead of going directly between GPUs; silenced, a slow job shows no reason.

    How to fix: unset NCCL_IGNORE_DISABLED_P2P; if P2P is disabled, find out why (TD301) instead.
    """
    v = int_is(ctx, "NCCL_IGNORE_DISABLED_P2P", lambda n: n != 0)
    if v:
        yield env_issue(ctx, "NCCL_IGNORE_DISABLED_P2P", v, f"NCCL_IGNORE_DISABLED_P2P={v}")


@rule(
    "TD618",
    "nccl-nvls-disabled",
    "info",
    also=("warning",),
)
def nccl_nvls_disabled(ctx: Context) -> Iterator[Issue]:
    """NCCL_NVLS_ENABLE reads as 0 on an NVSwitch host: all_reduce gives up NVLink SHARP.

    Information where NVLS would add something (quiet where it would not), with what it costs: the busbw
    NVLS would add to all_reduce per the topology's model (topology/busbw.py), from the data NVLS moves:
    each GPU sends its buffer into the switch and receives every reduced share, S (1 + 1/n) each way
    against a ring's 2 S (n-1)/n, at NCCL's NVLS efficiency (0.85 on Hopper). On 2 or 3 GPUs that is
    less than the ring gives (nothing is lost; NCCL turns NVLS on for 2 GPUs only from 2.28.7,
    ``transport/nvls.cc``), on 4 a few %, on 8 about a third. Many sites and shared hosts turn NVLS off
    on purpose (multicast objects need the fabric manager and IMEX, and hold GPU memory), so a plain 0
    is a deliberate setting, never a fault. A warning only where the value is malformed: NCCL reads a
    word (``false``, ``off``, even ``true``) or a number with trailing text as 0 or as its leading
    digits, so NVLS may be off (or on) where that was not meant.

    Why it matters: NVLink SHARP lets the NVSwitches reduce data themselves; on many GPUs that
    speeds up all-reduce beyond what a ring reaches, and turned off, the job gives that up.

    How to fix: nothing, where multicast is off on purpose; else leave NCCL_NVLS_ENABLE unset, and
    write it as a plain 0 where it is meant.
    """
    v = setting(ctx, "NCCL_NVLS_ENABLE")
    if v is None or not ctx.has_nvswitch:
        return
    read = read_integer(v)
    if read.value != 0:
        return
    gpus = tuple(g.index for g in ctx.live_gpus)
    ring = next((p.busbw_gbps for p in predict(ctx.snap, ("all_reduce",), gpus)), None)
    nvls = nvls_all_reduce_busbw(ctx.snap, gpus)
    where = f"NCCL_NVLS_ENABLE={v} on an NVSwitch host of {len(gpus)} GPUs"
    if ring is None or nvls is None:
        cost = "what NVLS would add to all_reduce is not modelled here"
    elif nvls <= ring:
        cost = f"NVLS would add nothing to all_reduce here (about {nvls:.0f} GB/s busbw, the ring {ring:.0f})"
    else:
        adds = f"{nvls:.0f} against {ring:.0f}, +{(nvls - ring) / ring:.0%}"
        cost = f"all_reduce gives up about {nvls - ring:.0f} GB/s busbw NVLS would add ({adds})"
    extra: dict[str, Any] = {"gpus": len(gpus)}
    if ring is not None and nvls is not None:
        extra.update(ring_gbps=round(ring, 1), nvls_gbps=round(nvls, 1), nvls_adds_gbps=round(max(0.0, nvls - ring), 1))
    if read.clean:
        if ring is not None and nvls is not None and nvls <= ring:
            return  # a deliberate 0 that costs nothing here is not worth a line
        yield Issue(
            "env:NCCL_NVLS_ENABLE",
            f"{where}, a deliberate setting: {cost}",
            dict(evidence(ctx, "NCCL_NVLS_ENABLE", v), **extra),
        )
        return
    yield Issue(
        "env:NCCL_NVLS_ENABLE",
        f"{where}: {read.why}; NCCL reads it as 0, which turns NVLS off (if that was meant, write 0): {cost}",
        dict(evidence(ctx, "NCCL_NVLS_ENABLE", v), malformed=read.why, **extra),
        severity="warning",
    )


CONF_EVIDENCE_LINES = 3  # a binary or garbled file has thousands of bad lines; the first few say what it is


@rule(
    "TD619",
    "nccl-conf-unreadable",
    "warning",
)
def nccl_conf_unreadable(ctx: Context) -> Iterator[Issue]:
    """An NCCL config file is unreadable, binary or has a line NCCL will not apply, or NCCL_CONF_FILE names no file.

    NCCL reads NCCL_CONF_FILE (or ``~/.nccl.conf`` when it is unset), then /etc/nccl.conf. One
    finding per file: the first problems as evidence, and how many more there are. A line that is
    not an NCCL setting (``NCCL_...=value``) is named by its number and never quoted: the variable
    may name any file (a password file, read by a prolog running as root), and a finding becomes a
    drain reason everyone reads; a recording keeps only the settings' lines.

    Why it matters: NCCL skips a missing file and lines without ``=`` without a word, and keeps
    spaces around ``=`` as part of the name: the settings in them silently do nothing. A file the
    user named that does not exist was meant to do something.

    How to fix: fix the file or the path (NCCL_CONF_FILE); write each setting as NAME=value, with no
    spaces around ``=``.
    """
    by_file: dict[str, list[str]] = {}
    for p in ctx.environment.conf_errors:
        by_file.setdefault(p.path, []).append(p.message)
    for path, messages in by_file.items():
        more = len(messages) - 1
        message = messages[0] + (f" (and {plural(more, 'more problem')} in this file)" if more else "")
        shown = messages[:CONF_EVIDENCE_LINES]
        yield Issue(f"conf:{path}", message, {"path": path, "errors": shown, "more": len(messages) - len(shown)})
