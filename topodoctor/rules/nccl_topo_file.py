"""TD608: the topology file NCCL_TOPO_FILE names, as the probe read it."""

from __future__ import annotations

from collections.abc import Iterator

from topodoctor.core.probed import ProbeError, Unsupported
from topodoctor.rules.context import Context
from topodoctor.rules.registry import Issue, rule

_SUBJECT = "env:NCCL_TOPO_FILE"


@rule(
    "TD608",
    "nccl-topo-file-bad",
    "error",
    also=("warning",),
)
def nccl_topo_file_bad(ctx: Context) -> Iterator[Issue]:
    """NCCL_TOPO_FILE is missing, unreadable, or NCCL would refuse or misread it on this host.

    The file is checked as NCCL reads it (src/graph/xml.cc, topo.cc):

    - syntax: NCCL's own parser refuses an XML declaration, a DTD, and tabs between elements;
    - version: `<system version="1">`, or NCCL refuses to start;
    - bus ids: every GPU and NIC must exist here (a file from another host model routes traffic over
      devices that do not exist); bridges may be invented, as VM topology files do, but must not
      reuse a device's id;
    - link speeds: each `link_speed` must be a string NCCL knows ("32.0 GT/s PCIe"); any other is
      silently rated as PCIe Gen3, and an invented bridge without one is too;
    - affinity: each GPU and NIC under the CPU of the NUMA node the host puts it on;
    - GPUDirect RDMA distance: a NIC no further from its nearest GPU than on the host (NCCL uses
      GPUDirect RDMA only up to PXB).

    Why it matters: NCCL trusts the file over what it detects, and falls back silently where it
    cannot read a value: a wrong file makes it refuse to start, route traffic over devices that do
    not exist, or rate links far below what they carry.

    How to fix: point NCCL_TOPO_FILE at a topology file written for this host (`topodoctor nccl-topo
    -o FILE` writes one, as does NCCL_TOPO_DUMP_FILE), or unset it.
    """
    topo = ctx.environment.topo_file
    if topo is None:
        return
    v = topo.path
    ev = {"variable": "NCCL_TOPO_FILE", "value": v, "from": ctx.environment.where("NCCL_TOPO_FILE")}
    if isinstance(topo.text, Unsupported):
        yield Issue(_SUBJECT, f"NCCL_TOPO_FILE {v} does not exist", ev)
        return
    if isinstance(topo.text, ProbeError):
        yield Issue(_SUBJECT, f"NCCL_TOPO_FILE {v} could not be read: {topo.text.error}", ev)
        return

    from topodoctor.topology.nccl_topo_lint import lint_topo_file  # NCCL's file's lint: only where one is named

    for p in lint_topo_file(topo.text, ctx.snap, ctx.graph):
        yield Issue(
            _SUBJECT,
            f"NCCL_TOPO_FILE {v}: {p.message}",
            {**ev, "check": p.check, **p.evidence},
            severity=p.severity,
        )
