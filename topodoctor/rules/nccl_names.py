"""Which NCCL_* names the job's NCCL reads (TD613, TD614, TD625): removed or renamed variables,
names no NCCL release reads (a typo, with the closest real name), and variables another release of
NCCL reads but the job's does not. Names are judged against the table of what each NCCL release
2.18 - 2.30 reads, from NCCL's own source (``nccl.variables``)."""

from __future__ import annotations

import difflib
from collections.abc import Iterator

from topodoctor.nccl.variables import (
    DEPRECATED,
    NOT_SETTINGS,
    Judged,
    judge_as,
    known,
    not_read,
    parse_version,
    read_in,
    releases,
    shown,
)
from topodoctor.rules.context import Context
from topodoctor.rules.nccl_env import evidence
from topodoctor.rules.registry import Issue, rule

# The image variable NVIDIA's CUDA and framework containers set to the NCCL they ship ("2.28.3-1").
IMAGE_VERSION = "NCCL_VERSION"


def nccl_version(ctx: Context) -> tuple[Judged, str]:
    """The NCCL version the job runs, as the table judges it, and where the version came from: the
    NCCL the measured collectives ran (torch's), else the image's NCCL_VERSION; not known otherwise."""
    if ctx.collectives is not None and (v := parse_version(ctx.collectives.nccl_version or "")):
        return judge_as(v), "the NCCL the measured collectives ran"
    raw = ctx.environment.env.get(IMAGE_VERSION)
    if raw and (v := parse_version(raw)):
        return judge_as(v), f"the image's {IMAGE_VERSION}={raw}"
    return judge_as(None), ""


def _settings(ctx: Context) -> list[str]:
    """The NCCL_* names set, in the environment or a config file, that are NCCL settings."""
    return [n for n in ctx.environment.names() if n.startswith("NCCL_") and n not in NOT_SETTINGS]


@rule(
    "TD613",
    "nccl-deprecated-variable",
    "warning",
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
)
def nccl_unknown(ctx: Context) -> Iterator[Issue]:
    """An NCCL_* variable no NCCL release reads is set (often a typo); the closest real name is offered.

    The names are those NCCL's source reads at every release 2.18.1 - 2.30.7 (NCCL_PARAM, its
    ``ncclGetEnv`` / ``getenv`` sites, the plugins NCCL ships), older releases' and removed names.
    The closest name is sought first among those the job's NCCL reads, where its version is known
    (the NCCL the measured collectives ran, or the image's NCCL_VERSION); the message says when it is
    not known, or when the job's NCCL is newer than the table (the name may then be new).

    Why it matters: NCCL ignores names it does not know, silently: the setting meant does not take
    effect.

    How to fix: check the spelling against the NCCL documentation; the message offers the closest
    real name.
    """
    judged, came = nccl_version(ctx)
    names = known()
    first, last = shown(releases()[0]), shown(releases()[-1])
    if judged.version is None:
        why = f"no NCCL release {first} - {last} reads it; the job's NCCL version is not known"
    elif judged.note.startswith("newer"):
        newer = shown(judged.version)
        why = f"no NCCL release up to {last} reads it; the job's NCCL {newer} is newer, so it may be new"
    else:
        why = f"no NCCL release {first} - {last} reads it, nor does the job's NCCL {shown(judged.version)}"
    near = sorted(read_in(judged.release) if judged.release is not None else names)
    for name in _settings(ctx):
        if name in names:
            continue
        close = difflib.get_close_matches(name, near, n=1, cutoff=0.75) or difflib.get_close_matches(
            name, sorted(names | set(DEPRECATED)), n=1, cutoff=0.75
        )
        hint = f"; did you mean {close[0]}?" if close else ""
        ev = dict(evidence(ctx, name, ctx.environment.get(name) or ""), suggestion=close[0] if close else None)
        if judged.version is not None:
            ev.update(nccl_version=shown(judged.version), version_from=came)
        yield Issue(f"env:{name}", f"{name} is not an NCCL variable ({why}){hint}", ev)


@rule(
    "TD625",
    "nccl-variable-not-in-version",
    "warning",
)
def nccl_not_in_version(ctx: Context) -> Iterator[Issue]:
    """A variable some NCCL release reads is set, but the job's NCCL does not read it: added after it,
    removed before it, or read only on either side of it.

    The job's NCCL version is the one its measured collectives ran, else the image's NCCL_VERSION
    (NVIDIA's containers set it to the NCCL they ship; a pip-installed framework may bundle another,
    which the evidence names). The releases that read each variable come from NCCL's own source at
    every release tag 2.18.1 - 2.30.7 (``nccl.variables``); a version between two releases is judged
    as the one before it, a newer one as the last. Without a known version nothing is said (every
    release is judged at once: TD614 names the names no release reads).

    Why it matters: NCCL ignores a variable it does not read, silently: the setting does nothing with
    this NCCL, though it did (or will) with another, and the job runs without what it was meant to
    change.

    How to fix: use the variable the job's NCCL reads for the same purpose (NCCL's release notes
    name it), upgrade NCCL to a release that reads it, or remove it.
    """
    judged, came = nccl_version(ctx)
    if judged.release is None or judged.version is None:
        return
    for name in _settings(ctx):
        if name in DEPRECATED:
            continue  # TD613 says what replaces it
        said = not_read(name, judged)
        if said is None:
            continue
        v = ctx.environment.get(name) or ""
        yield Issue(
            f"env:{name}",
            f"{said} (the version from {came})",
            dict(evidence(ctx, name, v), nccl_version=shown(judged.version), version_from=came),
        )
