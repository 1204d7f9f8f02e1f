"""Two findings of one log together: a warning of a known class (TD050: IB asked for, none found)
beside a failure no class explains (TD052) keeps the failure, first; the warning alone stays a
warning."""

from __future__ import annotations

from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

H = "n1:649:649 [1]"
IB_NONE = f"{H} NCCL INFO NET/IB : No device found.\n"
ODD = f"{H} misc/utils.cc:12 NCCL WARN a message of no known class\n"
TOP = f"{H} NCCL INFO init.cc:1303 -> 2\n"  # the error reached the top: the job failed


def _codes(*lines: str) -> list[tuple[str, str]]:
    found = explain([parse_file("/job/rank1.log", "".join(lines))], {"NCCL_IB_HCA": "mlx5_9"})
    return [(f.code, f.severity) for f in found]


def test_a_warning_beside_a_failure_no_class_explains_keeps_the_failure_first() -> None:
    together = _codes(IB_NONE, ODD, TOP)
    assert together[0] == ("TD052", "error") and ("TD050", "warning") in together


def test_the_warning_alone_is_a_warning_and_no_failure() -> None:
    assert _codes(IB_NONE) == [("TD050", "warning")]
