"""The multi-node side of `topodoctor collectives`: the options that reach the ranks, the
launch check, and the Prometheus output. No torch here."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from topodoctor.core.errors import InputError
from topodoctor.measure.collectives.nodes import NodeSettings
from topodoctor.measure.collectives.world import World


def node_settings(
    pairwise: bool,
    expect_nodes: str | None,
    pair_size: str,
    tolerance: float,
    timeout_s: float,
    expected_gbps: float | None,
    nic_loopback: bool = False,
) -> NodeSettings:
    from topodoctor.model.collective_ops import parse_size

    names = tuple(dict.fromkeys(n.strip() for n in (expect_nodes or "").split(",") if n.strip()))
    return NodeSettings(
        pairwise=pairwise,
        expect_nodes=names,
        pair_size_bytes=parse_size(pair_size),
        pair_timeout_s=timeout_s,
        tolerance=tolerance,
        expected_gbps=expected_gbps,
        nic_loopback=nic_loopback,
    )


def check_launch(world: World | None, settings: NodeSettings) -> None:
    """A process that should be one of several nodes but sits in a world of one: the launch
    never handed it a world (nccl-tests' classic trap, "busbw 0"). A launch error, never a
    slow node: exit 2 with the cause."""
    from topodoctor.measure.collectives.nodes import node_name
    from topodoctor.model.pairwise import check_launch as judge_launch

    many = len(settings.expect_nodes) > 1
    if world is None and not many:
        return  # started on its own: topodoctor spawns the ranks of this node
    if (world is not None and world.world_size > 1) or not (many or settings.pairwise):
        return
    err = judge_launch(max(len(settings.expect_nodes), 2), {node_name(): 1})
    if err is not None:
        raise InputError(f"launch error: {err.cause} on {node_name()}; {err.fix}")


def emit_metrics(res: Any, findings: list[Any], path: Path | None, stdout: bool = False) -> None:
    """The run's metrics in Prometheus' text format: to ``path`` atomically, and/or stdout."""
    from topodoctor.core.errors import EXIT_OK, EXIT_UNHEALTHY
    from topodoctor.report.prometheus import collectives_metrics, write_textfile
    from topodoctor.service.check import failing

    code = EXIT_UNHEALTHY if failing(findings, "error") else EXIT_OK
    text = collectives_metrics(res.host, res.rows, findings, code, elapsed_s=res.wall_s)
    if path is not None:
        write_textfile(path, text)
    if stdout:
        sys.stdout.write(text)
