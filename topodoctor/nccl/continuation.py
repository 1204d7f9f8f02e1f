"""Where a message goes on past its line: a message a terminal or a paste wrapped onto the next line,
and a text that ends inside NCCL's return-code trail (the paste cut before the trail reached the top).
Plain functions over the file's lines; ``nccl.parse`` calls them."""

from __future__ import annotations

from collections.abc import Sequence

from topodoctor.nccl.classify import Reading, classify
from topodoctor.nccl.grammar import OWN_LINE, TRAIL


def wrapped(lines: Sequence[str], i: int, text: str, src: str = "", joins: Sequence[str] = ("", " ")) -> Reading | None:
    """``text`` (line ``i``'s message) read together with the next line, when that line starts no
    message of its own and the two read as one message ("...OpTy" / "pe=BROADCAST..."); None
    otherwise. ``joins``: what the wrap took out, tried in turn (a terminal cuts inside a word, an
    editor at a space). The caller marks the next line as read."""
    if i + 1 >= len(lines):
        return None
    nxt = lines[i + 1].strip()
    if not nxt or OWN_LINE.search(nxt):
        return None
    for sep in joins:
        if reading := classify(text + sep + nxt, src):
            return reading
    return None


def ends_in_trail(lines: Sequence[str], open_trail: Sequence[str]) -> int | None:
    """The last line, when the text ends inside a return-code trail of two frames or more (a WARN's
    error on its way up, the paste cut before it reached the top): the post shows a failure. None
    when the log went on after the trail (NCCL recovered, or the run went on)."""
    if len(open_trail) < 2:
        return None
    last = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].strip()), -1)
    return last if last >= 0 and TRAIL.search(lines[last]) else None
