"""Each class of the package has a name of its own: two classes of one name (two ``Outcome``s, two
``Context``s) are two concepts under one word, or one concept declared twice, and neither a reader
nor a search can tell them apart. A class is named for what it holds."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def classes_named_twice(paths: Iterable[Path]) -> dict[str, list[str]]:
    """Every class name declared more than once among ``paths``, with where (``file:line``)."""
    seen: dict[str, list[str]] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                seen.setdefault(node.name, []).append(f"{path.relative_to(path.anchor)}:{node.lineno}")
    return {name: where for name, where in seen.items() if len(where) > 1}


def test_no_two_classes_of_the_package_share_a_name() -> None:
    files = sorted((ROOT / "topodoctor").rglob("*.py"))
    assert len(files) > 300  # the whole package was read
    assert classes_named_twice(files) == {}


def test_a_name_declared_twice_is_found_nested_or_not(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class Outcome:\n    pass\n\n\nclass Plan:\n    pass\n")
    (tmp_path / "b.py").write_text("def f() -> None:\n    class Outcome:\n        pass\n")
    twice = classes_named_twice([tmp_path / "a.py", tmp_path / "b.py"])
    assert list(twice) == ["Outcome"] and [w.rsplit(":", 1)[1] for w in twice["Outcome"]] == ["1", "2"]
