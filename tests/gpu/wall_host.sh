#!/usr/bin/env bash
# The default matrix's wall beside p2pBandwidthLatencyTest's alone, for a short lease: the reference
# built by itself (about 10 s), every module's bytecode written by a warm-up run of each, then ROUNDS
# alternating rounds (9 unless given), each process timed from exec to exit; the median of the
# round-by-round ratios and of the walls. About 60 s on two GPUs. Results: "$OUT/walls.txt".
#     OUT=/tmp/out bash tests/gpu/wall_host.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONPATH=$PWD
export PYTHONPYCACHEPREFIX=/tmp/topodoctor-pyc-wall
unset PYTHONDONTWRITEBYTECODE CUDA_VISIBLE_DEVICES  # the warm-up runs write what they import
OUT=${OUT:?set OUT}
ROUNDS=${ROUNDS:-9}
P2P=/tmp/p2pBandwidthLatencyTest
bash tests/gpu/p2p_build.sh || exit 2
timed() {  # LABEL COMMAND...: exec to exit, appended to walls.txt
  local label=$1 t0 t1 rc; shift
  t0=$(date +%s.%N); timeout -k 5 60 "$@" > /dev/null 2>&1; rc=$?; t1=$(date +%s.%N)
  echo "$label $rc $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" >> "$OUT/walls.txt"
}
timeout -k 5 60 python3 -m compileall -q -j 0 topodoctor > /dev/null 2>&1
for _ in 1 2; do  # warm-up: the driver's JIT cache, the page cache, every module's bytecode
  timeout -k 5 60 python3 -m topodoctor bandwidth > /dev/null 2>&1; timeout -k 5 60 "$P2P" > /dev/null 2>&1
done
for _ in $(seq "$ROUNDS"); do
  timed p2pBandwidthLatencyTest "$P2P"
  timed bandwidth python3 -m topodoctor bandwidth
done
timeout -k 5 60 python3 -m topodoctor bandwidth -f json -o "$OUT/bandwidth.json" > /dev/null 2>&1
python3 - "$OUT/walls.txt" <<'EOF'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
ref = [float(r[2]) for r in rows if r[0] == "p2pBandwidthLatencyTest"]
ours = [float(r[2]) for r in rows if r[0] == "bandwidth"]
codes = sorted({r[1] for r in rows if r[0] == "bandwidth"})
ratios = [o / p for o, p in zip(ours, ref)]
print(f"bandwidth exit codes {codes}; walls: ours median {statistics.median(ours):.3f} s, "
      f"p2pBandwidthLatencyTest {statistics.median(ref):.3f} s, ratio of medians "
      f"{statistics.median(ours) / statistics.median(ref):.2f} x; round by round "
      f"{', '.join(f'{r:.2f}' for r in ratios)} (median {statistics.median(ratios):.2f})")
EOF
