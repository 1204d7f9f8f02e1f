"""The rule registry: one decorator, one dictionary, codes checked when a rule registers.

A rule is a plain function of a ``Context`` that yields ``Issue``s. It reads probed inputs
through ``ctx.need``, which records an input that failed to probe as could-not-check (TD901)
for that rule and subject. It reads data only: no NVML, no torch. Its docstring is its
documentation: the first line is the title (what it checks), then optionally more on what it
checks, then a section headed ``Why it matters:`` and one headed ``How to fix:``, in that order
and neither empty (``doc_sections`` reads them; a rule without them is refused at import).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from topodoctor.core.errors import InputError
from topodoctor.core.probed import ProbeError
from topodoctor.model import codes
from topodoctor.model.findings import Finding, Severity

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
WHY = "Why it matters:"
HOW = "How to fix:"


@dataclass(frozen=True)
class RuleDoc:
    """A rule's docstring in its sections; ``details`` is empty when the title says it all."""

    title: str
    details: str
    why: str
    how: str


def doc_sections(doc: str) -> RuleDoc:
    """Split a rule's docstring into its sections. A section starts at a line that begins with its
    heading (its text may follow on the same line) and runs to the next heading or the end.

    Raises ValueError naming what is wrong: no title, a heading missing, repeated or out of order,
    or a section with no text. `topodoctor explain` and docs/rules.md show the sections it returns.
    """
    import inspect

    lines = inspect.cleandoc(doc).splitlines()
    if not lines or not lines[0].strip():
        raise ValueError("has no title line")
    starts: dict[str, int] = {}
    for i, line in enumerate(lines):
        for heading in (WHY, HOW):
            if line.startswith(heading):
                if heading in starts:
                    raise ValueError(f"has {heading!r} twice")
                starts[heading] = i
    for heading in (WHY, HOW):
        if heading not in starts:
            raise ValueError(f"has no {heading!r} section")
    why, how = starts[WHY], starts[HOW]
    if how < why:
        raise ValueError(f"has {HOW!r} before {WHY!r}")

    def text(first: int, end: int, heading: str) -> str:
        return "\n".join([lines[first][len(heading) :], *lines[first + 1 : end]]).strip()

    parts = RuleDoc(lines[0].strip(), "\n".join(lines[1:why]).strip(), text(why, how, WHY), text(how, len(lines), HOW))
    for heading, body in ((WHY, parts.why), (HOW, parts.how)):
        if not body:
            raise ValueError(f"has an empty {heading!r} section")
    return parts


@dataclass(frozen=True)
class Issue:
    """What a rule body yields; the engine adds the rule's code, name and severity."""

    subject: str  # GPU3, GPU0-GPU5, GPU1/nvlink7, env:NCCL_P2P_LEVEL, bridge:0000:17:01.0
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str | None = None  # overrides the rule's fix hint
    # Only one of the severities the rule declares (``also``): a rule whose findings grade by
    # kind (an XID code, a lint check) documents every severity it can raise.
    severity: Severity | None = None
    # The codes of the layer rules this finding may follow from: the engine names, as the
    # finding's ``caused_by``, the findings of those codes about this finding's GPUs or a part of them.
    caused_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unchecked:
    """An input a rule could not read (or that is missing altogether): reported, never a
    silent pass. ``field`` names the input as the snapshot does (``pcie.width_current``)."""

    subject: str
    field: str
    error: ProbeError


@dataclass(frozen=True)
class Evaluation:
    """What a check concluded.

    ``findings``: what the selected rules found, worst first; it holds the could-not-check
    findings (TD901) when TD901 is selected. ``incomplete``: every could-not-check of the run
    whatever the selection, so a summary can count them even when TD901 is ignored.
    """

    findings: tuple[Finding, ...]
    incomplete: tuple[Finding, ...]

    def __iter__(self) -> Iterator[Finding]:
        # For callers that only list findings.
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)


@dataclass(frozen=True)
class Rule:
    """A registered rule: its code, name, severity, tags, inputs and fix, and the function that runs it."""

    code: str
    name: str
    severity: Severity
    tags: frozenset[str]
    needs: frozenset[str]
    fix: str  # the docstring's "How to fix:" section on one line (``fix_text``)
    func: Callable[[Any], Iterable[Issue]]
    also: frozenset[Severity] = frozenset()  # other severities its findings may carry, documented

    def raised(self, issue: Issue) -> Severity:
        """The severity of a finding: the rule's own unless the issue names one it declares."""
        if issue.severity is None or issue.severity == self.severity:
            return self.severity
        if issue.severity not in self.also:
            raise ValueError(f"rule {self.code} raised {issue.severity}, which it does not document")
        return issue.severity

    @property
    def title(self) -> str:
        """The first line of the rule function's docstring: its one-line title."""
        return (self.func.__doc__ or "").strip().splitlines()[0]

    @property
    def doc(self) -> str:
        """The rule function's whole docstring, dedented: what ``explain`` and docs/rules.md show."""
        import inspect

        return inspect.cleandoc(self.func.__doc__ or "")

    @property
    def sections(self) -> RuleDoc:
        """The rule's documentation by section: title, details, why it matters, how to fix."""
        return doc_sections(self.func.__doc__ or "")

    @property
    def family(self) -> str:
        """The family the code's first digit names (TD1xx: nvlink, ...)."""
        return FAMILIES[self.code[2]]


REGISTRY: dict[str, Rule] = {}


def fix_text(how: str) -> str:
    """The fix hint a rule's findings carry: its documentation's "How to fix:" section on one
    line, as a sentence. The text is written once, in the docstring."""
    text = " ".join(how.split())
    return text[:1].upper() + text[1:]


def rule(
    code: str,
    name: str,
    severity: Severity,
    tags: tuple[str, ...] | None = None,
    needs: tuple[Need, ...] = (),
    also: tuple[Severity, ...] = (),
) -> Callable[[Callable[[Any], Iterable[Issue]]], Any]:
    """Register a rule. Bad or duplicate codes, missing docs or docs without their sections (see
    ``doc_sections``) and a measuring rule tagged ``prolog`` fail at import, loudly. The fix its
    findings carry is its docstring's "How to fix:" section (``fix_text``).

    A rule raises exactly its ``severity`` (documented in docs/rules.md): a cause that
    deserves another severity is another rule. Rules that need no measurement are tagged
    ``prolog`` unless ``tags`` says otherwise. A rule that grades its findings by kind (XID
    codes, lint checks) names the other severities it raises in ``also``; they are documented.
    """
    measuring = "bandwidth" in needs
    tag_set = frozenset(tags if tags is not None else (() if measuring else ("prolog",)))

    def register(func: Callable[[Any], Iterable[Issue]]) -> Any:
        if not _CODE.match(code):
            raise ValueError(f"rule code {code!r} is not TD + 3 digits")
        if code in REGISTRY:
            raise ValueError(f"rule code {code} registered twice ({REGISTRY[code].name} and {name})")
        held = codes.TABLE.get(code)
        if held is not None and held.origin == "rule":  # a rule taken out of the registry (a test's)
            codes.unregister(code)
        if any(r.name == name for r in REGISTRY.values()):
            raise ValueError(f"rule name {name!r} registered twice")
        if not (func.__doc__ or "").strip():
            raise ValueError(f"rule {code} has no documentation")
        try:
            fix = fix_text(doc_sections(func.__doc__ or "").how)
        except ValueError as e:
            raise ValueError(f"rule {code}'s documentation {e}") from None
        if measuring and "prolog" in tag_set:
            raise ValueError(f"rule {code} needs a measurement and cannot be a prolog rule")
        REGISTRY[code] = r = Rule(code, name, severity, tag_set, frozenset(needs), fix, func, frozenset(also))
        codes.register(codes.Code(code, "rule", name, severity, r.title, r.also))
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
    for p in patterns:
        p = p.strip()
        if p and not any(c.startswith(p.upper()) or r.name == p for c, r in REGISTRY.items()):
            raise InputError(f"no rule matches {p!r} (see `topodoctor rules`)")
