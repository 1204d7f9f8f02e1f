"""The NICs' ports as ``ibstat``, ``ibstatus``, ``ibv_devinfo`` or NCCL's topology show them, judged as
the network a multi-node run has: which RDMA ports are up and at what rate, a port that negotiated
below its siblings of the same adapter (a cable, transceiver or switch port: TD982, warning), ports
below what their adapter can do (information: an adapter on a slower fabric is a choice, not a fault),
and the busbw ceiling the ports give between nodes."""

from __future__ import annotations

from dataclasses import dataclass

from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.diagnosis.evidence_leads import Leads, Symptom
from topodoctor.diagnosis.evidence_seen import Quote
from topodoctor.diagnosis.rank import Candidate
from topodoctor.evidence.nics import UNNAMED_DEVICE
from topodoctor.model.evidence import NicSeen
from topodoctor.model.findings import Severity

# ibstat's CA type is the adapter's PCI device id in decimal (0x101b = MT4123); each adapter's fastest port
# (pci.ids for the names; the adapters' product briefs for the rates: HDR 200, NDR 400, XDR 800 Gb/s).
ADAPTERS = {
    "MT4115": ("ConnectX-4", 100.0), "MT4117": ("ConnectX-4 Lx", 50.0), "MT4119": ("ConnectX-5", 100.0),
    "MT4121": ("ConnectX-5 Ex", 100.0), "MT4123": ("ConnectX-6", 200.0), "MT4125": ("ConnectX-6 Dx", 200.0),
    "MT4127": ("ConnectX-6 Lx", 50.0), "MT4129": ("ConnectX-7", 400.0), "MT4131": ("ConnectX-8", 800.0),
    "MT41686": ("BlueField-2", 200.0), "MT41692": ("BlueField-3", 400.0),
}  # fmt: skip
# what NCCL's busbw between nodes reaches per NIC: 24 GB/s of a 200G port's 25, 12 of a 100G port's 12.5
# (nccl-tests#119, the maintainers' figure), 46-48 of 400G's 50 (nccl-tests#290)
NIC_SHARE = 0.95
# perftest over two of a host's NICs of one kind: a run this far below the fastest is its own NIC's path, not noise
# (perftest's averages over one device repeat within a few per cent)
UNEVEN_RUNS = 0.85
RDMA_LAYERS = ("IB", "RoCE")


# what a listing says on its own: (severity, subject, message, evidence, fix; "" for the code's own fix)
Note = tuple[Severity, str, str, dict[str, object], str]


@dataclass(frozen=True)
class Port:
    """One RDMA port with its rate, what its siblings (same adapter, same host) run at, and its line."""

    nic: NicSeen
    rate_gbps: float
    sibling_gbps: float  # the fastest active port of the same adapter type on the host
    adapter: tuple[str, float] | None
    quote: Quote

    @property
    def label(self) -> str:
        """The port as a person names it: ``mlx5_0 port 1``."""
        return self.nic.name + (f" port {self.nic.port}" if self.nic.port is not None else "")


def _quote(f: Facts, n: NicSeen) -> Quote:
    shown = n.rate_text or (f"{n.rate_gbps:g}" if n.rate_gbps else "")
    return Quote(f.where.get(n.piece, "the NIC listing"), f"{n.name} rate {shown}".strip())


def ports(f: Facts) -> tuple[list[Port], list[NicSeen]]:
    """The active RDMA ports the NIC tools listed (with a rate), and the ports listed as down."""
    listed = [n for n in f.nics if n.state or n.port is not None]  # a NIC tool's ports, not topo -m's names
    down = [n for n in listed if n.state == "DOWN" and (n.link_layer in RDMA_LAYERS or not n.link_layer)]
    up = [n for n in listed if n.state != "DOWN" and n.rate_gbps and n.link_layer in RDMA_LAYERS]
    best: dict[tuple[str, str, str], float] = {}
    for n in up:
        best[_kin(n)] = max(best.get(_kin(n), 0.0), n.rate_gbps or 0.0)
    out = [Port(n, n.rate_gbps or 0.0, best[_kin(n)], ADAPTERS.get(n.ca_type), _quote(f, n)) for n in up]
    return out, down


def _kin(n: NicSeen) -> tuple[str, str, str]:
    """The ports a port is held against: the same host, adapter type and link layer."""
    return (n.host, n.ca_type, n.link_layer)


def expected_nic_gbps(f: Facts, host: str) -> float | None:
    """The line rate the host's RDMA ports should give together (GB/s): each at its fastest sibling's
    rate, so one port trained down shows as a shortfall; None where no NIC tool listed a port."""
    got, _ = ports(f)
    mine = [p for p in got if not host or p.nic.host in ("", host)]
    return sum(p.sibling_gbps for p in mine) / 8 if mine else None


def nic_causes(f: Facts, sym: Symptom | None, out: Leads) -> None:
    """A port below its siblings (TD982) as a cause of a multi-node shortfall; where no NIC tool listed
    the ports, ``ibstat`` is the output that would show their rate."""
    if sym is not None and sym.nodes < 2:
        return
    got, _ = ports(f)
    slow = [p for p in got if p.rate_gbps < p.sibling_gbps]
    if slow:
        p = min(slow, key=lambda x: x.rate_gbps / x.sibling_gbps)
        what = f"{p.label} negotiated {p.rate_gbps:g} Gb/s where its sibling ports run at {p.sibling_gbps:g}"
        if p.adapter is not None:
            what += f" (a {p.adapter[0]})"
        left = None
        if sym is not None:
            total = sum(x.sibling_gbps for x in got)
            left = sym.expected_gbps * (total - (p.sibling_gbps - p.rate_gbps)) / total if total else None
        fix = f"Check {p.nic.name}'s cable, transceiver and switch port (`ibstat`, `mlxlink`): a link trained down."
        ev = {"nic": p.nic.name, "rate_gbps": p.rate_gbps, "sibling_gbps": p.sibling_gbps}
        out.add("TD982", Candidate(what, fix, ev, left), (p.quote,), f"nic:{p.nic.name}")
    elif got:
        rates = ", ".join(sorted({f"{p.rate_gbps:g}" for p in got}))
        out.rule_out(f"the NIC ports: {len(got)} active at {rates} Gb/s")
    elif sym is not None:
        out.ask("`ibstat` of a node (each NIC port's state and rate)")


def port_notes(f: Facts) -> list[Note]:
    """What the listed ports say on their own, as (severity, subject, message, evidence): a port below its
    siblings (warning), and the network's ceiling with the ports down or below their adapter (information)."""
    got, down = ports(f)
    out = _uneven_runs(f)  # the slower NIC's warning stands for its own figure
    for n in f.nics:
        if n.measured_gbps is not None and not any(note[1] == f"nic:{n.name}" for note in out):
            msg = f"{n.rate_text.split(':')[0]} over {n.name}: {n.measured_gbps:g} Gb/s average, the RDMA path "
            msg += f"itself (about {n.measured_gbps / 8:.0f} GB/s one way); NCCL's busbw between nodes reaches about "
            msg += f"{NIC_SHARE:g} of each NIC's line rate, so a figure far under that per NIC is NCCL's path "
            msg += "(GPUDirect RDMA, the transport, ACS), not the link"
            out.append(("info", f"nic:{n.name}", msg, {"measured_gbit_s": n.measured_gbps}, ""))
    for p in got:
        if p.rate_gbps < p.sibling_gbps:
            msg = f"{p.label} negotiated {p.rate_gbps:g} Gb/s where the host's other "
            msg += f"{p.adapter[0] if p.adapter else p.nic.link_layer} ports run at {p.sibling_gbps:g} Gb/s: "
            msg += (
                "its link trained down (cable, transceiver or switch port), and every ring through it runs at its rate"
            )
            out.append(("warning", f"nic:{p.nic.name}", msg, {"lines": [str(p.quote)]}, ""))
    if out:
        return out  # the port that trained down is what the listing says; its ceiling follows from it
    if got:
        total = sum(p.rate_gbps for p in got)
        rates = sorted({p.rate_gbps for p in got}, reverse=True)
        msg = f"{len(got)} active RDMA port{'s' if len(got) > 1 else ''} at {'/'.join(f'{r:g}' for r in rates)} Gb/s "
        msg += f"({total:g} Gb/s in all): busbw between nodes tops out about {total / 8 * NIC_SHARE:.0f} GB/s "
        msg += f"({NIC_SHARE:g} of the line rate, what NCCL reaches per NIC)"
        below = [p for p in got if p.adapter is not None and p.rate_gbps < p.adapter[1]]
        adapter = below[0].adapter if below else None
        if below and adapter is not None:
            p = below[0]
            msg += f"; {p.label} runs at {p.rate_gbps:g} of the {adapter[1]:g} Gb/s a {adapter[0]} can do "
            msg += "(the cable or the switch sets the rate)"
        if down:
            msg += f"; {', '.join(n.name for n in down[:3])} down (not counted)"
        out.append(("info", "network", msg, {"ports": len(got), "total_gbit_s": total, "down": len(down)}, ""))
    elif down:
        msg = f"every RDMA port listed is down ({', '.join(n.name for n in down[:3])}): NCCL has no RDMA network"
        out.append(("info", "network", msg, {"down": len(down)}, ""))
    return out


def _uneven_runs(f: Facts) -> list[Note]:
    """perftest runs over several NICs where one averages well below the fastest: that NIC's own path (its PCIe
    link's width or speed, the switch it shares, its port) is slower; what tells which is each NIC's link."""
    runs = [n for n in f.nics if n.measured_gbps is not None and n.name != UNNAMED_DEVICE]
    by_name = {n.name: n for n in runs}
    if len(by_name) < 2:
        return []
    fast = max(by_name.values(), key=lambda n: n.measured_gbps or 0.0)
    slow = min(by_name.values(), key=lambda n: n.measured_gbps or 0.0)
    top, low = fast.measured_gbps or 0.0, slow.measured_gbps or 0.0
    if not top or low >= UNEVEN_RUNS * top:
        return []
    msg = f"the same RDMA test averages {low:g} Gb/s over {slow.name} where it reaches {top:g} over {fast.name} "
    msg += f"({low / top:.0%}): {slow.name}'s own path is slower, cause not found"
    fix = (
        "Tell its path apart: `lspci -vvv` LnkSta of both NICs (a link trained down in width or speed), "
        f"`nvidia-smi topo -m` (the GPU's distance to each, a PCIe switch {slow.name} shares with another NIC or GPU) "
        "and `ibstat` of both ports (a port or cable at a lower rate); then the same test again over each."
    )
    ev: dict[str, object] = {"slow": slow.name, "slow_gbit_s": low, "fast": fast.name, "fast_gbit_s": top}
    return [("warning", f"nic:{slow.name}", msg, ev, fix)]
