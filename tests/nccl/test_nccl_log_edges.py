"""How `nccl-log` names what it explains, at the edges the recorded logs do not reach: who (eight
ranks and a ninth, a file with no rank, a path), how sure (stated, likely, not found), which NCCL
versions (a build suffix is no other version; three files named of four), NCCL's error class
without its "run with" advice and with the settings shown beside it, and WARN lines no class covers
(deduplicated, cut to 160 characters and ten lines)."""

from __future__ import annotations

from pathlib import Path

import pytest

from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import LogFile, parse_file

WARN = "{host}:1234:1250 [0] NCCL WARN {text}\n"
BANNER = "{host}:1234:1250 [0] NCCL INFO NCCL version {version}\n"
TORCH = (
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691, "
    "{cls} (run with NCCL_DEBUG=WARN for details), NCCL version 2.18.1\n"
    "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\nLast error:\n\n"
)


def _log(name: str, *lines: str) -> LogFile:
    return parse_file(name, "".join(lines))


def _warned(ranks: int) -> list[LogFile]:
    return [_log(f"/job/logs/rank{r}.log", WARN.format(host="n1", text="something odd")) for r in range(ranks)]


@pytest.mark.parametrize(("ranks", "subject"), [(8, "rank0,1,2,3,4,5,6,7"), (9, "rank0,1,2,3,4,5,6,7...")])
def test_eight_ranks_are_named_and_a_ninth_is_an_ellipsis(ranks: int, subject: str) -> None:
    (f,) = explain(_warned(ranks))
    assert (f.code, f.subject) == ("TD051", subject)


def test_a_file_with_no_rank_is_named_by_its_base_name_and_its_evidence_has_no_rank() -> None:
    (f,) = explain([_log("/job/logs/train.out", "NCCL WARN something odd\n")])
    assert (f.code, f.subject) == ("TD051", "train.out")
    assert "rank" not in f.evidence and f.evidence["file"] == "/job/logs/train.out" and f.evidence["line"] == 1
    (g,) = explain(_warned(1))
    assert g.evidence["rank"] == 0


def test_how_sure_each_explanation_is() -> None:
    logs = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs" / "failures" / "duplicate-gpu" / "warn"
    stated = explain([parse_file(str(p), p.read_text(errors="replace")) for p in sorted(logs.iterdir())])
    assert stated[0].code == "TD042" and stated[0].evidence["cause"]["confidence"] == "stated by the log"
    (warned,) = explain(_warned(1))
    assert warned.evidence["cause"]["confidence"] == "likely"
    (unset,) = explain([_log("/x/no-reason.txt", TORCH.format(cls="invalid usage"))])
    assert unset.code == "TD049" and unset.evidence["cause"] == {"what": "not found", "confidence": "not found"}


def test_the_error_class_is_read_without_its_advice_and_the_settings_are_shown() -> None:
    env = {
        "NCCL_NET": "IB",
        "NCCL_SOCKET_IFNAME": "ib0",
        "NCCL_IB_HCA": "mlx5_0",
        "NCCL_SHM_DISABLE": "1",
        "NCCL_TOPO_FILE": "/etc/topo.xml",
        "NCCL_ALGO": "Ring",  # not one that breaks init: not shown
    }
    (f,) = explain([_log("/x/no-reason.txt", TORCH.format(cls="unhandled system error"))], env)
    assert f.evidence["error_class"] == "unhandled system error"
    assert f.message.startswith(
        "NCCL error 'unhandled system error' with no reason in the log (NCCL_DEBUG unset); likely: /dev/shm too small"
    )
    assert f.message.endswith(
        "; the log shows NCCL_NET=IB, NCCL_SOCKET_IFNAME=ib0, NCCL_IB_HCA=mlx5_0, NCCL_SHM_DISABLE=1, "
        "NCCL_TOPO_FILE=/etc/topo.xml"
    )
    (bare,) = explain([_log("/x/no-reason.txt", TORCH.format(cls="invalid usage"))])
    assert "the log shows" not in bare.message and bare.subject == "no-reason.txt"


def test_an_error_class_with_more_words_is_known_by_its_start_and_a_forced_graph_is_named() -> None:
    long = TORCH.format(cls="internal error - please report this issue to the NCCL developers")
    bug, f = explain([_log("/x/a.txt", long)])  # torch's text names 2.18.1: its proxy errors read as internal
    assert bug.code == "TD083" and "fixed in 2.19.1" in bug.message
    assert "likely: NCCL 2.18 reports a failure of its proxy thread" in f.message
    assert f.message.endswith("an NCCL bug, or a mix of NCCL builds")
    (g,) = explain([_log("/x/a.txt", TORCH.format(cls="invalid usage"))], {"NCCL_GRAPH_FILE": "/etc/graph.xml"})
    assert "likely: NCCL_GRAPH_FILE=/etc/graph.xml is set: unset it" in g.message and "; else at init:" in g.message


def test_nccl_s_own_reason_is_quoted_up_to_200_characters() -> None:
    torch = TORCH.format(cls="unhandled system error").replace("Last error:\n\n", "Last error:\n" + "y" * 300 + "\n")
    (f,) = explain([_log("/x/a.txt", torch)])
    assert f.code == "TD052" and f.message == f"NCCL failed (unhandled system error): {'y' * 200}; cause not found"
    assert f.evidence["reason"] == "y" * 300


def test_one_failed_rank_among_healthy_ones_is_still_a_failure() -> None:
    files = [_log("/x/rank0.txt", TORCH.format(cls="invalid usage")), _log("/x/rank1.txt", STEP)]
    assert [f.code for f in explain(files)] == ["TD049"]
    assert explain([_log("/x/rank1.txt", STEP)]) == []


@pytest.mark.parametrize(
    ("versions", "named"),
    [
        (("2.21.5+cuda12.4", "2.21.5+cuda12.1"), None),  # one NCCL, two CUDA builds of it
        (("2.21.5+cuda12.4", "2.18.1+cuda12.1"), "2.21.5 in rank0.log; 2.18.1 in rank1.log"),
        (
            ("2.21.5", "2.21.5", "2.21.5", "2.21.5", "2.18.1"),
            "2.21.5 in rank0.log, rank1.log, rank2.log; 2.18.1 in rank4.log",
        ),
    ],
    ids=["builds", "two", "three-named"],
)
def test_versions_are_nccl_s_own_and_each_names_up_to_three_files(versions: tuple[str, ...], named: str | None) -> None:
    files = [
        _log(f"/job/rank{r}.log", BANNER.format(host=f"n{r}", version=v), WARN.format(host=f"n{r}", text="odd"))
        for r, v in enumerate(versions)
    ]
    found = [f for f in explain(files) if f.code == "TD048"]
    if named is None:
        assert found == []
    else:
        (f,) = found
        assert f.message == f"the logs name 2 NCCL versions: {named}"
        assert f.subject == "logs" and "file" not in f.evidence


def test_warnings_no_class_covers_are_deduplicated_cut_and_capped() -> None:
    long = "x" * 200
    lines = [WARN.format(host="n1", text=f"  odd {i}  ") for i in range(12)]
    f = _log("/job/rank0.log", WARN.format(host="n1", text=long), WARN.format(host="n1", text=long), *lines)
    (w,) = explain([f])
    assert w.message == "NCCL WARN: " + "x" * 160
    assert w.evidence["warnings"] == ["x" * 160, *(f"odd {i}" for i in range(9))]
    assert w.severity == "info"


PEER_LOST = (
    "vm:1328:1639 [0] misc/socket.cc:72 NCCL WARN socketProgress: Connection closed by remote peer localhost<33438>\n"
    "[rank{r}]:[E1125 00:25:28.817411222 ProcessGroupNCCL.cpp:612] [Rank {r}] Collective WorkNCCL(SeqNum=5, "
    "OpType=ALLREDUCE, NumelIn=16777216, NumelOut=16777216, Timeout(ms)=60000) raised the following async exception: "
    "NCCL error: remote process exited or there was a network error, NCCL version 2.28.9\n"
)
STEP = "step 120 loss 2.31\n"


@pytest.mark.parametrize(
    ("went_on", "code"), [((True, True), "TD075"), ((True, False), "TD046"), ((False, False), "TD046")]
)
def test_a_lost_peer_the_job_outlived_in_every_file_is_not_a_failure(went_on: tuple[bool, bool], code: str) -> None:
    files = [_log(f"/job/rank{r}.log", PEER_LOST.format(r=r), *((STEP,) if on else ())) for r, on in enumerate(went_on)]
    assert [f.went_on for f in files] == list(went_on)
    found = {f.code: f for f in explain(files)}
    other = "TD046" if code == "TD075" else "TD075"
    assert code in found and other not in found and found[code].subject == "rank0,1"
    if code == "TD075":
        assert found[code].message == (
            "socket closed (Connection closed by remote peer localhost<33438>) but the job went on afterwards"
        )


IB_NONE = "n1:649:649 [1] NCCL INFO NET/IB : No device found.\n"


@pytest.mark.parametrize(
    ("env", "lines", "td050"),
    [
        ({"NCCL_IB_HCA": "mlx5_9"}, (IB_NONE,), True),
        ({}, (IB_NONE,), False),  # no IB asked for: sockets are expected
        ({"NCCL_IB_HCA": "mlx5_9"}, (), False),  # IB found
    ],
    ids=["asked-none-found", "not-asked", "found"],
)
def test_ib_asked_for_and_not_found_is_named(env: dict[str, str], lines: tuple[str, ...], td050: bool) -> None:
    found = [f for f in explain([_log("/job/rank1.log", *lines)], env) if f.code == "TD050"]
    if td050:
        (f,) = found
        assert (f.subject, f.message) == ("env:NCCL_IB_HCA", "NCCL_IB_HCA=mlx5_9 but NCCL found no IB device")
        assert f.evidence["line"] == 1 and f.severity == "warning"
    else:
        assert found == []


def test_a_full_dev_shm_is_one_cause_not_two() -> None:
    shm = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs" / "synthetic" / "shm-small.txt"
    codes = [f.code for f in explain([parse_file(str(shm), shm.read_text())])]
    assert codes[0] == "TD043" and codes.count("TD043") == 1
