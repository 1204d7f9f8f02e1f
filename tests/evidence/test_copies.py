"""p2pBandwidthLatencyTest and nvbandwidth (text and -j JSON) read into copy matrices."""

from __future__ import annotations

import pytest
from evidence_support import EVIDENCE, kinds, only, read


def test_h200_x4_p2p_test_all_six_matrices_and_the_cpu_latencies() -> None:
    got = read(EVIDENCE / "h200-x4" / "p2pbw.txt")
    part = got.parts[only(got, "p2p-bandwidth-latency")]
    names = [c.testcase for c in part.copies]
    assert names == [
        "unidirectional p2p=disabled", "unidirectional p2p=enabled", "bidirectional p2p=disabled",
        "bidirectional p2p=enabled", "latency p2p=disabled", "latency p2p=disabled CPU",
        "latency p2p=enabled", "latency p2p=enabled CPU",
    ]  # fmt: skip
    one = part.copies[1]
    assert (one.direction, one.p2p, one.unit, one.values[0][1]) == ("unidirectional", True, "GB/s", 361.60)
    lat = part.copies[4]
    assert (lat.unit, lat.values[0][1]) == ("us", 18.62)
    assert [g.bus_id for g in part.gpus] == [
        "00000000:00:06.0",
        "00000000:00:07.0",
        "00000000:00:08.0",
        "00000000:00:09.0",
    ]
    assert got.pieces[0].cut == ""


def test_a_pair_of_consumer_gpus_cut_in_its_last_matrix() -> None:
    got = read(EVIDENCE / "p2pbw-rtx4090-pair.txt")
    assert kinds(got) == ["command-line", "p2p-bandwidth-latency"]
    part = got.parts[1]
    assert part.copies[1].values == ((1015.27, 6.60), (6.60, 945.63))
    assert got.pieces[1].cut == "4 of the 6 matrices (the output is cut)"
    assert part.gpus[1].bus_id == "00000000:17:00.0"  # pciBusID is hex


def test_a_paste_from_the_middle_and_p2p_reads_matrices() -> None:
    mid = read(EVIDENCE / "p2pbw-rtx3090-starts-mid-matrix.txt")
    assert [c.testcase for c in mid.parts[0].copies] == ["bidirectional p2p=enabled", "latency p2p=disabled"]
    assert len(mid.parts[0].copies[1].rows) == 7 and "starts after" in mid.pieces[0].cut
    reads = read(EVIDENCE / "p2pbw-six-gpus-p2p-reads.txt")
    assert [c.testcase for c in reads.parts[0].copies][-1] == "unidirectional p2p=enabled reads"


def test_nvbandwidth_v0_8_every_testcase_of_h200_x8() -> None:
    got = read(EVIDENCE / "h200-x8" / "nvb.txt")
    part = got.parts[only(got, "nvbandwidth")]
    assert got.pieces[0].version == "v0.8" and part.driver_version == "580.159.04" and part.cuda_version == "13.0"
    read_ce = part.copies[0]
    assert read_ce.testcase == "device_to_device_memcpy_read_ce" and read_ce.values[0][0] is None
    assert len(read_ce.rows) == 8 and read_ce.sum_gbps is not None
    bidir = [c.testcase for c in part.copies if "bidirectional" in c.testcase and c.testcase.startswith("device")]
    assert {
        "device_to_device_bidirectional_memcpy_read_ce_read1",
        "device_to_device_bidirectional_memcpy_read_ce_total",
    } <= set(bidir)


def test_nvbandwidth_v0_2_host_copies_without_bus_ids_cut_in_a_row() -> None:
    got = read(EVIDENCE / "nvbandwidth-v0.2-rtx4090-host.txt")
    part = got.parts[0]
    h2d = part.copies[0]
    assert (h2d.rows, h2d.columns[-1], h2d.values[0][0], h2d.sum_gbps) == (("host",), "7", 25.50, 205.04)
    assert [g.name for g in part.gpus] == ["NVIDIA GeForce RTX 4090"] * 8 and part.gpus[0].bus_id == ""
    assert "host_to_device_bidirectional_memcpy_ce is cut" in got.pieces[0].cut


def test_nvbandwidth_quoted_in_markdown_and_without_its_header_line() -> None:
    got = read(EVIDENCE / "nvbandwidth-quoted-h100-sm.txt")
    assert [c.testcase for c in got.parts[0].copies] == ["host_to_device_memcpy_sm", "device_to_host_memcpy_sm"]
    assert got.parts[0].copies[1].values[0][0] == 52.77


def test_nvbandwidth_json_holds_the_same_figures_as_its_text() -> None:
    text = read(EVIDENCE / "h200-x4" / "nvb.txt").parts[0].copies
    doc = read(EVIDENCE / "h200-x4" / "nvb.json")
    assert kinds(doc) == ["nvbandwidth"] and doc.pieces[0].version == "v0.8"
    js = {c.testcase: c for c in doc.parts[0].copies}
    for c in text:
        assert js[c.testcase].values == c.values, c.testcase
    assert js["device_to_device_memcpy_read_ce"].sum_gbps == pytest.approx(4728.40, abs=0.1)


def test_peer_access_answers_of_mixed_gpus_cut_before_any_matrix() -> None:
    got = read(EVIDENCE / "p2pbw-mixed-consumer-gpus-cut.txt")
    part = got.parts[only(got, "p2p-bandwidth-latency")]
    access = {(p.a, p.b): p.p2p["can-access-peer"] for p in part.pairs}
    assert (
        access[("cuda0", "cuda1")] == "yes"
        and access[("cuda0", "cuda2")] == "no"
        and access[("cuda2", "cuda3")] == "yes"
    )
    assert len(access) == 18 and got.pieces[-1].cut == "no matrix"
    assert [g.name for g in part.gpus][4] == "NVIDIA RTX A6000" and part.gpus[5].bus_id == "00000000:0D:00.0"


def test_nvbandwidth_json_device_list() -> None:
    got = read(EVIDENCE / "h200-x4" / "nvb.json")
    assert [(g.index, g.bus_id, g.host) for g in got.parts[0].gpus][3] == (3, "00000000:00:09.0", "vm")


def test_nvbandwidth_waiving_a_peer_testcase_says_no_pair_has_peer_access() -> None:
    # nvbandwidth v0.2 on two GeForce RTX 2080 Ti (https://github.com/NVIDIA/nvbandwidth/issues/13): testcase.h
    # waives device_to_device_* when filterHasAccessiblePeerPairs() finds no pair cuDeviceCanAccessPeer allows
    text = """$ ./nvbandwidth -t device_to_device_memcpy_write_ce
nvbandwidth Version: v0.2
Built from Git version: 6cefdda

NOTE: This tool reports current measured bandwidth on your system.
Additional system-specific tuning may be required to achieve maximal peak bandwidth.

CUDA Runtime Version: 12010
CUDA Driver Version: 12000
Driver Version: 525.125.06

Device 0: NVIDIA GeForce RTX 2080 Ti
Device 1: NVIDIA GeForce RTX 2080 Ti

Waiving device_to_device_memcpy_write_ce.
"""
    from topodoctor.evidence.inputs import read_input

    got = read_input("x", text)
    k = [p.kind for p in got.pieces].index("nvbandwidth")
    assert [(p.a, p.b, p.p2p) for p in got.parts[k].pairs] == [("cuda0", "cuda1", {"can-access-peer": "no"})]
    assert got.pieces[k].cut == "no testcase ran (device_to_device_memcpy_write_ce waived)"
