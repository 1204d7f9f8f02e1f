"""`--size` and `--pair-size` are bounded: a size past any GPU's memory (a typo, 1000G for 100G) or a number
too long to be one is one line and exit 2 before anything is probed or measured; sizes up to the bound
pass, and a size read from a user's pasted command line is held to no bound of ours."""

from __future__ import annotations

import pytest

from topodoctor.cli.commands import main
from topodoctor.core.sizes import MAX_BYTES, parse_size
from topodoctor.evidence.inputs import join, read_input


@pytest.mark.parametrize(
    "argv",
    [
        ["bandwidth", "--replay", "h200-x2", "--size", "300G"],
        ["bandwidth", "--replay", "h200-x2", "--size", "9" * 5000],
        ["collectives", "--replay", "h200-x2", "--predict", "--size", "8:1000G"],
        ["collectives", "--replay", "h200-x2", "--predict", "--size", "64M,99999999999999999999999G"],
    ],
)
def test_a_size_past_the_bound_is_one_line_and_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "size too large" in err and "internal error" not in err


def test_the_bound_itself_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_size("256G") == MAX_BYTES
    assert main(["collectives", "--replay", "h200-x2", "--predict", "--size", "1G:256G", "-f", "json"]) == 0
    assert '"size_bytes": 274877906944' in capsys.readouterr().out


def test_a_pasted_nccl_tests_command_keeps_its_own_sizes() -> None:
    """A user's `all_reduce_perf -b 8 -e 512G` (nccl-tests reduces maxBytes to what memory holds, as
    nccl-tests#322 shows): read as written, not refused by our option's bound."""
    ev = join([read_input("cmd.txt", "mpirun -np 16 ./build/all_reduce_perf -b 8 -e 512G -f 2 -g 1\n")])
    assert [x.max_bytes for x in ev.launches if x.program] == [512 << 30]
