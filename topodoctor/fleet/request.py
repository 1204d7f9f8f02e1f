"""``fleet``'s request: every option of the command, declared once by the spec (core/options.py),
in parts that are what the roll-up (``FleetThresholds``) and the history (``HistoryRequest``)
judge by: the command line builds them, and the fleet reads them as they are."""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from topodoctor.core.errors import InputError
from topodoctor.core.options import argument, group, option
from topodoctor.core.shared_options import config_file, fail_level, fmt, output, timeout


def _history(flag: str, default: object, metavar: str, help: str, **spec: object) -> Any:
    """An option of ``fleet --history``'s."""
    return option(flag, default=default, metavar=metavar, help=help, **spec)


def _threshold(flag: str, default: object, metavar: str, help: str, **spec: object) -> Any:
    """A threshold of ``fleet``: a setting of the config file's table (``topodoctor config``); its
    flag still sets it for one run, and is left out of the help."""
    return option(flag, default=default, metavar=metavar, help=help, setting=True, hidden=True, **spec)


@dataclass(frozen=True)
class HistoryRequest:
    """``fleet --history``: the results kept in a database, and each node judged over time: what
    the history reads (fleet/history.py ``judge``) as it is. docs/fleet.md says why each default
    is what it is."""

    CONFIG_TABLE: ClassVar[str] = "history"  # its settings' table: [fleet.history]

    history_db: Path | None = _history(
        "--history",
        None,
        "DB",
        "A SQLite history on this host's disk (not a network file system): RESULT... are added to it "
        "(made if absent), then every node is judged over time; without RESULT..., from it alone.",
        kind=Path,
    )
    as_of: str | None = _history("--as-of", None, "TIME", "Judge as of this UTC time (ISO 8601); default now.")
    window_days: float = _threshold(
        "--window-days", 30.0, "DAYS", "Read the results of this many days before --as-of.", kind=float, minimum=1.0
    )
    baseline: int = _threshold(
        "--baseline", 7, "N", "A node's own baseline: the median of its last N healthy results.", kind=int, minimum=1
    )
    min_baseline: int = _threshold(
        "--min-baseline", 3, "N", "Judge a figure against its own past from N healthy results.", kind=int, minimum=1
    )
    drift_tolerance: float = _threshold(
        "--drift-tolerance",
        0.05,
        "SHARE",
        "A rate this share below its own baseline has drifted.",
        kind=float,
        minimum=0.0,
        maximum=0.9,
    )
    lemon_k: int = _threshold("--lemon-k", 3, "K", "A node or GPU that failed K ...", kind=int, minimum=1)
    lemon_n: int = _threshold("--lemon-n", 10, "N", "... of its last N checks is a lemon.", kind=int, minimum=1)
    repair_days: float = _threshold(
        "--repair-days", 7.0, "D", "Failing again within D days of a repair is a lemon too.", kind=float, minimum=0.0
    )
    flap_results: int = _threshold(
        "--flap-results",
        14,
        "N",
        "Count a finding's appearing and clearing in the last N results.",
        kind=int,
        minimum=2,
    )
    flap_clears: int = _threshold(
        "--flap-clears", 2, "N", "A finding that cleared N times in them is flapping.", kind=int, minimum=1
    )
    flap_level: str = _threshold(
        "--flap-level",
        "warning",
        "LEVEL",
        "Follow the flapping of findings from this severity.",
        choices=("info", "warning", "error", "critical"),
    )
    counter_days: float = _threshold(
        "--counter-days", 7.0, "DAYS", "Watch health counters over the last DAYS days.", kind=float, minimum=1.0
    )
    counter_rise_days: int = _threshold(
        "--counter-rise-days", 3, "N", "A counter that rose on N of those days is rising.", kind=int, minimum=1
    )
    counter_min_rise: tuple[str, ...] = _threshold(
        "--counter-min-rise",
        (),
        "NAME=N",
        "A day's rise of counter NAME below N does not count (repeatable; default nvlink_crc=100).",
        many=True,
    )
    stale_days: float = _threshold(
        "--stale-days", 3.0, "DAYS", "A node with no result for DAYS days is silent.", kind=float, minimum=0.0
    )
    keep_days: float = _threshold(
        "--keep-days", 90.0, "DAYS", "Delete results older than DAYS days (0: keep all).", kind=float, minimum=0.0
    )
    max_mb: float = _threshold(
        "--max-mb",
        1024.0,
        "MB",
        "Delete the oldest results beyond MB megabytes (0: no bound).",
        kind=float,
        minimum=0.0,
    )
    heat_strip: Path | None = _history(
        "--heat-strip", None, "FILE", "Draw one figure, nodes by days: .svg, or .png (draw extra).", kind=Path
    )
    heat_figure: str = _history(
        "--heat-figure", "hbm ce GPU0", "FIGURE", "The heat strip's figure, as the findings name it."
    )

    @cached_property
    def min_rises(self) -> dict[str, int]:
        """Each counter's least rise a day that counts (--counter-min-rise NAME=N over the default)."""
        out = {"nvlink_crc": 100}  # raw CRC counts tick on healthy Hopper links: tens a day is no fault
        for item in self.counter_min_rise:
            name, eq, n = item.partition("=")
            if not eq or not name.strip() or not n.strip().isdigit():
                raise InputError(f"--counter-min-rise takes NAME=N (nvlink_crc=100); got {item!r}")
            out[name.strip()] = int(n)
        return out

    @property
    def heat_key(self) -> str | None:
        """The heat strip's figure, where a strip is drawn (--heat-strip)."""
        return self.heat_figure if self.heat_strip is not None else None

    def judged_by(self) -> dict[str, Any]:
        """The thresholds the history was judged by, as its JSON shows them."""
        kept = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in _NOT_THRESHOLDS}
        return {**kept, "counter_min_rise": self.min_rises, "heat_figure": self.heat_key}


_NOT_THRESHOLDS = {"history_db", "as_of", "keep_days", "max_mb", "heat_strip"}  # where, when and what to keep


@dataclass(frozen=True)
class FleetThresholds:
    """How the fleet is judged: the tolerance and robust-z threshold for outliers, how many peers a
    figure needs, the fail level, and when a shared finding is fleet-wide (fleet/rollup.py)."""

    CONFIG_TABLE: ClassVar[str] = ""  # settings of the command's own table: [fleet]

    tolerance: float = option(
        "--tolerance",
        setting=True,
        hidden=True,
        default=0.05,
        metavar="SHARE",
        kind=float,
        minimum=0.0,
        maximum=0.9,
        help="A figure this share below the fleet median may be slow.",
    )
    latency_tolerance: float = option(
        "--latency-tolerance",
        setting=True,
        hidden=True,
        default=0.15,
        metavar="SHARE",
        kind=float,
        minimum=0.0,
        help="A latency this share above the median (its peers', or its own baseline's) may be slow.",
    )
    z_threshold: float = option(
        "--z",
        setting=True,
        hidden=True,
        default=3.5,
        metavar="Z",
        kind=float,
        minimum=0.0,
        help="... and this many robust standard deviations (MAD) below it.",
    )
    min_nodes: int = option(
        "--min-nodes",
        setting=True,
        hidden=True,
        default=3,
        metavar="N",
        kind=int,
        minimum=3,
        help="Compare a figure only when this many nodes measured it.",
    )
    fail_level: str = fail_level("Lowest severity of a node's finding that drains it.", setting=True)
    systemic_share: float = option(
        "--systemic-share",
        setting=True,
        hidden=True,
        default=0.5,
        metavar="SHARE",
        kind=float,
        minimum=0.0,
        maximum=1.0,
        help="A failing finding on more than this share of the nodes is fleet-wide: reported, drains no node.",
    )

    def judged_by(self) -> dict[str, Any]:
        """The thresholds, as the roll-up's JSON shows them (the latency's last, where it has always been)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        return {
            **{k: v for k, v in out.items() if k != "latency_tolerance"},
            "latency_tolerance": self.latency_tolerance,
        }


@dataclass(frozen=True)
class FleetRequest:
    """``fleet``: the results to roll up, how to compare nodes, the output, and the history. The
    command line's options build it; the service (service/fleet.py) reads it as it is, its parts
    (``thresholds``, ``history``) what the roll-up and the history judge by."""

    results: tuple[Path, ...] = argument("RESULT...", default=(), kind=Path, many=True)
    fmt: str = fmt(
        ("text", "json", "drain", "scontrol", "prometheus"),
        "text; json; drain (NODE REASON lines); scontrol (scontrol update lines); prometheus.",
    )
    output: Path | None = output("Write there (atomically) instead of to stdout.")
    details: bool = option(
        "--details", default=False, kind=bool, help="Text: every node and every reason in full, not one line each."
    )
    thresholds: FleetThresholds = group(FleetThresholds)
    name_from: str = option(
        "--name-from",
        default="host",
        metavar="FROM",
        choices=("host", "file"),
        help="Name nodes by the node in each result, or by the file name.",
    )
    timeout: float = timeout(60.0, setting=True)
    config: Path | None = config_file()
    history: HistoryRequest = group(HistoryRequest)
