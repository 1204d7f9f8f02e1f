"""nccl-tests' rank line is declared once (nccl/framework_lines.py) and read by both readers: the log reader
(its ranks and hosts) and the nccl-tests reader (every field), in the layouts nccl-tests printed."""

from __future__ import annotations

from topodoctor.evidence import nccl_tests
from topodoctor.evidence.inputs import join, read_input
from topodoctor.nccl import grammar
from topodoctor.nccl.parse import parse_file

# nccl-tests#82 (https://github.com/NVIDIA/nccl-tests/issues/82): 2.x before rank groups, two hosts
OLD = """# nThread 1 nGpus 1 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 10 iters: 100 validation: 0
#
# Using devices
#   Rank  0 Pid  14926 on v100-gpu-1 device  0 [0x00] Tesla V100-PCIE-16GB
#   Rank  1 Pid   9210 on v100-gpu-5 device  0 [0x00] Tesla V100-PCIE-16GB
"""
# nccl-tests#108 (https://github.com/NVIDIA/nccl-tests/issues/108)'s hosts, in the grouped layout of 2.13+
GROUPED = """# nThread 1 nGpus 1 minBytes 134217728 maxBytes 134217728 step: 1048576(bytes) warmup iters: 5 iters: 20
#
# Using devices
#  Rank  0 Group  0 Pid     68 on ip-172-31-22-230 device  0 [0x00] Tesla V100-SXM2-16GB
#  Rank  1 Group  0 Pid     37 on ip-172-31-20-228 device  0 [0x00] Tesla V100-SXM2-16GB
"""


def test_one_declaration_serves_both_readers() -> None:
    assert nccl_tests._RANK is grammar.NT_RANK


def test_the_log_reader_takes_ranks_and_hosts_from_both_layouts() -> None:
    old = parse_file("old.log", OLD)
    assert old.ranks == (0, 1) and old.hosts == ("v100-gpu-1", "v100-gpu-5")  # before 2.13 it read no host here
    grouped = parse_file("grouped.log", GROUPED)
    assert grouped.ranks == (0, 1) and grouped.hosts == ("ip-172-31-22-230", "ip-172-31-20-228")


def test_the_nccl_tests_reader_takes_every_field() -> None:
    ev = join([read_input("old.txt", OLD)])
    got = [(r.rank, r.pid, r.host, r.device, r.device_name) for c in ev.collectives for r in c.ranks]
    name = "Tesla V100-PCIE-16GB"
    assert got == [(0, 14926, "v100-gpu-1", 0, name), (1, 9210, "v100-gpu-5", 0, name)]
