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
    """``all_gather 22.4 of 274.0 GB/s, all_reduce 25.8 GB/s``: each op once, as TD020 judged it
    against the topology's model (the expectation that knows the op and its size), else as the
    other rules measured it, at its lowest figure."""
    got: dict[str, tuple[float, float | None]] = {}
    for o in ops:
        model = o.get("model_gbps")
        v = o.get("measured_gbps") if isinstance(model, (int, float)) else o.get("busbw_gbps")
        if not isinstance(v, (int, float)):
            continue
        seen = got.get(o["op"])
        if isinstance(model, (int, float)):
            if seen is None or seen[1] is None or v < seen[0]:
                got[o["op"]] = (float(v), float(model))
        elif seen is None or (seen[1] is None and v < seen[0]):
            got[o["op"]] = (float(v), None)
    return ", ".join(f"{op} {v:.1f}{'' if m is None else f' of {m:.1f}'} GB/s" for op, (v, m) in got.items())


def one_per_setting(findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` with those one NCCL setting explains made one finding (the first symptom's
    code and cause, the worst severity, the variable as subject); unchanged where no setting
    explains more than one finding."""
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
        if len(symptoms) + len(kin) < 2:
            continue
        first = symptoms[0]
        assert first.cause is not None  # _setting holds only symptoms with a cause
        worst = max((*symptoms, *kin), key=lambda f: SEVERITY_ORDER[f.severity]).severity
        ops = [_op(f) for f in symptoms]
        n_ops = len(dict.fromkeys(f.subject for f in symptoms))
        message = f"{first.cause.what}: {plural(n_ops, 'op')} below what the GPUs carry: {_measured(ops)}"
        codes = sorted({f.code for f in (*symptoms, *kin)})
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
