"""The rule registry: one decorator, one dictionary, codes checked when a rule registers.

A rule is a plain function of a ``Context`` that yields ``Issue``s (or ``CannotCheck`` when
its input failed to probe). It reads data only: no NVML, no torch. Its docstring is its
documentation: the first line is the title, the rest says why it matters and how to fix.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from topodoctor.probed import ProbeError

Severity = Literal["info", "warning", "error", "critical"]
SEVERITY_ORDER: dict[str, int] = {"info": 0, "warning": 1, "error": 2, "critical": 3}
Need = Literal["bandwidth", "expect"]
FAMILIES = {
    "0": "collectives",
    "1": "nvlink",
    "2": "pcie",
    "3": "p2p",
    "4": "numa",
    "5": "fabric and health",
    "6": "nccl and cuda environment",
    "7": "bandwidth",
    "8": "expectations",
    "9": "probe",
}
_CODE = re.compile(r"^TD(?!000)\d\d\d$")


@dataclass(frozen=True)
class Issue:
    """What a rule body yields; the engine adds the rule's code, name and severity."""

    subject: str  # GPU3, GPU0-GPU5, GPU1/nvlink7, env:NCCL_P2P_LEVEL, bridge:0000:17:01.0
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str | None = None  # overrides the rule's fix hint
    severity: Severity | None = None  # overrides the rule's default severity


@dataclass(frozen=True)
class CannotCheck:
    """The rule's input failed to probe: reported, never a silent pass."""

    subject: str
    error: ProbeError | str


@dataclass(frozen=True)
class Finding:
    code: str
    name: str
    severity: Severity
    subject: str
    message: str
    fix: str
    evidence: dict[str, Any]


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    severity: Severity
    tags: frozenset[str]
    needs: frozenset[str]
    fix: str
    func: Callable[[Any], Iterable[Issue | CannotCheck]]

    @property
    def title(self) -> str:
        return (self.func.__doc__ or "").strip().splitlines()[0]

    @property
    def doc(self) -> str:
        import inspect

        return inspect.cleandoc(self.func.__doc__ or "")

    @property
    def family(self) -> str:
        return FAMILIES[self.code[2]]


REGISTRY: dict[str, Rule] = {}


def rule(
    code: str,
    name: str,
    severity: Severity,
    fix: str,
    tags: tuple[str, ...] = ("prolog",),
    needs: tuple[Need, ...] = (),
) -> Callable[[Callable[[Any], Iterable[Issue | CannotCheck]]], Any]:
    """Register a rule. Bad or duplicate codes and missing docs fail at import, loudly."""

    def register(func: Callable[[Any], Iterable[Issue | CannotCheck]]) -> Any:
        if not _CODE.match(code):
            raise ValueError(f"rule code {code!r} is not TD + 3 digits")
        if code in REGISTRY:
            raise ValueError(f"rule code {code} registered twice ({REGISTRY[code].name} and {name})")
        if any(r.name == name for r in REGISTRY.values()):
            raise ValueError(f"rule name {name!r} registered twice")
        if not (func.__doc__ or "").strip():
            raise ValueError(f"rule {code} has no documentation")
        REGISTRY[code] = Rule(code, name, severity, frozenset(tags), frozenset(needs), fix, func)
        return func

    return register


def selected(select: Iterable[str] = (), ignore: Iterable[str] = ()) -> Iterator[Rule]:
    """Rules by code or prefix (TD1, TD10, TD101) or name; ``ignore`` wins over ``select``."""
    sel, ign = [s.strip() for s in select if s.strip()], [s.strip() for s in ignore if s.strip()]

    def hit(r: Rule, pats: list[str]) -> bool:
        return any(r.code.startswith(p.upper()) or r.name == p for p in pats)

    for code in sorted(REGISTRY):
        r = REGISTRY[code]
        if sel and not hit(r, sel):
            continue
        if hit(r, ign):
            continue
        yield r


def check_patterns(patterns: Iterable[str]) -> None:
    """Refuse a --select / --ignore pattern that matches no rule (a typo would silence nothing)."""
    from topodoctor.errors import InputError

    for p in patterns:
        p = p.strip()
        if p and not any(c.startswith(p.upper()) or r.name == p for c, r in REGISTRY.items()):
            raise InputError(f"no rule matches {p!r} (see `topodoctor rules`)")
