"""Helpers of the rule cases of the fitness family (TD710-TD718): the helpers those cases are written
with (the cases themselves are in tests/rules/cases/, by family).

Each judges a derived result of fixtures/derive_fitness.py (a real H200 measurement spread over the
four GPUs of the h200-x4 recording, then changed as the scenario's name says) on that host."""

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
