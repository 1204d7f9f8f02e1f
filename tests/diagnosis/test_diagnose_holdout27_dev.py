"""The twenty-seventh blind set (fixtures/diagnose/holdout27), scored once and now a development set: a Chinese post
counts its GPUs in words (两张显卡) and calls a figure theoretical (理论), which is no measurement."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judged_with

SET = FIXTURES / "diagnose" / "holdout27"


def test_two_cards_in_chinese_and_a_theoretical_figure() -> None:
    found = judged_with(SET / "d27-04")  # 2 x RTX 2080 Ti on PCIe 3.0 x16, "单向理论极限带宽大约是 15.75 GB/s"
    p2p = next(f for f in found if f.code == "TD021" and f.subject == "p2p")
    assert "no peer-to-peer" in p2p.message and "host memory" in p2p.message
    assert not any("15.75 GB/s" in f.message and f.code == "TD022" for f in found)
    measured = judged_with(SET / "d27-04", ("理论", "实测"))  # "measured" in its place
    assert any("15.75 GB/s" in f.message for f in measured)
