#!/usr/bin/env bash
# When should the probe of `bandwidth` read NVML beside the copy timer's CUDA start? Two copies of
# this tree, alternating round by round with p2pBandwidthLatencyTest (ROUNDS, 11 unless given):
#   now     the tree as it is: the probe waits until the early timer's hello is answered (driver,
#           contexts, peer access; service/copies.py START_WAIT_S);
#   nowait  the probe does not wait (START_WAIT_S = 0), its NVML readings beside CUDA's start.
# Each process timed from exec to exit, its exit status kept (a probe's child that crashed exits 3);
# then one JSON result of each, for its timeline. On 2 x H200 (2026-11-27) a third copy, the probe
# waiting for cuInit alone, crashed 5 of 11 times against none of 11 for each of these two.
#     OUT=/tmp/out bash tests/gpu/wall_variants_host.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset PYTHONPATH CUDA_VISIBLE_DEVICES PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX=/tmp/topodoctor-pyc-variants
OUT=${OUT:?set OUT}
ROUNDS=${ROUNDS:-11}
P2P=/tmp/p2pBandwidthLatencyTest
bash tests/gpu/p2p_build.sh || exit 2
V=/tmp/variants
rm -rf "$V" && mkdir -p "$V"
for v in now nowait; do mkdir -p "$V/$v" && cp -r topodoctor "$V/$v/"; done
C=topodoctor/service/copies.py
sed -i 's/^START_WAIT_S = .*/START_WAIT_S = 0.0/' "$V/nowait/$C"
grep -n "^START_WAIT_S" "$V"/*/"$C"
timed() {  # LABEL DIR COMMAND...
  local label=$1 dir=$2 t0 t1 rc; shift 2
  t0=$(date +%s.%N); (cd "$dir" && timeout -k 5 60 "$@" > /dev/null 2>&1); rc=$?; t1=$(date +%s.%N)
  echo "$label $rc $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" >> "$OUT/variants.txt"
}
for _ in 1 2; do  # warm-up: bytecode of every module, the driver's caches
  for v in now nowait; do (cd "$V/$v" && timeout -k 5 60 python3 -m topodoctor bandwidth > /dev/null 2>&1); done
  timeout -k 5 60 "$P2P" > /dev/null 2>&1
done
for _ in $(seq "$ROUNDS"); do
  timed p2pBandwidthLatencyTest . "$P2P"
  for v in now nowait; do timed "$v" "$V/$v" python3 -m topodoctor bandwidth; done
done
for v in now nowait; do
  (cd "$V/$v" && timeout -k 5 60 python3 -m topodoctor bandwidth -f json -o "$OUT/bandwidth-$v.json" > /dev/null 2>&1)
done
python3 - "$OUT" <<'EOF'
import json, statistics, sys
out = sys.argv[1]
rows = [line.split() for line in open(f"{out}/variants.txt")]
ref = [float(r[2]) for r in rows if r[0] == "p2pBandwidthLatencyTest"]
print(f"p2pBandwidthLatencyTest: median {statistics.median(ref):.3f} s")
for v in ("now", "nowait"):
    walls = [float(r[2]) for r in rows if r[0] == v]
    codes = sorted({r[1] for r in rows if r[0] == v})
    ratios = [w / p for w, p in zip(walls, ref)]
    line = json.load(open(f"{out}/bandwidth-{v}.json")).get("timeline", {})
    keys = ("probe_forked", "timer_driver_ready", "timer_cuda_ready", "probe_done", "copies_started", "copies_done")
    print(f"{v}: exit {codes}, median {statistics.median(walls):.3f} s, ratio of medians "
          f"{statistics.median(walls) / statistics.median(ref):.2f} x, round by round median "
          f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}); timeline "
          + ", ".join(f"{k} {line.get(k, '-')}" for k in keys))
EOF
