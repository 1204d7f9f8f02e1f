"""Helpers of the rule cases where the expectations file and what was found disagree, and where an
input holds its rarer value: an expectation above what a GPU's link can train at, more GPUs than the
node type, MIG on against an explicit ``mig_enabled: false``, a NIC port in a state between DOWN and
ACTIVE. Each firing case has its near miss: the same host without the disagreement."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rule_case_kit import pcie


def _expecting(**fields: Any) -> Any:
    """A last edit of the Context: its expectations file says ``fields`` (other than the host's)."""

    def edit(ctx: Any) -> None:
        ctx.expect = replace(ctx.expect, **fields)

    return edit


X8_GPU = pcie(1, width_current=8, width_max=8)  # a GPU whose link can train at x8 at most
GEN4_GPU = pcie(1, gen_current=4, gen_max=4, gpu_gen_max=4)  # and one whose link tops out at Gen4


def unknown_virtualization(s: Any) -> Any:
    """The probe could not tell a VM from bare metal: /proc/cpuinfo unreadable (the third value)."""
    return replace(s, host=replace(s.host, virtualization="unknown", virtualization_detail="cpuinfo unreadable"))
