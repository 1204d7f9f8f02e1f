"""Prometheus metrics for node_exporter's textfile collector (`--format prometheus`).

The text is made by prometheus_client's own exposition (``generate_latest`` over a
collector of gauge families), so escaping and number formatting are the reference ones.
Conventions, which tests/report/test_prometheus.py holds every family to:

- one table (``FAMILIES``) names every metric, its HELP and its labels: two commands that
  write to the same textfile directory emit identical HELP and TYPE for a shared family,
  which node_exporter requires when it merges files, and a ``command`` label keeps their
  series apart;
- base units: bytes per second, seconds, ratios; no sample timestamps (the collector
  refuses them); the time of the run is a value, ``topodoctor_last_run_timestamp_seconds``;
- the GPU labels are dcgm-exporter's (``gpu``, ``UUID``, ``pci_bus_id`` in NVML's
  ``00000000:BB:DD.F`` form, ``Hostname``, never empty), so a query can join our series with
  its; but ``model_name``, not ``modelName``: ``promtool check metrics`` refuses camelCase;
- a check's every series carries its ``scope`` (``job`` for a check run for a Slurm job,
  whatever it judged; ``node`` for the node's own) and its run series the judged ``gpus``: a
  node's and a job's check file never hold the same series (node_exporter keeps the first file's
  and only logs the clash); a pair finding is one series per GPU, so a join by ``UUID`` finds it
  from either GPU;
- one file never holds a series twice: findings that share every label (one rule, two things
  found on one subject) are one series whose value counts them; any other clash is a bug, told
  as the file not written (promtool does not catch it; node_exporter would drop the file's series).

Write the text with ``write_textfile`` (atomic: a collector never reads half a file).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topodoctor.core.errors import WriteError
from topodoctor.core.fileio import write_atomic
from topodoctor.core.pci import long_bus_id as dcgm_bus_id
from topodoctor.core.text import label_safe
from topodoctor.core.version import __version__
from topodoctor.model.collective_rows import columns
from topodoctor.report.prometheus_fitness import FITNESS_FAMILIES, fitness_series
from topodoctor.report.prometheus_history import HISTORY_FAMILIES, history_series

if TYPE_CHECKING:
    from topodoctor.fleet.history import HistoryReport
    from topodoctor.fleet.rollup import FleetOutcome
    from topodoctor.model.collectives import Row
    from topodoctor.model.findings import Finding
    from topodoctor.model.snapshot import HostSnapshot

GPU = ("gpu", "UUID", "pci_bus_id")
RUN = ("command", "Hostname", "scope", "gpus")
FINDING = (*RUN, "code", "name", "severity", "subject", *GPU)
PAIR = ("Hostname", *GPU, "peer_gpu", "mode")
HOST_COPY = ("Hostname", *GPU, "direction")
G = ("Hostname", "scope", *GPU)

FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "topodoctor_build_info": ("topodoctor version that wrote this file; always 1.", (*RUN[:3], "version")),
    "topodoctor_last_run_timestamp_seconds": ("When the command ran, seconds since the Unix epoch.", RUN),
    "topodoctor_run_duration_seconds": ("How long the command ran, in seconds.", RUN),
    "topodoctor_exit_code": ("The command's exit code: 0 healthy, 1 unhealthy, 2 input error, 3 could not check.", RUN),
    "topodoctor_status": (
        "1 for the command's verdict (healthy, unhealthy, unknown), 0 for the others.",
        (*RUN, "status"),
    ),
    "topodoctor_findings": ("Findings of the run by severity.", (*RUN, "severity")),
    "topodoctor_finding": (
        "Findings of the run with these labels: 1, or how many things one rule found on one subject "
        "(see topodoctor explain CODE).",
        FINDING,
    ),
    "topodoctor_incomplete_checks": ("Rules that could not check their input in this run.", RUN),
    "topodoctor_could_not_check": ("Rules with these labels that could not check their input (usually 1).", FINDING),
    "topodoctor_gpus": ("GPUs the probe found.", ("Hostname", "scope")),
    "topodoctor_gpu_info": (
        "A GPU as topodoctor saw it; always 1.",
        ("Hostname", "scope", *GPU, "device", "model_name"),
    ),
    "topodoctor_bandwidth_pair_bytes_per_second": (
        "GPU-to-GPU copy bandwidth from gpu to peer_gpu (median of the samples); bidir: this direction alone.",
        PAIR,
    ),
    "topodoctor_bandwidth_pair_expected_bytes_per_second": (
        "What the pair's path should carry per direction, from the topology (signalling rate).",
        PAIR,
    ),
    "topodoctor_bandwidth_pair_expected_ratio": ("Measured pair bandwidth over the expected.", PAIR),
    "topodoctor_bandwidth_pair_latency_seconds": (
        "Latency of one small GPU-to-GPU copy.",
        ("Hostname", *GPU, "peer_gpu"),
    ),
    "topodoctor_bandwidth_pair_load_latency_seconds": (
        "Load latency a kernel on gpu sees reading peer_gpu's memory (SM pointer chase).",
        ("Hostname", *GPU, "peer_gpu"),
    ),
    "topodoctor_bandwidth_host_bytes_per_second": ("Host copy bandwidth (pinned memory): h2d or d2h.", HOST_COPY),
    "topodoctor_bandwidth_host_expected_ratio": ("Host copy bandwidth over the GPU's PCIe link rate.", HOST_COPY),
    "topodoctor_bandwidth_measurement_failed": (
        "Copy measurements that failed, with these labels (usually 1). reason: timeout, error or data_mismatch.",
        (*PAIR, "reason"),
    ),
    "topodoctor_collective_busbw_bytes_per_second": (
        "Collective bus bandwidth as nccl-tests defines it, per op, size and placement.",
        ("Hostname", "op", "size_bytes", "in_place"),
    ),
    "topodoctor_collective_algbw_bytes_per_second": (
        "Collective algorithm bandwidth (size over time), per op, size and placement.",
        ("Hostname", "op", "size_bytes", "in_place"),
    ),
    "topodoctor_collective_time_seconds": (
        "Time of one collective, per op, size and placement.",
        ("Hostname", "op", "size_bytes", "in_place"),
    ),
    "topodoctor_collective_wrong_elements": (
        "Elements that failed the data check, per op, size and placement.",
        ("Hostname", "op", "size_bytes", "in_place"),
    ),
    "topodoctor_hbm_bytes_per_second": (
        "Device-local copy bandwidth (bytes copied once): engine ce or sm.",
        (*G, "engine"),
    ),
    "topodoctor_compute_flops_per_second": ("Sustained GEMM rate, every GPU loaded at once.", (*G, "dtype")),
    "topodoctor_sm_copy_bytes_per_second": (
        "SM-initiated copy bandwidth (peer_gpu -1: host memory), per direction.",
        (*G, "peer_gpu", "initiator", "bidir"),
    ),
    "topodoctor_sm_latency_seconds": (
        "Pointer-chase read latency into peer_gpu's memory (-1: host).",
        (*G, "peer_gpu"),
    ),
    "topodoctor_fleet_nodes": ("Nodes in the roll-up by state.", ("state",)),
    "topodoctor_fleet_node_status": (
        "1 for the node's state (healthy, slow, unhealthy, unknown), 0 for the others.",
        ("Hostname", "state"),
    ),
    "topodoctor_fleet_node_drain": ("1 when the roll-up would drain the node.", ("Hostname",)),
    "topodoctor_fleet_outlier_ratio": (
        "A node's figure over the median of the nodes of its type, for figures judged slow.",
        ("Hostname", "source", "figure"),
    ),
    "topodoctor_fleet_unreadable_files": ("Result files the roll-up could not read.", ()),
    **FITNESS_FAMILIES,
    **HISTORY_FAMILIES,
}
# Families whose series count things: two with the same labels add up, where any other
# family's clash is a bug.
COUNTED = frozenset(
    {
        "topodoctor_finding",
        "topodoctor_could_not_check",
        "topodoctor_bandwidth_measurement_failed",
        "topodoctor_fleet_history_finding",
    }
)
STATUSES = ("healthy", "unhealthy", "unknown")
SEVERITIES = ("critical", "error", "warning", "info")
_SUBJECT_GPU = re.compile(r"^GPU(\d+)\b")
_SUBJECT_PAIR = re.compile(r"^GPU(\d+)-GPU(\d+)\b")


@dataclass(frozen=True)
class GpuLabels:
    """The labels of a GPU's series, as dcgm-exporter names them so the two join (``model_name`` aside)."""

    gpu: str
    UUID: str
    pci_bus_id: str
    device: str
    model_name: str


def gpu_labels(snap: HostSnapshot | None) -> dict[int, GpuLabels]:
    """Join labels per NVML index; a field the probe could not read is an empty label (absent)."""
    if snap is None:
        return {}

    def s(v: object) -> str:
        return v if isinstance(v, str) else ""

    return {
        g.index: GpuLabels(
            str(g.index),
            s(g.uuid),
            dcgm_bus_id(g.bus_id) if isinstance(g.bus_id, str) else "",
            f"nvidia{g.minor_number}" if isinstance(g.minor_number, int) else "",
            s(g.name),
        )
        for g in snap.gpus
    }


class _Metrics:
    """Gauge families in the order first used, each checked against FAMILIES, each series once.

    ``every`` holds labels every series of the file carries (a check's ``scope``): a family
    without one of them cannot be written to this file, so a job's and the node's files stay
    apart whatever is added to them."""

    def __init__(self, every: dict[str, str] | None = None) -> None:
        self._values: dict[str, dict[tuple[str, ...], float]] = {}
        self._every = every or {}

    def add(self, family: str, value: float, /, **labels: str) -> None:
        _, names = FAMILIES[family]
        if set(labels) - set(names):
            raise ValueError(f"{family}: labels {sorted(set(labels) - set(names))} are not in its table entry")
        if set(self._every) - set(names):
            raise ValueError(f"{family}: has no {sorted(set(self._every) - set(names))} label to keep its file apart")
        # A label value holds what the host named (a GPU, a host, a variable's value).
        key = tuple(label_safe(labels.get(k, self._every.get(k, ""))) for k in names)
        series = self._values.setdefault(family, {})
        if key in series and family not in COUNTED:
            # Our bug, told as the file not written (never instead of the verdict, as any failed write).
            raise WriteError(f"cannot write the metrics: a second {family} series {dict(zip(names, key))} (a bug)")
        series[key] = series.get(key, 0.0) + float(value)

    def gpu(self, labels: dict[int, GpuLabels], index: int | None) -> dict[str, str]:
        g = labels.get(index) if index is not None else None
        if g is None:
            return {"gpu": str(index) if index is not None and index >= 0 else "", "UUID": "", "pci_bus_id": ""}
        return {"gpu": g.gpu, "UUID": g.UUID, "pci_bus_id": g.pci_bus_id}

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        for name, series in self._values.items():
            help_text, names = FAMILIES[name]
            fam = GaugeMetricFamily(name, help_text, labels=list(names))
            for key, value in series.items():
                fam.add_metric(list(key), value)
            yield fam

    def text(self) -> str:
        from prometheus_client import CollectorRegistry, generate_latest

        registry = CollectorRegistry(auto_describe=False)
        registry.register(self)
        return generate_latest(registry).decode("utf-8")


@dataclass(frozen=True)
class Run:
    """The labels every series of one run carries; without a host, this host's name (never empty)."""

    command: str
    host: str
    scope: str = "node"  # node, job (a job's GPUs only) or fleet
    gpus: str = ""  # the judged GPUs' indices, "0,1"; empty where the run is not about GPUs

    def labels(self) -> dict[str, str]:
        """The run's labels as a dict, the host filled in."""
        import socket  # only for a run with no host named (3 modules)

        host = self.host or socket.gethostname() or "localhost"
        return {"command": self.command, "Hostname": host, "scope": self.scope, "gpus": self.gpus}


def _run(m: _Metrics, run: Run, run_time: float | None, elapsed_s: float | None, exit_code: int) -> None:
    where = run.labels()
    m.add("topodoctor_build_info", 1, version=__version__, **{k: where[k] for k in ("command", "Hostname", "scope")})
    now = time.time() if run_time is None else run_time
    m.add("topodoctor_last_run_timestamp_seconds", now, **where)
    if elapsed_s is not None:
        m.add("topodoctor_run_duration_seconds", elapsed_s, **where)
    m.add("topodoctor_exit_code", exit_code, **where)
    status = {0: "healthy", 1: "unhealthy"}.get(exit_code, "unknown")
    for s in STATUSES:
        m.add("topodoctor_status", 1 if s == status else 0, status=s, **where)


def _findings(m: _Metrics, run: Run, labels: dict[int, GpuLabels], findings: Sequence[Finding], family: str) -> None:
    """One series per finding (per GPU of a pair), findings that share every label counted in
    one; ``topodoctor_finding`` also gets the counts by severity."""
    where = run.labels()
    if family == "topodoctor_finding":
        for sev in SEVERITIES:
            n = sum(1 for f in findings if f.severity == sev)
            m.add("topodoctor_findings", n, severity=sev, **where)
    for f in findings:
        pair, one = _SUBJECT_PAIR.match(f.subject), _SUBJECT_GPU.match(f.subject)
        gpus = [int(pair.group(1)), int(pair.group(2))] if pair else [int(one.group(1))] if one else [None]
        what = {"code": f.code, "name": f.name, "severity": f.severity, "subject": f.subject}
        for gpu in gpus:
            m.add(family, 1, **what, **where, **m.gpu(labels, gpu))


def check_metrics(
    findings: Sequence[Finding],
    incomplete: Sequence[Finding],
    exit_code: int,
    snapshot: HostSnapshot | None,
    elapsed_s: float | None = None,
    run_time: float | None = None,
    host: str | None = None,
    scope: str = "node",
    scope_gpus: Sequence[int] | None = None,
    fitness: Any = None,
) -> str:
    """`check --format prometheus`: status, one series per finding and per rule that could not
    check, the GPUs seen, and the fitness figures where a level measured them. With no snapshot
    (the probe failed, exit code 3) the file still says "unknown" with the time of the run,
    rather than keeping the last good answer. ``scope_gpus``: the GPUs judged (default: all)."""
    hostname = host or (snapshot.host.hostname if snapshot is not None else "")
    labels = gpu_labels(snapshot)
    judged = sorted(labels) if scope_gpus is None else list(scope_gpus)
    run = Run("check", hostname, scope, ",".join(str(i) for i in judged))
    hostname = run.labels()["Hostname"]
    m = _Metrics({"scope": scope})
    _run(m, run, run_time, elapsed_s, exit_code)
    _findings(m, run, labels, findings, "topodoctor_finding")
    m.add("topodoctor_incomplete_checks", len(incomplete), **run.labels())
    _findings(m, run, labels, incomplete, "topodoctor_could_not_check")
    if snapshot is not None:
        # A job's file speaks of the job's GPUs; the node's own check writes every GPU's.
        shown = set(judged) if scope == "job" else set(labels)
        m.add("topodoctor_gpus", len(snapshot.gpus), Hostname=hostname, scope=scope)
        for i, g in labels.items():
            if i in shown:
                m.add("topodoctor_gpu_info", 1, Hostname=hostname, scope=scope, **asdict(g))
        fitness_series(m.add, hostname, lambda i: m.gpu(labels, i), snapshot, shown)
    if fitness is not None:
        from topodoctor.report.fitness import fitness_metrics  # rich, which report.fitness draws with: only for fitness

        fitness_metrics(m, hostname, labels, fitness)
    return m.text()


def collectives_metrics(
    host: str,
    rows: Iterable[Row],
    findings: Sequence[Finding],
    exit_code: int,
    elapsed_s: float | None = None,
    run_time: float | None = None,
    snapshot: HostSnapshot | None = None,
) -> str:
    """`collectives --format prometheus`: busbw and algbw (bytes/s), time (seconds) and data
    errors per op, size and placement, with the run's findings (GPUs labelled from ``snapshot``).
    Rows of a world that spans nodes go to each node's own file under its own host name: call
    once per node."""
    run = Run("collectives", host)
    host = run.labels()["Hostname"]
    m = _Metrics()
    _run(m, run, run_time, elapsed_s, exit_code)
    _findings(m, run, gpu_labels(snapshot), findings, "topodoctor_finding")
    for r in columns(rows):
        place = "true" if r.in_place else "false"
        where = {"Hostname": host, "op": r.op, "size_bytes": str(r.size_bytes), "in_place": place}
        m.add("topodoctor_collective_busbw_bytes_per_second", r.busbw_gbps * 1e9, **where)
        m.add("topodoctor_collective_algbw_bytes_per_second", r.algbw_gbps * 1e9, **where)
        m.add("topodoctor_collective_time_seconds", r.time_us * 1e-6, **where)
        if r.wrong is not None:
            m.add("topodoctor_collective_wrong_elements", r.wrong, **where)
    return m.text()


def fleet_metrics(
    report: FleetOutcome,
    run_time: float | None = None,
    exit_code: int | None = None,
    history: HistoryReport | None = None,
) -> str:
    """`fleet --format prometheus`: one state series set per node, drains, outlier ratios; with a
    history, its findings and drift ratios."""
    m = _Metrics()
    _run(m, Run("fleet", "", "fleet"), run_time, None, report.exit_code if exit_code is None else exit_code)
    states = ("healthy", "slow", "unhealthy", "unknown")
    for s in states:
        m.add("topodoctor_fleet_nodes", sum(1 for n in report.nodes if n.state == s), state=s)
    for n in report.nodes:
        for s in states:
            m.add("topodoctor_fleet_node_status", 1 if n.state == s else 0, Hostname=n.node, state=s)
        m.add("topodoctor_fleet_node_drain", 1 if n.drain else 0, Hostname=n.node)
    for o in report.outliers:
        m.add("topodoctor_fleet_outlier_ratio", o.ratio, Hostname=o.node, source=o.source, figure=o.figure)
    m.add("topodoctor_fleet_unreadable_files", len(report.unreadable))
    if history is not None:
        history_series(m.add, history)
    return m.text()


def write_textfile(path: Path | str, text: str) -> None:
    """Write a metrics file for the textfile collector atomically (name it ``*.prom``)."""
    write_atomic(path, text, "metrics file")
