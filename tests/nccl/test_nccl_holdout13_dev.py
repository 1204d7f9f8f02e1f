"""The thirteenth blind sets (fixtures/nccl-logs/holdout13, holdout13b, holdout13c), scored once and now development
sets: the NCCL version a reporter's words name, a launch naming one GPU twice, the post's own words that the run
failed or hangs where the paste stops before it, a launch answered with a kernel's fault, the older completion-error
wording, aws-ofi-nccl's "Couldn't ..." calls and Paddle's words for NCCL's error class."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.grammar import said_versions
from topodoctor.nccl.parse import parse_file

LOGS = FIXTURES / "nccl-logs"
H = "node1:4242:4250 [0]"


def _explain(path: str, *replace: tuple[str, str]) -> list[Finding]:
    return explained_with(LOGS / path, *replace)


def _errors(text: str) -> list[Finding]:
    return [f for f in explain([parse_file("post.log", text)]) if f.severity == "error"]


def test_the_versions_a_reporters_words_name() -> None:
    said = said_versions(
        [
            "nccl version: 2.4.2 2.5.6",
            "[NCCL2.26.2][RAS] RAS could crash",
            "[pip3] nvidia-nccl-cu12==2.21.5",
            "libnccl2=2.19.3-1+cuda12.3",
            "nccl                      2.18.3.1  h12f7317_0    conda-forge",
            ">>> torch.cuda.nccl.version() (2, 17, 1)",
        ]
    )
    assert said == ["2.4.2", "2.5.6", "2.26.2", "2.21.5", "2.19.3", "2.18.3", "2.17.1"]
    # nccl-tests' own version, a variable's value and CUDA's are no NCCL version
    assert said_versions(["# nccl-tests version 2.13.9 nccl-headers=22102", "NCCL_IB_TIMEOUT=22", "CUDA 12.2.1"]) == []


def test_a_version_in_words_matches_a_known_bug_and_says_where_it_came_from() -> None:
    log = "holdout12/h12-012.log"  # completion error 4 under 2.18.5's banner: cut the banner, say the version in words
    text = (LOGS / log).read_text()
    assert "NCCL version" in text
    f = parse_file("post.log", "NCCL: 2.20.3 (pip)\n" + text.replace("NCCL version", "NCCL build"))
    assert f.versions == () and f.said_versions == ("2.20.3",)
    banner = parse_file("post.log", "NCCL: 2.20.3 (pip)\n" + text)
    assert banner.said_versions == ()  # a banner is what the run uses: the words are not read then


def test_a_launch_naming_one_gpu_twice_is_two_ranks_on_it() -> None:
    lead = _explain("holdout13/h13-003.log")[0]  # Lightning --gpus "0,0", then ProcessGroupNCCL's invalid usage
    assert lead.code == "TD042" and "GPU 0 twice" in lead.message
    other = _explain("holdout13/h13-003.log", ('"0,0"', '"0,1"'))[0]
    assert other.code == "TD049"  # two GPUs: the invalid usage has no reason in the log


def test_the_posts_words_that_it_failed_where_the_paste_stops_before_the_failure() -> None:
    lead = _explain("holdout13/h13-012.log")[0]  # "Unable to run nccl tests ...", INFO lines up to the affinity
    assert lead.code == "TD049" and "no failure line" in lead.message and "NCCL_DEBUG=INFO" in lead.fix
    quiet = _explain(
        "holdout13/h13-012.log",
        ("Unable to run", "Running"),
        ("is failing", "runs"),
        ("Code and error are", "Code is"),
        ("Error logs", "Logs"),
    )
    assert all(f.severity != "error" for f in quiet)  # words that say nothing failed: the lines alone


def test_the_words_give_way_to_a_failure_another_file_shows() -> None:
    words = parse_file(
        "rank1.txt", "Training fails on two nodes\n" + f"{H} NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
    )
    shown = parse_file(
        "rank0.log", f"{H} misc/socket.cc:72 NCCL WARN socketProgress: Connection closed by remote peer x<1>\n"
    )
    codes = [f.code for f in explain([words, shown]) if f.severity == "error"]
    assert codes and codes[0] == "TD046" and "TD049" not in codes


def test_a_sentence_under_the_title_that_says_it_hangs() -> None:
    lead = _explain("holdout13/h13-009.log")[0]  # "He was stuck in the line of `self.pynccl_comm.group.barrier()`"
    assert lead.code == "TD959" and lead.evidence["line"] == 2  # the sentence, not the title
    # a program's own warning line under NCCL's output says nothing of the run
    inside = f"{H} NCCL INFO Init COMPLETE\n[W ProcessGroupNCCL.cpp:100] Warning: a collective may hang\n"
    assert not [f for f in explain([parse_file("x.log", inside)]) if f.code == "TD959"]


def test_a_launch_answered_with_a_kernels_fault_is_an_earlier_kernels() -> None:
    lead = _explain("holdout13/h13-013.log")[0]  # enqueue.cc:1556 Cuda failure 700, no GPU named
    assert lead.code == "TD057" and "CUDA_LAUNCH_BLOCKING" in str(lead.evidence["candidates"][0])  # type: ignore[index]
    refused = _errors(
        f"{H} enqueue.cc:1556 NCCL WARN Cuda failure 1 'invalid argument'\n{H} NCCL INFO init.cc:1 -> 1\n"
    )
    assert refused and "CUDA_LAUNCH_BLOCKING" not in str(refused[0].evidence.get("candidates", [""])[0])  # type: ignore[index]


def test_the_older_completion_error_wording_in_a_title() -> None:
    lead = _explain("holdout13c/h13c-012.log")[0]  # "NCCL WARN NET/IB Got completion error 12" (a screenshot's title)
    assert lead.code == "TD045" and lead.severity == "error" and "status 12" in lead.message


def test_an_ofi_call_the_post_says_the_run_stuck_on() -> None:
    lead = _explain("holdout13c/h13c-002.log")[0]  # NET/OFI Couldn't enable endpoint. RC: -12, "it was stuck"
    assert lead.code == "TD084" and lead.severity == "error" and "enable endpoint" in lead.message
    # without the post's words the title's WARN is no failure the log shows
    alone = _explain("holdout13c/h13c-002.log", ("it was stuck", "it ran"), ("the main error is", "the line is"))
    assert all(f.severity != "error" for f in alone)


def test_paddles_words_for_ncclS_error_class() -> None:
    lead = _explain("holdout13b/h13b-007.log")[0]  # "unhandled cuda error at [.../nccl_helper.h:70]"
    assert lead.code == "TD049" and "unhandled cuda error" in lead.message


def test_open_mpis_signal_banner_is_a_crash() -> None:
    lead = _explain("holdout11/h11-001.log")[0]  # RAS client lines, then "*** Process received signal ***"
    assert lead.code == "TD098" and lead.severity == "error"


def test_wrong_values_of_an_all_gather_above_4_gib_under_several_gpus_per_process() -> None:
    lead = _explain("holdout12/h12-001.log")[0]  # all_gather_perf -g 8 at 4 GiB, "nccl version: 2.4.2 2.5.6"
    assert lead.code == "TD083" and "2.6.4" in lead.message and "the text names NCCL 2.4.2" in lead.fix
    one_gpu = _explain("holdout12/h12-001.log", ("-g 8", "-g 1"))[0]
    assert one_gpu.code == "TD079"  # one GPU per process: not that bug, the wrong values' own causes
    fixed = _explain("holdout12/h12-001.log", ("2.4.2 2.5.6", "2.7.8"))[0]
    assert fixed.code == "TD079"


def test_a_hang_of_2_4_names_the_ll_cleanup_bug_first_of_its_candidates() -> None:
    lead = _explain("holdout11/h11-012.log")[0]  # "NCCL hang on socket recv()", "nccl 2.4.2" in the sentence
    assert lead.code == "TD083" and "2.4.6" in lead.message and "NCCL_LL_THRESHOLD=0" in lead.fix
    assert lead.evidence["cause"]["confidence"] == "candidates"  # type: ignore[index]
    later = _explain("holdout11/h11-012.log", ("nccl 2.4.2", "nccl 2.8.4"))[0]
    assert later.code == "TD959"
