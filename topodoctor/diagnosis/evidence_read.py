"""What was read of a user's evidence, piece by piece (TD980, info), and the inputs that held nothing
``diagnose`` reads (TD981, info: the exit code, not a finding, says an input could not be used). Data in,
findings out; the judgement (evidence.py) puts these first."""

from __future__ import annotations

from topodoctor.model import codes
from topodoctor.model.evidence import Evidence, Piece
from topodoctor.model.findings import Finding

READ_CODE, READ_NAME = "TD980", "evidence-read"
UNREADABLE_CODE, UNREADABLE_NAME = "TD981", "evidence-unreadable"
UNREADABLE_FIX = "give the tool's output as it printed it (a paste of the whole output, or the file it wrote)"
# what `explain` and docs/rules.md say to do about each (the findings carry UNREADABLE_FIX themselves)
FIXES = {
    READ_CODE: "Nothing: it says what was read, so a cut paste or a kind read as another shows before the verdict.",
    UNREADABLE_CODE: UNREADABLE_FIX[0].upper() + UNREADABLE_FIX[1:] + "; diagnose names the kinds it reads.",
}
codes.register(
    codes.Code(
        READ_CODE, "diagnose", READ_NAME, "info", "One piece of the evidence read: its kind, lines and what it showed"
    )
)
codes.register(
    codes.Code(
        UNREADABLE_CODE, "diagnose", UNREADABLE_NAME, "info", "An input that held no kind of text diagnose reads"
    )
)


def _count(items: object, k: int, rows: bool = False) -> int:
    seq = items if isinstance(items, tuple) else ()
    return sum((len(x.rows) if rows else 1) for x in seq if getattr(x, "piece", None) == k)


def _read(ev: Evidence, k: int, p: Piece) -> Finding:
    """One piece's finding: its kind, its lines, and what it showed, in counts."""
    shown = {
        "gpus": _count(ev.gpus, k),
        "pairs": _count(ev.pairs, k),
        "nics": _count(ev.nics, k),
        "copy_matrices": _count(ev.copies, k),
        "collective_rows": _count(ev.collectives, k, rows=True),
        "pcie_functions": _count(ev.pcie, k),
        "xids": _count(ev.xids, k),
        "settings": _count(ev.settings, k),
        "launches": _count(ev.launches, k),
        "graphs": _count(getattr(ev, "graphs", ()), k),  # NCCL's graph dumps, where the readers give them
        "graph_searches": sum(
            len(a.searches) + len(a.search_failed) for a, i in zip(ev.nccl, ev.nccl_pieces, strict=False) if i == k
        ),  # NCCL's own lines of its search
        "sweep_pairs": _count(ev.sweeps, k),
        "osu_runs": _count(ev.osu, k),
        "horovod_builds": _count(ev.horovod, k),
        "stated_figures": sum(len(c.figures) for c in ev.prose if c.piece == k),
    }
    counts = {name: n for name, n in shown.items() if n}
    what = ", ".join(f"{n} {name.replace('_', ' ')}" for name, n in counts.items())
    what = what or ("the version it states" if p.version else "nothing it reads")
    said = next((c for c in ev.prose if c.piece == k), None)
    if said is not None:  # the reporter's sentences: what they claim, in their own words
        gpus = f"{said.gpu_count} x " if said.gpu_count else ""
        speed = "said to be slow" if said.slow else ("a question of speed" if said.asks else "")
        claims = [f"{gpus}{said.gpu}" if said.gpu else "", f"{said.nodes} nodes" if said.nodes else "", said.op,
                  f"{said.nic_kind or 'NIC'} {said.nic_gbit_s:g} Gb/s" if said.nic_gbit_s else "",
                  "figures posted as images" if said.images else "",
                  " and ".join(said.hosts) + " host" if said.hosts else "", speed]  # fmt: skip
        what += "".join(f", {c}" for c in claims if c) + " (the reporter's words)"
    where = f"lines {p.first_line}-{p.last_line}" if p.last_line > p.first_line else f"line {p.first_line}"
    version = f" {p.version}" if p.version else ""
    cut = f"; cut: {p.cut}" if p.cut else ""
    evidence = {"kind": p.kind, "source": p.source, "first_line": p.first_line, "last_line": p.last_line,
                "version": p.version, "cut": p.cut, **counts}  # fmt: skip
    return Finding(READ_CODE, READ_NAME, "info", f"{p.source}:{p.first_line}", f"{p.kind}{version} ({where}): "
                   f"{what}{cut}", "", evidence)  # fmt: skip


def read_findings(ev: Evidence) -> tuple[Finding, ...]:
    """A TD980 per piece read, a TD981 per input that showed nothing this reads."""
    out = [_read(ev, k, p) for k, p in enumerate(ev.pieces)]
    for why in ev.unreadable:
        source, _, reason = why.partition(": ")
        out.append(Finding(UNREADABLE_CODE, UNREADABLE_NAME, "info", source, f"not read: {reason}", UNREADABLE_FIX,
                           {"input": source}))  # fmt: skip
    return tuple(out)
