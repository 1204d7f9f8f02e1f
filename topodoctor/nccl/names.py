"""What a job's NCCL makes of the NCCL_* names it was given, judged against the table of what each
release reads (``nccl.variables``): a removed or renamed name, a name no release reads (with the
closest real one), a name another release reads but the job's does not. Plain data in and out:
``check``'s lint (rules/nccl_names.py) and any reader that knows the version (a log's banner, a
framework's NCCL) ask the same question here."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from topodoctor.nccl.variables import (
    DEPRECATED,
    EARLIER,
    NOT_SETTINGS,
    Judged,
    Version,
    judge_as,
    known,
    read_in,
    releases,
    shown,
    table,
)

CLOSE = 0.75  # difflib's ratio from which a known name is offered for a typo


@dataclass(frozen=True)
class NameVerdict:
    """One name the job's NCCL will not read as meant."""

    name: str
    kind: Literal["deprecated", "unknown", "not-in-version"]
    message: str
    suggestion: str | None = None  # the real name meant, for a typo (or the replacement of a removed one)


def not_read(name: str, judged: Judged, job: str = "this job's") -> str | None:
    """Why ``judged``'s NCCL ignores a variable some release reads: added after it, removed before
    it, or read on both sides of it; None when it reads it, when the version is not known, or for a
    name no release reads (``judge_names`` calls those unknown)."""
    v = table().get(name)
    if judged.release is None or judged.version is None:
        return None
    used = f"{job} NCCL {shown(judged.version)}" + (f" ({judged.note})" if judged.note else "")
    if v is None:
        if name in EARLIER:
            return f"{name} was read by NCCL releases before {shown(releases()[0])} only; {used} ignores it"
        return None
    if v.read_by(judged.release):
        return None
    where = " (an example plugin NCCL ships)" if v.plugin else ""
    if all(lo > judged.release for lo, _ in v.releases):
        return f"{name} is read by NCCL from {shown(v.releases[0][0])} on{where}; {used} does not read it yet"
    return f"{name} is read by NCCL {v.span}{where}; {used} ignores it"


def _why_unknown(judged: Judged) -> str:
    first, last = shown(releases()[0]), shown(releases()[-1])
    if judged.version is None:
        return f"no NCCL release {first} - {last} reads it; the job's NCCL version is not known"
    if judged.note.startswith("newer"):
        return (
            f"no NCCL release up to {last} reads it; the job's NCCL {shown(judged.version)} is newer, so it may be new"
        )
    return f"no NCCL release {first} - {last} reads it, nor does the job's NCCL {shown(judged.version)}"


def judge_names(names: Iterable[str], version: Version | None, came: str = "") -> list[NameVerdict]:
    """Every NCCL_* name of ``names`` the job's NCCL (``version``, None when not known; ``came``: where
    the version was read, said in the message) does not read as meant, in the order given."""
    judged = judge_as(version)
    every = known()
    near = sorted(read_in(judged.release) if judged.release is not None else every)
    source = f" (the version from {came})" if came and judged.version is not None else ""
    out: list[NameVerdict] = []
    for name in names:
        if not name.startswith("NCCL_") or name in NOT_SETTINGS:
            continue
        if name in DEPRECATED:
            out.append(NameVerdict(name, "deprecated", f"{name} is removed or renamed: use {DEPRECATED[name]}"))
        elif name not in every:
            close = difflib.get_close_matches(name, near, n=1, cutoff=CLOSE) or difflib.get_close_matches(
                name, sorted(every | set(DEPRECATED)), n=1, cutoff=CLOSE
            )
            hint = f"; did you mean {close[0]}?" if close else ""
            why = _why_unknown(judged)
            out.append(NameVerdict(name, "unknown", f"{name} is not an NCCL variable ({why}){hint}", *close[:1]))
        elif said := not_read(name, judged):
            out.append(NameVerdict(name, "not-in-version", said + source))
    return out
