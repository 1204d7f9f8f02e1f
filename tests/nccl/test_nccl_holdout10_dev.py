"""The ninth set's third part and the tenth set as development input since they were scored (fixtures/nccl-logs/
holdout9c, holdout10, holdout10b): NCCL's and the launchers' words pasted without what follows them in a log
(a title's `No interface found in the same subnet as remote address`, deepspeed's `exits with return code = -7`),
XLA's `NCCL error 4 (invalid argument)`, UCX's shared-memory FIFO, accelerate's refusal of RTX 40xx GPUs, and two
messages that fit several causes named as candidates (CUDA's 'named symbol not found', torch's watchdog that made
no progress)."""

from __future__ import annotations

from nccl_support import explained, lead_of


def _candidates(text: str) -> str:
    return " ".join(str(c) for c in lead_of(text).evidence.get("candidates", []))  # type: ignore[union-attr]


def test_words_of_nccl_and_the_launchers_read_without_their_tails() -> None:
    assert lead_of("No interface found in the same subnet as remote address\n").code == "TD086"
    sigbus = lead_of('[BUG] Have "exits with return code = -7" without any error message\n')
    assert sigbus.code == "TD094" and "SIGBUS" in sigbus.message
    xla = lead_of("INTERNAL: NCCL error 4 (invalid argument) at jaxmg_backend/xla_ffi/runtime.cc:241\n")
    assert xla.code in ("TD049", "TD052") and "invalid argument" in xla.message


def test_ucxs_shared_memory_fifo_is_dev_shm() -> None:
    lead = lead_of(
        "mm_iface failed to allocate receive FIFO\n...\n[ucp_address_unpack] Caught signal 11 (Segmentation fault)\n"
    )
    assert lead.code == "TD043" and "UCX" in lead.message and "shm-size" in lead.fix


def test_accelerates_rtx_40xx_refusal_names_both_variables() -> None:
    text = (
        "[rank0]: NotImplementedError: Using RTX 4000 series doesn't support faster communication broadband via P2P "
        'or IB. Please set `NCCL_P2P_DISABLE="1"` and `NCCL_IB_DISABLE="1" or use `accelerate launch`\n'
    )
    lead = lead_of(text)
    assert lead.code == "TD055" and "NCCL_P2P_DISABLE" in lead.fix and "NCCL_IB_DISABLE" in lead.fix


def test_named_symbol_not_found_names_the_arch_first_among_candidates() -> None:
    listed = _candidates("NCCL WARN Cuda failure 'named symbol not found'\nNCCL INFO init.cc:1 -> 1\n")
    assert listed.index("architecture") < listed.index("two NCCL")
    # 'no kernel image' says the architecture in so many words: one cause
    one = lead_of("NCCL WARN Cuda failure 'no kernel image is available for execution on the device'\n")
    assert one.code == "TD060" and "candidates" not in one.evidence


def test_a_watchdog_that_made_no_progress_names_its_candidates() -> None:
    text = (
        "[rank0]:[E ProcessGroupNCCL.cpp:1395] [PG 0 Rank 0] Heartbeat monitor timed out! Process will be terminated "
        "after dumping debug info. workMetaList_.size()=1\n"
    )
    assert "GIL" in _candidates(text) and "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" in _candidates(text)


def test_a_title_that_quotes_a_socket_error_is_the_failed_connection() -> None:
    listing = (
        "ip-1:14605:14673 [0] NCCL INFO Bootstrap : Using [0]ens5:172.31.0.137<0> "
        "[1]veth75fa783:fe80::14ad:64ff:fe64:b31e%veth75fa783<0>\n"
    )
    lead = lead_of("NCCL Network is unreachable / Connection refused when initializing DDP\n" + listing)
    assert lead.code == "TD072" and "Network is unreachable" in lead.message
    assert "NCCL_SOCKET_IFNAME=ens5" in lead.fix  # the bridge beside the routed interface, from the listing
    # a title about something else, or a socket error in a log line, is not the title's failure
    assert not [f for f in explained("my web server says Connection refused\n" + listing) if f.code == "TD072"]
