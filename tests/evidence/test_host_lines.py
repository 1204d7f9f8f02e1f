"""lspci -vvv (links, ACS), kernel XID lines and the kernel's PCIe link reports."""

from __future__ import annotations

from evidence_support import EVIDENCE, ROOT, kinds, read

from topodoctor.evidence.inputs import read_input


def test_a100_device_block_cut_before_its_link_lines() -> None:
    got = read(EVIDENCE / "lspci-a100-link.txt")
    dev = got.parts[0].pcie[0]
    assert dev.bdf == "da:00.0" and "GA100" in dev.description
    assert dev.link_sta is None and dev.downgraded is None  # the paste ends before LnkSta: not shown


def test_a_downgraded_link_in_a_fragment_without_its_device_line() -> None:
    got = read(EVIDENCE / "lspci-downgraded-link-fragment.txt")
    assert len(got.pieces) == 1
    dev = got.parts[0].pcie[0]
    assert (dev.bdf, dev.link_cap, dev.link_sta, dev.downgraded) == ("", (5.0, 1), (2.5, 1), True)


def test_acs_lines_as_grep_leaves_them_one_function_each() -> None:
    text = (
        "$ sudo lspci -vvv | grep ACSCtl\n"
        "\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-\n"
        "\t\tACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
    )
    got = read_input("acs", text)
    acs = [p.acs_ctl for p in got.parts[-1].pcie]
    assert acs[0]["ReqRedir"] is True and acs[1]["ReqRedir"] is False and len(acs) == 2


def test_xid_lines_among_other_kernel_lines() -> None:
    got = read(EVIDENCE / "xid-journal-h100.txt")
    assert [p.kind for p in got.pieces] == ["kernel-xid"]
    xids = got.parts[0].xids
    assert [(x.code, x.bus_id) for x in xids] == [
        (45, "0000:dc:00.0"), (45, "0000:ed:00.0"), (45, "0000:ba:00.0"), (45, "0000:97:00.0"), (79, "0000:44:00.0"),
    ]  # fmt: skip
    assert xids[-1].text == "GPU has fallen off the bus"


def test_acs_lines_of_a_grep_with_redirect_on_some_bridges() -> None:
    got = read(EVIDENCE / "lspci-acsctl-grep-enabled-bridges.txt")
    funcs = got.parts[-1].pcie
    assert len(funcs) == 12 and all(f.bdf == "" for f in funcs)
    assert [f.acs_ctl["ReqRedir"] for f in funcs].count(True) == 5


def test_kernel_link_report_limited_by_a_gen4_port_above_gen5_gpus() -> None:
    """The boot messages of a node whose Gen5 GPUs sit behind Gen4 switches (fixtures/diagnose/real/
    h100-behind-gen4-switch-dmesg, from stas00/ml-engineering compute/accelerator/nvidia/debug.md), as
    `dmesg | grep 'limited by'` leaves them with a `[...]` between."""
    got = read(ROOT / "fixtures/diagnose/real/h100-behind-gen4-switch-dmesg/evidence-1.txt")
    assert kinds(got) == ["kernel-pcie-link"]
    funcs = got.parts[0].pcie
    assert [(f.bdf, f.limited_at) for f in funcs] == [
        ("0000:04:00.0", "0000:01:00.0"),
        ("0000:8b:00.0", "0000:87:00.0"),
    ]
    f = funcs[0]
    assert (f.link_sta, f.link_cap, f.downgraded) == ((16.0, 16), (32.0, 16), True)
    assert (f.available_gbit_s, f.capable_gbit_s) == (252.048, 504.112)


def test_kernel_link_reports_in_syslog_and_among_other_boot_lines() -> None:
    """A syslog line with the kernel's own time inside (openwrt/openwrt#24642) and a GPU's upstream
    bridge on a Raspberry Pi among enumeration lines (geerlingguy/raspberry-pi-pcie-devices#712); the
    plain form of a NIC driver at probe (a linux-rdma thread: mlx5_core, Gen3 x16)."""
    text = (
        "Wed Aug 12 17:30:58 2026 kern.info kernel: [    3.027370] pci 0003:01:00.0: 7.876 Gb/s available PCIe "
        "bandwidth, limited by 8.0 GT/s PCIe x1 link at 0003:00:00.0 (capable of 15.752 Gb/s with 8.0 GT/s PCIe x2 "
        "link)\n"
        "[    0.499735] pci 0000:01:00.0: PME# supported from D0 D3hot D3cold\n"
        "[    0.499779] pci 0000:01:00.0: 7.876 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x1 link at "
        "0000:00:00.0 (capable of 126.016 Gb/s with 8.0 GT/s PCIe x16 link)\n"
        "[    0.511598] pci 0000:01:00.0: bridge configuration invalid ([bus 00-00]), reconfiguring\n"
        "[    9.843126] mlx5_core 0000:02:00.0: 126.016 Gb/s available PCIe bandwidth (8.0 GT/s PCIe x16 link)\n"
    )
    got = read_input("boot.log", text)
    assert kinds(got) == ["kernel-pcie-link"] and got.pieces[0].first_line == 1 and got.pieces[0].last_line == 5
    a, b, nic = got.parts[0].pcie
    assert (a.bdf, a.link_sta, a.link_cap) == ("0003:01:00.0", (8.0, 1), (8.0, 2))
    assert (b.limited_at, b.link_sta, b.link_cap) == ("0000:00:00.0", (8.0, 1), (8.0, 16))
    assert (nic.description, nic.link_sta, nic.downgraded, nic.limited_at) == ("driver mlx5_core", (8.0, 16), False, "")


def test_kernel_link_report_of_older_kernels_and_an_unknown_limit() -> None:
    """Kernels 4.17-4.x print the speed without ".0" and "PCIe" (PCIE_SPEED2STR: "8 GT/s"), and
    "<unknown>" where no limiting device was found; a line cut before its close is not read."""
    text = (
        "nvidia 0000:04:00.0: 31.504 Gb/s available PCIe bandwidth, limited by 8 GT/s x4 link at <unknown> "
        "(capable of 126.016 Gb/s with 8 GT/s x16 link)\n"
        "pci 0000:05:00.0: 31.504 Gb/s available PCIe bandwidth, limited by 8 GT/s x4 link at 0000:00:01.0 (capab\n"
    )
    got = read_input("old.log", text)
    (f,) = got.parts[0].pcie
    assert (f.bdf, f.description, f.limited_at, f.link_sta, f.link_cap) == (
        "0000:04:00.0", "driver nvidia", "", (8.0, 4), (8.0, 16)
    )  # fmt: skip


def test_a_kernel_link_line_past_any_kernel_length_is_not_read() -> None:
    """A line of the kernel's shape padded past 1000 characters is not the kernel's (bounded work per line)."""
    line = "[    9.8] mlx5_core 0000:02:00.0: 126.016 Gb/s available PCIe bandwidth (8.0 GT/s PCIe x16 link)"
    assert kinds(read_input("k", line + "\n")) == ["kernel-pcie-link"]
    assert not read_input("k", line + " " * 1000 + "x\n").pieces
