"""Does sampling NVML beside the ranks slow them? all_reduce at 1 GiB measured with the sampler off and
on, interleaved (off, on, off, on), on every GPU of this host; one line per run with its busbw, and
for the sampled runs how many samples were taken and what one cost the sampling process.

Usage: python3 tests/gpu/sampling_ab.py [PAIRS]  (run from the repository root, NCCL_NVLS_ENABLE=0)"""

import sys

from topodoctor.measure.collectives.launch import measure
from topodoctor.model.collective_ops import Plan
from topodoctor.probe.during import Watch, watch
from topodoctor.probe.sources import live_nvml, probe_host

pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 2
snap = probe_host().snapshot
gpus = [g for g in snap.gpus if g.lost is None]
nvml = live_nvml()
plan = Plan(ops=("all_reduce",), sizes=(1 << 30,), iters=40, warmup_iters=2, op_timeout_s=30.0)
got: dict[str, list[float]] = {"off": [], "on": []}
for n in range(2 * pairs):
    kind = "on" if n % 2 else "off"
    w = watch(nvml, snap) if kind == "on" else Watch(None)
    with w:
        res = measure(plan, len(gpus), snapshot=snap, deadline=None)
    row = res.largest("all_reduce")
    best = row.best if row is not None else None
    busbw = best.busbw_gbps if best is not None else float("nan")
    got[kind].append(busbw)
    s = w.sampling
    extra = f" samples {s.ticks} over {s.duration_s:.1f} s, {s.tick_ms} ms each" if s is not None else ""
    print(f"sampling {kind:3} all_reduce 1G busbw {busbw:.1f} GB/s{extra}", flush=True)
off, on = (sum(v) / len(v) for v in (got["off"], got["on"]))
print(f"mean busbw: sampler off {off:.1f}, on {on:.1f} GB/s ({(on - off) / off:+.1%})")
