"""The rule cases of collectives (TD0xx):
for every rule of the family, cases where it must fire and near misses where it must stay silent,
thresholds and spellings included (tests/rules/test_rule_cases.py holds the table to the registry)."""

from __future__ import annotations

from rule_case_kit import Case, all_links_down
from rule_case_kit_edges import (
    COPY_GBPS,
    NOMINAL_FLOOR,
    NV18_GBPS,
    X2_MODEL_ALL_REDUCE,
    MiB,
    _coll,
    busbw,
    rank_times,
    span_busbw,
)
from rule_case_kit_more import _COLLECTIVE_CODES, _MULTINODE_CODES, _failures_are, _verdict_of
from rule_case_kit_shapes import host_as

CASES = [
    # collectives: busbw floors, by the basis of the expectation (busbw_expect.py): 0.6 of the
    # topology's model; where the model cannot be made, 0.40 of a measured copy, else 0.35 of the
    # nominal rate; 0.90 of --expect-busbw; x0.7 below 256 MiB from 64 MiB
    _coll(
        "TD001",
        False,
        "all_reduce at 1 GiB, 0.6 of the model",
        busbw("all_reduce", 1024 * MiB, 0.6 * X2_MODEL_ALL_REDUCE),
        "LOW_VS_MODEL",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 1 GiB, 0.594 of the model",
        busbw("all_reduce", 1024 * MiB, 0.594 * X2_MODEL_ALL_REDUCE),
        "LOW_VS_MODEL",
    ),
    _coll(
        "TD001",
        False,
        "all_reduce at 1 GiB, 0.35 of NV18, no model",
        busbw("all_reduce", 1024 * MiB, NOMINAL_FLOOR, model=False),
        "LOW_VS_NOMINAL",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 1 GiB, 0.348 of NV18, no model",
        busbw("all_reduce", 1024 * MiB, 0.348 * NV18_GBPS, model=False),
        "LOW_VS_NOMINAL",
    ),
    _coll(
        "TD001",
        False,
        "all_reduce at 1 GiB, 0.40 of the measured copy, no model",
        busbw("all_reduce", 1024 * MiB, 0.40 * COPY_GBPS, copies=True, model=False),
        "LOW_VS_MEASURED",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 1 GiB, 0.398 of the measured copy, no model",
        busbw("all_reduce", 1024 * MiB, 0.398 * COPY_GBPS, copies=True, model=False),
        "LOW_VS_MEASURED",
    ),
    _coll(
        "TD001",
        False,
        "all_reduce at 1 GiB, 0.90 of --expect-busbw 100",
        busbw("all_reduce", 1024 * MiB, 90.0, expect=100.0),
        "LOW_VS_EXPECTED",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 1 GiB, 0.895 of --expect-busbw 100",
        busbw("all_reduce", 1024 * MiB, 89.5, expect=100.0),
        "LOW_VS_EXPECTED",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 256 MiB, 0.3 of NV18, no model: the full floor",
        busbw("all_reduce", 256 * MiB, 0.3 * NV18_GBPS, model=False),
        "FULL_RATE_BYTES",
    ),
    _coll(
        "TD001",
        False,
        "all_reduce at 256 MiB - 1, 0.3 of NV18, no model: the climbing floor",
        busbw("all_reduce", 256 * MiB - 1, 0.3 * NV18_GBPS, model=False),
        "FULL_RATE_BYTES",
    ),
    _coll(
        "TD001",
        False,
        "all_reduce at 128 MiB, 0.35 x 0.7 of NV18, no model",
        busbw("all_reduce", 128 * MiB, 0.35 * 0.7 * NV18_GBPS, model=False),
        "SMALLER_SIZE_SHARE",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 128 MiB, 0.35 x 0.697 of NV18, no model",
        busbw("all_reduce", 128 * MiB, 0.35 * 0.697 * NV18_GBPS, model=False),
        "SMALLER_SIZE_SHARE",
    ),
    _coll(
        "TD001",
        True,
        "all_reduce at 64 MiB, 0.1 of NV18: judged",
        busbw("all_reduce", 64 * MiB, 0.1 * NV18_GBPS),
        "JUDGED_MIN_BYTES",
    ),
    _coll(
        "TD001",
        False,
        "all_reduce at 64 MiB - 1, 0.1 of NV18: latency's range",
        busbw("all_reduce", 64 * MiB - 1, 0.1 * NV18_GBPS),
        "JUDGED_MIN_BYTES",
    ),
    # a rank 1.3x slower than the others' median, from 1 MiB
    _coll(
        "TD006",
        False,
        "all_reduce at 1 GiB, rank 0 at 1.3x rank 1",
        rank_times("all_reduce", 1024 * MiB, (1300.0, 1000.0)),
        "SLOW_RANK",
    ),
    _coll(
        "TD006",
        True,
        "all_reduce at 1 GiB, rank 0 at 1.301x rank 1",
        rank_times("all_reduce", 1024 * MiB, (1301.0, 1000.0)),
        "SLOW_RANK",
    ),
    _coll(
        "TD006",
        True,
        "all_reduce at 1 MiB, rank 0 at 2x rank 1",
        rank_times("all_reduce", MiB, (2000.0, 1000.0)),
        "SLOW_RANK_MIN_BYTES",
    ),
    _coll(
        "TD006",
        False,
        "all_reduce at 1 MiB - 1, rank 0 at 2x rank 1",
        rank_times("all_reduce", MiB - 1, (2000.0, 1000.0)),
        "SLOW_RANK_MIN_BYTES",
    ),
    # across nodes: 0.75 of what the rail's NICs carry (50 GB/s for GPU0 of each HGX node)
    *(
        Case(
            "TD011",
            fires,
            "h200-x2",
            f"multi-node result hgx-2nodes-healthy, all_reduce across the nodes at {gbps:g} GB/s of the NICs' 50",
            collectives="hgx-2nodes-healthy",
            context=span_busbw("local rank 0", "all_reduce", gbps),
            at="INTER_MIN_RATIO",
        )
        for fires, gbps in ((False, 0.75 * 50.0), (True, 0.747 * 50.0))
    ),
    # the busbw model: 0.85 of it, from 256 MiB
    _coll(
        "TD020",
        False,
        "all_reduce at 1 GiB, 0.85 of the model",
        busbw("all_reduce", 1024 * MiB, 0.85 * X2_MODEL_ALL_REDUCE),
        "BELOW_MODEL",
    ),
    # 0.85 of the model, and an error from 0.6 of it down
    *(
        _coll(
            "TD020",
            True,
            f"all_reduce at 1 GiB, {share:g} of the model",
            busbw("all_reduce", 1024 * MiB, share * X2_MODEL_ALL_REDUCE),
            at,
            severity,
        )
        for share, at, severity in (
            (0.846, "BELOW_MODEL", "warning"),
            (0.6, "FAR_BELOW_MODEL", "warning"),
            (0.594, "FAR_BELOW_MODEL", "error"),
        )
    ),
    _coll(
        "TD020",
        True,
        "all_reduce at 256 MiB, 0.5 of the model",
        busbw("all_reduce", 256 * MiB, 0.5 * X2_MODEL_ALL_REDUCE),
        "MODEL_MIN_BYTES",
        "error",
    ),
    _coll(
        "TD020",
        False,
        "all_reduce at 256 MiB - 1, 0.5 of the model",
        busbw("all_reduce", 256 * MiB - 1, 0.5 * X2_MODEL_ALL_REDUCE),
        "MODEL_MIN_BYTES",
    ),
    *(
        Case(code, True, "h200-x2", f"collectives result {name}", collectives=name)
        for name, codes in _COLLECTIVE_CODES
        for code in codes
    ),
    *(
        Case(f"TD00{i}", False, "h200-x2", "collectives result x2-healthy (the real run)", collectives="x2-healthy")
        for i in range(1, 8)
    ),
    Case(
        "TD020",
        False,
        "h200-x2",
        "collectives result x2-healthy (the real run: 0.89-1.02 of the model at 512 MiB)",
        collectives="x2-healthy",
    ),
    *(
        Case(code, True, "h200-x2", f"multi-node result {name}", collectives=name)
        for name, codes in _MULTINODE_CODES
        for code in codes
    ),
    *(
        Case(code, False, "h200-x2", f"multi-node result {name} (healthy)", collectives=name)
        for name in ("hgx-2nodes-healthy", "hgx-4nodes-pairwise-healthy")
        for code in ("TD010", "TD011", "TD012", "TD013")
    ),
    Case(
        "TD003",
        False,
        "h200-x2",
        "real run: four simulated nodes on one host, NET/Socket between NVLink-connected GPUs of different nodes",
        collectives="x2-four-simulated-nodes",
    ),
    Case(
        "TD005",
        True,
        "h200-x2",
        "x2-hang's failures out of memory",
        collectives="x2-hang",
        context=_failures_are("oom"),
        severity="warning",
    ),
    Case("TD005", True, "h200-x2", "x2-hang's failures as they are", collectives="x2-hang", severity="error"),
    Case(
        "TD010",
        True,
        "h200-x2",
        "nodeC slow in both rounds",
        collectives="hgx-4nodes-pairwise-slow",
        severity="error",
        subjects=("node:nodeC",),
    ),
    Case(
        "TD010",
        True,
        "h200-x2",
        "nodeC could not be re-paired (undetermined)",
        collectives="hgx-4nodes-pairwise-slow",
        context=_verdict_of("nodeC", "undetermined"),
        severity="warning",
        subjects=("node:nodeC",),
    ),
]

# NVLinks listed but all down, NCCL_P2P_DISABLE=1 (the third value between NVLink up and none): SHM
# between GPUs the graph no longer joins by NVLink is no NVLink fallback; the setting is still named
_ALL_DOWN = host_as(all_links_down(0, 1))
CASES += [
    Case(
        "TD003",
        False,
        "h200-x2",
        "x2-p2p-disabled's SHM, NCCL_P2P_DISABLE=1, every NVLink listed but down",
        env={"NCCL_P2P_DISABLE": "1"},
        collectives="x2-p2p-disabled",
        context=_ALL_DOWN,
    ),
    Case(
        "TD601",
        True,
        "h200-x2",
        "NCCL_P2P_DISABLE=1 beside x2-p2p-disabled's run, every NVLink listed but down",
        env={"NCCL_P2P_DISABLE": "1"},
        collectives="x2-p2p-disabled",
        context=_ALL_DOWN,
    ),
    Case(
        "TD003",
        True,
        "h200-x2",
        "x2-p2p-disabled's SHM, NCCL_P2P_DISABLE=1, the NVLinks up",
        env={"NCCL_P2P_DISABLE": "1"},
        collectives="x2-p2p-disabled",
        subjects=("GPU0-GPU1",),
    ),
]
