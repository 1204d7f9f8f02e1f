"""What was read of the evidence comes first in the judgement: a TD980 per piece, a TD981 per input
that held nothing it reads."""

from __future__ import annotations

from evidence_cases import evidence, topo
from evidence_support import ROOT

from topodoctor.diagnosis.evidence import judge
from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.evidence import Evidence, Piece


def test_each_piece_read_and_each_unreadable_input_is_said_first() -> None:
    cells = "      GPU0 GPU1\nGPU0 X NV18\nGPU1 NV18 X"
    ev = evidence(topo(cells, piece=1), pieces=2)
    ev = Evidence(pieces=(*ev.pieces[:1], Piece("topo-matrix", "topo.txt", 3, 9, cut="the matrix ends at GPU1")),
                  pairs=ev.pairs, unreadable=("notes.txt: holds no kind of text diagnose reads",))  # fmt: skip
    found = judge(ev)
    assert [f.code for f in found[:3]] == ["TD980", "TD980", "TD981"]
    assert found[1].subject == "topo.txt:3" and found[1].evidence["pairs"] == 4
    assert "cut: the matrix ends at GPU1" in found[1].message
    assert found[2].subject == "notes.txt" and found[2].message == "not read: holds no kind of text diagnose reads"


def test_a_sweep_table_and_a_version_line_say_what_they_showed() -> None:
    """A pair-sweep piece counts its pairs; a version line, which shows no part, says its version."""
    ev = join([read_input("sweep.txt", "n1,n2 49.1\nn2,n3 88.0\n"), read_input("v.txt", "NCCL 2.29.7\n")])
    read = [f.message for f in judge(ev) if f.code == "TD980"]
    assert read == [
        "pair-sweep (lines 1-2): 2 sweep pairs",
        "version-line NCCL 2.29.7 (line 1): the version it states",
    ]


def test_the_reporters_sentences_say_what_they_claim() -> None:
    """nccl#412's sentences (fixtures/diagnose/holdout4/e-07) as read: the claims in the reporter's own words."""
    path = ROOT / "fixtures" / "diagnose" / "holdout4" / "e-07" / "evidence-1.txt"
    read = [f for f in judge(join([read_input(path.name, path.read_text())])) if f.code == "TD980"]
    assert [f.message for f in read] == [
        "prose (lines 2-6): 3 stated figures, 8 x a800, 12 nodes, all_reduce, HDR 200 Gb/s, a question of speed "
        "(the reporter's words)"
    ]
    assert read[0].evidence["stated_figures"] == 3
