"""NCCL's version as its integer code (NCCL_VERSION_CODE, what ncclGetVersion returns and an older
torch.cuda.nccl.version() hands on): the measured run's version is read, not ignored."""

from __future__ import annotations

import pytest

from topodoctor.nccl.parse import parse_file
from topodoctor.nccl.variables import parse_version


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("22803", (2, 28, 3)),  # from 2.9: X*10000 + Y*100 + Z (nccl.h.in, NCCL_VERSION)
        ("21805", (2, 18, 5)),
        ("20903", (2, 9, 3)),
        ("2708", (2, 7, 8)),  # before 2.9: X*1000 + Y*100 + Z
        (" 23007 ", (2, 30, 7)),
        ("2.28.3", (2, 28, 3)),
    ],
)
def test_a_version_code_is_its_version(text: str, version: tuple[int, int, int]) -> None:
    assert parse_version(text) == version


@pytest.mark.parametrize("text", ["123", "1234567", "22803x", ""])
def test_other_numbers_are_no_version(text: str) -> None:
    assert parse_version(text) is None


@pytest.mark.parametrize(("library", "version"), [("22703", "2.27.3"), ("2708", "2.7.8")])
def test_nccl_tests_header_names_the_library_by_its_code(library: str, version: str) -> None:
    """nccl-tests prints the library's code (``nccl-library=22703``); the log's NCCL is read from it in either
    scheme, by the one reader of version codes."""
    text = f"# nccl-tests version 2.13.9 nccl-headers={library} nccl-library={library}\n# nThread 1 nGpus 1\n"
    assert version in parse_file("all_reduce.out", text).versions
