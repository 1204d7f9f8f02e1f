"""Versions stated on their own lines, and nccl-tests' command line (its sizes)."""

from __future__ import annotations

from evidence_support import ROOT, kinds, read

from topodoctor.evidence.inputs import context_only, join, read_input

CASE = ROOT / "fixtures/diagnose/real/nccl-2297-symmem-regression"


def test_nccl_and_nccl_tests_versions_above_the_command_line() -> None:
    """NVIDIA/nccl#2058 (fixtures/diagnose/real/nccl-2297-symmem-regression): `NCCL 2.29.7`, `nccl-tests
    2.18.2`, then the all_reduce_perf line; the second paste is NCCL's own version string."""
    got = read(CASE / "evidence-1.txt")
    assert kinds(got) == ["version-line", "command-line"]
    assert got.pieces[0].version == "NCCL 2.29.7 nccl-tests 2.18.2" and got.parts[0].nccl_version == "2.29.7"
    (run,) = got.parts[1].launches
    assert (run.launcher, run.program, run.min_bytes, run.max_bytes) == ("nccl-tests", "all_reduce_perf", 1024, 4 << 20)
    second = read(CASE / "evidence-2.txt")
    assert second.parts[0].nccl_version == "2.29.7"
    assert join([got, second]).nccl_version == "2.29.7"


def test_the_forms_people_state_a_version_in() -> None:
    """`NCCL version: ...`, PyTorch's answer on the line after the call, pip's pin and `pip list`'s row."""
    forms = {
        "NCCL version: 2.21.5\n": "2.21.5",
        ">>> torch.cuda.nccl.version()\n(2, 21, 5)\n": "2.21.5",
        "print(torch.cuda.nccl.version())  # (2, 18, 1)\n": "2.18.1",
        "nvidia-nccl-cu12==2.21.5\n": "2.21.5",
        "nvidia-nccl-cu12          2.20.5\n": "2.20.5",
        "2.18.3+cuda12.2\n": "2.18.3",
    }
    for text, version in forms.items():
        got = read_input("v", text)
        assert kinds(got) == ["version-line"] and got.parts[0].nccl_version == version, text


def test_a_version_inside_a_sentence_or_another_library_is_not_read() -> None:
    """A sentence may name the release compared with (the other inputs' context only); torch's own version is not
    NCCL's."""
    said = read_input("v", "with NCCL 2.29.7 it is slower than with 2.29.2\n")
    assert context_only(said) and said.parts[0].nccl_version == ""
    for text in ("torch 2.3.0+cu121\n", "2.3.0+cu121\n"):
        assert not read_input("v", text).pieces, text


def test_vllm_s_line_of_the_nccl_its_pynccl_loaded() -> None:
    """vLLM's PyNccl log line, from a Ray worker too (vllm#6610)."""
    from topodoctor.evidence.inputs import read_input

    text = "(RayWorkerWrapper pid=593, ip=10.5.6.103) INFO 07-20 17:27:20 pynccl.py:63] vLLM is using nccl==2.21.5\n"
    got = read_input("x", text)
    assert (got.pieces[0].kind, got.pieces[0].version, got.parts[0].nccl_version) == (
        "version-line",
        "NCCL 2.21.5",
        "2.21.5",
    )
