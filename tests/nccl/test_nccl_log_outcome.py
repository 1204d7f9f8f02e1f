"""Known bugs by version (TD083), severity from the run's outcome, the classes read from the
programs around NCCL (TD084 - TD087) and the candidates of a message with several causes. The
lines are those of public threads (named at each case) or NCCL's own format strings (the
catalogue's), with NCCL's line prefix."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from topodoctor.cli.commands import app
from topodoctor.model.findings import Finding, failing
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

H = "gpu7:4021:4090 [3]"
runner = CliRunner()


def _explain(text: str) -> list[Finding]:
    return explain([parse_file("job.log", text)])


# NVIDIA/nccl#1020: NCCL 2.19.3, rings computed differently per rank (fixed in 2.19.4)
RING = f"{H} graph/rings.cc:38 NCCL WARN Error : ring 0 does not loop back to start (13 != 15).\n"


def test_known_bug_of_the_version_comes_first_with_its_fix() -> None:
    findings = _explain(f"{H} NCCL INFO NCCL version 2.19.3+cuda12.2\n" + RING)
    first = findings[0]
    assert (first.code, first.severity) == ("TD083", "error")
    assert "known bug of NCCL 2.19.3, fixed in 2.19.4: upgrade NCCL" in first.message
    assert "NVIDIA/nccl#1020" in first.fix and "NCCL_TOPO_FILE" in first.fix
    assert first.evidence["line"] == 2
    assert findings[1].code == "TD052"  # the message itself follows, its candidates ranked


def test_same_message_on_a_fixed_version_is_its_class_and_still_fails() -> None:
    """2.20.3 has the fix: no known bug; the WARN is fatal in graph/rings.cc and nothing follows it,
    so the run failed on it: error, exit 1, its cause not found but its candidates ranked."""
    findings = _explain(f"{H} NCCL INFO NCCL version 2.20.3+cuda12.2\n" + RING)
    assert (findings[0].code, findings[0].severity) == ("TD052", "error")
    assert "(1)" in findings[0].fix and findings[0].evidence["cause"]["confidence"] == "candidates"
    assert not any(f.code == "TD083" for f in findings)


def test_nic_fusion_fallback_in_a_run_that_went_on_is_no_bug() -> None:
    """NVIDIA/nccl#1748's first WARN, in a run that completed: NCCL fell back, nothing failed."""
    text = (
        f"{H} NCCL INFO NCCL version 2.26.2+cuda12.8\n"
        f"{H} graph/search.cc:1089 NCCL WARN Could not find a path for pattern 1, falling back to simple order\n"
        f"{H} NCCL INFO comm 0x5581 rank 3 nranks 8 cudaDev 3 busId 9b000 - Init COMPLETE\n"
    )
    findings = _explain(text)
    assert [f.code for f in findings] == ["TD051"] and not failing(findings, "error")


def test_nic_fusion_fatal_path_under_2_26_is_the_known_bug() -> None:
    """NVIDIA/nccl#1748: 2.26.2, the fallback then names NET 0, which NIC fusion removed."""
    text = (
        f"{H} NCCL INFO NCCL version 2.26.2+cuda12.8\n"
        f"{H} graph/search.cc:1089 NCCL WARN Could not find a path for pattern 1, falling back to simple order\n"
        f"{H} graph/topo.cc:580 NCCL WARN Could not find NET with id 0\n"
        f"{H} NCCL INFO graph/search.cc:1131 -> 3\n{H} NCCL INFO init.cc:1015 -> 3\n"
        f"{H} NCCL INFO group.cc:75 -> 3 [Async thread]\n"
    )
    first = _explain(text)[0]
    assert first.code == "TD083" and "fixed in 2.27.3" in first.message and "NCCL_NET_MERGE_LEVEL=LOC" in first.fix


def test_lower_case_no_algorithm_is_fatal_at_error() -> None:
    """NCCL 2.19's enqueue.cc wording, lower case, with no trail after it in a WARN-level log."""
    findings = _explain(f"{H} enqueue.cc:1196 NCCL WARN Error : no algorithm/protocol available\n")
    assert (findings[0].code, findings[0].severity) == ("TD077", "error")


def test_no_algorithm_pasted_without_nccl_s_prefix_is_the_same_failure() -> None:
    """enqueue.cc's message as 2.24+ prints it (the function, the datatype and the variable that was set),
    pasted alone from a framework's error: NCCL's own words, so the same class at error, not nothing."""
    line = (
        "Error : no algorithm/protocol available for function AllGather with datatype ncclBfloat16. "
        "NCCL_PROTO was set to LL128.\n"
    )
    first = _explain(line)[0]
    assert (first.code, first.severity) == ("TD077", "error") and "NCCL_PROTO" in first.fix
    assert _explain("the docs say: no algorithm/protocol available is rare\n") == []  # not NCCL's message


def test_ofi_getinfo_failure_ends_the_run_at_error() -> None:
    text = (
        f"{H} NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.13.2-aws\n"
        f"{H} nccl_net_ofi_rdma_init:7308 NCCL WARN NET/OFI OFI fi_getinfo() call failed: No data available\n"
    )
    first = _explain(text)[0]
    assert (first.code, first.severity) == ("TD084", "error") and "fi_info -p efa" in first.fix


def test_ofi_register_failure_names_memlock() -> None:
    text = (
        f"{H} nccl_ofi_sendrecv.c:582 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 0. "
        "RC: -12, Error: Cannot allocate memory\n"
        f"{H} NCCL INFO transport/net.cc:1054 -> 2\n{H} NCCL INFO group.cc:75 -> 2 [Async thread]\n"
    )
    first = _explain(text)[0]
    assert first.code == "TD084" and "ulimit -l" in first.fix


def test_ofi_plugin_failure_with_nccl_going_on_is_info() -> None:
    """The plugin failed, NCCL went on with sockets (aws/aws-ofi-nccl#715): no failure of the run, a warning that EFA
    carries nothing (a host without EFA runs so by design)."""
    text = (
        f"{H} nccl_net_ofi_create_plugin:259 NCCL WARN NET/OFI aws-ofi-nccl initialization failed\n"
        f"{H} NCCL INFO NET/Socket : Using [0]eth0:10.0.227.37<0>\n{H} NCCL INFO Using network Socket\n"
    )
    findings = _explain(text)
    assert [(f.code, f.severity) for f in findings] == [("TD108", "warning")]


def test_torch_collective_mismatch_is_the_program() -> None:
    text = (
        "[rank1]: RuntimeError: Detected mismatch between collectives on ranks. Rank 1 is running collective: "
        "CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, TensorShape=[4], TensorDtypes=Float), but "
        "Rank 0 is running collective: CollectiveFingerPrint(SequenceNumber=12, OpType=ALLREDUCE, "
        "TensorShape=[8], TensorDtypes=Float).\n"
    )
    first = _explain(text)[0]
    assert (first.code, first.severity) == ("TD073", "error")
    assert "rank 1 runs ALLREDUCE of [4] Float while rank 0 runs ALLREDUCE of [8] Float" in first.message


def test_undefined_nccl_symbol_is_the_library_loaded(tmp_path: Path) -> None:
    text = (
        'Traceback (most recent call last):\n  File "train.py", line 1, in <module>\n    import torch\n'
        "ImportError: /usr/lib/python3/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclMemFree\n"
    )
    first = _explain(text)[0]
    assert (first.code, first.severity) == ("TD085", "error") and "ncclMemFree" in first.message
    (tmp_path / "job.log").write_text(text)
    assert runner.invoke(app, ["nccl-log", str(tmp_path / "job.log")]).exit_code == 1  # a failed job exits 1


def test_nccl_1x_warn_format_is_read() -> None:
    """NCCL 1.x's WARN macro (src/core.h): ``WARN %s:%d `` then the message, no host prefix."""
    findings = _explain("WARN src/core.cu:652 Cuda failure 'out of memory'\n")
    assert findings[0].code == "TD058"


def test_watchdog_timeout_of_one_ms_is_the_cause() -> None:
    text = (
        "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1) ran for 1044 milliseconds "
        "before timing out.\n"
    )
    first = _explain(text)[0]
    assert (first.code, first.severity) == ("TD047", "error") and "too short" in first.message
    assert "did not join" not in first.message


def test_watchdog_timeout_of_ten_minutes_is_a_rank() -> None:
    text = (
        "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
        "WorkNCCL(SeqNum=8898, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600236 "
        "milliseconds before timing out.\n"
    )
    first = _explain(text)[0]
    assert first.code == "TD047" and "a rank never joined it or the collective stalled" in first.message
    assert first.evidence["candidates"][0].startswith("a rank never joined this collective")


def test_cuda_217_in_the_shm_transport_is_cumem_host_not_p2p() -> None:
    text = (
        f"{H} NCCL INFO NCCL version 2.27.5+cuda12.9\n"
        f"{H} transport/shm.cc:592 NCCL WARN Cuda failure 217 'peer access is not supported between these two "
        "devices'\n" + f"{H} NCCL INFO transport/shm.cc:620 -> 1\n{H} NCCL INFO group.cc:75 -> 1 [Async thread]\n"
    )
    first = _explain(text)[0]
    assert first.code == "TD087" and "NCCL_CUMEM_HOST_ENABLE=0" in first.fix
    assert "NCCL_P2P_DISABLE" not in first.fix


def test_shm_segment_of_size_zero_and_garbage_name_is_cumem_host() -> None:
    text = (
        f"{H} NCCL INFO NCCL version 2.24.3+cuda12.6\n"
        f"{H} misc/shmutils.cc:88 NCCL WARN Error while attaching to shared memory segment /dev/shm/nccl-\x01\ufffd "
        "(size 0), error: No such file or directory (2)\n"
        f"{H} NCCL INFO transport/shm.cc:381 -> 2\n{H} NCCL INFO group.cc:75 -> 2 [Async thread]\n"
    )
    first = _explain(text)[0]
    assert first.code == "TD087" and "--ipc=host" in first.fix


def test_generic_cuda_error_names_its_site_and_candidates() -> None:
    """NVIDIA/nccl#1283: 'invalid argument' raised in include/alloc.h: the site's causes, ranked."""
    text = (
        "(train_rft pid=2657296) 2024-05-11 14:10:52.227 n176-080-198:2657296:2658232 [0] include/alloc.h:102 "
        "NCCL WARN Cuda failure 1 'invalid argument'\n"
        "(train_rft pid=2657296) n176-080-198:2657296:2658232 [0] NCCL INFO init.cc:1475 -> 1\n"
    )
    first = _explain(text)[0]
    assert first.code == "TD057" and first.evidence["cause"]["confidence"] == "candidates"
    assert "(1) cuMem" in first.fix and "(2)" in first.fix and "Collect next" in first.fix
    assert first.evidence["candidates"]


def test_no_interface_in_the_subnet_names_nccl_comm_id() -> None:
    text = (
        f"{H} NCCL INFO NCCL_COMM_ID set by environment to 10.20.0.5:29500\n"
        f"{H} misc/socket.cc:238 NCCL WARN Net : No interface found in the same subnet as remote address "
        "10.20.0.5<29500>\n"
        f"{H} misc/socket.cc:451 NCCL WARN NET/Socket : no socket interface found\n"
        f"{H} NCCL INFO bootstrap.cc:65 -> 3\n{H} NCCL INFO init.cc:1500 -> 3\n"
    )
    first = _explain(text)[0]
    assert (first.code, first.severity) == ("TD086", "error") and "NCCL_COMM_ID=10.20.0.5:29500" in first.message


def test_catalogued_warn_no_class_covers_says_what_the_source_does() -> None:
    """A WARN of NCCL's source with no class of its own, then the trail: cause not found, with the
    file, function and error the source returns after it."""
    text = f"{H} init.cc:1102 NCCL WARN Invalid device count requested : 0\n{H} NCCL INFO init.cc:1500 -> 4\n"
    text += f"{H} NCCL INFO group.cc:75 -> 4 [Async thread]\n"
    first = _explain(text)[0]
    assert first.code == "TD052" and "returns ncclInvalidArgument" in first.message


def test_sockets_on_bridges_only_are_the_cause_of_a_failure_without_reason() -> None:
    """The interface list pasted without NCCL's prefix, then torch's error with no reason: NCCL's
    sockets use a docker bridge and a veth, which reach no other node."""
    text = (
        "NET/Socket : Using [0]docker0:172.17.0.1<0> [1]veth3a2b1c:fe80::42:acff:fe11:2%veth3a2b1c<0>\n"
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.18.1\n"
    )
    first = _explain(text)[0]
    assert (first.code, first.severity) == ("TD041", "error") and "docker0" in first.message
    assert "NCCL_SOCKET_IFNAME" in first.fix


def test_one_routed_interface_among_bridges_is_not_named_the_cause() -> None:
    text = (
        "NET/Socket : Using [0]eth0:10.0.0.5<0> [1]docker0:172.17.0.1<0>\n"
        "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.18.1\n"
    )
    first = _explain(text)[0]  # a candidate, first of them: the failure may still be another's
    assert first.code == "TD041" and first.evidence["cause"]["confidence"] == "candidates"
    assert "NCCL_SOCKET_IFNAME=eth0" in first.evidence["candidates"][0]


def test_a_warn_whose_caller_may_catch_it_alone_is_no_failure() -> None:
    """misc/ibvwrap.cc returns an error when libibverbs is absent, and NCCL goes on with sockets: at
    NCCL_DEBUG=WARN nothing follows, which is no sign of a failure."""
    findings = _explain(f"{H} misc/ibvwrap.cc:106 NCCL WARN Failed to open libibverbs.so[.1]\n")
    assert [f.severity for f in findings] == ["info"]


def test_the_same_warn_then_the_run_ending_is_the_failure() -> None:
    text = (
        f"{H} misc/ibvwrap.cc:106 NCCL WARN Failed to open libibverbs.so[.1]\n"
        'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n'
        "RuntimeError: the run stopped\n"
    )
    first = _explain(text)[0]
    assert (first.code, first.severity) == ("TD052", "error") and "libibverbs" in first.message


def test_a_cuda_failure_names_the_call_nccl_checks_at_its_line() -> None:
    """NeMo-RL#564: transport/p2p.cc:298 is cudaIpcOpenMemHandle in NCCL 2.24.3 - 2.26.6 (the catalogue's
    CUDA call table): legacy CUDA IPC, the path NCCL_CUMEM_ENABLE=0 sends NCCL down."""
    first = _explain("transport/p2p.cc:298 NCCL WARN Cuda failure 'invalid argument'\n")[0]
    assert first.code == "TD057" and "cudaIpcOpenMemHandle" in first.message
    assert "(1) cuMem turned off" in first.fix and "NCCL_CUMEM_ENABLE=1" in first.fix
    assert first.evidence["call"] == "cudaIpcOpenMemHandle"


def test_the_version_narrows_the_call_at_a_line() -> None:
    """enqueue.cc:58 is cudaFuncSetAttribute in 2.20 - 2.21 and 2.27.7; at 2.24.3 it is not a check."""
    text = f"{H} NCCL INFO NCCL version 2.24.3+cuda12.6\n{H} enqueue.cc:58 NCCL WARN Cuda failure 'invalid argument'\n"
    text += f"{H} NCCL INFO init.cc:1475 -> 1\n{H} NCCL INFO group.cc:75 -> 1 [Async thread]\n"
    first = _explain(text)[0]
    assert first.code == "TD057" and "cudaFuncSetAttribute" not in first.message and "(1)" in first.fix


def test_no_algorithm_with_nothing_forced_is_not_a_setting() -> None:
    """NVIDIA/nccl#1709: 2.24+ appends "NCCL_ALGO was set to ..." when it was; nothing was, and
    enqueue.cc returns ncclInternalError: cause not found, the candidates ranked."""
    text = (
        "[rank238]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3353, internal error, "
        "NCCL version 2.26.2\n[rank238]: Last error:\n"
        "[rank238]: Error : no algorithm/protocol available for function AllGather with datatype ncclInt8.\n"
    )
    first = _explain(text)[0]
    assert first.code == "TD052" and "NCCL_COLLNET_ENABLE=0" in first.fix and "NCCL_DEBUG" in first.fix


def test_no_algorithm_with_nccl_algo_named_is_the_setting() -> None:
    text = (
        f"{H} enqueue.cc:2063 NCCL WARN No algorithm/protocol available for function AllReduce with datatype "
        "ncclFloat32. NCCL_ALGO was set to CollNet.\n"
    )
    first = _explain(text)[0]
    assert first.code == "TD077" and "NCCL_ALGO=CollNet" in first.message


def test_an_address_of_family_zero_is_ranks_on_other_versions() -> None:
    """NVIDIA/nccl#1267: nodes ran NCCL 2.20.5, 2.19.3 and 2.17.1; the bootstrap read an empty address."""
    text = (
        "ncclSocketInit: connecting to address with family 0 is neither AF_INET(2) nor AF_INET6(10)\n"
        "NCCL version 2.19.3+cuda12.3\n"
    )
    first = _explain(text)[0]
    assert (first.code, first.severity) == ("TD048", "error") and first.evidence["cause"]["confidence"] == "candidates"


def test_an_address_of_no_family_with_socket_ifname_set_is_the_interface() -> None:
    text = (
        f"{H} NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth2\n"
        "ncclSocketInit: connecting to address  with family 59936 is neither AF_INET(2) nor AF_INET6(10)\n"
    )
    first = _explain(text)[0]
    assert first.code == "TD041" and "NCCL_SOCKET_IFNAME=eth2" in first.message


def test_no_interface_in_the_subnet_leads_the_connect_it_causes() -> None:
    """NVIDIA/nccl#929: a peer's connect fails because the root found no interface in the subnet."""
    text = (
        "e57377aacbb6:1203:1227 [0] misc/socket.cc:480 NCCL WARN socketStartConnect: Connect to 172.17.0.2<38847> "
        "failed : Software caused connection abort\n"
        "d9beab19e6d2:1791:1791 [0] misc/socket.cc:237 NCCL WARN Net : No interface found in the same subnet as "
        "remote address 10.1.0.5<1778>\n"
    )
    findings = _explain(text)
    assert [f.code for f in findings[:2]] == ["TD086", "TD072"]


def test_ofi_memory_registration_einval_is_the_efa_installer() -> None:
    """aws/aws-ofi-nccl#584: RC -22 with NCCL 2.19+: libfabric of an EFA installer before 1.29."""
    text = (
        f"{H} nccl_net_ofi_rdma.c:1204 NCCL WARN NET/OFI Unable to register memory (type = 2) for device 4. RC: "
        "-22, Error: Invalid argument\n"
        f"{H} NCCL INFO transport/net.cc:1054 -> 2\n{H} NCCL INFO group.cc:75 -> 2 [Async thread]\n"
    )
    first = _explain(text)[0]
    assert first.code == "TD084" and first.fix.startswith("The NIC refused the buffer as invalid (EINVAL)")
    assert "FI_EFA_SET_CUDA_SYNC_MEMOPS=0" in first.fix


def test_libfabric_efa_abort_on_enomem_is_memlock() -> None:
    """awslabs/awsome-distributed-ai#647: no NCCL line at all, libfabric aborts the process."""
    text = (
        "Libfabric EFA provider has encountered an internal error:\n\n"
        "Libfabric error: (-12) Cannot allocate memory\n"
        "EFA internal error: (4112) Failure to post internal receive buffers\n\n"
        "Your application will now abort().\n"
    )
    first = _explain(text)[0]
    assert (first.code, first.severity) == ("TD061", "error") and "ulimit -l" in first.fix


def test_the_info_sign_of_a_known_bug_is_the_failure_alone() -> None:
    """NVIDIA/nccl-tests#287: 2.25.1 on RTX 5090; the kernels ask more shared memory than the GPU has."""
    text = (
        "GENOA-06:4766:4766 [0] NCCL INFO NCCL version 2.25.1+cuda12.8\n"
        "GENOA-06:4766:4780 [0] NCCL INFO ncclMaxSharedMem 82240 exceeds device/fn maxSharedMem 79856\n"
        "GENOA-06:4766:4780 [0] NCCL INFO Using network Socket\n"
    )
    first = _explain(text)[0]
    assert (first.code, first.severity) == ("TD083", "error") and "fixed in 2.26.2" in first.message
    fixed = text.replace("2.25.1", "2.26.2")  # the same line under the release that fixed it is no failure
    assert not failing(_explain(fixed), "error")


def test_nccl_1_is_named_with_the_upgrade() -> None:
    """NVIDIA/nccl-tests#5: nccl-tests built with NCCL 1.0 fails with an unhandled cuda error."""
    text = (
        "# NCCL Tests compiled with NCCL 1.0\n# Using devices\nNCCL failure all_reduce.cu:95 'unhandled cuda error'\n"
    )
    first = _explain(text)[0]
    assert first.code == "TD083" and "NCCL 1.0.0, replaced by NCCL 2" in first.message


def test_torch_saying_the_communicator_was_aborted_is_a_failure() -> None:
    text = (
        "[rank1]: torch.distributed.DistBackendError: NCCL communicator was aborted on rank 1.\n"
        "[rank1]: Exception raised from checkForNCCLErrorsInternal at ProcessGroupNCCL.cpp:2027\n"
    )
    findings = _explain(text)
    assert findings and findings[0].severity == "error" and findings[0].code in ("TD049", "TD052")


def test_old_torch_version_text_is_read_back() -> None:
    """NVIDIA/nccl#577: torch before 1.10 printed NCCL 2.11.4 (version code 21104) as "21.1.4"."""
    text = (
        "52: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:975, internal error, NCCL version 21.1.4\n"
        "52: ncclInternalError: Internal check failed. This is either a bug in NCCL or due to memory corruption\n"
    )
    assert parse_file("job.log", text).versions == ("2.11.4",)


_FALLBACK = f"{H} graph/search.cc:1089 NCCL WARN Could not find a path for pattern 4, falling back to simple order\n"


def test_a_fallback_under_a_buggy_release_is_the_bug_only_where_nothing_else_explains_the_run() -> None:
    banner = f"{H} NCCL INFO NCCL version 2.25.1+cuda12.8\n"
    oom = f"{H} include/alloc.h:102 NCCL WARN Cuda failure 'out of memory'\n{H} NCCL INFO init.cc:1475 -> 1\n"
    oom += f"{H} NCCL INFO group.cc:75 -> 1 [Async thread]\n"
    findings = _explain(banner + _FALLBACK + oom)
    assert findings[0].code == "TD058" and not any(f.code == "TD083" for f in findings)
    torch = "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1191, internal error, NCCL version 2.25.1\n"
    assert _explain(banner + _FALLBACK + torch)[0].code == "TD083"


def test_old_no_algorithm_at_info_without_a_forced_variable_is_not_a_setting() -> None:
    """Before 2.24 the message names no setting; at INFO NCCL lists every variable it read."""
    text = f"{H} NCCL INFO NCCL_DEBUG set by environment to INFO\n"
    text += f"{H} enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available\n"
    assert _explain(text)[0].code == "TD052"
    forced = text.replace("NCCL_DEBUG set by environment to INFO", "NCCL_ALGO set by environment to Tree")
    first = _explain(forced)[0]
    assert first.code == "TD077" and "NCCL_ALGO=Tree" in first.message


def test_a_cuda_failure_in_the_allocator_on_the_shm_transport_path_is_cumem_host() -> None:
    """include/alloc.h's ncclCuMemHostAlloc, called by transport/shm.cc (NCCL 2.23+)."""
    text = (
        f"{H} NCCL INFO NCCL version 2.27.5+cuda12.9\n"
        f"{H} include/alloc.h:62 NCCL WARN Cuda failure 1 'invalid argument'\n"
        f"{H} NCCL INFO transport/shm.cc:536 -> 1\n{H} NCCL INFO group.cc:75 -> 1 [Async thread]\n"
    )
    first = _explain(text)[0]
    assert first.code == "TD087" and "NCCL_CUMEM_HOST_ENABLE=0" in first.fix


def test_cuda_217_without_nccl_file_names_p2p_first_and_cumem_host_second() -> None:
    text = "Last error:\nCuda failure 217 'peer access is not supported between these two devices'\n"
    first = _explain(text)[0]
    assert first.code == "TD055" and first.evidence["cause"]["confidence"] == "candidates"
    assert first.fix.index("NCCL_P2P_DISABLE=1") < first.fix.index("NCCL_CUMEM_HOST_ENABLE=0")
