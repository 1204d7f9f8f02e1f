"""Compute processes on each GPU and who runs them (nvidia-smi's process list).

NVML names each process by pid and GPU memory; the owner (the real Uid) and the parent come
from /proc/PID/status, the command line from /proc/PID/cmdline, all through the probe's
recorded and replayed reader. Whatever of that cannot be read stays unread ("unknown" in a
report), never a failure of the probe: another user's process may hide its /proc entry
(hidepid), or end while we look. A process is ours when it is the probing process, a child
of it (the ranks and the copy timer a check starts before it probes), or a process of the
Slurm job the check runs in (the same ``job_N`` in /proc/PID/cgroup): a prolog runs outside
the job, so there every process on the GPUs is someone else's.
"""

from __future__ import annotations

import os
import re
from typing import Any

from topodoctor.core.budget import command_pid
from topodoctor.core.probed import Probed, ProbeError, Unsupported
from topodoctor.model.snapshot import ComputeProcess
from topodoctor.probe.api import NvmlApi
from topodoctor.probe.query import Nvml, classify, sys_read, sys_realpath
from topodoctor.probe.sysfs import Sysfs

MAX_PROCESSES = 256  # per GPU: far beyond what a GPU runs, a bound on what is read for them
MAX_CMDLINE_BYTES = 4096  # a command line can reach ARG_MAX; its start names the program


def listed_processes(raw: Any) -> tuple[tuple[int, int | None], ...]:
    """(pid, GPU memory bytes or None) from nvmlDeviceGetComputeRunningProcesses, at most
    MAX_PROCESSES of them."""
    out = []
    for p in raw[:MAX_PROCESSES]:
        mem = p.get("usedGpuMemory")
        out.append((int(p["pid"]), None if mem is None else int(mem)))
    return tuple(out)


def _status_field(status: Probed[str], name: str, path: str) -> Probed[int]:
    """One number of /proc/PID/status; for Uid the real one (real, effective, saved, fs)."""
    if not isinstance(status, str):
        return status
    line = next((ln for ln in status.splitlines() if ln.startswith(f"{name}:")), None)
    if line is None or len(line.split()) < 2 or not line.split()[1].isdigit():
        return ProbeError(f"UNPARSABLE: no {name}", f"read {path}")
    return int(line.split()[1])


def _cmdline(fs: Sysfs, pid: int) -> Probed[str]:
    path = f"/proc/{pid}/cmdline"
    try:
        raw = bytes.fromhex(fs.read_hex(path, MAX_CMDLINE_BYTES))
    except OSError as exc:
        return classify(exc, f"read {path}")
    except ValueError as exc:
        return ProbeError(f"UNPARSABLE: {exc}", f"read {path}")
    if not raw.strip(b"\x00"):
        return Unsupported("EMPTY")  # a kernel thread, or a process on its way out
    return " ".join(a.decode("utf-8", "replace") for a in raw.rstrip(b"\x00").split(b"\x00"))


_SLURM_JOB = re.compile(r"/job_(\d+)(?:/|$)")


def _slurm_job(fs: Sysfs, pid: int | str) -> str | None:
    """The Slurm job whose cgroup holds the process (a ``job_N`` component of its cgroup path,
    cgroup v1 or v2), or None: not in a job, or /proc/PID/cgroup unreadable."""
    text = sys_read(fs, f"/proc/{pid}/cgroup", str)
    found = _SLURM_JOB.search(text) if isinstance(text, str) else None
    return found.group(1) if found else None


def own_pid(fs: Sysfs) -> int | None:
    """The probing process's pid, as /proc/self resolves (recorded, so a replay agrees)."""
    me = sys_realpath(fs, "/proc/self")
    if isinstance(me, str) and me.rsplit("/", 1)[-1].isdigit():
        return int(me.rsplit("/", 1)[-1])
    return None


Me = tuple[int | None, str | None]  # the probing process: its pid, its Slurm job


def whoami(fs: Sysfs) -> Me:
    """The probing process's pid and Slurm job (``/proc/self``, ``/proc/self/cgroup``)."""
    return own_pid(fs), _slurm_job(fs, "self")


def describe(fs: Sysfs, pid: int, mem: int | None, me: Me, commands: tuple[int, ...] = ()) -> ComputeProcess:
    """One process NVML listed, with its owner, parent, Slurm job and command line from /proc,
    and whether it is ours: the probing process, a child of it, a process of its Slurm job, or one
    of ``commands`` (the topodoctor command a probe's child works for), their child (the copy
    timer a ``bandwidth`` forks before its probe's child: by then it holds a context on every GPU) or
    their grandchild (the timers a check's measurement passes spawn from the child that starts them)."""
    path = f"/proc/{pid}/status"
    status = sys_read(fs, path, str)
    parent, uid = _status_field(status, "PPid", path), _status_field(status, "Uid", path)
    job = _slurm_job(fs, pid)
    my_pid, my_job = me
    # A process of the job this check runs in (a step's other ranks) is not someone else's.
    ours = (my_pid is not None and my_pid in (pid, parent)) or (my_job is not None and job == my_job)
    ours = ours or pid in commands or (isinstance(parent, int) and parent in commands)
    if not ours and commands and isinstance(parent, int) and parent > 1:
        # a measurement's timer is the grandchild: the command forks the passes' starter, which spawns it
        grand = _status_field(sys_read(fs, f"/proc/{parent}/status", str), "PPid", f"/proc/{parent}/status")
        ours = isinstance(grand, int) and grand in commands
    return ComputeProcess(pid, mem, uid, parent, _cmdline(fs, pid), ours, job)


def compute_processes(
    nvml: Nvml, fs: Sysfs, index: int, me: list[Me], commands: tuple[int, ...] = ()
) -> Probed[tuple[ComputeProcess, ...]]:
    """nvmlDeviceGetComputeRunningProcesses of GPU ``index``, each process with its owner,
    Slurm job and command line. ``me`` holds the probing process's pid and job once asked
    (asked only when a GPU lists a process, so an idle host costs one call per GPU)."""
    listed = nvml.ask("nvmlDeviceGetComputeRunningProcesses", f"gpu:{index}", convert=listed_processes)
    if not isinstance(listed, tuple):
        return listed
    if listed and not me:
        me.append(whoami(fs))
    return tuple(describe(fs, pid, mem, me[0], commands) for pid, mem in listed)


def foreign_processes(nvml: NvmlApi | None, gpus: list[int], procfs: Sysfs) -> dict[int, int]:
    """GPU -> how many compute processes of someone else it runs: those NVML lists, less topodoctor's own
    (this process, the command it works for, their children and grandchildren: the copy timer a check's
    passes started beside this one holds a context on the GPU by now). A process whose owner cannot be
    read counts as someone else's."""
    if nvml is None:
        return {}
    ask, out = Nvml(nvml), {}
    for i in gpus:
        got = compute_processes(ask, procfs, i, [], (command_pid(), os.getpid()))
        n = sum(1 for p in got if not p.ours) if isinstance(got, tuple) else 1
        if n:
            out[i] = n
    return out
