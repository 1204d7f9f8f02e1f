"""nvidia-smi's short outputs: -L, nvlink -s, nvlink -e and the plain table."""

from __future__ import annotations

from evidence_support import EVIDENCE, only, read

from topodoctor.evidence.inputs import read_input


def test_h200_x4_host_capture_holds_every_short_output() -> None:
    got = read(EVIDENCE / "h200-x4" / "host.txt")
    summary = got.parts[only(got, "smi-summary")]
    assert (summary.driver_version, summary.cuda_version) == ("580.159.04", "13.0")
    first = summary.gpus[0]
    assert (first.index, first.name, first.bus_id) == (0, "NVIDIA H200", "00000000:00:06.0")
    status = got.parts[only(got, "nvlink-status")]
    assert [(g.nvlinks_up, g.nvlinks_listed, g.nvlink_gbps) for g in status.gpus] == [(18, 18, 26.562)] * 4
    errors = got.parts[only(got, "nvlink-errors")]
    assert errors.gpus[0].nvlink_errors == {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}


def test_inactive_links_are_listed_but_not_up() -> None:
    got = read(EVIDENCE / "nvlink-status-v100-inactive.txt")
    gpu = got.parts[0].gpus[0]
    assert (gpu.index, gpu.name, gpu.nvlinks_up, gpu.nvlinks_listed, gpu.nvlink_gbps) == (
        3, "Tesla V100-SXM2-32GB", 4, 6, 25.781,
    )  # fmt: skip


def test_gb200_listing_cut_after_two_links_of_the_second_gpu() -> None:
    got = read(EVIDENCE / "nvlink-status-gb200.txt")
    assert [(g.nvlinks_up, g.nvlink_gbps) for g in got.parts[0].gpus] == [(18, 53.125), (2, 53.125)]
    assert (
        got.pieces[0].cut
        == "GPU 1 lists 2 of the 18 links the others list; the paste leaves lines out after GPU 1 (...)"
    )


def test_plain_table_pasted_without_its_banner() -> None:
    got = read(EVIDENCE / "smi-summary-a100-driver535-cut.txt")
    assert [g.bus_id for g in got.parts[0].gpus] == ["00000000:2A:00.0", "00000000:51:00.0", "00000000:57:00.0"]
    assert "below the banner" in got.pieces[0].cut
    assert got.pieces[0].cut.endswith("the table ends inside the rows of GPU 4")  # its first row is cut


def test_gpu_list_of_eight() -> None:
    got = read(EVIDENCE / "h200-x8" / "host.txt")
    part = got.parts[only(got, "smi-list")]
    assert [g.index for g in part.gpus] == list(range(8))
    assert part.gpus[7].uuid == "GPU-00000000-0000-0000-0000-000000000012"
    assert part.gpus[0].nvlinks_up is None  # -L says nothing of the links: not shown, not zero


def test_gpu_list_with_mig_devices_is_one_listing() -> None:
    text = (
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5d5ba0d6-d33d-2b2c-524d-9e3d8d2b8a77)\n"
        "  MIG 1g.5gb      Device  0: (UUID: MIG-c6d4f1ef-42e4-5de3-91c7-45d71c87eb3f)\n"
        "  MIG 1g.5gb      Device  1: (UUID: MIG-cba663e8-9bed-5b25-b243-5985ef7c9beb)\n"
        "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-4b5b0e1c-2b4d-4d55-a6a6-28f2b6b0e4c2)\n"
    )
    got = read_input("mig", text)
    assert [p.kind for p in got.pieces] == ["smi-list"] and [g.index for g in got.parts[0].gpus] == [0, 1]
