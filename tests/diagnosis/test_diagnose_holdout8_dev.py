"""The eighth blind set (fixtures/diagnose/holdout8), scored once and now a development set: the classes its
misses showed, each on its case and on a near miss built from the same words."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judge

from topodoctor.evidence.inputs import join, read_input
from topodoctor.model.findings import Finding

SET = FIXTURES / "diagnose" / "holdout8"
TOPO = (SET / "d8-05" / "evidence-1.txt").read_text()  # 8 x A40 in NVLink pairs, two NICs each under a switch


def _findings(text: str) -> list[Finding]:
    return list(judge(join([read_input("post.txt", text)])))


def test_gdr_that_will_not_come_on_names_the_peer_memory_module_first() -> None:
    found = [f for f in _findings(TOPO) if f.code == "TD026"]
    assert len(found) == 1 and found[0].severity == "warning"
    msg = found[0].message
    assert msg.index("nvidia_peermem") < msg.index("NCCL_NET_GDR_LEVEL") < msg.index("ACS")
    assert "GPU0, GPU1, GPU4, GPU5" in msg and "GPU2, GPU3, GPU6, GPU7 share a PCIe switch" in msg


def test_gdr_spoken_of_as_working_asks_nothing() -> None:
    text = TOPO.replace("I have a problem with enabling GDR for my NIC.", "GDR is enabled for my NIC and works.")
    assert not [f for f in _findings(text) if f.code == "TD026"]


def test_a_log_showing_gdr_in_use_answers_the_question() -> None:
    log = "node1:1:1 [2] NCCL INFO Channel 00/0 : 2[2] -> 10[2] [send] via NET/IB/0/GDRDMA\n"
    assert not [f for f in _findings(TOPO + "\n" + log) if f.code == "TD026"]


def test_a_rig_reports_power_cap_is_the_warning() -> None:
    found = [f for f in _findings((SET / "d8-17" / "evidence-1.txt").read_text()) if f.code == "TD992"]
    assert len(found) == 1 and "250 W" in found[0].message and "370 W" in found[0].message


def test_a_post_of_gpus_left_idle_is_read_and_asked_about() -> None:
    found = _findings((SET / "d8-08" / "evidence-1.txt").read_text())
    assert found and all(f.severity == "info" for f in found)
    assert any("topo -m" in f.fix for f in found)
    assert not _findings("the job was slow yesterday, I think the GPU is underutilized\n")  # no GPUs said: not read
