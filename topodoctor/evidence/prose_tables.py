"""A table a reporter pasted among their sentences (a Markdown table, or GitHub's rendered one copied back as
cells between pipes), read as the sentences it stands for: each row's label with its cells, each cell named by
its column's header and given the unit that header (or the row's label) states in brackets.

    | Train Step Duration (s) | GPU Idle Time (%)
    -- | -- | --
    RoCE Enabled | 2.51 | 76.89

reads as "RoCE Enabled: Train Step Duration 2.51 s; GPU Idle Time 76.89 %." The prose reader (prose.py) takes
these sentences where it takes the reporter's own; the rows' cells go one to a clause (``;``), so each figure
keeps its column's words. Only a table with its separator row is one: pipes alone are a program's output.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)+\|?\s*$")
_UNIT = re.compile(r"\s*\(([^()]{1,8})\)\s*$")  # "Train Step Duration (s)": the bracket's unit
_VALUE = re.compile(r"^[~≈]?\d+(?:\.\d+)?\s*\S{0,6}$")
MAX_ROWS = 50  # a pasted table of a post is a few rows; past this, bounded work


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _named(cell: str) -> tuple[str, str]:
    """A header's or label's words and the unit its brackets state ("" where none)."""
    m = _UNIT.search(cell)
    return (cell[: m.start()].strip(), m.group(1).strip()) if m else (cell.strip(), "")


def _sentence(header: list[str], row: list[str]) -> str:
    """One row as a sentence; ``header`` has the separator row's count of columns, the row no more."""
    row = row + [""] * (len(header) - len(row))  # a row's empty cells at its end, dropped with its last pipe
    if len(row) != len(header) or not row[0] or _VALUE.match(row[0]):
        return ""
    label, label_unit = _named(row[0])
    said = []
    for head, cell in zip(header[1:], row[1:], strict=True):
        if not cell or not _VALUE.match(cell):
            continue
        name, unit = _named(head)
        unit = label_unit or unit
        said.append(f"{name} {cell}{' ' + unit if unit else ''}".strip())
    return f"{label}: {'; '.join(said)}." if said else ""


def sentences(lines: Sequence[tuple[int, str]]) -> dict[int, str]:
    """The rows of every table among ``lines`` (0-based line, text; the lines no other reader took), as the
    sentences they stand for, by their line; the header and separator rows map to ""."""
    out: dict[int, str] = {}
    for i, (k, line) in enumerate(lines):
        if i == 0 or not _SEPARATOR.match(line) or lines[i - 1][1].count("|") < 1:
            continue
        header, columns = _cells(lines[i - 1][1]), len(_cells(line))
        if len(header) == columns - 1:
            header = ["", *header]  # the rendered table's empty corner cell, dropped with the leading pipe
        out[lines[i - 1][0]] = out[k] = ""
        for k_row, row in lines[i + 1 : i + 1 + MAX_ROWS]:
            if "|" not in row or _SEPARATOR.match(row):
                break
            out[k_row] = _sentence(header, _cells(row))
    return out
