"""What rules read: the snapshot, its graph, the process environment, optional expectations
and bandwidth results. Built once per check; rules never probe anything themselves."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

from topodoctor.core.probed import Probed, ProbeError, Unsupported
from topodoctor.model.environment import NCCL_SYSTEM_CONF, Environment
from topodoctor.model.snapshot import HostSnapshot
from topodoctor.rules.registry import Unchecked
from topodoctor.topology.copy_rates import expected_pairs
from topodoctor.topology.view import HostView

__all__ = ["NCCL_SYSTEM_CONF", "Context", "Environment"]


if TYPE_CHECKING:
    from topodoctor.model.collectives import CollectivesResult
    from topodoctor.model.copies import BandwidthResult
    from topodoctor.model.evidence import Evidence
    from topodoctor.model.fitness_results import FitnessResult
    from topodoctor.topology.copy_rates import Expected
    from topodoctor.topology.expect import Expectations
    from topodoctor.topology.graph import BestPath
    from topodoctor.topology.hostgraph import HostGraph

T = TypeVar("T")


@dataclass
class Context:
    """Everything a rule may read: the snapshot, the process's NCCL / CUDA settings, the expectations
    and measurements, and the derived views of the host."""

    snap: HostSnapshot
    environment: Environment
    expect: Expectations | None = None
    bandwidth: BandwidthResult | None = None
    view: HostView | None = None  # shared with the caller's renderers; made here when not given
    # What a check measured or was given beside the snapshot; None where it was not asked for.
    collectives: CollectivesResult | None = None
    collectives_error: str | None = None  # why the collectives asked for have no result (TD005)
    collectives_expect_gbps: float | None = None  # --expect-busbw: what every op should reach
    fitness: FitnessResult | None = None  # check --level quick|long
    baseline: HostSnapshot | None = None  # check --baseline: an earlier snapshot of this node
    evidence: Evidence | None = None  # `diagnose`: what a user's outputs show (TD021-TD039 judge it)
    # The check gates a job (`--prolog`, or a job's GPUs in scope): a few findings weigh more.
    gates_job: bool = False
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

    def __post_init__(self) -> None:
        if self.view is None:
            self.view = HostView(self.snap)

    @property
    def graph(self) -> HostGraph:
        """The host's topology graph (built once, shared with the renderers)."""
        assert self.view is not None
        return self.view.graph

    @property
    def connections(self) -> dict[tuple[int, int], BestPath]:
        """Best path for every GPU pair (a < b), from the graph."""
        assert self.view is not None
        return self.view.connections

    @cached_property
    def expected_bandwidth(self) -> dict[tuple[int, int], Expected]:
        """What each ordered GPU pair should reach, from the graph (bandwidth rules)."""
        return expected_pairs(self.snap, self.graph)

    @property
    def live_gpus(self) -> list[Any]:
        """The GPUs that answered the probe (lost ones left out)."""
        return [g for g in self.snap.gpus if g.lost is None]

    @property
    def has_nvswitch(self) -> bool:
        """Whether the probe found NVSwitches."""
        return bool(self.snap.nvswitches)

    def has_nvlinks(self) -> bool:
        """Whether the GPUs have NVLinks, up or down (a link past NVML's link count is none): a
        setting that keeps NCCL off NVLink matters while the links are down too, once they are
        repaired. With no link's state read and some unreadable, the running rule could not check."""
        states = [
            (f"GPU{g.index}/nvlink{link.link}", link.active)
            for g in self.live_gpus
            for link in g.nvlinks
            if not (isinstance(g.nvlink_count, int) and link.link >= g.nvlink_count)
        ]
        if any(isinstance(state, bool) for _, state in states):
            return True
        for where, state in states:
            self.need(state, where, "active")
        return False

    def host_errors(self, prefix: str) -> list[ProbeError]:
        """Host-level probe failures (listings, host files) whose call starts with ``prefix``."""
        return [e for e in self.snap.probe_errors if e.call.startswith(prefix)]
