"""``topodoctor.scan()``: a host probed (live, a bundled recording or a saved file) as every command
probes it, handed out as a ``Host`` with its graph in networkx."""

from __future__ import annotations

import os
from functools import cached_property
from typing import TYPE_CHECKING, Any

from topodoctor.core.budget import Budget
from topodoctor.core.options import from_keywords
from topodoctor.service.host import ProbedHost as Probed
from topodoctor.service.passes import Source
from topodoctor.service.probing import probe
from topodoctor.service.request_scan import ScanRequest

if TYPE_CHECKING:
    from topodoctor.model.snapshot import Gpu, HostSnapshot


class Host:
    """A probed host: what the probe found (``snapshot``), where it came from (``origin``) and the
    host as a graph (``graph``). Made by ``scan``; read by ``check`` and the measurements."""

    def __init__(self, probed: Probed, source: Source) -> None:
        self._probed = probed
        self._source = source

    @property
    def snapshot(self) -> HostSnapshot:
        """Everything the probe read, as plain frozen data (the JSON of ``scan -f json``'s snapshot)."""
        return self._probed.snapshot

    @property
    def origin(self) -> str:
        """Where the host came from: ``live``, ``replay NAME`` or ``snapshot PATH``."""
        return self._probed.origin

    @property
    def hostname(self) -> str:
        """The host's name as the probe read it."""
        return self._probed.snapshot.host.hostname

    @property
    def gpus(self) -> tuple[Gpu, ...]:
        """The GPUs, in NVML's index order (each with its links, PCIe path and health readings)."""
        return self._probed.snapshot.gpus

    @cached_property
    def graph(self) -> Any:
        """The host as a ``networkx.Graph`` (built once): GPUs, NVSwitches, PCIe bridges, host
        bridges, NUMA nodes, CPU sockets and NICs as nodes, each with ``kind`` and its own
        attributes; NVLink, PCIe and the links between sockets as edges, with ``kind`` and their
        rates. The attributes are those of ``scan --export-graph`` (docs/api.md lists them)."""
        return self._probed.view.graph.to_networkx()

    def __repr__(self) -> str:
        return f"<Host {self.hostname!r} ({self.origin}): {len(self.gpus)} GPUs>"


def scan(replay: str | os.PathLike[str] | None = None, *, timeout: float = 60.0, sysfs_root: str = "/") -> Host:
    """Probe a host: this one (``replay`` None), a bundled recording by name (``"h200-x4"``) or a
    recording or saved snapshot by path. The probe runs in a child process that is killed at
    ``timeout`` seconds (0: in this process, no limit); this process's NCCL/CUDA environment is
    read with it, as ``check`` judges it.

    Raises (each a ``TopodoctorError`` with the ``exit_code`` the command line would end with):
    ``ProbeUnavailable`` (no NVML library, no driver, no GPU), ``BudgetExceeded`` (not done in
    ``timeout``), ``ReplayMismatch`` (a recording that lacks what the probe asks), ``InputError``
    (no such recording, a file that is not one, a snapshot that contradicts itself)."""
    given = {"replay": None if replay is None else os.fspath(replay), "timeout": timeout, "sysfs_root": sysfs_root}
    request = from_keywords(ScanRequest, given)
    source = Source(request.replay, request.sysfs_root)  # every reading: the API's host is judged and measured too
    budget = Budget.start(request.timeout)
    return Host(probe(source, budget, environment=True), source)


def probed(host: Host) -> tuple[Probed, Source]:
    """What ``scan`` probed and from where (for ``check`` and the measurements); TypeError for
    anything that is not a ``Host``."""
    if not isinstance(host, Host):
        raise TypeError(f"expected a topodoctor.Host from topodoctor.scan(), not {type(host).__name__}")
    return host._probed, host._source
