"""A setting named in the reporter's sentences judged as a command line's is, but information only where no
figure shows its harm (reporters list what they tried as often as what the slow run had: nccl#428's
"setting NCCL_P2P_DISABLE=1 and got better result") unless the sentence makes it a drop's condition, and a
warning at most beside a stated figure (wording of
nccl#406, nccl#428, and nccl#631)."""

from __future__ import annotations

from tests_support_evidence import judge

from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.findings import Finding


def findings(text: str) -> tuple[Finding, ...]:
    return judge(join([read_input("post.txt", text)]))


def test_p2p_disabled_in_the_words_is_information_not_an_error() -> None:
    """nccl#428: "setting NCCL_P2P_DISABLE=1 and got better result."; a command line's is an error."""
    got = findings("Hi, sjeaugey, I follow your suggestion setting NCCL_P2P_DISABLE=1 and got better result.\n")
    td023 = [f for f in got if f.code == "TD023"]
    assert len(td023) == 1 and td023[0].severity == "info", [(f.code, f.severity) for f in got]
    assert "the reporter's words" in str(td023[0].evidence) and "Unset NCCL_P2P_DISABLE" in td023[0].fix
    command = judge(join([read_input("run.sh", "NCCL_P2P_DISABLE=1 ./build/all_reduce_perf -g 2\n")]))
    assert [f.severity for f in command if f.code == "TD023"] == ["error"]


def test_ib_disabled_in_the_words_is_the_socket_finding() -> None:
    got = findings("I set NCCL_IB_DISABLE=1\n")
    assert [(f.code, f.severity) for f in got if f.code == "TD025"] == [("TD025", "info")]


def test_shm_disabled_as_the_drops_condition_is_a_warning_with_nothing_else_to_judge() -> None:
    """nccl#406: "when setting ... I see a large drop": the sentence makes the setting the condition of the
    drop, the reporter's own run with and without it (the thread settled on the variable), so it is said at
    warning, never error, with no figure to judge beside it."""
    got = findings("I noticed when setting `NCCL_SHM_DISABLE=1` I see a large drop in performance.\n")
    assert [(f.code, f.severity) for f in got if f.severity != "info"] == [("TD036", "warning")]
    assert any(f.code == "TD022" and "NCCL_SHM_DISABLE=1 but no figure" in f.message for f in got)


def test_shm_disabled_only_named_stays_information() -> None:
    got = findings("I run with `NCCL_SHM_DISABLE=1` and the performance is poor.\n")
    assert all(f.severity == "info" for f in got), [(f.code, f.severity) for f in got]


def test_a_stated_figure_and_a_stated_setting_make_no_error() -> None:
    """nccl#428's sentence beside a figure stated in words: the cause is named, at warning, since no tool's
    output shows either."""
    text = "I follow your suggestion setting NCCL_P2P_DISABLE=1 and got better result.\n"
    text += "On 8x H100 SXM the all_reduce busbw is only 20 GB/s.\n"
    got = [f for f in findings(text) if f.code == "TD023"]
    assert [(f.severity, f.cause is not None) for f in got] == [("warning", True)], got
