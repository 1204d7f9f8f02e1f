"""The eleventh blind sets (fixtures/diagnose/holdout11, holdout11b), scored once and now development sets: a run
of one GPU a node has no pair of a node in it (pairs across sockets are no cause); an HGX A100 4-GPU board's NV4 to
each of three peers is all its twelve links; a GeForce whose peer access the reporter says works (a patched driver)
is judged as P2P; DGX-1 is a V100 mesh, not an NVSwitch host."""

from __future__ import annotations

from conftest import FIXTURES
from tests_support_evidence import judged_with

from topodoctor.model.findings import Finding

SETS = FIXTURES / "diagnose"


def _case(name: str, *replace: tuple[str, str]) -> list[Finding]:
    return judged_with(SETS / ("holdout11b" if name.startswith("d11b") else "holdout11") / name, *replace)


def _serious(found: list[Finding]) -> list[str]:
    return [f.code for f in found if f.severity in ("warning", "error")]


def test_one_gpu_a_node_rules_out_the_sockets_pairs() -> None:
    found = _case("d11-02")  # mpirun -np 2 over two hosts, all_reduce_perf -g 1, on 6-GPU two-socket nodes
    assert "TD027" not in _serious(found) and _serious(found) == ["TD022"]
    assert "NCCL_DEBUG=INFO" in next(f.message for f in found if f.code == "TD022" and f.severity == "warning")
    # eight GPUs a process over the same two hosts: the sockets' pairs are in the run again
    assert "TD027" in [f.code for f in _case("d11-02", ("-g 1", "-g 6"))]


def test_nv4_to_three_peers_is_a_whole_a100_board() -> None:
    assert "TD031" not in [f.code for f in _case("d11-11")]
    # one peer short a link: the board does not add up to the model's twelve
    thin = _case("d11-11", ("GPU0\t X \tNV4", "GPU0\t X \tNV3"), ("GPU1\tNV4\t X ", "GPU1\tNV3\t X "))
    assert "TD031" in [f.code for f in thin]


def test_a_geforce_whose_p2p_the_reporter_says_works_is_judged_with_p2p() -> None:
    found = _case("d11b-08")  # 2 x RTX 4090 with tinygrad's P2P module, 20 GB/s
    assert not _serious(found) and any(f.code == "TD021" for f in found)
    assert "TD033" in _serious(_case("d11b-08", ("I am able to use P2P", "I am unable to use it")))


def test_dgx_1_is_no_nvswitch_host() -> None:
    found = _case("d11b-04")
    assert not [f for f in found if "fabric manager" in f.message or f.code == "TD986"]


def test_a_gpu_said_to_sit_on_a_narrow_old_link() -> None:
    found = [f for f in _case("d11b-06") if f.code == "TD995"]  # "GPU 1 on PCIe 2.0 x4", two RTX 3090
    assert len(found) == 1 and found[0].severity == "warning" and "PCIe 2.0 x4" in found[0].message
    assert "RTX 3090" in found[0].message
    # the card's own link said: nothing narrow
    assert not [f for f in _case("d11b-06", ("PCIe 2.0 ×4", "PCIe 4.0 x16")) if f.code == "TD995"]
