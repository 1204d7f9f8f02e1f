"""The command line read before anything else loads, by its command's options spec: which host
a ``check`` or ``scan`` will probe (its probe is forked at once), whether the one-line format
is asked for (every outcome, a usage error included, is then that line), and the options a
``check`` or ``scan`` runs with when every word of its line reads cleanly by the spec: such a
line runs without typer (its import, and click's with it, is a third of a prolog check's start
before its probe). Any other line, ``--help`` and every mistake included, goes to typer, which
is built from the same spec and says what is wrong in its words."""

from __future__ import annotations

import os
from typing import Any

from topodoctor.cli import config
from topodoctor.cli.table import COMMANDS, Command
from topodoctor.core.options import EarlyRead, build, early_read
from topodoctor.service.passes import Source


def _early(argv: list[str]) -> EarlyRead | None:
    """The command line read by its command's options spec; None for a command not in the table."""
    command = COMMANDS.get(argv[0]) if argv else None
    if command is None:
        return None
    try:
        return early_read(argv[1:], command.options_class())
    except Exception:  # only a head start: typer reads the command line in full, and says what is wrong
        return None


def _options(argv: list[str], hook: str, full: bool = False) -> tuple[Command, Any, EarlyRead] | None:
    """The command, its options object and the read, when the command's options class has ``hook``
    (what it may do before typer parses the line) and the line reads cleanly by its spec (every
    value, with ``full``); else None."""
    command = COMMANDS.get(argv[0]) if argv else None
    if command is None or not hasattr(command.options_class(), hook):
        return None
    try:
        cls = command.options_class()
        read = early_read(argv[1:], cls, full=full)
        if not read.clean:
            return None
        return command, build(cls, config.settle(command.name, cls, read.values, os.environ)), read
    except Exception:  # only a head start: typer reads the command line in full, and says what is wrong
        return None


def early_source(argv: list[str]) -> Source | None:
    """The host the command line will probe without a measurement pass (a ``check`` or ``scan``
    read cleanly by its spec), or None: then no probe starts before the command is parsed."""
    got = _options(argv, "early_source")  # a command whose probe may start early says what it reads
    source: Source | None = None if got is None else got[1].early_source()
    return source


def direct_options(argv: list[str]) -> tuple[Command, Any, bool] | None:
    """The command, its options object and whether the one-line format is asked for, when the
    command line is a ``check`` or ``scan`` (a command whose probe starts early) and every word of
    it reads cleanly by the spec, values included; else None (typer reads it)."""
    got = _options(argv, "early_source", full=True)
    return None if got is None else (got[0], got[1], got[2].values.get("fmt") == "line")


def early_timer_modes(argv: list[str]) -> tuple[str, ...] | None:
    """The copy timer's modes when the command line (``bandwidth``, read cleanly by its spec) has it
    started first of all (service/early_copies.py), else None."""
    got = _options(argv, "early_timer")  # a command whose copy timer may start early says with what
    modes: tuple[str, ...] | None = None if got is None else got[1].early_timer()
    return modes


def line_asked(argv: list[str]) -> bool:
    """Whether ``argv`` asks for the one-line format (``check`` or ``job``): then every outcome,
    a usage error or a signal during start-up included, is that line on stdout."""
    read = _early(argv)
    return read is not None and read.values.get("fmt") == "line"  # a format only check and job have
