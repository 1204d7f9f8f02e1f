#!/usr/bin/env bash
# One device call on a multi-GPU host: re-record, time scan cold and with bytecode cached,
# run the bandwidth matrix full and quick. Everything lands in $OUT/LABEL.tgz.
set -u
label=${1:?label}
final=${OUT:-capture-out}
export OUT=/tmp/cap-$label
mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
bash tests/gpu/capture_host.sh "$label" > "$OUT/$label.capture.log" 2>&1
grep -E "equal|live ==|wall|probe |NVML ms" "$OUT/$label.capture.log"
export PYTHONPYCACHEPREFIX=/tmp/pyc
python3 -m topodoctor scan > /dev/null 2>&1
TIMEFORMAT='scan wall (bytecode cached) %R s'; for i in 1 2 3; do time python3 -m topodoctor scan > /dev/null; done
TIMEFORMAT='help wall (bytecode cached) %R s'; for i in 1 2; do time python3 -m topodoctor --help > /dev/null; done
unset PYTHONPYCACHEPREFIX
TIMEFORMAT='bandwidth full wall %R s'; time python3 -m topodoctor bandwidth -o "$OUT/$label.bw-full.json" > "$OUT/$label.bw-full.txt" 2>&1
echo "full rc=$?"; tail -40 "$OUT/$label.bw-full.txt"
TIMEFORMAT='bandwidth quick wall %R s'; time python3 -m topodoctor bandwidth --quick -o "$OUT/$label.bw-quick.json" > "$OUT/$label.bw-quick.txt" 2>&1
echo "quick rc=$?"; tail -12 "$OUT/$label.bw-quick.txt"
tar czf "$final/$label.tgz" -C "$OUT" .
