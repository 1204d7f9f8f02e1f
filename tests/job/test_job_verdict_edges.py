"""The job verdict at its edges: nothing to judge, a warning under and at the fail level, NCCL RAS
naming ranks only when its communicator is the job's whole world, hosts from the rank map before
the evidence's own, the order findings explain a stall in, and how ranks are told (four, then
"+N more"; a rank with no map entry)."""

from __future__ import annotations

import json

import pytest
from conftest import FIXTURES

from topodoctor.core.errors import EXIT_CANNOT_CHECK, EXIT_OK, EXIT_UNHEALTHY
from topodoctor.job.analysis import Finding
from topodoctor.job.placement import Place
from topodoctor.job.ras import RasIssue, RasRank, RasReport
from topodoctor.job.verdict import ORDER, JobInput, hosts_of, judge_job, ranks_seen, where
from topodoctor.probe.sampler import replay_activity


def _ras(*issues: RasIssue) -> RasReport:
    return RasReport("2.28.9", issues)


def _issue(kind: str, size: int | None, *ranks: RasRank, comm: str = "#0-0 (c5a2)") -> RasIssue:
    return RasIssue(kind, comm, size, ranks, f"{kind} text\nsecond line")  # type: ignore[arg-type]


R3 = RasRank(3, "node02", "0000:19:00.0", 4711, launched=10)
R5 = RasRank(5, "node03", "", None)


def test_nothing_to_judge_is_could_not_check_and_a_clean_ras_report_is_healthy() -> None:
    assert judge_job(JobInput()).exit_code == EXIT_CANNOT_CHECK
    assert judge_job(JobInput(ras=_ras())).exit_code == EXIT_OK


@pytest.mark.parametrize(("world", "ranks"), [(8, (3, 5)), (16, ()), (None, ())])
def test_ras_names_ranks_only_when_its_communicator_is_the_whole_world(
    world: int | None, ranks: tuple[int, ...]
) -> None:
    report = judge_job(JobInput(ras=_ras(_issue("MISMATCH", 8, R3, R5)), world_size=world))
    (f,) = report.findings
    assert (f.kind, f.severity, f.ranks, f.hosts) == ("ras-mismatch", "error", ranks, ("node02", "node03"))
    assert f.message == (
        "NCCL RAS: MISMATCH in communicator #0-0 (c5a2) of 8 ranks: rank 3 GPU 0000:19:00.0 process 4711 on node02 "
        "launched 10 ops; rank 5 GPU ? process ? on node03"
    )
    assert f.detail == ("MISMATCH text", "second line")
    assert report.exit_code == EXIT_UNHEALTHY


def test_a_job_wide_ras_report_without_culprits_quotes_its_text() -> None:
    (f,) = judge_job(JobInput(ras=_ras(_issue("DEAD", None, comm="")))).findings
    assert f.message == "NCCL RAS: DEAD in communicator (job): DEAD text\nsecond line"
    assert (f.kind, f.ranks, f.hosts) == ("ras-dead", (), ())


@pytest.mark.parametrize(("level", "code"), [("error", EXIT_OK), ("warning", EXIT_UNHEALTHY), ("info", EXIT_UNHEALTHY)])
def test_a_warning_fails_the_job_only_from_the_warning_level(level: str, code: int) -> None:
    spinning = replay_activity(json.loads((FIXTURES / "job" / "activity" / "hang.json").read_text()), "hang")
    report = judge_job(JobInput(activity=spinning, activity_host="gpu-host", fail_level=level))  # type: ignore[arg-type]
    (f,) = report.findings
    assert (f.kind, f.severity, f.hosts) == ("gpus-spinning", "warning", ("gpu-host",))
    assert report.exit_code == code
    assert report.culprits() == ((f,) if code else ())


def test_hosts_come_from_the_rank_map_before_the_evidence() -> None:
    f = Finding("ras-mismatch", "error", (3, 5, 9), "m", hosts=("10.0.0.2",))
    places = {3: Place(3, "node02"), 5: Place(5, "node02"), 9: Place(9, "")}
    assert hosts_of(f, places) == ("node02",)  # mapped, once; a rank with no host adds none
    assert hosts_of(f, {}) == ("10.0.0.2",)
    assert hosts_of(Finding("stuck", "error", (), "m"), places) == ()


def test_ranks_are_told_four_at_a_time_and_a_rank_with_no_map_says_so() -> None:
    places = {r: Place(r, f"node{r:02d}", r % 2, "0000:19:00.0") for r in range(6)}
    five = Finding("not-started", "error", (0, 1, 2, 3, 4), "m")
    told = where(five, places)
    assert told.startswith("rank 0 (node00, local rank 0, GPU 0000:19:00.0), rank 1 (node01") and told.endswith(
        "rank 3 (node03, local rank 1, GPU 0000:19:00.0) +1 more"
    )
    assert where(Finding("stuck", "error", (7,), "m"), places) == "rank 7 (no rank map)"
    assert where(Finding("ras-dead", "error", (), "m", hosts=("a", "b")), places) == "a, b"
    four = Finding("stuck", "error", (0, 1, 2, 3), "m")
    assert not where(four, places).endswith("more")


def test_the_count_of_dumps_is_singular_for_one() -> None:
    assert ranks_seen([]) == "0 rank dumps"
    assert ranks_seen([object()]) == "1 rank dump"  # type: ignore[list-item]
    assert ranks_seen([object(), object()]) == "2 rank dumps"  # type: ignore[list-item]


def test_a_program_bug_is_told_before_what_it_caused() -> None:
    ras = _ras(_issue("ERROR", None, R3), _issue("MISMATCH", 8, R5), _issue("DEAD", None, R3))
    kinds = [f.kind for f in judge_job(JobInput(ras=ras, world_size=8)).findings]
    assert kinds == sorted(kinds, key=ORDER.index) == ["ras-mismatch", "ras-dead", "ras-error"]


def test_ras_text_is_quoted_up_to_200_characters_and_20_lines() -> None:
    issue = RasIssue("INCOMPLETE", "", None, (), "\n".join(f"line {i:03d} " + "z" * 40 for i in range(25)))
    (f,) = judge_job(JobInput(ras=_ras(issue))).findings
    assert f.message == f"NCCL RAS: INCOMPLETE in communicator (job): {issue.text[:200]}"
    assert len(f.detail) == 20 and f.detail[-1].startswith("line 019 ")


def test_without_a_world_size_the_rank_map_gives_it() -> None:
    places = {r: Place(r, f"node{r // 4:02d}") for r in range(8)}
    (f,) = judge_job(JobInput(ras=_ras(_issue("MISMATCH", 8, R3, R5)), places=places)).findings
    assert f.ranks == (3, 5)  # the map holds 8 ranks: the communicator of 8 is the whole job
    (g,) = judge_job(JobInput(ras=_ras(_issue("MISMATCH", 8, R3, R5)), places=dict(list(places.items())[:4]))).findings
    assert g.ranks == ()  # a map of 4: a communicator of 8 is not known to be the job's
