"""One expectation per measurement: the figure TD020 judges a row against, the collectives table's
model column for that row and the finding's JSON are one number (topology/busbw.py ``model_at``), and
``--predict`` is that number at 1 GiB; each finding names its basis."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from topodoctor.cli.commands import main

ROOT = Path(__file__).resolve().parents[2]
RUN = str(ROOT / "fixtures/collectives/derived/x2-max-nchannels-1.json")


def test_the_table_the_finding_and_its_json_agree_to_the_digit(capsys: pytest.CaptureFixture[str]) -> None:
    main(["collectives", "--from", RUN])
    text = capsys.readouterr().out
    table = {
        (m[1], m[2]): float(m[3])
        for m in re.finditer(r"^  (\w+)\s+(\d+[KMG])\s+[\d.]+\s+\S+\s+\S+\s+([\d.]+)$", text, re.M)
    }
    main(["collectives", "--from", RUN, "-f", "json"])
    (merged,) = json.loads(capsys.readouterr().out)["findings"]
    judged = [o for o in merged["evidence"]["ops"] if o["code"] == "TD020"]
    assert len(judged) == 7
    for o in judged:
        size = f"{o['size_bytes'] >> 20}M"
        assert table[(o["op"], size)] == o["model_gbps"], (o["op"], size)
        assert f"of the {o['model_gbps']:.1f} GB/s the topology gives at that size" in o["message"]
        assert o["basis"] == "the topology's model"
    # the one finding states each op against that same figure
    for o in judged:
        assert f"{o['op']} {o['measured_gbps']:.1f} of {o['model_gbps']:.1f} GB/s" in merged["message"]
    # TD001 names its own basis, the link rate here
    assert {o["reference"] for o in merged["evidence"]["ops"] if o["code"] == "TD001"} == {
        "nominal NV18 rate per direction"
    }
