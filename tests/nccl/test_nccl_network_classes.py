"""The network and bootstrap classes read from their sources: ibv_modify_qp's errno at RTR (the kernel's GID
lookup: ENODEV a GID with no network device behind it, ENODATA an empty entry, EINVAL out of range), the
plugin aws-ofi-nccl's endpoint that cannot be created (fi_setopt FI_OPT_SHARED_MEMORY_PERMITTED refused by a
provider other than efa), and torch's c10d store whose bind found its port taken (errno 98) in each wording
torch has printed. The lines follow the format strings at the tags named."""

from __future__ import annotations

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

H = "node3:5120:5188 [2]"
# v2.18.1-1 src/misc/ibvwrap.cc: "Call to %s failed with error %s"; net_ib.cc's RTR trail after it
MODIFY_QP = (
    f"{H} misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error {{err}}\n"
    f"{H} NCCL INFO transport/net_ib.cc:579 -> 2\n{H} NCCL INFO group.cc:65 -> 2 [Async thread]\n"
)
ROCE = f"{H} NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE ; OOB eth0:10.0.0.3<0>\n"
IB = f"{H} NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.3<0>\n"
GID_ENV = f"{H} NCCL INFO NCCL_IB_GID_INDEX set by environment to 5.\n"


def _lead(text: str) -> Finding:
    return explain([parse_file("rank0.log", text)])[0]


def _candidates(f: Finding) -> list[str]:
    assert f.evidence["cause"]["confidence"] == "candidates"  # type: ignore[index]
    return [str(c) for c in f.evidence["candidates"]]  # type: ignore[union-attr]


def test_modify_qp_no_such_device_ranks_the_gid_index_first() -> None:
    """ENODEV at RTR: the kernel found no network device behind the GID the path names."""
    for text in (MODIFY_QP.format(err="No such device"), ROCE + MODIFY_QP.format(err="No such device")):
        f = _lead(text)
        assert f.code == "TD063"
        first = _candidates(f)[0]
        assert "NCCL_IB_GID_INDEX" in first and "show_gids" in first and "NCCL_IB_HCA" in first


def test_modify_qp_no_such_device_with_the_index_forced_is_that_index() -> None:
    f = _lead(ROCE + GID_ENV + MODIFY_QP.format(err="No such device"))
    assert f.code == "TD063" and f.fix.startswith("The link is RoCE")
    assert "The log shows it: NCCL_IB_GID_INDEX=5 is set by the environment" in f.fix


def test_modify_qp_no_such_device_on_infiniband_leaves_the_gid_out() -> None:
    f = _lead(IB + MODIFY_QP.format(err="No such device"))
    assert not any("NCCL_IB_GID_INDEX" in c for c in _candidates(f))


def test_no_such_device_of_another_verbs_call_keeps_its_own_causes() -> None:
    text = f"{H} misc/ibvwrap.cc:106 NCCL WARN Call to ibv_query_port failed with error No such device\n"
    text += f"{H} NCCL INFO init.cc:1089 -> 2\n"
    assert not any("GID index the queue pair" in c for c in _candidates(_lead(ROCE + text)))


def test_modify_qp_no_data_available_is_a_gid_index_with_no_entry() -> None:
    f = _lead(ROCE + MODIFY_QP.format(err="No data available"))
    assert f.code == "TD064" and "forced GID index does not exist" in _candidates(f)[0]


# aws-ofi-nccl v1.12.1-aws src/nccl_ofi_ofiutils.c: "Disabling shared memory failed: %s", then goto error
P = "6f2d8a82d208:1287:1328 [0]"
OFI = (
    f"{P} NCCL INFO NET/OFI Initializing aws-ofi-nccl 1.12.1-aws\n"
    f"{P} NCCL INFO NET/OFI Selected Provider is tcp (found 1 nics)\n"
    f"{P} NCCL WARN NET/OFI Disabling shared memory failed: Protocol not available\n"
)


def test_the_plugins_endpoint_failure_that_ends_an_info_log_is_the_failure() -> None:
    f = _lead(OFI)
    assert (f.code, f.severity) == ("TD084", "error")
    assert "tcp provider, not efa" in f.fix and "/dev/infiniband/uverbs" in f.fix
    assert "FI_OPT_SHARED_MEMORY_PERMITTED" in f.fix


def test_the_plugins_failure_nccl_goes_on_after_is_no_error() -> None:
    """NCCL drops a plugin whose init failed and prints the next network's lines (net.cc)."""
    after = f"{P} NCCL INFO NET/IB : No device found.\n{P} NCCL INFO NET/Socket : Using [0]eth0:172.17.0.2<0>\n"
    assert not any(f.severity == "error" for f in explain([parse_file("rank0.log", OFI + after)]))


# torch's c10d: before 1.10 tcputils' std::system_error alone; 2.2+ the reason on the line after "failed to listen"
FRAMES = (
    '  File "/usr/lib/python3.8/site-packages/torch/distributed/rendezvous.py", line 142, in _tcp_rendezvous_handler\n'
    "    store = TCPStore(result.hostname, result.port, world_size, start_daemon, timeout)\n"
)


def test_the_stores_bare_errno_98_under_its_frame_is_the_port_in_use() -> None:
    f = _lead(FRAMES + "RuntimeError: Address already in use\n")
    assert f.code == "TD091" and "MASTER_PORT" in f.fix


def test_a_bare_address_in_use_is_the_store_only_in_c10ds_own_words() -> None:
    text = 'Traceback (most recent call last):\n  File "app.py", line 3, in <module>\n'
    # Python's own socket raises OSError; a RuntimeError of these words is c10d's store
    assert not any(
        f.code == "TD091"
        for f in explain([parse_file("app.log", text + "OSError: [Errno 98] Address already in use\n")])
    )
    assert any(
        f.code == "TD091" for f in explain([parse_file("app.log", text + "RuntimeError: Address already in use\n")])
    )


def test_the_stores_two_line_wording_of_2_2_is_the_port_in_use() -> None:
    text = (
        "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address.\n"
        "port: 2333, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use\n"
    )
    assert _lead(text).code == "TD091"


def test_the_plugins_failing_warn_after_the_work_progressed_is_no_failure() -> None:
    """nccl-tests' rows before it: the run worked; a plugin's WARN at its end is its teardown."""
    rows = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
        "   busbw #wrong\n"
        "     8388608       2097152     float     sum      -1    125.3   66.96  125.55      0    124.9   67.16"
        "  125.93      0\n"
    )
    text = OFI.replace(f"{P} NCCL WARN", rows + f"{P} NCCL WARN")
    assert not any(f.severity == "error" for f in explain([parse_file("rank0.log", text)]))


def test_a_connect_to_loopback_in_one_hosts_log_puts_the_peer_first() -> None:
    """Ranks of one node reach each other on loopback: a refused connect there is a peer not listening."""
    warn = (
        "{h} misc/socket.cc:483 NCCL WARN socketStartConnect: Connect to 127.0.0.1<45069> failed : Connection refused\n"
    )
    one = _candidates(_lead(warn.format(h=H) + f"{H} NCCL INFO bootstrap.cc:270 -> 2\n"))
    assert "not listening" in one[0] and "NCCL_SOCKET_IFNAME" in one[1]
    two = warn.format(h=H) + warn.format(h="node4:6120:6188 [0]")
    assert "NCCL_SOCKET_IFNAME" in _candidates(_lead(two))[0]


# https://github.com/aws/aws-k8s-tester/pull/454 (as posted): the plugin's init fails, NCCL goes on to its own sockets
K8S = """\
[1,0]<stdout>:bert-mpi-training-worker-0:21:570 [0] NCCL INFO NET/OFI Using transport protocol SENDRECV
[1,0]<stdout>:
[1,0]<stdout>:bert-mpi-training-worker-0:21:570 [0] nccl_net_ofi_create_plugin:204 NCCL WARN NET/OFI Failed to \
initialize sendrecv protocol
[1,0]<stdout>:
[1,0]<stdout>:bert-mpi-training-worker-0:21:570 [0] nccl_net_ofi_create_plugin:257 NCCL WARN NET/OFI aws-ofi-nccl \
initialization failed
[1,0]<stdout>:bert-mpi-training-worker-0:21:570 [0] NCCL INFO NET/IB : No device found.
[1,0]<stdout>:bert-mpi-training-worker-0:21:570 [0] NCCL INFO NET/Socket : Using [0]eth0:192.168.29.226<0>
[1,0]<stdout>:bert-mpi-training-worker-0:21:570 [0] NCCL INFO Using network Socket
"""


def test_a_plugin_nccl_dropped_for_its_own_sockets_is_information_and_cut_before_it_the_failure() -> None:
    went_on = explain([parse_file("worker-0.log", K8S)])
    assert ("TD108", "warning") in [(f.code, f.severity) for f in went_on]  # went on over sockets: EFA unused
    cut = K8S.split("[1,0]<stdout>:bert-mpi-training-worker-0:21:570 [0] NCCL INFO NET/IB")[0]
    assert (_lead(cut).code, _lead(cut).severity) == ("TD084", "error")


def test_the_tcpx_plugins_connect_warn_names_its_address() -> None:
    """nccl-plugin-gpudirecttcpx socket_utils.cc: "Connect to %s from %s failed : %s" after its retries."""
    f = _lead(
        "a3-node1:1234:1300 [0] NCCL WARN Connect to 10.128.0.5<43210> from 10.128.0.4<0> failed : Connection refused\n"
    )
    assert f.code == "TD072" and "10.128.0.5<43210>" in f.message and "Connection refused" in f.message
