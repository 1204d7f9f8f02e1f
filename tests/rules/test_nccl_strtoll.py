"""How NCCL reads an integer variable is C's ``strtoll(text, &end, 0)``: the rules' own reading
(nccl/values.py) against the C library's, on the spellings a job script may leave: signs,
blanks before, hex in either case, a leading 0 (octal) and digits octal has not, a prefix with no
digit after it, text after the number, and the edges of a 64-bit integer."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno

import pytest

from topodoctor.nccl.values import list_problem, read_integer, strtoll

LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
LIBC.strtoll.restype = ctypes.c_longlong
LIBC.strtoll.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int]

SPELLINGS = [
    "0", "42", "+5", "-5", "  42", "\t-17", "\n\v\f\r 3",
    "0x1F", "0X1f", "0xAbC", "-0x10", "+0x10", "0x", "0xg", "0x 1",
    "017", "08", "0019", "-017", "00",
    "12abc", "1e3", "7 ", "3.5", "0x1Fz",
    "", "abc", "-", "+", " ", "+-1", "--1",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "0x7fffffffffffffff", "0x8000000000000000", "0777777777777777777777", "01000000000000000000000",
]  # fmt: skip


def _c(text: str) -> tuple[int | None, int]:
    """The C library's answer: (value, or None where it overflowed), and how many characters it read."""
    raw = text.encode()
    end = ctypes.c_char_p()
    ctypes.set_errno(0)
    value = LIBC.strtoll(raw, ctypes.byref(end), 0)
    overflow = ctypes.get_errno() == errno.ERANGE
    read = len(raw) - len(end.value or b"")
    return (None if overflow else value), read


@pytest.mark.parametrize("text", SPELLINGS, ids=repr)
def test_strtoll_reads_as_the_c_library_does(text: str) -> None:
    value, rest, _ = strtoll(text)
    c_value, c_read = _c(text)
    assert (value, len(text) - len(rest)) == (c_value, c_read)


@pytest.mark.parametrize(
    ("text", "octal"),
    [
        *[("017", True), ("0", False), ("00", True), ("08", False), ("-017", True), ("0x17", False)],
        *[("+0", False), ("-0", False), ("abc", False), ("", False)],  # one zero after a sign; no digits at all
    ],
)
def test_a_leading_zero_is_octal_when_digits_follow(text: str, octal: bool) -> None:
    assert strtoll(text)[2] is octal


@pytest.mark.parametrize(
    ("text", "value", "clean", "why"),
    [
        (" 7 ", 7, True, ""),  # blanks around it: read whole
        ("7abc", 7, False, "NCCL stops at 'abc'"),
        ("7 abc", 7, False, "NCCL stops at 'abc'"),  # the rest quoted without the blank before it
        ("08", 0, False, "NCCL stops at '8'"),
        ("010", 8, False, "a leading 0 makes it octal"),
        ("true", 0, False, "it is not a number; NCCL parses integers only"),
        (" ", 0, False, "it is not a number; NCCL parses integers only"),
        ("9223372036854775808", None, False, "it is out of range, so NCCL keeps its default"),
    ],
)
def test_what_nccl_makes_of_an_integer_s_text(text: str, value: int | None, clean: bool, why: str) -> None:
    r = read_integer(text)
    assert (r.value, r.clean, r.why) == (value, clean, why)


ALGOS = ("Tree", "Ring", "CollnetDirect", "CollnetChain", "NVLS", "NVLSTree", "PAT")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("Ring", None),
        ("^tree,ring", None),  # case-blind, and a leading ^ excludes
        ("allreduce:ring;broadcast:tree", None),
        ("AllReduce:Ring;REDUCE:TREE", None),  # function names are case-blind too
        ("ring;allreduce:tree", None),  # only the first entry may omit its function
        ("allreduce:ring;tree", "entry 'tree' has no function prefix (only the first may omit it)"),
        ("allgatherv:ring", "'allgatherv' is not a function (Broadcast, Reduce, AllGather, ReduceScatter, AllReduce)"),
        ("ring,ringg", "'ringg' is not one of Tree, Ring, CollnetDirect, CollnetChain, NVLS, NVLSTree, PAT"),
    ],
)
def test_an_algorithm_list_as_nccl_parses_it(text: str, problem: str | None) -> None:
    assert list_problem(text, ALGOS) == problem
