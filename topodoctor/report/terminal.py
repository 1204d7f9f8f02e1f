"""Printing values as data: never as markup, emoji codes or terminal control sequences.

Everything we print about a host comes from the host or the user: a GPU name, a bus id
(``0000:ab:00.0`` holds the emoji code ``:ab:``), an environment variable (``[/]`` is rich
markup), a path with a newline. Consoles made here interpret neither markup nor emoji, and
``printable`` escapes what a terminal would act on, so a value reads back as it was recorded.
"""

from __future__ import annotations

import os
import sys
import textwrap
from typing import IO

from rich.console import Console
from rich.text import Text

from topodoctor.core.text import PIPE_WIDTH, printable, text_width

__all__ = ["text_width"]  # the one width policy, for the renderers that import it from here

DEFAULT_PIPE_WIDTH = PIPE_WIDTH  # the one width policy (core/text.py)


def literal(value: object, style: str = "") -> Text:
    """A rich Text of ``value``, escaped as ``printable``; styled but never parsed."""
    return Text(printable(value), style=style)


def fold(line: str, width: int, hang: int | None = None) -> list[str]:
    """``line`` in lines of at most ``width`` columns, broken between words (a word longer than a
    line is cut); the lines after the first are indented by ``hang`` (default: the line's own
    indentation and two more)."""
    if len(line) <= width:
        return [line]
    lead = len(line) - len(line.lstrip(" "))
    hang = lead + 2 if hang is None else hang
    hang = min(hang, width // 2)  # a narrow terminal keeps room for the words
    return textwrap.wrap(
        line.lstrip(" "),
        width,
        initial_indent=" " * lead,
        subsequent_indent=" " * hang,
        break_on_hyphens=False,
        drop_whitespace=True,
    ) or [line[:width]]


def print_markdown(text: str, console: Console) -> None:
    """Markdown rendered for a person at the console's width (headings, emphasis, lists), the
    lines without the padding rich gives them."""
    from rich.markdown import Markdown

    with console.capture() as captured:
        console.print(Markdown(text))
    console.file.write("\n".join(line.rstrip() for line in captured.get().splitlines()) + "\n")


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
