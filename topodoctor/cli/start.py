"""A command line from its first instruction: the streams made safe, the budget's clock started,
the signals taken, the command line read by its options spec (cli/options.py ``early_read``)
and the probe it asks for forked (service/early.py), all before typer and the command load.
Then the command runs (cli/commands.py)."""

from __future__ import annotations

import contextlib
import os
import sys

from topodoctor.cli.early import early_source, early_timer_modes, line_asked
from topodoctor.core import signals
from topodoctor.core.budget import end_children, mark_command_start
from topodoctor.core.errors import Terminated
from topodoctor.core.stdio import prepare_stdio
from topodoctor.service import early


def start(argv: list[str]) -> None:
    """Run the command line ``argv``; ends the process."""
    prepare_stdio()  # before any fork: a closed stdout must not become the probe's pipe
    mark_command_start()
    signals.install()  # from here on a signal unwinds, the start-up's imports included
    try:
        modes = early_timer_modes(argv)
        if modes is not None:  # first of all: CUDA's start in the copy timer overlaps everything after
            from topodoctor.service.early_copies import start_early_timer  # the entry point: only for bandwidth

            start_early_timer(modes)
        early.start(early_source(argv))
        from topodoctor.cli.commands import run  # typer and the app: loaded after the probe's fork

        run()
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


def _stopped(name: str, code: int, argv: list[str]) -> None:
    """End a command a signal stopped outside its own handling: the early probe killed, one line
    (on stdout in the one-line format, as every outcome there), exit 128 + the signal."""
    signals.ignore()  # a second signal must not interrupt the ending
    early.drop()
    end_children()
    line = line_asked(argv)
    text = f"topodoctor UNKNOWN: terminated by {name}" if line else f"topodoctor: error: terminated by {name}"
    with contextlib.suppress(OSError):
        os.write(1 if line else 2, (text + "\n").encode())
    os._exit(code)
