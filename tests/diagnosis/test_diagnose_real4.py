"""The fourth development set (fixtures/diagnose/real4/, its README): hosts described in the reporter's words.
Every case holds its verdict by the scorer's own rules; a host the words name (a VM, RoCE, a bonded NIC, an
EPYC host) ranks the causes it is known for, with the output that tells them apart, at warning only where the
run is said to be slow and no figure was judged; a question without a figure gets what the hardware should
reach (TD987, information)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests_support_evidence import assert_holds, case_findings, cases_of, evidence_of, judge, one_finding

from topodoctor.diagnosis.evidence_decide import LSPCI_ATS, TOPO_DUMP
from topodoctor.evidence.inputs import join, read_input

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "fixtures" / "diagnose" / "real4"
CASES = cases_of(SET)


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_case_holds_its_verdict(name: str) -> None:
    assert_holds(CASES[name], SET / name)


def test_a_passthrough_vm_said_to_drop_asks_first_for_ats_and_acs() -> None:
    """nccl-tests#380: 8 x H200 and 4 ConnectX-7 passed through to a VM a host, 320 GB/s on bare metal and 180
    in the VMs; the title says the bandwidth drops. No cause from the words: the VM's candidates, ATS and ACS
    first (NVIDIA's VM guide), the output that shows them asked for first."""
    f = one_finding(SET / "vm-h200-cx7-passthrough", "TD986")
    assert f.severity == "warning" and f.cause is None
    assert f.evidence["post"][0] == LSPCI_ATS  # type: ignore[index]
    assert "a virtual machine" in f.message and "cannot tell why the run is slow" in f.message
    candidates = f.evidence["candidates"]
    assert isinstance(candidates, list) and candidates[0].startswith("ATS off")
    assert any("flat PCI tree" in c for c in candidates)


def test_what_the_reporter_says_was_set_is_listed_after_the_rest() -> None:
    """nccl#2171: "performed the ACS/ATS configuration on the host": ATS stays a candidate (lspci shows
    whether the setting took) but after the guest's topology, which is then asked for first."""
    f = one_finding(SET / "vm-cloud-hypervisor-h100", "TD986")
    assert f.evidence["post"][0] == TOPO_DUMP  # type: ignore[index]
    candidates = f.evidence["candidates"]
    assert isinstance(candidates, list) and candidates[-1].startswith("ATS off")
    assert "the reporter says this was set" in f.message


def test_perftests_figure_in_the_paragraph_is_not_nccls() -> None:
    """nccl-tests#201: "The ib_write_bw has been done ... the performance we got is around 85 Gb/s": the
    figure belongs to the tool the paragraph names, so it is not judged as all_reduce's busbw; "dual-node" is
    two nodes, so the VM's candidates are those of a run across nodes."""
    got = case_findings(SET / "kvm-a100-vf-dual-port")
    assert not any(f.code == "TD022" and f.severity == "warning" for f in got)
    f = next(f for f in got if f.code == "TD986")
    assert "fabric manager" not in f.message  # across nodes, one node's NVSwitch setup is not the question


def test_a_server_named_by_its_gpu_is_one_node() -> None:
    """nccl#685: "an A100 server with 8 gpu cards" is one server, not 100; its 1 GB/s is ibdump's, so the answer
    is what 8 x A100 should reach and how to measure it."""
    got = case_findings(SET / "ib-a100-eight-cards-slow")
    assert all(f.severity == "info" for f in got), [(f.code, f.severity) for f in got]
    f = next(f for f in got if f.code == "TD987")
    assert "8 x A100 SXM" in f.message and "all_reduce_perf -b 8 -e 8G -f 2 -g 8" in f.message
    assert f.evidence["expected_gbps"] == pytest.approx(236, abs=1)


def test_a_multi_node_run_said_to_fall_short_asks_for_nccls_log_at_warning() -> None:
    """nccl-tests#257: two A800 nodes, every figure an image, "did not perform as expected": a shortfall on the
    reporter's word, cause not found, GPUDirect RDMA among the candidates (the thread's cause)."""
    f = next(f for f in case_findings(SET / "a800-two-nodes-images") if f.code == "TD022" and f.severity == "warning")
    assert "GPUDirect RDMA off" in f.message and f.cause is None
    assert f.evidence["post"][0].startswith("NCCL_DEBUG=INFO")  # type: ignore[index]


def test_roce_with_its_flow_control_named_has_no_flow_control_candidate() -> None:
    """nccl#173: "the server NIC will send a pause frame": the reporter speaks of flow control, so its absence
    is not a candidate; the multi-node candidates remain, with NCCL's log first."""
    got = case_findings(SET / "roce-v100-pause-frames")
    assert not any("no flow control" in f.message for f in got)
    assert not any(f.code == "TD986" for f in got)


def test_a_bonded_roce_device_a_tool_lists_puts_the_queue_pairs_first() -> None:
    """nccl-tests#191's ib_write_bw over mlx5_bond_1 (fixtures/evidence): with nothing of NCCL's run, the
    bond's one-QP-one-port limit leads the candidates and ib_write_bw with one and two QPs is asked for."""
    got = judge(evidence_of(ROOT / "fixtures" / "evidence" / "ib-write-bw-roce-bond-gbits.txt"))
    f = next(f for f in got if f.code == "TD022" and f.subject == "network")
    assert f.evidence["candidates"][0].startswith("one queue pair a connection")  # type: ignore[index]
    assert "`-q 1` and `-q 2`" in f.evidence["post"][0]  # type: ignore[index]


EPYC_HANG = (
    "Disabled IOMMU/ACS (in bios and through amd_iommu=off and iommu=pt in grub and setpci), verified that there's "
    "no SrcValid+ in lspci output. This is an AMD system as well, 7402P and Asrock ROMED8-2T, 4xRTX 4090, NPS=4, "
    "no IB or network training.\n"
)


def test_an_epyc_host_that_hangs_is_not_a_slow_run() -> None:
    """A comment of nccl-tests#117 (https://github.com/NVIDIA/nccl-tests/issues/117): an AMD 7402P host of four
    RTX 4090 that hangs, with the IOMMU, ACS and NPS already set. The words are read (what was set among
    them), but a hang is not a slow run: no warning from the host's description."""
    got = read_input("post.txt", EPYC_HANG)
    (claim,) = got.parts[0].prose
    assert {"iommu", "acs", "nps"} <= set(claim.checked) and claim.gpu_model == "RTX 4090"
    assert not claim.slow
    assert not any(f.code == "TD986" for f in judge(join([got])))


def test_a_stated_figure_at_its_expectation_on_an_nvswitch_board_stays_normal() -> None:
    """nccl#1455 (fixtures/diagnose/prose/p-01): 8 x H100 SXM named, the fabric manager never mentioned, the
    ring at 365-370 GB/s: judged normal, so the board's known causes raise nothing."""
    path = ROOT / "fixtures" / "diagnose" / "prose" / "p-01" / "evidence-1.txt"
    ev = evidence_of(path)
    assert any("nvswitch" in c.hosts for c in ev.prose)
    got = judge(ev)
    assert not any(f.severity in ("warning", "error") for f in got)
    assert not any(f.code == "TD986" for f in got)
