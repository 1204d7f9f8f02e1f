"""Cases of the scored sets (fixtures/diagnose/holdout, holdout6) now development input, held by the scorer's own
rules: a pasted table of step times read as the sentences it stands for (a row's label with its columns' words
and units), a time stated against the one expected read as a run said to be slow, and one input that only
names the host (a later post's "cleaning the instance") kept as the other inputs' context."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests_support_evidence import assert_holds, case_findings, cases_of, evidence_of

from topodoctor.core.budget import Budget
from topodoctor.core.errors import InputError
from topodoctor.evidence import prose_tables, scaling
from topodoctor.service.diagnose import diagnose

ROOT = Path(__file__).resolve().parents[2]
HOLDOUT = ROOT / "fixtures" / "diagnose" / "holdout"
HOLDOUT6 = ROOT / "fixtures" / "diagnose" / "holdout6"


@pytest.mark.parametrize(("folder", "name"), [(HOLDOUT, "s-03"), (HOLDOUT6, "g-10")])
def test_each_fixed_case_holds_its_verdict(folder: Path, name: str) -> None:
    assert_holds(cases_of(folder)[name], folder / name)


def test_a_rented_sxm_host_whose_eta_is_four_times_the_expected_asks_for_topo_first() -> None:
    """stanford_alpaca#32: 4 x A100-SXM4-80GB, a 24 h ETA where "around 6hours" was expected; the second post
    says the instance was cleaned. No topo -m: TD031 at warning, as candidates (no cause), topo -m asked for."""
    f = next(x for x in case_findings(HOLDOUT6 / "g-10") if x.code == "TD031")
    assert f.severity == "warning" and "rented or cloud instance said to be slow" in f.message
    assert "nvidia-smi topo -m" in str(f.evidence["post"])
    assert "cannot tell without `nvidia-smi topo -m`" in f.message


def test_a_time_longer_than_the_one_expected_says_slow() -> None:
    text = "I am getting an 24H ETA on 4 GPUs. Shouldn't it be around 6hours?"
    said = scaling.read([(0, text)], 0)
    assert said is not None and scaling.behind(text, said)
    near = "The run takes 7 hours to finish. I expected about 6 hours."
    assert not scaling.behind(near, scaling.read([(0, near)], 0))  # within an estimate's slack
    shorter = "It now takes 3 hours to train, where I expected 6 hours."
    assert not scaling.behind(shorter, scaling.read([(0, shorter)], 0))
    # a step's expected time is not held against a whole run's: 24 h to finish says nothing of a 2 s step
    mixed = "The ETA is 24 hours. A step should take 2 s per iteration."
    assert not scaling.behind(mixed, scaling.read([(0, mixed)], 0))
    assert not scaling.behind(text, None)  # no time stated


def test_a_pasted_table_reads_as_its_rows_sentences() -> None:
    """scottclowe/pytorch-experiment-template#11: GitHub's rendered table copied back (an empty corner cell, the
    header's units in brackets)."""
    lines = (HOLDOUT / "s-03" / "evidence-1.txt").read_text().splitlines()
    rows = prose_tables.sentences(list(enumerate(lines)))
    assert rows[1] == rows[2] == ""  # the header and the separator
    assert rows[3] == "RoCE Enabled: Train Step Duration 2.51 s; GPU Processing Time 0.58 s; GPU Idle Time 76.89 %."
    assert rows[5] == "RoCE Reduction: Train Step Duration 56.1 %."  # the label's own unit
    said = scaling.read([(k, t) for k, t in rows.items() if t], 0)
    assert said is not None and [(s.value, s.kind) for s in said.speeds if s.text.startswith(("2.51", "5.72"))] == [
        (2.51, "step"),
        (5.72, "step"),
    ]


def test_pipes_without_a_separator_row_are_no_table() -> None:
    lines = ["flow | bw | min", "2 | 42.1 | 17.8"]
    assert prose_tables.sentences(list(enumerate(lines))) == {}


def test_the_table_case_asks_for_the_run_log_and_names_no_cause() -> None:
    """s-03: the step times with RoCE on and off, nothing else: no exit 2, the log asked for, no cause named."""
    found = case_findings(HOLDOUT / "s-03")
    assert all(f.severity in ("info", "debug") for f in found)
    assert any("NCCL_DEBUG=INFO" in f.message for f in found)


def test_an_input_that_only_names_the_host_is_context_not_an_input(tmp_path: Path) -> None:
    alone = tmp_path / "words.txt"
    alone.write_text("Additionally, I have tried cleaning the instance, and I still get the same speed.\n")
    with pytest.raises(InputError, match="only names the host or its links"):
        diagnose([alone], Budget.start(0))
    ev = evidence_of(*sorted((HOLDOUT6 / "g-10").glob("evidence-*.txt")))
    assert any(s.rented and s.piece == 1 for s in ev.nccl_said)  # the second post's words, its own piece
