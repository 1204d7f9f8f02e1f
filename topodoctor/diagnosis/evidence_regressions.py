"""A release's known performance regression matched from every place the evidence shows a version and a
symptom (TD037): the version from NCCL's banner, nccl-tests' header, a version line or a sentence ("NCCL
2.19.3"); the algorithm from NCCL_ALGO (the job's, or said), a sentence ("when using NVLSTree algorithm"),
or NVLS named across nodes (tuning.cc: across nodes without CollNet NCCL turns NVLS off and runs NVLSTree);
the scale from the figure's nodes, NCCL's nNodes or the sentences; the settings a regression needs.

A regression whose symptom the evidence shows and whose range holds the version is named at warning:
"a known performance regression of 2.19.3, fixed in 2.x.y: upgrade NCCL", with its workaround. Where the
evidence names no version, one whose symptom is specific (an algorithm or a setting) is still named at
warning as the likely cause, with the version asked for; where the version is outside its range, it is
ruled out. The table is perf_regressions.py; this module only matches it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.diagnosis.evidence_leads import Leads, Symptom
from topodoctor.diagnosis.evidence_seen import Quote
from topodoctor.diagnosis.perf_regressions import REGRESSIONS, Regression, version_of
from topodoctor.diagnosis.rank import Candidate
from topodoctor.model.evidence import SAID_SETTING
from topodoctor.topology.gpu_models import model_of

RING_RUN = (
    "the same run with NCCL_ALGO=RING (or ^NVLSTree) beside it, with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING"
)

NCCL_TESTS_BOTH = "nccl-tests' output (all_reduce_perf -b 8 -e 8G -f 2) with this release and with the fixed one"


@dataclass(frozen=True)
class Shown:
    """What the evidence shows of a run's NCCL: the version and where, the algorithms and where, the nodes."""

    version: str
    version_from: str
    algorithms: dict[str, Quote]
    nodes: int | None
    across: bool | None  # the run crosses nodes; None where nothing says


def _allowed(value: str) -> set[str]:
    """The algorithms NCCL_ALGO lets run, by their names in upper case (``^`` excludes; 2.24's per-op form
    ``allreduce:nvlstree,ring`` read for all_reduce's list)."""
    text = value.strip()
    if ":" in text:
        parts = dict(p.split(":", 1) for p in text.replace(";", " ").split() if ":" in p)
        text = parts.get("allreduce", parts.get("AllReduce", ""))
    names = {x.strip().upper() for x in text.lstrip("^").split(",") if x.strip()}
    if text.startswith("^"):
        return {"RING", "TREE", "NVLS", "NVLSTREE", "COLLNETDIRECT", "COLLNETCHAIN", "PAT"} - names
    return names


def shown(f: Facts, sym: Symptom | None) -> Shown:
    """The version, the algorithms and the scale the evidence shows."""
    version, where = f.nccl_version, "the evidence's NCCL version"
    if not version:
        said = [(v, s) for s in f.said for v in s.versions]
        if len({v for v, _ in said}) == 1:  # two releases named: one is the one compared with, which is unknown
            version, where = said[0][0], f"the reporter's words ({said[0][1].text[:80]})"
    algos: dict[str, Quote] = {}
    if (algo := f.settings.get("NCCL_ALGO")) is not None and not algo[0].strip().startswith("^"):
        for name in _allowed(algo[0]):
            algos.setdefault(name, algo[1])
    for s in f.said:
        for name in s.algorithms:
            algos.setdefault(name.upper(), Quote(f.where.get(s.piece, "the reporter's words"), s.text))
    nodes = sym.nodes if sym is not None and sym.nodes else (f.nccl_nodes or None)
    nodes = nodes or next((c.nodes for c in f.prose if c.nodes), None)
    across = (nodes > 1) if nodes else (True if any(c.across_nodes for c in f.prose) else None)
    if "NVLS" in algos and across and "NVLSTREE" not in algos and not any(a.startswith("COLLNET") for a in algos):
        algos["NVLSTREE"] = algos["NVLS"]  # tuning.cc: across nodes without CollNet, NVLS runs as NVLSTree
    return Shown(version, where, algos, nodes, across)


def _matches(r: Regression, f: Facts, sym: Symptom | None, s: Shown) -> bool:
    """Whether the evidence shows the regression's symptom (its version range is weighed apart)."""
    arch = f.model.arch if f.model is not None else ""
    if r.arch and arch and arch not in r.arch:
        return False
    # the model from the tools' output, else from the sentences ("H800*8"), as the expectation takes it
    model = f.model or next((m for p in f.prose if p.gpu_model and (m := model_of(p.gpu_model))), None)
    if r.models and not (model is not None and model.name.startswith(r.models)):
        return False
    if r.multinode and s.across is False:
        return False
    if r.min_nodes and s.nodes and s.nodes < r.min_nodes:
        return False
    if r.ops and sym is not None and sym.kind == "collective" and sym.subject not in r.ops:
        return False
    if r.algo and r.algo.upper() not in s.algorithms:
        return False
    if r.setting[0]:
        got = f.settings.get(r.setting[0])
        if got is None or got[0].strip() != r.setting[1]:
            return False
    return bool(r.algo or r.setting[0] or r.models or r.ops or r.min_nodes)


def _what(r: Regression, s: Shown, in_range: bool) -> str:
    fixed = f"fixed in {r.fixed}: upgrade NCCL" if r.fixed else "no release has dropped it yet"
    if in_range:
        release = s.version.split("+")[0]
        head = f"a known performance regression of NCCL {release} ({r.span}), {fixed}"
    else:
        head = f"likely a known performance regression of NCCL {r.span} (the evidence names no version), {fixed}"
    return f"{head}: {r.where}: {r.what}"


def regression_causes(f: Facts, sym: Symptom | None, out: Leads) -> None:
    """TD037 for every regression of the table whose symptom the evidence shows (``perf_regressions`` rows
    without a symptom of their own, matched by version and hardware alone, stay version_causes' to name)."""
    s = shown(f, sym)
    v = version_of(s.version) if s.version else None
    for r in REGRESSIONS:
        if r.sizes != "large" or r.sign or not _matches(r, f, sym, s):
            continue
        if v is not None and not r.first <= v <= r.last:
            out.rule_out(f"NCCL {s.version.split('+')[0]}'s regressions: {r.where} ({r.span}) is not in it")
            continue
        if v is None and (not r.specific or r.fixed):
            continue  # no version: only a regression every release since its first still has is likely
        if sym is None and not r.specific and not (r.models and v is not None and any(c.slow for c in f.prose)):
            # one of a model or an op alone is a cause of a short figure only, as version_causes' are; or, for a
            # model, of a run the reporter says is short on that model with a release in the range
            continue
        what = _what(r, s, v is not None)
        fix = f"Upgrade NCCL to {r.fixed} or later." if r.fixed else f"Compare with NCCL {r.unaffected}."
        if r.workaround:
            fix += f" Meanwhile: {r.workaround}."
        if v is None:
            fix += " Confirm the version first (NCCL_DEBUG=VERSION, or nccl-tests' header)."
        if r.algo:
            fix += f" To tell it from the network, post {RING_RUN}."
        if sym is None and not r.specific:  # the reporter's word that it is slow, no figure
            fix += f" No figure shows the shortfall: post {NCCL_TESTS_BOTH} to confirm."
        ev = {"source": r.source, "fixed": r.fixed, "unaffected": r.unaffected, "range": r.span,
              "version_from": s.version_from if v is not None else "", "workaround": r.workaround}  # fmt: skip
        lines = tuple(q for name, q in s.algorithms.items() if name == r.algo.upper())[:1]
        out.add("TD037", Candidate(what, fix, ev, None, direct=False), lines, severity="warning")


_NODES = re.compile(r"\b(\d+)\s*(?:nodes?|servers?|machines?|hosts?)\b", re.I)


def _node_counts(f: Facts) -> dict[int, float]:
    """Each node count the evidence shows a multi-node figure at, with the figure: nccl-tests' runs by their
    hosts, the sentences' figures by the count their sentence names (else the post's nodes)."""
    got: dict[int, float] = {}
    for m in f.measured:
        nodes = len(set(m.rank_hosts)) or m.nodes or 0
        if nodes > 1:
            got[nodes] = max(got.get(nodes, 0.0), m.busbw_gbps)
    for c in f.prose:
        for fig in c.figures:
            if fig.role != "measured" or fig.tool:
                continue
            said = _NODES.search(fig.sentence)
            nodes = int(said.group(1)) if said else (c.nodes or 0)
            if nodes > 1:
                got[nodes] = max(got.get(nodes, 0.0), fig.gbps)
    return got


def nvls_across_nodes(f: Facts, sym: Symptom | None, out: Leads) -> None:
    """TD991: NVLS (NVLSTree across nodes) figures compared across node counts, which NCCL's own model does not
    hold to one rate: tuning.cc credits NVLSTree on two nodes with twice the inter-node bandwidth it gives more
    nodes (2.19 - 2.24: ``nNodes <= 2 ? bwInter : bwInter/2``; 2.28: ``bwInter * (nNodes <= 2 ? 2 : 1)``), and
    from 2.19.3 on 4 nodes or more it moves 64 KiB chunks. Cannot tell from the figures alone: the ring run on
    both counts and NCCL's log decide."""
    if sym is not None:
        return
    s = shown(f, None)
    if "NVLSTREE" not in s.algorithms and not any(c.nvls for c in f.prose):
        return
    counts = _node_counts(f)
    if len(counts) < 2 or max(counts) <= 2:
        return
    seen = ", ".join(f"{g:g} GB/s on {n} nodes" for n, g in sorted(counts.items()))
    what = f"NVLS across nodes ({seen}) compared by node count: cannot tell a fault from the figures. NCCL runs NVLS "
    what += "across nodes as NVLSTree (tuning.cc turns NVLS off across nodes without CollNet), and its model credits "
    what += "NVLSTree on two nodes with twice the inter-node bandwidth it gives more nodes, so a two-node figure "
    what += "overstates what more nodes reach; from 2.19.3 NVLSTree also moves 64 KiB chunks on 4 nodes or more. "
    what += f"Post {RING_RUN}, on each node count"
    said = [q for name, q in s.algorithms.items() if name in ("NVLS", "NVLSTREE")]
    lines = tuple(sorted(said, key=lambda q: q.text.startswith(SAID_SETTING)))[:1]  # a tool's line or a sentence first
    ev = {"figures": {str(n): g for n, g in sorted(counts.items())}, "post": [RING_RUN]}
    fix = f"Run the same sizes with NCCL_ALGO=RING on both node counts and post them with NCCL_DEBUG=INFO; {RING_RUN}."
    out.add("TD991", Candidate(what, fix, ev, None, direct=False), lines, "nvls", "warning")
