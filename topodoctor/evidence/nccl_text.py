"""NCCL's own output in a paste: its INFO / WARN lines, read by ``nccl.account`` (the grammar
``nccl-log`` reads: one grammar, not a second one), and NCCL Inspector's per-collective records
(the profiler plugin of NCCL 2.28 and later, plugins/profiler/inspector: one JSON object per
completed collective)::

    host:2632:2632 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
    {"header": {"id": "0x7f..", "rank": 2, "n_ranks": 8, "nnodes": 1},
     "metadata": {"inspector_output_format_version": "v4.0", "hostname": "...", "pid": 1639453},
     "coll_perf": {"coll": "AllReduce", "coll_sn": 1407, "coll_msg_size_bytes": 17179869184,
                   "coll_exec_time_us": 61974, "coll_algobw_gbs": 277.2, "coll_busbw_gbs": 485.1}}

NCCL's lines come one by one among a program's other output, so the piece is every such line of an
input, wherever it stands.
"""

from __future__ import annotations

import json
import re
import statistics
from typing import Any

from topodoctor.evidence.lines import Block, Parts
from topodoctor.model.collective_ops import SPECS, Op
from topodoctor.model.collectives import RankInfo, Row, Timing
from topodoctor.model.evidence import CollectiveRun, EvidenceSetting, NcclLine
from topodoctor.nccl.account import account
from topodoctor.nccl.grammar import ORIGIN
from topodoctor.nccl.parse import parse_file

_NCCL = re.compile(r"\bNCCL (?:INFO|WARN|TRACE)\b|^NCCL version \d")  # the banner has no level before 2.5
# NCCL's INFO messages pasted without their prefix (a quote in a thread): the ones that say how NCCL
# connected the ranks and what it read, in the words of init.cc, transport.cc and net_*.cc
_BARE = re.compile(
    r"^\s*NCCL_\w+ set by environment to |(?<!\d)\d+\[[\w.:]+\] -> \d+\[[\w.:]+\] (?:\[(?:send|receive)\] )?via "
    r"|^\s*(?:NET/(?:IB|Socket|Plugin) ?: |Using network \w|GPU Direct RDMA (?:Dis|En)abled for )"
    r"|^\s*(?:libibverbs: )?Warning: no userspace device-specific driver found for "  # on the same stderr
)
INSPECTOR_OPS: dict[str, Op] = {
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "Reduce": "reduce",
    "All2All": "all_to_all",
    "AllToAll": "all_to_all",
    "SendRecv": "sendrecv",
}
MAX_RECORDS = 200_000
MAX_FAILURE_SCAN_LINES = 50_000  # nccl-log's reader on the whole input; a longer one is read by its NCCL lines


def nccl_lines(lines: list[str]) -> list[int]:
    """The lines NCCL wrote (its INFO, WARN and TRACE lines), and the lines nccl-log's reader takes for
    a failure of NCCL's (a framework's "NCCL error ... NCCL version" text, a return-code trail)."""
    own = {k for k, line in enumerate(lines) if _NCCL.search(line) or _BARE.search(line)}
    if len(lines) <= MAX_FAILURE_SCAN_LINES:
        events = parse_file("", "\n".join(lines)).events  # nccl-tests' own lines (its rank lines) are its reader's
        own |= {e.line_no - 1 for e in events if 0 < e.line_no <= len(lines) and e.kind != "separate-tests"}
    return sorted(own)


def read_nccl_log(lines: list[str], taken: list[int], piece: int) -> Block:
    """NCCL's account of the lines ``taken`` (and the variables it says were set)."""
    parts = Parts()
    text = "\n".join(lines[taken[0] : taken[-1] + 1])
    got = account([text])
    parts.nccl = got
    # nccl-log's reader of the same text: the versions and variables of logs the account does not take
    # (a banner without its INFO prefix, before NCCL 2.5; a log of settings and no connection)
    seen = parse_file("", text)
    env = dict(seen.env)
    cut = ""
    if got is None:
        cut = "NCCL lines, but none that says how NCCL connected the ranks (NCCL_DEBUG=INFO at init shows it)"
    else:
        env.update(got.env)
    parts.settings += [EvidenceSetting(piece, k, v, "NCCL INFO") for k, v in env.items()]
    parts.nccl_lines = [_line(lines[k], k, piece) for k in taken]
    version = (got.version if got else None) or (seen.versions[0] if seen.versions else "")
    return Block("nccl-log", taken[0], taken[-1] + 1, parts, version, cut, tuple(taken))


def _line(text: str, k: int, piece: int) -> NcclLine:
    """One of NCCL's lines as the diagnosis quotes it: from "NCCL" on where NCCL's level stands in it (the
    launcher's and NCCL's prefixes dropped), else the whole line; the host and device of NCCL's prefix."""
    at = text.find("NCCL ")
    m = ORIGIN.search(text)
    own = m is not None or _NCCL.search(text) is not None
    return NcclLine(
        piece,
        k + 1,
        (text[at:] if own and at >= 0 else text).strip(),
        m["host"] if m else "",
        int(m["dev"]) if m else None,
    )


def is_inspector(doc: Any) -> bool:
    """Whether a JSON object is one of NCCL Inspector's records."""
    if not isinstance(doc, dict):
        return False
    meta = doc.get("metadata")
    return (
        "coll_perf" in doc
        or "p2p_perf" in doc
        or (isinstance(meta, dict) and "inspector_output_format_version" in meta)
    )


def json_objects(text: str) -> tuple[list[Any], str]:
    """The JSON documents one after another in ``text`` (a JSON-lines file, or objects written back to
    back), and what could not be read ('' when all of it)."""
    dec = json.JSONDecoder()
    out: list[Any] = []
    k = 0
    n = len(text)
    while k < n and len(out) < MAX_RECORDS:
        while k < n and text[k] in " \t\r\n,":
            k += 1
        if k >= n:
            break
        try:
            doc, k = dec.raw_decode(text, k)
        except (ValueError, RecursionError):
            line = text.count("\n", 0, k) + 1
            return out, f"the JSON ends or breaks at line {line}"
        out.append(doc)
    return out, "" if k >= n else f"more than {MAX_RECORDS} records: the rest is not read"


def read_inspector(records: list[Any], piece: int) -> Parts:
    """Inspector's records as one run per communicator and op: each size's median time and rates."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    heads: dict[tuple[str, str], tuple[int | None, int | None, list[RankInfo]]] = {}
    for doc in records:
        if not is_inspector(doc):
            continue
        head = doc.get("header") if isinstance(doc.get("header"), dict) else {}
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        perf = doc.get("coll_perf")
        if not isinstance(perf, dict) or str(perf.get("coll")) not in INSPECTOR_OPS:
            continue
        key = (str(head.get("id", "")), str(perf.get("coll")))
        groups.setdefault(key, []).append(perf)
        n_ranks, nodes, ranks = heads.get(key, (_int(head.get("n_ranks")), _int(head.get("nnodes")), []))
        rank = _int(head.get("rank"))
        if rank is not None and all(r.rank != rank for r in ranks):
            ranks.append(RankInfo(rank, -1, str(meta.get("hostname", "")), _int(meta.get("pid")) or 0, None, None))
        heads[key] = (n_ranks, nodes, ranks)
    parts = Parts()
    for key, perfs in groups.items():
        op = INSPECTOR_OPS[key[1]]
        by_size: dict[int, list[dict[str, Any]]] = {}
        for p in perfs:
            size = _int(p.get("coll_msg_size_bytes"))
            if size is not None:
                by_size.setdefault(size, []).append(p)
        rows = []
        for size, ps in sorted(by_size.items()):
            got = [
                (_num(p.get("coll_exec_time_us")), _num(p.get("coll_algobw_gbs")), _num(p.get("coll_busbw_gbs")))
                for p in ps
            ]
            full = [(t, a, b) for t, a, b in got if t is not None and a is not None and b is not None]
            if not full:
                continue
            timing = Timing(
                statistics.median(t for t, _, _ in full),
                statistics.median(a for _, a, _ in full),
                statistics.median(b for _, _, b in full),
                None,
            )
            # Inspector prints no element count or type: count 0 and no type say "not shown"
            rows.append(Row(op, size, 0, "", SPECS[op].redop, -1, timing, None))
        n_ranks, nodes, ranks = heads[key]
        parts.collectives.append(
            CollectiveRun(
                piece, op, tuple(rows), tuple(sorted(ranks, key=lambda r: r.rank)), n_ranks, nodes,
            )
        )  # fmt: skip
    return parts


def _int(v: Any) -> int | None:
    return (
        v if isinstance(v, int) and not isinstance(v, bool) else int(v) if isinstance(v, str) and v.isdigit() else None
    )


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
