"""One setting, one finding: the collectives rules judge each op on its own (TD001, TD020) and the
settings on their own (TD002, TD003), so one NCCL variable that holds a whole run down raised one
error per op and rule. Where the cause engine names the variables that account for the shortfall,
the findings they explain become one: the variable is the subject, every op and every other
finding naming it are its evidence, nothing is dropped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from topodoctor.core.text import plural
from topodoctor.diagnosis.symptoms import SYMPTOMS
from topodoctor.model.findings import SEVERITY_ORDER, Finding, finding_json
from topodoctor.topology.busbw_expect import BASES


def _setting(f: Finding) -> tuple[str, ...] | None:
    """The NCCL settings (``NAME=VALUE``) the cause of a slow collective names, when it is sure."""
    c = f.cause
    if SYMPTOMS.get(f.code) != "collective-slow" or c is None or c.confidence != "high":
        return None
    ev = c.evidence
    variables = ev.get("variables")
    if isinstance(variables, str):  # the channel causes write them as one phrase: "A=1, B=2"
        variables = variables.split(", ")
    if variables is None and isinstance(ev.get("variable"), str) and "value" in ev:
        variables = [f"{ev['variable']}={ev['value']}"]
    if not isinstance(variables, list) or not variables or not all(isinstance(v, str) for v in variables):
        return None
    return tuple(variables)


def _names(f: Finding, settings: tuple[str, ...], names: set[str]) -> bool:
    """Whether ``f`` is about one of ``settings``: its subject is the variable, or its evidence
    lists the setting (TD003's ``settings``)."""
    if f.subject.startswith("env:") and f.subject[4:] in names:
        return True
    listed = f.evidence.get("settings")
    return isinstance(listed, list) and any(s in listed for s in settings)


def _op(f: Finding) -> dict[str, Any]:
    return {"code": f.code, "op": f.subject, **f.evidence, "message": f.message}


def _measured(ops: list[dict[str, Any]]) -> str:
    """``below the topology's model: all_gather 22.4 of 274.0 GB/s, all_reduce 25.8 of 303.0 GB/s``:
    each op once, against the figure it was judged by and its basis (busbw_expect.py), the topology's
    model where a finding had it (the expectation that knows the op and its size), at its lowest figure."""
    got: dict[str, tuple[float, float, str]] = {}
    for o in ops:
        v, e, basis = o.get("measured_gbps"), o.get("expected_gbps"), o.get("basis_source")
        if not isinstance(v, (int, float)) or not isinstance(e, (int, float)) or not isinstance(basis, str):
            continue
        model = o.get("basis") == "model"
        seen = got.get(o["op"])
        was_model = seen is not None and seen[2] == BASES["model"]
        if seen is None or (model and not was_model) or (model == was_model and v < seen[0]):
            got[o["op"]] = (float(v), float(e), basis)
    bases = {b for _, _, b in got.values()}
    if not got:  # symptoms judged by another figure (TD011: the NICs' rate): their messages say it
        return "below what the GPUs carry"
    if len(bases) == 1:
        return f"below {bases.pop()}: " + ", ".join(f"{op} {v:.1f} of {e:.1f} GB/s" for op, (v, e, _) in got.items())
    return "below what the GPUs carry: " + ", ".join(
        f"{op} {v:.1f} of {e:.1f} GB/s ({b})" for op, (v, e, b) in got.items()
    )


def fold_same_row(findings: Sequence[Finding]) -> list[Finding]:
    """TD020 folded under TD001 where both judged one op at one size against the one figure (the
    topology's model, busbw_expect.py): one finding, the worst severity, TD020 whole under ``also``."""
    out = list(findings)
    for f in findings:
        if f.code != "TD001" or f.evidence.get("basis") != "model":
            continue
        key = (f.subject, f.evidence.get("size_bytes"), f.evidence.get("expected_gbps"))
        twin = next(
            (
                g
                for g in out
                if g.code == "TD020"
                and (g.subject, g.evidence.get("size_bytes"), g.evidence.get("expected_gbps")) == key
            ),
            None,
        )
        if twin is None:
            continue
        worst = max(f, twin, key=lambda x: SEVERITY_ORDER[x.severity]).severity
        merged = replace(f, severity=worst, evidence={**f.evidence, "also": [finding_json(twin)]})
        out = [merged if g is f else g for g in out if g is not twin]
    return out


def _codes(f: Finding) -> set[str]:
    """``f``'s code and those of the findings folded under it."""
    also = f.evidence.get("also")
    nested = (
        {a["code"] for a in also if isinstance(a, dict) and isinstance(a.get("code"), str)}
        if isinstance(also, list)
        else set()
    )
    return {f.code, *nested}


def one_per_setting(findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` with those one NCCL setting explains made one finding (the first symptom's
    code and cause, the worst severity, the variable as subject, even where it explains one op:
    the setting is what to change); unchanged where no setting explains a finding. TD020 is first
    folded under TD001 of the same row (``fold_same_row``)."""
    findings = fold_same_row(findings)
    groups: dict[tuple[str, ...], list[Finding]] = {}
    for f in findings:
        key = _setting(f)
        if key is not None:
            groups.setdefault(key, []).append(f)
    out = list(findings)
    for settings, symptoms in groups.items():
        names = {s.partition("=")[0] for s in settings}
        kin = [
            f
            for f in out
            if f not in symptoms
            and SEVERITY_ORDER[f.severity] >= SEVERITY_ORDER["warning"]
            and _names(f, settings, names)
        ]
        first = symptoms[0]
        assert first.cause is not None  # _setting holds only symptoms with a cause
        worst = max((*symptoms, *kin), key=lambda f: SEVERITY_ORDER[f.severity]).severity
        ops = [_op(f) for f in symptoms]
        n_ops = len(dict.fromkeys(f.subject for f in symptoms))
        message = f"{first.cause.what}: {plural(n_ops, 'op')} {_measured(ops)}"
        codes = sorted(set().union(*(_codes(f) for f in (*symptoms, *kin))))
        evidence = {"variables": list(settings), "codes": codes, "ops": ops, "also": [finding_json(f) for f in kin]}
        merged = replace(
            first,
            severity=worst,
            subject="env:" + ",".join(dict.fromkeys(s.partition("=")[0] for s in settings)),
            message=message,
            fix=first.cause.fix or first.fix,
            evidence=evidence,
        )
        out = [merged if f is first else f for f in out if f is first or (f not in symptoms and f not in kin)]
    return out
