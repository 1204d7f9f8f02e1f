"""`--timeout` bounds the evidence readers, not only the reads: a paste too large to read and judge in time
ends at the deadline with one line and exit 3 (`diagnose`, `collectives --from`, `bandwidth --from`,
`nccl-log`)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from conftest import FIXTURES

from topodoctor.cli.commands import main
from topodoctor.core.budget import Budget
from topodoctor.core.errors import BudgetExceeded
from topodoctor.service import diagnose as service
from topodoctor.service.nccl_logs import explain_logs

# nccl-tests#284's socket lines (fixtures/diagnose/real2), repeated to 24 MiB: a long job's log at INFO, far
# more than any reader gets through in a fraction of a second
LOG = FIXTURES / "diagnose" / "real2" / "sockets-two-hosts-no-nic-listing" / "evidence-1.txt"
BIG_MIB = 24


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = LOG.read_text()
    path = tmp_path_factory.mktemp("big") / "nccl.log"
    path.write_text(text * (BIG_MIB * (1 << 20) // len(text)))
    return path


def _budget(seconds: float) -> Budget:
    return Budget(seconds, time.monotonic() + seconds)


def test_the_readers_stop_at_the_deadline_and_say_what_was_not_done(big_log: Path) -> None:
    started = time.monotonic()
    with pytest.raises(BudgetExceeded) as got:
        service.diagnose([big_log], _budget(0.3))
    took = time.monotonic() - started
    assert f"reading the evidence ({BIG_MIB}.0 MiB in 1 input) not done within the 0.3 s --timeout" in str(got.value)
    assert got.value.exit_code == 3
    assert took < 0.3 + 2.0  # the reads and the guard's interrupt, not the whole parse


def test_nccl_log_stops_parsing_at_the_deadline(big_log: Path) -> None:
    started = time.monotonic()
    with pytest.raises(BudgetExceeded) as got:
        explain_logs([big_log], _budget(0.3))
    assert "reading 1 NCCL log not done within the 0.3 s --timeout" in str(got.value)
    assert got.value.exit_code == 3 and time.monotonic() - started < 0.3 + 2.0


def test_a_small_input_is_read_well_within_the_same_budget() -> None:
    out = service.diagnose([LOG], _budget(5.0))
    assert any(f.code == "TD025" for f in out.findings)


@pytest.mark.slow
@pytest.mark.parametrize("command", [["diagnose"], ["collectives", "--from"], ["bandwidth", "--from"], ["nccl-log"]])
def test_each_command_reading_a_paste_ends_at_its_timeout_in_one_line(
    command: list[str], big_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    started = time.monotonic()
    code = main([*command, str(big_log), "--timeout", "1"])
    err = capsys.readouterr().err
    assert code == 3 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "not done within the 1 s --timeout" in err
    assert time.monotonic() - started < 1 + 3.0
