"""The driver's XID lines as the kernel log holds them, read into ``XidEvent`` (plain text in, data out):
shared by the live probe (``probe/kernel_log.py``, from /dev/kmsg) and the readers of a pasted log
(``evidence/``).

The driver prints the line in a few shapes, all handled here:
    NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
    NVRM: Xid (PCI:0000:3b:00 GPU-I:00 GPU-CI:00): 63, pid=12345, ...      (a MIG instance)
    NVRM: Xid (PCI:0000:03:00.0): 79, ...                                   (with the function)
and the log adds its own prefix: a /dev/kmsg record ("3,1234,5678901234,-;" with the time in
microseconds since boot), dmesg ("[ 5678.901234] "), or a journal ("Mar 29 ... kernel: ").
"""

from __future__ import annotations

import re

from topodoctor.core.pci import short_bus_id
from topodoctor.model.snapshot import XidEvent

MARK = "NVRM: Xid"
MAX_TEXT = 240  # the driver's detail after the code; register dumps can run long

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<bus>[0-9A-Fa-f:.]+)[^)]*\): (?P<code>\d+)(?:,\s*(?P<text>.*))?$")
_KMSG = re.compile(r"^\d+,\d+,(?P<us>\d+),[^;]*;")
_DMESG = re.compile(r"\[\s*(?P<s>\d+\.\d+)\]\s*NVRM: Xid")


def parse_line(line: str) -> XidEvent | None:
    """One log line to an event, or None when it is not an XID line."""
    m = _XID.search(line)
    if m is None:
        return None
    when: float | None = None
    if k := _KMSG.match(line):
        when = int(k.group("us")) / 1e6
    elif d := _DMESG.search(line):
        when = float(d.group("s"))
    return XidEvent(int(m.group("code")), _bus(m.group("bus")), (m.group("text") or "").strip()[:MAX_TEXT], when)


def _bus(text: str) -> str:
    """0000:3b:00 (the driver leaves out the function) -> 0000:3b:00.0, as sysfs and the
    snapshot write it; a bus id without a domain gets domain 0000."""
    bus = text.lower().rstrip(".:")
    if "." not in bus:
        bus += ".0"
    if bus.count(":") == 1:
        bus = "0000:" + bus
    return short_bus_id(bus)


def parse_lines(lines: list[str]) -> tuple[XidEvent, ...]:
    """The XID events among kernel log lines, in order; other lines are skipped."""
    return tuple(e for e in map(parse_line, lines) if e is not None)
