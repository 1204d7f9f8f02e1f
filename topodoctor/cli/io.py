"""The command line's contract with its caller: streams, signals, exit codes, one line per failure.

A prolog runs us with stdout closed, piped into ``head -1``, in an ASCII locale, and kills
us with SIGTERM at its own timeout. None of that may turn into a traceback or an exit code
that means "unhealthy"; a failure of topodoctor itself is exit 3 ("could not check").
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

import typer
from rich.console import Console

from topodoctor.core.errors import EXIT_CANNOT_CHECK, Terminated
from topodoctor.report.terminal import make_console, printable, unknown_line


def _exits(*lines: str) -> str:
    """An epilog click prints as written (``\\b`` stops it re-flowing the lines)."""
    return "Exit codes:\n\n\b\n" + "\n".join(f"  {line}" for line in lines)


_USAGE = "2  usage or input error: bad option; missing, corrupt or inconsistent file"
_CANNOT = "3  could not check: no driver or GPU, budget spent, or a topodoctor bug"
_SIGNAL = "128+N  stopped by signal N (143: SIGTERM); the probe child is killed too"
EXITS = {
    "all": "Exit codes: 0 ok, 1 unhealthy, 2 usage or input error, 3 could not check; "
    "each command's --help has its own.",
    "scan": _exits("0  printed", _USAGE, _CANNOT, _SIGNAL),
    "record": _exits("0  written", _USAGE, _CANNOT, _SIGNAL),
    "check": _exits(
        "0  healthy (findings below the fail level allowed)",
        "1  unhealthy: a finding at or above the fail level",
        _USAGE,
        _CANNOT,
        _SIGNAL,
    )
    + "\n\nWith --format line, every outcome (exit 3 included) is one line on stdout.",
    "expect": _exits("0  written", "1  refused: the host has error findings (--force)", _USAGE, _CANNOT, _SIGNAL),
    "bandwidth": _exits(
        "0  measured; no bandwidth finding at error level",
        "1  a bandwidth finding (TD7xx) at error level",
        _USAGE,
        _CANNOT,
        _SIGNAL,
    ),
    "rules": _exits("0  listed", _USAGE),
    "explain": _exits("0  shown", _USAGE),
}

line_mode = False  # `check --format line`: every outcome is one line on stdout, nothing on stderr
_MESSAGE_LIMIT = 400


def emit(text: str) -> None:
    """One line of output on stdout, written as given (JSON is already escaped)."""
    sys.stdout.write(text + "\n")


def emit_json(doc: Any) -> None:
    """A JSON document on stdout: strict (no NaN or Infinity), escaped, indented."""
    from topodoctor.core.fileio import dumps_strict

    emit(dumps_strict(doc, indent=1))


def say(text: str) -> None:
    """A line for people on stderr, with every value shown literally."""
    if not line_mode:
        sys.stderr.write(printable(text) + "\n")


def fail(message: str, code: int) -> typer.Exit:
    """Report a failure as one line; the caller raises the returned Exit."""
    text = printable(message)
    if len(text) > _MESSAGE_LIMIT:
        text = text[: _MESSAGE_LIMIT - 3] + "..."
    if line_mode:
        with contextlib.suppress(BrokenPipeError, OSError):
            emit(unknown_line(message))
    else:
        with contextlib.suppress(BrokenPipeError, OSError):
            sys.stderr.write(f"topodoctor: error: {text}\n")
            sys.stderr.flush()
    return typer.Exit(code)


def render(draw: Callable[[Console], Any]) -> None:
    """Draw on stdout; a reader that left (``| head -1``) changes nothing about the exit code."""
    try:
        draw(make_console())
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()


def _silence_stdout() -> None:
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def progress_bar() -> Callable[[int, int, str], None] | None:
    """A transient progress bar on a terminal's stderr, drawn by the measuring child."""
    if not sys.stderr.isatty():
        return None
    state: dict[str, Any] = {}

    def progress(n: int, total: int, what: str) -> None:
        from rich.console import Console
        from rich.progress import Progress

        if "bar" not in state:
            state["bar"] = Progress(transient=True, console=Console(stderr=True, markup=False, emoji=False))
            state["bar"].start()
            state["job"] = state["bar"].add_task("measuring", total=None)
        state["bar"].update(state["job"], completed=n, total=total, description=what)
        if n >= total:
            state["bar"].stop()

    return progress


def prepare_stdio() -> None:
    """Make the standard streams safe to use whatever state the caller left them in.

    A closed descriptor 0-2 is reopened on /dev/null (or the probe's pipe could land on
    fd 1 and our output in the pipe); text that the locale cannot encode (``±`` on an ASCII
    terminal, a lone surrogate) is written as backslash escapes instead of raising.
    """
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            devnull = os.open(os.devnull, os.O_RDWR)
            if devnull != fd:
                os.dup2(devnull, fd)
                os.close(devnull)
    if sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115  (lives as long as the process)
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]


def flush_stdio() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            if stream is sys.stdout:
                _silence_stdout()
        except (OSError, ValueError):
            pass


@contextlib.contextmanager
def install_signal_handlers() -> Iterator[None]:
    """SIGTERM and SIGHUP unwind like Ctrl-C, so the budgeted child is killed on the way out."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_app(app: typer.Typer, argv: list[str] | None, usage_code: int) -> int:
    """Run the typer app without click's standalone mode and map every ending to an exit code.

    Typer ships its own copy of click, so its exceptions are matched by shape (what click
    documents: ``exit_code`` and ``format_message``), not by class.
    """
    try:
        result = app(args=argv, prog_name="topodoctor", standalone_mode=False)
    except Terminated as exc:
        return _code(fail(f"terminated by {exc}", exc.exit_code))
    except KeyboardInterrupt:
        return _code(fail("interrupted", 130))
    except BrokenPipeError:
        _silence_stdout()
        return 0
    except Exception as exc:
        name = type(exc).__name__
        if name == "Exit":
            return int(getattr(exc, "exit_code", 0))
        if name == "Abort":
            return _code(fail("aborted", 130))
        if name == "NoArgsIsHelpError":  # bare `topodoctor`: show the help, as click does
            sys.stderr.write(exc.format_message() + "\n" if hasattr(exc, "format_message") else "")
            return usage_code
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            return _code(fail(f"{exc.format_message()}{hint}", int(exc.exit_code) or usage_code))
        return _code(fail(internal_error(exc), EXIT_CANNOT_CHECK))
    return result if isinstance(result, int) else 0


def internal_error(exc: BaseException) -> str:
    """One line for a bug of ours: what failed and where, for the bug report."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = next(
        (f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(frames) if "topodoctor" in f.filename), ""
    )
    detail = str(exc)[:200]
    return f"internal error ({type(exc).__name__}{' at ' + where if where else ''}: {detail}); please report it"


def _code(exit_: typer.Exit) -> int:
    return int(exit_.exit_code)


def hostname() -> str:
    """This host's name, for output that must name it when nothing was probed."""
    import socket

    return socket.gethostname()
