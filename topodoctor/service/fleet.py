"""The fleet roll-up as a command runs it: many nodes' result files read under one time budget,
then judged together."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from topodoctor.core.errors import InputError
from topodoctor.core.text import plural
from topodoctor.fleet.inputs import read_results
from topodoctor.fleet.rollup import FleetReport, Settings, roll_up

__all__ = ["FleetReport", "Settings", "roll_up_paths"]


def roll_up_paths(
    paths: Sequence[Path], name_from: Literal["host", "file"], timeout_s: float, settings: Settings
) -> FleetReport:
    """Read every result under ``paths`` (bounded; a bad file is one line of the report) and roll
    them up; no readable result at all is an input error."""
    nodes, unreadable = read_results(paths, name_from, timeout_s)
    if not nodes:
        first = f" ({unreadable[0].error})" if unreadable else ""
        raise InputError(f"no readable result among {plural(len(paths), 'path')}{first}")
    return roll_up(nodes, unreadable, settings)
