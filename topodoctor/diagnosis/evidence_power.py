"""A GPU's power limit below its default (TD992), as nvidia-smi -q or the reporter's lines state it:
said on its own, figure or none, since a cap slows every step of every job on that GPU."""

from __future__ import annotations

from topodoctor.diagnosis.evidence_facts import Facts
from topodoctor.model.findings import Severity

# Below this share of its default a limit is a cap someone set: boards differ by a few watts between a
# default and what a vendor ships, and nvidia-smi prints limits to the hundredth of a watt.
CAPPED_SHARE = 0.9
# A GPU's performance against its power is flat near the top of the curve: a cap down to about three quarters of
# the default costs a few percent of a compute-bound step and little of a transfer's bandwidth, so such a cap is
# said (info) and not offered as the cause of a slow run; below it the clocks fall steeply (warning).
DEEP_CAP_SHARE = 0.75


def power_findings(f: Facts) -> list[tuple[Severity, str, str, dict[str, object]]]:
    """(severity, subject, message, evidence) per distinct cap: the GPUs held below their default."""
    capped: dict[tuple[float, float], set[int]] = {}
    where: dict[tuple[float, float], set[str]] = {}
    for g in f.gpus:
        limit, default = g.power_limit_w, g.power_default_w
        if limit is None or not default or limit >= CAPPED_SHARE * default:
            continue
        capped.setdefault((limit, default), set()).add(g.index)
        where.setdefault((limit, default), set()).add(f.where.get(g.piece, "the evidence"))
    out: list[tuple[Severity, str, str, dict[str, object]]] = []
    for (limit, default), gpus in sorted(capped.items()):
        shown = ", ".join(f"GPU {i}" for i in sorted(gpus))
        share = limit / default
        msg = (
            f"{shown} {'runs' if len(gpus) == 1 else 'run'} with a power limit of {limit:g} W against "
            f"{'its' if len(gpus) == 1 else 'their'} default of {default:g} W ({share:.0%}): under load the clocks "
            f"come down to hold the cap, so every kernel and copy on {'it' if len(gpus) == 1 else 'them'} is slower "
            "than the board's figures, and a job over several GPUs waits on the most capped"
        )
        ev: dict[str, object] = {"gpus": sorted(gpus), "limit_w": limit, "default_w": default,
                                 "lines": sorted(where[(limit, default)])}  # fmt: skip
        subject = f"gpu:{min(gpus)}" if len(gpus) == 1 else "gpus"
        deep = share < DEEP_CAP_SHARE
        if not deep:
            msg += "; a cap this mild costs a few percent of a compute-bound step at most, not a slow run's cause"
        out.append(("warning" if deep else "info", subject, msg, ev))
    return out
