"""One vocabulary: every command reads a size the same way (core/sizes.py) and writes it one way;
a GPU's bus id as nvidia-smi prints it; ranks as words, never a Python list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import scenario_path

from topodoctor.cli import bandwidth as cli_bandwidth
from topodoctor.cli.commands import main
from topodoctor.core.errors import BandwidthUnavailable, InputError
from topodoctor.core.sizes import MiB, parse_mib, parse_size, parse_sizes
from topodoctor.core.text import human_size

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("text", "size"),
    [("8", 8), ("64K", 64 << 10), ("64KiB", 64 << 10), ("64kb", 64 << 10), ("256M", 256 << 20),
     ("256 MiB", 256 << 20), ("1G", 1 << 30), ("1GiB", 1 << 30), ("1GB", 1 << 30), ("512B", 512)],
)  # fmt: skip
def test_every_unit_spelling_reads_the_same(text: str, size: int) -> None:
    assert parse_size(text) == size
    assert parse_sizes(text) == (size,)


def test_a_bare_number_is_bytes_or_where_it_always_was_mib() -> None:
    assert parse_size("256") == 256 and parse_mib("256") == 256 * MiB and parse_mib("256M") == 256 * MiB
    assert parse_mib("1GiB") == 1024 * MiB
    for bad in ("", "M", "256X", "-1M", "1.5G", "0"):
        with pytest.raises(InputError):
            parse_size(bad)


def test_written_back_the_way_they_are_read() -> None:
    for n in (8, 64 << 10, 256 << 20, 1 << 30):
        assert parse_size(human_size(n)) == n


@pytest.mark.parametrize("given", ["256M", "256MiB", "256"])
def test_bandwidth_size_takes_what_collectives_takes(
    given: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[Any] = []

    def measure(settings: Any, *_: Any) -> Any:
        seen.append(settings)
        raise BandwidthUnavailable("not measured here")

    monkeypatch.setattr(cli_bandwidth.copies, "measure", measure)
    assert main(["bandwidth", "--size", given, "--replay", "h200-x4", "--timeout", "0"]) == 3
    assert seen[0].size_bytes == 256 * MiB
    capsys.readouterr()


def test_bandwidth_refuses_a_size_it_cannot_read(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bandwidth", "--size", "256X", "--replay", "h200-x4"]) == 2
    err = capsys.readouterr().err
    assert "not a size: '256X'" in err and "Traceback" not in err


def test_a_gpus_bus_id_as_nvidia_smi_prints_it(capsys: pytest.CaptureFixture[str]) -> None:
    main(["scan", "--replay", "h200-x4"])
    out = capsys.readouterr().out
    assert "00000000:00:06.0" in out and "│ 0000:00:06.0" not in out
    main(["check", "--replay", str(scenario_path("x4-gpu-not-counted")), "-f", "line"])
    assert capsys.readouterr().out.startswith("topodoctor FAIL TD508: GPU at 00000000:00:09.0 is on the PCI bus")


def test_ranks_and_sizes_in_a_hang_are_words(capsys: pytest.CaptureFixture[str]) -> None:
    main(["collectives", "--from", str(ROOT / "fixtures/collectives/derived/x2-hang.json"), "-f", "json"])
    doc = json.loads(capsys.readouterr().out)
    messages = " ".join(f["message"] for f in doc["findings"])
    assert "rank 1 never reached it" in messages and "at 512M" in messages
    assert "[1]" not in messages and "536870912 B" not in messages
