"""A mutation pass: small changes to the code under test (a flipped comparison, a nudged constant,
a dropped call), each judged by the tests that run the changed line; a change no test notices is a
survivor, a place where the tests would let a wrong answer through.

    python tests/mutation/mutate.py AREA [--only NAME] [--limit-s S] [--json OUT]
    AREA: rules, graph, job, fleet, nccl, fileio (tests/mutation/areas.py says what each mutates
    and which tests judge it)

How: pytest collects the area's tests in this process and runs each once while a line tracer
notes which lines of the mutated modules it runs (the baseline; a test that fails there is left
out). For each mutant a child is forked: it swaps the mutated function's code object in place
(so the registry, the decorators and every importer see it) or the mutated module constant, and
runs the tests that ran one of the mutant's lines, the ones that killed most mutants so far first,
until one fails (killed) or none does (survived). A child past its time is killed and counts as
killed (a hang is a behaviour the tests see). A mutant on a line no test runs survives untested.

Not part of CI (minutes per area on two cores): tests/mutation/run.sh runs every area.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import dataclasses
import importlib
import importlib.util
import json
import os
import select
import signal
import sys
import threading
import time
import types
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from areas import AREAS, Area  # noqa: E402
from operators import Site, sites  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Mutant:
    """One change: in ``module``, to ``function`` (``Class.method``, or ``=NAME`` for a module constant)."""

    module: str
    function: str
    line: int
    what: str
    lines: frozenset[int]  # the lines whose tests judge it
    apply: Callable[[], None] = dataclasses.field(compare=False, repr=False)


# ---------------------------------------------------------------- building mutants


def _target(module: types.ModuleType, qualname: str) -> types.FunctionType | None:
    """The function object a definition made, through decorators (cache, property, rule...)."""
    obj: Any = module
    for part in qualname.split("."):
        obj = (vars(obj) if isinstance(obj, (type, types.ModuleType)) else {}).get(part)
        if obj is None:
            return None
    for _ in range(5):
        if isinstance(obj, types.FunctionType):
            return obj
        obj = (
            getattr(obj, "__wrapped__", None)
            or getattr(obj, "__func__", None)
            or getattr(obj, "fget", None)
            or getattr(obj, "func", None)
        )
    return None


def _clear_caches(module: types.ModuleType) -> None:
    for value in vars(module).values():
        clear = getattr(value, "cache_clear", None)
        if callable(clear) and getattr(value, "__module__", None) == module.__name__:
            clear()


def _code_of(fn_node: ast.FunctionDef, in_class: bool, filename: str, name: str) -> types.CodeType:
    """The code object of a mutated definition, compiled where a method's ``__class__`` cell exists."""
    body: list[ast.stmt] = [fn_node]
    if in_class:
        body = [ast.ClassDef(name="_Mutated", bases=[], keywords=[], body=[fn_node], decorator_list=[], type_params=[])]
    tree = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    code = compile(tree, filename, "exec", dont_inherit=True, flags=_FUTURE_FLAGS)
    pending = [code]
    while pending:
        c = pending.pop()
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                if const.co_name == name:
                    return const
                pending.append(const)
    raise LookupError(name)


_FUTURE_FLAGS = __import__("__future__").annotations.compiler_flag


def _definitions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef, bool]]:
    """(qualname, node, is a method) of each module-level function and each method of a module-level class."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            yield node.name, node, False
        elif isinstance(node, ast.ClassDef):
            for sub in node.body:
                if isinstance(sub, ast.FunctionDef):
                    yield f"{node.name}.{sub.name}", sub, True


def mutants(module_name: str) -> Iterator[Mutant]:
    """Every mutant of one module: its functions' bodies, then its numeric constants."""
    module = importlib.import_module(module_name)
    path = Path(module.__file__ or "")
    tree = ast.parse(path.read_text())
    for qualname, node, in_class in _definitions(tree):
        fn = _target(module, qualname)
        if fn is None:
            continue
        for k, site in enumerate(sites(node)):
            yield Mutant(
                module_name,
                qualname,
                site.line,
                site.what,
                frozenset(site.lines),
                _swap(module, fn, node, in_class, str(path), k),
            )
    for name, value, node in _constants(tree, module):
        users = _lines_using(tree, name)
        new = value + 1 if isinstance(value, int) else value * 1.1
        yield Mutant(
            module_name,
            f"={name}",
            node.lineno,
            f"{value!r} -> {new!r}",
            frozenset(users),
            _set_constant(module, name, new),
        )


def _swap(
    module: types.ModuleType, fn: types.FunctionType, node: ast.FunctionDef, in_class: bool, filename: str, k: int
) -> Callable[[], None]:
    def apply() -> None:
        twin = copy.deepcopy(node)
        twin.decorator_list = []
        site: Site = list(sites(twin))[k]
        site.apply()
        code = _code_of(twin, in_class, filename, node.name)
        if code.co_freevars != fn.__code__.co_freevars:
            raise LookupError(f"{fn.__qualname__}: its closure differs")
        fn.__code__ = code
        _clear_caches(module)

    return apply


def _constants(tree: ast.Module, module: types.ModuleType) -> Iterator[tuple[str, int | float, ast.Assign]]:
    """Module-level ``NAME = <number>`` (a literal or arithmetic on literals: ``64 << 20``)."""
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if not name.isupper() or not all(
            isinstance(n, (ast.Constant, ast.BinOp, ast.operator, ast.UnaryOp, ast.unaryop))
            for n in ast.walk(node.value)
        ):
            continue
        value = vars(module).get(name)
        if type(value) in (int, float):
            yield name, value, node


def _lines_using(tree: ast.Module, name: str) -> set[int]:
    """The lines of every function that reads ``name``: where a changed constant shows."""
    out: set[int] = set()
    for _, node, _ in _definitions(tree):
        if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node)):
            out.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return out


def _set_constant(module: types.ModuleType, name: str, new: float) -> Callable[[], None]:
    def apply() -> None:
        old = vars(module)[name]
        for other in list(sys.modules.values()):
            if getattr(other, "__name__", "").startswith("topodoctor") and vars(other).get(name) is old:
                setattr(other, name, new)
        _clear_caches(module)

    return apply


# ---------------------------------------------------------------- running the tests


@dataclasses.dataclass
class Judged:
    """What the baseline learnt of each test: whether it passed, its time, the mutated lines it ran."""

    passed: bool = False
    seconds: float = 0.0
    setup_s: float = 0.0  # its fixtures' set-up: the first test of a module pays the module's
    lines: set[tuple[str, int]] = dataclasses.field(default_factory=set)


class MutationRun:
    """The pytest plugin that replaces the test loop: the baseline, then one child per mutant."""

    def __init__(self, area: Area, only: str | None, limit_s: float, out: Path | None, every: int = 1) -> None:
        self.area, self.only, self.limit_s, self.out, self.every = area, only, limit_s, out, every
        self.files = {str(Path(importlib.import_module(m).__file__ or "").resolve()): m for m in area.modules}

    def pytest_runtestloop(self, session: Any) -> bool:
        from _pytest.runner import runtestprotocol

        items = session.items
        judged = [Judged() for _ in items]
        for i, item in enumerate(items):
            here = judged[i]
            t0 = time.perf_counter()
            self._trace(here.lines)
            try:
                reports = runtestprotocol(item, log=False, nextitem=items[i + 1] if i + 1 < len(items) else None)
            finally:
                sys.settrace(None)
                threading.settrace(None)  # type: ignore[arg-type]
            here.seconds = time.perf_counter() - t0
            here.setup_s = sum(r.duration for r in reports if r.when == "setup")
            here.passed = all(r.passed or (r.when != "call" and not r.failed) for r in reports) and any(
                r.when == "call" and r.passed for r in reports
            )
        session._setupstate.teardown_exact(None)
        # A child sets up again the module fixtures the parent had: whichever test of a module runs
        # first there pays them, so every test is allowed its module's dearest set-up.
        setups: dict[str, float] = {}
        for item, j in zip(items, judged):
            setups[str(item.fspath)] = max(setups.get(str(item.fspath), 0.0), j.setup_s)
        for item, j in zip(items, judged):
            j.setup_s = setups[str(item.fspath)]
        base = sum(j.seconds for j in judged)
        print(f"baseline: {sum(j.passed for j in judged)} of {len(items)} tests pass, {base:.0f} s", flush=True)
        print(f"mutating: {', '.join(sorted(self.files))}", flush=True)
        self._mutate(session, items, judged)
        return True

    def _trace(self, into: set[tuple[str, int]]) -> None:
        files = self.files

        def local(frame: Any, event: str, arg: Any) -> Any:
            if event == "line":
                into.add((files[frame.f_code.co_filename], frame.f_lineno))
            return local

        def call(frame: Any, event: str, arg: Any) -> Any:
            return local if frame.f_code.co_filename in files else None

        sys.settrace(call)
        threading.settrace(call)  # the bounded reads run on a thread of their own

    def _mutate(self, session: Any, items: list[Any], judged: list[Judged]) -> None:
        kills: Counter[int] = Counter()
        results: list[dict[str, Any]] = []
        started = time.monotonic()
        every = [m for module in self.area.modules for m in mutants(module)]
        if self.only:
            every = [m for m in every if self.only in (m.function, m.module, f"{m.module}:{m.function}")]
        every = every[:: self.every]
        for n, m in enumerate(every):
            if time.monotonic() - started > self.limit_s:
                print(f"stopped at the limit ({self.limit_s:.0f} s): {n} of {len(every)} mutants judged", flush=True)
                break
            chosen = [
                i for i, j in enumerate(judged) if j.passed and any((m.module, line) in j.lines for line in m.lines)
            ]
            chosen.sort(key=lambda i: (-kills[i], judged[i].seconds))
            state, by = ("survived", None) if not chosen else self._judge(session, items, chosen, judged, m)
            if by is not None:
                kills[by] += 1
            print(
                f"[{n + 1}/{len(every)}] {state}: {m.module}:{m.line} {m.function}: {m.what}",
                file=sys.stderr,
                flush=True,
            )
            results.append(
                {
                    "module": m.module,
                    "function": m.function,
                    "line": m.line,
                    "what": m.what,
                    "state": state,
                    "tests": len(chosen),
                    "by": items[by].nodeid if by is not None else None,
                }
            )
        self._report(results, time.monotonic() - started)

    def _judge(
        self, session: Any, items: list[Any], chosen: list[int], judged: list[Judged], m: Mutant
    ) -> tuple[str, int | None]:
        """Run the chosen tests on the mutant in a forked child: (state, index of the killing test)."""
        from _pytest.runner import runtestprotocol

        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: mutate, run until a test fails, say which
            os.close(read)
            os.setpgid(0, 0)  # its own group: a child past its time is killed with what it started
            try:
                m.apply()
                for k, i in enumerate(chosen):
                    os.write(write, f"run {i}\n".encode())
                    nxt = items[chosen[k + 1]] if k + 1 < len(chosen) else None
                    reports = runtestprotocol(items[i], log=False, nextitem=nxt)
                    if any(r.failed for r in reports):
                        os.write(write, f"killed {i}\n".encode())
                        break
            except LookupError as exc:
                os.write(write, f"skip {exc}\n".encode())
            except BaseException:  # the mutant broke the runner itself: the tests saw it
                os.write(write, b"crash\n")
            os._exit(0)
        os.close(write)
        # Each test gets its baseline time thrice and 5 s more: a mutant that hangs one is killed then.
        deadline, data, running = time.monotonic() + 10.0, b"", None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                for kill in (os.killpg, os.kill):
                    with contextlib.suppress(ProcessLookupError):
                        kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(read)
                return "timeout", running
            ready, _, _ = select.select([read], [], [], left)
            if not ready:
                continue
            chunk = os.read(read, 4096)
            if not chunk:
                break
            data += chunk
            last = data.decode().strip().splitlines()[-1]
            if last.startswith("run "):
                running = int(last.split()[1])
                deadline = time.monotonic() + 5.0 + 3 * (judged[running].seconds + judged[running].setup_s)
        os.close(read)
        os.waitpid(pid, 0)
        last = (data.decode().strip().splitlines() or [""])[-1]
        if last.startswith("skip"):
            return "skipped", None
        if last == "crash":
            return "killed", None
        if last.startswith("killed "):
            return "killed", int(last.split()[1])
        return "survived", None

    def _report(self, results: list[dict[str, Any]], seconds: float) -> None:
        states = Counter(r["state"] for r in results)
        judged = states["killed"] + states["timeout"] + states["survived"]
        score = (states["killed"] + states["timeout"]) / max(1, judged)
        print(
            f"{self.area.name}: {judged} mutants, {states['killed'] + states['timeout']} killed "
            f"({states['timeout']} by timeout), {states['survived']} survived "
            f"({sum(1 for r in results if r['state'] == 'survived' and r['tests'] == 0)} run by no test), "
            f"score {score:.3f}; {states['skipped']} not applicable; {seconds:.0f} s",
            flush=True,
        )
        for r in results:
            if r["state"] == "survived":
                print(f"  survived: {r['module']}:{r['line']} {r['function']}: {r['what']} ({r['tests']} tests)")
        if self.out is not None:
            doc = {"area": self.area.name, "score": round(score, 3), "states": dict(states), "mutants": results}
            self.out.write_text(json.dumps(doc, indent=1) + "\n")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("area", choices=sorted(AREAS))
    ap.add_argument("--only", help="one function (Class.method, =CONSTANT) or module of the area")
    ap.add_argument("--limit-s", type=float, default=3600.0, help="stop judging new mutants after this long")
    ap.add_argument("--every", type=int, default=1, help="judge every Nth mutant only (a sample of a large area)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    area = AREAS[args.area]
    import pytest

    os.chdir(ROOT)
    plugin = MutationRun(area, args.only, args.limit_s, args.json, args.every)
    # One process (the forked children share its collected tests), and the slow tests judge too.
    flags = ["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-m", "not gpu and not cluster"]
    if importlib.util.find_spec("xdist") is not None:
        flags += ["-n", "0"]
    return int(pytest.main([*flags, *area.tests], plugins=[plugin]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
