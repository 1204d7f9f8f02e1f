"""How NCCL reads its variables' values: integers, path levels, choices, algorithm lists, and the
domains its source gives some integers. Which variables exist, in which releases, is
``nccl.variables``'s part.

Read from NCCL's own source (2.2x): ``src/misc/param.cc`` (``NCCL_PARAM`` integers go through
``strtoll(value, NULL, 0)``; an empty value or one out of range leaves the default),
``src/graph/paths.cc`` (``ncclGetLevel``: NCCL_P2P_DISABLE through ``strtol`` and only 1
disables; the level names compared case-sensitively, else a value starting with a digit in
the old numbering), ``src/misc/socket.cc`` and ``src/init.cc`` (the string choices). The
point is to lint a value as NCCL will read it, not as a person would.
"""

from __future__ import annotations

from dataclasses import dataclass

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
class IntegerReading:
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


def read_integer(text: str) -> IntegerReading:
    """An NCCL_PARAM value as ``ncclLoadParam`` reads it."""
    if text == "":
        return IntegerReading(None, False, "it is empty, so NCCL keeps its default")
    n, rest, octal = strtoll(text)
    if n is None:
        return IntegerReading(None, False, "it is out of range, so NCCL keeps its default")
    if rest.strip() == text.strip():
        return IntegerReading(n, False, "it is not a number; NCCL parses integers only")
    if rest.strip():
        return IntegerReading(n, False, f"NCCL stops at {rest.strip()[:20]!r}")
    if octal:
        return IntegerReading(n, False, "a leading 0 makes it octal")
    return IntegerReading(n, True)


def read_level(text: str) -> str | None:
    """NCCL_P2P_LEVEL / NCCL_NET_GDR_LEVEL as ``ncclGetLevel`` reads them; None when ignored."""
    if text in LEVEL_NAMES:
        return text
    if text[:1] in set("0123456789") and text[:1]:
        n, _, _ = strtoll(text)
        return OLD_LEVELS[min(n if n is not None else len(OLD_LEVELS), len(OLD_LEVELS) - 1)]
    return None
