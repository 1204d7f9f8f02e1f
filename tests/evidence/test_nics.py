"""ibstat, ibstatus and ethtool read into NIC ports: name, port, state, rate, link layer, adapter type."""

from __future__ import annotations

from evidence_support import EVIDENCE, kinds, only, read

from topodoctor.evidence.inputs import read_input


def test_ibstatus_in_a_fence_each_port_and_the_one_cut_inside_its_rate() -> None:
    got = read(EVIDENCE / "ibstatus-hdr-ports-cut.txt")
    nics = got.parts[only(got, "nic-status")].nics
    assert [(n.name, n.port, n.state, n.rate_gbps, n.link_layer) for n in nics[:3]] == [
        ("mlx5_0", 1, "ACTIVE", 200.0, "IB"),
        ("mlx5_1", 1, "ACTIVE", 200.0, "IB"),
        ("mlx5_2", 1, "ACTIVE", 200.0, "IB"),
    ]  # fmt: skip
    last = nics[3]
    assert (last.name, last.rate_gbps, last.link_layer, last.rate_text) == ("mlx5_3", 40.0, "", "40 Gb/sec (4")


def test_ibstat_of_one_connectx7_after_an_elision() -> None:
    got = read(EVIDENCE / "ibstat-cx7-ndr-one-ca.txt")
    assert "nic-status" in kinds(got)
    (n,) = got.parts[only(got, "nic-status")].nics
    assert (n.name, n.ca_type, n.port, n.state, n.rate_gbps, n.link_layer) == (
        "mlx5_5",
        "MT4129",
        1,
        "ACTIVE",
        400.0,
        "IB",
    )


def test_ibstat_of_roce_ports_one_down_and_one_cut_before_its_port() -> None:
    got = read(EVIDENCE / "ibstat-roce-gb10-port-down.txt")
    nics = got.parts[only(got, "nic-status")].nics
    assert [(n.name, n.state, n.rate_gbps, n.link_layer) for n in nics] == [
        ("roceP2p1s0f0", "ACTIVE", 200.0, "RoCE"), ("roceP2p1s0f1", "DOWN", 40.0, "RoCE"),
        ("rocep1s0f0", "ACTIVE", 200.0, "RoCE"),
    ]  # fmt: skip


def test_ethtool_speed_in_mb_s_and_link_detected() -> None:
    # ethtool's own layout (ethtool.c dump_link_usettings / dump_link_caps): "Settings for IF:", tab-indented keys
    text = "Settings for ens1f0np0:\n\tSupported ports: [ FIBRE ]\n\tSpeed: 25000Mb/s\n\tDuplex: Full\n"
    text += "\tLink detected: yes\n"
    got = read_input("x", text)
    (n,) = got.parts[0].nics
    assert (got.pieces[0].kind, n.name, n.rate_gbps, n.state, n.link_layer) == (
        "nic-status",
        "ens1f0np0",
        25.0,
        "ACTIVE",
        "Ethernet",
    )


def test_a_ca_line_without_ibstat_s_fields_is_not_ibstat() -> None:
    got = read_input("x", "CA 'mlx5_0'\nsomething else\n")
    assert got.unreadable


def test_ibv_devinfo_verbose_rate_from_width_and_speed_and_a_port_down() -> None:
    """As ibv_devinfo -v prints each device (hca_id, then tab-indented port blocks with active_width and
    active_speed, the speed as Gbps with its code): 4X x 50 Gbps is HDR's 200."""
    text = (
        "hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tvendor_part_id:\t\t\t4123\n\tphys_port_cnt:\t\t\t1\n"
        "\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tactive_width:\t\t4X (2)\n"
        "\t\t\tactive_speed:\t\t50.0 Gbps (64)\n\t\t\tlink_layer:\t\tInfiniBand\n\n"
        "hca_id:\tmlx5_1\n\tvendor_part_id:\t\t\t4123\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_DOWN (1)\n"
        "\t\t\tactive_width:\t\t4X (2)\n\t\t\tactive_speed:\t\t2.5 Gbps (1)\n\t\t\tlink_layer:\t\tInfiniBand\n"
    )
    got = read_input("x", text)
    assert [(n.name, n.ca_type, n.state, n.rate_gbps, n.link_layer) for n in got.parts[0].nics] == [
        ("mlx5_0", "MT4123", "ACTIVE", 200.0, "IB"),
        ("mlx5_1", "MT4123", "DOWN", 10.0, "IB"),
    ]


def test_perftest_s_average_over_its_device() -> None:
    got = read(EVIDENCE / "ib-write-bw-roce-bond-gbits.txt")
    (n,) = got.parts[only(got, "nic-status")].nics
    assert (n.name, n.link_layer, n.measured_gbps, n.rate_gbps) == ("mlx5_bond_1", "RoCE", 184.94, None)


def test_a_bare_perftest_table_takes_its_device_from_the_label_above() -> None:
    text = (
        "GPU0 + rdmap85s0:\n" + "-" * 60 + "\n"
        " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
        " 8192       30000            174.57             171.50               2.616955\n" + "-" * 60 + "\n"
    )
    got = read_input("paste.txt", text)
    (n,) = got.parts[only(got, "nic-status")].nics
    assert (n.name, n.measured_gbps) == ("rdmap85s0", 171.5)
    far = read_input("paste.txt", text.replace("GPU0 + rdmap85s0:\n", "GPU0 + rdmap85s0:\n\n\n\n\n"))
    (unnamed,) = far.parts[only(far, "nic-status")].nics  # a label farther up is not this table's
    assert unnamed.name != "rdmap85s0" and unnamed.measured_gbps == 171.5
