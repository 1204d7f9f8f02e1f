#!/usr/bin/env bash
# One pass on any GPU host: record (into $OUT/LABEL.tgz), check, GPU tests, timings,
# and with "bw" as second argument the bandwidth matrix full and quick.
set -u
label=${1:?label}; bw=${2:-}
final=${OUT:-capture-out}
export OUT=/tmp/cap-$label
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
bash tests/gpu/capture_host.sh "$label" > "$OUT/$label.capture.log" 2>&1
grep -E "equal|live ==|wall|probe |NVML ms" "$OUT/$label.capture.log"
python3 -m topodoctor check > "$OUT/$label.check.txt" 2>&1; echo "check rc=$?"; tail -4 "$OUT/$label.check.txt"
TIMEFORMAT='check wall %R s'; for i in 1 2 3; do time python3 -m topodoctor check -f line; done
python3 -m pytest -q -p no:cacheprovider -n 0 tests/gpu -m gpu 2>&1 | tail -4
if [ "$bw" = bw ]; then
  TIMEFORMAT='bandwidth full wall %R s'; time python3 -m topodoctor bandwidth -o "$OUT/$label.bw-full.json" > "$OUT/$label.bw-full.txt" 2>&1
  echo "full rc=$?"; head -30 "$OUT/$label.bw-full.txt" | grep -E "GPU|method|s;" | head -12
  TIMEFORMAT='bandwidth quick wall %R s'; time python3 -m topodoctor bandwidth --quick -o "$OUT/$label.bw-quick.json" > "$OUT/$label.bw-quick.txt" 2>&1
  echo "quick rc=$?"
  TIMEFORMAT='check --bandwidth wall %R s'; time python3 -m topodoctor check --bandwidth -f line
  python3 -m topodoctor bandwidth --mode oneway --devices 0,1 --pair-timeout 0.2 --size 4096 --iters 50 -f json 2>&1 | python3 -c "import json,sys; d=json.load(sys.stdin); print('timeout demo:', [m['error'] for m in d['measurements']], [f['code'] for f in d['findings']])"
fi
tar czf "$final/$label.tgz" -C "$OUT" .
