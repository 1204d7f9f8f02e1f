"""What NCCL's topology XML means, from NCCL's own source (src/graph/xml.cc, topo.cc, xml.h).

The writer (report/nccl_topo.py) and the lint of an existing ``NCCL_TOPO_FILE`` share it.
NCCL matches attribute values against its tables by prefix (``kvConvertToInt``) and falls
back silently: an unknown ``link_speed`` becomes 6 x 100 Mb/s per lane, which is PCIe Gen3;
an unknown ``class`` becomes a PCI bridge.
"""

from __future__ import annotations

TOPO_XML_VERSION = 1  # NCCL_TOPO_XML_VERSION; any other version fails ncclCommInit
MAX_STR_LEN = 255  # NCCL truncates names and values past this

# kvDictPciGen: link_speed prefix -> x100 Mb/s per lane. Order matters (first prefix wins).
PCI_GEN_SPEEDS: tuple[tuple[str, int], ...] = (
    ("2.5 GT/s", 15),
    ("5 GT/s", 30),
    ("8 GT/s", 60),
    ("16 GT/s", 120),
    ("32 GT/s", 240),
    ("2.5 GT/s PCIe", 15),
    ("5.0 GT/s PCIe", 30),
    ("8.0 GT/s PCIe", 60),
    ("16.0 GT/s PCIe", 120),
    ("32.0 GT/s PCIe", 240),
    ("64.0 GT/s PCIe", 480),  # NCCL 2.19 and later
)
PCI_GEN_FALLBACK = 60
# The speed string NCCL itself writes for each PCIe generation.
GEN_SPEED = {
    1: "2.5 GT/s PCIe",
    2: "5.0 GT/s PCIe",
    3: "8.0 GT/s PCIe",
    4: "16.0 GT/s PCIe",
    5: "32.0 GT/s PCIe",
    6: "64.0 GT/s PCIe",
}

CLASS_BRIDGE = "0x060400"
CLASS_NVSWITCH = "0x068000"
CLASS_CPU = "0x068001"
CLASS_GPU = "0x03"  # what NCCL sets itself when sysfs has no class (ncclTopoFillGpu)
CLASS_NIC = "0x02"
# kvDictPciClass, by prefix; anything else is a PCI bridge.
PCI_CLASSES: tuple[tuple[str, str], ...] = (
    (CLASS_BRIDGE, "pci"),
    ("0x080100", "pci"),
    (CLASS_NVSWITCH, "nvswitch"),
    (CLASS_CPU, "cpu"),
    ("0x03", "gpu"),
    ("0x02", "nic"),
)
# NVML answers an NVLink remote that the VM cannot see with all-FF; NCCL writes this target.
INVISIBLE_TARGET = "fffffff:ffff:ff"


def speed_per_lane(link_speed: str) -> int | None:
    """NCCL's per-lane rate (x100 Mb/s) for a link_speed string, None where NCCL falls back."""
    for prefix, value in PCI_GEN_SPEEDS:
        if link_speed.startswith(prefix):
            return value
    return None


def pci_kind(cls: str) -> str:
    """What NCCL takes a PCI class code for (``gpu``, ``nic``, ``nvswitch``, ``cpu``), matching by prefix as it
    does; ``pci`` (a bridge) for anything else."""
    for prefix, kind in PCI_CLASSES:
        if cls.startswith(prefix):
            return kind
    return "pci"


def cpumask(cpus: tuple[int, ...] | list[int]) -> str:
    """CPUs as a sysfs cpumap (comma-separated 32-bit hex words, high first), NCCL's affinity format."""
    if not cpus:
        return "0"
    words = [0] * (max(cpus) // 32 + 1)
    for c in cpus:
        words[c // 32] |= 1 << (c % 32)
    return ",".join(f"{w:08x}" for w in reversed(words))


def parse_cpumask(text: str) -> tuple[int, ...] | None:
    """The inverse of ``cpumask``; None when the text is not a mask."""
    cpus = []
    try:
        words = [int(w, 16) for w in text.strip().split(",")]
    except ValueError:
        return None
    for k, w in enumerate(reversed(words)):
        cpus += [k * 32 + b for b in range(32) if w >> b & 1]
    return tuple(cpus)
