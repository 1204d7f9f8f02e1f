"""``check``'s request: every option of the command, declared once by the spec (core/options.py).
Light on purpose: the console entry point reads a ``check`` command line with it before anything
else loads, and the Python API builds the same object from its keywords."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from topodoctor.core.options import option
from topodoctor.core.shared_options import (
    config_file,
    fail_level,
    fmt,
    metrics,
    replay,
    rule_list,
    strict,
    sysfs_root,
    timeout,
)
from topodoctor.core.text import LINE_LIMIT
from topodoctor.model.findings import Severity, fail_from
from topodoctor.service.passes import Source
from topodoctor.service.run_times import took

DEFAULT_CHECK_TIMEOUT_S = 30.0
LEVEL_TIMEOUT_S = {"quick": 60.0, "long": 300.0}  # the default budget of a measuring level
LEVELS = ("static", "quick", "long")
Scope = Literal["auto", "job", "node"]  # --scope's choices, and the Python API's type
SCOPES = get_args(Scope)


@dataclass(frozen=True)
class CheckRequest:
    """``check``: the host, the rules and their verdict, what to measure, and the outputs. The
    command line's options and the Python API's keywords (``topodoctor.check``) both build it;
    the service (service/check.py) runs it as it is."""

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
        choices=SCOPES,
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

    @property
    def tags(self) -> tuple[str, ...]:
        """The rules' tags that select them: ("prolog",) for the fast subset."""
        return ("prolog",) if self.prolog else ()

    @property
    def fails_from(self) -> Severity:
        """The lowest severity that fails the check (--fail-level, or warning with --strict)."""
        return fail_from(self.fail_level, self.strict)

    def source(self) -> Source:
        """The host to probe."""
        return Source(self.replay, self.sysfs_root)

    def early_source(self) -> Source | None:
        """What the early probe reads for this command line: its host, or None when a
        measurement runs in the child or there is no budget (no child process at all)."""
        return None if self.measures or self.timeout <= 0 else self.source()
