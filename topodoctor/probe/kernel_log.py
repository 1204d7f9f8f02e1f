"""NVIDIA driver events from the kernel log: the "NVRM: Xid (PCI:...): N, ..." lines.

Read from ``/dev/kmsg`` through the probe's file boundary (``Sysfs.read_records``), so a
recording holds exactly the lines the probe saw and a replay sees them again. ``dmesg``
reads the same buffer under the same permission (``kernel.dmesg_restrict``), so it adds
nothing where /dev/kmsg is closed. A log that cannot be read is a ``ProbeError`` (could not
check), never an empty, healthy one.
The lines' shapes and their parsing: ``model/xid_lines.py`` (a pasted log is read by the same).
"""

from __future__ import annotations

from topodoctor.core.probed import Probed, ProbeError
from topodoctor.model.snapshot import KernelEvents
from topodoctor.model.xid_lines import MARK, MAX_TEXT, parse_line, parse_lines
from topodoctor.probe.sysfs import Sysfs, os_error_name

KMSG = "/dev/kmsg"
__all__ = ["KMSG", "MARK", "MAX_TEXT", "parse_line", "parse_lines", "read_kernel_events"]


def read_kernel_events(fs: Sysfs) -> Probed[KernelEvents]:
    """XID lines of the kernel log (``dmesg | grep 'NVRM: Xid'``) and the uptime that ages them."""
    try:
        lines = fs.read_records(KMSG, MARK)
    except OSError as exc:
        return ProbeError(os_error_name(exc), f"read {KMSG}")
    events = parse_lines(lines)
    if not events:  # the uptime only ages events: with none, one read fewer
        return KernelEvents(KMSG, None, ())
    try:
        uptime: float | None = float(fs.read("/proc/uptime").split()[0])
    except (OSError, ValueError, IndexError):
        uptime = None
    return KernelEvents(KMSG, uptime, events)
