"""Pieces of a real output as people paste them: the rank lines without the `# nThread` header, the clocks
reasons that `grep -A8` leaves without their GPU line, and a paste with an editor's line numbers. Each is cut
from the lent H200 hosts' real output (fixtures/evidence/h200-x4), the way the paste is made."""

from __future__ import annotations

from evidence_support import EVIDENCE, only, read

from topodoctor.evidence.inputs import read_input
from topodoctor.evidence.lines import clean

NCCL = (EVIDENCE / "h200-x4" / "nccl.txt").read_text().splitlines()
SMI_Q = (EVIDENCE / "h200-x4" / "smi_q.txt").read_text().splitlines()


def _grep_after(lines: list[str], word: str, after: int) -> list[str]:
    """`grep -A<after> word`: each match with the lines after it, `--` between groups."""
    out: list[str] = []
    for k, line in enumerate(lines):
        if word in line and line.strip() == word:
            out += (["--"] if out else []) + lines[k : k + after + 1]
    return out


def test_rank_lines_without_the_header_name_the_gpus() -> None:
    ranks = [ln for ln in NCCL if ln.startswith("#  Rank")][:4]
    got = read_input("paste", "\n".join(ranks) + "\n")
    part = got.parts[only(got, "nccl-tests")]
    run = part.collectives[0]
    assert [r.bus_id for r in run.ranks] == ["0000:00:06.0", "0000:00:07.0", "0000:00:08.0", "0000:00:09.0"]
    assert {r.device_name for r in run.ranks} == {"NVIDIA H200"}
    assert got.pieces[0].cut.startswith("no table")


def test_one_gpus_clocks_reasons_without_its_gpu_line_is_a_gpu_index_unknown() -> None:
    section = _grep_after(SMI_Q, "Clocks Event Reasons", 8)[:9]
    section[3] = section[3].replace("Not Active", "Active")  # SW Power Cap, as a capped GPU shows it
    got = read_input("paste", "\n".join(section) + "\n")
    part = got.parts[only(got, "smi-query")]
    (gpu,) = part.gpus
    assert gpu.clock_event_reasons == ("SW Power Cap",) and gpu.bus_id == ""
    assert "index unknown" in got.pieces[0].cut


def test_several_gpus_clocks_reasons_without_gpu_lines_are_not_tied() -> None:
    sections = _grep_after(SMI_Q, "Clocks Event Reasons", 8)
    assert sections.count("--") == 3  # four GPUs
    got = read_input("paste", "\n".join(sections) + "\n")
    piece = got.pieces[only(got, "smi-query")]
    assert got.parts[0].gpus == []
    assert piece.cut == "4 clocks reasons sections without their GPU lines: not tied to GPUs (none active)"


def test_an_editors_line_numbers_are_taken_off() -> None:
    numbered = [f"{k + 1:>6}\t{ln}" for k, ln in enumerate(NCCL[:40])]  # cat -n
    plain = read(EVIDENCE / "h200-x4" / "nccl.txt")
    got = read_input("paste", "\n".join(numbered) + "\n")
    first = got.parts[0].collectives[0]  # the 40 lines hold the first run and the head of the next
    assert first.rows == plain.parts[0].collectives[0].rows
    colon = [f"{k + 12}: {ln}" for k, ln in enumerate(NCCL[5:9])]  # "12: #  Rank  0 ..."
    ranks = read_input("paste", "\n".join(colon) + "\n").parts[0].collectives[0].ranks
    assert len(ranks) == 4


def test_a_matrix_whose_rows_count_up_keeps_its_first_column() -> None:
    rows = "     1   9.59 152.05   9.73\n     2   9.70   9.73 354.79\n     3   9.63   9.62   9.70\n"
    assert clean(rows) == rows.splitlines()
