"""PCI addresses (bus ids) in the two forms the tools around us write them.

sysfs and NCCL write a 4-digit domain in lower case (``0000:18:00.0``); NVML and dcgm-exporter an
8-digit one in upper case (``00000000:18:00.0``). Everything inside topodoctor keeps the short form;
the long one is made only for labels that must join dcgm-exporter's series."""

from __future__ import annotations

import re

BDF = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def is_bdf(name: str) -> bool:
    """Whether ``name`` is a PCI address (domain:bus:device.function), in either form."""
    return bool(BDF.match(name))


def short_bus_id(bus_id: str) -> str:
    """The short form, as sysfs and NCCL write it: 4-digit domain, lower case."""
    bus_id = bus_id.strip().lower()
    domain, _, rest = bus_id.partition(":")
    if rest and len(domain) > 4:
        domain = domain[-4:]
    return f"{domain}:{rest}" if rest else bus_id


def long_bus_id(bus_id: str) -> str:
    """The long form, as NVML and dcgm-exporter write it: 8-digit domain, upper case; anything
    that is not a bus id is returned as it is."""
    m = re.fullmatch(r"([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", bus_id.strip())
    if m is None:
        return bus_id
    dom, bus, dev, fn = m.groups()
    return f"{int(dom, 16):08X}:{bus.upper()}:{dev.upper()}.{fn}"
