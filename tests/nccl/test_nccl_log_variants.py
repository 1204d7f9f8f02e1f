"""`nccl-log` on the variants of a failure the recorded logs show one way only: a shared-memory
failure told by its reason and its summary line, or by the summary alone; a lost peer alone and
beside a root cause; NCCL_IB_HCA with no IB device when the network plugin failed first; a failed
call known only by its trail, by its trail and torch's error, by torch's error and NCCL's reason,
or by a proxy's report; each with where the evidence is and how sure the explanation is."""

from __future__ import annotations

from pathlib import Path

from tests.nccl.test_nccl_log_edges import IB_NONE, TORCH, _log
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs"
EXTEND = (
    "n1:470:746 [0] misc/shmutils.cc:87 NCCL WARN Error: failed to extend /dev/shm/nccl-f4QC67 to 34210180 bytes, "
    "error: No space left on device (28)\n"
)
SUMMARY = "(Runner pid=868697) Error while creating shared memory segment /dev/shm/nccl-f4QC67 (size 34210176)\n"
LOST = (
    "vm:1328:1639 [0] misc/socket.cc:72 NCCL WARN socketProgress: Connection closed by remote peer localhost<33438>\n"
)
PLUGIN = "n1:649:649 [1] plugin/net.cc:379 NCCL WARN Failed to initialize any NET plugin\n"
PROXY = (
    "n1:183006:183220 [1] proxy.cc:1119 NCCL WARN [Proxy Service 9] Failed to execute operation Connect from rank 9, "
    "retcode 6\n"
)
TRAIL = "n1:1:1 [0] NCCL INFO {} -> 2\n"
UP = (TRAIL.format("transport/net.cc:100"), TRAIL.format("init.cc:1300"), TRAIL.format("init.cc:1400"))


def _seen(files: list[object], env: dict[str, str] | None = None) -> list[tuple[str, str, str, object]]:
    return [(f.code, f.severity, f.subject, f.evidence.get("line")) for f in explain(files, env)]  # type: ignore[arg-type]


def test_a_shared_memory_failure_is_its_reason_and_the_summary_line_no_second_finding() -> None:
    (f,) = explain([_log("/x/rank0.log", EXTEND, SUMMARY)])
    assert (f.code, f.severity, f.evidence["line"]) == ("TD043", "error", 1)
    assert f.message == (
        "shared memory segment /dev/shm/nccl-f4QC67 of 34210180 bytes could not be created: No space left on device"
    )


def test_a_fallocate_line_naming_no_segment_takes_it_from_the_summary_after_it() -> None:
    p = FIXTURES / "real" / "nccl-342-posix-fallocate-docker.log"
    (f,) = explain([parse_file(str(p), p.read_text())])
    assert (f.code, f.severity) == ("TD043", "error")
    assert f.message == (
        "shared memory segment nccl-shm-recv-250a7cc850ba9298-0-1-3 of 9637888 bytes could not be created: "
        "No space left on device"
    )


def test_the_summary_line_alone_is_the_dev_shm_class_with_its_candidates() -> None:
    (f,) = explain([_log("/x/rank0.log", SUMMARY)])
    assert (f.code, f.severity, f.subject) == ("TD043", "error", "rank0")
    assert f.evidence["cause"]["confidence"] == "candidates"  # type: ignore[index]
    assert f.evidence["candidates"][0].startswith("/dev/shm too small")  # type: ignore[index]


def test_a_lost_peer_is_the_cause_alone_and_a_consequence_beside_a_root_cause() -> None:
    assert _seen([_log("/x/rank0.log", LOST)]) == [("TD046", "error", "rank0", 1)]
    with_cause = [_log("/x/rank0.log", LOST), _log("/x/rank1.log", EXTEND)]
    assert _seen(with_cause) == [("TD043", "error", "rank1", 1)]


def test_no_ib_device_is_no_second_finding_when_the_network_plugin_failed() -> None:
    env = {"NCCL_IB_HCA": "mlx5_9"}
    assert _seen([_log("/x/rank0.log", IB_NONE, PLUGIN)], env) == [("TD040", "error", "rank0", 2)]


def test_a_failed_call_known_by_its_trail_alone() -> None:
    (f,) = explain([_log("/x/rank0.log", *UP)])
    assert (f.code, f.severity, f.subject, f.evidence["line"]) == ("TD052", "error", "rank0", 2)
    assert f.message == (
        "NCCL failed (unhandled system error (2)) along transport/net.cc -> init.cc, with no WARN saying why; "
        "cause not found"
    )


def test_a_trail_beside_torch_s_error_without_a_reason_is_the_error_class_s() -> None:
    (f,) = explain([_log("/x/rank0.log", *UP, TORCH.format(cls="invalid usage"))])
    assert (f.code, f.severity, f.subject, f.evidence["line"]) == ("TD049", "error", "rank0", 4)
    assert f.evidence["error_class"] == "invalid usage"


def test_nccl_s_reason_points_at_torch_s_error() -> None:
    torch = TORCH.format(cls="unhandled system error").replace("Last error:\n\n", "Last error:\n" + "y" * 30 + "\n")
    (f,) = explain([_log("/x/a.txt", "step 1\n", torch)])
    assert (f.code, f.severity, f.subject, f.evidence["line"]) == ("TD052", "error", "a.txt", 2)
    assert f.evidence["cause"] == {"what": "not found", "confidence": "not found"}


def test_a_proxy_s_report_is_the_reason_of_a_failure_no_class_covers() -> None:
    (f,) = explain([_log("/x/rank0.log", PROXY, TORCH.format(cls="invalid usage"))])
    assert (f.code, f.severity, f.subject, f.evidence["line"]) == ("TD052", "error", "rank0", 1)
    assert f.message == (
        "NCCL failed (invalid usage): [Proxy Service 9] Failed to execute operation Connect from rank 9, retcode 6; "
        "cause not found"
    )


def test_an_error_class_of_more_words_is_known_by_its_start() -> None:
    remote = (
        "[rank0]:[E1125 00:25:28.817411222 ProcessGroupNCCL.cpp:612] [Rank 0] Collective WorkNCCL(SeqNum=5) raised "
        "the following async exception: NCCL error: remote process exited or there was a network error, NCCL version "
        "2.28.9\n"
    )
    (f,) = explain([_log("/x/rank0.log", remote)])
    assert (f.code, f.severity, f.subject) == ("TD049", "error", "rank0")
    assert "likely: another rank's process ended first" in f.message
    assert f.evidence["likely_causes"][1] == "the network between the nodes (the socket interface or a firewall)"


def test_torch_s_last_error_alone_in_one_of_the_files_is_a_failure_of_no_known_class() -> None:
    files = [_log("/x/rank0.txt", "Last error:\nsomething odd happened\n"), _log("/x/rank1.txt", "step 1\n")]
    (f,) = explain(files)
    assert (f.code, f.severity, f.subject) == ("TD052", "error", "logs")  # no line of NCCL's to point at
    assert f.message == "NCCL failed (an NCCL error): something odd happened; cause not found"
    assert "file" not in f.evidence and f.evidence["reason"] == "something odd happened"
