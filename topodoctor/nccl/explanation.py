"""One failure class `topodoctor nccl-log` names: its stable code and name, severity, what it
means and the general fix. The classes themselves are in ``explanations`` (host) and
``explanations_network``. Data only."""

from __future__ import annotations

from dataclasses import dataclass

from topodoctor.model import codes
from topodoctor.model.findings import Severity


@dataclass(frozen=True)
class Explanation:
    """One failure class: its stable code and name, severity, what it means, and the fix."""

    code: str
    name: str
    severity: Severity
    title: str
    fix: str


def explained(code: str, name: str, severity: Severity, title: str, fix: str) -> Explanation:
    """A class of ours: ``name`` gets the ``nccl-log-`` prefix every class name carries. Its code
    goes into the one table of codes (``model.codes``) as it is declared."""
    e = Explanation(code, f"nccl-log-{name}", severity, title, fix)
    codes.register(codes.Code(code, "nccl-log", e.name, severity, title))
    return e
