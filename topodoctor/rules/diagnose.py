"""The diagnoses of a user's evidence (TD021 - TD039) as rules: each code registered with its
documentation (diagnosis/evidence_codes.py), so `topodoctor rules`, `explain` and --select know them.
They judge ``ctx.evidence`` (``topodoctor diagnose``) and are silent on a probed host, whose own
symptoms (TD001, TD003, TD020) carry the same causes."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from topodoctor.diagnosis.evidence_codes import CODES, DiagnosisCode
from topodoctor.model.evidence import Evidence
from topodoctor.model.findings import Finding
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule

_last: list[tuple[Evidence, tuple[Finding, ...]]] = []  # one judgement per evidence, shared by the codes


def judged(ev: Evidence) -> tuple[Finding, ...]:
    """The judgement of ``ev``, made once for all the codes that read it."""
    if not _last or _last[0][0] is not ev:
        from topodoctor.diagnosis.evidence import judge  # the judgement loads only where evidence was given

        _last[:] = [(ev, judge(ev))]
    return _last[0][1]


def _rule_of(code: DiagnosisCode) -> Callable[[Context], Iterator[Issue]]:
    def body(ctx: Context) -> Iterator[Issue]:
        if ctx.evidence is None:
            return
        for f in judged(ctx.evidence):
            if f.code == code.code:
                yield Issue(f.subject, f.message, f.evidence, f.fix, f.severity)

    body.__doc__ = code.doc
    body.__name__ = code.name.replace("-", "_")
    return body


for _code in CODES:
    rule(_code.code, _code.name, _code.severity, tags=("diagnose",), also=_code.also)(_rule_of(_code))
