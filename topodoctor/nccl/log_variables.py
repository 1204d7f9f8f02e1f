"""The NCCL_* variables a log shows set, judged against the log's own NCCL version banner (TD088):
a removed or renamed name, a name no NCCL release reads (a typo, with the closest real name), a
name other releases read but not the log's. The same judgement as ``check``'s lint
(``nccl.names.judge_names`` over ``nccl.variables``, NCCL's own source per release), with the
version read from the log instead of the host. Plain data in, findings out."""

from __future__ import annotations

from collections.abc import Sequence

from topodoctor.model.findings import Finding
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.logfile import LogFile
from topodoctor.nccl.names import judge_names
from topodoctor.nccl.variables import Version, parse_version, releases, shown

CODE = "TD088"
CAME = "the log's NCCL version banner"


def _version(f: LogFile) -> Version | None:
    """The one NCCL version a file names; None for none, or for two (which one read the variable?)."""
    found = {v for v in (parse_version(x) for x in f.versions) if v is not None}
    return next(iter(found)) if len(found) == 1 else None


def variable_findings(files: Sequence[LogFile]) -> list[Finding]:
    """TD088 for each variable a file shows set that its NCCL version does not read as meant. Only a
    version the table can judge counts: one at or after its first release (an older NCCL read names
    the table does not hold)."""
    out: list[Finding] = []
    said: set[str] = set()
    for f in files:
        version = _version(f)
        if version is None or version < releases()[0] or not f.variables:
            continue
        where = {name: (value, line) for name, value, line in f.variables}
        for v in judge_names(list(where), version, CAME):
            if v.name in said:
                continue
            said.add(v.name)
            value, line = where[v.name]
            fix = (f"Use {v.suggestion}. " if v.suggestion else "") + EXPLANATIONS[CODE].fix
            evidence: dict[str, object] = {
                "file": f.name,
                "line": line,
                "variable": v.name,
                "value": value,
                "verdict": v.kind,
                "nccl_version": shown(version),
                "version_from": CAME,
                "cause": {"what": EXPLANATIONS[CODE].title, "confidence": "stated by the log"},
            }
            if v.suggestion:
                evidence["suggestion"] = v.suggestion
            e = EXPLANATIONS[CODE]
            out.append(Finding(CODE, e.name, e.severity, f"env:{v.name}", v.message, fix, evidence))
    return out
