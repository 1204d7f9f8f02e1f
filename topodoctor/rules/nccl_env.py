"""NCCL and CUDA environment rules (TD6xx), read from the process environment and NCCL's
config files as the probe captured them. A setting in the environment wins over a file, as in
NCCL itself; values are read the way NCCL's own parsers read them (``nccl_vars``)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Any

from topodoctor.core.text import plural
from topodoctor.nccllog.choices import ALGORITHMS, PROTOCOLS
from topodoctor.rules.context import Context
from topodoctor.rules.nccl_vars import (
    CHOICES,
    DEBUG_ONLY,
    DEPRECATED,
    DOMAINS,
    INTEGER,
    KNOWN,
    LEVEL,
    LEVEL_NAMES,
    NOT_SETTINGS,
    OLD_LEVELS,
    P2P_DISABLE,
    ZERO_MEANS,
    Reading,
    list_problem,
    read_integer,
    read_level,
    strtoll,
)
from topodoctor.rules.registry import Issue, rule


def setting(ctx: Context, name: str) -> str | None:
    """A variable's value as NCCL would see it (environment over config files), stripped; None if unset."""
    v = ctx.environment.get(name)
    return v.strip() if v is not None else None


def evidence(ctx: Context, name: str, value: str) -> dict[str, str]:
    """A finding's evidence for a variable: its name, value, and where the value came from."""
    return {"variable": name, "value": value, "from": ctx.environment.where(name)}


def _int(ctx: Context, name: str) -> tuple[str, Reading] | None:
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
    fix="Unset NCCL_P2P_DISABLE: on an NVLink host it sends all GPU traffic through host memory.",
)
def nccl_p2p_disabled(ctx: Context) -> Iterator[Issue]:
    """NCCL_P2P_DISABLE reads as 1 (the one value that disables P2P) on a host whose GPUs have NVLink.

    NCCL reads the value with ``strtol``: ``1``, ``01`` and ``1abc`` disable P2P; ``true``, ``yes``
    and ``2`` do not (TD620 says so).

    Why it matters: with P2P disabled, NCCL sends all traffic between the GPUs of the node through
    host memory instead of NVLink, at a fraction of the bandwidth.

    How to fix: unset NCCL_P2P_DISABLE (in the job's environment or the NCCL config file that sets
    it).
    """
    v = ctx.environment.get(P2P_DISABLE)
    if v is not None and _p2p_disable(v) == 1 and ctx.has_nvlink:
        yield env_issue(ctx, P2P_DISABLE, v, f"NCCL_P2P_DISABLE={v} disables P2P on an NVLink host")


@rule(
    "TD602",
    "nccl-p2p-level-loc",
    "error",
    fix="Unset NCCL_P2P_LEVEL (NCCL picks the right level) or set it to NVL or wider.",
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
    if v is not None and read_level(v) == "LOC" and (dis is None or _p2p_disable(dis) != 1) and ctx.has_nvlink:
        yield Issue(
            "env:NCCL_P2P_LEVEL",
            f"NCCL_P2P_LEVEL={v} disables P2P on an NVLink host",
            evidence(ctx, "NCCL_P2P_LEVEL", v),
        )


@rule(
    "TD603",
    "nccl-shm-disabled",
    "warning",
    fix="Unset NCCL_SHM_DISABLE: without shared memory NCCL uses the network between GPUs of one node.",
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
    fix="Set NCCL_IB_TIMEOUT between 1 and 31 (the default, 20 in current NCCL, suits most fabrics), or unset it.",
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
    fix="Remove debugging settings from job scripts and nccl.conf once the issue they worked around is fixed.",
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
    fix="Unset NCCL_PROTO. NCCL enables LL128 only where the platform keeps its ordering guarantees; forcing "
    "it elsewhere can corrupt data silently.",
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
    fix="Unset NCCL_IGNORE_DISABLED_P2P; if P2P is disabled, find out why (TD301) instead.",
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
    "TD613",
    "nccl-deprecated-variable",
    "warning",
    fix="Replace the variable as the message says; NCCL ignores removed ones silently.",
)
def nccl_deprecated(ctx: Context) -> Iterator[Issue]:
    """A removed or renamed NCCL variable is set: it has no effect (or a new name).

    Why it matters: NCCL ignores removed variables silently, so the setting someone relied on does
    nothing.

    How to fix: replace the variable as the message says (by its new name), or remove it.
    """
    for name in ctx.environment.names():
        if name in DEPRECATED:
            yield Issue(
                f"env:{name}",
                f"{name} is removed or renamed: use {DEPRECATED[name]}",
                evidence(ctx, name, ctx.environment.get(name) or ""),
            )


@rule(
    "TD614",
    "nccl-unknown-variable",
    "warning",
    fix="Check the spelling against the NCCL documentation; NCCL ignores names it does not know.",
)
def nccl_unknown(ctx: Context) -> Iterator[Issue]:
    """An NCCL_* variable NCCL does not know is set (often a typo); the closest real name is offered.

    Why it matters: NCCL ignores names it does not know, silently: the setting meant does not take
    effect.

    How to fix: check the spelling against the NCCL documentation; the message offers the closest
    real name.
    """
    for name in ctx.environment.names():
        if name.startswith("NCCL_") and name not in KNOWN | NOT_SETTINGS and name not in DEPRECATED:
            close = difflib.get_close_matches(name, sorted(KNOWN | set(DEPRECATED)), n=1, cutoff=0.75)
            hint = f"; did you mean {close[0]}?" if close else ""
            yield Issue(
                f"env:{name}",
                f"{name} is not an NCCL variable{hint}",
                dict(evidence(ctx, name, ctx.environment.get(name) or ""), suggestion=close[0] if close else None),
            )


@rule(
    "TD618",
    "nccl-nvls-disabled",
    "warning",
    fix="NVLink SHARP (NVLS) speeds up all-reduce on NVSwitch hosts; leave NCCL_NVLS_ENABLE unset unless it "
    "is off on purpose (shared hosts, known driver issues).",
)
def nccl_nvls_disabled(ctx: Context) -> Iterator[Issue]:
    """NCCL_NVLS_ENABLE reads as 0 on an NVSwitch host: a warning, never a failure (it may be on purpose).

    NCCL reads words as 0, so ``false`` and ``off`` turn NVLS off too.

    Why it matters: NVLink SHARP (NVLS) lets the NVSwitches reduce data themselves, which speeds up
    all-reduce on NVSwitch hosts; turned off, the job gives that up.

    How to fix: leave NCCL_NVLS_ENABLE unset unless it is off on purpose (shared hosts, known driver
    issues).
    """
    v = int_is(ctx, "NCCL_NVLS_ENABLE", lambda n: n == 0)
    if v is not None and ctx.has_nvswitch:
        yield Issue(
            "env:NCCL_NVLS_ENABLE", f"NCCL_NVLS_ENABLE={v} on an NVSwitch host", evidence(ctx, "NCCL_NVLS_ENABLE", v)
        )


CONF_EVIDENCE_LINES = 3  # a binary or garbled file has thousands of bad lines; the first few say what it is


@rule(
    "TD619",
    "nccl-conf-unreadable",
    "warning",
    fix="Fix the file or the path: NCCL skips a file it cannot open and lines it cannot parse, silently.",
)
def nccl_conf_unreadable(ctx: Context) -> Iterator[Issue]:
    """An NCCL config file is unreadable, binary or has a line NCCL will not apply, or NCCL_CONF_FILE names no file.

    NCCL reads NCCL_CONF_FILE (or ``~/.nccl.conf`` when it is unset), then /etc/nccl.conf. One
    finding per file: the first problems as evidence, and how many more there are.

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


@rule(
    "TD620",
    "nccl-value-misread",
    "warning",
    fix="Write the value NCCL expects: integer variables take plain decimal integers (0 or 1 for switches), "
    "levels take LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB or SYS in capitals.",
)
def nccl_value_misread(ctx: Context) -> Iterator[Issue]:
    """NCCL reads a variable's value differently from how it is written, or ignores it.

    NCCL parses integer variables with ``strtoll``: ``NCCL_P2P_DISABLE=true`` is 0 and leaves P2P
    on, ``1abc`` is 1, ``010`` is 8, an empty value keeps the default. Level variables
    (NCCL_P2P_LEVEL, NCCL_NET_GDR_LEVEL) must be a level name in capitals or a number; any other
    value is ignored, as is an unknown choice for NCCL_DEBUG, NCCL_SOCKET_FAMILY or
    NCCL_LAUNCH_MODE.

    Why it matters: the job runs with a setting other than the one written, without a warning: a
    switch meant to be on is off, a level meant to limit P2P does nothing.

    How to fix: write the value NCCL expects: integer variables take plain decimal integers (0 or 1
    for switches), levels take LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB or SYS in capitals.
    """
    for name in ctx.environment.names():
        v = ctx.environment.get(name) or ""
        message = _misread(name, v)
        if message:
            yield env_issue(ctx, name, v, message)


def _misread(name: str, v: str) -> str | None:
    """What NCCL makes of ``name=v`` when that is not what it says; None when it reads as written."""
    if name == P2P_DISABLE:
        n = _p2p_disable(v)
        r = read_integer(v)
        if n is None:  # strtol saturates; NCCL compares the result with 1
            return f"NCCL reads {name}={v!r} as the largest integer; only 1 disables P2P, so P2P stays on"
        if r.clean and n in (0, 1):
            return None
        why = f" ({r.why})" if not r.clean else ""
        return (
            f"NCCL reads {name}={v!r} as {n}{why}; only 1 disables P2P, so P2P stays on"
            if n != 1
            else (f"NCCL reads {name}={v!r} as 1{why}: P2P is disabled")
        )
    if name in INTEGER:
        r = read_integer(v)
        if r.clean:
            return None
        shown = "its default" if r.value is None else str(r.value)
        effect = f": {ZERO_MEANS[name]}" if r.value == 0 and name in ZERO_MEANS else ""
        return f"NCCL reads {name}={v!r} as {shown} ({r.why}){effect}"
    if name in LEVEL:
        return _misread_level(name, v)
    if name in CHOICES:
        values, exact, fallback = CHOICES[name]
        if (v if exact else v.upper()) not in values:
            return f"{name}={v!r} is not one of {', '.join(values)}: {fallback}"
    return None


def _misread_level(name: str, v: str) -> str | None:
    level = read_level(v)
    if level is None:
        hint = ""
        if v.strip().upper() in LEVEL_NAMES:
            hint = f" (names are case-sensitive and unpadded: {v.strip().upper()})"
        elif v.strip().upper() == "NODE":
            hint = " (NODE is nvidia-smi's class; NCCL's nearest level is PHB)"
        return (
            f"NCCL ignores {name}={v!r}: not one of {', '.join(LEVEL_NAMES)} or 0-{len(OLD_LEVELS) - 1}{hint}; "
            "NCCL picks the level itself"
        )
    if v in LEVEL_NAMES or read_integer(v).clean:
        return None
    return f"NCCL reads {name}={v!r} as {level} (the old numbering, up to the first non-digit)"


@rule(
    "TD623",
    "nccl-value-out-of-domain",
    "error",
    fix="Set the variable to a value in its domain (the message names it), or unset it to get NCCL's default.",
)
def nccl_value_out_of_domain(ctx: Context) -> Iterator[Issue]:
    """An integer NCCL setting reads as a value outside its domain (NCCL_CROSS_NIC=7, NCCL_IB_RETRY_CNT=9).

    The domains come from NCCL's source (src/graph/search.cc, src/transport/net_ib/connect.cc,
    src/transport/nvls.cc, src/graph/tuning.cc, src/graph/paths.cc); values are read as NCCL's
    strtoll reads them.

    Why it matters: NCCL does not check these: a value outside the field it lands in is truncated by
    the verbs library or falls through NCCL's switches, so the job runs with a setting nobody chose.

    How to fix: set the variable to a value in its domain (the message names it), or unset it to get
    NCCL's default.
    """
    for name, (low, high, meaning) in DOMAINS.items():
        got = _int(ctx, name)
        if got is None or got[1].value is None:
            continue
        v, n = got[0], got[1].value
        if not low <= n <= high:
            shown = str(n) if got[1].clean else f"{v!r} (NCCL reads {n})"
            yield env_issue(
                ctx, name, v, f"{name}={shown} is outside {low}..{high} ({meaning})", domain=[low, high], read=n
            )


@rule(
    "TD624",
    "nccl-algo-proto-unknown",
    "error",
    fix="Use NCCL's own names: NCCL_ALGO from Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT; "
    "NCCL_PROTO from LL, LL128, Simple; optionally ^ to exclude and func: prefixes (allreduce:tree;broadcast:ring). "
    "Better, unset them: both are for debugging.",
)
def nccl_algo_proto_unknown(ctx: Context) -> Iterator[Issue]:
    """NCCL_ALGO or NCCL_PROTO holds a token NCCL does not know: every communicator fails to init.

    Names are compared case-blind.

    Why it matters: NCCL parses both lists when a communicator is created (tuning.cc, parseList) and
    refuses an unknown algorithm, protocol or function prefix with "invalid usage": the job dies at
    its first collective.

    How to fix: use NCCL's own names: NCCL_ALGO from Tree, Ring, CollNetDirect, CollNetChain, NVLS,
    NVLSTree, PAT; NCCL_PROTO from LL, LL128, Simple; optionally ^ to exclude and func: prefixes
    (allreduce:tree;broadcast:ring). Better, unset them: both are for debugging.
    """
    for name, tokens in (("NCCL_ALGO", ALGORITHMS), ("NCCL_PROTO", PROTOCOLS)):
        v = setting(ctx, name)
        if v is None:
            continue
        problem = list_problem(v, tokens)
        if problem is not None:
            yield env_issue(ctx, name, v, f"{name}={v}: {problem}; NCCL refuses it at init", valid=list(tokens))
