"""The launchers' table (nccl/launcher_lines.py) on the lines as public threads posted them: each reads as its
kind, the memory lines as what settles a kill, and the elastic table's root cause with its fields."""

from __future__ import annotations

import pytest

from topodoctor.nccl.explain import explain
from topodoctor.nccl.launcher_lines import OOM_WHATS, SRUN_OTHER_END, reading, root_cause, signal_said
from topodoctor.nccl.parse import parse_file

# (line, kind, the memory settles it, source)
LINES = [
    (
        "slurmstepd: error: Detected 1 oom_kill event in StepId=11300781.0. Some of the step tasks have been OOM "
        "Killed. srun: error: sdumont6156: task 0: Out Of Memory",
        "process-killed",
        True,
        "https://github.com/nextflow-io/nextflow/issues/5932",
    ),
    (
        "slurmstepd: error: Detected 1 oom-kill event(s) in step 3495064.0 cgroup. Some of your processes may have "
        "been killed by the cgroup out-of-memory handler.",
        "process-killed",
        True,
        "https://github.com/hafs-community/HAFS/issues/101",
    ),
    ("srun: error: Orion-01-01: task 4: Out Of Memory", "process-killed", True, "hafs-community/HAFS#101"),
    (
        "(raylet) [2025-04-02 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: 1 Workers (tasks / actors) "
        "killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node",
        "process-killed",
        True,
        "https://github.com/hiyouga/EasyR1/issues/185",
    ),
    (
        "E0325 20:57:27.620000 2606 site-packages/torch/distributed/elastic/multiprocessing/api.py:869] failed "
        "(exitcode: -9) local_rank: 5 (pid: 2630) of binary: /root/miniconda3/bin/python",
        "process-killed",
        False,
        "https://github.com/lmzpai/roboMamba/issues/10",
    ),
    (
        "torch.distributed.DistStoreError: Timed out after 6 seconds waiting for workers. 1/2 workers joined.",
        "store-timeout",
        False,
        "https://github.com/pytorch/pytorch/pull/111805",
    ),
    (
        "DistStoreError: wait timeout after 100ms, keys: /the_key",
        "store-timeout",
        False,
        "https://github.com/pytorch/pytorch/pull/131808",
    ),
    (
        "[E socket.cpp:435] [c10d] The server socket has failed to listen on any local network address.",
        None,
        False,
        "https://github.com/pytorch/pytorch/issues/85604",
    ),
    (
        "[W socket.cpp:401] [c10d] The server socket has failed to bind to 0.0.0.0:47531 (errno: 98 - Address "
        "already in use).",
        "store-port-in-use",
        False,
        "https://github.com/pytorch/pytorch/issues/85604",
    ),
]


@pytest.mark.parametrize(("line", "kind", "memory", "source"), LINES)
def test_each_line_reads_as_its_kind(line: str, kind: str | None, memory: bool, source: str) -> None:
    read = reading(line)
    assert (read[0] if read else None) == kind, source
    assert (read is not None and read[1]["what"] in OOM_WHATS) == memory, source


def test_the_root_cause_block_gives_its_fields() -> None:
    # https://github.com/lzhxmu/CPPO/issues/6, as posted
    lines = [
        "Root Cause (first observed failure):",
        "[0]:",
        "  time      : 2025-05-21_15:43:03",
        "  host      : mlxlab115rp2n7682d40d9-20250521025625-6dyyd3-8nir8b-worker",
        "  rank      : 0 (local_rank: 0)",
        "  exitcode  : -9 (pid: 14750)",
        "  error_file: <N/A>",
        "  traceback : Signal 9 (SIGKILL) received by PID 14750",
        "============================================================",
    ]
    f = root_cause(lines, 0)
    assert (f["rank"], f["exitcode"], f["pid"]) == ("0 (local_rank: 0)", "-9", "14750")
    assert f["host"].startswith("mlxlab115") and "SIGKILL" in f["traceback"]
    assert signal_said("-9") == "" and "shm" in signal_said("-7")


def test_words_any_program_prints_count_only_in_a_distributed_run() -> None:
    # c10d's own message (https://github.com/pytorch/pytorch/issues/55571), and torch's allocator's
    for line in ("RuntimeError: Socket Timeout", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 MiB"):
        assert reading(line, in_run=False) is None
        assert reading(line, in_run=True) is not None


def test_srun_names_the_other_ends_of_a_step() -> None:
    # https://github.com/hafs-community/HAFS/issues/101, as posted
    assert SRUN_OTHER_END.search("srun: error: Orion-18-69: task 289: Bus error")
    assert not SRUN_OTHER_END.search("srun: error: Orion-01-01: task 4: Out Of Memory")


def test_the_stores_closed_connection_alone_is_no_failure() -> None:
    # https://github.com/sgl-project/sglang/issues/20859, as posted: rank 0 ending closes the store as well
    text = (
        "[rank12]:[W318 10:00:41.929037914 ProcessGroupNCCL.cpp:1771] [PG ID 0 PG GUID 0 Rank 8] Failed to check the "
        '"should dump" flag on TCPStore, (maybe TCPStore server has shut down too early), with error: Connection '
        "reset by peer\n"
        "[rank12]:[W318 10:00:41.915284135 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=135, "
        "addr=[sglang-0-1.sglang.default.svc.transwarp.local]:48750, remote=[sglang-0.default.pod.transwarp.local]:"
        "20000): Connection reset by peer\n"
    )
    log = parse_file("store.log", text)
    assert not log.failed and {e.kind for e in log.events} == {"warn"}
    assert all(f.severity == "info" for f in explain([log]))
