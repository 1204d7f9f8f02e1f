"""Probe rules (TD9xx): what could not be checked, said out loud."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule


@rule(
    "TD901",
    "check-incomplete",
    "warning",
    fix="Run as root or fix the failing query (the evidence names it); a check that cannot read its input "
    "cannot vouch for the host.",
)
def check_incomplete(ctx: Context) -> Iterator[Issue]:
    """A check was skipped because its input could not be read (NVML error, unreadable file).

    Other rules report their unreadable inputs under this code, with the rule that was
    skipped in the evidence; it never passes silently.
    """
    return iter(())
