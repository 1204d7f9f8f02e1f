"""`topodoctor nccl-topo`: NCCL's topology file written for this host, or one checked against it."""

from __future__ import annotations

from topodoctor.cli.args import NcclTopoArgs
from topodoctor.cli.io import Env
from topodoctor.core.budget import Budget
from topodoctor.core.errors import InputError
from topodoctor.core.fileio import read_text, write_atomic
from topodoctor.core.text import plural, printable
from topodoctor.model.outcome import DONE
from topodoctor.report.nccl_topo import nccl_topology_xml
from topodoctor.service import check as doctor
from topodoctor.service.nccl_topo import lint_nccl_topo


def run_nccl_topo(args: NcclTopoArgs, env: Env) -> int:
    """Write an NCCL_TOPO_FILE for this host, or lint one against it."""
    output, lint = args.output, args.lint
    if (output is None) == (lint is None):
        raise InputError("nccl-topo needs either --output FILE (write) or --lint FILE (check)")
    text_in = read_text(lint, "topology file", max_bytes=4 << 20) if lint is not None else None
    host = doctor.probe(doctor.Source(args.replay, args.sysfs_root), Budget.start(args.timeout))
    snap, g = host.snapshot, host.view.graph
    if text_in is not None:
        linted = lint_nccl_topo(host, text_in)
        problems = linted.problems
        lines = "".join(printable(f"{p.severity} {p.check}: {p.message}") + "\n" for p in problems)
        env.write(lines)
        errors = len(linted.failing)
        counts = f"{plural(errors, 'error')}, {plural(len(problems) - errors, 'warning')}"
        env.say(f"{lint}: {counts}")
        return linted.exit_code
    assert output is not None
    text = nccl_topology_xml(snap, g, group_flat=not args.keep_flat)
    write_atomic(output, text, "topology file")
    tree = host.view.tree(group_flat=not args.keep_flat, numa_from="sysfs")
    nodes = tree.nodes()
    gpus = sum(1 for n in nodes if n.kind == "gpu")
    nics = sum(1 for n in nodes if n.kind == "nic")
    made = sum(1 for n in nodes if n.synthetic)
    note = f"; {plural(made, 'PCIe switch')} written for the flat VM tree" if made else ""
    where = "standard output" if str(output) == "-" else str(output)
    counted = f"{plural(gpus, 'GPU')}, {plural(nics, 'RDMA NIC')} under {plural(len(tree.roots), 'CPU')}"
    env.say(f"wrote {where}: {counted}{note}")
    return DONE.exit_code
