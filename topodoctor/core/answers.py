"""What a budgeted child (core/budget.py ``fork_work``) sends its parent: one JSON document a line,
the parts done so far (``send_part``) and then its answer or its error. A line cut short by a kill
counts as not sent, so a child killed at its deadline still hands on the parts it finished."""

from __future__ import annotations

import json
import os
from typing import Any

from topodoctor.core.errors import TopodoctorError


def lines(chunks: list[bytes], strict: bool = True) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the last part sent, the final answer) of what a child wrote: one JSON document a line.
    A last line cut short (a kill mid-write) counts as not sent; any other line that is not a
    document is garbage (an error when ``strict``)."""
    part = final = None
    lines = b"".join(chunks).split(b"\n")
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            doc = None
        if not isinstance(doc, dict):
            if strict and (i < len(lines) - 1 or doc is not None):
                raise TopodoctorError("could not check: the check process answered garbage")
            continue
        if "part" in doc:
            part = doc["part"]
        else:
            final = doc
    return part, final


def write_line(fd: int, doc: dict[str, Any]) -> None:
    """``doc`` as one JSON line on ``fd``, written whole however the pipe splits it."""
    data = (json.dumps(doc, allow_nan=False) + "\n").encode("utf-8", "backslashreplace")
    while data:
        data = data[os.write(fd, data) :]


_part_fd: int | None = None  # in a child of fork_work: the pipe its answers go through


def opened(fd: int) -> None:
    """In a child of ``fork_work``: ``fd`` is the pipe its answers go through (``send_part``)."""
    global _part_fd
    _part_fd = fd


def send_part(doc: dict[str, Any]) -> None:
    """In a child of ``fork_work``: send what is done so far (the probe, before the measurements
    that follow it). Should the child then fail, be killed at the deadline or die, the parent's
    error carries it (``TopodoctorError.part``), and a fault it shows is still judged. Nothing
    outside such a child."""
    if _part_fd is not None:
        write_line(_part_fd, {"part": doc})
