"""A WARN's words quoted without NCCL's prefix (an issue's title) read where they are a WARN of the sources;
the GID type read that 2.23.4 - 2.26.1 gave up on inside containers named as that release's bug; HAMi-core's vGPU
layer failing inside a CUDA call (TD958); and a run that stopped with no failure line: the post's own words that it
hangs (TD959, candidates ranked by the GPUs and nodes it names) or nccl-tests' output that stops after init (TD960,
a warning: a paste cut there reads the same)."""

from __future__ import annotations

from nccl_support import explained, lead_of

from topodoctor.nccl.parse import parse_file

GID_TITLE = (
    "nccl connection abort(between pods): WARN NET/IB: read failed in ncclIbRoceGetVersionNum: Invalid argument\n"
)
H = "node1:811:902 [0]"


def _candidates(text: str) -> list[str]:
    return [str(c) for c in lead_of(text).evidence["candidates"]]  # type: ignore[union-attr]


def test_a_quoted_warn_is_read_only_where_its_words_are_ncclsource() -> None:
    said = [e.fields.get("said", "") for e in parse_file("t.log", GID_TITLE).events]
    assert "NET/IB: read failed in ncclIbRoceGetVersionNum: Invalid argument" in said
    other = "my-app: WARN disk almost full on /scratch\nNCCL version 2.21.5\n"
    assert not parse_file("o.log", other).events


def test_the_gid_type_read_in_a_container_is_the_bug_2_26_2_fixed() -> None:
    lead = lead_of(GID_TITLE)
    assert lead.code == "TD083" and "2.26.2" in lead.message and "NCCL_IB_GID_INDEX" in lead.fix
    # 2.26.2 returns success on EINVAL: the same words under a later banner are not that bug
    later = f"NCCL version 2.27.3+cuda12.9\n{H} transport/net_ib.cc:330 NCCL WARN NET/IB: read failed in "
    later += "ncclIbRoceGetVersionNum: Invalid argument\n"
    assert "2.23.4 - 2.26.1" not in " ".join(f.message for f in explained(later))


def test_hamis_vgpu_layer_failing_in_a_cuda_call_is_its_own_class() -> None:
    text = (
        "[HAMI-core ERROR (pid:565 thread=1402 multiprocess_memory_limit.c:831)]: Illegal device id: 850725928\n"
        '  File "/libvgpu/src/cuda/memory.c", line 582, in cuMemCreate\n'
        '  File "misc/cudawrap.cc", line 92, in ncclCuMemHostEnable()\n'
    )
    lead = lead_of(text)
    assert lead.code == "TD958" and "cuMemCreate" in lead.message and "CUDA_DISABLE_CONTROL" in lead.fix
    assert "NCCL_CUMEM_HOST_ENABLE=0" in lead.fix


def test_a_title_that_says_it_hangs_ranks_pcie_p2p_first_on_pcie_gpus() -> None:
    lead = lead_of("[Bug]: ncclAllReduce deadlocks on 2x RTX 5880 Ada (PCIe PHB topology, no NVLink)\n")
    assert lead.code == "TD959" and lead.severity == "error"
    assert "ACS" in _candidates("ncclAllReduce hangs on 4 x RTX 4090 over PCIe\n")[0]


def test_a_title_that_says_it_hangs_across_nodes_ranks_the_network_first() -> None:
    first = _candidates("DDP training hangs at the first all_reduce across 2 nodes\n")[0]
    assert "network between the nodes" in first


def test_hang_words_inside_a_log_or_about_something_else_are_no_stall() -> None:
    inside = (
        f"{H} NCCL INFO Init COMPLETE\n"
        "[W ProcessGroupNCCL.cpp:100] Warning: a collective may hang if ranks call it in a different order\n"
    )
    assert not [f for f in explained(inside) if f.code in ("TD959", "TD960")]
    assert not [f for f in explained("my dataloader hangs with num_workers=8\nNCCL version 2.21.5\n")]


def test_nccl_tests_that_stop_after_init_warn_and_a_run_with_rows_is_quiet() -> None:
    head = (
        "# nThread 1 nGpus 4 minBytes 8 maxBytes 268435456 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
        "#\n# Using devices\n"
        "#   Rank  0 Pid  15833 on host device  0 [0x02] GeForce GTX 1080 Ti\n"
        f"{H} NCCL INFO Bootstrap : Using [0]eth0:10.2.3.32<0>\n"
        f"{H} NCCL INFO Setting affinity for GPU 0 to ff00ff\n"
    )
    stopped = [f for f in explained(head) if f.code == "TD960"]
    assert stopped and stopped[0].severity == "warning"
    assert not [f for f in explained(head) if f.severity in ("error", "critical")]
    row = (
        "           8             2     float     sum      -1    36.12    0.00    0.00      0    35.80    0.00    0.00"
    )
    rows = head + row + "      0\n"
    assert not [f for f in explained(rows) if f.code in ("TD959", "TD960")]
