"""What each area of the mutation pass mutates, and the tests that judge it: in-process tests (a
test that runs topodoctor in another interpreter never sees a mutant), the ones that exercise the
area's modules. A mutant is judged only by those of them that ran its line in the baseline."""

from __future__ import annotations

import dataclasses
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RULE_FAMILIES = sorted(
    f"topodoctor.rules.{p.stem}" for p in (ROOT / "topodoctor" / "rules").glob("*.py") if p.stem not in ("__init__",)
)


GLOO_TESTS = (
    "gloo",
    "missing_dump_of_a_healthy_job",
    "world_size_without_a_map",
    "healthy_job_is_ok",
    "late_rank_below_the_threshold",
    "once_past_its_peers_timeout",
    "json_form_of_the_dumps",
    "culprit_joined_with_its_hosts",
)


@dataclasses.dataclass(frozen=True)
class Area:
    """An area: its name, the modules it mutates, the pytest arguments that collect its judges."""

    name: str
    modules: tuple[str, ...]
    tests: tuple[str, ...]

    def __post_init__(self) -> None:
        # A test file this checkout lacks is left out (an earlier tree, measured for a before-and-after).
        kept = tuple(t for t in self.tests if not t.startswith("tests/") or (ROOT / t).exists())
        object.__setattr__(self, "tests", kept)


AREAS = {
    a.name: a
    for a in (
        Area(
            "rules",
            ("topodoctor.rules", *RULE_FAMILIES),
            ("tests/rules", "tests/topology/test_scope.py", "tests/probe/test_replay.py"),
        ),
        Area(
            "graph",
            ("topodoctor.topology.graph", "topodoctor.topology.hostgraph", "topodoctor.topology.topo_matrix"),
            (
                "tests/topology/test_graph.py",
                "tests/topology/test_hostgraph_networkx.py",
                "tests/topology/test_graph_inputs.py",
                "tests/probe/test_replay.py",
                "tests/rules/test_rule_cases.py",
                "tests/rules/test_rules.py",
                "tests/rules/test_fault_classes.py",
            ),
        ),
        Area(
            "job",
            ("topodoctor.job.verdict",),
            # The tests on the gloo fixture's real jobs are left out: a child would start them again for
            # each mutant (a minute and a half); the recorded dumps and the verdict's own tests judge it.
            ("tests/job", "-k", "not (" + " or ".join(GLOO_TESTS) + ")"),
        ),
        Area("fleet", ("topodoctor.fleet.rollup",), ("tests/fleet", "tests/report/test_prometheus.py")),
        Area("nccl", ("topodoctor.nccl.explain",), ("tests/nccl",)),
        Area(
            "fileio",
            ("topodoctor.core.fileio",),
            (
                "tests/core/test_fileio.py",
                "tests/core/test_fileio_limits.py",
                "tests/core/test_fileio_failures.py",
                "tests/cli/test_hostile_writers.py",
            ),
        ),
    )
}
