"""The command line's contract with its caller: streams, signals, exit codes, one line per failure.

A prolog runs us with stdout closed, piped into ``head -1``, in an ASCII locale, and kills
us with SIGTERM at its own timeout. None of that may turn into a traceback or an exit code
that means "unhealthy"; a failure of topodoctor itself is exit 3 ("could not check").
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import signal
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from topodoctor.cli.exit_codes import EXITS as EXITS  # the commands' epilogs, one table
from topodoctor.core import fileio, signals
from topodoctor.core.budget import end_children
from topodoctor.core.errors import (
    EXIT_CANNOT_CHECK,
    OutputLost,
    Terminated,
    TopodoctorError,
    WriteError,
)
from topodoctor.core.fileio import dumps_strict
from topodoctor.core.text import printable, text_width, truncate, unknown_line, utf8_safe_doc
from topodoctor.model.outcome import Judgement, exit_code
from topodoctor.service import early

if TYPE_CHECKING:
    from rich.console import Console


F = TypeVar("F", bound=Callable[..., Any])
_MESSAGE_LIMIT = 400


class Exit(Exception):
    """The end of a command with its exit code, raised through whatever runs it (typer's command
    or the direct run of cli/start.py); ``run_guarded`` reads it as it reads click's own Exit, by
    its name and ``exit_code``. Ours: a command run without typer must not import it to end."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.exit_code = code


@dataclass
class Env:
    """A command's output: its standard streams, and whether every outcome is one line on stdout
    (``check`` / ``job --format line``: a drain reason, nothing on stderr). Made once per
    invocation (cli/commands.py ``main``) and handed to the command's runner; nothing else
    writes the command's output."""

    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    line: bool = False

    def emit(self, text: str) -> None:
        """One line of output on stdout, written as given (JSON is already escaped)."""
        self.stdout.write(text + "\n")

    def emit_json(self, doc: Any) -> None:
        """A JSON document on stdout: strict (no NaN or Infinity), escaped, indented."""
        self.emit(dumps_strict(utf8_safe_doc(doc), indent=1))

    def say(self, text: str) -> None:
        """A line for people on stderr, with every value shown literally (none in the one-line format),
        wrapped at the width of text (COLUMNS, stderr's terminal, else the fixed width of a pipe)."""
        if self.line:
            return
        shown, width = printable(text), text_width(self.stderr)
        if len(shown) > width:
            shown = "\n".join(textwrap.wrap(shown, width, subsequent_indent="  ", break_on_hyphens=False))
        self.stderr.write(shown + "\n")

    def fail(self, message: str, code: int) -> Exception:
        """Report a failure as one line (the one-line verdict, or an error on stderr); the caller
        raises the returned exception, which ends the command with ``code``."""
        text = truncate(printable(message), _MESSAGE_LIMIT)
        with contextlib.suppress(BrokenPipeError, OSError):
            if self.line:
                self.emit(unknown_line(message))
            else:
                self.stderr.write(f"topodoctor: error: {text}\n")
                self.stderr.flush()
        return Exit(code)

    def error_line(self, message: str) -> None:
        """``topodoctor: error: MESSAGE`` on stderr, in every format: for what goes wrong beside a
        verdict (a file not written, standard output lost), never instead of the verdict's line."""
        with contextlib.suppress(OSError, ValueError):
            self.stderr.write(f"topodoctor: error: {printable(message)}\n")
            self.stderr.flush()

    def console(self) -> Console:
        """A rich console on stdout for the text formats; loaded only by the commands that draw one
        (a prolog's one line, JSON and metrics never load rich)."""
        from topodoctor.report.terminal import make_console  # rich: only the text formats draw

        return make_console(self.stdout)

    def render(self, draw: Callable[[], Any]) -> None:
        """Write the output on stdout; a reader that left (``| head -1``) changes nothing about the
        exit code, and a stdout that refuses the text (a full disk) is exit 3 with one line on stderr."""
        try:
            draw()
            self.stdout.flush()
        except BrokenPipeError:
            fileio.silence_stdout()
        except OSError as exc:
            raise self.stdout_lost(exc) from None

    def write(self, text: str) -> None:
        """Text on stdout as it is (Prometheus' exposition, a generated file), rendered."""
        self.render(lambda: self.stdout.write(text))

    def stdout_lost(self, exc: OSError | OutputLost) -> Exception:
        """Standard output refused our text: the environment failed, not topodoctor (exit 3)."""
        fileio.silence_stdout()  # what is still buffered must not fail the final flush a second time
        if isinstance(exc, OutputLost):
            self.error_line(str(exc))
        else:
            self.error_line(f"cannot write to standard output: {exc.strerror or type(exc).__name__}")
        return Exit(EXIT_CANNOT_CHECK)

    def reports_errors(self, fn: F) -> F:
        """``fn`` with its TopodoctorError turned into its one line and exit code."""

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except OutputLost as exc:  # on stderr in every format: stdout is what failed
                raise self.stdout_lost(exc) from None
            except TopodoctorError as exc:
                raise self.fail(str(exc), exc.exit_code) from None

        return wrapper  # type: ignore[return-value]

    def progress_bar(self) -> Callable[[int, int, str], None] | None:
        """A transient progress bar on a terminal's stderr, drawn by the measuring child."""
        if not self.stderr.isatty():
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

    def flush(self) -> int | None:
        """Flush both streams; exit 3 when stdout refused what was left in its buffer (said on stderr)."""
        lost = None
        for stream in (self.stdout, self.stderr):
            try:
                stream.flush()
            except BrokenPipeError:
                if stream is self.stdout:
                    fileio.silence_stdout()
            except OSError as exc:
                if stream is self.stdout:
                    lost = _code(self.stdout_lost(exc))
            except ValueError:
                pass
        return lost


T = TypeVar("T")


class Outputs:
    """The files a command writes beside its verdict (``--metrics``, ``-o``, pictures).

    A write that fails is told after the verdict, never instead of it: the verdict is printed
    as usual, then one line ``topodoctor: error: cannot write FILE: reason`` on stderr (in the
    one-line format, at the end of that line: see ``in_line``); a file not written counts among
    what could not be used (``model.outcome.exit_code``): 1 unhealthy stands, and so does 3,
    else 2. Writes wait for a slow reader
    (a FIFO) no later than ``deadline``, the command's budget.
    """

    def __init__(self, env: Env, deadline: float | None = None) -> None:
        self.env = env
        self.deadline = deadline
        self.failed: list[str] = []
        self._told = False

    def write(self, fn: Callable[[], T]) -> T | None:
        """``fn()``, which writes one file; None when that write failed (kept for ``exit_code``)."""
        with fileio.write_deadline(self.deadline):
            try:
                return fn()
            except WriteError as exc:
                self.failed.append(str(exc))
                return None

    def wrote(self, fn: Callable[[], object]) -> bool:
        """Whether ``fn()`` wrote its file (``write``): a command whose file was its output shows
        what it held on the terminal instead, so no verdict is lost with the file."""
        before = len(self.failed)
        self.write(fn)
        return len(self.failed) == before

    def in_line(self) -> str:
        """The failed writes as the end of a one-line verdict ("; cannot write ..."), told there
        instead of on stderr: a drain reason captured with 2>&1 stays one line."""
        self._told = True
        return printable("".join(f"; {message}" for message in self.failed))

    def exit_code(self, judged: Judgement) -> int:
        """Tell the failed writes, after the verdict; the code the command ends with, the
        writes that failed counted among what could not be used (``model.outcome.exit_code``)."""
        self._tell()
        return exit_code(judged, self.failed)

    def error_code(self, code: int) -> int:
        """Tell the failed writes after an error's line; the error's own code stands."""
        self._tell()
        return code

    def _tell(self) -> None:
        for message in [] if self._told else self.failed:
            self.env.error_line(message)


@contextlib.contextmanager
def install_signal_handlers() -> Iterator[None]:
    """SIGTERM, SIGHUP and SIGINT unwind the command, so the budgeted child is killed on the way
    out, and end it with one line ("terminated by SIGINT") and exit 128 + the signal."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signals.install()
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_app(env: Env, app: Any, argv: list[str] | None, usage_code: int) -> int:
    """Run the typer app without click's standalone mode, ``env`` handed to the command (click's
    context object); every ending is an exit code."""
    return run_guarded(env, lambda: app(args=argv, prog_name="topodoctor", standalone_mode=False, obj=env), usage_code)


def run_guarded(env: Env, work: Callable[[], Any], usage_code: int) -> int:
    """Run a command (typer's app) and map every ending to an exit code, told through ``env``.

    Typer ships its own copy of click, so its exceptions are matched by shape (what click
    documents: ``exit_code`` and ``format_message``), not by class.
    """
    try:
        result = work()
    except Terminated as exc:
        return _code(env.fail(f"terminated by {exc}", exc.exit_code))
    except KeyboardInterrupt:  # SIGINT before the handlers were in place
        return _code(env.fail("terminated by SIGINT", 128 + signal.SIGINT))
    except BrokenPipeError:
        fileio.silence_stdout()
        return 0
    except OutputLost as exc:  # `--metrics -` or `-o -` to a full stdout, in a command without reports_errors
        return _code(env.stdout_lost(exc))
    except SystemExit as exc:  # click's answer to a closed stdout (EPIPE) is exit 1, "unhealthy"
        if isinstance(exc.__context__, OSError) and exc.__context__.errno == errno.EPIPE:
            fileio.silence_stdout()
            return 0
        raise
    except OSError as exc:
        import traceback  # here and in internal_error only: every command's start-up would pay for it

        if any(f.name == "echo" and "click" in f.filename for f in traceback.extract_tb(exc.__traceback__)):
            return _code(env.stdout_lost(exc))  # click printing help or usage to a full stdout
        if exc.errno in (errno.ENAMETOOLONG, errno.ELOOP, errno.ENOTDIR):  # a path the user gave
            name = fileio.shown(exc.filename) if exc.filename else "a path"
            return _code(env.fail(f"cannot use {name}: {exc.strerror}", usage_code))
        return _not_ours_or_bug(env, exc)
    except Exception as exc:
        name = type(exc).__name__
        if name == "Exit":
            return int(getattr(exc, "exit_code", 0))
        if name == "Abort":  # click's word for a KeyboardInterrupt it caught
            return _code(env.fail("terminated by SIGINT", 128 + signal.SIGINT))
        if name == "NoArgsIsHelpError":  # bare `topodoctor`: show the help, as click does
            env.stderr.write(exc.format_message() + "\n" if hasattr(exc, "format_message") else "")
            return usage_code
        if hasattr(exc, "format_message") and hasattr(exc, "exit_code"):
            ctx = getattr(exc, "ctx", None)
            hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
            return _code(env.fail(f"{exc.format_message()}{hint}", int(exc.exit_code) or usage_code))
        return _not_ours_or_bug(env, exc)
    return result if isinstance(result, int) else 0


def _not_ours_or_bug(env: Env, exc: BaseException) -> int:
    """An unexpected exception: a signal's, wrapped by Python into another (a class being created
    reports ``RuntimeError: Error calling __set_name__``), or a bug of ours (exit 3)."""
    stop = signals.received()
    if stop is not None:
        return _code(env.fail(f"terminated by {stop}", stop.exit_code))
    return _code(env.fail(internal_error(exc), EXIT_CANNOT_CHECK))


def internal_error(exc: BaseException) -> str:
    """One line for a bug of ours: what failed and where, for the bug report."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = next(
        (f"{os.path.basename(f.filename)}:{f.lineno}" for f in reversed(frames) if "topodoctor" in f.filename), ""
    )
    detail = str(exc)[:200]
    return f"internal error ({type(exc).__name__}{' at ' + where if where else ''}: {detail}); please report it"


def _code(exit_: Exception) -> int:
    return int(getattr(exit_, "exit_code", EXIT_CANNOT_CHECK))


def hostname() -> str:
    """This host's name, for output that must name it when nothing was probed."""
    import socket

    return socket.gethostname()


def finish(env: Env, code: int) -> None:
    """End the command with ``code`` once the output is flushed (os._exit: tearing down the
    interpreter can cost tenths of a second, past the budget a prolog gave us, and there is
    nothing left to clean up); the early probe and every child are ended first."""
    early.drop()
    lost = env.flush()  # the report is out before the world's ending can take this process down
    end_children()
    code = code if lost is None else lost
    if "torch" in sys.modules:  # only a process that imported torch can be a rank of a launcher's world
        from topodoctor.service.world import leave_world  # a launcher's world: loaded only in a rank

        code = leave_world(code)  # in a launcher's world every rank leaves with the world's code
        env.flush()
    os._exit(code)
