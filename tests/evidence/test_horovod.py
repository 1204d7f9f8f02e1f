"""Horovod's `--check-build` account: each section's names and whether they are built, as people paste it."""

from __future__ import annotations

from conftest import FIXTURES
from evidence_support import only, read

from topodoctor.evidence.inputs import read_input

CASE = FIXTURES / "diagnose" / "holdout25" / "d25-01"  # horovod/horovod#2686: v0.21.2 with Gloo only


def test_the_sections_and_their_marks() -> None:
    got = read(CASE / "evidence-2.txt")
    (build,) = got.parts[only(got, "horovod-build")].horovod
    assert build.version == "0.21.2" and build.line == 1
    assert build.frameworks == (("TensorFlow", False), ("PyTorch", True), ("MXNet", False))
    assert build.controllers == (("MPI", False), ("Gloo", True))
    assert [n for n, built in build.operations if built] == ["Gloo"] and ("NCCL", False) in build.operations


def test_a_version_line_alone_is_no_build_account() -> None:
    got = read_input("paste.txt", "Horovod v0.28.1:\nsome other output\n")
    assert not [b for p in got.parts for b in p.horovod]


def test_the_build_ends_at_the_first_line_that_is_not_its_own() -> None:
    text = "Horovod v0.28.1:\n\nAvailable Tensor Operations:\n    [X] NCCL\n    [ ] Gloo\n$ nvidia-smi\n"
    got = read_input("paste.txt", text)
    (build,) = got.parts[only(got, "horovod-build")].horovod
    assert build.operations == (("NCCL", True), ("Gloo", False))
    piece = got.pieces[only(got, "horovod-build")]
    assert (piece.first_line, piece.last_line) == (1, 5)
