"""A targeted mutation pass over the rule modules (mutmut skips decorated functions, so the
@rule bodies need their own): each mutant of a rule body or rule helper is swapped into the
live registry and judged by the rule tests themselves (the case table, the derived scenarios'
exact codes, the fault classes' subjects, the healthy real hosts).

    python tests/mutation/rules_pass.py [--module nvlink ...] [--json OUT]

Not part of CI (minutes, not seconds): tests/mutation/run.sh runs it with mutmut.
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import importlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), *(str(ROOT / "tests" / d) for d in ("", "support", "rules", "probe"))]

MODULES = ("nvlink", "pcie", "p2p", "numa", "fabric", "expectations", "bandwidth", "probe")
_SWAP_CMP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


@dataclasses.dataclass(frozen=True)
class Mutant:
    module: str
    function: str
    line: int
    what: str
    tree: ast.FunctionDef


def _mutations(fn: ast.FunctionDef) -> Iterator[tuple[int, str, Callable[[ast.AST], None]]]:
    """(line, description, how to apply to the copy's matching node) for each site."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                if type(op) in _SWAP_CMP:
                    new = _SWAP_CMP[type(op)]
                    yield node.lineno, f"{type(op).__name__} -> {new.__name__}", _set_op(k, new)
        elif isinstance(node, ast.BoolOp):
            flip = ast.Or if isinstance(node.op, ast.And) else ast.And
            yield node.lineno, f"{type(node.op).__name__} -> {flip.__name__}", _set_attr("op", flip())
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node.lineno, "drop not", _drop_not
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            yield node.lineno, f"{node.value} -> {node.value + 1}", _set_attr("value", node.value + 1)
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            yield node.lineno, f"{node.value} -> {not node.value}", _set_attr("value", not node.value)
        elif isinstance(node, ast.Constant) and type(node.value) is float:
            yield node.lineno, f"{node.value} -> {node.value * 1.1:.4g}", _set_attr("value", node.value * 1.1)
        elif isinstance(node, (ast.Continue, ast.Break)):
            yield node.lineno, f"{type(node).__name__.lower()} -> pass", _to_pass
        elif isinstance(node, ast.If):
            yield node.lineno, "negate if", _negate_if


def _set_op(k: int, op: type[ast.cmpop]) -> Callable[[ast.AST], None]:
    def apply(node: ast.AST) -> None:
        assert isinstance(node, ast.Compare)
        node.ops[k] = op()

    return apply


def _set_attr(name: str, value: Any) -> Callable[[ast.AST], None]:
    def apply(node: ast.AST) -> None:
        setattr(node, name, value)

    return apply


def _drop_not(node: ast.AST) -> None:
    assert isinstance(node, ast.UnaryOp)
    node.op = ast.UAdd()  # +x keeps the operand's truth; only its negation is gone


def _to_pass(node: ast.AST) -> None:
    node.__class__ = ast.Pass


def _negate_if(node: ast.AST) -> None:
    assert isinstance(node, ast.If)
    node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)


def mutants(module: str) -> Iterator[Mutant]:
    path = ROOT / "topodoctor" / "rules" / f"{module}.py"
    tree = ast.parse(path.read_text())
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        sites = list(_mutations(fn))
        for i, (line, what, apply) in enumerate(sites):
            twin = copy.deepcopy(fn)
            node = list(_mutations_nodes(twin))[i]
            apply(node)
            twin.decorator_list = []
            yield Mutant(module, fn.name, line, what, twin)


def _mutations_nodes(fn: ast.FunctionDef) -> Iterator[ast.AST]:
    """The nodes _mutations yields a site for, in the same order."""
    for node in ast.walk(fn):
        if isinstance(node, ast.Compare):
            for op in node.ops:
                if type(op) in _SWAP_CMP:
                    yield node
        elif (
            isinstance(node, (ast.BoolOp, ast.Continue, ast.Break, ast.If))
            or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not))
            or (isinstance(node, ast.Constant) and type(node.value) in (int, bool, float))
        ):
            yield node


def _judges() -> list[Callable[[], None]]:
    """The rule tests, as plain callables that raise AssertionError on a wrong answer."""
    import test_fault_classes as fc
    import test_probe_errors as pe
    import test_rule_cases as rc
    import test_rules as tr
    from conftest import DERIVED, RECORDINGS

    out: list[Callable[[], None]] = [lambda c=c: rc.test_case(c) for c in rc.ALL_CASES if c.source != "x4-nvml-hang"]
    out += [lambda s=s: tr.test_scenario_raises_exactly_its_codes(s) for s in DERIVED if s["name"] != "x4-nvml-hang"]
    params = next(m for m in fc.test_fault_is_blamed_on_its_subject.pytestmark if m.name == "parametrize").args[1]
    out += [lambda p=p: fc.test_fault_is_blamed_on_its_subject(*p) for p in params]
    out += [lambda r=r: tr.test_real_hosts_are_healthy(r) for r in RECORDINGS]
    out += [tr.test_probe_failure_is_reported_not_passed, fc.test_sys_pairs_are_one_finding_with_the_pairs_in_evidence]
    # The refused-answer sweep: every sysfs case, every fifth NVML case (the whole sweep per
    # mutant would take minutes), and the selection test.
    out += [lambda c=c: pe.test_every_refused_sysfs_access_is_reported_on_its_subject(*c) for c in pe.SYSFS_CASES]
    out += [lambda c=c: pe.test_every_nvml_failure_is_reported_on_its_subject(*c) for c in pe.NVML_CASES[::5]]
    out += [pe.test_the_unchanged_recording_is_healthy, pe.test_ignoring_a_rule_does_not_hide_other_incomplete_checks]
    return out


def killed(m: Mutant, judges: list[Callable[[], None]]) -> bool:
    from topodoctor.rules import REGISTRY

    mod = importlib.import_module(f"topodoctor.rules.{m.module}")
    original = mod.__dict__[m.function]
    rule = next((r for r in REGISTRY.values() if r.func is original), None)
    code = compile(ast.fix_missing_locations(ast.Module(body=[m.tree], type_ignores=[])), mod.__file__ or "", "exec")
    exec(code, mod.__dict__)
    new = mod.__dict__[m.function]
    if rule is not None:
        REGISTRY[rule.code] = dataclasses.replace(rule, func=new)
    # Modules that imported the function by name hold the original: swap it there too.
    holders = [
        vars(other)
        for name, other in list(sys.modules.items())
        if name.startswith("topodoctor") and other is not mod and vars(other).get(m.function) is original
    ]
    for held in holders:
        held[m.function] = new
    try:
        for judge in judges:
            try:
                judge()
            except Exception:  # an assertion, or the mutant crashed: either way the tests saw it
                return True
        return False
    finally:
        mod.__dict__[m.function] = original
        for held in holders:
            held[m.function] = original
        if rule is not None:
            REGISTRY[rule.code] = rule


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--module", action="append", choices=MODULES)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    judges = _judges()
    for judge in judges:  # the unmutated rules pass every judge, or the pass means nothing
        judge()
    t0 = time.monotonic()
    results = []
    for module in args.module or MODULES:
        for m in mutants(module):
            results.append((m, killed(m, judges)))
    survivors = [m for m, k in results if not k]
    score = 100.0 * (len(results) - len(survivors)) / max(1, len(results))
    print(
        f"rules pass: {len(results)} mutants, {len(results) - len(survivors)} killed, score {score:.1f}%, "
        f"{time.monotonic() - t0:.0f} s"
    )
    for m in survivors:
        print(f"  survived: rules/{m.module}.py:{m.line} {m.function}: {m.what}")
    if args.json:
        doc = {
            "mutants": len(results),
            "killed": len(results) - len(survivors),
            "score": round(score, 1),
            "survivors": [dataclasses.asdict(m) | {"tree": None} for m in survivors],
        }
        args.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
