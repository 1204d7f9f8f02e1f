"""A launch whose processes never joined one test (TD983): nccl-tests prints its header and results from
world rank 0 only when it was built with MPI (``MPI=1``: common.cu sets ``is_main_proc`` from
MPI_Comm_rank); built without it, every process mpirun or srun starts is rank 0 of a test of its own, on
its own host's GPUs. One launch whose output holds several results of one test, none of whose rank lists
spans two hosts, is that: the figures measure each host alone, and nothing went between the hosts."""

from __future__ import annotations

from dataclasses import dataclass

from topodoctor.diagnosis.evidence_facts import Facts

MPI_LAUNCHERS = ("mpirun", "srun")


@dataclass(frozen=True)
class Separate:
    """A launch of several processes that printed several results: what to say and the evidence."""

    message: str
    evidence: dict[str, object]


def separate_runs(f: Facts) -> list[Separate]:
    """Launches of several processes or hosts whose output holds more than one result of the same test."""
    out = []
    for ln, runs in f.results:
        hosts = list(dict.fromkeys(h for h, _ in ln.hosts))
        if ln.launcher not in MPI_LAUNCHERS or max(ln.processes or 0, len(hosts)) < 2 or len(runs) < 2:
            continue
        ops = {op for op, _, _, _ in runs if op}
        if len(ops) > 1 or any(len(rh) > 1 for _, _, rh, _ in runs):
            continue  # different tests in a row, or a run whose ranks span hosts: they joined
        if ln.processes is not None and len(runs) > ln.processes:
            continue
        op = ops.pop() if ops else (ln.program.removesuffix("_perf") or "the test")
        started = f"{ln.processes} processes" if ln.processes else "its processes"
        over = f" on {', '.join(hosts)}" if hosts else ""
        averages = [a for _, a, _, _ in runs if a is not None]
        shown = f" (Avg bus bandwidth {', '.join(f'{a:g}' for a in averages)} GB/s)" if averages else ""
        msg = f"{ln.launcher} started {started}{over}, and its output holds {len(runs)} separate {op} results"
        msg += f"{shown}: the processes never joined one test, so nothing went between the hosts and each figure "
        msg += "is one host's alone. nccl-tests prints one header and one result, from world rank 0, only when "
        msg += "built with MPI; built without it (make without MPI=1, or a stale build), every process runs "
        msg += "separately as rank 0 of its own test"
        ev: dict[str, object] = {"launch": ln.text, "results": [str(q) for _, _, _, q in runs], "averages": averages,
              "hosts": hosts, "processes": ln.processes}  # fmt: skip
        out.append(Separate(msg, ev))
    return out
