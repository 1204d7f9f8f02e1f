"""The fourteenth blind sets (fixtures/nccl-logs/holdout14, holdout14b) and what the thirteenth's unsettled threads
showed, now development sets: NCCL's own result words quoted by TensorFlow, "no activity" as a hang, a hang whose log
holds no INFO output, aws-ofi-nccl's completion error, CUDA's stream-capture errors, and the registrations of memory
whose errno names no limit, each with the candidates the message leaves open."""

from __future__ import annotations

from conftest import FIXTURES
from nccl_support import explained_with

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

LOGS = FIXTURES / "nccl-logs"
H = "node1:4242:4250 [0]"
TRAIL = f"{H} NCCL INFO transport/net_ib.cc:1 -> 2\n{H} NCCL INFO init.cc:1 -> 2\n"


def _explain(path: str, *replace: tuple[str, str]) -> list[Finding]:
    return explained_with(LOGS / path, *replace)


def _lead(text: str) -> Finding:
    return next(f for f in explain([parse_file("post.log", text)]) if f.severity == "error")


def test_tensorflows_words_for_ncclS_result_over_its_nccl_node() -> None:
    lead = _explain("holdout14/h14-003.log")[0]  # "Internal:  unhandled cuda error" over "[[node Adam/NcclAllReduce"
    assert lead.code == "TD049" and "unhandled cuda error" in lead.message
    # the same words far from any mention of NCCL are another library's
    assert not explain([parse_file("x.log", "Internal:  unhandled cuda error\n" + "loading data\n" * 6)])


def test_no_activity_is_a_hang_and_a_log_without_info_says_what_would_show_it() -> None:
    lead = _explain("holdout14/h14-008.log")[0]  # "[BERT/TF2] No activity and failed stack when pre-training starts"
    assert lead.code == "TD959"
    assert "NCCL_DEBUG=INFO" not in lead.message  # its NET/Socket INFO lines are there
    bare = _explain("holdout14/h14-010.log")[0]  # the title quotes a WARN; no INFO line in the post
    assert bare.code == "TD959" and "no NCCL_DEBUG=INFO output" in bare.message


def test_an_ofi_completion_error_the_post_says_the_run_hung_after() -> None:
    lead = _explain("holdout14b/h14b-008.log")[0]  # "NET/OFI Request completed with error. RC: 21"
    assert lead.code == "TD084" and lead.severity == "error" and "Request completed with error" in lead.message


def test_cudas_stream_capture_errors_are_candidates_not_one_cause() -> None:
    lead = _explain("holdout13b/h13b-012.log")[0]  # "operation not permitted on an event last recorded in a capturing"
    assert lead.code == "TD057" and "CUDA graph" in lead.message
    candidates = lead.evidence["candidates"]
    assert isinstance(candidates, list) and len(candidates) == 3 and "--enforce-eager" in lead.fix
    assert "IMEX" not in lead.fix  # not the cuMem sharing that "operation not permitted" means elsewhere


def test_a_registration_whose_errno_names_no_limit_ranks_its_causes() -> None:
    lead = _lead(
        f"{H} misc/ibvwrap.cc:182 NCCL WARN Call to ibv_reg_mr_iova2 failed with error Invalid argument\n{TRAIL}"
    )
    assert lead.code == "TD065" and "peermem" in str(lead.evidence["candidates"][0])  # type: ignore[index]
    other = _lead(f"{H} misc/ibvwrap.cc:1 NCCL WARN Call to ibv_create_cq failed with error Invalid argument\n{TRAIL}")
    assert "candidates" not in other.evidence


def test_the_plugins_failed_registration_ranks_its_causes() -> None:
    lead = _explain("holdout13c/h13c-005.log")[0]  # NET/OFI Unable to register memory, an errno that names nothing
    assert lead.code == "TD084" and "ulimit -l" in str(lead.evidence["candidates"][0])  # type: ignore[index]
