"""The GIDs a user pasted beside a log: Mellanox's `show_gids` table, `ibv_devinfo -v`'s ``GID[ 3]:``
lines and a sentence that names a GID index with its RoCE version or address ("GID index 3 is RoCE
v2", "gid index 0 is the link-local fe80 one"). Each becomes a ``gid-listed`` sign: the index, the
GID (``fe80::...``, ``::ffff:10.0.1.2``, or ``link-local``) and the RoCE version where the line says it.
What they list is what the port offers, not what NCCL used: ``nccl.log_signs`` reads the entry of the
index the log shows forced. Text in, plain data out."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

from topodoctor.nccl.logfile import Sign

MAX_LISTED = 64  # a host's GID table: every port's few entries
# show_gids: DEV PORT INDEX GID IPv4 VER DEV (the GID written out in eight groups of four)
_SHOW_GIDS = re.compile(
    r"^\s*(?P<dev>[\w.-]+)\s+\d+\s+(?P<index>\d+)\s+(?P<gid>[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7})\s+"
    r"(?:\d+\.\d+\.\d+\.\d+\s+)?(?P<ver>v[12])\b"
)
# ibv_devinfo -v: "GID[  3]:   ::ffff:10.0.1.2, RoCE v2" (rdma-core 28+), "GID[  0]:  fe80:0000:..." (older)
_DEVINFO = re.compile(r"GID\[\s*(?P<index>\d+)\]:\s+(?P<gid>[0-9a-fA-F:.]{6,})(?:,\s*RoCE\s*(?P<ver>v[12]))?")
# a sentence: "GID index 3 is RoCE v2", "gid_index=0 (fe80::...)", "GID index 1 is link-local"
_PROSE = re.compile(
    r"(?i)\bgid[ _-]?index\s*(?:is|=|:|of)?\s*(?P<index>\d+)\b[^.;\n]{0,60}?"
    r"(?:(?P<gid>fe80:[0-9a-f:]*|::ffff:\d+\.\d+\.\d+\.\d+)|roce\s*(?P<ver>v[12])|(?P<ll>link[- ]local))"
)


def _address(gid: str) -> str:
    """A GID as an address: ``::ffff:10.0.1.2`` for an IPv4-mapped one, else the compressed form."""
    try:
        addr = ipaddress.IPv6Address(gid)
    except ValueError:
        return gid.lower()
    return f"::ffff:{addr.ipv4_mapped}" if addr.ipv4_mapped else str(addr)


def listed_gids(lines: Iterable[str]) -> tuple[Sign, ...]:
    """The GIDs the lines list, as ``gid-listed`` signs (value: "index gid version", a part unknown as "-")."""
    out: dict[str, Sign] = {}
    for line in lines:
        if not ("GID" in line or "gid" in line or "Gid" in line or " v1" in line or " v2" in line):
            continue
        table = _SHOW_GIDS.search(line) or _DEVINFO.search(line)
        for m in [table] if table else _PROSE.finditer(line):  # a sentence may name several indexes
            found = m.groupdict()
            gid = _address(found["gid"]) if found.get("gid") else ("link-local" if found.get("ll") else "-")
            value = f"{found['index']} {gid} {found.get('ver') or '-'}"
            if value not in out and len(out) < MAX_LISTED:
                out[value] = Sign("gid-listed", "", value, line.strip()[:200])
    return tuple(out.values())
