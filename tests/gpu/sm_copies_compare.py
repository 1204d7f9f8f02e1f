"""Side by side, from the files tests/gpu/sm_copies_host.sh leaves in its work folder: each pair's
figure from `topodoctor bandwidth` over the reference tool's for the same pair and direction, and
the walls of the default command against p2pBandwidthLatencyTest's, with where the command's time
went (its timeline). Prints a table and writes summary.json beside the inputs.

    python3 tests/gpu/sm_copies_compare.py WORKDIR

Matrices of nvbandwidth are in CUDA ordinals; its read tests run the kernel (or copy engine) on
the row's GPU, which receives from the column's: our copy a->b is its cell [b][a]; its write
tests and its latency put the sender (the reader, for latency) in the row. A bidirectional test
holds three matrices one after another: read1 [r][c] is c->r, read2 is r->c, then their total.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any


def load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def nvb_tests(*docs: Any) -> dict[str, list[list[float | None]]]:
    out: dict[str, list[list[float | None]]] = {}
    for doc in docs:
        for case in ((doc or {}).get("nvbandwidth") or {}).get("testcases", []):
            rows = case.get("bandwidth_matrix") or []
            out[case["name"]] = [[_num(x) for x in row] for row in rows]
    return out


def _num(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if v == v and v > 0 else None


def cell(
    nvb: dict[str, list[list[float | None]]], name: str, r: int, c: int, block: int = 0, n: int = 0
) -> float | None:
    try:
        return nvb[name][block * n + r][c]
    except (KeyError, IndexError):
        return None


def p2p_latency(text: str) -> list[list[float]]:
    """p2pBandwidthLatencyTest's "P2P=Enabled Latency (P2P Writes) Matrix (us)", GPU rows."""
    lines = text.splitlines()
    try:
        at = next(i for i, line in enumerate(lines) if line.startswith("P2P=Enabled Latency (P2P Writes)"))
    except StopIteration:
        return []
    rows = []
    for line in lines[at + 2 :]:
        if not re.match(r"^\s+\d+\s", line):
            break
        rows.append([float(x) for x in line.split()[1:]])
    return rows


def refs(
    m: dict[str, Any], o: dict[int, int], n: int, nvb: dict[str, Any], lat: list[list[float]]
) -> list[tuple[str, float, float | None]]:
    """(what, ours, reference) for one measurement; several where two references apply."""
    a, b = o.get(m["src"], -1), o.get(m["dst"], -1)
    v = m["value"]["median"]
    rev = (m.get("reverse") or {}).get("median")
    mode = m["mode"]
    if mode == "oneway":
        return [("vs write_ce", v, cell(nvb, "device_to_device_memcpy_write_ce", a, b)),
                ("vs read_ce", v, cell(nvb, "device_to_device_memcpy_read_ce", b, a))]  # fmt: skip
    if mode == "bidir":
        return [
            ("fwd vs bidir write_ce", v, cell(nvb, "device_to_device_bidirectional_memcpy_write_ce", a, b, 1, n)),
            (
                "rev vs bidir write_ce",
                rev or 0.0,
                cell(nvb, "device_to_device_bidirectional_memcpy_write_ce", a, b, 0, n),
            ),
            ("fwd vs bidir read_ce", v, cell(nvb, "device_to_device_bidirectional_memcpy_read_ce", a, b, 1, n)),
        ]
    if mode == "h2d":
        return [("vs h2d_ce", v, cell(nvb, "host_to_device_memcpy_ce", 0, b))]
    if mode == "d2h":
        return [("vs d2h_ce", v, cell(nvb, "device_to_host_memcpy_ce", 0, a))]
    if mode == "sm_oneway":
        return [("vs read_sm", v, cell(nvb, "device_to_device_memcpy_read_sm", b, a))]
    if mode == "sm_bidir":
        return [
            ("fwd vs bidir read_sm", v, cell(nvb, "device_to_device_bidirectional_memcpy_read_sm", a, b, 1, n)),
            (
                "rev vs bidir read_sm",
                rev or 0.0,
                cell(nvb, "device_to_device_bidirectional_memcpy_read_sm", a, b, 0, n),
            ),
        ]
    if mode == "sm_latency":
        ref = cell(nvb, "device_to_device_latency_sm", a, b)
        return [("ns vs latency_sm (lower better)", v * 1000, ref)]
    if mode == "latency":
        ref = lat[a][b] if a < len(lat) and b < len(lat[a]) else None
        return [("us vs p2pBandwidthLatencyTest writes", v, ref)]
    return []


def ratios(result: Any, nvb: dict[str, Any], lat: list[list[float]]) -> list[dict[str, Any]]:
    if not result:
        return []
    o = {g["index"]: g["cuda_ordinal"] for g in result.get("gpus", [])}
    rows = []
    for m in result.get("measurements", []):
        if m.get("value") is None:
            rows.append(
                {"mode": m["mode"], "pair": f"{m['src']}->{m['dst']}", "what": m.get("skipped") or m.get("error")}
            )
            continue
        for what, ours, ref in refs(m, o, len(o), nvb, lat):
            rows.append({"mode": m["mode"], "pair": f"{m['src']}->{m['dst']}", "what": what, "ours": round(ours, 3),
                         "ref": ref, "ratio": round(ours / ref, 4) if ref else None,
                         "spread_pct": round(100 * (m["value"]["max"] - m["value"]["min"]) / m["value"]["median"], 2),
                         "verified": m.get("verified")})  # fmt: skip
    return rows


def walls(path: Path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        parts = line.split()
        if len(parts) >= 3 and parts[1] in ("0", "1"):  # label rc seconds: runs that answered (1: findings)
            out.setdefault(parts[0], []).append(float(parts[2]))
    return out


def medians(paths: list[Path]) -> tuple[dict[str, float], dict[str, float]]:
    """The median of each timeline mark and of each phase over the results at ``paths``, marks in
    the order they were reached."""
    timelines = [(load(p) or {}).get("timeline") or {} for p in paths]
    timings = [(load(p) or {}).get("timings") or {} for p in paths]
    marks = {k: statistics.median(t[k] for t in timelines if k in t) for k in {k for t in timelines for k in t}}
    phases = {k: statistics.median(t[k] for t in timings if k in t) for k in sorted({k for t in timings for k in t})}
    return dict(sorted(marks.items(), key=lambda kv: kv[1])), phases


def main(work: Path) -> int:
    nvb = nvb_tests(load(work / "nvb-ce.json"), load(work / "nvb-sm.json"), load(work / "nvb-lat.json"))
    p2p_text = next(iter(sorted(work.glob("p2p-*.txt"))), None)
    lat = p2p_latency(p2p_text.read_text()) if p2p_text else []
    summary: dict[str, Any] = {"nvbandwidth_tests": sorted(nvb)}
    for name in ("all", "sm", "sm-after", "sm-u12", "default-1"):
        rows = ratios(load(work / f"{name}.json"), nvb, lat)
        summary[name] = rows
        print(f"== {name}.json: ours / reference per pair")
        for r in rows:
            if "ours" in r:
                flag = (
                    ""
                    if r["ratio"] is None
                    else ("  LOW" if ("latency" not in r["mode"] and r["ratio"] < 0.98) else "")
                )
                print(f"  {r['mode']:<11} {r['pair']:<5} {r['what']:<36} {r['ours']:>9} / {r['ref']} = {r['ratio']}"
                      f"  spread {r['spread_pct']} %  verified {r['verified']}{flag}")  # fmt: skip
            else:
                print(f"  {r['mode']:<11} {r['pair']:<5} not measured: {r['what']}")
    w = walls(work / "walls.txt")
    med = {k: statistics.median(v) for k, v in w.items() if v}
    summary["walls"] = {k: {"runs": v, "median": med.get(k)} for k, v in w.items()}
    print("== walls (median of the rounds, seconds)")
    for k, v in sorted(w.items()):
        print(f"  {k:<22} {med[k]:.3f}  runs {', '.join(f'{x:.3f}' for x in v)}")
    p2p = med.get("p2pBandwidthLatencyTest")
    commands = (("bandwidth (default)", "bandwidth-default"), ("with the earlier bytecode", "bandwidth-default-srcstd"))
    for label, key in commands:
        if p2p and med.get(key):
            ratio = med[key] / p2p
            summary[f"{key}_over_p2p"] = round(ratio, 3)
            rounds = [b / a for a, b in zip(w["p2pBandwidthLatencyTest"], w[key])]  # each round's own pair
            summary[f"{key}_over_p2p_by_round"] = [round(r, 3) for r in rounds]
            print(f"  {label} / p2pBandwidthLatencyTest = {ratio:.2f} x (target <= 1.35 x); round by round "
                  f"{', '.join(f'{r:.2f}' for r in rounds)} (median {statistics.median(rounds):.2f})")  # fmt: skip
    for prefix, title in (("default", "the default command"), ("srcstd", "the same with the earlier runs' bytecode")):
        line, phases = medians(sorted(work.glob(f"{prefix}-*.json")))
        summary[f"{prefix}_timeline_median_s"], summary[f"{prefix}_timings_median_s"] = line, phases
        print(f"== {title}: its timeline, seconds since its exec (median of the rounds)")
        for k, v in line.items():
            print(f"  {k:<22} {v:.3f}")
        wall = med.get("bandwidth-default" if prefix == "default" else "bandwidth-default-srcstd")
        if wall and "result_back" in line:
            print(f"  exit (the wall)        {wall:.3f}: {wall - line['result_back']:.3f} s after the result came back"
                  " (the rules, the text, the exit)")  # fmt: skip
        print("== its phases, seconds (median)", json.dumps(phases))
    (work / "summary.json").write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
