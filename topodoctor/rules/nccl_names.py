"""Which NCCL_* names the job's NCCL reads (TD613, TD614, TD625): removed or renamed variables,
names no NCCL release reads (a typo, with the closest real name), and variables another release of
NCCL reads but the job's does not. Names are judged against the table of what each NCCL release
2.18 - 2.30 reads, from NCCL's own source (``nccl.variables``)."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.nccl.names import NameVerdict, judge_names
from topodoctor.nccl.variables import Judged, judge_as, parse_version, shown
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
        return judge_as(v), f"the image's {IMAGE_VERSION}={raw}; a framework may bundle another NCCL"
    return judge_as(None), ""


def _verdicts(ctx: Context, kind: str) -> Iterator[tuple[NameVerdict, dict[str, object]]]:
    """The names set (environment or config file) the job's NCCL will not read as meant, of one kind,
    each with its evidence."""
    judged, came = nccl_version(ctx)
    for v in judge_names(ctx.environment.names(), judged.version, came):
        if v.kind != kind:
            continue
        ev: dict[str, object] = dict(evidence(ctx, v.name, ctx.environment.get(v.name) or ""))
        if kind == "unknown":
            ev["suggestion"] = v.suggestion
        if judged.version is not None and kind != "deprecated":
            ev.update(nccl_version=shown(judged.version), version_from=came)
        yield v, ev


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
    for v, ev in _verdicts(ctx, "deprecated"):
        yield Issue(f"env:{v.name}", v.message, ev)


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
    for v, ev in _verdicts(ctx, "unknown"):
        yield Issue(f"env:{v.name}", v.message, ev)


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
    for v, ev in _verdicts(ctx, "not-in-version"):
        yield Issue(f"env:{v.name}", v.message, ev)
