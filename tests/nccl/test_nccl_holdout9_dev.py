"""The ninth blind set as development input since it was scored (fixtures/nccl-logs/holdout9, holdout9b): known
bugs named by a WARN's line where that line is shared by the bug's releases and others (a candidate, not the
verdict), the launch site only 2.26.2 has, 2.31's wording of "no algorithm" with its setting wrapped to the next
line, NCCL's words pasted in a title without their numbers, CUDA's peer-access words with no NCCL form around
them, and classes whose words fit several causes named as candidates (RDMA registration out of memory, a watchdog
timeout, a process with no GPU, an aws-ofi-nccl call that failed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nccl_support import explained, lead_of
from score_corpus import readme_rows, verdict_of

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl-logs"
H = "node2:1811:1902 [0]"


@pytest.mark.parametrize(
    ("folder", "name"),
    [
        ("holdout9", "h9-005.log"),
        ("holdout9", "h9-019.log"),
        ("holdout9b", "h9b-014.log"),
    ],
)
def test_the_fixed_files_hold_their_verdicts(folder: str, name: str) -> None:
    assert verdict_of(FIXTURES / folder, readme_rows(FIXTURES / folder)[name], name) == "named-right"


def _candidates(text: str) -> str:
    return " ".join(str(c) for c in lead_of(text).evidence.get("candidates", []))  # type: ignore[union-attr]


def test_a_warn_line_the_bugs_releases_share_keeps_the_bug_a_candidate() -> None:
    at_85 = f"{H} graph/xml.h:85 NCCL WARN Attribute busid of node nic not found\n{H} NCCL INFO init.cc:1 -> 3\n"
    lead = lead_of(at_85)
    assert lead.code == "TD083" and "2.20.3" in lead.message and lead.evidence["cause"]["confidence"] == "candidates"  # type: ignore[index]
    # graph/xml.h prints it at :101 from 2.21.5: no release of the bug
    assert "2.20.3" not in lead_of(at_85.replace("xml.h:85", "xml.h:101")).message
    uds = f"{H} misc/ipcsocket.cc:57 NCCL WARN UDS: Binding to socket /tmp/nccl-socket-2-e6 failed : "
    uds += f"Address already in use (98)\n{H} NCCL INFO proxy.cc:1697 -> 2\n{H} NCCL INFO init.cc:1210 -> 2\n"
    uds += f"{H} NCCL INFO group.cc:64 -> 2 [Async thread]\n"
    assert "2.20.5" in lead_of(uds).message
    assert "2.20.5" not in lead_of(uds.replace("ipcsocket.cc:57", "ipcsocket.cc:58")).message


def test_the_launch_site_of_2_26_2_names_its_blackwell_bug_only_where_the_log_names_such_a_gpu() -> None:
    text = "enqueue.cc:1556 NCCL WARN Cuda failure 700 'an illegal memory access was encountered'\n"
    lead = lead_of(text)  # no GPU named: an earlier kernel's fault first, the workstation bug said with its GPUs
    assert lead.code == "TD057" and "earlier" in str(lead.evidence["candidates"][0])  # type: ignore[index]
    assert "2.26.2 on Blackwell workstation GPUs" in lead.fix
    on_5090 = "NCCL INFO Using devices\n  Rank  0 Group  0 Pid 1 on host device  0 [0x01] NVIDIA GeForce RTX 5090\n"
    named = lead_of(on_5090 + text)
    assert named.code == "TD083" and "NCCL 2.26.2" in named.message and "upgrade" in named.message


def test_2_31s_no_algorithm_wording_with_its_setting_on_the_next_line_names_the_setting() -> None:
    text = (
        "No algorithm/protocol nor symKernelId available for function Broadcast with datatype ncclInt8.\n"
        "NCCL_ALGO was set to allreduce:tree. NCCL_PROTO was set to Simple.\n"
        "torch.distributed.DistBackendError: NCCL error ... invalid usage\n"
    )
    lead = lead_of(text)
    assert lead.code == "TD077" and "NCCL_ALGO=allreduce:tree" in lead.message


def test_invalid_rank_said_without_its_numbers_is_still_the_world_size() -> None:
    lead = lead_of("NCCL error: Invalid rank requested\n")
    assert lead.code == "TD080" and "world size" in lead.message and "?" not in lead.message


def test_peer_access_in_cudas_words_alone_ranks_a_custom_all_reduce_first() -> None:
    bare = _candidates("peer access is not supported between two devices\n")
    assert bare.index("custom all-reduce") < bare.index("NCCL_P2P_DISABLE")
    ncclform = (
        f"{H} transport/p2p.cc:275 NCCL WARN Cuda failure 'peer access is not supported between these two devices'\n"
    )
    assert "custom all-reduce" not in lead_of(ncclform).message


def test_words_that_fit_several_causes_name_candidates() -> None:
    reg = _candidates("Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory\n")
    assert "locked-memory" in reg and "kernel" in reg
    watchdog = (
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12590, OpType=_ALLGATHER_BASE, "
        "NumelIn=1404928, NumelOut=2809856, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.\n"
    )
    assert "libnccl" in _candidates(watchdog)
    no_gpu = _candidates("[rank=0] RuntimeError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!\n")
    assert "CUDA_VISIBLE_DEVICES" in no_gpu and "LD_LIBRARY_PATH" in no_gpu
    ofi = "nccl_net_ofi_domain_get_ep:969 NCCL WARN NET/OFI Creating new endpoint for domain 0x7f9 failed: "
    ofi += "Invalid argument\n"
    found = [f for f in explained(ofi) if f.code == "TD084"]
    assert found and "FI_HMEM" in " ".join(map(str, found[0].evidence["candidates"]))  # type: ignore[arg-type]
