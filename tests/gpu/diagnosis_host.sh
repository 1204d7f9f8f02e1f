#!/usr/bin/env bash
# The cause engine on a multi-GPU host: the NCCL settings that change busbw, one at a time, and a
# foreign bf16 GEMM on the last GPU, through `collectives -o --log-dir`, `collectives --from` on each
# saved result, and `check --level quick -f line` (healthy, with the GEMM, with NCCL_PROTO=LL); then a
# GEMM that starts after the collectives began and ends before they end (only NVML sampled during the
# run can see it), and the sampler's cost (all_reduce at 1 GiB with it off and on, interleaved). One
# line per run: its exit code and its leading finding (the cause first). Everything into
# $OUT/diagnosis.tgz. Bounded: every command under timeout(1); about 230 s on 2 x H100, the last
# step skipped when the budget is short.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/tmp/diagnosis; rm -rf "$W"; mkdir -p "$W"
t_all=$SECONDS
python3 -m compileall -q topodoctor >/dev/null
lead() {  # the first finding at warning or above of a collectives text, else "no finding"
  grep -m1 -E '^TD[0-9]+ (critical|error|warning) ' "$1" | cut -c1-220 || true
}
coll() {  # NAME OPS SIZES [VAR=VALUE ...]: measure, then judge the saved result again
  local name=$1 ops=$2 sizes=$3; shift 3
  local t0=$SECONDS
  env "$@" timeout -k 5 60 python3 -m topodoctor collectives --op "$ops" --size "$sizes" -n 8 -w 2 --op-timeout 10 \
    -o "$W/coll-$name.json" --log-dir "$W/logs-$name" > "$W/coll-$name.txt" 2>&1
  local rc=$?
  local l; l=$(lead "$W/coll-$name.txt")
  echo "run  $name rc=$rc $((SECONDS - t0))s: ${l:-no finding at warning or above}"
  judge_again "$name"
}
judge_again() {  # NAME: the saved result judged again with --from (text and JSON), its leading finding
  local name=$1 rc l
  [ -s "$W/coll-$name.json" ] || return 0
  timeout -k 5 30 python3 -m topodoctor collectives --from "$W/coll-$name.json" > "$W/from-$name.txt" 2>&1
  rc=$?
  timeout -k 5 30 python3 -m topodoctor collectives --from "$W/coll-$name.json" -f json > "$W/from-$name.json" 2>/dev/null
  l=$(lead "$W/from-$name.txt")
  echo "from $name rc=$rc: ${l:-no finding at warning or above}"
}
check_line() {  # NAME [VAR=VALUE ...]: the quick check's one line, and its JSON for the record
  local name=$1; shift
  local t0=$SECONDS
  env "$@" timeout -k 5 90 python3 -m topodoctor check --level quick -f line > "$W/check-$name.line" 2>&1
  echo "check $name rc=$? $((SECONDS - t0))s: $(head -c 220 "$W/check-$name.line")"
  env "$@" timeout -k 5 90 python3 -m topodoctor check --level quick -f json > "$W/check-$name.json" 2>/dev/null
}
nvidia-smi -L > "$W/gpus.txt" 2>&1
echo "== healthy"
coll default all_reduce,sendrecv 256M,1G
check_line healthy
if [ "${SETTINGS:-1}" = 1 ]; then  # SETTINGS=0: the healthy and foreign-process runs alone
echo "== one NCCL setting at a time"
coll proto-ll all_reduce 256M,1G NCCL_PROTO=LL
coll buffsize all_reduce 256M,1G NCCL_BUFFSIZE=65536
coll nthreads all_reduce 256M,1G NCCL_NTHREADS=64
coll maxch1 all_reduce 256M,1G NCCL_MAX_NCHANNELS=1
coll ch2 all_reduce 256M,1G NCCL_MIN_NCHANNELS=2 NCCL_MAX_NCHANNELS=2
coll maxctas all_reduce 256M,1G NCCL_MAX_CTAS=2
coll p2p-loc all_reduce 256M,1G NCCL_P2P_LEVEL=LOC
coll p2p-disable all_reduce 256M,1G NCCL_P2P_DISABLE=1
coll p2p-shm-off all_reduce 64M NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
coll algo-tree all_reduce,all_gather 64M NCCL_ALGO=Tree
coll p2p-memcpy all_reduce 64M NCCL_P2P_USE_CUDA_MEMCPY=1
coll proto-ll128 all_reduce 1G NCCL_PROTO=LL128
coll shm-off all_reduce 1G NCCL_SHM_DISABLE=1
check_line proto-ll NCCL_PROTO=LL
fi
last=$(( $(nvidia-smi -L | wc -l) - 1 ))
echo "== a foreign GEMM on GPU$last"
timeout -k 5 80 python3 tests/gpu/foreign_gemm.py "$last" 70 > "$W/gemm.log" 2>&1 &
gemm=$!; sleep 6
coll foreign-gemm all_reduce 256M,1G
check_line gemm
kill "$gemm" 2>/dev/null; wait "$gemm" 2>/dev/null
if [ "${MID:-1}" = 1 ]; then  # MID=0: the mid-run GEMM and the sampler's cost left out
echo "== a foreign GEMM on GPU$last that starts after the collectives began and ends before they end"
go="$W/gemm-go"; rm -f "$go"
t0=$SECONDS
timeout -k 5 90 python3 tests/gpu/foreign_gemm.py "$last" 5 "$go" > "$W/gemm-mid.log" 2>&1 &  # imports torch, waits
gemm=$!
timeout -k 5 80 python3 -m topodoctor collectives --op all_reduce --size 1G -n 1500 -w 2 --op-timeout 60 \
  -o "$W/coll-mid-gemm.json" --log-dir "$W/logs-mid-gemm" > "$W/coll-mid-gemm.txt" 2>&1 &
coll=$!
for _ in $(seq 200); do  # the ranks hold their GPUs (CUDA contexts); NCCL's start and the warm-up follow
  n=$(timeout -k 2 5 nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | grep -c .)
  [ "${n:-0}" -ge 2 ] && break; kill -0 "$coll" 2>/dev/null || break; sleep 0.2
done
sleep 2; touch "$go"  # the GEMM's own CUDA start takes about a second more
wait "$coll"; rc=$?
wait "$gemm" 2>/dev/null
l=$(lead "$W/coll-mid-gemm.txt")
echo "run  mid-gemm rc=$rc $((SECONDS - t0))s: ${l:-no finding at warning or above}"
echo "     $(grep -m1 -E '^TD007 ' "$W/coll-mid-gemm.txt" | cut -c1-220 || true)"
timeout -k 5 30 python3 - "$W/coll-mid-gemm.json" "$last" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1])); s = d.get("during")
if not s:
    sys.exit("     not sampled")
g = next(x for x in s["gpus"] if x["index"] == int(sys.argv[2]))
before = next((a["processes"] for a in d["activity"] if a["index"] == g["index"]), None)
seen = [f"pid {p['pid']} {p['first_s']}-{p['last_s']} s ({p['samples']} samples, SMs {p['sm_util_pct']} %)" for p in g["foreign"]]
inside = bool(seen) and all(s["interval_s"] < p["first_s"] and p["last_s"] < s["duration_s"] - s["interval_s"] for p in g["foreign"])
rose = sorted(k for k, v in g["counters_after"].items() if v > g["counters_before"].get(k, v))
print(f"     processes on GPU{g['index']} before the run: {before}; sampled {s['ticks']} x over {s['duration_s']} s "
      f"({s['tick_ms']} ms each): {', '.join(seen) or 'no other process'}; inside the run: {inside}; own {g['own']}; "
      f"reasons {g['reasons']}; counters rose {rose}")
PY
judge_again mid-gemm
echo "== the sampler's cost: all_reduce 1G with it off and on"
left=$((232 - (SECONDS - t_all)))
if [ "$left" -ge 16 ]; then  # a pair is about 12 s (two starts of the ranks)
  pairs=$(( left >= 30 ? 2 : 1 ))
  timeout -k 3 "$left" python3 tests/gpu/sampling_ab.py "$pairs" > "$W/sampling-ab.txt" 2>&1
  grep -E "^(sampling|mean)" "$W/sampling-ab.txt"
else
  echo "skipped: $((SECONDS - t_all)) s spent"
fi
fi
echo "== nothing left"; pgrep -af "topodoctor|foreign_gemm|sampling_ab" | grep -v pgrep | head
echo "total $((SECONDS - t_all)) s"
tar czf "$OUT/diagnosis.tgz" -C "$W" .
ls -la "$OUT"
