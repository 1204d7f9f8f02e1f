"""Rule cases of the fitness family (TD710-TD718): part of the table in tests/support/rule_cases.py.

Each judges a derived result of fixtures/derive_fitness.py (a real H200 measurement spread over
the four GPUs of the h200-x4 recording, then changed as the scenario's name says) on that host.
"""

from __future__ import annotations

from functools import cache

from conftest import FIXTURES
from rule_case_kit import Case

from topodoctor.core.codec import from_jsonable, read_json
from topodoctor.model.fitness_results import FitnessResult

DERIVED = FIXTURES / "fitness" / "derived"


@cache
def fitness_result(name: str) -> FitnessResult:
    return from_jsonable(FitnessResult, read_json(DERIVED / f"{name}.json", name), name)


def _case(code: str, fires: bool, name: str, subjects: tuple[str, ...] | None = None, **kw: object) -> Case:
    return Case(code, fires, "h200-x4", f"fitness result {name}", fitness=name, subjects=subjects, **kw)  # type: ignore[arg-type]


MEASURED_CASES = [
    _case("TD710", True, "hbm-all-slow", ("GPU0", "GPU0", "GPU1", "GPU1", "GPU2", "GPU2", "GPU3", "GPU3")),
    _case("TD710", False, "hbm-all-near"),
    _case("TD710", False, "healthy"),
    _case("TD711", True, "hbm-slow-gpu2", ("GPU2", "GPU2")),
    _case("TD711", False, "hbm-near-gpu2"),
    _case("TD711", False, "hbm-all-slow"),  # peers agree: the limit (TD710) catches it
    _case("TD712", True, "compute-slow-gpu1", ("GPU1",)),
    _case("TD712", False, "compute-near-gpu1"),
    _case("TD713", True, "hw-thermal-gpu3", ("GPU3",)),
    _case("TD713", False, "healthy"),  # SW power cap in every sample of every GPU: normal at full load
    _case("TD714", True, "compute-slow-gpu1", ("GPU1",), expect_from="h200-x4"),
    _case("TD714", True, "hbm-all-slow", expect_from="h200-x4"),
    _case("TD714", False, "compute-near-gpu1", expect_from="h200-x4"),
    _case("TD715", True, "wrong-data-gpu1", ("GPU1",)),
    _case("TD715", False, "healthy"),
    _case("TD716", True, "timeout-gpu3", ("GPU3",)),
    _case("TD716", False, "busy-gpu0"),  # refused on purpose: could not check (TD901), not a failure
    _case("TD901", True, "busy-gpu0"),
    _case("TD717", True, "pair-slow-0-1", ("GPU0-GPU1",)),
    _case("TD717", False, "pair-near-0-1"),
    _case("TD718", True, "latency-slow-gpu2", ("GPU2",)),
    _case("TD718", False, "latency-near-gpu2"),
]
