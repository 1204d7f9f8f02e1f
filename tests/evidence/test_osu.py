"""The OSU micro-benchmarks' bandwidth tables: where the buffers were, and the rows, as people paste them."""

from __future__ import annotations

from conftest import FIXTURES
from evidence_support import kinds, only, read

from topodoctor.evidence.inputs import read_input

CASE = FIXTURES / "diagnose" / "holdout20" / "d20-02"  # openucx/ucx#3984: osu_bw H D, D H, D D over FDR


def test_the_cuda_build_s_header_names_both_buffers() -> None:
    got = read(CASE / "evidence-2.txt")  # "# Send Buffer on HOST (H) and Receive Buffer on DEVICE (D)", [...] inside
    (run,) = got.parts[only(got, "osu-bandwidth")].osu
    assert (run.test, run.send, run.recv) == ("bw", "host", "device")
    assert run.rows[:2] == ((1, 1.58), (2, 4.46)) and run.rows[-1] == (4194304, 6098.41) and len(run.rows) == 6


def test_the_command_line_names_the_buffers_where_the_header_does_not() -> None:
    text = "$ mpirun -np 2 ./osu_bibw D H\n# OSU MPI Bi-Directional Bandwidth Test v7.2\n# Size      Bandwidth (MB/s)\n"
    text += "1 0.5\n4194304 11000.00\n"
    (run,) = read_input("paste.txt", text).parts[1].osu
    assert (run.test, run.send, run.recv, run.rows[-1]) == ("bibw", "device", "host", (4194304, 11000.0))
    bare = read_input("paste.txt", text.replace("./osu_bibw D H", "./osu_bibw"))
    assert [(r.send, r.recv) for p in bare.parts for r in p.osu] == [("", "")]


def test_a_second_run_s_title_ends_the_first() -> None:
    one = "# OSU MPI-CUDA Bandwidth Test v5.6.1\n# Send Buffer on DEVICE (D) and Receive Buffer on DEVICE (D)\n"
    one += "# Size      Bandwidth (MB/s)\n65536 345.38\n"
    got = read_input("paste.txt", one + one.replace("DEVICE (D) and", "HOST (H) and").replace("345.38", "6000.1"))
    assert kinds(got) == ["osu-bandwidth", "osu-bandwidth"]
    assert [(r.send, r.rows) for p in got.parts for r in p.osu] == [("device", ((65536, 345.38),)),
                                                                    ("host", ((65536, 6000.1),))]  # fmt: skip
