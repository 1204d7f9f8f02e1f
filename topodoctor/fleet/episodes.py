"""What a node's (or a GPU's) results say over time besides its figures: lemons (TD951, TD952),
flapping findings (TD953), counters rising across days (TD954), GPUs replaced (TD955) and a node
gone silent (TD956).

A *check* here is a result with a verdict: it failed (a finding at the fail level, or a verdict
of unhealthy) or it passed. A *repair* is a passing check after a failing one (a GPU replaced
after a failure is one too). Only checks of kind ``check`` are counted where the node has any:
a day's bandwidth run failing beside its check is one failure, not two.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from topodoctor.fleet.codes import finding
from topodoctor.fleet.request import HistoryRequest
from topodoctor.fleet.rows import unpack_ints
from topodoctor.fleet.timeline import DAY_S, Past, day, gpus_of
from topodoctor.model.findings import SEVERITY_ORDER, Finding, Severity
from topodoctor.model.stamp import utc_iso


@dataclass(frozen=True)
class Verdict:
    """One check: when, whether it failed, and the failing findings' codes and subjects."""

    t: float
    failed: bool
    why: tuple[str, ...] = ()


def checks(recs: Sequence[Past]) -> list[Past]:
    """The results that count as checks: those of kind check with a verdict, else any with one."""
    judged = [r for r in recs if r.verdict is not None]
    mine = [r for r in judged if r.kind == "check"]
    return mine or judged


def lemon(
    subject: str, code: str, seq: Sequence[Verdict], repairs: Sequence[float], st: HistoryRequest, who: str
) -> Finding | None:
    """TD951 / TD952 when ``seq`` (oldest first) failed k of its last n checks, or failed within D
    days after a repair (``repairs``: times of other repairs, a GPU replaced after a failure).
    ``who`` names it in the message: "the node", "GPU ... (serial ...)"."""
    last = list(seq[-st.lemon_n :])
    fails = [v for v in last if v.failed]
    evidence: dict[str, object] = {
        "checks": len(last),
        "failed": len(fails),
        "failed_at": [utc_iso(v.t) for v in fails],
        "failed_with": sorted({w for v in fails for w in v.why}),
    }
    if len(fails) >= st.lemon_k:
        shown = ", ".join(day(v.t) for v in fails[-5:])
        why = f": {evidence['failed_with'][0]}" if evidence["failed_with"] else ""  # type: ignore[index]
        msg = f"{who} failed {len(fails)} of its last {len(last)} checks ({shown}){why}"
        return finding(code, subject, msg, {**evidence, "rule": f"{st.lemon_k} of {st.lemon_n}"})
    fixed = sorted(set(repairs) | set(_repairs(seq)))
    first = last[0].t if last else 0.0
    for v in reversed(fails):
        before = [t for t in fixed if t < v.t and t >= first - st.repair_days * DAY_S]
        if before and v.t - before[-1] <= st.repair_days * DAY_S:
            gap = (v.t - before[-1]) / DAY_S
            msg = (
                f"{who} failed again on {day(v.t)}, {gap:.1f} days after its repair on {day(before[-1])} "
                f"(within {st.repair_days:g})"
            )
            return finding(code, subject, msg, {**evidence, "repaired_at": utc_iso(before[-1]), "days": round(gap, 2)})
    return None


def _repairs(seq: Sequence[Verdict]) -> list[float]:
    out, failing = [], False
    for v in seq:
        if v.failed:
            failing = True
        elif failing:
            out.append(v.t)
            failing = False
    return out


def flapping(recs: Sequence[Past], st: HistoryRequest, fail_level: str) -> list[Finding]:
    """TD953 for each finding (code and subject) at or above the flap level that cleared
    ``flap_clears`` times within the last ``flap_results`` results of its kind."""
    out = []
    bar = SEVERITY_ORDER[st.flap_level]
    by_kind: dict[str, list[Past]] = defaultdict(list)
    for r in recs:
        if r.verdict is not None:
            by_kind[r.kind].append(r)
    for kind, rs in sorted(by_kind.items()):
        rs = rs[-st.flap_results :]
        if len({r.row.finding_keys for r in rs}) == 1:
            continue  # the same findings in every result: nothing appeared or cleared
        present: dict[tuple[str, str], list[bool]] = {}
        worst: dict[tuple[str, str], str] = {}
        sets = [{(c, s) for level, c, s in r.keys if SEVERITY_ORDER.get(level, 0) >= bar} for r in rs]
        for r in rs:
            for level, c, s in r.keys:
                if SEVERITY_ORDER.get(level, 0) >= max(bar, SEVERITY_ORDER[worst.get((c, s), "info")]):
                    worst[(c, s)] = level
        for key in worst:
            present[key] = [key in got for got in sets]
        for (code, subject), seen in sorted(present.items()):
            clears = sum(1 for a, b in pairwise(seen) if a and not b)
            if clears < st.flap_clears:
                continue
            on = [day(r.t) for r, p in zip(rs, seen) if p]
            off = [day(r.t) for r, p in zip(rs, seen) if not p]
            sev: Severity = (
                "error" if SEVERITY_ORDER[worst[(code, subject)]] >= SEVERITY_ORDER[fail_level] else "warning"
            )
            msg = (
                f"{code} {subject} appeared and cleared {clears} times in the last {len(rs)} {kind} results "
                f"(present {', '.join(on[-4:])}; clear {', '.join(off[-4:])})"
            )
            evidence = {"code": code, "kind": kind, "clears": clears, "results": len(rs), "present": on, "clear": off}
            out.append(finding("TD953", subject, msg, evidence, sev))
    return out


def replaced(recs: Sequence[Past]) -> tuple[list[Finding], list[float]]:
    """TD955 for each GPU whose UUID changed between two results, and the times it happened."""
    out: list[Finding] = []
    times: list[float] = []
    if len({r.row.gpus for r in recs}) <= 1:
        return out, times  # the same GPUs in every result
    last: dict[int, tuple[str | None, str | None, float]] = {}
    for r in recs:
        for index, (uuid, serial) in sorted(r.gpus.items()):
            before = last.get(index)
            if before is not None and uuid and before[0] and uuid != before[0]:
                msg = (
                    f"GPU{index} is another GPU since {day(r.t)}: {uuid} (serial {serial or '?'}), "
                    f"before {before[0]} (serial {before[1] or '?'}, last seen {day(before[2])})"
                )
                ev = {
                    "at": utc_iso(r.t),
                    "uuid": uuid,
                    "serial": serial,
                    "old_uuid": before[0],
                    "old_serial": before[1],
                }
                out.append(finding("TD955", f"GPU{index}", msg, ev))
                times.append(r.t)
            last[index] = (uuid, serial, r.t)
    return out, times


def counters_rising(recs: Sequence[Past], blobs: dict[int, object], st: HistoryRequest, now: float) -> list[Finding]:
    """TD954 for each counter that rose by its minimum on ``counter_rise_days`` days of the last
    ``counter_days``. A drop is a reset (a reboot, a driver reload): the count starts again from zero.
    A GPU's series is broken where its UUID changes (another GPU, another count)."""
    start = now - st.counter_days * DAY_S
    prev: dict[tuple[str, str], int] = {}
    rises: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    first: dict[tuple[str, str], tuple[float, int]] = {}
    last_keys, last_bytes = None, None
    for r in recs:
        row = r.row
        if row.counter_keys is None:
            continue
        if row.counter_keys == last_keys and row.counter_values == last_bytes:
            continue  # the same counts as the result before: nothing rose, nothing to remember
        last_keys, last_bytes = row.counter_keys, row.counter_values
        for (subject, counter), value in zip(blobs[row.counter_keys], unpack_ints(row.counter_values)):  # type: ignore[call-overload]
            g = gpus_of(subject)
            key = (f"{subject}@{r.uuid(g[0])}" if g else subject, counter)
            before = prev.get(key)
            prev[key] = value
            if before is None or r.t < start:
                continue
            first.setdefault(key, (r.t, before))
            rise = value - before if value >= before else value
            if rise >= st.min_rises.get(counter, 1):
                d = day(r.t)
                rises[key][d] = rises[key].get(d, 0) + rise
    out = []
    for (where, counter), days in sorted(rises.items()):
        if len(days) < st.counter_rise_days:
            continue
        subject = where.split("@", 1)[0]
        total = sum(days.values())
        t0, v0 = first[(where, counter)]
        shown = ", ".join(f"{d[5:]} +{n}" for d, n in sorted(days.items())[-5:])
        msg = f"{subject} {counter} rose on {len(days)} days of the last {st.counter_days:g} ({shown}): +{total} in all"
        ev = {"counter": counter, "days": dict(sorted(days.items())), "rise": total, "from": v0, "since": utc_iso(t0)}
        out.append(finding("TD954", subject, msg, ev))
    return out


def silent(recs: Sequence[Past], st: HistoryRequest, now: float) -> Finding | None:
    """TD956 when the node's latest result is older than ``stale_days``."""
    t = recs[-1].t
    if now - t <= st.stale_days * DAY_S:
        return None
    msg = f"no result since {day(t)} ({(now - t) / DAY_S:.1f} days; the limit is {st.stale_days:g})"
    return finding("TD956", "node", msg, {"last_result": utc_iso(t), "days": round((now - t) / DAY_S, 2)})


def gpu_failures(r: Past) -> dict[str, list[str]]:
    """The failing findings of a result by the UUID of each GPU they name."""
    out: dict[str, list[str]] = defaultdict(list)
    for _sev, code, subject in r.failing:
        for index in gpus_of(subject):
            uuid = r.uuid(index)
            if uuid:
                out[uuid].append(f"{code} {subject}")
    return out
