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


SET30 = FIXTURES / "diagnose" / "holdout30"
SET31 = FIXTURES / "diagnose" / "holdout31"


def test_a_latency_measured_with_one_process_driving_several_gpus() -> None:
    found = judged_with(SET30 / "d30-04")  # 9 and 22 us on 2 and 4 B200 with all_reduce_perf -g 2 / -g 4
    one = next(f for f in found if f.code == "TD970")
    assert one.severity == "warning" and "22 µs" in one.message and "`-g 1`" in one.message
    per_gpu = judged_with(SET30 / "d30-04", ("-g 2 ", "-g 1 "), ("-g 4 ", "-g 1 "))
    assert not any(f.code == "TD970" for f in per_gpu)


def test_nodes_counted_with_their_gpus_in_brackets() -> None:
    found = judged_with(SET30 / "d30-07")  # "for 32 (256 GPUS) H100 nodes": all_gather at 200 GB/s
    assert _loud(found) == [] and any("across nodes not judged" in f.message for f in found)


def test_a_gigabit_network_said_in_chinese() -> None:
    found = judged_with(SET31 / "d31-01")  # "内网是千兆的" between two machines of two GPUs each
    net = next(f for f in found if f.severity == "warning")
    assert "1 Gb/s" in net.message and "gigabit Ethernet" in net.message
    ten = judged_with(SET31 / "d31-01", ("千兆", "万兆"))
    assert not any("gigabit Ethernet" in f.message for f in ten)


SET32 = FIXTURES / "diagnose" / "holdout32"


def test_a_slow_gloo_run_asks_for_gloo_s_own_outputs() -> None:
    found = judged_with(SET32 / "d32-07")  # PyTorchJob mnist on two AKS VMs, `--backend gloo --no-cuda`
    ask = next(f for f in found if f.severity == "warning")
    assert "Gloo's run" in ask.message and "`iperf3`" in ask.message
    assert not any(f.code == "TD986" for f in found)  # no GPU's host candidates for a run without GPUs


def test_a_slow_byteps_rdma_run_asks_for_the_van_s_outputs() -> None:
    found = judged_with(FIXTURES / "diagnose" / "holdout34" / "d34-03")  # BytePS RDMA slower than its TCP, RoCE
    ask = next(f for f in found if f.severity == "warning")
    assert "BytePS's run" in ask.message and "PS_VERBOSE=2" in ask.message
    assert not any(f.code == "TD986" for f in found)


def test_an_all_reduce_long_on_one_device_is_its_wait_for_the_others() -> None:
    found = judged_with(FIXTURES / "diagnose" / "holdout34" / "d34-04")  # "Long AllReduce wait time on 1 device"
    skew = next(f for f in found if f.code == "TD971")
    assert skew.severity == "warning" and "straggler" in skew.message
