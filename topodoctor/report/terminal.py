"""Printing values as data: never as markup, emoji codes or terminal control sequences.

Everything we print about a host comes from the host or the user: a GPU name, a bus id
(``0000:ab:00.0`` holds the emoji code ``:ab:``), an environment variable (``[/]`` is rich
markup), a path with a newline. Consoles made here interpret neither markup nor emoji, and
``printable`` escapes what a terminal would act on, so a value reads back as it was recorded.
"""

from __future__ import annotations

import os
import sys
from typing import IO

from rich.console import Console
from rich.text import Text

# C0 controls, DEL and C1 controls: ESC starts ANSI sequences, CR and BS overwrite what was
# shown, NEL and LF would split a one-line drain reason. Tab stays: the connection matrix is
# tab-separated, as nvidia-smi prints it.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0)) if c != 0x09}
_CONTROLS[ord("\n")] = "\\n"
_CONTROLS[ord("\r")] = "\\r"
DEFAULT_PIPE_WIDTH = 150  # a pipe has no width; wide enough that tables stay tables


def printable(value: object) -> str:
    """``value`` as one line of text a terminal shows literally.

    Controls become ``\\xNN`` escapes; a lone surrogate (undecodable bytes smuggled through a
    file name or a recording) becomes ``\\udcNN``; everything else is kept.
    """
    text = value if isinstance(value, str) else str(value)
    text = text.translate(_CONTROLS)
    if text.isascii():
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


LINE_LIMIT = 200  # Slurm keeps a drain reason short; the rest is in the JSON


def truncate(line: str, limit: int = LINE_LIMIT) -> str:
    """``line`` within ``limit`` characters, shortened at a word boundary with "...": a reason
    read by people loses its last words, never half of one."""
    if len(line) <= limit:
        return line
    cut = line[: limit - 2]  # one more than fits, so a word ending exactly at the limit stays whole
    space = cut.rfind(" ")
    # A single word longer than half the room (a path, a long bus id list) is cut where it must be.
    cut = cut[:space] if space > limit // 2 else cut[: limit - 3]
    return cut.rstrip(" ,;:") + "..."


def unknown_line(reason: str, limit: int = LINE_LIMIT) -> str:
    """The one line of `check --format line` when the host could not be judged."""
    return truncate(printable(f"topodoctor UNKNOWN: {reason}"), limit)


def literal(value: object, style: str = "") -> Text:
    """A rich Text of ``value``, escaped as ``printable``; styled but never parsed."""
    return Text(printable(value), style=style)


def make_console(file: IO[str] | None = None, width: int | None = None) -> Console:
    """A console that prints values literally: no markup, no emoji, no highlighting.

    On a terminal rich measures the width (80 columns stay 80); a pipe gets
    ``DEFAULT_PIPE_WIDTH`` unless COLUMNS says otherwise.
    """
    stream = file if file is not None else sys.stdout
    if width is None and not (_isatty(stream) or os.environ.get("COLUMNS")):
        width = DEFAULT_PIPE_WIDTH
    return _Console(
        file=stream,
        width=width,
        markup=False,
        emoji=False,
        highlight=False,
        soft_wrap=False,
    )


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader left (``| head -1``): drop the rest of the output and carry on, so the
        exit code still says what was found (rich's own handler exits 1: "unhealthy")."""
        self.quiet = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.file.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False
