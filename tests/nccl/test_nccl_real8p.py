"""The eighth development set (fixtures/nccl-logs/real8/, its README): the process side. Every log holds its verdict
by the scorer's own rules; CUDA's 803 and 804 name the libcuda loaded against the kernel driver, the forward-
compatibility package first; the linker's words on libnccl are read wherever they stand; a process that crashed in
native code with no NCCL error before it is a failure with its candidates, never exit 0. The lines beside the real
logs follow the wordings of CUDA's error strings, glibc's malloc.c, Open MPI's signal handler and torch's elastic
agent."""

from __future__ import annotations

from pathlib import Path

import pytest
from score_corpus import readme_rows, verdict_of

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

SET = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs" / "real8"
HOLDOUT6 = SET.parent / "holdout6"
ROWS = readme_rows(SET)
H = "gpu7:4021:4090 [3]"


def _explain(text: str) -> list[Finding]:
    return explain([parse_file("/x/rank0.log", text)])


def _candidates(f: Finding) -> list[str]:
    assert f.evidence["cause"]["confidence"] == "candidates"  # type: ignore[index]
    return [str(c) for c in f.evidence["candidates"]]  # type: ignore[union-attr]


def _errors(fs: list[Finding]) -> list[Finding]:
    return [f for f in fs if f.severity in ("error", "critical")]


@pytest.mark.parametrize("name", sorted(ROWS))
def test_each_log_holds_its_verdict(name: str) -> None:
    verdict = verdict_of(SET, ROWS[name], name)
    assert verdict in ("named-right", "cause-not-found-correct"), (name, verdict)


@pytest.mark.parametrize("name", ["h6-003.log", "h6-010.log", "h6-023.log"])
def test_the_sixth_blind_set_s_process_side_misses_are_named(name: str) -> None:
    assert verdict_of(HOLDOUT6, readme_rows(HOLDOUT6)[name], name) == "named-right"


@pytest.mark.parametrize(
    "line",
    [
        f"{H} misc/cudawrap.cc:188 NCCL WARN Cuda failure 803 'system has unsupported display driver / cuda driver "
        "combination'",
        "host1: Test CUDA failure common.cu:894 'system has unsupported display driver / cuda driver combination'",
        "[rank0]: RuntimeError: CUDA error: system has unsupported display driver / cuda driver combination",
        "UserWarning: CUDA initialization: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions "
        "before calling NumCudaDevices() that might have already set an error? Error 803: system has unsupported "
        "display driver / cuda driver combination",
    ],
)
def test_cuda_803_in_every_form_names_the_compat_package_first(line: str) -> None:
    f = _errors(_explain(line + "\n"))[0]
    assert f.code == "TD097" and "803" in f.message
    cands = _candidates(f)
    assert "cuda-compat" in cands[0] and any("without a reboot" in c for c in cands[1:])


def test_cuda_804_names_forward_compatibility_on_a_gpu_without_it() -> None:
    line = "host1: Test CUDA failure common.cu:894 'forward compatibility was attempted on non supported HW'\n"
    f = _errors(_explain(line))[0]
    assert f.code == "TD097" and "804" in f.message
    assert "data-center GPUs" in _candidates(f)[0] and any("CUDA_VISIBLE_DEVICES" in c for c in _candidates(f))


def test_an_older_driver_in_torch_s_words_is_the_driver_class() -> None:
    (f,) = _errors(_explain("RuntimeError: The NVIDIA driver on your system is too old (found version 11040).\n"))
    assert f.code == "TD044"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("Importing Pytorch results in undefined symbol ncclCommResume", "ncclCommResume"),
        ("OSError: /x/libtorch_cuda.so: undefined symbol: ncclCommWindowRegister", "ncclCommWindowRegister"),
        ("/usr/lib/x86_64-linux-gnu/libnccl.so.2: version `NCCL_2.21' not found (required by /x/a.so)", "NCCL_2.21"),
        ("ImportError: libnccl.so.2: cannot open shared object file: No such file or directory", "libnccl.so.2"),
    ],
)
def test_the_linker_s_words_on_libnccl_alone_are_the_library_class(line: str, said: str) -> None:
    (f,) = _errors(_explain(line + "\n"))
    assert f.code == "TD085" and said in f.message and f.severity == "error"


def test_an_undefined_symbol_of_another_library_is_no_nccl_log() -> None:
    log = parse_file("/x/a.log", "ImportError: /x/_C.so: undefined symbol: cudaGraphInstantiateWithFlags\n")
    assert not log.events and not log.speaks


def test_a_heap_abort_in_an_mpi_job_is_a_failure_with_nccl_s_candidates() -> None:
    """glibc's malloc_printerr aborts; Open MPI's signal handler makes it a process of a parallel job."""
    log = "double free or corruption (!prev)\n[node3:1234] *** Process received signal ***\n"
    log += "[node3:1234] Signal: Aborted (6)\n"
    (f,) = _errors(_explain(log))
    assert f.code == "TD098" and "double free or corruption (!prev)" in f.message
    cands = _candidates(f)
    assert "2.25.1" in cands[0] and "upgrade NCCL" in cands[0]
    assert any("two NCCL libraries" in c for c in cands) and not any("aborted itself" in c for c in cands)


def test_two_versions_rank_two_nccl_libraries_first() -> None:
    banner = f"{H} NCCL INFO NCCL version 2.21.5+cuda12.4\nnode2:77:77 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\n"
    found = _errors(_explain(banner + "free(): invalid pointer\nAborted (core dumped)\n"))
    assert found[0].code == "TD048"  # the versions differ: their own class leads
    (f,) = (f for f in found if f.code == "TD098")
    assert _candidates(f)[0].startswith("two NCCL libraries")


def test_a_crash_after_an_nccl_error_leaves_the_error_first() -> None:
    log = (
        f"{H} transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234> with status=12 "
        f"opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.1 remoteGids::ffff:10.0.0.2 hca mlx5_0\n"
        "Segmentation fault (core dumped)\n"
    )
    errors = _errors(_explain(log))
    assert errors[0].code == "TD045" and not any(f.code == "TD098" for f in errors[:1])


def test_a_crash_after_a_warn_of_no_class_keeps_nccl_s_words_first() -> None:
    log = f"{H} misc/foo.cc:12 NCCL WARN Something NCCL does not say often\nSegmentation fault (core dumped)\n"
    errors = _errors(_explain(log))
    assert errors[0].code == "TD052" and "Something NCCL does not say often" in errors[0].message


@pytest.mark.parametrize(
    "text",
    [
        "loading data\nfree(): invalid pointer\nAborted (core dumped)\n",
        "python train.py\nSegmentation fault (core dumped)\n",
    ],
)
def test_a_crash_outside_any_nccl_run_is_no_nccl_log(text: str) -> None:
    log = parse_file("/x/a.log", text)
    assert not log.events and not log.speaks


def test_torch_s_elastic_signal_line_is_a_crash_of_the_run() -> None:
    (f,) = _errors(_explain("  traceback : Signal 6 (SIGABRT) received by PID 4242\n"))
    assert f.code == "TD098" and f.evidence["signal"] == "SIGABRT"
    assert any("aborted itself" in c for c in _candidates(f))


def test_the_shell_s_killed_line_in_a_run_is_a_killed_rank() -> None:
    banner = f"{H} NCCL INFO NCCL version 2.21.5+cuda12.4\n"
    (f,) = _errors(_explain(banner + "/bin/bash: line 1: 4242 Killed                  python train.py\n"))
    assert f.code == "TD090" and "memory" in _candidates(f)[0]
    assert not parse_file("/x/a.log", "python train.py\nKilled\n").speaks  # no run with NCCL: no NCCL log


@pytest.mark.parametrize(
    ("said", "names"),
    [
        ("CUDA driver is a stub library", "stubs directory"),
        ("CUDA-capable device(s) is/are busy or unavailable", "exclusive-process"),
    ],
)
def test_cuda_errors_that_name_their_cause_keep_it_whatever_the_site(said: str, names: str) -> None:
    warn = f"{H} init.cc:1550 NCCL WARN Cuda failure '{said}'\n{H} NCCL INFO group.cc:65 -> 1 [Async thread]\n"
    f = _errors(_explain(warn))[0]
    assert f.code == "TD057" and names in f.fix and "candidates" not in f.evidence


@pytest.mark.parametrize(
    "heap",
    [
        "free(): invalid next size (normal)",
        "free(): chunks in smallbin corrupted",
        "corrupted size vs. prev_size while consolidating",
        "free(): double free detected in tcache 2",
        "malloc(): unsorted double linked list corrupted",
        "munmap_chunk(): invalid pointer",
        "*** Error in `python': free(): invalid pointer: 0x00007f1c2c000b20 ***",
    ],
)
def test_glibc_s_heap_checks_in_a_run_with_nccl_are_a_crash(heap: str) -> None:
    """malloc.c's malloc_printerr wordings (older glibc wrote them inside `*** Error in ...: MSG: 0xADDR ***`)."""
    (f,) = _errors(_explain(f"{H} NCCL INFO NCCL version 2.21.5+cuda12.4\n{heap}\n"))
    assert f.code == "TD098" and f.evidence["signal"] == "SIGABRT"
