"""A class whose message fits several causes (topodoctor/nccl/causes.py): on real logs of the corpus
(fixtures/nccl-logs/, each README names the thread), the finding names one cause only where the log
holds the line that singles it out, and otherwise the candidates, most likely first, with what tells
them apart and what to collect next."""

from __future__ import annotations

from pathlib import Path

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs"
H = "gpu7:4021:4090 [3]"  # host:pid:tid [cudaDev], NCCL's line prefix
TRAIL = f"{H} NCCL INFO init.cc:1462 -> 6\n{H} NCCL INFO group.cc:75 -> 6 [Async thread]\n"


def _lead(path: str) -> Finding:
    text = (LOGS / path).read_text(errors="replace")
    return _lead_of(text, path.rsplit("/", 1)[-1])


def _lead_of(text: str, name: str = "rank3.log") -> Finding:
    return next(f for f in explain([parse_file(name, text)]) if f.severity == "error")


def _ranked(f: Finding) -> list[str]:
    assert f.evidence["cause"]["confidence"] == "candidates", f.evidence["cause"]
    listed = f.evidence["candidates"]
    assert isinstance(listed, list) and len(listed) > 1
    return [str(c) for c in listed]


def test_a_qp_timeout_over_the_ibext_plugin_is_narrowed_by_the_plugins_network_line() -> None:
    """NVIDIA/nccl-tests#227: `Using network IBext_v8`, then ibv_modify_qp timed out."""
    f = _lead("holdout2/h-002.log")
    assert f.code == "TD064" and f.evidence["cause"]["confidence"] == "shown by the log"
    assert "IBext" in str(f.evidence["narrowed_by"])
    assert f.fix.index("NCCL_IBEXT_DISABLE") < f.fix.index("NCCL_IB_GID_INDEX")  # the plugin first, the rest after


def test_a_qp_timeout_alone_names_the_candidates_the_gid_index_first() -> None:
    """NVIDIA/nccl#769: the WARN line alone; the GID index, the rail and the route all time out so."""
    f = _lead("holdout2/h-001.log")
    listed = _ranked(f)
    assert f.code == "TD064" and "GID index" in listed[0]
    assert any("NCCL_CROSS_NIC=0" in c for c in listed) and "show_gids" in f.fix and "Collect:" in f.fix


def test_a_qp_timeout_between_roce_v2_gids_rules_the_gid_index_out() -> None:
    """NVIDIA/nccl#2013: the WARN names the RoCE v2 GID in use; the maintainer settled the rail."""
    f = _lead("real/nccl-2013-modify-qp-timeout-rail.log")
    listed = _ranked(f)
    assert "rail" in listed[0] and not any("GID index selects" in c for c in listed)
    assert f.fix.startswith("The link is RoCE v2")


def test_status_12_in_one_line_ranks_the_gid_index_first_and_names_the_other_causes() -> None:
    """pytorch/pytorch#81628: one line, no link layer, no GID."""
    listed = _ranked(_lead("holdout/f-007.log"))
    assert "GID index" in listed[0]
    for other in ("routed", "losslessly", "down or flapping", "failed first", "NCCL_IB_TIMEOUT"):
        assert any(other in c for c in listed), other


def test_status_12_between_routable_gids_is_not_the_gid_index() -> None:
    """NVIDIA/nccl#1814 (RoCE v2 GIDs) and #1405 (global IPv6 GIDs): the GID index is right."""
    for path in ("real/nccl-1814-status-12-roce-v2-gids.log", "real/nccl-1405-status-12-ipv6-gids.log"):
        listed = _ranked(_lead(path))
        assert "not routed to each other" in listed[0], path
        assert not any("GID index selects" in c for c in listed), path


def test_status_12_from_a_link_local_gid_is_narrowed_to_the_gid_index() -> None:
    """net_ib's completion WARN names the GID in use: fe80:: is a link-local GID no router forwards."""
    text = (
        f"{H} transport/net_ib.cc:1432 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<45317> with status=12 "
        "opcode=0 len=0 vendor err 129 (Send) localGid fe80::a288:c2ff:fe2b:1e3a remoteGids fe80::a288:c2ff:fe2b:1e5c\n"
        + TRAIL
    )
    f = _lead_of(text)
    assert f.code == "TD045" and f.evidence["cause"]["confidence"] == "shown by the log"
    assert "link-local" in str(f.evidence["narrowed_by"]) and "NCCL_IB_GID_INDEX" in f.fix.split("If not that")[0]


def test_status_4_names_acs_first_with_what_confirms_it() -> None:
    """NVIDIA/nccl#928: the completion line alone; ACS, the registration and a freed buffer all give it."""
    f = _lead("real/nccl-928-completion-4-acs.log")
    listed = _ranked(f)
    assert f.code == "TD066" and "ACS" in listed[0]
    assert "NCCL_NET_GDR_LEVEL=0" in f.fix and any("peermem" in c for c in listed)


def test_a_topology_attribute_with_the_ofi_plugin_loaded_ranks_its_file_first() -> None:
    """aws/aws-ofi-nccl#785: the plugin loaded, its static p5 file lacks the CPU's arch."""
    listed = _ranked(_lead("real/aws-ofi-nccl-785-topo-attr-arch.log"))
    assert "aws-ofi-nccl" in listed[0] and any("2.8" in c for c in listed)


def test_a_topology_attribute_with_the_file_set_by_environment_is_that_file() -> None:
    text = (
        f"{H} NCCL INFO NCCL_TOPO_FILE set by environment to /opt/topo.xml\n"
        f"{H} graph/xml.h:77 NCCL WARN Attribute arch of node cpu not found\n" + TRAIL
    )
    f = _lead_of(text)
    assert f.code == "TD069" and f.evidence["narrowed_by"] == "NCCL loaded /opt/topo.xml"
    assert "NCCL_TOPO_DUMP_FILE" in f.fix.split("If not that")[0]


def test_a_missing_peer_segment_names_the_candidates() -> None:
    """NVIDIA/nccl#1589: `No such file or directory` attaching a peer's segment (settled: back to 2.21.5)."""
    listed = _ranked(_lead("real/nccl-1589-shm-attach-enoent.log"))
    assert "share /dev/shm" in listed[0]
    assert any("2.21.5" in c for c in listed) and any("RemoveIPC" in c for c in listed)


def test_a_peer_segment_without_a_name_ranks_cumem_host_first_and_does_not_claim_it() -> None:
    """vllm#18831 (settles nothing): the empty name alone; no import line tells, so cuMem host ranks first."""
    f = _lead("holdout2/h-006.log")
    listed = _ranked(f)
    assert f.code == "TD087" and "cuMem host" in listed[0] and "NCCL_CUMEM_HOST_ENABLE=0" in f.fix


def test_a_peer_segment_without_a_name_beside_cumem_and_mmap_imports_is_cumem_host_on_some_ranks() -> None:
    """NVIDIA/nccl#2190 (settled: cuMem host works on some local ranks only): the log holds 'CUMEM imported'
    beside 'MMAP imported' lines of processes of one GPU each, the line that singles the cause out."""
    f = _lead("holdout2/h-005.log")
    assert f.code == "TD087" and f.evidence["cause"]["confidence"] == "shown by the log"
    assert "CUMEM imported" in str(f.evidence["narrowed_by"]) and "MMAP imported" in str(f.evidence["narrowed_by"])
    assert f.fix.index("NCCL_CUMEM_HOST_ENABLE=0") < f.fix.index("NCCL versions")


def test_cumem_and_mmap_imports_in_one_process_of_several_gpus_do_not_narrow() -> None:
    """shm.cc shares a buffer between two GPUs of one process as a /dev/shm file by design ("legacy"): the same
    import lines from a process that drives two GPUs are no sign of cuMem failing on some ranks."""
    text = (LOGS / "holdout2/h-005.log").read_text(errors="replace")
    one_process = text.replace("d4fde3314201:13739:13739 [6]", "d4fde3314201:13736:13739 [6]")
    assert one_process != text
    f = _lead_of(one_process, "h-005.log")
    assert f.code == "TD087" and "cuMem host" in _ranked(f)[0]


def test_cumem_host_turned_off_by_environment_rules_it_out() -> None:
    """NCCL_CUMEM_HOST_ENABLE=0 set by environment and no CUMEM import: cuMem host memory is not in use."""
    text = (LOGS / "holdout2/h-006.log").read_text(errors="replace")
    head = f"{H} NCCL INFO NCCL_CUMEM_HOST_ENABLE set by environment to 0.\n"
    f = _lead_of(head + text, "h-006.log")
    assert f.code == "TD087"
    assert (
        not any("cuMem host memory works" in c for c in f.evidence.get("candidates", []))
        and "cuMem host memory works" not in f.fix
    )


def test_a_remote_error_between_two_nccl_versions_is_the_versions() -> None:
    text = (
        "node1:11:12 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "node2:21:22 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\n"
        "node1:11:30 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with "
        "error 13, opcode 0, len 0, vendor err 136\n"
    )
    f = next(f for f in explain([parse_file("job.log", text)]) if f.code == "TD068")
    assert f.evidence["cause"]["confidence"] == "shown by the log" and "2.18.1 and 2.21.5" in f.fix


def test_an_nvls_failure_names_the_fabric_manager_first_among_its_causes() -> None:
    """NVIDIA/nccl#1338 and nccl-tests#276: transport/nvls.cc's CUDA call failed; FM state, versions, teardown."""
    for path in ("real/nccl-1338-nvls-fm-not-restarted.log", "real/nccl-tests-276-nvls-999.log"):
        f = _lead(path)
        listed = _ranked(f)
        assert f.code == "TD053" and "Fabric Manager" in listed[0], path
        assert any("versions" in c for c in listed) and "nvidia-smi -q" in f.fix, path


def test_a_roce_device_without_its_gid_ranks_the_missing_address_first() -> None:
    """NVIDIA/nccl#799: ibv_modify_qp 'No such device' on a RoCE device (an open thread)."""
    f = _lead("real/nccl-799-modify-qp-no-such-device-roce.log")
    listed = _ranked(f)
    assert f.code == "TD063" and "no IP address" in listed[0] and "NCCL_IB_HCA" in f.fix


def test_a_connect_that_timed_out_names_the_firewall_first_unless_the_interface_shows() -> None:
    """nccl-tests#15 (NCCL 2.2, settled: a firewall); a socket list of docker bridges singles out the interface."""
    listed = _ranked(_lead("real/nccl-tests-15-pre25-connect-timed-out.log"))
    assert "firewall" in listed[0] and any("not routed" in c for c in listed)
    text = (
        f"{H} NCCL INFO NET/Socket : Using [0]docker0:172.17.0.1<0> [1]veth1a2b:fe80::1%veth1a2b<0>\n"
        f"{H} misc/socket.cc:484 NCCL WARN Net : Connect to 10.0.0.2<43211> failed : Connection timed out\n" + TRAIL
    )
    f = _lead_of(text)
    assert f.code == "TD072" and f.evidence["cause"]["confidence"] == "shown by the log", f.evidence
    assert "docker0" in str(f.evidence["narrowed_by"])


def test_a_qp_timeout_with_a_gid_index_forced_by_the_environment_is_that_index() -> None:
    """NVIDIA/nccl#769's case at NCCL_DEBUG=INFO: NCCL prints the variable it read, then the QP times out."""
    text = (
        f"{H} NCCL INFO NCCL_IB_GID_INDEX set by environment to 1.\n"
        f"{H} misc/ibvwrap.cc:376 NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out, on dev "
        "mlx5_0:1, curr state INIT, next state RTR\n" + TRAIL
    )
    f = _lead_of(text)
    assert f.code == "TD064" and f.evidence["narrowed_by"] == "NCCL_IB_GID_INDEX=1 is set by the environment"
    assert "NCCL_CROSS_NIC=0" in f.fix.split("If not that")[1]  # the other causes stay named after it


def test_a_call_that_failed_in_the_teardown_of_a_run_that_completed_is_not_the_jobs_failure() -> None:
    """NVIDIA/nccl-tests#365: nvls.cc's Cuda failure, then `commReclaim: cleanup comm ... failed in
    destroy/abort`, which init.cc prints before returning ncclSuccess; the tests all completed."""
    findings = explain([parse_file("h3-006.log", (LOGS / "holdout3/h3-006.log").read_text())])
    assert findings and all(f.severity not in ("error", "critical") for f in findings), findings
    failed = f"{H} transport/nvls.cc:130 NCCL WARN Cuda failure 1 'invalid argument'\n" + TRAIL
    assert _lead_of(failed).code == "TD053"  # the same WARN at set-up, with the trail to the top: the failure


def test_a_communicator_destroyed_twice_is_the_programs_second_destroy() -> None:
    """NVIDIA/nccl#1482: init.cc's guard against a double free of the comm, then the program's error line."""
    f = _lead("holdout3/h3-007.log")
    assert f.code == "TD089" and "ncclCommDestroy" in f.message and "twice" in f.fix


def test_xla_finding_no_nccl_library_is_the_library_to_install() -> None:
    # fixtures/nccl-logs/holdout4/h4-003.log (jax-ml/jax#18391): XLA's NCCL stub found no libnccl to load
    f = _lead("holdout4/h4-003.log")
    assert (f.code, f.severity) == ("TD085", "error") and "Unable to load NCCL library" in f.message
    assert "Install NCCL" in f.fix and "nvidia-nccl-cu12" in f.fix
