"""Errors that end a command with a one-line message and a defined exit code.

Exit codes (shared by every command, documented in README.md):
  0  ran, healthy (warnings allowed)
  1  ran, unhealthy (a finding at or above the fail level)
  2  usage or input error: bad flag, missing, corrupt or inconsistent input file (a
     recording or snapshot that contradicts itself included)
  3  could not check: no NVML library, no driver, no GPU, probe crashed, time budget spent,
     or an internal error of topodoctor (never 1: a prolog would drain a healthy node)
  128+N  stopped by signal N (130 Ctrl-C, 143 SIGTERM); the probe child is killed with it
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_UNHEALTHY = 1
EXIT_USAGE = 2
EXIT_CANNOT_CHECK = 3


class TopodoctorError(Exception):
    """Base: carries the exit code the CLI returns for it."""

    exit_code = EXIT_CANNOT_CHECK
    # Raised for a budgeted child (core/budget.py): what it had sent before it failed, if anything.
    part: dict[str, Any] | None = None


class InputError(TopodoctorError):
    """A file or argument the user gave is missing, corrupt, or of the wrong kind."""

    exit_code = EXIT_USAGE


class WriteError(InputError):
    """A file the user asked us to write cannot be written (a missing directory, no permission,
    a full disk, a directory in its place): the path is the input at fault, exit 2. A command
    that has a verdict reports it all the same (see ``cli_io.Outputs``)."""


class OutputLost(TopodoctorError):
    """Standard output refuses our output for a reason other than a reader that left (a full
    device, an I/O error): the environment failed, not topodoctor; exit 3, told on stderr."""

    exit_code = EXIT_CANNOT_CHECK


class ProbeUnavailable(TopodoctorError):
    """The host cannot be probed: no NVML library, no driver loaded, no GPU."""

    exit_code = EXIT_CANNOT_CHECK


class ReplayMismatch(TopodoctorError):
    """The probe asked a recording for a call it does not hold: the recording is stale or
    inconsistent (a GPU count its calls do not cover). The recording is the input: exit 2."""

    exit_code = EXIT_USAGE


class BudgetExceeded(TopodoctorError):
    """The wall-clock budget ran out before the work finished."""

    exit_code = EXIT_CANNOT_CHECK


class CannotMeasure(TopodoctorError):
    """A measurement could not run here: no GPU to drive, torch or CUDA missing, too few GPUs, or a
    topology that says too little to predict from. Exit 3, as any check that could not be made."""

    exit_code = EXIT_CANNOT_CHECK


class BandwidthUnavailable(CannotMeasure):
    """Copies cannot be timed: torch missing, no CUDA, out of memory."""


class CollectivesUnavailable(CannotMeasure):
    """Collectives cannot be run here: torch or NCCL missing, no GPU, ranks never met."""


def error_class(name: str) -> type[TopodoctorError]:
    """The error class of this module named ``name`` (as a budgeted child names what it raised),
    else TopodoctorError itself: the kind survives the pipe, and nothing else can be named."""
    found = globals().get(name)
    return found if isinstance(found, type) and issubclass(found, TopodoctorError) else TopodoctorError


class Terminated(BaseException):
    """A signal asked this process to stop (SIGTERM, SIGHUP): unwinds like KeyboardInterrupt,
    so the budgeted child is killed on the way out, and ends with exit 128 + signal."""

    def __init__(self, signum: int) -> None:
        import signal

        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum
