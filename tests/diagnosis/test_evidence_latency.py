"""Latency-bound sizes: never called slow by the bandwidth model, nor by time against NCCL's latency model
(which healthy runs sit several times over); the time and the model's figure are stated."""

# ruff: noqa: E501 (the tools' lines are kept as they were printed)
from __future__ import annotations

from tests_support_evidence import judge

from topodoctor.diagnosis.evidence_latency import model_latency_us
from topodoctor.evidence.inputs import join, read_input

TWO_NODES_8B = """# nThread 1 nGpus 1 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 10 iters: 100 validation: 0
#
# Using devices
#   Rank  0 Pid  14926 on v100-gpu-1 device  0 [0x00] Tesla V100-PCIE-16GB
#   Rank  1 Pid   9210 on v100-gpu-5 device  0 [0x00] Tesla V100-PCIE-16GB
#
#                                                     out-of-place                       in-place
#       size         count    type    root     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2   float       0    45.82    0.00    0.00    N/A    38.17    0.00    0.00    N/A
"""


def test_nccls_model_latency_follows_tuning_cc() -> None:
    """tuning.cc's LL latencies: ring all_reduce on 8 NVLinked GPUs is 6.6 + 14 x 0.6 us; a broadcast between
    two nodes of one rank each is 6.6 plus one network step at the tree's 5.0 (ppn 1)."""
    assert model_latency_us("all_reduce", 8, 1, "NVLINK") == (6.6 + 14 * 0.6, "ring")
    assert model_latency_us("broadcast", 2, 2, "PCI") == (6.6 + 5.0, "ring")
    lat, algo = model_latency_us("all_reduce", 16, 2, "NVLINK")
    assert algo == "tree" and lat == 6.8 + 2 * (7 * 0.6 + 5.0)


def test_a_two_node_run_cut_at_8_bytes_is_not_judged_by_busbw_nor_time() -> None:
    """nccl-tests#82 (https://github.com/NVIDIA/nccl-tests/issues/82): broadcast between two V100 nodes over
    TCP, its table posted up to 8 B (45.82 us): information only, with the time and the model's figure."""
    found = judge(join([read_input("evidence-1.txt", TWO_NODES_8B)]))
    small = [f for f in found if f.code == "TD022" and "latency-bound" in f.message]
    assert [f.severity for f in small] == ["info"]
    msg = small[0].message
    assert "broadcast not judged" in msg and "nor by time: 45.82 us at 8B" in msg
    assert "about 12 us" in msg and "2 ranks on 2 nodes" in msg
    assert not [f for f in found if f.severity != "info" and "busbw" in f.message]


H200_X8_SMALL = """# nccl-tests version 2.19.6 nccl-headers=22809 nccl-library=22809
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 8 minBytes 8 maxBytes 4294967296 step: 4(factor) warmup iters: 1 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid   2632 on         vm device  0 [0000:00:06] NVIDIA H200
#  Rank  1 Group  0 Pid   2632 on         vm device  1 [0000:00:07] NVIDIA H200
#  Rank  2 Group  0 Pid   2632 on         vm device  2 [0000:00:08] NVIDIA H200
#  Rank  3 Group  0 Pid   2632 on         vm device  3 [0000:00:09] NVIDIA H200
#  Rank  4 Group  0 Pid   2632 on         vm device  4 [0000:00:0a] NVIDIA H200
#  Rank  5 Group  0 Pid   2632 on         vm device  5 [0000:00:0b] NVIDIA H200
#  Rank  6 Group  0 Pid   2632 on         vm device  6 [0000:00:0c] NVIDIA H200
#  Rank  7 Group  0 Pid   2632 on         vm device  7 [0000:00:0d] NVIDIA H200
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    79.51    0.00    0.00       0    77.87    0.00    0.00       0
          32             8     float     sum      -1    77.82    0.00    0.00       0    79.31    0.00    0.00       0
         128            32     float     sum      -1    76.75    0.00    0.00       0    75.92    0.00    0.00       0
         512           128     float     sum      -1    77.04    0.01    0.01       0    75.54    0.01    0.01       0
        2048           512     float     sum      -1    75.36    0.03    0.05       0    79.01    0.03    0.05       0
        8192          2048     float     sum      -1    78.53    0.10    0.18       0    76.58    0.11    0.19       0
       32768          8192     float     sum      -1    75.70    0.43    0.76       0    84.14    0.39    0.68       0
"""


def test_healthy_h200_small_rows_stay_information() -> None:
    """The lent 8 x H200 host's all_reduce_perf (shared reference output, h200-x8), up to its 32 KB row: the
    8 B row's 79.51 us is five times NCCL's 15 us model on a healthy host, so nothing at warning."""
    found = judge(join([read_input("nccl.txt", H200_X8_SMALL)]))
    assert not [f for f in found if f.severity != "info"]
    small = next(f for f in found if "latency-bound" in f.message)
    assert "79.51 us at 8B" in small.message and "about 15 us" in small.message
    assert "8 ranks over NVLink" in small.message or "8 ranks over PCIe" in small.message


def test_a_point_to_point_run_is_not_held_to_the_collectives_model() -> None:
    """nccl-tests#82's header with a sendrecv row in the same columns: tuning.cc models collectives only, so
    the time is stated without a model figure."""
    text = TWO_NODES_8B.replace("8             2   float       0", "8             2   float     sum      -1")
    text = text.replace("root     time", "redop    root     time")
    found = judge(join([read_input("sendrecv_perf.txt", "# Collective test starting: sendrecv_perf\n" + text)]))
    small = next(f for f in found if "latency-bound" in f.message)
    assert (
        small.severity == "info" and "not point-to-point" in small.message and "model (tuning.cc" not in small.message
    )
