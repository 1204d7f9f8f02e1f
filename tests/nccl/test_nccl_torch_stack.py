"""torch's ProcessGroupNCCL stack pasted without the message above it (c10d ProcessGroupNCCL.cpp): the frames
name what raised. ``WorkNCCL::checkTimeout`` is a work past its timeout (TD047, the candidates ranked as for a
timeout and duration unknown, and the message asked for); ``WorkNCCL::checkAndSetException`` an NCCL error the
watchdog found (candidates, no timeout claimed); the watchdog thread's frames alone say only that it died. The
frames are as posted in public threads (their source beside them)."""

from __future__ import annotations

from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

# jpata/particleflow#390 (torch 2.4, the same frames in sgl-project/sglang#1693): the stack of checkTimeout's
# exception, then the watchdog's own, without the "Watchdog caught collective operation timeout" line above
_LIB = "/mnt/home/ewulff/miniforge3/envs/mlpf/lib/python3.11/site-packages/torch/lib"
TIMEOUT_STACK = "\n".join(
    (
        f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x1554e8b12f86 in {_LIB}/libc10.so)",
        "frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, "
        f"std::ratio<1l, 1000l> > >) + 0x1d2 (0x1554e9e0f8f2 in {_LIB}/libtorch_cuda.so)",
        f"frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x1554e9e16333 in {_LIB}/libtorch_cuda.so)",
        f"frame #3: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c (0x1554e9e1871c in {_LIB}/libtorch_cuda.so)",
        "frame #4: <unknown function> + 0xdfc74 (0x15554f329c74 in /mnt/sw/nix/store/gcc-11.4.0/lib64/libstdc++.so.6)",
        "frame #5: <unknown function> + 0x81ca (0x155554e081ca in /lib64/libpthread.so.0)",
        "frame #6: clone + 0x43 (0x155553e398d3 in /lib64/libc.so.6)",
        "",
        "Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1521 (most "
        "recent call first):",
        f"frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x1554e8b12f86 in {_LIB}/libc10.so)",
        f"frame #1: <unknown function> + 0xe5aa84 (0x1554e9a63a84 in {_LIB}/libtorch_cuda.so)",
        "",
    )
)
# sgl-project/sglang#1693: the same stack with the watchdog's message after it
MESSAGE = (
    "[rank3]:[E1016 03:31:38.919469923 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600005 "
    "milliseconds before timing out.\n"
)


def _findings(text: str) -> list[tuple[str, str, str, dict[str, object]]]:
    log = parse_file("job.log", text)
    return [(f.code, f.severity, f"{f.message} | {f.fix}", f.evidence) for f in explain([log])]


def test_checktimeout_frames_without_the_message_are_the_watchdog_timeout_with_candidates() -> None:
    code, severity, said, ev = _findings(TIMEOUT_STACK)[0]
    assert (code, severity) == ("TD047", "error")
    assert "checkTimeout" in said and "not in the paste" in said
    assert "Watchdog caught collective operation timeout: WorkNCCL(...)" in said  # the line to ask for
    cands = ev["candidates"]
    assert isinstance(cands, list) and cands[0].startswith("a rank never joined")
    assert ev["message_pasted"] is False


def test_the_exception_line_of_checktimeout_alone_reads_as_the_timeout() -> None:
    # huggingface/open-r1#620: torch 2.6's "Exception raised from checkTimeout at ...ProcessGroupNCCL.cpp:632"
    text = (
        "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:632 "
        "(most recent call first):\n"
        "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f298896c1b6 in libc10.so)\n"
    )
    assert _findings(text)[0][0] == "TD047"


def test_with_the_message_pasted_the_message_is_read_and_the_stack_adds_nothing() -> None:
    out = _findings(TIMEOUT_STACK + MESSAGE)
    assert [c for c, *_ in out].count("TD047") == 1
    assert "ran 600005 ms" in out[0][2]


def test_the_message_in_another_rank_s_file_is_the_one_read() -> None:
    files = [parse_file("rank0.log", TIMEOUT_STACK), parse_file("rank3.log", MESSAGE)]
    out = explain(files)
    assert [f.code for f in out].count("TD047") == 1 and "ran 600005 ms" in out[0].message


def test_checkandsetexception_frames_are_an_async_nccl_error_not_a_timeout() -> None:
    # torch 2.x's watchdog raising on an NCCL error the work carries (ProcessGroupNCCL.cpp's checkAndSetException,
    # frames in the form of jpata/particleflow#390's)
    text = TIMEOUT_STACK.replace(
        "WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >)",
        "WorkNCCL::checkAndSetException()",
    )
    code, severity, said, _ = _findings(text)[0]
    assert (code, severity) == ("TD052", "error")
    assert "not a timeout" in said and "cause not found" in said
    assert not any(c == "TD047" for c, *_ in _findings(text))


def test_the_watchdog_thread_alone_names_both_a_timeout_and_an_error_as_candidates() -> None:
    # pytorch/pytorch#126544: a CUDA check inside isCompleted, then watchdogHandler and ncclCommWatchdog
    text = (
        "frame #4: c10d::ProcessGroupNCCL::WorkNCCL::isCompleted() + 0x58 (0x7fc91a84ef38 in libtorch_cuda.so)\n"
        "frame #5: c10d::ProcessGroupNCCL::watchdogHandler() + 0x77c (0x7fc91a8545ac in libtorch_cuda.so)\n"
        "frame #6: c10d::ProcessGroupNCCL::ncclCommWatchdog() + 0x10c (0x7fc91a85531c in libtorch_cuda.so)\n"
    )
    code, _, _, ev = _findings(text)[0]
    assert code == "TD052"
    cands = ev["candidates"]
    assert isinstance(cands, list) and cands[0].startswith("a collective past its timeout")


def test_a_stack_of_another_c10d_function_is_no_finding() -> None:
    text = "frame #3: c10d::ProcessGroupNCCL::allreduce(std::vector<at::Tensor>&) + 0x10c (0x7f in libtorch_cuda.so)\n"
    assert _findings(text) == []
