"""`bandwidth`'s text: every line within the terminal's 100 columns, a unit on every number (in its
cell, or in its column's heading where the cells would not fit), the cells findings name marked, the
modes not measured said once, and a verdict line last."""

from __future__ import annotations

import copy
import json
import re
from io import StringIO

import pytest
from conftest import FIXTURES

from topodoctor.core.codec import from_jsonable
from topodoctor.model.copies import BandwidthResult, load_result
from topodoctor.report.bandwidth import bandwidth_json, print_bandwidth
from topodoctor.report.terminal import make_console
from topodoctor.service.copies import bandwidth_findings

DERIVED = FIXTURES / "bandwidth" / "derived"
NUMBER = re.compile(r"(?<![\w.:])\d+\.\d+(?![\w.:])")  # not a bus id's 06.0


def _text(r: BandwidthResult, width: int = 100) -> str:
    out = StringIO()
    print_bandwidth(r, make_console(out, width=width), bandwidth_findings(r))
    return out.getvalue()


def _eight_gpus() -> BandwidthResult:
    """The x4 result with SM figures, its GPUs and pairs repeated as GPUs 4-7 (the widest matrices)."""
    data = json.loads((DERIVED / "sm-healthy.json").read_text())
    gpus = copy.deepcopy(data["gpus"])
    data["gpus"] = gpus + [dict(g, index=g["index"] + 4) for g in gpus]
    extra = []
    for m in data["measurements"]:
        if m["src"] >= 0 and m["dst"] >= 0:
            extra.append(dict(copy.deepcopy(m), src=m["src"] + 4, dst=m["dst"] + 4))
    data["measurements"] += extra
    data["snapshot"] = None
    return from_jsonable(BandwidthResult, data, "eight")


@pytest.mark.parametrize("name", ["sm-healthy", "slow-link", "sm-kernels-missing", "hung-copy"])
def test_every_line_fits_100_columns_and_every_number_has_its_unit(name: str) -> None:
    text = _text(load_result(DERIVED / f"{name}.json"))
    assert max(len(line) for line in text.splitlines()) <= 100
    for line in text.splitlines()[1:]:  # the first names the versions of CUDA and torch
        for match in NUMBER.finditer(line):
            tail = line[match.end() : match.end() + 6]
            assert tail.startswith((" GB/s", " us", " %", " s", "-")), (line, match.group())


def test_eight_gpus_move_the_unit_to_the_headings() -> None:
    text = _text(_eight_gpus())
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    head = next(line for line in lines if "GPU7 GB/s" in line)
    assert "GPU0 GB/s" in head and "373.3 " in text and "373.3 GB/s" not in text
    assert "0.828 us" in text  # the latencies are narrow enough to keep theirs


def test_a_finding_marks_its_cell_and_the_verdict_ends_the_text() -> None:
    text = _text(load_result(DERIVED / "slow-link.json"))
    assert "236.5 GB/s#" in text and text.count("#") == 2  # the legend's and the slow copy's
    assert text.splitlines()[-1] == (
        "UNHEALTHY: 2 errors; TD307, TD701 failed; 38 measurements on 4 GPUs in 9.6 s (fail level: error)"
    )


def test_modes_not_measured_are_said_once_and_in_the_verdict() -> None:
    r = load_result(DERIVED / "sm-kernels-missing.json")
    text = _text(r)
    assert text.count("not measured: sm-oneway: SM kernels unavailable") == 1
    assert text.splitlines()[-1].startswith("HEALTHY: no findings; 38 measurements on 4 GPUs")
    assert text.splitlines()[-1].endswith("in 9.6 s; SM modes not measured (fail level: error)")
    doc = bandwidth_json(r)
    assert "sm_oneway" not in doc["matrices"] and len(doc["not_measured"]) == 3


def test_json_holds_each_mode_s_matrix_and_its_unit() -> None:
    doc = bandwidth_json(load_result(DERIVED / "sm-healthy.json"))
    m = doc["matrices"]
    assert m["units"] == {"oneway": "GB/s", "latency": "us", "sm_oneway": "GB/s", "sm_latency": "us",
                          "bidir_total": "GB/s", "bidir_each": "GB/s", "sm_bidir_total": "GB/s",
                          "sm_bidir_each": "GB/s"}  # fmt: skip
    assert m["sm_latency"][0][1] == pytest.approx(0.8281) and m["sm_oneway"][2][3] == pytest.approx(373.3248)
    assert m["sm_bidir_each"][1][0] == pytest.approx(336.6553) and m["sm_bidir_total"][0][1] == pytest.approx(673.3106)
