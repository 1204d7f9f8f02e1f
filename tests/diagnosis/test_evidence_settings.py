"""A setting that caps NCCL's channels (TD036) is a cause only of a figure it explains: with no figure it
may cap, said as information; beside a figure at expectation it is not said at all; beside a shortfall it
explains too little of, it is ruled out, not blamed."""

from __future__ import annotations

from pathlib import Path

from evidence_cases import evidence, nccl_lines, run, topo
from tests_support_evidence import H100_X2_RANKS, H100_X2_TOPO, judge
from tests_support_evidence import all_reduce_row as _row

from topodoctor.evidence.inputs import join, read_input

ROOT = Path(__file__).resolve().parents[2]


def _cap(value: str) -> str:
    return f"h100:2972:3001 [0] NCCL INFO NCCL_MAX_NCHANNELS set by environment to {value}\n"


def test_a_channel_cap_with_no_figure_may_cap_and_is_information() -> None:
    """nccl#1703 (https://github.com/NVIDIA/nccl/issues/1703): NCCL_MIN_NCHANNELS=1 and NCCL_MAX_NCHANNELS=1
    exported before a send/recv test on two A100s, its NCCL banner and no figure: said as "may cap"."""
    text = (ROOT / "fixtures/diagnose/real2/channels-1-no-figure/evidence-1.txt").read_text()
    found = judge(join([read_input("evidence-1.txt", text)]))
    caps = [f for f in found if f.code == "TD036"]
    assert [f.severity for f in caps] == ["info"]
    assert "NCCL_MAX_NCHANNELS=1 may cap NCCL at 1 channel" in caps[0].message
    assert "holds" not in caps[0].message
    assert not [f for f in found if f.severity != "info"]


def test_a_channel_cap_beside_a_figure_at_expectation_is_not_blamed() -> None:
    """NCCL_MAX_NCHANNELS=16 beside 2 x H100's 328 GB/s (the default run of docs/diagnosis.md's table): the
    figure is normal, so the cap is no cause."""
    ev = evidence(run("all_reduce", _row(328.0), H100_X2_RANKS), topo(H100_X2_TOPO, piece=1),
                  nccl_lines(_cap("16"), 2))  # fmt: skip
    found = judge(ev)
    assert [f.code for f in found if f.severity != "info"] == []
    assert not [f for f in found if f.code == "TD036"]


def test_a_channel_cap_that_explains_little_of_a_shortfall_is_ruled_out() -> None:
    """NCCL_MAX_NCHANNELS=20 (about 21 here) beside 150 GB/s: the cap leaves about 305 of 320, a tenth of the
    shortfall, so it is not the cause; a cap of 1 at 21.2 GB/s (measured, docs/diagnosis.md) is, at error."""
    ev = evidence(run("all_reduce", _row(150.0), H100_X2_RANKS), topo(H100_X2_TOPO, piece=1),
                  nccl_lines(_cap("20"), 2))  # fmt: skip
    lead = judge(ev)[0]
    assert lead.code == "TD022" and "NCCL_MAX_NCHANNELS" not in (lead.cause.what if lead.cause else "")
    one = evidence(run("all_reduce", _row(21.2), H100_X2_RANKS), topo(H100_X2_TOPO, piece=1),
                   nccl_lines(_cap("1"), 2))  # fmt: skip
    blamed = judge(one)[0]
    assert (blamed.code, blamed.severity) == ("TD036", "error") and "holds NCCL to 1 channel" in blamed.message


def test_a_cap_on_a_launch_line_with_no_figure_is_information() -> None:
    """nccl-tests#82's mpirun line (https://github.com/NVIDIA/nccl-tests/issues/82): NCCL_MAX_NCHANNELS=2
    with NCCL_MIN_NCHANNELS=2 and no table: the cap is said, never as the run's cause."""
    line = (
        "$ mpirun -x NCCL_IB_DISABLE=1 -x NCCL_NSOCKS_PERTHREAD=8 -x NCCL_SOCKET_NTHREADS=4 "
        "-x NCCL_MAX_NCHANNELS=2 -x NCCL_MIN_NCHANNELS=2 -x NCCL_SOCKET_IFNAME=eth0 -np 2 "
        "--host 10.0.0.48:1,10.0.0.52:1 ./build/broadcast_perf -b 8 -e 2G -w 10 -f 2 -g 1 -n 100 -c 0\n"
    )
    caps = [f for f in judge(join([read_input("cmd.txt", line)])) if f.code == "TD036"]
    assert [(f.severity, "may cap" in f.message) for f in caps] == [("info", True)]


def test_a_protocol_or_buffer_setting_with_no_figure_is_warned_or_said_not_blamed() -> None:
    """NCCL's own lines for NCCL_PROTO=LL and NCCL_BUFFSIZE=65536 (the settings measured on 2 x H100,
    docs/diagnosis.md: 120 and 101 GB/s against 328) with no table: LL halves every large size, so a
    warning; a small buffer's cost depends on the link, so information; neither at error."""
    proto = "h100:2972:3001 [0] NCCL INFO NCCL_PROTO set by environment to LL\n"
    buffsize = "h100:2972:3001 [0] NCCL INFO NCCL_BUFFSIZE set by environment to 65536\n"
    for line, severity in ((proto, "warning"), (buffsize, "info")):
        found = [f for f in judge(evidence(nccl_lines(line))) if f.code == "TD036"]
        assert [f.severity for f in found] == [severity], line
