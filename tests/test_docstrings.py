"""Every public class, function and method of the package says what it is in a docstring.

The walk is static (``ast``), so it reads modules that need torch or a GPU without importing them.
Public means a name without a leading underscore, reachable from the module: module-level
functions and classes (also under ``if`` / ``try``), and the methods and nested classes of public
classes. Not counted: dunders (``__init__`` and the rest), functions local to a function, overload
stubs (the implementation carries the docstring) and property setters and deleters (the getter
does)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "topodoctor"

Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _decorator_names(node: Definition) -> set[str]:
    """The last dotted part of each decorator: ``overload``, ``setter``, ``property``..."""
    names = set()
    for d in node.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        if isinstance(target, ast.Attribute):
            names.add(target.attr)
        elif isinstance(target, ast.Name):
            names.add(target.id)
    return names


def _exempt(node: Definition) -> bool:
    if node.name.startswith("_"):
        return True
    if isinstance(node, ast.ClassDef):
        return False
    return bool(_decorator_names(node) & {"overload", "setter", "deleter"})


def _definitions(body: list[ast.stmt]) -> Iterator[Definition]:
    """The classes and functions a block defines, looking into if / try / with but not into functions."""
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield stmt
        elif isinstance(stmt, ast.If):
            yield from _definitions(stmt.body)
            yield from _definitions(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            for block in (stmt.body, stmt.orelse, stmt.finalbody, *(h.body for h in stmt.handlers)):
                yield from _definitions(block)
        elif isinstance(stmt, ast.With):
            yield from _definitions(stmt.body)


def public_definitions(tree: ast.Module) -> Iterator[tuple[str, str, Definition]]:
    """(kind, qualified name, node) for every public class, function and method of a module."""

    def walk(body: list[ast.stmt], prefix: str, in_class: bool) -> Iterator[tuple[str, str, Definition]]:
        for node in _definitions(body):
            if _exempt(node):
                continue
            name = f"{prefix}{node.name}"
            if isinstance(node, ast.ClassDef):
                yield "class", name, node
                yield from walk(node.body, f"{name}.", in_class=True)
            else:
                yield ("method" if in_class else "function"), name, node

    yield from walk(tree.body, "", in_class=False)


def census() -> tuple[dict[str, tuple[int, int]], list[str]]:
    """Per kind (documented, total), and ``path:line kind name`` for each one without a docstring."""
    counts: dict[str, list[int]] = {"class": [0, 0], "function": [0, 0], "method": [0, 0]}
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        for kind, name, node in public_definitions(tree):
            documented = bool((ast.get_docstring(node) or "").strip())
            counts[kind][0] += documented
            counts[kind][1] += 1
            if not documented:
                missing.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {kind} {name}")
    return {k: (v[0], v[1]) for k, v in counts.items()}, missing


@pytest.mark.slow
def test_every_public_definition_has_a_docstring() -> None:
    counts, missing = census()
    summary = ", ".join(f"{kind}: {d} of {t}" for kind, (d, t) in counts.items())
    assert not missing, f"{len(missing)} public definitions without a docstring ({summary}):\n" + "\n".join(missing)


def test_the_walk_sees_what_it_should() -> None:
    source = '''
class Public:
    """Documented."""

    size: int = 0

    def __init__(self) -> None: ...

    def method(self) -> None: ...

    @property
    def value(self) -> int:
        """Documented."""
        return 0

    @value.setter
    def value(self, v: int) -> None: ...

    def _private(self) -> None: ...

    class Inner: ...


class _Private:
    def method(self) -> None: ...


if True:
    def conditional() -> None: ...


@overload
def f(x: int) -> int: ...


def f(x):
    def local() -> None: ...
    return x
'''
    found = {
        (kind, name): ast.get_docstring(node) is not None for kind, name, node in public_definitions(ast.parse(source))
    }
    assert found == {
        ("class", "Public"): True,
        ("method", "Public.method"): False,
        ("method", "Public.value"): True,
        ("class", "Public.Inner"): False,
        ("function", "conditional"): False,
        ("function", "f"): False,
    }
