"""The judgement of evidence as the diagnosis tests read it: the findings about the hardware, without
the per-piece account of what was read (TD980, TD981; test_evidence_read.py holds those)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from topodoctor.diagnosis import evidence
from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.evidence import Evidence
from topodoctor.model.findings import Finding, finding_json

READ = ("TD980", "TD981")


def _diagnose_scorer() -> Any:
    """tests/diagnosis/score_corpus.py as a module of its own name: tests/nccl holds a scorer of the same file
    name, and whichever a run imports first would shadow the other."""
    path = Path(__file__).resolve().parents[1] / "diagnosis" / "score_corpus.py"
    spec = importlib.util.spec_from_file_location("diagnose_score_corpus", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


SCORER: Any = sys.modules.get("diagnose_score_corpus") or _diagnose_scorer()


def judge(ev: Evidence) -> tuple[Finding, ...]:
    """``evidence.judge`` less what was read."""
    return tuple(f for f in evidence.judge(ev) if f.code not in READ)


def evidence_of(*paths: Path) -> Evidence:
    """The files read and joined as ``topodoctor diagnose`` reads them (pieces numbered across the files)."""
    reads, first = [], 0
    for p in paths:
        reads.append(read_input(str(p), p.read_text(), first))
        first += len(reads[-1].pieces)
    return join(reads)


def case_findings(folder: Path) -> tuple[Finding, ...]:
    """What is judged on one case folder's ``evidence-*.txt`` files, less what was read."""
    return judge(evidence_of(*sorted(folder.glob("evidence-*.txt"))))


def cases_of(folder: Path) -> dict[str, Any]:
    """A set's cases by name, from its README table as the scorer reads it."""
    return {c.name: c for c in SCORER.read_cases(folder / "README.md")}


def assert_holds(case: Any, folder: Path) -> None:
    """The case's folder gets a right verdict by the scorer's own rules."""
    got, note = SCORER.judge(case, [finding_json(f) for f in case_findings(folder)])
    assert got in ("named-right", "normal-right"), (case.name, got, note)


def one_finding(folder: Path, code: str) -> Finding:
    """The one finding of ``code`` on a case folder (the assertion lists what was found instead)."""
    found = case_findings(folder)
    got = [f for f in found if f.code == code]
    assert len(got) == 1, [(f.code, f.severity, f.message[:100]) for f in found]
    return got[0]


# nccl-tests' rank lines and `topo -m` of two H100 SXM on one host: the pair the cause and settings tests hold
# their tables against
H100_X2_RANKS = """
#  Rank  0 Group  0 Pid   2972 on   h100 device  0 [0000:00:06] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   2973 on   h100 device  1 [0000:00:07] NVIDIA H100 80GB HBM3
"""
H100_X2_TOPO = """
        GPU0    GPU1    CPU Affinity    NUMA Affinity
GPU0     X      NV18    0-31    0
GPU1    NV18     X      0-31    0
"""


def all_reduce_row(busbw: float) -> str:
    """nccl-tests' all_reduce row at 1 GiB on two ranks (busbw = algbw there)."""
    t = 1073741824 / busbw / 1e3
    return f"  1073741824     268435456     float     sum      -1  {t:.1f}  {busbw:.2f}  {busbw:.2f}    0  {t:.1f}  {busbw:.2f}  {busbw:.2f}    0"  # noqa: E501


def judged_with(folder: Path, *replace: tuple[str, str]) -> list[Finding]:
    """The findings of a case folder, every file one input, after each (old, new) replacement in them."""
    texts = [p.read_text() for p in sorted(folder.iterdir()) if p.is_file()]
    for old, new in replace:
        texts = [t.replace(old, new) for t in texts]
    return list(judge(join([read_input(f"evidence-{k}.txt", t) for k, t in enumerate(texts)])))
