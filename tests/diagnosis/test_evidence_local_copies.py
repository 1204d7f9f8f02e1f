"""nvbandwidth's device_local_copy (each GPU copying within its own memory) is no pair copy and no host copy:
it is said beside half the model's memory bandwidth (a copy reads and writes each byte), never judged
against a PCIe or NVLink rate, and never a cause (the clocks and the buffer size move it as much)."""

from __future__ import annotations

from pathlib import Path

from conftest import FIXTURES

import topodoctor

X1 = FIXTURES / "evidence" / "h200-x1"  # nvbandwidth v0.8 and nvidia-smi on the lent one-H200 host


def test_a_local_copy_is_said_beside_the_memory_not_a_link() -> None:
    got = topodoctor.diagnose([X1 / "nvb.txt", X1 / "smi-q.txt"])
    local = [f for f in got.findings if "device_local_copy" in f.subject]
    assert [(f.code, f.severity) for f in local] == [("TD022", "info")]
    assert "2081 GB/s within its memory, 0.87 of half the H200 SXM's 4.8 TB/s" in local[0].message
    assert "nominal" not in local[0].message and "PCIe" not in local[0].message
    assert "CLOCK" in local[0].fix and "-b " in local[0].fix


def test_without_the_model_the_figure_is_said_alone(tmp_path: Path) -> None:
    text = "".join(line for line in (X1 / "nvb.txt").open() if not line.startswith("Device "))  # GPUs unnamed
    (tmp_path / "nvb.txt").write_text(text)
    got = topodoctor.diagnose([tmp_path / "nvb.txt"])
    local = [f for f in got.findings if "device_local_copy" in f.subject]
    assert local and "within its memory" in local[0].message and "of half" not in local[0].message
