"""The command line: typer commands made from one option spec, calling the service layer and
rendering what it returns (cli/commands.py and the modules beside it).

``run`` is the console entry point. The version and the top-level help answer from here, before
anything else loads: a cluster's tooling calls them often, and they need nothing else. Every
other command line starts in cli/start.py."""

from __future__ import annotations

import os
import sys

from topodoctor import __version__


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
        from topodoctor.cli.help_text import TOP_LEVEL_HELP  # the entry point: the help loads nothing else

        _answer(TOP_LEVEL_HELP)
    from topodoctor.cli.start import start  # the entry point: everything else loads after the answers above

    start(argv)
