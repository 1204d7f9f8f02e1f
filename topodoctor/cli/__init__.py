"""The command line: typer commands that parse options, call the service layer and render what it
returns (cli/commands.py and the modules beside it).

``run`` is the console entry point. The version and the top-level help answer from here, before
typer and the commands load: a cluster's tooling calls them often, and they need nothing else."""

from __future__ import annotations

import os
import sys

from topodoctor import __version__
from topodoctor.cli.help_text import TOP_LEVEL_HELP


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
        _answer(TOP_LEVEL_HELP)
    try:
        from topodoctor.cli.commands import run as run_command
    except ModuleNotFoundError as exc:  # an install without its dependencies: the install's fault, said once
        name = exc.name or "a dependency"
        sys.stderr.write(f"topodoctor: error: {name} is not installed (pip install topodoctor installs it)\n")
        os._exit(3)
    run_command()
