"""What `topodoctor nccl-log` prints: a summary of the logs (versions per rank, ranks and nodes,
transports per peer, channels, NCCL's choices) and the findings. Plain data in, text or a JSON
document out."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len, chop_cells, set_cell_size

from topodoctor.core.text import PIPE_WIDTH, human_size, plural
from topodoctor.model.findings import Finding
from topodoctor.nccl.choices import PATTERNS, Choice
from topodoctor.nccl.parse import LogFile

DEFAULT_WIDTH = PIPE_WIDTH  # a caller that names no width: the width of a pipe (core/text.py)
MIN_WIDTH = 40


def summary(files: Sequence[LogFile]) -> dict[str, Any]:
    """What the logs say about the run, merged over files (JSON-ready)."""
    versions: dict[str, list[int | str]] = {}
    for f in files:
        for v in f.versions:
            versions.setdefault(v, []).extend(f.ranks or [f.name.rsplit("/", 1)[-1]])
    accounts = [f.account for f in files if f.account is not None]
    main = max(accounts, key=lambda a: a.ranks or 0) if accounts else None
    conns: dict[tuple[int, int, str], int] = {}
    for a in accounts:
        for c in a.connections:
            key = (c.rank, c.peer, c.transport)
            conns[key] = max(conns.get(key, 0), c.channels)
    calls: dict[tuple[str, int], Choice] = {}
    for f in files:
        for call in f.choices.calls if f.choices else ():
            calls.setdefault((call.op, call.size_bytes), call)
    graphs = next((f.choices.graphs for f in files if f.choices and f.choices.graphs), ())
    failed = dict.fromkeys(n for f in files if f.choices for n in f.choices.failed)
    return {
        "files": [
            {
                "name": f.name,
                "nccl_debug": f.level,
                "ranks": list(f.ranks),
                "hosts": list(f.hosts),
                "events": len(f.events),
            }
            for f in files
        ],
        "versions": {v: sorted(set(r), key=str) for v, r in versions.items()},
        "said_versions": list(dict.fromkeys(v for f in files for v in f.said_versions)),
        "ranks": main.ranks if main else _count_ranks(files),
        "nodes": main.nodes if main else None,
        "channels": main.channels if main else None,
        "transports": [{"from": a, "to": b, "via": t, "channels": n} for (a, b, t), n in sorted(conns.items())],
        "choices": [
            {
                "op": c.op,
                "size_bytes": c.size_bytes,
                "algorithm": c.algorithm,
                "protocol": c.protocol,
                "channels": c.channels,
                "calls": c.calls,
            }
            for _, c in sorted(calls.items())
        ],
        "graphs": [
            {
                "pattern": g.pattern,
                "channels": g.channels,
                "bw_intra_gbps": g.bw_intra_gbps,
                "bw_inter_gbps": g.bw_inter_gbps,
                "type": f"{g.type_intra}/{g.type_inter}",
                "fallback": g.fallback,
            }
            for g in graphs
        ],
        "search_failed": list(failed),  # patterns whose graph search found no path (search.cc's simple order)
        "env": {k: v for f in files for k, v in f.env.items()},
    }


def _count_ranks(files: Sequence[LogFile]) -> int | None:
    ranks = {r for f in files for r in f.ranks}
    return len(ranks) or None


def text(s: dict[str, Any], findings: Sequence[Finding], width: int = DEFAULT_WIDTH) -> str:
    """The report for people, every line within ``width`` columns (the JSON keeps everything)."""
    width = max(width, MIN_WIDTH)
    out: list[str] = []
    levels = sorted({f["nccl_debug"] for f in s["files"]})
    out.append(f"{plural(len(s['files']), 'file')}, NCCL_DEBUG as seen: {', '.join(levels)}")
    if s["versions"]:
        for v, ranks in s["versions"].items():
            out.append(f"NCCL {v}: {', '.join(str(r) if isinstance(r, int) else r for r in ranks)}")
    elif s["said_versions"]:
        out.append(f"NCCL version: no banner; the text names {', '.join(s['said_versions'])}")
    else:
        out.append("NCCL version: not in the logs")
    parts = [plural(s[k], k[:-1]) for k in ("ranks", "nodes", "channels") if s[k] is not None]
    if parts:
        out.append(", ".join(parts))
    if s["transports"]:
        out.append(
            "transports: "
            + "; ".join(f"{t['from']}->{t['to']} {t['via']} {t['channels']} ch" for t in s["transports"][:16])
        )
    if s["graphs"]:
        out.append(
            "graphs: "
            + "; ".join(
                f"{g['pattern']} {g['channels']} ch x {g['bw_intra_gbps']:g}/{g['bw_inter_gbps']:g} GB/s {g['type']}"
                for g in s["graphs"]
            )
        )
    if s["search_failed"]:
        names = ", ".join(f"{n} ({PATTERNS.get(n, '?')})" for n in s["search_failed"])
        out.append(f"graph search: no path for pattern {names}; NCCL fell back to one channel in rank order")
    by_op: dict[str, list[str]] = {}
    for c in s["choices"]:
        ch = f" {c['channels']} ch" if c["channels"] is not None else ""
        by_op.setdefault(c["op"], []).append(f"{human_size(c['size_bytes'])} {c['algorithm']}/{c['protocol']}{ch}")
    for op, items in by_op.items():
        out.append(f"{op}: " + ", ".join(items))
    lines = [w for line in out for w in _wrap(line, width, "  ")]
    if not findings:
        lines.append("no failure found")
    for f in findings:
        lines += _wrap(f"{f.code} {f.severity} {f.subject}: {f.message}", width, "  ")
        ev = f.evidence
        if "file" in ev:
            where = f"{str(ev['file']).rsplit('/', 1)[-1]}:{ev['line']}: "
            lines.append(_shorten(f"  evidence: {where}{ev['text']}", width))
        lines += _wrap(f"  fix: {f.fix}", width, "       ")
    return "\n".join(lines)


def _wrap(line: str, width: int, indent: str) -> list[str]:
    """``line`` broken at spaces to ``width`` columns; a word longer than a line is cut, and a run of wide
    characters (CJK, two columns each, which textwrap counts as one) is cut by its columns."""
    out: list[str] = []
    for piece in textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False) or [""]:
        if cell_len(piece) <= width:
            out.append(piece)
            continue
        head, *rest = chop_cells(piece, width)
        out.append(head)
        out += [indent + r for r in chop_cells("".join(rest), width - len(indent))] if rest else []
    return out


def _shorten(line: str, width: int) -> str:
    """``line`` cut to ``width`` columns (a wide character takes two), the cut marked."""
    return line if cell_len(line) <= width else set_cell_size(line, width - 3).rstrip() + "..."
