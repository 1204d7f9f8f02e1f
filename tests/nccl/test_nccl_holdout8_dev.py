"""The eighth blind set as development input since it was scored (fixtures/nccl-logs/holdout8): a network plugin
found but not loadable (the dynamic linker's words in NCCL's NET/Plugin line, TD084 for aws-ofi-nccl, TD099 for
any other), an absent plugin kept quiet as NCCL itself tells them apart (plugin_open.cc); the CUCHECK of
cuLaunchKernelEx that only 2.25.1 has at enqueue.cc:1500 naming that release's bug; torch's version with a quote
pasted after it read as the one version it is; and NCCL 2.0 - 2.3's one-interface-per-line socket listing with
its "Call to connect timeout" read as the connection that failed over loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
from nccl_support import explained, lead_of
from score_corpus import readme_rows, verdict_of

from topodoctor.nccl.parse import parse_file

SET = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs" / "holdout8"
H = "node2:1811:1902 [0]"


@pytest.mark.parametrize("name", ["h8-005.log", "h8-010.log", "h8-027.log", "h8-032.log"])
def test_the_fixed_files_hold_their_verdicts(name: str) -> None:
    assert verdict_of(SET, readme_rows(SET)[name], name) == "named-right"


def test_a_plugin_that_does_not_load_is_the_failure_and_an_absent_one_is_quiet() -> None:
    broken = f"{H} NCCL INFO NET/Plugin: /opt/x/libnccl-net.so: undefined symbol: ncclNetPlugin_v9\n"
    lead = lead_of(broken)
    assert lead.code == "TD099" and "undefined symbol" in lead.message and "ldd" in lead.fix
    dependency = (
        f"{H} NCCL INFO NET/Plugin: libfabric.so.1: cannot open shared object file: No such file or directory\n"
    )
    assert lead_of(dependency).code == "TD084"  # the plugin is there; the libfabric it needs is not
    absent = (
        f"{H} NCCL INFO NET/Plugin: Plugin load returned 2 : libnccl-net.so: cannot open shared object file: No such "
        "file or directory : when loading libnccl-net.so\n"
        f"{H} NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n"
    )
    assert not [f for f in explained(absent) if f.severity in ("warning", "error", "critical")]


def test_the_launch_site_names_2_25_1_only_in_cuchecks_form() -> None:
    cucheck = f"{H} enqueue.cc:1500 NCCL WARN Cuda failure 1 'invalid argument'\n{H} NCCL INFO group.cc:242 -> 1\n"
    lead = lead_of(cucheck)
    assert lead.code == "TD083" and "2.25.1" in lead.message and "2.26.2" in lead.message
    # 2.28.7 - 2.28.9 hold a CUDACHECK at that line, which prints no number: not the bug of 2.25.1
    cudacheck = cucheck.replace("Cuda failure 1 ", "Cuda failure ")
    assert "2.25.1" not in lead_of(cudacheck).message


def test_a_quote_after_torchs_version_is_no_second_version() -> None:
    text = (
        "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, "
        "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5`\n"
        "NCCL WARN Error while creating shared memory segment /dev/shm/nccl-xxxxx (size 7340384)\n"
    )
    assert parse_file("x.log", text).versions == ("2.21.5",)
    assert lead_of(text).code == "TD043"


def test_the_old_listing_of_loopback_across_nodes_names_the_interface() -> None:
    text = (
        "a:1:2 [0] NCCL INFO NET : Using interface lo:127.0.0.1<0>\n"
        "a:1:2 [0] NCCL INFO NET : Using interface eth0:10.151.40.240<0>\n"
        "b:1:2 [0] NCCL INFO NET : Using interface eth0:10.151.40.241<0>\n"
        "b:1:2 [0] include/socket.h:361 NCCL WARN Call to connect timeout : Connection refused\n"
        "b:1:2 [0] NCCL INFO bootstrap.cu:19 -> 2\nb:1:2 [0] NCCL INFO init.cu:557 -> 2\n"
    )
    lead = lead_of(text)
    assert lead.code == "TD072" and "NCCL_SOCKET_IFNAME=eth0" in lead.fix


def test_bridges_listed_beside_the_routed_interface_lead_the_candidates() -> None:
    text = (SET / "h8-001.log").read_text()
    lead = lead_of(text)
    assert lead.code == "TD041" and lead.evidence["cause"]["confidence"] == "candidates"
    first = lead.evidence["candidates"][0]
    assert "NCCL_SOCKET_IFNAME=bond0" in first and "br-05ab815fa14e" in first
    # the routed interface alone: nothing to blame on the listing
    alone = "ncclSystemError: System call (socket, malloc, munmap, etc) failed\nINFO NET/Socket : Using\n"
    alone += "[0]bond0:192.168.1.161<0>\n"
    assert lead_of(alone).code == "TD049"


def test_a_trail_from_the_socket_layer_through_bootstrap_ranks_its_interface_first() -> None:
    text = (SET / "h8-031.log").read_text()
    lead = lead_of(text)
    assert lead.code == "TD049" and "(1) the interface NCCL's bootstrap sockets use" in lead.message
    assert "ibp75s0" in lead.message and "IPoIB" in lead.message
    other = text.replace("bootstrap.cc", "transport.cc")  # the same return codes, not the bootstrap's
    assert "bootstrap sockets" not in lead_of(other).message


def test_bootstrap_message_truncated_names_candidates_not_one_cause() -> None:
    # bootstrap.cc's bootstrapNetRecv: both ends are NCCL's own code, so the words name no single cause
    log = (
        f"{H} bootstrap.cc:77 NCCL WARN Message truncated : received 256 bytes instead of 4\n"
        f"{H} NCCL INFO transport.cc:250 -> 3\n"
    )
    lead = lead_of(log)
    assert lead.code == "TD073"
    listed = lead.evidence["candidates"]
    assert isinstance(listed, list) and len(listed) == 3
    assert "versions" in str(listed[0]) and "2.18" in str(listed[1])
    assert verdict_of(SET, readme_rows(SET)["h8-019.log"], "h8-019.log") != "confidently-wrong"


def test_a_collective_mismatch_outside_bootstrap_keeps_its_one_cause() -> None:
    lead = lead_of(f"{H} NCCL WARN collective mismatch error, local size 256 remote size 4\n")
    assert lead.code == "TD073" and "candidates" not in lead.evidence


def test_nccl_1s_init_failure_fails_the_run_and_names_nccl_2() -> None:
    text = (
        "WARN src/core.cu:225 failed to allocate 2101248 byte device buffer\n"
        "WARN src/core.cu:683 rank 12 failed to allocate communicator\n"
        "NCCL Init failed (10) 'cuda malloc failed'\n"
    )
    lead = lead_of(text)
    assert lead.code == "TD083" and "NCCL 2" in lead.message and "one node only" in lead.message
    # the same words from a file NCCL 2 has do not make a log NCCL 1.x's
    assert "NCCL 1.x" not in lead_of(text.replace("src/core.cu", "init.cc")).message
