"""The command line: typer commands that parse options, call the service layer and render what it
returns (cli/commands.py and the modules beside it).

``run`` is the console entry point. The version and the top-level help answer from here, before
typer and the commands load: a cluster's tooling calls them often, and they need nothing else."""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from typing import Any

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
        from topodoctor.cli.help_text import TOP_LEVEL_HELP

        _answer(TOP_LEVEL_HELP)
    from topodoctor.core.stdio import prepare_stdio

    prepare_stdio()  # before any fork: a closed stdout must not become the probe's pipe
    if argv[:1] == ["bandwidth"]:  # first of all: CUDA's start in the copy timer overlaps everything after
        from topodoctor.service.early_copies import start_early_timer

        start_early_timer(argv[1:])
    if _may_probe_live(argv):  # first of all: the driver's slow start overlaps everything after
        from topodoctor.service.server import start_nvml_server

        start_nvml_server()
    from topodoctor.core import signals
    from topodoctor.core.budget import mark_command_start
    from topodoctor.core.errors import Terminated
    from topodoctor.service.probing import start_early

    mark_command_start()
    signals.install()  # from here on a signal unwinds, the start-up's imports included
    from topodoctor.cli.plain import plain_check, plain_scan, source_of

    start_early(source_of(argv))
    try:
        _run_plain(argv, plain_scan(argv), plain_check(argv))
        from topodoctor.cli.commands import run as run_command

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


def _may_probe_live(argv: list[str]) -> bool:
    """Whether the command line may probe the live host early (a ``check`` or ``scan`` that
    replays nothing and asks for no help): only a first guess, read before anything loads;
    cli/plain.py reads it exactly, and a server it does not use is killed."""
    if argv[:1] not in (["check"], ["scan"]) or any(a.startswith("--replay") or a in ("-h", "--help") for a in argv):
        return False
    no_budget = ("0", "0.0", "0s")  # --timeout 0 runs without a child process (cli/plain.py reads it the same)
    return not any(
        a in (f"--timeout={z}" for z in no_budget) or (a == "--timeout" and b in no_budget)
        for a, b in itertools.pairwise([*argv, ""])
    )


def _run_plain(argv: list[str], scan: dict[str, Any] | None, check: dict[str, Any] | None) -> None:
    """A plain ``scan`` or ``check`` (cli/plain.py): its work without typer, ended as every command
    ends (the one-line format from the first instruction, the early probe dropped, the streams
    flushed, os._exit). Returns only when the command line is not plain."""
    if scan is None and check is None:
        return
    from topodoctor.cli import io as cli_io
    from topodoctor.core.budget import end_children
    from topodoctor.core.errors import EXIT_USAGE
    from topodoctor.service.probing import drop_early

    cli_io.line_asked = cli_io.line_mode = wants_line(argv)
    if scan is not None:
        from topodoctor.cli.scan import run_scan

        code = cli_io.run_guarded(lambda: run_scan(**scan), EXIT_USAGE)
    elif check is not None:
        from topodoctor.cli.check import run_check

        code = cli_io.run_guarded(lambda: run_check(**check), EXIT_USAGE)
    drop_early()
    lost = cli_io.flush_stdio()
    end_children()  # after the output: the answered probe child's exit is not the answer's wait
    os._exit(code if lost is None else lost)


def wants_line(argv: list[str]) -> bool:
    """Whether ``argv`` asks for the one-line format (``check`` or ``job``): then every outcome,
    a usage error or a signal during start-up included, is that line on stdout."""
    if not argv or argv[0] not in ("check", "job"):
        return False
    return any(w in ("-fline", "--format=line") for w in argv) or any(
        a in ("-f", "--format") and b == "line" for a, b in itertools.pairwise(argv)
    )


def _stopped(name: str, code: int, argv: list[str]) -> None:
    """End a command a signal stopped outside its own handling: the early probe killed, one line
    (on stdout in the one-line format, as every outcome there), exit 128 + the signal."""
    from topodoctor.core import signals
    from topodoctor.core.budget import end_children
    from topodoctor.service.probing import drop_early

    signals.ignore()  # a second signal must not interrupt the ending
    drop_early()
    end_children()
    line = wants_line(argv)
    text = f"topodoctor UNKNOWN: terminated by {name}" if line else f"topodoctor: error: terminated by {name}"
    with contextlib.suppress(OSError):
        os.write(1 if line else 2, (text + "\n").encode())
    os._exit(code)
