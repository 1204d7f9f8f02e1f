"""One grammar of NCCL's lines (topodoctor/nccl/grammar.py), on real output of several NCCL versions
(fixtures/nccl-logs/real: 2.4 - 2.29, posted in public threads; fixtures/nccl-logs/<variant>: 2.28.9
recorded here) and on NCCL's own format strings at its release tags, where the git mirror is here;
and the account's per-host fields (the whole transport, devices, GPUDirect RDMA per HCA) built on it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from conftest import FIXTURES

from topodoctor.core.codec import from_jsonable, to_jsonable
from topodoctor.model.nccl_account import NcclAccount
from topodoctor.nccl import grammar as g
from topodoctor.nccl.account import account, read_logs
from topodoctor.nccl.parse import parse_file
from topodoctor.nccl.variables import parse_version

REAL = FIXTURES / "nccl-logs" / "real"
LOGS = FIXTURES / "nccl-logs"
MIRROR = Path("/work/.mirror/NVIDIA+nccl/repo")


def _text(name: str) -> str:
    return (REAL / name).read_text(encoding="utf-8", errors="replace")


def _acc(name: str) -> NcclAccount:
    acc = account([_text(name)])
    assert acc is not None
    return acc


def test_the_line_shapes_of_several_versions() -> None:
    # 2.18.6 (azhpc-327), a scrubbed host: the prefix still parses, with no host
    line = "::16674:17023 [0] NCCL INFO NET/IB : Using [0]mlx5_an0:1/RoCE [RO]; OOB eth0:10.1.0.4<0>"
    assert (
        g.origin_host(line) == ""
        and g.info_message(line) == "NET/IB : Using [0]mlx5_an0:1/RoCE [RO]; OOB eth0:10.1.0.4<0>"
    )
    # pdsh's host before NCCL's own (nccl-1029, 2.19)
    pdsh = "rdma-test-gpu-worker-1: rdma-test-gpu-worker-1:2920:4501 [6] NCCL INFO Using network IBext"
    assert g.origin_host(pdsh) == "rdma-test-gpu-worker-1"
    # before 2.5: WARN and INFO without "NCCL" (nccl-tests-15, 2.2.13)
    old = _text("nccl-tests-15-pre25-connect-timed-out.log")
    assert g.OLD_INFO.search(old) and g.OLD_WARN.search(old) and not g.info_message(old.splitlines()[0] + "x")
    # 2.4's connection wordings: "Ring" for "Channel", SHM as "direct shared memory"
    ring = "gpu2-ru7:2144:2556 [2] NCCL INFO Ring 00 : 2[3d000] -> 3[3e000] via direct shared memory"
    m = g.CONN.match(g.info_message(ring) or "")
    assert m and (m["src"], m["dst"], m["src_dev"], m["via"]) == ("2", "3", "3d000", "direct shared memory")
    net24 = g.CONN.match("Ring 00 : 0 -> 1 [send] via NET/IB/0")  # 2.4's net.cc prints no devices
    assert net24 and (net24["side"], net24["via"]) == ("send", "NET/IB/0")


@pytest.mark.parametrize(
    ("log", "version"),
    [
        ("nccl-573-wsl2-sysfs-path.log", "2.7.8"),
        ("azhpc-327-graph-file-dev-not-found.log", "2.18.6"),
        ("nccl-tests-293-healthy-ib-sharp.log", "2.21.5"),
        ("nccl-tests-15-pre25-connect-timed-out.log", "2.2.13"),
    ],
)
def test_the_banner_of_each_version(log: str, version: str) -> None:
    assert version in " ".join(parse_file(log, _text(log)).versions)


def test_ib_devices_per_host_with_their_link_layer() -> None:
    acc = _acc("nccl-tests-293-healthy-ib-sharp.log")  # 2.21.5, two hosts, IB with SHARP
    assert {(d.host, d.net, d.name, d.port, d.layer) for d in acc.net_devices} == {
        ("test1", "IB", "mlx5_0", 1, "IB"),
        ("test2", "IB", "mlx5_0", 1, "IB"),
    }
    assert acc.networks == {"test1": "IBext_v8", "test2": "IBext_v8"}
    roce = _acc("imagereward-65-open-device-skipped.log")
    assert {d.name for d in roce.net_devices} == {"mlx5_1", "mlx5_18"} and {d.layer for d in roce.net_devices} == {
        "RoCE"
    }


def test_sockets_without_ib_say_so_per_host() -> None:
    acc = _acc("hybrik-47-invalid-rank-world-size.log")  # NET/IB : No device found, then NET/Socket
    host = "ued37c44e4ea65b"
    assert host in acc.ib_absent
    assert ("Socket", "enp1s0f0", "10.49.66.196") in {(d.net, d.name, d.address) for d in acc.net_devices}
    two = _acc("nccl-278-healthy-two-sockets.log")  # two hosts, two interfaces each
    assert {(d.host, d.name) for d in two.net_devices} >= {("sh-01", "enP1p1s0f0"), ("sh-03", "enP1p1s0f1")}


def test_a_plugins_network_is_named_as_printed() -> None:
    acc = _acc("aws-ofi-nccl-64-healthy-pattern-fallback.log")
    assert set(acc.networks.values()) == {"AWS Libfabric"}


def test_routes_keep_the_whole_transport_the_side_and_the_host() -> None:
    ib = _acc("nccl-1589-shm-attach-enoent.log")
    (net,) = [r for r in ib.routes if r.kind == "net"]
    assert (net.rank, net.peer, net.via, net.side, net.host, net.gdr) == (
        0,
        8,
        "NET/IB/9/GDRDMA/Shared",
        "send",
        "g148",
        True,
    )
    read = _acc("nccl-527-healthy-p2p-ipc-read.log")
    assert {r.via for r in read.routes} == {"P2P/IPC/read"} and {r.kind for r in read.routes} == {"p2p"}
    assert {c.transport for c in read.connections} == {"P2P/IPC"}  # the summary keeps its short label
    shm = _acc("nccl-290-posix-fallocate-horovod.log")  # 2.4: "via direct shared memory"
    assert {c.kind for c in shm.connections} == {"shm"}


def test_two_nodes_recorded_here_each_side_and_gdr_per_hca() -> None:
    acc = read_logs(LOGS / "two-nodes")
    assert acc is not None and acc.nodes == 2 and acc.local_ranks == 1
    sides = {(r.rank, r.peer, r.side) for r in acc.routes if r.via == "NET/Socket/0"}
    assert sides == {(0, 1, "send"), (1, 0, "receive"), (1, 0, "send"), (0, 1, "receive")}
    assert {r.via for r in acc.routes} == {"NET/Socket/0", "NET/Socket/0/Shared"}
    assert [(s.rank, s.cuda_dev, s.nvml_dev, s.bus_id) for s in acc.seats] == [(0, 0, 0, "60"), (1, 1, 1, "70")]
    every = read_logs(LOGS / "subsys-all")  # NCCL_DEBUG_SUBSYS=ALL prints NET's GPUDirect lines
    assert every is not None
    assert {(x.net, x.hca, x.name, x.enabled) for x in every.gdr_hcas} == {("Socket", "0", "eth0", False)}


def test_the_account_round_trips_through_json() -> None:
    acc = read_logs(LOGS / "two-nodes")
    assert acc is not None
    assert from_jsonable(NcclAccount, to_jsonable(acc)) == acc


def test_the_graphs_gpudirect_line_of_each_wording() -> None:
    # src/graph/paths.cc: 2.18 - 2.23 (bus id / HCA index or NET id), 2.24 - 2.28 (rank / NET id), 2.29 (ids, rank)
    lines = [
        "h:1:1 [0] NCCL INFO GPU Direct RDMA Disabled for GPU 1b000 / HCA 0 (distance 5 > 3)",
        "h:1:1 [0] NCCL INFO GPU Direct RDMA Enabled for GPU 3 / HCA 1b000 (distance 3 <= 3), read 1 mode Default",
        "h:1:1 [0] NCCL INFO GPU Direct RDMA Disabled for GPU/0-110592 (rank 2) - NET/0-1 (distance 5 > 3)",
    ]
    acc = account(["\n".join(lines)])
    assert acc is not None
    assert [(x.gpu, x.hca, x.enabled, x.rank) for x in acc.gdr_hcas] == [
        ("1b000", "0", False, None),
        ("3", "1b000", True, None),
        ("0-110592", "0-1", False, 2),
    ]


def test_a_paste_of_network_lines_alone_is_an_account() -> None:
    lines = [
        "node1:10:10 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'",
        "node1:10:10 [0] NCCL INFO NET/IB : GPU Direct RDMA Enabled for HCA 1 'mlx5_1'",
        "node2:11:11 [0] NCCL INFO NET/Socket : Using [0]bond0:10.0.0.2<0>",
    ]
    acc = account(["\n".join(lines)])
    assert acc is not None and acc.version is None
    assert {(x.host, x.name, x.enabled) for x in acc.gdr_hcas} == {
        ("node1", "mlx5_0", False),
        ("node1", "mlx5_1", True),
    }
    assert [(d.host, d.net, d.name) for d in acc.net_devices] == [("node2", "Socket", "bond0")]


# --- NCCL's own format strings, rendered, read back (where the mirror is here)

_ALWAYS = ("v2.18.1-1", "v2.30.7-1")
_FORMATS = {  # what to look for in src/ at each tag -> (the grammar's pattern, first and last release printing it)
    r'"Channel %02d/%01d : %d\[%[lx d]+\] -> %d\[%[lx d]+\] via P2P/IPC%s%s"': (g.CONN, *_ALWAYS),
    r'"Channel %02d : %d\[%[lx d]+\] -> %d\[%[lx d]+\] via SHM/': (g.CONN, *_ALWAYS),
    r'"Channel %02d/%d : %d\[%[lx d]+\] -> %d\[%[lx d]+\] \[send\] via NET/%s/%d%s': (g.CONN, *_ALWAYS),
    r'"NET/IB : Using%s %s; OOB %s:%s"': (g.IB_USING, *_ALWAYS),
    r'"NET/Socket : Using%s"': (g.NET_SOCKET_USING, *_ALWAYS),
    r'"Using network %s"': (g.NETWORK, *_ALWAYS),
    r"\"NET/%s : GPU Direct RDMA %s for HCA %d '%s'\"": (g.GDR, *_ALWAYS),
    # the graph's GPUDirect decision per GPU and NIC: bus id and HCA index, then rank and NET id
    r'"GPU Direct RDMA Disabled for GPU %lx / HCA %l?[dx]': (g.GDR, "v2.18.1-1", "v2.23.4-1"),
    r'"GPU Direct RDMA Disabled for GPU %d / HCA %lx': (g.GDR, "v2.24.3-1", "v2.28.9-1"),
    # 2.18 and 2.19 print no nNodes / localRanks line (only at TRACE, without them)
    r'"comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d': (g.COMM, "v2.20.3-1", "v2.30.7-1"),
}
_VALUES = {"%02d": "03", "%01d": "1", "%d": "2", "%lx": "1b000", "%x": "1b", "%p": "0x55d0", "%lld": "1"}


def _render(fmt: str) -> str:
    """A printf format of NCCL's with plain values: %s becomes a word of the kind the line holds."""
    words = iter(["IB", "/GDRDMA", "", "", "", ""])
    out = re.sub(r"%(?:02d|01d|lld|lx|x|p|d)", lambda m: _VALUES[m.group(0)], fmt)
    out = out.replace("Using%s %s", "Using [0]mlx5_0:1/IB [RO]").replace("Using%s", "Using [0]bond0:10.0.0.1<0>")
    out = out.replace("OOB %s:%s", "OOB eth0:10.0.0.1<0>").replace("'%s'", "'mlx5_0'")
    out = out.replace("%s for HCA", "Disabled for HCA").replace("SHM/%s/%s", "SHM/direct/direct")
    return re.sub(r"%s", lambda _: next(words), out)


@pytest.mark.skipif(not (MIRROR / "HEAD").exists(), reason="no NVIDIA/nccl git mirror here")
@pytest.mark.parametrize("tag", ["v2.18.1-1", "v2.22.3-1", "v2.24.3-1", "v2.28.9-1", "v2.29.2-1", "v2.30.7-1"])
def test_nccls_own_format_strings_read_back(tag: str) -> None:
    v = parse_version(tag)
    for pattern, (shape, since, until) in _FORMATS.items():
        out = subprocess.run(
            ["git", "-C", str(MIRROR), "grep", "-h", "-o", "-E", pattern + r"[^;]*", tag, "--", "src"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        fmts = [ln.split('"')[1] for ln in out.splitlines() if ln.count('"') >= 2]
        assert bool(fmts) == (parse_version(since) <= v <= parse_version(until)), (tag, pattern)
        for fmt in fmts:
            msg = _render(fmt)
            assert shape.search(msg), (tag, fmt, msg)
