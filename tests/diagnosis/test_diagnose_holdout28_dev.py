"""The twenty-eighth and twenty-ninth blind sets (fixtures/diagnose/holdout28, holdout29), scored once and now
development sets: an EC2 G instance has no GPUDirect RDMA by design, a slow multi-node run asks in NCCL's own words
(NET/Socket, NET/IB), tensor parallelism that does not scale on an NVSwitch host is normal, and Chinese sentences
are sentences."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judged_with

SET = FIXTURES / "diagnose" / "holdout28"
SET29 = FIXTURES / "diagnose" / "holdout29"


def _loud(found: list) -> list:  # type: ignore[type-arg]
    return [f for f in found if f.severity != "info"]


def test_a_g6e_instance_has_no_gpudirect_rdma_by_design() -> None:
    found = judged_with(SET / "d28-01")  # "gpudirect rdma is not enabled on g6e nodes", EFA on 4 interfaces
    gdr = next(f for f in found if f.code == "TD026")
    assert gdr.severity == "info" and "g6e" in gdr.message and "p4d" in gdr.message
    assert _loud(found) == []
    on_p5 = judged_with(SET / "d28-01", ("g6e", "p5.48xlarge"))  # a P instance has it: the usual candidates
    assert any(f.code == "TD026" and f.severity == "warning" and "nvidia_peermem" in f.message for f in on_p5)


def test_a_slow_multi_node_run_asks_in_nccl_s_words() -> None:
    found = judged_with(SET / "d28-05")  # 2 x 8 H100 under Ray, a step takes 30 minutes, no output
    ask = next(f for f in found if f.code == "TD022" and f.subject == "network")
    assert "`NET/Socket`" in ask.message and "`NET/IB`" in ask.message


def test_tensor_parallelism_that_does_not_scale_on_nvswitch_is_normal() -> None:
    found = judged_with(SET29 / "d29-07")  # 8 x H100 SXM, one TP=8 against two TP=4: "does not scale beyond TP=4"
    tp = next(f for f in found if f.code == "TD989")
    assert tp.severity == "info" and "normal for tensor parallelism on H100 SXM" in tp.message
    assert _loud(found) == []
    on_4090 = judged_with(SET29 / "d29-07", ("8xH100 SXM", "8x RTX 4090"), ("H100", "RTX 4090"))
    assert not any("normal for tensor parallelism" in f.message for f in on_4090)


def test_chinese_sentences_are_read() -> None:
    found = judged_with(SET29 / "d29-04")  # "我使用4 4090部署 ... 响应很慢", no output
    assert any(f.code == "TD022" and "NCCL_DEBUG=INFO" in f.message for f in found)
    assert _loud(found) == []
