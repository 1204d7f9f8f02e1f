"""The options of the commands that read one host (scan, record, check, expect, rules, explain,
nccl-topo) and of ``config``: one frozen object per command, each field one option (cli/options.py). Light on
purpose: the console entry point reads a ``check`` or ``scan`` command line with these before
anything else loads."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from topodoctor.cli.options import (
    REQUIRED,
    argument,
    config_file,
    fail_level,
    fmt,
    metrics,
    option,
    output,
    picture,
    replay,
    rule_list,
    strict,
    sysfs_root,
    timeout,
)
from topodoctor.cli.run_times import took
from topodoctor.core.text import LINE_LIMIT
from topodoctor.service.passes import Source

DEFAULT_CHECK_TIMEOUT_S = 30.0
LEVEL_TIMEOUT_S = {"quick": 60.0, "long": 300.0}  # the default budget of a measuring level
LEVELS = ("static", "quick", "long")


@dataclass(frozen=True)
class ScanArgs:
    """``scan``: the host, how to print it, and the files to write."""

    replay: str | None = replay()
    fmt: str = fmt(("text", "json"), "text or json.", probes=True)
    export_graph: Path | None = option(
        "--export-graph",
        default=None,
        metavar="FILE",
        kind=Path,
        probes=True,
        help="Write the topology graph: .graphml, .dot or .json.",
    )
    draw: Path | None = picture("--draw", "it, with the findings marked", probes=True)
    sysfs_root: str = sysfs_root()
    timeout: float = timeout(60.0)

    def source(self) -> Source:
        """The host to probe. The text shows no fitness reading, so a text scan with no file to
        write reads the topology alone (half the NVML calls)."""
        return Source(
            self.replay, self.sysfs_root, self.fmt == "text" and self.draw is None and self.export_graph is None
        )

    def early_source(self) -> Source | None:
        """What the early probe reads for this command line: its host, or None with no budget
        (``--timeout 0`` promises no child process)."""
        return self.source() if self.timeout > 0 else None


@dataclass(frozen=True)
class RecordArgs:
    """``record``: where the recording goes, and what it keeps."""

    output: Path | None = output()
    label: str = option("--label", default="", metavar="TEXT", help="A name for the host kind.")
    no_scrub: bool = option("--no-scrub", default=False, kind=bool, help="Keep UUIDs, serials and the host name.")
    list_bundled: bool = option("--list", default=False, kind=bool, help="List the recordings bundled with topodoctor.")
    sysfs_root: str = sysfs_root()
    timeout: float = timeout(120.0)


@dataclass(frozen=True)
class CheckArgs:
    """``check``: the host, the rules and their verdict, what to measure, and the outputs."""

    replay: str | None = replay()
    fmt: str = fmt(("text", "json", "line", "prometheus"), "text, json, line (a drain reason) or prometheus.")
    line_limit: int = option(
        "--line-limit",
        default=LINE_LIMIT,
        metavar="N",
        kind=int,
        minimum=40,
        help="With --format line, the most characters of the line (node-problem-detector keeps 80).",
    )
    metrics: Path | None = metrics()
    timeout: float = timeout(DEFAULT_CHECK_TIMEOUT_S, setting=True)
    select: tuple[str, ...] = rule_list("--select")
    ignore: tuple[str, ...] = rule_list("--ignore")
    prolog: bool = option("--prolog", default=False, kind=bool, help="Only the rules tagged prolog (the fast subset).")
    strict: bool = strict()
    fail_level: str = fail_level(setting=True)
    expect: Path | None = option(
        "--expect", default=None, metavar="FILE", kind=Path, setting=True, help="Expectations file for this node type."
    )
    config: Path | None = config_file()
    baseline: Path | None = option(
        "--baseline",
        default=None,
        metavar="FILE",
        kind=Path,
        help="An earlier snapshot of this node (scan --format json, or a recording): PCIe and NIC error "
        "counters are judged by their rise since then, too.",
    )
    bandwidth: bool = option(
        "--bandwidth",
        default=False,
        kind=bool,
        probes=True,
        help=f"Add a quick copy pass ({took('check --bandwidth')}).",
    )
    collectives: bool = option(
        "--collectives",
        default=False,
        kind=bool,
        probes=True,
        help="Add a quick NCCL pass: all_reduce and sendrecv, 256 MiB.",
    )
    scope: str = option(
        "--scope",
        default="auto",
        metavar="SCOPE",
        choices=("auto", "job", "node"),
        help="job: only the GPUs SLURM_STEP_GPUS / SLURM_JOB_GPUS / CUDA_VISIBLE_DEVICES name (and node-wide "
        "facts); node: every GPU; auto: job when those name a subset.",
    )
    sysfs_root: str = sysfs_root()
    level: str = option(
        "--level",
        default="static",
        metavar="LEVEL",
        choices=LEVELS,
        probes=True,
        help=f"static (the topology, {took('check')}); quick (adds copies, HBM and a short collectives pass, "
        f"{took('check --level quick')}; --timeout 60 unless given); long (adds the GEMM stress and SM copies, "
        f"{took('check --level long')}; --timeout 300).",
    )

    @property
    def measures(self) -> bool:
        """Whether a measurement runs after the probe, in its child."""
        return self.level != "static" or self.bandwidth or self.collectives

    @property
    def budget_s(self) -> float:
        """The budget: --timeout, or a measuring level's own when --timeout was left at the default."""
        if self.level != "static" and self.timeout == DEFAULT_CHECK_TIMEOUT_S:
            return LEVEL_TIMEOUT_S[self.level]
        return self.timeout

    def source(self) -> Source:
        """The host to probe."""
        return Source(self.replay, self.sysfs_root)

    def early_source(self) -> Source | None:
        """What the early probe reads for this command line: its host, or None when a
        measurement runs in the child or there is no budget (no child process at all)."""
        return None if self.measures or self.timeout <= 0 else self.source()


@dataclass(frozen=True)
class RulesArgs:
    """``rules``: how to list them."""

    fmt: str = fmt(("text", "json"), "text or json.")
    markdown: bool = option("--markdown", default=False, kind=bool, help="Print docs/rules.md.")


@dataclass(frozen=True)
class ExplainArgs:
    """``explain CODE``."""

    code: str = argument("CODE")
    markdown: bool = option("--markdown", default=False, kind=bool, help="Print the Markdown source.")


@dataclass(frozen=True)
class ExpectArgs:
    """``expect``: the host to take the expectations from, and where to write them."""

    output: Path = output(default=REQUIRED)
    replay: str | None = replay()
    force: bool = option("--force", default=False, kind=bool, help="Write even from a host with error findings.")
    sysfs_root: str = sysfs_root()
    timeout: float = timeout(60.0)
    level: str = option(
        "--level",
        default="static",
        metavar="LEVEL",
        choices=LEVELS,
        help="quick or long: measure, and expect the figures (TD714).",
    )


@dataclass(frozen=True)
class NcclTopoArgs:
    """``nccl-topo``: write NCCL's topology file for the host, or check one against it."""

    output: Path | None = output("Where to write the topology XML ('-' for standard output).")
    lint: Path | None = option(
        "--lint",
        default=None,
        metavar="FILE",
        kind=Path,
        help="Instead, read this topology file as NCCL would and report what it gets wrong here.",
    )
    replay: str | None = replay()
    keep_flat: bool = option(
        "--keep-flat",
        default=False,
        kind=bool,
        help="In a VM whose PCIe tree is flat, leave it flat instead of giving each GPU and its NICs "
        "a switch of their own.",
    )
    sysfs_root: str = sysfs_root()
    timeout: float = timeout(60.0)


@dataclass(frozen=True)
class ConfigArgs:
    """``config``: which settings to show, from which file, and how."""

    command: str | None = argument("COMMAND", default=None)
    fmt: str = fmt(("text", "json"), "text or json.")
    config: Path | None = config_file()
