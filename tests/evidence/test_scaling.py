"""The reporter's words on how a job scales (evidence/scaling.py), on real posts (fixtures/diagnose/holdout6 and
real5: each README names its thread), each speed with its counts, the links said in words, and what is not a
claim of scaling left alone."""

from __future__ import annotations

import json
from pathlib import Path

from evidence_support import ROOT

from topodoctor.core import codec
from topodoctor.evidence.inputs import join, read_input
from topodoctor.evidence.scaling import links, speeds
from topodoctor.model.evidence import Evidence
from topodoctor.model.evidence_scaling import ScalingSaid

DIAGNOSE = ROOT / "fixtures" / "diagnose"


def scaled(path: Path) -> ScalingSaid:
    got = read_input(path.name, path.read_text())
    claims = [c.scaling for part in got.parts for c in part.prose if c.scaling is not None]
    assert len(claims) == 1, got
    return claims[0]


def test_per_gpu_rates_on_one_two_and_three_nodes() -> None:
    """open_clip#466: "30/s/gpu ... with two or three nodes ... fall to 10/s/gpu and 5/s/gpu"."""
    s = scaled(DIAGNOSE / "holdout6" / "g-03" / "evidence-1.txt")
    assert [(x.value, x.unit, x.per_gpu, x.nodes) for x in s.speeds] == [
        (30.0, "samples/s", True, 1),
        (10.0, "samples/s", True, 2),
        (5.0, "samples/s", True, 3),
    ]


def test_a_rate_in_thousands_with_its_machines_before_or_after_it() -> None:
    """fairseq#789: "about 10K wps with 2 machines, while running on a single machine gives ... ~38K wps"."""
    s = scaled(DIAGNOSE / "holdout6" / "g-07" / "evidence-1.txt")
    assert [(x.value, x.unit, x.nodes) for x in s.speeds] == [(10000.0, "words/s", 2), (38000.0, "words/s", 1)]


def test_step_times_beside_a_count_written_as_code() -> None:
    """imagenet-multiGPU.torch#59: "with nGPU=4, one batch takes 2.3s; but when nGPU=1, one batch takes only
    0.48s" (a line the prose test takes for code), and "connected with PCIE16"."""
    s = scaled(DIAGNOSE / "holdout6" / "g-04" / "evidence-1.txt")
    assert [(x.value, x.kind, x.gpus) for x in s.speeds] == [(2.3, "step", 4), (0.48, "step", 1)]
    assert [(x.kind, x.text) for x in s.links] == [("pcie", "PCIE16")]


def test_a_bare_time_takes_the_kind_of_the_time_before_it() -> None:
    """accelerate#71: "each epoch takes 21 seconds with 1 GPU. When using 2 GPUs, it also takes 21 seconds"."""
    s = scaled(DIAGNOSE / "holdout6" / "g-13" / "evidence-1.txt")
    assert [(x.value, x.kind, x.gpus) for x in s.speeds] == [(21.0, "total", 1), (21.0, "total", 2)]
    got = speeds("When I use single-node, each epoch step will take 3s, but it will take 7s when I use two-node.", 1)
    assert [(x.value, x.nodes) for x in got] == [(3.0, 1), (7.0, 2)]  # horovod#2976
    assert got[0].kind == got[1].kind


def test_hours_to_finish_on_one_and_two_machines() -> None:
    """insightface#1905: "a single machine was taking around 34 hours ... 2 identical machines is estimating 1241
    hours to conclusion"."""
    s = scaled(DIAGNOSE / "holdout6" / "g-12" / "evidence-1.txt")
    assert [(x.value / 3600, x.kind, x.nodes) for x in s.speeds] == [(34.0, "total", 1), (1241.0, "total", 2)]


def test_a_count_sweep_that_breaks_at_the_seventh_card() -> None:
    """flash-attention#1021: "running normally if I use 1-6 cards, the speed will slow when I use 7 or 8 cards"."""
    s = scaled(DIAGNOSE / "holdout6" / "g-08" / "evidence-2.txt")
    assert (s.good_up_to, s.slow_from, s.slow_gpu) == (6, 7, 6)


def test_a_pair_compared_is_not_one_slow_gpu() -> None:
    """nccl#1309: "why the bandwidth between GPU2 and GPU3 is much slower than the other?": a pair, not GPU2."""
    got = read_input("x", "I'm wondering why the bandwidth between GPU2 and GPU3 is much slower than the other?\n")
    assert all(c.scaling is None or c.scaling.slow_gpu is None for p in got.parts for c in p.prose)


def test_links_in_words() -> None:
    """open_clip#325's "10Gbps interconnect", insightface#1905's "10 gigabit interface", CNTK#440's "gigabit
    Ethernet", InternLM#22's "2 HDR100 IB 200G", accelerate#71's "nvlink says `<inactive>`"."""
    said = [
        "I see, my cluster only has a 10Gbps interconnect. lol.",
        "after using a 10 gigabit interface the result observed was completely different.",
        "limited by the network bandwidth of gigabit Ethernet.",
        "Inter: 2 HDR100 IB 200G, Intra: 8 gpus w/ PCIE",
        "nvidia-smi nvlink says `<inactive>`, so I guess not.",
    ]
    got = [[(x.kind, x.gbit_s, x.absent) for x in links(t, 1)] for t in said]
    assert got == [
        [("network", 10.0, False)],
        [("network", 10.0, False)],
        [("ethernet", 1.0, False)],
        [("infiniband", 100.0, False), ("pcie", None, False)],
        [("nvlink", None, True)],
    ]


def test_chinese_counts_of_machines_and_cards() -> None:
    """ms-swift#1825: "每台机器为8卡A800 ... 12机>6机>2机>1机（机器越多耗时越大": slower as machines are added;
    ChatGLM-6B#595: "3090单卡是51.82s/it" and "3090双卡是124.55s/it"."""
    assert scaled(DIAGNOSE / "holdout6" / "g-16" / "evidence-1.txt").worse_with_nodes
    s = scaled(DIAGNOSE / "real5" / "rtx3090-two-cards-slower" / "evidence-1.txt")
    assert [(x.value, x.gpus) for x in s.speeds] == [(51.82, 1), (124.55, 2)]


def test_a_legend_naming_pcie_and_a_version_sentence_claim_nothing() -> None:
    """topo -m's legend ("Connection traversing at most a single PCIe bridge") and "with NCCL 2.29.7 it is slower
    than with 2.29.2" say nothing of scaling."""
    for text in ("  PIX  = Connection traversing at most a single PCIe bridge\n",
                 "with NCCL 2.29.7 it is slower than with 2.29.2\n"):  # fmt: skip
        got = read_input("x", text)
        assert not any(c.scaling for p in got.parts for c in p.prose), text


def test_scaling_claims_round_trip_through_json() -> None:
    folder = DIAGNOSE / "holdout6" / "g-03"
    ev = join([read_input(p.name, p.read_text()) for p in sorted(folder.glob("evidence-*.txt"))])
    assert any(c.scaling for c in ev.prose)
    assert codec.from_jsonable(Evidence, json.loads(json.dumps(codec.to_jsonable(ev)))) == ev
