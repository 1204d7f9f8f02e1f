"""The frameworks' own words around an NCCL failure, each read for what its source says it means: torch's heartbeat
monitor telling a rank of another rank's timeout with this rank's last enqueued and completed work (a rank with
nothing in flight never reached the collective), the watchdog's counters of the work it timed out, torch's
argument checks of the NCCL backend (TD096), the c10d store's client with the errno of its last try, its barrier,
the elastic rendezvous and Ray's, the store closed under a call, the elastic table's SIGBUS, vLLM's CUDA check and
Gloo's interface that has no address."""

from __future__ import annotations

import pytest

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

P0 = "[PG ID 0 PG GUID 0(default_pg) Rank 0]"
P1 = "[PG ID 0 PG GUID 0(default_pg) Rank 1]"
TIMED_OUT = (
    "[rank0]:[E1125 10:11:12.1 42 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600031 milliseconds "
    "before timing out.\n"
    f"[rank0]:[E1125 10:11:12.2 42 ProcessGroupNCCL.cpp:1785] {P0} Exception (either an error or timeout) detected by "
    "watchdog at work: 5, last enqueued NCCL work: 5, last completed NCCL work: 4.\n"
)
TAIL = (
    "This is most likely caused by incorrect usages of collectives, e.g., wrong sizes used across ranks, the order "
    "of collectives is not same for all ranks or the scheduled collective, for some reason, didn't run.\n"
)


def _dump(src: str, enq: int, done: int, prefix: str = P1) -> str:
    return (
        f"[rank1]:[E1125 10:11:13.1 43 ProcessGroupNCCL.cpp:1834] {prefix} Received a dump signal due to a collective "
        f"timeout from {src} and we will try our best to dump the debug info. Last enqueued NCCL work: {enq}, last "
        f"completed NCCL work: {done}.{TAIL}"
    )


def _errors(text: str) -> list[Finding]:
    return [f for f in explain([parse_file("/x/rank0.log", text)]) if f.severity in ("error", "critical")]


def _lead(text: str) -> Finding:
    return _errors(text)[0]


def _cause(f: Finding) -> str:
    return str(f.evidence.get("cause", {}).get("confidence", ""))  # type: ignore[union-attr]


def test_a_rank_told_of_a_timeout_with_nothing_in_flight_never_reached_the_collective() -> None:
    lead = _lead(_dump(" rank 0", 4, 4))
    assert lead.code == "TD047" and "rank 1 had not called it" in lead.message
    assert lead.evidence["idle"] is True and "never reached" in lead.fix
    assert _cause(lead) == "candidates"  # the default group's counters alone: a subgroup's work is another candidate
    assert "another process group" in lead.fix


def test_a_rank_told_of_a_timeout_with_its_own_work_open_waits_in_one_too() -> None:
    lead = _lead(_dump(" rank 0", 9, 7))
    assert lead.code == "TD047" and "waits in one too: its work 8 has not completed" in lead.message
    assert "two threads issue collectives on one process group" in lead.fix  # NCCL's one order per communicator


def test_the_timed_out_rank_beside_an_idle_peer_names_the_peer_that_never_came() -> None:
    lead = _lead(TIMED_OUT + _dump(" rank 0", 4, 4))
    assert "rank 0 reached it (last enqueued work 5, last completed 4)" in lead.message
    assert "rank 1 had no collective in flight" in lead.message and lead.evidence["idle_ranks"] == ["1"]
    assert "another process group" not in lead.fix  # the work itself is on the default group (PG 0)
    assert len([f for f in _errors(TIMED_OUT + _dump(" rank 0", 4, 4)) if f.code == "TD047"]) == 1


def test_the_watchdog_reads_its_own_timeout_and_how_long_the_work_ran() -> None:
    lead = _lead(TIMED_OUT)
    assert lead.evidence["timeout_ms"] == 600000 and lead.evidence["ran_ms"] == 600031
    assert "rank 0 reached it" in lead.message and "waits in it" in lead.message


def test_the_2_5_status_line_of_the_watchdog_gives_the_counters_too() -> None:
    text = (
        TIMED_OUT.splitlines()[0]
        + "\n"
        + (
            f"[rank0]:[E1125 10:11:12.2 42 ProcessGroupNCCL.cpp:2271] {P0}  failure detected by watchdog at work "
            "sequence id: 5 PG status: last enqueued work: 7, last completed work: 4\n"
        )
    )
    assert "rank 0 reached it (last enqueued work 7, last completed 4)" in _lead(text).message


def test_the_local_dump_signal_after_the_watchdog_adds_no_second_finding() -> None:
    text = TIMED_OUT + _dump("this local rank", 5, 4, P0)
    assert [f.code for f in _errors(text)] == ["TD047"]


@pytest.mark.parametrize(
    ("line", "what"),
    [
        ("ValueError: Tensors must be CUDA and dense", "a tensor on the CPU"),
        ("RuntimeError: No backend type associated with device type cpu", "only backend is NCCL"),
        ("RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!", "no GPU visible"),
        ("ValueError: Tensors must be non-overlapping and dense", "non-contiguous"),
    ],
)
def test_torch_refusing_the_programs_tensors_is_the_programs_call(line: str, what: str) -> None:
    text = f'  File "/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py", line 2050\n{line}\n'
    lead = _lead(text)
    # the call's own arguments are stated; a process that saw no GPU says what, not why (its environment's causes)
    stated = "candidates" if what == "no GPU visible" else "stated by the log"
    assert lead.code == "TD096" and what in lead.message and _cause(lead) == stated


REFUSED = "[W socket.cpp:663] [c10d] The client socket has failed to connect to [node0]:29500 (errno: {0} - {1}).\n"


def test_the_store_clients_refused_tries_lead_to_rank_0_not_listening() -> None:
    text = REFUSED.format(111, "Connection refused") * 2 + (
        "torch.distributed.DistNetworkError: The client socket has timed out after 900s while trying to connect to "
        "(node0, 29500).\n"
    )
    lead = _lead(text)
    assert lead.code == "TD072" and "errno 111, Connection refused" in lead.message
    assert lead.evidence["candidates"][0].startswith("a rank never reached the rendezvous")
    assert not any("firewall" in c for c in lead.evidence["candidates"])  # refused: the host answered


def test_a_store_address_that_does_not_resolve_is_shown_by_its_line() -> None:
    text = (
        "torch.distributed.DistNetworkError: The client socket has failed to connect to any network address of "
        "(master-0, 29500). The client socket has failed to connect to [master-0]:29500 (errno: -2 - Name or "
        "service not known).\n"
    )
    lead = _lead(text)
    assert lead.code == "TD072" and _cause(lead) == "shown by the log" and "master-0" in lead.fix


def test_no_route_to_the_store_puts_the_firewall_first() -> None:
    text = REFUSED.format(113, "No route to host") + (
        "torch.distributed.DistNetworkError: The client socket has timed out after 60s while trying to connect to "
        "(node0, 29500).\n"
    )
    assert "firewall" in _lead(text).evidence["candidates"][0]


def test_one_refused_try_before_the_run_went_on_stays_quiet() -> None:
    text = REFUSED.format(111, "Connection refused") + (
        "node1:42:42 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>\nNCCL version 2.20.5+cuda12.4\n"
        "node1:42:50 [0] NCCL INFO comm 0x5 rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0x1 - Init COMPLETE\n"
    )
    assert _errors(text) == []


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            "RuntimeError: Timed out initializing process group in store based barrier on rank: 3, for key: "
            "store_based_barrier_key:1 (world_size=8, worker_count=4, timeout=0:30:00)",
            "4 of 8 ranks reached it",
        ),
        ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError", "elastic rendezvous timed out"),
        ("RuntimeError: Unable to meet other processes at the rendezvous store.", "Ray's collective group"),
    ],
)
def test_the_rendezvous_that_timed_out_names_the_ranks_that_did_not_come(line: str, said: str) -> None:
    lead = _lead(line + "\n")
    assert lead.code == "TD072" and said in lead.message


def test_the_store_closed_under_a_call_is_rank_0s_end() -> None:
    text = (
        "torch.distributed.DistNetworkError: Failed to recv, got 0 bytes. Connection was likely closed. Did the "
        "remote server shutdown or crash?\n"
    )
    lead = _lead(text)
    assert lead.code == "TD046" and "store closed its connection" in lead.message


def test_the_elastic_tables_sigbus_is_the_sigbus_class() -> None:
    text = (
        "Root Cause (first observed failure):\n[0]:\n  time      : 2025-01-10_12:00:01\n  host      : node1\n"
        "  rank      : 0 (local_rank: 0)\n  exitcode  : -7 (pid: 4242)\n  error_file: <N/A>\n"
        "  traceback : Signal 7 (SIGBUS) received by PID 4242\n"
    )
    assert _lead(text).code == "TD094"


def test_a_cuda_error_caught_in_the_watchdog_counts_where_a_later_frame_names_it() -> None:
    text = (
        "terminate called after throwing an instance of 'c10::Error'\n"
        "  what():  CUDA error: an illegal memory access was encountered\n"
        "frame #3: c10d::ProcessGroupNCCL::WorkNCCL::finishedGPUExecutionInternal() const + 0x78 (0x7f in x.so)\n"
    )
    assert _lead(text).code == "TD057"


def test_vllms_cuda_check_in_its_custom_all_reduce_is_the_programs_own_p2p() -> None:
    text = (
        "INFO 01-10 12:00:00 pynccl.py:63] vLLM is using nccl==2.20.5\n"
        "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:307 'peer access is not supported between these "
        "two devices'\n"
    )
    lead = _lead(text)
    assert lead.code == "TD055" and lead.evidence.get("own_p2p")


def test_gloos_interface_without_an_address_is_named() -> None:
    text = (
        "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. "
        "Unable to find address for: eth0\n"
    )
    lead = _lead(text)
    assert lead.code == "TD072" and "interface eth0 (GLOO_SOCKET_IFNAME)" in lead.message


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("torch.distributed.elastic.multiprocessing.api.SignalException: Process 4100 got signal: 15", "from outside"),
        ("torch.distributed.elastic.rendezvous.api.RendezvousClosedError", "another node's agent"),
        (
            "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 1800000ms "
            "for recv operation to complete",
            "Gloo backend timed out waiting for a peer's data",
        ),
    ],
)
def test_an_end_that_names_no_failed_rank_fails_the_run_with_what_it_means(line: str, said: str) -> None:
    lead = _lead(line + "\n")
    assert lead.code == "TD049" and said in lead.message


def test_the_abort_after_a_watchdog_timeout_is_the_watchdogs_doing() -> None:
    text = TIMED_OUT + "Fatal Python error: Aborted\n"
    assert [f.code for f in _errors(text)] == ["TD047"]
    assert "TD098" in [f.code for f in _errors("NCCL INFO x\nSegmentation fault (core dumped)\n")]
