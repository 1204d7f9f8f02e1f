"""Builders of `nccl-log` findings for settings NCCL cannot honour: a forced algorithm or protocol no operation
has, mixed NIC counts, a value NCCL cannot parse or refuses by name, and a communicator config attribute out of
range (where the value refused is the headers' own default, a library older than the headers). Data in, text out."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from topodoctor.core.text import numbered
from topodoctor.nccl.evidence import Builder, LogContext, Said
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.fixes_usage import named_setting
from topodoctor.nccl.log_signs import two_wheels
from topodoctor.nccl.parse import Event

# nccl.h's NCCL_CONFIG_INITIALIZER sets every attribute to NCCL_CONFIG_UNDEF_INT (INT_MIN) from 2.17 on; 2.14 - 2.16
# set blocking to 1 and took only 0 or 1 (init.cc): this value refused means headers newer than the library
CONFIG_UNDEF_INT = "-2147483648"


def _setting(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    if {"commid", "addrstr", "setting", "setting2", "setting3", "layers"} & f.keys():
        return named_setting(f, ctx)
    if "value" in f or f.get("fused"):
        return _unparsed(f, ctx)
    if f.get("func") or not (f.get("what") or f.get("attr")):
        said = {"NCCL_ALGO": f.get("algo", ""), "NCCL_PROTO": f.get("proto", "")}
        forced = ", ".join(f"{k}={said[k] or ctx.env[k]}" for k in said if said[k] or k in ctx.env)
        # 2.24+ names a forced NCCL_ALGO / NCCL_PROTO in the message, and at INFO NCCL lists what it read:
        # none was forced, so enqueue.cc's ncclInternalError is not a setting's
        if not forced and (f.get("func") or ctx.info):
            return _no_algorithm(f)
        func = f.get("func") or "the operation"
        msg = f"no algorithm/protocol NCCL may use runs {func}" + (f" ({forced})" if forced else "")
        fix = (f"Unset {forced}, or let it include Ring and Simple. " if forced else "") + EXPLANATIONS["TD077"].fix
        return Said("TD077", msg, fix, {"forced": forced})
    if f.get("what"):
        return Said("TD077", f"ranks have different numbers of {f['what']} devices", EXPLANATIONS["TD077"].fix)
    if f.get("attr_value") == CONFIG_UNDEF_INT:
        return Said(
            "TD085",
            f"NCCL refused its own default for config {f.get('attr', '?')} ({CONFIG_UNDEF_INT}, "
            "NCCL_CONFIG_UNDEF_INT): "
            "the program was built with NCCL 2.17 or later headers and loaded a libnccl before 2.17",
            two_wheels(ctx) + EXPLANATIONS["TD085"].fix,
            {"attr": f.get("attr", "")},
        )
    return Said("TD077", f"invalid communicator config value ({f.get('attr', '?')})", EXPLANATIONS["TD077"].fix)


def _unparsed(f: Mapping[str, str], ctx: LogContext) -> Said:
    """A value NCCL could not read at init (ncclInvalidUsage): graph/tuning.cc's parseList reads NCCL_PROTO and
    NCCL_ALGO (``[func:]elem,elem;func:^elem``), graph/topo.cc NCCL_NET_FORCE_MERGE (``nic,nic;nic,nic``)."""
    said = f.get("said", "")
    if f.get("fused"):
        var, value = "NCCL_NET_FORCE_MERGE", ctx.env.get("NCCL_NET_FORCE_MERGE", f["fused"])
        what = (
            f"the group {f['fused']} names a NIC this node does not have"
            if "Only matched" in said
            else f"the group {f['fused']} has more NICs than fuse into one"
            if "too many devices" in said
            else f"NCCL could not fuse the group {f['fused']} into one virtual NIC"
        )
    else:
        value = f.get("value", "")
        named = [k for k in ("NCCL_ALGO", "NCCL_PROTO") if ctx.env.get(k) == value]
        elems = {e.strip().lstrip("^").lower() for e in re.split(r"[;:,]", value)}
        var = (named or ["NCCL_PROTO" if elems & {"ll", "ll128", "simple"} else "NCCL_ALGO"])[0]
        bad = f"an unknown {f.get('part')} {f['token']!r}" if f.get("token") else "an entry after the first, no prefix"
        what = f"NCCL could not read it ({bad})"
    return Said(
        "TD077",
        f"NCCL cannot use {var}={value}: {what}",
        f"Fix or unset {var} (NCCL stops at init on a value it cannot read). " + EXPLANATIONS["TD077"].fix,
        {"variable": var, "value": value},
    )


def _no_algorithm(f: Mapping[str, str]) -> Said:
    """enqueue.cc found no algorithm with neither NCCL_ALGO nor NCCL_PROTO set: its source returns
    ncclInternalError, so the cause is not a setting the log shows."""
    candidates = [
        "a CollNet / SHARP or NVLS path chosen for an operation or datatype it cannot run (NCCL_COLLNET_ENABLE=0, "
        "NCCL_NVLS_ENABLE=0 tell)",
        "NCCL_ALGO / NCCL_PROTO set in a file NCCL reads (/etc/nccl.conf, ~/.nccl.conf) or a tuner plugin",
        "a bug of the release for this operation and datatype (upgrade NCCL)",
    ]
    ranked = numbered(candidates)
    return Said(
        "TD052",
        f"no algorithm/protocol runs {f.get('func', 'the operation')} ({f.get('dtype', '?')}) and no NCCL_ALGO / "
        "NCCL_PROTO was set: "
        "an internal error of NCCL's choice; cause not found",
        f"Candidates, most likely first: {ranked}. Collect next: NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING,ENV "
        "(the cost table and the variables NCCL read). " + EXPLANATIONS["TD052"].fix,
        {"candidates": candidates},
    )


SETTING: dict[str, Builder] = {"invalid-setting": _setting}
