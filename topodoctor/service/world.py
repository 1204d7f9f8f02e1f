"""A launcher's world (torchrun, srun) as the command line ends: every rank leaves with one code."""

from __future__ import annotations


def leave_world(code: int) -> int:
    """The exit code this process leaves with: its own, or the world's when it is a rank of one.

    Loads the collectives' exit protocol only here, at the very end of a command, and only in a
    process that could have joined a world: one that never imported torch did not."""
    import sys

    if "torch" not in sys.modules:
        return code
    from topodoctor.measure.collectives.rank.leave import leave_world as leave  # torch: only a rank leaves a world

    return leave(code)
