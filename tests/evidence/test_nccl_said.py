"""NCCL's and nvidia-smi's names in a reporter's sentences (evidence/nccl_said.py): algorithms by NCCL_ALGO's
names, releases, path classes beside NVLink, NICs said used; read beside the prose reader, never instead of it."""

from __future__ import annotations

from pathlib import Path

from topodoctor.evidence.inputs import context_only, join, read_input

DIAGNOSE = Path(__file__).resolve().parents[2] / "fixtures" / "diagnose"


def test_nvlstree_in_a_sentence_beside_a_table() -> None:
    """pytorch#117748: the algorithm in words above nccl-tests' row; the names join the input's piece."""
    p = DIAGNOSE / "holdout6" / "g-02" / "evidence-1.txt"
    ev = join([read_input(p.name, p.read_text())])
    assert [x.algorithms for x in ev.nccl_said] == [("NVLSTree",)]
    assert [k.kind for k in ev.pieces] == ["nccl-tests"] and ev.nccl_said[0].piece == 0
    assert ev.nccl_said[0].rented  # "8 AWS P5 nodes"


def test_names_alone_are_a_piece_of_their_own() -> None:
    got = read_input("n.txt", "The run was much slower when NCCL picked the NVLSTree algorithm on our nodes.\n")
    assert [k.kind for k in got.pieces] == ["nccl-words"]


def test_the_prose_keeps_its_sentences_and_figures() -> None:
    """nccl#1031: the NVLS sentences are the prose reader's too: its figures stay, the names join its piece."""
    p = DIAGNOSE / "holdout6" / "g-11" / "evidence-1.txt"
    got = read_input(p.name, p.read_text())
    assert [k.kind for k in got.pieces] == ["prose"]
    assert [f.gbps for c in got.parts[0].prose for f in c.figures] == [180.0, 310.0]
    assert {a for s in got.parts[0].nccl_said for a in s.algorithms} == {"NVLS"}


def test_common_words_are_not_names() -> None:
    """A ring of people and a tree of files are not NCCL's algorithms; a path class in lower case is a word."""
    ev = join([read_input("notes.txt", "We sat in a ring and looked at the tree of files on the node sys.\n")])
    assert not ev.nccl_said and not ev.pieces


def test_a_release_alone_in_a_sentence_is_no_piece() -> None:
    """A version inside a sentence may be the release compared with: alone it is not something to judge, only the
    context of other inputs (diagnose refuses an input of context alone)."""
    got = read_input("v.txt", "With NCCL 2.29.7 it is slower than with 2.29.2 on our cluster of nodes.\n")
    assert [p.kind for p in got.pieces] == ["nccl-words"] and context_only(got)


def test_nics_named_and_the_one_used() -> None:
    p = DIAGNOSE / "holdout6" / "g-14" / "evidence-1.txt"
    ev = join([read_input(p.name, p.read_text())])
    said = [s for s in ev.nccl_said if s.nics_used is not None]
    assert [(s.nics_used, s.nics_named) for s in said] == [(1, ("mlx5_0", "mlx5_1"))]
