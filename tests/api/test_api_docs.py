"""docs/api.md's examples run, and print what the page says they print."""

from __future__ import annotations

import doctest

import pytest
from conftest import ROOT


@pytest.mark.slow  # its collectives run gloo ranks
def test_the_api_page_s_examples_run_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the page names the repository's derived hosts by relative path
    result = doctest.testfile(
        str(ROOT / "docs" / "api.md"),
        module_relative=False,
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
        raise_on_error=False,
        verbose=False,
    )
    assert result.attempted >= 25, "the page's examples were not found"
    assert result.failed == 0, f"{result.failed} of docs/api.md's examples failed (see the output above)"
