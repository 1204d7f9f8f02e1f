"""Every file a docstring, a comment or README.md names by its path (``topodoctor/rules/registry.py``,
``docs/prolog.md``, ``tests/support/job_ranks.py``, ``measure/copies/worker.py`` within the
package, ``rank/sweeps.py`` beside it) exists: prose that names a moved or deleted file fails here.

A path is checked when its first folder is a real one (at the top, in the package, in tests/, or
beside the naming file): ``OUT/result.json`` or ``d/1.json`` in a test's own temporary folder are
not the repository's. The pages of docs/ keep a history of
measurements that names files since removed, and are not held to it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAMED = re.compile(r"(?<![\w/.$-])((?:[\w-]+/)+[\w-]+\.(?:py|md|sh|json|toml|txt))\b")
SOURCES = [
    *ROOT.glob("topodoctor/**/*.py"),
    *ROOT.glob("tests/**/*.py"),
    *ROOT.glob("fixtures/*.py"),
    ROOT / "README.md",
    ROOT / ".ci" / "run",
]


def _bases(source: Path) -> list[Path]:
    """Where a path named in ``source`` may start: the top, the package, tests/ and its helpers,
    and every folder from the source's own up to the top."""
    ups = [p for p in source.parents if p == ROOT or ROOT in p.parents]
    return [ROOT, ROOT / "topodoctor", ROOT / "tests", ROOT / "tests" / "support", *ups]


def test_every_file_named_in_the_prose_exists() -> None:
    missing = []
    for source in SOURCES:
        bases = _bases(source)
        for ref in set(NAMED.findall(source.read_text())):
            first = ref.split("/")[0]
            if not any((b / first).is_dir() for b in bases):
                continue  # a folder of a test's own, not the repository's
            if not any((b / ref).exists() for b in bases):
                missing.append(f"{source.relative_to(ROOT)} names {ref}")
    assert not missing, "\n".join(sorted(missing))
