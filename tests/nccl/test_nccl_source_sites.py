"""NCCL's and its plugins' failure messages whose own words state the cause, read by class from their
source sites (NCCL 2.18 - 2.30 at their release tags, nccl-rdma-sharp-plugins 2.1, aws-ofi-nccl): the
multi-node NVLink check of mnnvl.cc (TD093), the API rules of group.cc, init.cc, enqueue.cc, bootstrap.cc
and dev_runtime.cc (TD095), the bootstrap root's world-size checks (TD080), the variables NCCL refuses by
name and RDMA ports of different link layers (TD077), ncclFindInterfaces finding none for the IB and
socket transports (TD041), the device API's version check (TD085), a graph file that cannot be opened
or is of another format (TD070), the SHARP plugin (TD957) and aws-ofi-nccl's address vector (TD084).
Each line is the format string with plausible values, followed by NCCL's return-code trail."""

from __future__ import annotations

import pytest

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

H = "gb200-n07:40211:40388 [2]"
BANNER = f"{H} NCCL INFO NCCL version 2.27.5+cuda12.9\n"


def _findings(where: str, message: str, ret: int = 2) -> list[Finding]:
    text = (
        f"{BANNER}{H} {where} NCCL WARN {message}\n"
        f"{H} NCCL INFO {where.split(':')[0]}:{int(where.split(':')[1]) + 2} -> {ret}\n"
        f"{H} NCCL INFO init.cc:1696 -> {ret}\n{H} NCCL INFO init.cc:2140 -> {ret} [Async thread]\n"
    )
    return explain([parse_file("rank2.log", text)])


def _lead(where: str, message: str, ret: int = 2) -> Finding:
    return next(f for f in _findings(where, message, ret) if f.severity in ("error", "critical"))


@pytest.mark.parametrize(
    ("where", "message", "code", "says", "fix"),
    [
        (
            "mnnvl.cc:74",
            "MNNVL (cliqueSize 72) is available but not working on this system. Check the IMEX channel "
            "configuration (/dev/nvidia-caps-imex-channels). Set NCCL_MNNVL_ENABLE=0 to ignore this issue.",
            "TD093",
            "could not allocate fabric memory",
            "imex-channels/channel0",
        ),
        (
            "mnnvl.cc:86",
            "MNNVL (cliqueSize 4) is available but not working on this system. Check the IMEX configuration "
            "(nvidia-imex-ctl -N). Set NCCL_MNNVL_ENABLE=0 to ignore this issue.",
            "TD093",
            "shared through IMEX",
            "nvidia-imex-ctl -N",
        ),
        ("init.cc:788", "MNNVL is not supported on this system", "TD093", "NCCL_MNNVL_ENABLE=1", "Unset"),
        ("group.cc:553", "ncclGroupEnd: not in a group call.", "TD095", "no ncclGroupStart", "ncclGroupStart"),
        (
            "init.cc:2230",
            "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER",
            "TD095",
            "ncclConfig_t",
            "initializer",
        ),
        (
            "enqueue.cc:2290",
            "FP8 reduction support begins with sm90 capable devices.",
            "TD095",
            "older than Hopper",
            "bf16",
        ),
        (
            "group.cc:420",
            "Trying to send to self without a matching recv",
            "TD095",
            "to the rank itself",
            "batch_isend_irecv",
        ),
        ("init.cc:2607", "Invalid device 4 (totalnDev=4)", "TD095", "names GPU 4", "CUDA_VISIBLE_DEVICES"),
        (
            "bootstrap.cc:437",
            "ncclCommGetUniqueId should not be called when NCCL_COMM_ID is set",
            "TD095",
            "grown",
            "Unset NCCL_COMM_ID",
        ),
        (
            "bootstrap.cc:335",
            "Bootstrap Root : mismatch in info from procs, nranks 16 vs 8, nroots 1 vs 1, iroot 0 vs 0, offset 0 vs 0",
            "TD080",
            "(16 and 8)",
            "MASTER_PORT",
        ),
        (
            "bootstrap.cc:348",
            "Bootstrap Root : rank 3 of 8 ranks has already checked in",
            "TD080",
            "rank 3 of 8 checked in twice",
            "its own rank",
        ),
        (
            "bootstrap.cc:650",
            "Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> or [<ipv6>]:<port> or <hostname>:<port>",
            "TD077",
            "NCCL_COMM_ID",
            "<address>:<port>",
        ),
        (
            "transport/net_ib/connect.cc:130",
            "NET/IB: NCCL_IB_SUBNET_PREFIX_LEN=40 is out of range [1,32]",
            "TD077",
            "NCCL_IB_SUBNET_PREFIX_LEN=40",
            "between 1 and 32",
        ),
        (
            "transport/net_ib.cc:1166",
            "NET/IB : Attempted to connect incompatible devices: [0]mlx5_0:1/IB and [0]mlx5_4:1/RoCE. Try selecting "
            "NICs of only one link type using NCCL_IB_HCA",
            "TD077",
            "different link layers",
            "NCCL_IB_HCA",
        ),
        ("transport/net_ib.cc:620", "NET/IB : No IP interface found.", "TD041", "no usable socket interface", ""),
        ("transport/net_socket.cc:118", "NET/Socket : no interface found", "TD041", "no usable socket interface", ""),
        (
            "dev_runtime.cc:95",
            "NCCL library is too old. This application was compiled with NCCL version 2.30.3, but is running with "
            "NCCL library version 2.27.5.",
            "TD085",
            "built with NCCL 2.30.3 but runs with libnccl 2.27.5",
            "",
        ),
        (
            "graph/xml.cc:1257",
            "Could not open XML graph file /shared/graph.xml : No such file or directory",
            "TD070",
            "could not open the graph file /shared/graph.xml: No such file or directory",
            "NCCL_GRAPH_FILE",
        ),
        (
            "graph/xml.cc:1241",
            "XML Graph has wrong version 1, 2 needed",
            "TD070",
            "graph format 1, this NCCL reads 2",
            "",
        ),
    ],
)
def test_a_message_that_states_its_cause_is_named_by_it(
    where: str, message: str, code: str, says: str, fix: str
) -> None:
    lead = _lead(where, message)
    assert lead.code == code and says in lead.message and fix in lead.fix
    assert lead.evidence.get("cause", {}).get("confidence") != "candidates"


def test_the_sharp_plugins_init_error_is_its_own_class_with_libsharps_reason() -> None:
    lead = _lead("sharp_plugin.c:269", "NET/IB :SHARP coll init error: Cannot connect to SHARPD(-53)", 3)
    assert lead.code == "TD957" and "Cannot connect to SHARPD, -53" in lead.message
    assert "NCCL_COLLNET_ENABLE=0" in lead.fix and "sharp_am" in lead.fix
    group = _lead("sharp_plugin.c:281", "SHARP group create failed: No available resources(-20)", 3)
    assert group.code == "TD957" and "group in the switches" in group.message


def test_aws_ofi_nccls_address_vector_insert_is_the_plugins() -> None:
    lead = _lead(
        "nccl_ofi_rdma.c:5120", "NET/OFI Unable to insert remote address into address vector for device 0. RC: -22"
    )
    assert lead.code == "TD084" and "address vector" in lead.message


def test_an_abort_or_revoke_is_no_cause_of_its_own() -> None:
    for message in ("Comm 0x55d1c2a0 is in abort state", "ncclCommInitRank: communicator was revoked"):
        lead = _lead("proxy.cc:1590", message)
        assert lead.code in ("TD052", "TD049") and "cause not found" in lead.message


def test_the_variable_a_log_shows_is_named_with_its_value() -> None:
    text = (
        f"{BANNER}{H} NCCL INFO NCCL_COMM_ID set by environment to node-a:29500:1\n"
        f"{H} misc/socket.cc:330 NCCL WARN Net : No valid <IPv4_or_hostname>:<port> pair found\n"
        f"{H} bootstrap.cc:650 NCCL WARN Invalid NCCL_COMM_ID, please use format: <ipv4>:<port> or [<ipv6>]:<port> "
        "or <hostname>:<port>\n"
        f"{H} NCCL INFO init.cc:1696 -> 4\n"
    )
    lead = next(f for f in explain([parse_file("rank0.log", text)]) if f.severity == "error")
    assert lead.code == "TD077" and "NCCL_COMM_ID=node-a:29500:1" in lead.message


def test_the_mnnvl_info_line_and_a_skipped_merge_stay_quiet() -> None:
    text = (
        f"{BANNER}{H} NCCL INFO MNNVL 1 cliqueId 7fff cliqueSize 72 cliqueRank 2 nvlDomainSize 72\n"
        f"{H} NCCL INFO NET/IB : Skipping makeVDevice, NCCL_IB_MERGE_NICS=0\n"
        f"{H} NCCL INFO comm 0x55d1c2a0 rank 2 nRanks 72 nNodes 18 localRanks 4 localRank 2 MNNVL 1\n"
        f"{H} NCCL INFO Init COMPLETE\n"
    )
    assert not [f for f in explain([parse_file("rank2.log", text)]) if f.severity in ("error", "critical")]


def test_the_release_a_program_was_built_with_is_not_a_second_banner() -> None:
    text = (
        f"{H} NCCL INFO NCCL version 2.29.7+cuda12.9\n"
        f"{H} dev_runtime.cc:88 NCCL WARN NCCL library is too old. This application was compiled with NCCL version "
        "2.30.3, but is running with NCCL library version 2.29.7.\n"
        f"{H} NCCL INFO dev_runtime.cc:90 -> 5\n"
    )
    found = explain([parse_file("rank0.log", text)])
    assert not [f for f in found if f.code == "TD048"]
    assert next(f for f in found if f.severity == "error").code == "TD085"


def test_the_uds_bind_of_nccl_2_20_3_is_its_known_bug_and_not_of_2_20_5() -> None:
    def lead(version: str) -> Finding:
        text = (
            f"{H} NCCL INFO NCCL version {version}+cuda12.3\n"
            f"{H} misc/ipcsocket.cc:57 NCCL WARN UDS: Binding to socket /tmp/nccl-socket-0-5b2c41d9a7e3 failed : "
            "Address already in use (98)\n"
            f"{H} NCCL INFO proxy.cc:1697 -> 2\n{H} NCCL INFO init.cc:1420 -> 2\n"
        )
        return next(f for f in explain([parse_file("rank0.log", text)]) if f.severity == "error")

    bug = lead("2.20.3")
    assert bug.code == "TD083" and "2.20.5" in bug.message
    assert lead("2.21.5").code != "TD083"


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("misc/nvmlwrap.cc:62", "Failed to open libnvidia-ml.so.1"),
        (
            "os/linux.cc:615",
            "Failed to open libnvidia-ml.so.1: libnvidia-ml.so.1: cannot open shared object file: No such file or "
            "directory",
        ),
    ],
)
def test_nvmls_library_that_cannot_be_loaded_is_the_drivers_user_space(where: str, message: str) -> None:
    lead = _lead(where, message)
    assert lead.code == "TD078" and "could not load libnvidia-ml.so.1" in lead.message
    assert "--gpus all" in lead.fix


def test_the_address_parser_names_nccl_ras_addr_where_only_that_is_set() -> None:
    text = (
        f"{BANNER}{H} NCCL INFO NCCL_RAS_ADDR set by environment to ras-host\n"
        f"{H} misc/socket.cc:330 NCCL WARN Net : No valid <IPv4_or_hostname>:<port> pair found\n"
        f"{H} NCCL INFO ras/client_support.cc:171 -> 4\n{H} NCCL INFO init.cc:1696 -> 4\n"
    )
    lead = next(f for f in explain([parse_file("rank0.log", text)]) if f.severity == "error")
    assert lead.code == "TD077" and "NCCL_RAS_ADDR=ras-host" in lead.message


def test_no_transport_between_two_ranks_ranks_the_two_disables_first() -> None:
    lead = _lead("transport.cc:40", "No transport found for rank 0[1b000] -> rank 1[3d000]")
    assert lead.code == "TD052" and lead.evidence["cause"]["confidence"] == "candidates"
    assert str(lead.evidence["candidates"][0]).startswith("NCCL_P2P_DISABLE=1 together with NCCL_SHM_DISABLE=1")
