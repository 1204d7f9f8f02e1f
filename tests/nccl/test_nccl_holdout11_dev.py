"""The eleventh blind sets (fixtures/nccl-logs/holdout11, holdout11b, holdout11c), scored once and now development
sets: NCCL 2.25 on a Blackwell workstation GPU is its known bug whatever the log shows; the link editor's words
for a build against NCCL; libibverbs missing while NCCL's sockets run over IPoIB; a first collective past its
timeout puts the GPUs' peer-to-peer path first."""

from __future__ import annotations

from conftest import FIXTURES

from topodoctor.model.findings import Finding
from topodoctor.nccl.explain import explain
from topodoctor.nccl.parse import parse_file

LOGS = FIXTURES / "nccl-logs"


def _explain(path: str, *replace: tuple[str, str]) -> list[Finding]:
    text = (LOGS / path).read_text()
    for old, new in replace:
        text = text.replace(old, new)
    return explain([parse_file(path, text)])


def test_nccl_2_25_on_an_rtx_5090_is_the_known_bug_even_cut_before_the_error() -> None:
    lead = _explain("holdout11/h11-004.log")[0]  # alltoall_perf on an RTX 5090, NCCL 2.25.1, cut at Init START
    assert lead.code == "TD083" and lead.severity == "error" and "2.26.2" in lead.message
    assert "RTX 5090" in lead.message
    # the fixed release, or another GPU, is no sign of it
    assert not [
        f for f in _explain("holdout11/h11-004.log", ("2.25.1+cuda12.4", "2.26.2+cuda12.4")) if f.code == "TD083"
    ]
    assert not [
        f for f in _explain("holdout11/h11-004.log", ("GeForce RTX 5090", "H100 80GB HBM3")) if f.code == "TD083"
    ]


def test_the_link_editor_missing_libnccl_or_its_symbols() -> None:
    lead = _explain("holdout11b/h11b-019.log")[0]  # building caffe2: libnccl.so.1 not found, undefined references
    assert lead.code == "TD085" and "libnccl.so.1" in lead.message and "LIBRARY_PATH" in lead.fix
    text = "/usr/bin/ld: build/libx.so: undefined reference to `ncclCommInitRank'\n"
    found = explain([parse_file("build.log", text)])
    assert found[0].code == "TD085" and "ncclCommInitRank" in found[0].message


def test_no_verbs_library_while_the_sockets_run_over_ipoib() -> None:
    found = _explain("holdout11c/h11c-016.log")  # Failed to open libibverbs, NET/Socket on ib0
    assert found[0].code == "TD050" and found[0].severity == "warning" and "libibverbs" in found[0].fix
    # the same over an Ethernet interface: a host without RDMA NICs, sockets are all there is
    assert not [f for f in _explain("holdout11c/h11c-016.log", ("ib0.", "eth0.")) if f.code == "TD050"]


def test_a_first_collective_past_its_timeout_names_peer_to_peer_first() -> None:
    lead = _explain("holdout11c/h11c-010.log")[0]  # BROADCAST, SeqNum=1, 600 s
    assert lead.code == "TD047"
    first = lead.evidence["candidates"][0]  # type: ignore[index]
    assert "NCCL_P2P_DISABLE=1" in first
    later = _explain("holdout11c/h11c-010.log", ("SeqNum=1,", "SeqNum=4512,"))[0]
    assert "NCCL_P2P_DISABLE" not in later.evidence["candidates"][0]  # type: ignore[index]
