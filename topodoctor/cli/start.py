"""A command line from its first instruction: the streams made safe, the budget's clock started,
the signals taken, the command line read by its options spec (core/options.py ``early_read``)
and the probe it asks for forked (service/early.py), all before typer and the command load.
Then the command runs: a ``check`` or ``scan`` whose every word the spec reads runs with that
options object at once (cli/early.py ``direct_options``), anything else through typer's app
(cli/commands.py), which is built from the same spec."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

from topodoctor.cli.early import direct_options, early_source, early_timer_modes, line_asked
from topodoctor.cli.table import Command
from topodoctor.core import signals
from topodoctor.core.budget import end_children, mark_command_start
from topodoctor.core.errors import EXIT_USAGE, Terminated
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
        direct = direct_options(argv)
        if direct is not None:
            run_direct(*direct)
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


def run_direct(command: Command, options: Any, line: bool) -> None:
    """Run ``command`` with its options object as its typer command would (the same runner, the
    same endings: cli/commands.py ``typer_command``), without loading typer; ends the process."""
    # the command's output machinery, loaded after the probe's fork: its imports overlap the probe
    from topodoctor.cli import io as cli_io

    env = cli_io.Env(line=line)
    run = env.reports_errors(command.runner_function())
    with cli_io.install_signal_handlers():
        code = cli_io.run_guarded(env, lambda: run(options, env), EXIT_USAGE)
    cli_io.finish(env, code)


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
