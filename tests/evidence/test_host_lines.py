"""lspci -vvv (links, ACS) and kernel XID lines."""

from __future__ import annotations

from evidence_support import EVIDENCE, read

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
