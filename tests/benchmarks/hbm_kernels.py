"""HBM copy kernels against nvbandwidth's ``device_local_copy``, and the host latency against its
``host_device_latency_sm``, in one run on a GPU host.

    python3 tests/benchmarks/hbm_kernels.py --anchors /tmp/anchors -o hbm.json

Part 1, HBM (one timer process, about a minute): nvbandwidth's ``device_local_copy`` (copy engine,
its default 512 MiB buffer) runs before and after; between them the timer measures its own copy
engine copy and then SM copy kernels (``topodoctor/measure/timer/copy_kernels.py``) in stages,
each stage starting from the best of the last: grid structure (persistent grid-stride against
one-shot grids, threads per block, blocks per SM, loads in flight), cache hints, element width,
the destination's offset from the source, Hopper's bulk copies; the leaders are measured again
beside the copy engine at 256 MiB, 512 MiB and 1 GiB. Every figure is the median of
``--samples`` samples of ``--iters`` copies, bytes counted once (as nvbandwidth counts them), the
copy read back and compared byte for byte.

Part 2, latency (``--latency-rounds`` fresh processes of each): nvbandwidth's
``host_device_latency_sm`` and the timer's pointer chase into host memory (the same method:
kernels.py), one after the other, alternating which goes first.

Prints one JSON document on stdout (progress on stderr); ``verdict`` says what to read first.
"""

from __future__ import annotations

import argparse
import json
import select
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script from the checkout

from tests.benchmarks.fitness_bench import Timer, nvbandwidth
from topodoctor.measure.timer import copy_kernels
from topodoctor.measure.timer.copy_kernels import CopyKernel

MiB = 1 << 20
TARGET = 0.98  # SM kernel over device_local_copy
LATENCY_MARGIN = 0.05
EXPLAIN = {
    "gbps": "median GB/s of the samples, bytes copied once (a copy reads and writes each byte: HBM moves twice this)",
    "spread_pct": "(max - min) / median of the samples, in %",
    "ratio_nvbandwidth": "gbps over nvbandwidth device_local_copy (the mean of its runs before and after the sweep)",
    "ratio_ce": "gbps over this process's own copy-engine copy (cuMemcpyDtoDAsync) of the same size",
    "verified": "the destination read back and compared byte for byte with the source after the samples",
    "resident_blocks_per_sm": "blocks of the kernel an SM holds at once (cuOccupancyMaxActiveBlocksPerMultiprocessor)",
    "stage": "start: the copy engine first; structure, hints, vector, skew, bulk: the sweep; confirm: the leaders "
    "again beside the copy engine",
}


def structure() -> list[CopyKernel]:
    """Grid shapes with no hints: persistent grid-stride (threads x blocks per SM x loads in flight)
    and one-shot grids (threads x elements per thread)."""
    out = [
        CopyKernel("stride", u, t, b)
        for t, b in (
            (128, 4),
            (128, 8),
            (128, 16),
            (256, 2),
            (256, 4),
            (256, 8),
            (512, 1),
            (512, 2),
            (512, 4),
            (1024, 1),
            (1024, 2),
        )
        for u in (1, 2, 4, 8)
    ]
    out += [CopyKernel("stride", u, 512, 1) for u in (12, 16)]  # nvbandwidth's 12 and beyond
    out += [CopyKernel("oneshot", u, t, 1) for t in (128, 256, 512, 1024) for u in (1, 2, 4, 8)]
    return out


def load_hints(base: CopyKernel) -> list[CopyKernel]:
    """``base`` with every load hint, with and without the 256-byte L2 prefetch."""
    return [
        replace(base, load=ld, prefetch=pf)
        for ld in copy_kernels.LOAD_HINTS
        for pf in (False, True)
        if (ld, pf) != (base.load, base.prefetch)
    ]


def store_hints(base: CopyKernel) -> list[CopyKernel]:
    """``base`` with every store hint."""
    return [replace(base, store=st) for st in copy_kernels.STORE_HINTS if st != base.store]


def vectors(base: CopyKernel) -> list[CopyKernel]:
    """``base`` with other elements: 8-byte lanes, 32-byte pairs, 8-byte scalars (each also at the
    unroll that keeps the bytes in flight)."""
    out = [replace(base, vec="v2u64"), replace(base, vec="v4u32x2"), replace(base, vec="u64")]
    if base.unroll > 1:
        out.append(replace(base, vec="v4u32x2", unroll=base.unroll // 2))
    if base.unroll <= 16:
        out.append(replace(base, vec="u64", unroll=base.unroll * 2))
    return [k for k in out if k != base]


def skews(base: CopyKernel) -> list[CopyKernel]:
    """``base`` writing its destination at offsets from where it reads (copy_kernels: skew)."""
    return [replace(base, skew=o) for o in (256, 2048, 4096, 32768, 262144) if o != base.skew]


BULK = [CopyKernel("bulk", s, 1, b, chunk_kib=c) for s, c, b in
        ((2, 16, 2), (2, 16, 4), (3, 15, 1), (3, 15, 2), (3, 15, 4), (4, 11, 2), (4, 11, 4), (6, 7, 2), (6, 7, 4),
         (8, 5, 2))]  # fmt: skip


def rank(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Verified kernel records, fastest first (one per kernel and size: the latest)."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    for r in records:
        if r.get("name") != "ce" and r.get("verified") and r.get("gbps"):
            latest[(r["name"], r["size_mib"])] = r
    return sorted(latest.values(), key=lambda r: -float(r["gbps"]))


def best_of(records: list[dict[str, Any]], style: str, size_mib: int) -> CopyKernel | None:
    """The fastest verified kernel of ``style`` at ``size_mib``."""
    for r in rank(records):
        if r["size_mib"] == size_mib and r["name"].startswith(style + "-"):
            return copy_kernels.parse(r["name"])
    return None


class Child(Timer):
    """The timer child with a time limit per task: a kernel that hangs or kills its context ends the
    process, which the sweep restarts before the next kernel."""

    def ask(self, task: dict[str, Any], timeout_s: float = 30.0) -> dict[str, Any]:
        assert self.p.stdin and self.p.stdout
        try:
            self.p.stdin.write(json.dumps(task) + "\n")
            self.p.stdin.flush()
        except OSError as exc:
            return {"error": f"timer gone: {exc}", "dead": True}
        ready, _, _ = select.select([self.p.stdout], [], [], timeout_s)
        line = self.p.stdout.readline() if ready else ""
        if not line:
            return {"error": f"no answer in {timeout_s:g} s" if not ready else "timer died", "dead": True}
        answer: dict[str, Any] = json.loads(line)
        return answer


class Sweep:
    """One timer process, measuring kernels on GPU ``dev`` until ``deadline`` (monotonic)."""

    def __init__(self, dev: int, iters: int, samples: int, deadline: float) -> None:
        self.dev, self.iters, self.samples, self.deadline = dev, iters, samples, deadline
        self.records: list[dict[str, Any]] = []
        self.hung: set[str] = set()  # styles one of whose kernels never answered: the rest would hang too
        self.child = Child()
        self.hello = self.child.hello
        self.ce_gbps: dict[int, float] = {}

    def task(self, size_mib: int, **what: Any) -> dict[str, Any]:
        task = {"op": "hbm", "dev": self.dev, "size": size_mib * MiB, "iters": self.iters, "samples": self.samples}
        # a kernel takes well under a second at 1 GiB: ten is a hang, not a slow kernel
        answer = self.child.ask({**task, **what}, timeout_s=10.0 + 2e-3 * size_mib)
        # a CUDA error inside a kernel is sticky: the context is lost, the next kernel needs a new one
        if answer.pop("dead", False) or "CUDA_ERROR" in str(answer.get("error", "")):
            self.child.close()
            self.child = Child()
        return answer

    def ce(self, size_mib: int, stage: str = "confirm") -> dict[str, Any]:
        a = self.task(size_mib, engine="ce")
        rec = self._record("ce", stage, size_mib, a)
        if rec.get("gbps"):
            self.ce_gbps[size_mib] = rec["gbps"]
        return rec

    def kernel(self, k: CopyKernel, stage: str, size_mib: int) -> dict[str, Any] | None:
        if time.monotonic() > self.deadline or k.style in self.hung:
            return None
        answer = self.task(size_mib, engine="sm", kernel=k.name)
        if str(answer.get("error", "")).startswith("no answer"):
            self.hung.add(k.style)
        return self._record(k.name, stage, size_mib, answer)

    def _record(self, name: str, stage: str, size_mib: int, a: dict[str, Any]) -> dict[str, Any]:
        s = a.get("samples") or []
        med = statistics.median(s) if s else None
        rec: dict[str, Any] = {"name": a.get("kernel", name), "stage": stage, "size_mib": size_mib}
        rec.update(
            gbps=round(med, 1) if med else None, spread_pct=round(100 * (max(s) - min(s)) / med, 2) if med else None
        )
        ce = self.ce_gbps.get(size_mib)
        rec["ratio_ce"] = round(med / ce, 4) if med and ce and name != "ce" else None
        for key in ("verified", "held", "regs", "resident_blocks_per_sm", "grid", "block", "fallback", "error"):
            if key in a:
                rec[key] = a[key]
        rec["samples"] = [round(x, 1) for x in s]
        self.records.append(rec)
        print(f"  {stage:9} {size_mib:5} MiB  {rec['gbps'] or '-':>8}  {rec['name']}  {a.get('error', '')}",
              file=sys.stderr, flush=True)  # fmt: skip
        return rec

    def gbps(self, k: CopyKernel, size_mib: int) -> float:
        """The latest verified figure of ``k`` at ``size_mib``; 0 where there is none."""
        for r in reversed(self.records):
            if r["name"] == k.name and r["size_mib"] == size_mib:
                return float(r["gbps"]) if r.get("verified") and r.get("gbps") else 0.0
        return 0.0

    def stage(self, stage: str, kernels: list[CopyKernel], size_mib: int) -> None:
        seen = {r["name"] for r in self.records if r["size_mib"] == size_mib}
        for k in kernels:
            if k.name not in seen:
                self.kernel(k, stage, size_mib)
                seen.add(k.name)


def hbm(args: argparse.Namespace) -> dict[str, Any]:
    """Part 1: the staged sweep between two nvbandwidth runs."""
    size = args.size_mib
    before = nvbandwidth(args.anchors, ("device_local_copy",), ("-b", str(size)))
    t0 = time.monotonic()
    sweep = Sweep(args.dev, args.iters, args.samples, t0 + args.budget_s * 0.75)  # the rest: the confirm stage
    if "error" in sweep.hello:
        return {"error": sweep.hello["error"], "nvbandwidth_before": before}
    sweep.ce(size, "start")
    sweep.stage("structure", structure(), size)
    for style in ("stride", "oneshot"):
        base = best_of(sweep.records, style, size)
        if base is None:
            continue
        loads, stores = load_hints(base), store_hints(base)
        sweep.stage("hints", loads + stores, size)
        ld = max([base, *loads], key=lambda k: sweep.gbps(k, size))
        st = max([base, *stores], key=lambda k: sweep.gbps(k, size))
        sweep.stage("hints", [replace(base, load=ld.load, prefetch=ld.prefetch, store=st.store)], size)
        sweep.stage("vector", vectors(best_of(sweep.records, style, size) or base), size)
        sweep.stage("skew", skews(best_of(sweep.records, style, size) or base), size)
    sweep.stage("bulk", BULK, size)
    bulk = best_of(sweep.records, "bulk", size)
    sweep.stage("bulk", [replace(bulk, skew=o) for o in (4096, 32768)] if bulk else [], size)
    sweep.deadline = max(time.monotonic(), t0 + args.budget_s * 0.75) + args.budget_s * 0.25
    leaders = [copy_kernels.parse(r["name"]) for r in rank(sweep.records)[: args.confirm]]
    for k in [copy_kernels.DEFAULT, copy_kernels.parse("stride-u12"), *leaders]:
        sweep.kernel(k, "confirm", size)
    sweep.ce(size)
    for other in (256, 1024):
        if other != size:
            sweep.ce(other)
            for k in leaders[:3]:
                sweep.kernel(k, "confirm", other)
    sweep.child.close()
    after = nvbandwidth(args.anchors, ("device_local_copy",), ("-b", str(size)))
    anchors = [x["device_local_copy"] for x in (before, after) if x.get("device_local_copy")]
    nvb = statistics.mean(anchors) if anchors else None
    for r in sweep.records:
        r["ratio_nvbandwidth"] = round(r["gbps"] / nvb, 4) if nvb and r.get("gbps") and r["size_mib"] == size else None
    ranked = [r for r in rank(sweep.records) if r["size_mib"] == size]
    return {
        "size_mib": size,
        "sweep_s": round(time.monotonic() - t0, 1),
        "gpu": (sweep.hello.get("devices") or [{}])[0].get("name"),
        "nvbandwidth_before": before,
        "nvbandwidth_after": after,
        "device_local_copy_gbps": nvb,
        "ce_gbps": sweep.ce_gbps,
        "top": ranked[:10],
        "default": next((r for r in ranked if r["name"] == copy_kernels.DEFAULT.name), None),
        "failed": [r for r in sweep.records if not r.get("verified") and r["name"] != "ce"],
        "hung_styles": sorted(sweep.hung),
        "records": sweep.records,
    }


def gpu_cpus(bus_id: str) -> list[int] | None:
    """The CPUs next to a GPU (sysfs ``local_cpulist``, what NVML's CPU affinity reports)."""
    try:
        text = Path(f"/sys/bus/pci/devices/{bus_id}/local_cpulist").read_text().strip()
    except OSError:
        return None
    cpus: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        cpus += range(int(lo), int(hi or lo) + 1)
    return cpus or None


def latency(args: argparse.Namespace) -> dict[str, Any]:
    """Part 2: nvbandwidth's host latency and the timer's, each in fresh processes, side by side."""
    rounds = []
    for n in range(args.latency_rounds):
        row: dict[str, Any] = {}
        for who in ("nvb", "ours") if n % 2 == 0 else ("ours", "nvb"):
            if who == "nvb":
                got = nvbandwidth(args.anchors, ("host_device_latency_sm",))
                row["nvbandwidth_ns"] = got.get("host_device_latency_sm")
                row["nvbandwidth_error"] = got.get("error")
            else:
                t0 = time.monotonic()
                child = Child()
                bus = next((d["bus_id"] for d in child.hello.get("devices", []) if d["ordinal"] == args.dev), "")
                task = {"op": "chase", "dev": args.dev, "target": -1, "accesses": 1_000_000, "samples": 3}
                a = child.hello if "error" in child.hello else child.ask({**task, "cpus": gpu_cpus(bus)})
                child.close()
                row.update(ours_ns=[round(x, 1) for x in a.get("samples") or []], ours_verified=a.get("verified"),
                           ours_error=a.get("error"), ours_wall_s=round(time.monotonic() - t0, 2))  # fmt: skip
        ours = statistics.median(row["ours_ns"]) if row.get("ours_ns") else None
        nvb = row.get("nvbandwidth_ns")
        row["ratio"] = round(ours / nvb, 4) if ours and nvb else None
        row["first_sweep_ratio"] = round(row["ours_ns"][0] / nvb, 4) if ours and nvb else None
        rounds.append({k: v for k, v in row.items() if v is not None})
        print(f"  latency round {n}: nvbandwidth {nvb} ns, ours {row.get('ours_ns')} ns", file=sys.stderr, flush=True)
    within = sum(1 for r in rounds if r.get("ratio") and abs(r["ratio"] - 1) <= LATENCY_MARGIN)
    return {"rounds": rounds, "within_5_pct": f"{within} of {len(rounds)}"}


def verdict(part1: dict[str, Any], part2: dict[str, Any] | None) -> list[str]:
    """The lines to read first."""
    out = []
    top = (part1.get("top") or [None])[0]
    nvb = part1.get("device_local_copy_gbps")
    if top and nvb:
        ratio = top["gbps"] / nvb
        met = "met" if ratio >= TARGET else "NOT met"
        where = f"device_local_copy {nvb:.1f} GB/s at {part1['size_mib']} MiB"
        out.append(f"best SM kernel {top['name']}: {top['gbps']} GB/s = {ratio:.4f} x nvbandwidth {where}")
        out.append(f"target: >= {TARGET}: {met}")
        if top["name"] != copy_kernels.DEFAULT.name:
            home = "topodoctor/measure/timer/copy_kernels.py"
            out.append(f"to make it the HBM default: DEFAULT = parse({top['name']!r}) in {home}")
    else:
        why = part1.get("error") or part1.get("nvbandwidth_before", {}).get("error") or "no kernel verified"
        out.append(f"no ratio: {why}")
    if part1.get("default"):
        out.append(
            f"current default {copy_kernels.DEFAULT.name}: {part1['default']['ratio_nvbandwidth']} x nvbandwidth"
        )
    if part1.get("failed"):
        out.append(f"{len(part1['failed'])} kernel(s) failed or were not verified: see hbm.failed")
    if part1.get("hung_styles"):
        out.append(f"kernels that never answered (the rest of their style skipped): {part1['hung_styles']}")
    if part2 is not None:
        ratios = [r.get("ratio") for r in part2["rounds"]]
        out.append(f"host latency ours / nvbandwidth per round: {ratios}; within 5 %: {part2['within_5_pct']}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--anchors", type=Path, default=Path("/tmp/anchors"), help="folder holding the nvbandwidth binary")
    ap.add_argument("-o", "--output", type=Path, help="also write the document here")
    ap.add_argument("--dev", type=int, default=0, help="CUDA ordinal (PCI order) of the GPU to measure")
    ap.add_argument("--size-mib", type=int, default=512, help="buffer size of the sweep (nvbandwidth's default: 512)")
    ap.add_argument("--iters", type=int, default=16, help="copies per sample (nvbandwidth's loop count: 16)")
    ap.add_argument("--samples", type=int, default=7)
    ap.add_argument("--budget-s", type=float, default=60.0, help="the HBM sweep's time, nvbandwidth's runs aside")
    ap.add_argument("--confirm", type=int, default=8, help="leaders measured again beside the copy engine")
    ap.add_argument("--latency-rounds", type=int, default=6, help="fresh processes of each for the latency; 0: none")
    a = ap.parse_args()
    doc: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "explain": EXPLAIN}
    print("HBM sweep", file=sys.stderr, flush=True)
    doc["hbm"] = hbm(a)
    doc["latency"] = latency(a) if a.latency_rounds > 0 else None
    doc["verdict"] = verdict(doc["hbm"], doc["latency"])
    text = json.dumps({"verdict": doc.pop("verdict"), **doc}, indent=1, default=str)
    if a.output is not None:
        a.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
