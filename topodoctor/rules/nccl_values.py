"""NCCL values read the way NCCL reads them (TD620, TD623, TD624): a value NCCL takes differently
from how it is written, an integer outside the domain NCCL's source gives it, an algorithm or
protocol token NCCL's parser refuses."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.nccl.choices import ALGORITHMS, PROTOCOLS
from topodoctor.nccl.values import (
    CHOICES,
    DOMAINS,
    LEVEL,
    LEVEL_NAMES,
    OLD_LEVELS,
    P2P_DISABLE,
    ZERO_MEANS,
    list_problem,
    read_integer,
    read_level,
)
from topodoctor.nccl.variables import integers
from topodoctor.rules.context import Context
from topodoctor.rules.nccl_env import _int, _p2p_disable, env_issue, setting
from topodoctor.rules.registry import Issue, rule


@rule(
    "TD620",
    "nccl-value-misread",
    "warning",
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
    if name in integers():
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
