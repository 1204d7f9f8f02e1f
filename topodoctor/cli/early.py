"""The command line read before anything else loads, by its command's options spec: which host
a ``check`` or ``scan`` will probe (its probe is forked at once), and whether the one-line format
is asked for (every outcome, a usage error included, is then that line)."""

from __future__ import annotations

from topodoctor.cli.options import EarlyRead, build, early_read
from topodoctor.cli.table import COMMANDS
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


def early_source(argv: list[str]) -> Source | None:
    """The host the command line will probe without a measurement pass (a ``check`` or ``scan``
    read cleanly by its spec), or None: then no probe starts before the command is parsed."""
    command = COMMANDS.get(argv[0]) if argv else None
    if command is None or not hasattr(command.options_class(), "early_source"):
        return None  # a command whose probe may start before it is parsed says what it reads
    read = _early(argv)
    if read is None or not read.clean:
        return None
    options: object = build(command.options_class(), read.values)
    source: Source | None = options.early_source()  # type: ignore[attr-defined]
    return source


def early_timer_modes(argv: list[str]) -> tuple[str, ...] | None:
    """The copy timer's modes when the command line (``bandwidth``, read cleanly by its spec) has it
    started first of all (service/early_copies.py), else None."""
    command = COMMANDS.get(argv[0]) if argv else None
    if command is None or not hasattr(command.options_class(), "early_timer"):
        return None  # a command whose copy timer may start before it is parsed says with what
    read = _early(argv)
    if read is None or not read.clean:
        return None
    options: object = build(command.options_class(), read.values)
    modes: tuple[str, ...] | None = options.early_timer()  # type: ignore[attr-defined]
    return modes


def line_asked(argv: list[str]) -> bool:
    """Whether ``argv`` asks for the one-line format (``check`` or ``job``): then every outcome,
    a usage error or a signal during start-up included, is that line on stdout."""
    read = _early(argv)
    return read is not None and read.values.get("fmt") == "line"  # a format only check and job have
