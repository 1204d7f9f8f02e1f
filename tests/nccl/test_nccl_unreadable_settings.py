"""A setting's value NCCL cannot read or use stops init with ncclInvalidUsage, and the WARN names the value: TD077
with the variable, never the topology search's cause not found. NCCL_ALGO and NCCL_PROTO are read by
graph/tuning.cc's parseList (v2.30.7-1: src/graph/tuning.cc:73 'All entries except the first must have a prefix',
:109 'Unrecognized element token', :119 'Unrecognized prefix token'; the same words from v2.24.3-1, :67 / :99 / :107;
its callers :456 NCCL_PROTO, :461 NCCL_ALGO); NCCL_NET_FORCE_MERGE by graph/topo.cc's ncclTopoForceMerge
(v2.30.7-1: src/graph/topo.cc:1341 'Only matched %d devices, %d requested from %s' when a NIC of the group is not
this node's, :1347 'Specified fused NIC %s which has too many devices', :1360 'Could not force merge NICs %s')."""

from __future__ import annotations

import pytest

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

H = "gpu3:5120:5188 [1]"
BANNER = f"{H} NCCL INFO NCCL version 2.30.7+cuda12.9\n"
TRAIL = f"{H} NCCL INFO init.cc:1489 -> 5\n"


def _lead(text: str) -> Finding:
    return next(f for f in explain([parse_file("/x/rank1.log", text)]) if f.severity in ("error", "critical"))


@pytest.mark.parametrize(
    ("line", "variable", "value", "part"),
    [
        ('graph/tuning.cc:109 NCCL WARN Unrecognized element token "ring2" when parsing "^ring2"', "NCCL_ALGO",
         "^ring2", "an unknown element 'ring2'"),
        ('graph/tuning.cc:109 NCCL WARN Unrecognized element token "LL129" when parsing "allreduce:LL,LL129"',
         "NCCL_PROTO", "allreduce:LL,LL129", "an unknown element 'LL129'"),
        ('graph/tuning.cc:119 NCCL WARN Unrecognized prefix token "allreduc" when parsing "allreduc:tree"', "NCCL_ALGO",
         "allreduc:tree", "an unknown prefix 'allreduc'"),
        ('graph/tuning.cc:73 NCCL WARN All entries except the first must have a prefix: "simple;LL128"', "NCCL_PROTO",
         "simple;LL128", "an entry after the first, no prefix"),
    ],
)  # fmt: skip
def test_an_unreadable_algorithm_or_protocol_list_names_its_variable(
    line: str, variable: str, value: str, part: str
) -> None:
    lead = _lead(f"{BANNER}{H} {line}\n{TRAIL}")
    assert lead.code == "TD077" and (lead.evidence["variable"], lead.evidence["value"]) == (variable, value)
    assert part in lead.message and f"Fix or unset {variable}" in lead.fix


def test_the_variable_the_log_shows_is_the_one_named() -> None:
    # a value whose words fit neither list is the variable the log's own `set by environment` line gives it
    env = f"{H} NCCL INFO NCCL_PROTO set by environment to bogus\n"
    lead = _lead(f"{BANNER}{env}{H} graph/tuning.cc:109 NCCL WARN Unrecognized element token \"bogus\" when "
                 'parsing "bogus"\n' + TRAIL)  # fmt: skip
    assert lead.code == "TD077" and lead.evidence["variable"] == "NCCL_PROTO"


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("graph/topo.cc:1341 NCCL WARN TOPO/NET : Only matched 1 devices, 2 requested from mlx5_0,mlx5_9",
         "the group mlx5_0,mlx5_9 names a NIC this node does not have"),
        ("graph/topo.cc:1347 NCCL WARN Specified fused NIC mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4 which has too many "
         "devices (5). Max 4", "the group mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4 has more NICs than fuse into one"),
        ("graph/topo.cc:1360 NCCL WARN TOPO/NET : Could not force merge NICs mlx5_0,mlx5_1. Please specify a valid "
         "NCCL_NET_FORCE_MERGE string.", "NCCL could not fuse the group mlx5_0,mlx5_1 into one virtual NIC"),
    ],
)  # fmt: skip
def test_a_force_merge_group_nccl_cannot_fuse_names_the_variable(line: str, what: str) -> None:
    lead = _lead(f"{BANNER}{H} {line}\n{TRAIL}")
    assert lead.code == "TD077" and lead.evidence["variable"] == "NCCL_NET_FORCE_MERGE"
    assert what in lead.message


def test_other_words_of_the_topology_search_stay_its_own() -> None:
    lead = _lead(f"{BANNER}{H} graph/search.cc:1180 NCCL WARN Could not find NIC for rank 3 in NVLS graph\n{TRAIL}")
    assert lead.code == "TD052"
