"""The INFO lines that tell one cause of a failure class from another, read out of a file's NCCL lines
as ``Sign``s (the shapes are ``nccl.grammar``'s): the GID index and GID each RoCE queue pair uses
(net_ib; an InfiniBand port's LID instead), the SHM transport's host buffers a local peer imported
through cuMem or as a /dev/shm file, cuMem host memory NCCL found not working, the network plugin
loaded (or none, NCCL's own), the aws-ofi-nccl provider, one process that drives several GPUs, a
failure in a communicator's destroy (``commReclaim``, a WARN), libibverbs not loaded, the address each host's
sockets use, and network connections that run without GPUDirect RDMA. Text in, plain data out; ``nccl.log_signs``
judges them."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Sequence

from topodoctor.nccl import grammar as g
from topodoctor.nccl.logfile import LogFile, Sign

MAX_SIGNS = 64  # a QP line per channel and peer: the first few name every GID in use
# NCCL's lines that name the address its sockets use: Bootstrap and NET/Socket (2.3+), "NET : Using interface" (2.2)
_ADDRESS_LINE = re.compile(r"(?:Bootstrap|NET/Socket|NET) : Using (?:interface )?\[?")


def gid_address(prefix_hex: str, iid_hex: str) -> str:
    """The GID net_ib prints as two host-order 64-bit words (x86: little-endian) as an address:
    ``0/B9D4E80AFFFF0000`` -> ``::ffff:10.232.212.185``, ``80FE/...`` -> ``fe80::...``."""
    raw = int(prefix_hex, 16).to_bytes(8, "little") + int(iid_hex, 16).to_bytes(8, "little")
    addr = ipaddress.IPv6Address(raw)
    return f"::ffff:{addr.ipv4_mapped}" if addr.ipv4_mapped else str(addr)


def _sign(msg: str) -> tuple[str, str] | None:
    """(kind, value) of one INFO message that is a sign; None for any other."""
    if "GID" in msg and (m := g.GID_IN_USE.search(msg)):
        return "gid", f"{m['index']} {gid_address(m['prefix'], m['iid'])}"
    if "LID" in msg and (m := g.QP_LID.search(msg)):
        return "ib-lid", ""  # once per host: an InfiniBand port, no GID to choose
    if "imported shareable" in msg:
        if m := g.CUMEM_IMPORT.search(msg):
            return "cumem-import", ""  # once per host: the first line is the one quoted
        if m := g.MMAP_IMPORT.search(msg):
            return "mmap-import", ""
    if "cuMem host" in msg and g.CUMEM_HOST_FAILS.search(msg):
        return "cumem-host-fails", ""
    if "NET/Plugin" in msg:
        if m := g.NET_PLUGIN.search(msg):
            return "net-plugin", m["name"]
        if g.NO_NET_PLUGIN.search(msg):
            return "no-net-plugin", ""
    if "NET/OFI" in msg and (m := g.OFI_PROVIDER.search(msg)):
        return "ofi-provider", m["provider"]
    return None


def read_signs(lines: Iterable[str]) -> tuple[Sign, ...]:
    """Every sign of a file's NCCL lines, once per kind, host and value, in the order first seen."""
    out: dict[tuple[str, str, str], Sign] = {}
    devices: dict[tuple[str, str], set[str]] = {}  # (host, pid) -> the CUDA devices its lines name
    for line in lines:
        if "Using" in line and (o := g.ORIGIN.search(line)) and _ADDRESS_LINE.search(line):
            for d in g.SOCK_IF.finditer(line, o.end()):  # the address each host's NCCL sockets bind (any version)
                key = ("host-address", o["host"], f"{d['name']} {d['addr']}")
                if key not in out and len(out) < MAX_SIGNS:
                    out[key] = Sign(*key, line[o.end() :].strip()[:200])
        if "Failed to open libibverbs" in line:  # ibvwrap / ibvsymbols, at INFO or WARN: no verbs, so no NET/IB
            out.setdefault(("no-verbs", "", ""), Sign("no-verbs", g.origin_host(line), "", line.strip()[:200]))
        msg = g.info_message(line)
        if msg is None:
            if "commReclaim" in line and (w := g.WARN.search(line)):  # init.cc: a failure in destroy / abort
                out.setdefault(("at-destroy", "", ""), Sign("at-destroy", g.origin_host(line), "", w["msg"][:200]))
            continue
        if (o := g.ORIGIN.search(line)) and len(devices.setdefault((o["host"], o["pid"]), set())) < 2:
            devices[(o["host"], o["pid"])].add(o["dev"])
        if (found := _sign(msg)) is None:
            continue
        host = g.origin_host(line)
        if (found[0], host, found[1]) not in out and len(out) < MAX_SIGNS:
            out[(found[0], host, found[1])] = Sign(found[0], host, found[1], msg.strip()[:200])
    # one process of several GPUs shares its SHM buffers as /dev/shm files by design (shm.cc's "legacy")
    for (host, pid), devs in devices.items():
        if len(devs) > 1:
            out[("multi-gpu-process", host, pid)] = Sign("multi-gpu-process", host, pid, f"process {pid} drives GPUs")
            break
    return tuple(out.values())


def context_signs(files: Sequence[LogFile]) -> tuple[Sign, ...]:
    """The signs of every file, and ``no-gdrdma`` where the files show network connections and none
    of them runs GPUDirect RDMA (no ``/GDRDMA`` in any ``via NET/...``), or, without connections, NCCL's
    ``GPU Direct RDMA Disabled for ...`` for every HCA and GPU it names and Enabled for none."""
    signs = tuple(dict.fromkeys(s for f in files for s in f.signs))
    gdr = [f.account.gdr for f in files if f.account and f.account.gdr is not None]
    if not gdr:
        gdr = [h.enabled for f in files if f.account for h in f.account.gdr_hcas]
    if gdr and not any(gdr):
        signs += (Sign("no-gdrdma", "", "", "every network connection runs without GDRDMA"),)
    return signs


# `df -h`'s row of /dev/shm as a post pastes it: "shm  64M  20M  45M  31% /dev/shm" (docker's default size)
_SHM_ROW = re.compile(r"^\s*\S+\s+(?P<size>\d+(?:\.\d+)?[KMGT])i?\s+\S+\s+\S+\s+\d+%\s+/dev/shm\s*$")
_SCALE = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def shm_rows(lines: Iterable[str]) -> tuple[Sign, ...]:
    """The /dev/shm sizes the pasted `df` rows show, as ``shm-size`` signs (value: bytes), the first of each."""
    out: dict[str, Sign] = {}
    for line in lines:
        if "/dev/shm" in line and (m := _SHM_ROW.match(line)):
            size = str(int(float(m["size"][:-1]) * _SCALE[m["size"][-1]]))
            out.setdefault(size, Sign("shm-size", "", size, line.strip()[:200]))
    return tuple(out.values())


# a pasted `pip list`, `pip freeze` or conda listing's NCCL wheel: "nvidia-nccl-cu11   2.14.3",
# "nvidia-nccl-cu12==2.18.1"
_WHEEL_ROW = re.compile(r"^\s*(?P<wheel>nvidia-nccl-cu\d+)\s*(?:==|\s)\s*(?P<v>\d+\.\d+\.\d+)")


def nccl_wheels(lines: Iterable[str]) -> tuple[Sign, ...]:
    """The NCCL wheels a pasted package listing shows, as ``nccl-wheel`` signs (value: "wheel version")."""
    out: dict[str, Sign] = {}
    for line in lines:
        if "nvidia-nccl" in line and (m := _WHEEL_ROW.match(line)):
            out.setdefault(m["wheel"], Sign("nccl-wheel", "", f"{m['wheel']} {m['v']}", line.strip()[:200]))
    return tuple(out.values())
