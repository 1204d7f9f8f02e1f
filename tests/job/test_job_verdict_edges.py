"""The job verdict at its edges: nothing to judge, a warning under and at the fail level, NCCL RAS
naming ranks only when its communicator is the job's whole world, hosts from the rank map before
the evidence's own, the order findings explain a stall in, and how ranks are told (four, then
"+N more"; a rank with no map entry)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from conftest import FIXTURES

from tests.job.test_stragglers_edges import _dumps, _entry
from topodoctor.core.errors import EXIT_CANNOT_CHECK, EXIT_OK, EXIT_UNHEALTHY
from topodoctor.job.analysis import JobFinding
from topodoctor.job.dumps import GroupInfo, RankDump
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
    f = JobFinding("ras-mismatch", "error", (3, 5, 9), "m", hosts=("10.0.0.2",))
    places = {3: Place(3, "node02"), 5: Place(5, "node02"), 9: Place(9, "")}
    assert hosts_of(f, places) == ("node02",)  # mapped, once; a rank with no host adds none
    assert hosts_of(f, {}) == ("10.0.0.2",)
    assert hosts_of(JobFinding("stuck", "error", (), "m"), places) == ()


def test_ranks_are_told_four_at_a_time_and_a_rank_with_no_map_says_so() -> None:
    places = {r: Place(r, f"node{r:02d}", r % 2, "0000:19:00.0") for r in range(6)}
    five = JobFinding("not-started", "error", (0, 1, 2, 3, 4), "m")
    told = where(five, places)
    assert told.startswith("rank 0 (node00, local rank 0, GPU 0000:19:00.0), rank 1 (node01") and told.endswith(
        "rank 3 (node03, local rank 1, GPU 0000:19:00.0) +1 more"
    )
    assert where(JobFinding("stuck", "error", (7,), "m"), places) == "rank 7 (no rank map)"
    assert where(JobFinding("ras-dead", "error", (), "m", hosts=("a", "b")), places) == "a, b"
    four = JobFinding("stuck", "error", (0, 1, 2, 3), "m")
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


def _two_groups() -> tuple[RankDump, ...]:
    """Three ranks in the default group (four collectives), ranks 0 and 1 also in a group of two."""
    tp = GroupInfo("1", "tp", (0, 1))
    tp_ops = tuple(replace(_entry(s, s * 100.0), pg="1", pg_desc="tp") for s in range(3))
    return tuple(
        replace(
            d,
            groups=(tp,),
            entries=d.entries + (tp_ops if d.rank < 2 else ()),
        )
        for d in _dumps(0, 4)
    )


@pytest.mark.parametrize(("size", "ranks"), [(3, (1,)), (2, ())])
def test_without_a_world_size_or_map_the_largest_group_is_the_world(size: int, ranks: tuple[int, ...]) -> None:
    ras = _ras(_issue("MISMATCH", size, RasRank(1, "node01", "", None)))
    (f,) = (f for f in judge_job(JobInput(dumps=_two_groups(), ras=ras)).findings if f.kind == "ras-mismatch")
    assert (f.severity, f.ranks) == ("error", ranks)  # a communicator of 2 is the subgroup's, not the job's


def test_lateness_is_judged_only_in_a_group_that_ran_clean() -> None:
    dumps = tuple(_dumps(10))  # rank 2 last in every collective: a straggler in a job of three
    (late,) = judge_job(JobInput(dumps=dumps)).findings
    assert (late.kind, late.severity, late.ranks) == ("straggler", "error", (2,))
    # Rank 0 passed other sizes to collective 3: every rank completed it, but the group did not run clean.
    sizes = replace(
        dumps[0], entries=tuple(replace(e, input_sizes=((8,),)) if e.seq == 3 else e for e in dumps[0].entries)
    )
    report = judge_job(JobInput(dumps=(sizes, *dumps[1:])))
    assert [(f.kind, f.severity) for f in report.findings] == [("size-mismatch", "error")]
    report = judge_job(JobInput(dumps=dumps, world_size=4))  # rank 3 left no dump
    assert [(f.kind, f.severity, f.ranks) for f in report.findings] == [("missing-dump", "error", (3,))]


def test_a_job_verdict_has_nothing_unusable_and_says_why_it_judged_nothing() -> None:
    assert judge_job(JobInput(ras=_ras())).unusable == ()
    assert judge_job(JobInput(ras=_ras())).not_measured == ()
    assert judge_job(JobInput()).not_measured == ("nothing to judge: no dump, RAS answer or GPU reading",)
