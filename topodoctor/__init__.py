"""topodoctor: GPU topology inspector and doctor.

From Python (docs/api.md)::

    import topodoctor
    host = topodoctor.scan()                  # or scan(replay="h200-x4")
    host.graph                                # a networkx.Graph
    report = topodoctor.check(host)           # findings, verdict, exit_code
    topodoctor.bandwidth(host), topodoctor.collectives(host), topodoctor.predict(host)
    topodoctor.diagnose(["nccl.txt", "topo.txt"])   # what a user brought, read and judged

Every name below loads its module on first use (PEP 562): ``import topodoctor`` loads nothing else,
and ``topodoctor --version`` and ``--help`` pay nothing for the API.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's own flag, without importing typing (mypy reads the name as True)

# name -> the module that defines it
_LAZY = {
    "__version__": "topodoctor.core.version",
    "scan": "topodoctor.api.host",
    "Host": "topodoctor.api.host",
    "check": "topodoctor.api.verdict",
    "Report": "topodoctor.api.verdict",
    "bandwidth": "topodoctor.api.measure",
    "collectives": "topodoctor.api.measure",
    "predict": "topodoctor.api.measure",
    "diagnose": "topodoctor.api.diagnose",
    "Diagnosis": "topodoctor.api.diagnose",
    "TopodoctorError": "topodoctor.core.errors",
    "InputError": "topodoctor.core.errors",
    "ReplayMismatch": "topodoctor.core.errors",
    "ProbeUnavailable": "topodoctor.core.errors",
    "BudgetExceeded": "topodoctor.core.errors",
    "CannotMeasure": "topodoctor.core.errors",
    "BandwidthUnavailable": "topodoctor.core.errors",
    "CollectivesUnavailable": "topodoctor.core.errors",
    "Finding": "topodoctor.model.findings",
    "HostSnapshot": "topodoctor.model.snapshot",
    "BandwidthResult": "topodoctor.model.copies",
    "CollectivesResult": "topodoctor.model.collectives",
    "Prediction": "topodoctor.topology.busbw",
}

__all__ = [
    "BandwidthResult",
    "BandwidthUnavailable",
    "BudgetExceeded",
    "CannotMeasure",
    "CollectivesResult",
    "CollectivesUnavailable",
    "Diagnosis",
    "Finding",
    "Host",
    "HostSnapshot",
    "InputError",
    "Prediction",
    "ProbeUnavailable",
    "ReplayMismatch",
    "Report",
    "TopodoctorError",
    "__version__",
    "bandwidth",
    "check",
    "collectives",
    "diagnose",
    "predict",
    "scan",
]

if TYPE_CHECKING:  # what type checkers and editors see; at run time __getattr__ loads each on first use
    from typing import Any

    from topodoctor.api.diagnose import Diagnosis, diagnose
    from topodoctor.api.host import Host, scan
    from topodoctor.api.measure import bandwidth, collectives, predict
    from topodoctor.api.verdict import Report, check
    from topodoctor.core.errors import (
        BandwidthUnavailable,
        BudgetExceeded,
        CannotMeasure,
        CollectivesUnavailable,
        InputError,
        ProbeUnavailable,
        ReplayMismatch,
        TopodoctorError,
    )
    from topodoctor.core.version import __version__
    from topodoctor.model.collectives import CollectivesResult
    from topodoctor.model.copies import BandwidthResult
    from topodoctor.model.findings import Finding
    from topodoctor.model.snapshot import HostSnapshot
    from topodoctor.topology.busbw import Prediction


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use (PEP 562) and keep the name here."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'topodoctor' has no attribute {name!r}")
    value = getattr(__import__(where, fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
