"""What rules read: the snapshot, its graph, the process environment, optional expectations
and bandwidth results. Built once per check; rules never probe anything themselves."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from topodoctor.model import HostSnapshot
from topodoctor.probed import Probed, ProbeError, Unsupported
from topodoctor.rules.registry import Unchecked

if TYPE_CHECKING:
    import networkx as nx

    from topodoctor.bandwidth.plan import Expected
    from topodoctor.bandwidth.result import BandwidthResult
    from topodoctor.expect import Expectations
    from topodoctor.graph import Connection

NCCL_SYSTEM_CONF = "/etc/nccl.conf"
T = TypeVar("T")


@dataclass(frozen=True)
class Environment:
    """NCCL / CUDA settings as NCCL would see them: process environment over config files."""

    env: dict[str, str]  # NCCL_* / CUDA_* / TORCH_* variables of the process
    conf: dict[str, str]  # from /etc/nccl.conf and NCCL_CONF_FILE, file by file
    conf_sources: dict[str, str]  # variable -> file it came from
    conf_errors: tuple[str, ...]  # unreadable or malformed config files
    process_cpus: tuple[int, ...] | None  # this process's CPU affinity (sched_getaffinity)

    def get(self, name: str) -> str | None:
        if name in self.env:
            return self.env[name]
        return self.conf.get(name)

    def where(self, name: str) -> str:
        return "environment" if name in self.env else self.conf_sources.get(name, "environment")

    def names(self) -> list[str]:
        return sorted(set(self.env) | set(self.conf))


def _parse_conf(path: str) -> tuple[dict[str, str], str | None]:
    out: dict[str, str] = {}
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return out, None
    except OSError as exc:
        return out, f"{path}: {exc.strerror or exc}"
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, eq, value = line.partition("=")
        if not eq or not key.strip():
            return out, f"{path}:{n}: not NAME=VALUE: {line[:60]!r}"
        out[key.strip()] = value.strip()
    return out, None


def capture_environment(environ: dict[str, str] | None = None, system_conf: str = NCCL_SYSTEM_CONF) -> Environment:
    environ = dict(os.environ if environ is None else environ)
    env = {k: v for k, v in environ.items() if k.startswith(("NCCL_", "CUDA_", "TORCH_NCCL_"))}
    conf: dict[str, str] = {}
    sources: dict[str, str] = {}
    errors = []
    files = [system_conf] + ([environ["NCCL_CONF_FILE"]] if environ.get("NCCL_CONF_FILE") else [])
    for path in files:
        values, err = _parse_conf(path)
        if err:
            errors.append(err)
        for k, v in values.items():
            conf[k] = v
            sources[k] = path
    try:
        cpus: tuple[int, ...] | None = tuple(sorted(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        cpus = None
    return Environment(env, conf, sources, tuple(errors), cpus)


@dataclass
class Context:
    snap: HostSnapshot
    environment: Environment
    expect: Expectations | None = None
    bandwidth: BandwidthResult | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Inputs the running rule could not read; the engine empties it before each rule.
    unchecked: list[Unchecked] = field(default_factory=list, repr=False)

    def need(self, value: Probed[T], subject: str, field_name: str) -> T | None:
        """The one way rules read a probed input.

        A value comes back as is. ``Unsupported`` comes back as None: the hardware does not
        have it, so there is nothing to check. A ``ProbeError`` comes back as None *and* is
        recorded, so the engine reports "could not check" (TD901) naming the rule, the
        subject and the field: a rule cannot skip what it could not read.
        """
        if isinstance(value, ProbeError):
            self.unchecked.append(Unchecked(subject, field_name, value))
            return None
        if isinstance(value, Unsupported):
            return None
        return value

    def missing(self, subject: str, field_name: str, reason: str, call: str) -> None:
        """An input that is absent altogether (a listing that could not be read, a GPU the
        probe has no record of): reported like an unreadable one."""
        self.unchecked.append(Unchecked(subject, field_name, ProbeError(reason, call)))

    @cached_property
    def graph(self) -> nx.Graph:
        from topodoctor.graph import build_graph

        return build_graph(self.snap)

    @cached_property
    def connections(self) -> dict[tuple[int, int], Connection]:
        """Best path for every GPU pair (a < b), from the graph."""
        from topodoctor.graph import connection, gpu_node, pcie_subgraph

        g = self.graph
        sub = pcie_subgraph(g)
        idx = [gpu.index for gpu in self.snap.gpus if gpu.lost is None]
        return {(a, b): connection(self.snap, g, gpu_node(a), gpu_node(b), sub) for a in idx for b in idx if a < b}

    @cached_property
    def expected_bandwidth(self) -> dict[tuple[int, int], Expected]:
        """What each ordered GPU pair should reach, from the graph (bandwidth rules)."""
        from topodoctor.bandwidth.plan import expected_pairs

        return expected_pairs(self.snap, self.graph)

    @property
    def live_gpus(self) -> list[Any]:
        return [g for g in self.snap.gpus if g.lost is None]

    @property
    def has_nvswitch(self) -> bool:
        return bool(self.snap.nvswitches)

    @property
    def has_nvlink(self) -> bool:
        return any(link.active is True for g in self.live_gpus for link in g.nvlinks)

    def host_errors(self, prefix: str) -> list[ProbeError]:
        """Host-level probe failures (listings, host files) whose call starts with ``prefix``."""
        return [e for e in self.snap.probe_errors if e.call.startswith(prefix)]
