"""Job scope: which of the node's GPUs a check is about, and which findings concern them.

A prolog on a node shared by several jobs must measure only its own job's GPUs and must not
fail a job for another job's broken GPU. The job's GPUs come from the environment, first
match wins:

- ``SLURM_STEP_GPUS`` (inside a step), then ``SLURM_JOB_GPUS`` (prolog, batch script):
  Slurm's GPU ids, the N of ``/dev/nvidiaN``, i.e. the driver's minor number (NVML index
  where the minor number could not be read);
- ``CUDA_VISIBLE_DEVICES``: indices in CUDA's order (PCI bus order under
  ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; CUDA's default "fastest first" order equals bus order only
  when every GPU is the same model), ``GPU-<uuid>`` (or a unique prefix), ``MIG-GPU-<uuid>/gi/ci``,
  or ``MIG-<uuid>`` given a table of MIG devices to parent GPUs. Like CUDA, parsing stops at
  the first entry that names no GPU.

A check that runs for a Slurm job (``SLURM_JOB_ID`` set: a prolog, a batch script) is the job's
whatever it judges: Slurm's variables naming every GPU of the node still make it the job's check
of them (a previous job's process on any of them is then someone else's), and a job Slurm gave no
GPU list judges the whole node but is labelled the job's. Its metrics then never carry the node
scope's labels, which the node's own health check writes (node_exporter drops a series that two
files hold).

Everything here is pure: the environment and the snapshot go in, NVML indices come out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, TypeVar

from topodoctor.core.errors import InputError
from topodoctor.model.snapshot import Gpu, HostSnapshot, Nic

ScopeKind = Literal["node", "job"]
ScopeChoice = Literal["auto", "job", "node"]
SOURCES = ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES")
SLURM_SOURCES = SOURCES[:2]
JOB_ID = "SLURM_JOB_ID"  # set in a Slurm prolog and in every process of a job
_NONE = {"", "-1", "none", "nodevfiles"}  # Slurm sets NoDevFiles for a job without GPUs


@dataclass(frozen=True)
class Scope:
    """The GPUs a check judges: the whole node, or a job's, with the variable that named them."""

    kind: ScopeKind
    gpus: tuple[int, ...]  # NVML indices in scope (every GPU for a node scope)
    source: str  # "node", or the variable that named the job's GPUs
    value: str | None = None  # that variable's value
    unresolved: tuple[str, ...] = field(default=())  # entries that named no GPU of this node
    job: str | None = None  # the Slurm job the check runs for (SLURM_JOB_ID), whatever it judges

    @property
    def label(self) -> ScopeKind:
        """Whose check this is, for the metrics' ``scope`` label: a job's (its GPUs, or the whole
        node for a job that was given no GPU list) or the node's own."""
        return "job" if self.kind == "job" or self.job is not None else "node"

    def describe(self) -> str:
        """The scope in one line for reports: ``node (GPUs 0,1)`` or ``job (GPUs 2,3, from VAR=value)``."""
        gpus = ",".join(str(i) for i in self.gpus) or "none"
        if self.kind == "node":
            return f"node (GPUs {gpus}" + (f"; Slurm job {self.job} named no GPU)" if self.job else ")")
        return f"job (GPUs {gpus}, from {self.source}={self.value})"


def resolve(
    snap: HostSnapshot,
    environ: Mapping[str, str],
    choice: ScopeChoice = "auto",
    mig_parents: Mapping[str, int] | None = None,
) -> Scope:
    """The scope of a check. ``auto`` is the job's GPUs when the environment names a subset of
    the node's, else the node; ``job`` insists on the environment (an error when nothing names
    the job's GPUs); ``node`` is every GPU whatever the environment says."""
    every = tuple(sorted(g.index for g in snap.gpus))
    if choice == "node":
        return Scope("node", every, "node")
    job = environ.get(JOB_ID) or None
    source = next((name for name in SOURCES if name in environ), None)
    if source is None:
        if choice == "job":
            raise InputError(f"--scope job: none of {', '.join(SOURCES)} is set")
        return Scope("node", every, "node", job=job)
    value = environ[source]
    if source == "CUDA_VISIBLE_DEVICES":
        gpus, bad = _cuda_visible(snap, value, environ.get("CUDA_DEVICE_ORDER", ""), mig_parents or {})
    else:
        gpus, bad = _slurm_ids(snap, value)
    if bad and not gpus and choice == "job":
        raise InputError(f"--scope job: {source}={value} names no GPU of this node")
    # Every GPU named by CUDA_VISIBLE_DEVICES outside a job is a workstation's whole node; Slurm
    # naming them all gave them to one job, whose check it is.
    whole = set(gpus) == set(every) and not bad and source not in SLURM_SOURCES and job is None
    if choice == "auto" and whole:
        return Scope("node", every, "node", job=job)
    return Scope("job", tuple(sorted(set(gpus))), source, value, tuple(bad), job)


def asked_label(environ: Mapping[str, str], choice: ScopeChoice = "auto") -> ScopeKind:
    """The metrics' ``scope`` label of a check that could not see the GPUs (no snapshot to resolve
    against): a job's when it runs for one or the environment names GPUs, as ``resolve`` would."""
    if choice != "auto":
        return choice
    return "job" if environ.get(JOB_ID) or any(name in environ for name in SOURCES) else "node"


def _entries(value: str) -> list[str]:
    if value.strip().lower() in _NONE:
        return []
    return [e.strip() for e in value.split(",")]


def _slurm_ids(snap: HostSnapshot, value: str) -> tuple[list[int], list[str]]:
    """Slurm ids are device-file numbers; a GPU whose minor number failed to probe is
    matched by its NVML index, which equals the minor number on every host seen so far."""
    by_id = {g.minor_number if isinstance(g.minor_number, int) else g.index: g.index for g in snap.gpus}
    gpus, bad = [], []
    for e in _entries(value):
        for part in _expand(e):
            if part in by_id:
                gpus.append(by_id[part])
            else:
                bad.append(str(part) if part >= 0 else e)
    return gpus, bad


def _expand(entry: str) -> list[int]:
    """Slurm writes ids as a list ("0,2") and, in some versions, ranges ("0-3")."""
    lo, dash, hi = entry.partition("-")
    if lo.isdigit() and (not dash or hi.isdigit()):
        return list(range(int(lo), int(hi or lo) + 1))
    return [-1]


_MIG_LEGACY = re.compile(r"^MIG-(GPU-[0-9a-fA-F-]+)/\d+/\d+$")


def _cuda_visible(
    snap: HostSnapshot, value: str, order: str, mig_parents: Mapping[str, int]
) -> tuple[list[int], list[str]]:
    bus_order = sorted((g for g in snap.gpus if isinstance(g.bus_id, str)), key=lambda g: str(g.bus_id))
    same_model = len({str(g.name) for g in snap.gpus}) <= 1
    uuids = {str(g.uuid).lower(): g.index for g in snap.gpus if isinstance(g.uuid, str)}
    gpus: list[int] = []
    entries = _entries(value)
    for pos, e in enumerate(entries):
        hit: int | None = None
        if e.isdigit() and (order.upper() == "PCI_BUS_ID" or same_model):
            hit = bus_order[int(e)].index if int(e) < len(bus_order) else None
        elif e.upper().startswith("GPU-"):
            found = [i for u, i in uuids.items() if u.startswith(e.lower())]
            hit = found[0] if len(found) == 1 else None
        elif e.upper().startswith("MIG-"):
            legacy = _MIG_LEGACY.match(e)
            hit = uuids.get(legacy.group(1).lower()) if legacy else mig_parents.get(e)
        if hit is None:  # CUDA ignores this entry and every one after it
            return gpus, entries[pos:]
        gpus.append(hit)
    return gpus, []


def cuda_visible(snap: HostSnapshot, gpus: Iterable[int]) -> str:
    """A CUDA_VISIBLE_DEVICES value that shows a child process exactly ``gpus`` (NVML
    indices): their UUIDs, which mean the same in any device order and inside a cgroup that
    hides other GPUs; PCI-bus-order indices where a UUID failed to probe (the child runs with
    CUDA_DEVICE_ORDER=PCI_BUS_ID)."""
    want = set(gpus)
    bus_order = [g.index for g in sorted(snap.gpus, key=lambda g: str(g.bus_id))]
    out = []
    for g in sorted(snap.gpus, key=lambda g: g.index):
        if g.index in want:
            out.append(g.uuid if isinstance(g.uuid, str) else str(bus_order.index(g.index)))
    return ",".join(out)


_GPU = re.compile(r"GPU(\d+)")


def concerns(subject: str, scope: Scope, snap: HostSnapshot) -> bool:
    """Whether a finding's subject is about the scope: a GPU in it, a pair or link of GPUs
    all in it, a PCIe bridge on an in-scope GPU's path, a NIC that shares a PCIe switch or
    NUMA node with one; anything else (environment, config files, the fabric, the host) is
    node-wide and always in scope."""
    if scope.kind == "node":
        return True
    mine = set(scope.gpus)
    if subject.startswith("GPU"):
        named = {int(n) for n in _GPU.findall(subject.split("/", 1)[0])}
        return bool(named) and named <= mine
    if subject.startswith("bridge:"):
        bdf = subject[len("bridge:") :]
        return any(isinstance(g.pcie_path, tuple) and bdf in g.pcie_path for g in snap.gpus if g.index in mine)
    if subject.startswith("nic:"):
        return _nic_near(subject[len("nic:") :], mine, snap)
    return True


def _nic_near(name: str, mine: set[int], snap: HostSnapshot) -> bool:
    """A NIC belongs to the GPUs it shares a PCIe switch with, else to those on its NUMA
    node; a NIC near no GPU at all (or one the node lacks) is a node-wide fact."""
    nic = next((n for n in snap.nics if n.name == name), None)
    if nic is None:
        return True
    for near in (_same_switch, _same_numa):
        owners = {g.index for g in snap.gpus if near(nic, g)}
        if owners:
            return bool(owners & mine)
    return True


def _same_switch(nic: Nic, g: Gpu) -> bool:
    # Paths run from the root complex to the device: sharing a bridge in between means a
    # PCIe switch (or root port) in common.
    if not (isinstance(nic.pcie_path, tuple) and isinstance(g.pcie_path, tuple)):
        return False
    return bool(set(nic.pcie_path[1:-1]) & set(g.pcie_path[1:-1]))


def _same_numa(nic: Nic, g: Gpu) -> bool:
    return isinstance(nic.numa_node, int) and isinstance(g.sysfs_numa_node, int) and nic.numa_node == g.sysfs_numa_node


class _Subject(Protocol):
    @property
    def subject(self) -> str: ...


F = TypeVar("F", bound=_Subject)


def within(findings: Iterable[F], scope: Scope, snap: HostSnapshot) -> tuple[list[F], list[F]]:
    """Split findings into those about the scope and those about other GPUs of the node."""
    kept: list[F] = []
    outside: list[F] = []
    for f in findings:
        (kept if concerns(f.subject, scope, snap) else outside).append(f)
    return kept, outside
