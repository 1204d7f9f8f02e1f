"""Evidence as the results the measuring commands judge: nccl-tests' text tables as a
``CollectivesResult`` (what ``collectives --from`` reads from nccl-tests' ``-J`` JSON, so the same
rules judge a pasted table), with NCCL's account where the same text carries its INFO lines."""

from __future__ import annotations

from topodoctor.core.errors import InputError
from topodoctor.model.collectives import COLLECTIVES_SCHEMA_VERSION, CollectivesResult
from topodoctor.model.evidence import Evidence


def collectives_result(ev: Evidence, what: str) -> CollectivesResult:
    """Every nccl-tests run of the evidence as one result (the runs of one paste, one op each)."""
    runs = [c for c in ev.collectives if ev.pieces[c.piece].kind == "nccl-tests" and c.rows]
    if not runs and not ev.pieces:
        raise InputError(f"{what} is neither JSON nor nccl-tests' output")
    if not runs:
        kinds = ", ".join(dict.fromkeys(p.kind for p in ev.pieces))
        raise InputError(f"{what}: no nccl-tests table (it holds {kinds}); `topodoctor diagnose` reads it")
    first = runs[0]
    env = {s.name: s.value for s in ev.settings if s.how == "NCCL INFO"}
    return CollectivesResult(
        kind="collectives",
        schema_version=COLLECTIVES_SCHEMA_VERSION,
        source="nccl-tests",
        host=first.ranks[0].host if first.ranks else "",
        backend="nccl",
        world_size=first.nranks or len(first.ranks) or 1,
        torch_version="",
        nccl_version=first.nccl_version or (ev.nccl[0].version or "" if ev.nccl else ""),
        ranks=first.ranks,
        rows=tuple(r for c in runs for r in c.rows),
        failures=(),
        wall_s=0.0,
        settings={"program": ", ".join(dict.fromkeys(f"{c.op}_perf" for c in runs)), "check": None},
        env=env,
        nccl=ev.nccl[0] if len(ev.nccl) == 1 else None,
    )
