"""The check as text for people: a table of findings, their fixes and the verdict, drawn with rich.
The machine formats (JSON, the one line) are in report/check.py and load no terminal library."""

from __future__ import annotations

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from topodoctor.core.text import plural, printable
from topodoctor.model.findings import consequences
from topodoctor.model.outcome import CheckOutcome
from topodoctor.report.causes import cause_line
from topodoctor.report.check import counts, following, incomplete_tail
from topodoctor.report.fitness import print_fitness
from topodoctor.report.terminal import literal

_STYLE = {"critical": "bold red", "error": "red", "warning": "yellow", "info": "cyan"}


def print_check(outcome: CheckOutcome, console: Console) -> None:
    """The check as text: what was judged, the findings and their fixes, the fitness figures where
    measured, and the verdict line."""
    meta = outcome.meta
    measured = f", measured: {', '.join(meta.measured)}" if meta.measured else ""
    console.print(
        literal(f"topodoctor check: {meta.origin}, {plural(meta.gpus, 'GPU')}, {meta.elapsed_s:.2f} s{measured}")
    )
    if meta.scope:
        others = meta.findings_outside_scope
        about = f"; {plural(others, 'finding')} about other GPUs not shown" if others else ""
        console.print(literal(f"scope: {meta.scope}{about}"))
    if outcome.findings:
        t = Table()
        t.add_column("code", no_wrap=True)
        t.add_column("severity", no_wrap=True)
        t.add_column("subject", no_wrap=True)  # bus ids and link names are never cut
        t.add_column("finding", ratio=1, overflow="fold")
        after = {id(f) for f in consequences(outcome.findings)}
        for f in outcome.findings:
            # A consequence sits under its cause (findings/grouped) and says which it follows from.
            message = f"follows from {', '.join(f.caused_by)}: {f.message}" if id(f) in after else f.message
            code = f"  {f.code}" if id(f) in after else f.code
            t.add_row(code, literal(f.severity, _STYLE[f.severity]), literal(f.subject), literal(message))
        console.print(t)
        seen = set()
        for f in outcome.findings:
            if f.code not in seen:
                seen.add(f.code)
                # Wrapped at word boundaries, continuation lines indented under the hint.
                console.print(Padding(literal(f"{f.code} {f.name}: {f.fix}"), (0, 0, 0, 2), expand=False))
        for f in outcome.findings:
            why = cause_line(f)
            if why is not None:
                console.print(Padding(literal(f"{f.code} {f.subject}: {why}"), (0, 0, 0, 2), expand=False))
    if outcome.fitness is not None:
        print_fitness(outcome.fitness, console)
    style = "bold red" if outcome.failing else "yellow" if outcome.not_measured else "green"
    summary = Text(outcome.verdict.upper(), style=style)
    missed = "".join(f"; {why}" for why in outcome.not_measured)
    summary.append(
        printable(
            f": {counts(outcome.findings)}{following(outcome.findings)}{incomplete_tail(outcome)}{missed}"
            f" (fail level: {outcome.fail_level})"
        )
    )
    console.print(summary)
