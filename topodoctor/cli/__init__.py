"""The command line: typer commands that parse options, call the service layer and render what it
returns (cli/commands.py and the modules beside it).

``run`` is the console entry point. The version and the top-level help answer from here, before
typer and the commands load: a cluster's tooling calls them often, and they need nothing else.
A ``check`` or ``scan`` command line is read first of all by its options spec (cli/options.py
``early_read``), and the probe it asks for is forked before anything else loads."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING, Any

from topodoctor import __version__

if TYPE_CHECKING:
    from topodoctor.cli.options import EarlyRead
    from topodoctor.service.passes import Source


def _answer(text: str) -> None:
    """Print ``text`` and end the process with the command's own code (0), a closed pipe or a
    closed stdout included; a stdout that cannot take it is the environment's failure (exit 3),
    said on stderr. The text is ASCII, so no locale can refuse it."""
    if sys.stdout is None:  # started with stdout closed: nobody reads the answer
        os._exit(0)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        os._exit(0)
    except OSError as exc:
        sys.stderr.write(f"topodoctor: error: cannot write to standard output: {exc.strerror or exc}\n")
        os._exit(3)
    os._exit(0)


def run() -> None:
    """Console entry point (``topodoctor`` and ``python -m topodoctor``)."""
    argv = sys.argv[1:]
    if argv == ["--version"]:
        _answer(f"topodoctor {__version__}\n")
    if argv in ([], ["--help"], ["-h"]):
        # Only the top-level help: it answers without loading typer or the commands.
        from topodoctor.cli.help_text import TOP_LEVEL_HELP

        _answer(TOP_LEVEL_HELP)
    # Everything below loads after the two answers above, which need none of it.
    from topodoctor.core import signals
    from topodoctor.core.budget import mark_command_start
    from topodoctor.core.errors import Terminated
    from topodoctor.core.stdio import prepare_stdio

    prepare_stdio()  # before any fork: a closed stdout must not become the probe's pipe
    mark_command_start()
    signals.install()  # from here on a signal unwinds, the start-up's imports included
    try:
        start_early(early_source(argv))
        from topodoctor.cli.commands import run as run_command  # typer and the app: after the fork

        run_command()
    except BaseException as exc:
        stop = signals.received() or (exc if isinstance(exc, Terminated) else None)
        if stop is not None or isinstance(exc, KeyboardInterrupt):
            _stopped(str(stop or "SIGINT"), stop.exit_code if stop else 130, argv)
        if not isinstance(exc, ModuleNotFoundError):
            raise
        # An install without its dependencies: the install's fault, said once.
        sys.stderr.write(
            f"topodoctor: error: {exc.name or 'a dependency'} is not installed (pip install topodoctor installs it)\n"
        )
        os._exit(3)


def start_early(source: Source | None) -> None:
    """Fork the early probe of ``source`` (service/probing.py); None starts nothing."""
    from topodoctor.service.probing import start_early as fork

    fork(source)


def _early(argv: list[str]) -> EarlyRead | None:
    """The command line read by its command's options spec, before anything else loads; None
    for a command not in the table."""
    from topodoctor.cli.options import early_read
    from topodoctor.cli.table import COMMANDS

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
    from topodoctor.cli.options import build
    from topodoctor.cli.table import COMMANDS

    command = COMMANDS.get(argv[0]) if argv else None
    if command is None or not hasattr(command.options_class(), "early_source"):
        return None  # a command whose probe may start before it is parsed says what it reads
    read = _early(argv)
    if read is None or not read.clean:
        return None
    options: Any = build(command.options_class(), read.values)
    return options.early_source()  # type: ignore[no-any-return]


def line_asked(argv: list[str]) -> bool:
    """Whether ``argv`` asks for the one-line format (``check`` or ``job``): then every outcome,
    a usage error or a signal during start-up included, is that line on stdout."""
    read = _early(argv)
    return read is not None and read.values.get("fmt") == "line"  # a format only check and job have


def _stopped(name: str, code: int, argv: list[str]) -> None:
    """End a command a signal stopped outside its own handling: the early probe killed, one line
    (on stdout in the one-line format, as every outcome there), exit 128 + the signal."""
    from topodoctor.core import signals
    from topodoctor.core.budget import end_children
    from topodoctor.service.probing import drop_early

    signals.ignore()  # a second signal must not interrupt the ending
    drop_early()
    end_children()
    line = line_asked(argv)
    text = f"topodoctor UNKNOWN: terminated by {name}" if line else f"topodoctor: error: terminated by {name}"
    with contextlib.suppress(OSError):
        os.write(1 if line else 2, (text + "\n").encode())
    os._exit(code)
