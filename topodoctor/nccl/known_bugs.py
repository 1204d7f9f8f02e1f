"""Known bugs of NCCL releases: the versions that have one, the message it logs, the release that
fixed it, where that is said (NCCL's release notes, the commit of the release tag, the issue
thread where a maintainer settled it) and the workaround where one is known. A log whose NCCL
version falls in a bug's range and that shows its message gets "a known bug of 2.x.y, fixed in
2.x.z: upgrade NCCL" first (TD083), named as the cause only where the message is the bug's own (its
site, its words). Where the message is one many causes print (an internal error, a CUDA failure, the
topology search's fallback, any failure of NCCL 1.x), the bug is the first of the candidates, beside
the other causes of that message and what tells them apart: the release that fixed it. Data and one
matcher (the table is ``nccl.known_bugs_table``); no I/O."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace

from topodoctor.model.findings import Finding
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.known_bugs_table import KNOWN_BUGS, KnownBug, Version
from topodoctor.nccl.logfile import LogFile, running_versions


def _parse(v: str) -> Version | None:
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", v)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def matching(
    versions: Iterable[str], messages: Iterable[tuple[str, str, str]], unexplained: bool = True
) -> list[tuple[KnownBug, str, int, bool]]:
    """The known bugs a log shows: (bug, the version it runs, the index of the first message
    that shows it, whether that message is generic) for each bug whose range holds a version of
    ``versions`` and whose symptom one of ``messages`` ((text, NCCL source file, its line)) prints; its weak
    symptom counts only where the log is otherwise ``unexplained``, and is always generic. A log
    naming two NCCL versions is matched on each."""
    parsed = {v.split("+")[0]: p for v in versions if (p := _parse(v))}
    msgs = list(messages)
    out = []
    for bug in KNOWN_BUGS:
        running = next((v for v, p in parsed.items() if bug.first <= p <= bug.last), None)
        generic = bug.generic
        if running is None and not parsed:
            running = site[2] if (site := _site_of(bug, msgs)) else None
            # a line number would name the release, unless the bug's releases print it at that line too
            bare = any((not at or at in bug.printed_at) and bug.symptom.search(t) for t, _, at in msgs)
            if running is None and bug.unversioned and bare:  # a candidate: which release runs, the log does not say
                span = ".".join(map(str, bug.first)) + " - " + ".".join(map(str, bug.last))
                running, generic = f"{span} if the job runs one of them (the log names no version)", True
        if running is None:
            continue
        shows = [i for i, (t, src, at) in enumerate(msgs) if _shows(bug, bug.symptom, t, src, at)]
        if not shows and bug.weak is not None and unexplained:
            shows = [i for i, (t, src, at) in enumerate(msgs) if _shows(bug, bug.weak, t, src, at)]
            generic = True
        if shows:
            out.append((bug, running, shows[0], generic))
    return out


def _site_of(bug: KnownBug, msgs: Iterable[tuple[str, str, str]]) -> tuple[str, str, str] | None:
    """The bug's site (file, line, releases) at which a message of ``msgs`` ((text, file, line)) shows the symptom:
    only those releases print it there, which names the release of a log without a version banner."""
    for text, src, at in msgs:
        for site in bug.sites:
            if site[1] in (at, "*") and src.endswith(site[0]) and bug.symptom.search(text):
                return site
    return None


def _shows(bug: KnownBug, symptom: re.Pattern[str], text: str, src: str, at: str = "") -> bool:
    """The symptom in ``text``, printed by the bug's file (at its lines); a generic bug's symptom pasted without any
    file (torch's Last error) may be it too, as a candidate."""
    if not symptom.search(text) or (bug.lines and at not in bug.lines):
        return False
    return not bug.source or src.endswith(bug.source) or bug.source in text or (bug.generic and not src)


def _platform_shown(bug: KnownBug, files: Sequence[LogFile]) -> bool:
    """Whether the logs name a GPU the bug needs (always, for a bug of any GPU)."""
    return bug.needs is None or any(bug.needs.search(g) for f in files for g in f.gpu_names)


def _run_shown(bug: KnownBug, files: Sequence[LogFile]) -> bool:
    """Whether the logs show the nccl-tests run a bug needs (always, for a bug of any run)."""
    if bug.run is None:
        return True
    op, least, gpus = bug.run
    return any(f.tests.op == op and f.tests.max_bytes >= least and f.tests.gpus_per_process >= gpus for f in files)


def _named(bug: KnownBug, running: str) -> str:
    on = f" on {bug.platform}" if bug.platform else ""
    if bug.first[0] == 1:
        return f"NCCL {running}, replaced by {bug.fixed_in}: upgrade NCCL ({bug.what})"
    return f"a known bug of NCCL {running}{on}, fixed in {bug.fixed_in}: upgrade NCCL ({bug.what})"


def _lead_causes(lead: Finding | None, bug: KnownBug) -> list[str]:
    """The causes the message's own finding names (its candidates, its likely causes, else its
    message), without the bug itself."""
    if lead is None or lead.code == "TD083":
        return []
    ev = lead.evidence
    listed = ev.get("candidates") or ev.get("likely_causes")
    said = (
        [str(c) for c in listed]
        if isinstance(listed, list)
        else [f"another cause of the message, which the log does not single out ({lead.code}: {lead.message[:120]})"]
    )
    return [c for c in said if bug.fixed_in not in c and not _said_already(c, bug.others)]


def _said_already(cause: str, others: Sequence[str]) -> bool:
    """Whether one of ``others`` holds every word of ``cause`` (the lead's short form of the same cause)."""
    words = [w for w in re.findall(r"[a-z0-9_]{3,}", cause.lower())]
    return any(all(w in o.lower() for w in words) for o in others)


def known_bug_findings(
    files: Sequence[LogFile], failed: bool, unexplained: bool = True, lead: Finding | None = None
) -> list[Finding]:
    """TD083 for each known bug the logs show in a run that ``failed`` (or whose message alone says
    it fails; a weak sign only where the log is otherwise ``unexplained``): the version, the
    release that fixed it, the workaround and where that is said; the evidence is the first line
    that shows it. Where the message is generic the bug is the first candidate, then the bug's
    other causes and those of ``lead`` (the message's own finding), with what tells them apart."""
    events = [e for f in files for e in f.events]
    texts = [(e.fields.get("said") or e.text, e.source, e.fields.get("at", "")) for e in events]
    env = {k for f in files for k in f.env} | {"NCCL_TOPO_FILE" for f in files if f.topo_file}
    out = []
    for bug, running, i, generic in matching((v for f in files for v in running_versions(f)), texts, unexplained):
        if not (failed or bug.alone):
            continue
        if not _platform_shown(bug, files) or not _run_shown(bug, files):
            continue  # the bug's platform or run is not the log's: its message is the other causes'
        if bug.first[0] == 1 and not unexplained and not any(running_versions(f) for f in files):
            continue  # NCCL 1.x told by its WARN's file alone: a cause its message states comes first
        shown = any(v in env for v in bug.settings)  # the log's own setting: its causes before the bug's others
        ev = events[i]
        named = _named(bug, running)
        until = f"Until then: {bug.workaround}. " if bug.workaround else ""
        site = None if any(running_versions(f) for f in files) else _site_of(bug, texts)
        if not any(f.versions for f in files) and any(f.said_versions for f in files):  # the reporter's words name it
            until += f"NCCL's banner is not in the log: the text names NCCL {running}. "
        if site:  # no banner: the release is the one whose source prints the message at the WARN's line
            at = "its words are" if site[1] == "*" else f"{site[0]}:{site[1]} is"
            until += f"The log names no NCCL version: {at} this WARN's in NCCL {site[2]} alone. "
        evidence: dict[str, object] = {"file": ev.file, "line": ev.line_no, "text": ev.text}
        if ev.rank is not None:
            evidence["rank"] = ev.rank
        if generic or shown:
            rest = [*_lead_causes(lead, bug), *bug.others] if shown else [*bug.others, *_lead_causes(lead, bug)]
            cands = list(dict.fromkeys([named, *rest]))
            listed = "; ".join(f"({n}) {c}" for n, c in enumerate(cands, 1))
            message = f"{named}; or another cause of the same message: candidates"
            fix = (
                f"The message is not the bug's alone; candidates, most likely first: {listed}. To tell them apart: "
                f"{bug.tells}; upgrade NCCL to {bug.fixed_in} or later. {until}"
            )
            evidence["cause"] = {"what": bug.what, "confidence": "candidates"}
            evidence["candidates"] = cands
        else:
            message = named
            fix = f"Upgrade NCCL to {bug.fixed_in} or later. {until}"
            evidence["cause"] = {"what": bug.what, "confidence": "known bug of the version"}
        evidence |= {"nccl_version": running, "fixed_in": bug.fixed_in, "reference": bug.reference}
        e = EXPLANATIONS["TD083"]
        out.append(
            Finding(
                "TD083", e.name, e.severity, f"nccl-{running}", message, fix + f"Source: {bug.reference}.", evidence
            )
        )
    return out + _on_gpus(files, {f.evidence.get("nccl_version") for f in out})


def _on_gpus(files: Sequence[LogFile], said: set[object]) -> list[Finding]:
    """TD083 for a bug every run of its releases hits on the GPUs the log names, message or none."""
    out = []
    gpus = [g for f in files for g in f.gpu_names]
    parsed = [(v.split("+")[0], p) for f in files for v in running_versions(f) if (p := _parse(v))]
    for bug in KNOWN_BUGS:
        named = [g for g in gpus if bug.gpus is not None and bug.gpus.search(g)]
        running = next((v for v, p in parsed if bug.first <= p <= bug.last), None)
        if not named or running is None or running in said:
            continue
        e = EXPLANATIONS["TD083"]
        cause = {"what": bug.what, "confidence": "known bug of the version"}
        evidence: dict[str, object] = {"gpus": list(dict.fromkeys(named)), "nccl_version": running, "cause": cause}
        evidence |= {"fixed_in": bug.fixed_in, "reference": bug.reference}
        message = f"{_named(bug, running)}: the log names {named[0]}"
        fix = f"Upgrade NCCL to {bug.fixed_in} or later. Source: {bug.reference}."
        out.append(Finding("TD083", e.name, e.severity, f"nccl-{running}", message, fix, evidence))
    return out


def version_candidates(files: Sequence[LogFile]) -> list[str]:
    """For logs that name no NCCL version: the known bugs whose message they show, each as a candidate
    in words ("NCCL 2.19.0 - 2.19.3: ..., fixed in 2.19.4"); [] when a version is known (then
    ``known_bug_findings`` decides) or no bug's message is shown. NCCL 1.x's entry needs a version."""
    if any(running_versions(f) for f in files):
        return []
    texts = [(e.fields.get("said") or e.text, e.source, e.fields.get("at", "")) for f in files for e in f.events]
    out = []
    for bug in KNOWN_BUGS:
        if bug.first[0] == 1 or bug.versioned or not _run_shown(bug, files):
            continue
        signs = [bug.symptom] + ([bug.weak] if bug.weak is not None else [])
        if any(_shows(bug, sign, t, s, at) for sign in signs for t, s, at in texts):
            first, last = ".".join(map(str, bug.first)), ".".join(map(str, bug.last))
            span = first if first == last else f"{first} - {last}"
            on = "" if _platform_shown(bug, files) or not bug.platform else f" on {bug.platform}"
            out.append(f"if the job runs NCCL {span}{on}: a known bug ({bug.what}), fixed in {bug.fixed_in}")
    return out


def with_bug_candidates(lead: Finding, files: Sequence[LogFile]) -> Finding:
    """A cause-not-found finding of logs without a version banner, with the known bugs its message is
    the sign of: which applies depends on the version the job runs, which the logs do not say."""
    new = [b for b in version_candidates(files) if b.rsplit("fixed in ", 1)[-1] not in lead.message]
    if not new:
        return lead
    fix = (
        f"The log names no NCCL version; {'; '.join(new)}: check it (`python -c 'import torch; "
        f"print(torch.cuda.nccl.version())'`, the banner at NCCL_DEBUG=VERSION) and upgrade if so. {lead.fix}"
    )
    return replace(lead, fix=fix, evidence={**lead.evidence, "bug_candidates": new})
