"""The per-link counter read of a watch (``nvmlDeviceGetFieldValues`` with the PCIe replay field and
replay / recovery / CRC per NVLink) in many fresh processes, variant by variant, counting how each
process ended: the crash the copy pass contains (a SIGSEGV in that call on driver 580) either shows
in one variant or in none.

    python3 tests/gpu/field_values_stress.py --runs 300 --out field-values.json

Variants (each run is a new interpreter, so NVML starts fresh every time):
- ``batch``: the watch's batch as topodoctor's live binding makes it (lists of [field, scope]);
- ``per-link``: the same fields one link per call (a batch of 3);
- ``thread``: the batch while a second thread samples NVML (utilisation, clocks, processes), as the
  watch's sampler does during a measurement;
- ``ctypes``: the batch through NVML's C function with a struct array allocated here, bypassing
  nvidia-ml-py's wrapper.
Links asked: NVML's link count where it answers, else 18 (the count of the H100 / H200), so a host
without NVLink still sends the same scope ids.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

CHILD = r"""
import ctypes, sys, threading, pynvml
variant, links_default = sys.argv[1], int(sys.argv[2])
pynvml.nvmlInit()
n = pynvml.nvmlDeviceGetCount()
handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
def links_of(h):
    try:
        v = pynvml.nvmlDeviceGetFieldValues(h, [(pynvml.NVML_FI_DEV_NVLINK_LINK_COUNT, 0)])[0]
        return v.value.uiVal if v.nvmlReturn == 0 and v.value.uiVal else links_default
    except pynvml.NVMLError:
        return links_default
stop = threading.Event()
def sample():
    while not stop.is_set():
        for h in handles:
            for f in (pynvml.nvmlDeviceGetUtilizationRates, pynvml.nvmlDeviceGetComputeRunningProcesses):
                try:
                    f(h)
                except pynvml.NVMLError:
                    pass
            try:
                pynvml.nvmlDeviceGetClockInfo(h, 1)
            except pynvml.NVMLError:
                pass
if variant == "thread":
    th = threading.Thread(target=sample, daemon=True); th.start()
answered = 0
for _ in range(20):
    for h in handles:
        ids = [(94, 0)] + [(fid, link) for link in range(links_of(h)) for fid in (161, 162, 163)]
        if variant == "per-link":
            for k in range(1, len(ids), 3):
                answered += sum(v.nvmlReturn == 0 for v in pynvml.nvmlDeviceGetFieldValues(h, ids[k:k + 3]))
        elif variant == "ctypes":
            arr = (pynvml.c_nvmlFieldValue_t * len(ids))()
            for i, (f, s) in enumerate(ids):
                arr[i].fieldId, arr[i].scopeId = f, s
            fn = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetFieldValues")
            fn(h, ctypes.c_int32(len(ids)), ctypes.byref(arr))
            answered += sum(arr[i].nvmlReturn == 0 for i in range(len(ids)))
        else:
            answered += sum(v.nvmlReturn == 0 for v in pynvml.nvmlDeviceGetFieldValues(h, [list(x) for x in ids]))
stop.set()
pynvml.nvmlShutdown()
print(answered)
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=200, help="processes per variant")
    ap.add_argument("--out", required=True)
    ap.add_argument("--links", type=int, default=18)
    ap.add_argument("--variants", default="batch,per-link,thread,ctypes")
    a = ap.parse_args()
    summary: dict[str, dict[str, object]] = {}
    for variant in a.variants.split(","):
        ends: Counter[str] = Counter()
        t0 = time.monotonic()
        answered = set()
        for _ in range(a.runs):
            try:
                p = subprocess.run(
                    [sys.executable, "-c", CHILD, variant, str(a.links)],
                    capture_output=True,
                    text=True,
                    timeout=20,
                    env=dict(os.environ, PYTHONFAULTHANDLER="1"),
                )
            except subprocess.TimeoutExpired:
                ends["timeout"] += 1
                continue
            if p.returncode < 0:
                ends[signal.Signals(-p.returncode).name] += 1
            elif p.returncode:
                ends[f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1][:120] if p.stderr.strip() else ''}"] += 1
            else:
                ends["ok"] += 1
                answered.add(p.stdout.strip())
        summary[variant] = {
            "runs": a.runs,
            "ends": dict(ends),
            "s": round(time.monotonic() - t0, 1),
            "fields_answered": sorted(answered),
        }
        print(variant, dict(ends), f"{time.monotonic() - t0:.1f} s", flush=True)
    with open(a.out, "w") as f:
        json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
