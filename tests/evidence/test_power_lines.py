"""A GPU's power limit stated with its default on a line of a paste (evidence/power_lines.py), and the
finding it gives (TD992): a cap below the default is said, a limit at the default is not."""

from __future__ import annotations

from tests_support_evidence import judge

from topodoctor.evidence.inputs import join, read_input

REPORT = (
    "## GPU hardware\n\n"
    "- **GPU 0:** NVIDIA GeForce RTX 3090 | 24576 MiB | driver 610.43.02 | persistence=Enabled\n"
    "  - **Power:** limit=250.00 W (default=370.00 W, max=390.00 W) | current_draw=144.23 W\n"
    "- **GPU 1:** NVIDIA GeForce RTX 3090 | 24576 MiB | driver 610.43.02 | persistence=Enabled\n"
    "  - **Power:** limit=370.00 W (default=370.00 W, max=390.00 W) | current_draw=155.48 W\n"
)


def test_a_reports_lines_give_each_gpus_limit_and_default() -> None:
    got = read_input("report.md", REPORT)
    power = [p for p, piece in zip(got.parts, got.pieces, strict=True) if piece.kind == "gpu-power"]
    assert [(g.index, g.power_limit_w, g.power_default_w) for g in power[0].gpus] == [
        (0, 250.0, 370.0),
        (1, 370.0, 370.0),
    ]


def test_a_sentence_says_it_too() -> None:
    got = read_input("post.txt", "I set the power limit to 200W on GPU 3, the default is 300W.\n")
    gpus = [g for part in got.parts for g in part.gpus]
    assert [(g.index, g.power_limit_w, g.power_default_w) for g in gpus] == [(3, 200.0, 300.0)]


def test_the_capped_gpu_alone_is_said_at_warning() -> None:
    found = [f for f in judge(join([read_input("report.md", REPORT)])) if f.code == "TD992"]
    assert len(found) == 1 and found[0].severity == "warning" and found[0].subject == "gpu:0"
    assert "250 W" in found[0].message and "370 W" in found[0].message and "-pl" in found[0].fix


def test_a_limit_near_its_default_is_no_cap() -> None:
    text = REPORT.replace("limit=250.00 W", "limit=350.00 W")
    assert not [f for f in judge(join([read_input("report.md", text)])) if f.code == "TD992"]


def test_a_mild_cap_is_said_but_not_offered_as_the_cause() -> None:
    text = REPORT.replace("limit=250.00 W", "limit=300.00 W")  # 81 % of the 370 W default
    found = [f for f in judge(join([read_input("report.md", text)])) if f.code == "TD992"]
    assert len(found) == 1 and found[0].severity == "info" and "a few percent" in found[0].message
