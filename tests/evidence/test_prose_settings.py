"""NCCL settings the reporter names in their sentences, read as settings the run used (on their word),
on real threads' wording: nccl#406, nccl#428, nccl#631."""

from __future__ import annotations

from topodoctor.evidence.inputs import read_input
from topodoctor.model.evidence import SAID_SETTING, SAID_WITH_SLOWDOWN


def settings(text: str) -> list[tuple[str, str, str]]:
    got = read_input("post.txt", text)
    assert not got.unreadable, got.unreadable
    return [(s.name, s.value, s.how) for part in got.parts for s in part.settings]


def test_a_backticked_setting_in_a_sentence() -> None:
    """nccl#406, the issue's first sentence: the setting is the condition of the drop it names."""
    text = "Hi\n\nI noticed when setting `NCCL_SHM_DISABLE=1` I see a large drop in performance, and I was wondering "
    text += "if you could explain what this option is doing (and when you would ever want to use it).\n"
    assert settings(text) == [("NCCL_SHM_DISABLE", "1", SAID_WITH_SLOWDOWN)]


def test_a_bare_setting_with_the_sentence_full_stop_and_spaces() -> None:
    """nccl#428 ("setting NCCL_P2P_DISABLE=1 and got better result.") and nccl#631 ("NCCL_P2P_DISABLE =1 .")."""
    got = settings("Hi, sjeaugey, I follow your suggestion setting NCCL_P2P_DISABLE=1 and got better result.\n")
    assert got == [("NCCL_P2P_DISABLE", "1", SAID_SETTING)]
    text = "So, while trying various things, I confirmed that the model works by setting the variable "
    text += "NCCL_P2P_DISABLE =1 .\n"
    assert settings(text) == [("NCCL_P2P_DISABLE", "1", SAID_SETTING)]


def test_a_short_sentence_and_a_name_nccl_does_not_read() -> None:
    assert settings("I set NCCL_IB_DISABLE=1\n") == [("NCCL_IB_DISABLE", "1", SAID_SETTING)]
    got = read_input("post.txt", "We run with NCCL_NOT_A_VARIABLE=1 on every node.\n")
    assert got.unreadable.endswith("holds no kind of text diagnose reads")


def test_sentences_with_no_figure_no_hardware_and_no_setting_stay_unreadable() -> None:
    got = read_input("post.txt", "I was wondering if you could explain what this option is doing.\n")
    assert got.unreadable.endswith("holds no kind of text diagnose reads")
