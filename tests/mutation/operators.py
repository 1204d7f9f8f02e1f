"""The mutation operators: each place in a function's body where a small change would change what it
answers, and how to make that change to the syntax tree.

Comparisons flipped at their edge (``<`` and ``<=``, ``==`` and ``!=``, ``in`` and ``not in``); ``and``
and ``or``; a ``not`` dropped; numbers nudged (an integer + 1, a float x 1.1) and booleans flipped;
the text a comparison or a string method matches against changed; a normalising call dropped
(``.lower()``, ``.strip()``); a prefix or suffix test made an equality; ``+`` and ``-``, ``*`` and ``/``;
``min`` and ``max``, ``any`` and ``all``; an ``if`` negated; a call statement, ``continue``, ``break`` or
``raise`` dropped; a returned value made None.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable, Iterator

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
_SWAP_BIN: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
}
_SWAP_CALL = {"min": "max", "max": "min", "any": "all", "all": "any"}
_NORMALISERS = {"lower", "upper", "casefold", "strip", "lstrip", "rstrip"}
_MATCHERS = {
    "startswith",
    "endswith",
    "split",
    "rsplit",
    "partition",
    "rpartition",
    "removeprefix",
    "removesuffix",
    "find",
    "count",
    "replace",
    "get",
}


@dataclasses.dataclass
class Site:
    """One mutation: where (its first line, every line it spans), what, and the change itself."""

    line: int
    lines: tuple[int, ...]
    what: str
    apply: Callable[[], None]


def _span(node: ast.AST) -> tuple[int, tuple[int, ...]]:
    first = getattr(node, "lineno", 0)
    last = getattr(node, "end_lineno", None) or first
    return first, tuple(range(first, last + 1))


def _parents(fn: ast.FunctionDef) -> dict[int, tuple[ast.AST, str, int | None]]:
    """id(node) -> (parent, field, index in the field's list or None)."""
    out: dict[int, tuple[ast.AST, str, int | None]] = {}
    for parent in ast.walk(fn):
        for name, value in ast.iter_fields(parent):
            if isinstance(value, list):
                for i, child in enumerate(value):
                    if isinstance(child, ast.AST):
                        out[id(child)] = (parent, name, i)
            elif isinstance(value, ast.AST):
                out[id(value)] = (parent, name, None)
    return out


def _replace(parents: dict[int, tuple[ast.AST, str, int | None]], old: ast.AST, new: ast.AST) -> Callable[[], None]:
    def apply() -> None:
        parent, name, index = parents[id(old)]
        ast.copy_location(new, old)
        if index is None:
            setattr(parent, name, new)
        else:
            getattr(parent, name)[index] = new

    return apply


def _set(node: ast.AST, name: str, value: object) -> Callable[[], None]:
    def apply() -> None:
        setattr(node, name, value)

    return apply


def _set_op(node: ast.Compare, k: int, op: type[ast.cmpop]) -> Callable[[], None]:
    def apply() -> None:
        node.ops[k] = op()

    return apply


def _body(fn: ast.FunctionDef) -> Iterator[ast.AST]:
    """The nodes of the body (nested functions included), not the signature or the decorators."""
    docstring = fn.body[0] if fn.body and isinstance(fn.body[0], ast.Expr) else None
    for stmt in fn.body:
        if stmt is docstring and isinstance(getattr(stmt, "value", None), ast.Constant):
            continue
        yield from ast.walk(stmt)


def _matched_strings(fn: ast.FunctionDef) -> set[int]:
    """ids of the string constants a comparison or a string method matches against."""
    out: set[int] = set()
    for node in _body(fn):
        holders: list[ast.AST] = []
        if isinstance(node, ast.Compare):
            holders = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MATCHERS:
            holders = list(node.args[:1])
        for h in holders:
            for c in ast.walk(h):
                if isinstance(c, ast.Constant) and isinstance(c.value, str):
                    out.add(id(c))
    return out


def sites(fn: ast.FunctionDef) -> Iterator[Site]:
    """Every mutation of ``fn``'s body, in a fixed order (the same on a copy of the tree)."""
    parents = _parents(fn)
    matched = _matched_strings(fn)
    for node in _body(fn):
        line, lines = _span(node)
        if isinstance(node, ast.Compare):
            for k, op in enumerate(node.ops):
                if type(op) in _SWAP_CMP:
                    new = _SWAP_CMP[type(op)]
                    yield Site(line, lines, f"{type(op).__name__} -> {new.__name__}", _set_op(node, k, new))
        elif isinstance(node, ast.BoolOp):
            flip: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            yield Site(line, lines, f"{type(node.op).__name__} -> {type(flip).__name__}", _set(node, "op", flip))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield Site(line, lines, "drop not", _replace(parents, node, node.operand))
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            yield Site(line, lines, f"{node.value} -> {not node.value}", _set(node, "value", not node.value))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            yield Site(line, lines, f"{node.value} -> {node.value + 1}", _set(node, "value", node.value + 1))
        elif isinstance(node, ast.Constant) and type(node.value) is float:
            yield Site(line, lines, f"{node.value} -> {node.value * 1.1:.4g}", _set(node, "value", node.value * 1.1))
        elif isinstance(node, ast.Constant) and id(node) in matched:
            yield Site(line, lines, f"{node.value!r} -> {node.value + 'X'!r}", _set(node, "value", node.value + "X"))
        elif isinstance(node, ast.BinOp) and type(node.op) in _SWAP_BIN:
            new_op = _SWAP_BIN[type(node.op)]
            yield Site(line, lines, f"{type(node.op).__name__} -> {new_op.__name__}", _set(node, "op", new_op()))
        elif isinstance(node, ast.AugAssign) and type(node.op) in _SWAP_BIN:
            new_op = _SWAP_BIN[type(node.op)]
            yield Site(line, lines, f"{type(node.op).__name__}= -> {new_op.__name__}=", _set(node, "op", new_op()))
        elif isinstance(node, ast.Call):
            yield from _call_sites(node, parents, line, lines)
        elif isinstance(node, (ast.If, ast.IfExp, ast.While)):
            test = node.test
            yield Site(
                line, lines, f"negate {type(node).__name__.lower()}", _set(node, "test", ast.UnaryOp(ast.Not(), test))
            )
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            yield Site(line, lines, "drop the call", _replace(parents, node, ast.Pass()))
        elif isinstance(node, (ast.Continue, ast.Break, ast.Raise)):
            yield Site(line, lines, f"drop {type(node).__name__.lower()}", _replace(parents, node, ast.Pass()))
        elif isinstance(node, ast.Return) and node.value is not None and not _is_none(node.value):
            yield Site(line, lines, "return None", _set(node, "value", ast.Constant(None)))


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _call_sites(
    node: ast.Call, parents: dict[int, tuple[ast.AST, str, int | None]], line: int, lines: tuple[int, ...]
) -> Iterator[Site]:
    f = node.func
    if isinstance(f, ast.Name) and f.id in _SWAP_CALL:
        yield Site(line, lines, f"{f.id} -> {_SWAP_CALL[f.id]}", _set(f, "id", _SWAP_CALL[f.id]))
    elif isinstance(f, ast.Attribute) and f.attr in _NORMALISERS:
        yield Site(line, lines, f"drop .{f.attr}()", _replace(parents, node, f.value))
    elif isinstance(f, ast.Attribute) and f.attr in ("startswith", "endswith") and len(node.args) == 1:
        arg = node.args[0]
        op: ast.cmpop = ast.In() if isinstance(arg, ast.Tuple) else ast.Eq()
        same = ast.Compare(left=f.value, ops=[op], comparators=[arg])
        yield Site(
            line, lines, f".{f.attr}() -> {'in' if isinstance(op, ast.In) else '=='}", _replace(parents, node, same)
        )
