#!/usr/bin/env bash
# The last pass on a multi-GPU host, in two parts that each fit one device command (<= 10 min):
#   part a: the reference tools built (.anchors), start-up A/B against the code before the round
#           (house_ab_host.sh, BASE_TREE=.base), bandwidth in every mode against nvbandwidth and
#           p2pBandwidthLatencyTest (sm_copies_host.sh), the small-message table beside nccl-tests
#           eager and -G (NVSHMEM from .whl where carried);
#   part b: the cause engine's runs (diagnosis_host.sh), the GPU tests, the live commands.
# Results into $OUT; every command bounded.
#     OUT=/tmp/out bash tests/gpu/final_host.sh a|b
set -u
part=${1:?a or b}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:?set OUT}
T0=$SECONDS
say() { echo "[$((SECONDS - T0)) s] $*"; }
if [ "$part" = a ]; then
  say "== anchors"; timeout -k 5 200 bash .anchors/build.sh /tmp/anchors 2>&1 | tail -3
  say "== start-up A/B"; BASE_TREE=$PWD/.base timeout -k 5 150 bash tests/gpu/house_ab_host.sh 2>&1 | tail -25
  say "== bandwidth, every mode"; ANCHORS=/tmp/anchors timeout -k 5 170 bash tests/gpu/sm_copies_host.sh > /tmp/sm.log 2>&1
  grep -E "LOW|= [0-9.]+ x|wall|timer_|probe_done|copies_done|result_back|widest|TD901|left behind" /tmp/sm.log | head -40
  say "== small messages"
  W=/tmp/small; rm -rf "$W"; mkdir -p "$W"
  if ls .whl/*.whl > /dev/null 2>&1; then
    timeout -k 5 60 python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl &&
      export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} timeout -k 5 90 python3 -m topodoctor collectives --latency \
    -o "$W/latency.json" > "$W/latency.txt" 2> "$W/latency.err"; echo "latency rc=$?"; cat "$W/latency.txt"
  NT=/tmp/anchors/nccl-tests/build
  nt() { local name=$1; shift; LD_LIBRARY_PATH=/tmp/anchors/nccl/lib timeout -k 5 30 "$@" > "$W/nt-$name.txt" 2>&1
    echo "$name rc=$?"; grep -E '^ +[0-9]+ ' "$W/nt-$name.txt" | tr -s ' ' | cut -c1-120; }
  nt allreduce-eager "$NT/all_reduce_perf" -g 2 -b 1K -e 1M -f 1024 -w 5 -n 20
  nt allreduce-graph "$NT/all_reduce_perf" -g 2 -b 1K -e 1M -f 1024 -w 5 -n 20 -G 20
  nt allreduce-100m "$NT/all_reduce_perf" -g 2 -b 100M -e 100M -w 5 -n 20
  nt sendrecv-eager "$NT/sendrecv_perf" -g 2 -b 1K -e 100K -f 100 -w 5 -n 20
  nt sendrecv-graph "$NT/sendrecv_perf" -g 2 -b 1K -e 100K -f 100 -w 5 -n 20 -G 20
  tar czf "$OUT/small.tgz" -C "$W" . ; cp /tmp/sm.log "$OUT/sm.log"
else
  say "== the cause engine's runs"; SETTINGS=${SETTINGS:-1} timeout -k 5 260 bash tests/gpu/diagnosis_host.sh 2>&1 | grep -vE "^(total|-rw|drwx)" | cut -c1-260
  say "== GPU tests"; PYTHONPATH=$PWD timeout -k 5 170 python3 -m pytest -q -p no:cacheprovider -n 0 -m gpu tests/gpu > "$OUT/gpu-tests.log" 2>&1
  tail -8 "$OUT/gpu-tests.log"
  say "== live"
  L=/tmp/live; rm -rf "$L"; mkdir -p "$L"
  for c in "scan" "check -f line" "check --level quick -f line" "bandwidth" "scan --draw $L/host.svg"; do
    t=$SECONDS; PYTHONPATH=$PWD timeout -k 5 90 python3 -m topodoctor $c > "$L/$(echo "$c" | tr ' /' '__').txt" 2>&1
    echo "$c: rc=$? $((SECONDS - t)) s: $(tail -1 "$L/$(echo "$c" | tr ' /' '__').txt" | cut -c1-200)"
  done
  PYTHONPATH=$PWD timeout -k 5 30 python3 -c "import topodoctor; h = topodoctor.scan(); r = topodoctor.check(h); print('api:', len(h.graph.nodes), 'nodes,', r.exit_code, [f.code for f in r.findings])" 2>&1 | tail -1
  tar czf "$OUT/live.tgz" -C "$L" .
  say "== nothing left"; pgrep -af "topodoctor|foreign_gemm|nvbandwidth|_perf" | grep -v pgrep | head
fi
say "done"
