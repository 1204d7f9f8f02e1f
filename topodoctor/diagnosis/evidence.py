"""The diagnosis of what a user brought (``topodoctor diagnose``): ``judge`` reads the joined
``Evidence`` and answers findings. Data in, findings out: no I/O.

This form says what was read, piece by piece (TD980, info), and which inputs held nothing it reads
(TD981, info: the exit code, not a finding, says that an input the user named could not be used);
the judgement against the hardware's expectation and the causes build on the same signature.
"""

from __future__ import annotations

from topodoctor.model.evidence import Evidence, Piece
from topodoctor.model.findings import Finding

READ_CODE, READ_NAME = "TD980", "evidence-read"
UNREADABLE_CODE, UNREADABLE_NAME = "TD981", "evidence-unreadable"


def judge(ev: Evidence) -> tuple[Finding, ...]:
    """The findings of the evidence: what each piece showed, and the inputs that showed nothing."""
    out = [_read(ev, k, p) for k, p in enumerate(ev.pieces)]
    for why in ev.unreadable:
        source, _, reason = why.partition(": ")
        out.append(
            Finding(
                UNREADABLE_CODE,
                UNREADABLE_NAME,
                "info",
                source,
                f"not read: {reason}",
                "give the tool's output as it printed it (a paste of the whole output, or the file it wrote)",
                {"input": source},
            )
        )
    return tuple(out)


def _read(ev: Evidence, k: int, p: Piece) -> Finding:
    """One piece's finding: its kind, lines, and what it showed, in counts."""
    shown = {
        "gpus": sum(1 for g in ev.gpus if g.piece == k),
        "pairs": sum(1 for x in ev.pairs if x.piece == k),
        "nics": sum(1 for x in ev.nics if x.piece == k),
        "copy_matrices": sum(1 for x in ev.copies if x.piece == k),
        "collective_rows": sum(len(x.rows) for x in ev.collectives if x.piece == k),
        "pcie_functions": sum(1 for x in ev.pcie if x.piece == k),
        "xids": sum(1 for x in ev.xids if x.piece == k),
        "settings": sum(1 for x in ev.settings if x.piece == k),
        "launches": sum(1 for x in ev.launches if x.piece == k),
        "graphs": sum(1 for x in ev.graphs if x.piece == k),
    }
    counts = {name: n for name, n in shown.items() if n}
    what = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in counts.items()) or "nothing it reads"
    where = f"lines {p.first_line}-{p.last_line}" if p.last_line > p.first_line else f"line {p.first_line}"
    version = f" {p.version}" if p.version else ""
    cut = f"; cut: {p.cut}" if p.cut else ""
    return Finding(
        READ_CODE,
        READ_NAME,
        "info",
        f"{p.source}:{p.first_line}",
        f"{p.kind}{version} ({where}): {what}{cut}",
        "",
        {"kind": p.kind, "source": p.source, "first_line": p.first_line, "last_line": p.last_line,
         "version": p.version, "cut": p.cut, **counts},
    )  # fmt: skip
