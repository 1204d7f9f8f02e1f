#!/usr/bin/env bash
# The runs a host of four or more GPUs makes, side by side with the reference tools in the same call,
# in three parts that each fit one device command (<= 10 min; each part stops its steps at PART_S):
#   part a: the reference tools built (.anchors), the start-up A/B against the code before the round
#           (house_ab_host.sh, BASE_TREE=.base), `scan` against `nvidia-smi topo -m` and a fresh
#           recording (capture_host.sh), `bandwidth` in every mode against nvbandwidth and
#           p2pBandwidthLatencyTest (sm_copies_host.sh), every collective at 64 MiB - 1 GiB against
#           nccl-tests with `--predict` beside it (collectives_bench.py --large);
#   part b: the small-message table beside nccl-tests eager and -G, `--algo ring,tree`, the quick and
#           long checks with the peer comparison, the emulated nodes of two GPUs each (a hang, a
#           slowed node, two nodes against the model) (small_msg_host.sh); the cause engine's runs,
#           each NCCL setting and a foreign GEMM on the last GPU (diagnosis_host.sh);
#   part c: `--scaling` over 2, 4, ... GPUs, the quick check's wall, the GPU tests, the live commands.
# Part a leaves the reference tools in /tmp/anchors for the parts after it on a warm machine (they
# build them again where it is gone). Results into $OUT, one .tgz per part and its log.
#     OUT=/tmp/out bash tests/gpu/x4_host.sh a|b|c
set -u
part=${1:?a, b or c}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD
OUT=${OUT:?set OUT}
PART_S=${PART_S:-570}
T0=$SECONDS
A=/tmp/anchors
W=/tmp/x4-$part; rm -rf "$W"; mkdir -p "$W"
exec > >(tee "$OUT/part-$part.log") 2>&1
say() { echo "[$((SECONDS - T0)) s] $*"; }
left() { echo $((PART_S - (SECONDS - T0))); }
lim() { local l; l=$(($(left) - 5)); ((l < $1)) || l=$1; ((l < 1)) && l=1; echo "$l"; }
run() { local s=$1; shift; timeout -k 5 "$(lim "$s")" "$@"; }  # SECONDS COMMAND...: bounded by the part's time
NG=$(timeout -k 5 20 nvidia-smi -L 2>/dev/null | grep -c "^GPU")
label=$(timeout -k 5 20 nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 |
  grep -oE "H100|H200|A100|B200|GB200|L40S?" | tr 'A-Z' 'a-z')-x$NG
say "host: $NG GPUs ($label), $(nproc) CPUs"; timeout -k 5 20 nvidia-smi topo -m 2>&1 | head -12
[ -x "$A/nvbandwidth" ] && [ -x "$A/nccl-tests/build/all_reduce_perf" ] || {
  say "== the reference tools"; run 200 bash .anchors/build.sh "$A" > "$W/anchors.log" 2>&1; say "build rc=$?"
  tail -3 "$W/anchors.log"
}

if [ "$part" = a ]; then
  say "== start-up A/B (the code before the round against this tree)"
  BASE_TREE=$PWD/.base ROUNDS=21 OUT=$W run 150 bash tests/gpu/house_ab_host.sh 2>&1 | tail -12
  say "== scan against nvidia-smi topo -m, a fresh recording ($label)"
  OUT=$W/capture run 90 bash tests/gpu/capture_host.sh "$label" > "$W/capture.log" 2>&1
  grep -E "equal|live ==|rc=|wall|NVML ms" "$W/capture.log" | head -16
  say "== bandwidth, every mode, against nvbandwidth and p2pBandwidthLatencyTest"
  BUDGET=$(($(lim 230) - 10)) ROUNDS=5 SRCSTD=0 ANCHORS=$A OUT=$W run 240 bash tests/gpu/sm_copies_host.sh > "$W/sm.log" 2>&1
  grep -E "LOW|= [0-9.]+ x|wall|widest|TD901|rc=" "$W/sm.log" | head -40
  say "== every collective at 64 MiB - 1 GiB against nccl-tests, --predict beside it"
  run 150 python3 tests/benchmarks/collectives_bench.py --large --anchors "$A" --out "$W/coll" --iters 20 --warmup 5 \
    2>&1 | tail -40
elif [ "$part" = b ]; then
  say "== small messages, --algo, check quick and long, emulated nodes"
  TOTAL=$(($(lim 300) - 5)) ANCHORS=$A OUT=$W run 300 bash tests/gpu/small_msg_host.sh > "$W/small.log" 2>&1
  grep -vE "^(total|-rw|drwx)" "$W/small.log" | cut -c1-240 | head -150
  say "== the cause engine's runs, each NCCL setting and a foreign GEMM on GPU$((NG - 1))"
  MID=0 SETTINGS=1 OUT=$W run 240 bash tests/gpu/diagnosis_host.sh 2>&1 | grep -vE "^(total|-rw|drwx)" | cut -c1-260
else
  say "== --scaling over 2, 4, ... GPUs"
  run 120 python3 -m topodoctor collectives --scaling --op all_reduce,all_gather,reduce_scatter --size 64M,1G -n 10 \
    -o "$W/scaling.json" > "$W/scaling.txt" 2>&1; say "scaling rc=$?"; cut -c1-200 "$W/scaling.txt" | tail -30
  say "== check --level quick, its wall (3 runs)"
  for i in 1 2 3; do
    t=$SECONDS; run 60 python3 -m topodoctor check --level quick -f line > "$W/quick-$i.line" 2>&1
    say "quick $i rc=$? $((SECONDS - t)) s: $(cut -c1-200 "$W/quick-$i.line")"
  done
  say "== GPU tests"; run 200 python3 -m pytest -q -p no:cacheprovider -n 0 -m gpu tests/gpu > "$W/gpu-tests.log" 2>&1
  tail -8 "$W/gpu-tests.log"
  say "== live"
  for c in "scan" "check -f line" "bandwidth" "scan --draw $W/host.svg"; do
    f=$W/live-$(echo "$c" | tr ' /' '__' | cut -c1-40).txt; t=$SECONDS
    run 90 python3 -m topodoctor $c > "$f" 2>&1
    say "$c: rc=$? $((SECONDS - t)) s: $(tail -1 "$f" | cut -c1-200)"
  done
  run 30 python3 -c "import topodoctor; h = topodoctor.scan(); r = topodoctor.check(h); print('api:', len(h.graph.nodes), 'nodes,', r.exit_code, [f.code for f in r.findings])" 2>&1 | tail -1
fi
say "== nothing left"; pgrep -af "topodoctor|foreign_gemm|nvbandwidth|_perf|emulated_nodes" | grep -v pgrep | head
tar czf "$OUT/x4-$part.tgz" -C "$W" . ; say "done"
