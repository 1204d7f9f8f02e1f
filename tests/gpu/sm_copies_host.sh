#!/usr/bin/env bash
# `bandwidth` beside the reference tools on a multi-GPU host, in one call: the default matrix in 7
# rounds alternating with p2pBandwidthLatencyTest for the wall (and the same command with the
# bytecode of the earlier runs, below), the SM modes (the default 4-loads kernel, and nvbandwidth's
# 12-loads shape for comparison), every mode at once with its heatmap, nvbandwidth's CE, SM and
# latency testcases (-j), a replay of the bundled recording and of one made now; then per pair our
# figure over the reference's, the walls and the default command's timeline
# (tests/gpu/sm_copies_compare.py), all into $OUT/sm.tgz. Bounded: every command under timeout(1),
# about 65 s in all on 2 x H100 (150 s at most); a failure is printed and the rest runs.
#     ANCHORS=/tmp/anchors OUT=/tmp/out bash tests/gpu/sm_copies_host.sh
#
# Bytecode: the image sets PYTHONDONTWRITEBYTECODE, and a PYTHONPYCACHEPREFIX makes Python look for
# every module's bytecode there alone. Earlier runs compiled only topodoctor and five packages into
# the prefix, so the standard library and the site's .pth hooks were compiled from source at every
# start of every process (a pip install under any Python has them compiled). Here the prefix gets
# the bytecode of every module the commands import (their first runs write it); the rounds labelled
# "-srcstd" repeat the default command as the earlier runs had it, for the comparison.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
PYC=/tmp/topodoctor-pyc PYC_SRCSTD=/tmp/topodoctor-pyc-srcstd; rm -rf "$PYC" "$PYC_SRCSTD"
export PYTHONPYCACHEPREFIX=$PYC
unset PYTHONDONTWRITEBYTECODE CUDA_VISIBLE_DEVICES  # first runs write what they import into $PYC
W=/tmp/smcopies; rm -rf "$W"; mkdir -p "$W"
A=${ANCHORS:-/tmp/anchors}
: "${OUT:=/tmp/out}"; mkdir -p "$OUT"
T0=$SECONDS
say() { echo "[$((SECONDS - T0)) s] $*"; }
# a command's limit, cut to what is left of the script's 140 s (150 s with the kill's grace)
lim() { local left=$((140 - (SECONDS - T0))); [ "$left" -lt 1 ] && left=1; echo $(($1 < left ? $1 : left)); }
td() { timeout -k 5 "$(lim "$1")" python3 -m topodoctor "${@:2}"; }
# the earlier runs' bytecode: topodoctor and five packages compiled, the rest from source at every start
srcstd() { PYTHONPYCACHEPREFIX=$PYC_SRCSTD PYTHONDONTWRITEBYTECODE=1 "$@"; }
# LABEL SECONDS COMMAND...: run it, its wall (bash's clock, exec to exit) appended to walls.txt
timed() {
  local label=$1 limit=$2 t0 t1 rc; shift 2
  t0=$(date +%s.%N)
  timeout -k 5 "$(lim "$limit")" "$@"; rc=$?
  t1=$(date +%s.%N)
  echo "$label $rc $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" >> "$W/walls.txt"
  return $rc
}

say "== host"
timeout -k 5 20 nvidia-smi -L > "$W/host.txt" 2>&1; timeout -k 5 20 nvidia-smi topo -m >> "$W/host.txt" 2>&1
head -4 "$W/host.txt"
mods=$(timeout -k 5 30 python3 -c "import importlib.util as u; print(' '.join(list(s.submodule_search_locations)[0] for s in
  (u.find_spec(m) for m in ('typer', 'click', 'rich', 'shellingham', 'pynvml')) if s and s.submodule_search_locations))" 2>/dev/null)
timeout -k 5 "$(lim 60)" python3 -m compileall -q -j 0 topodoctor $mods > /dev/null 2>&1; say "bytecode rc=$?"
PYTHONPYCACHEPREFIX=$PYC_SRCSTD timeout -k 5 "$(lim 60)" python3 -m compileall -q -j 0 topodoctor $mods > /dev/null 2>&1
say "bytecode as the earlier runs had it rc=$?"
for tool in nvbandwidth p2pBandwidthLatencyTest; do [ -x "$A/$tool" ] || say "MISSING $A/$tool"; done

say "== the bundled recording and a fresh one, replayed: no could-not-check (TD901)"
td 30 check --replay h100-x2 -f json > "$W/replay-bundled.json" 2> "$W/replay-bundled.err"; say "bundled rc=$?"
td 60 record -o "$W/recording-now.json" --label h100-x2-now > "$W/record.txt" 2>&1; say "record rc=$?"
td 30 check --replay "$W/recording-now.json" -f json > "$W/replay-now.json" 2> "$W/replay-now.err"; say "fresh rc=$?"
for f in replay-bundled replay-now; do
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); f=[x['code'] for x in d['findings']]
print(sys.argv[2], d['verdict'], 'findings', f, 'TD901' if 'TD901' in f or d.get('incomplete') else 'no TD901')" \
    "$W/$f.json" "$f" 2>&1 | tail -1
done

say "== warm-up (the driver's JIT cache, the page cache, every module's bytecode): not counted"
td 60 bandwidth --quick -f json -o "$W/warmup.json" > /dev/null 2> "$W/warmup.err"; say "warm-up rc=$?"
td 60 bandwidth -o "$W/warmup-default.json" > /dev/null 2>&1; say "warm-up (default) rc=$?"
srcstd td 60 bandwidth -o "$W/warmup-srcstd.json" > /dev/null 2>&1; say "warm-up (earlier bytecode) rc=$?"
timeout -k 5 "$(lim 60)" "$A/p2pBandwidthLatencyTest" > /dev/null 2>&1
for i in 1 2 3; do
  timed python3-pass 10 python3 -c pass; srcstd timed python3-pass-srcstd 10 python3 -c pass
done

say "== the default matrix against p2pBandwidthLatencyTest, 7 alternating rounds (and as the earlier runs had it)"
for i in 1 2 3 4 5 6 7; do
  timed p2pBandwidthLatencyTest 60 "$A/p2pBandwidthLatencyTest" > "$W/p2p-$i.txt" 2>&1 || say "p2p round $i failed"
  timed bandwidth-default 60 python3 -m topodoctor bandwidth -o "$W/default-$i.json" > "$W/default-$i.txt" 2>&1 \
    || say "bandwidth round $i rc=$? (1 = findings)"
  srcstd timed bandwidth-default-srcstd 60 python3 -m topodoctor bandwidth -o "$W/srcstd-$i.json" \
    > "$W/srcstd-$i.txt" 2>&1 || say "bandwidth (earlier bytecode) round $i rc=$?"
done
tail -n 3 "$W/walls.txt"; tail -n 2 "$W/default-1.txt"

say "== the SM modes: the 4-loads kernel (default) and nvbandwidth's own 12-loads shape"
timed bandwidth-sm 60 python3 -m topodoctor bandwidth -m sm -o "$W/sm.json" > "$W/sm.txt" 2>&1; say "sm rc=$?"
timed bandwidth-sm-u12 60 python3 -m topodoctor bandwidth -m sm-oneway -m sm-bidir --sm-kernel stride-u12 \
  -o "$W/sm-u12.json" > "$W/sm-u12.txt" 2>&1; say "sm-u12 rc=$?"
timed bandwidth-all 90 python3 -m topodoctor bandwidth -m all -o "$W/all.json" --heatmap "$W/all.svg" \
  > "$W/all.txt" 2>&1; say "all rc=$?"
COLUMNS=100 td 30 bandwidth --from "$W/all.json" > "$W/all-100.txt" 2>&1
say "widest line at COLUMNS=100: $(awk '{ if (length($0) > m) m = length($0) } END { print m }' "$W/all-100.txt")"
cat "$W/all-100.txt" | tail -n 30

say "== nvbandwidth (-j): copy engine, SM copies, SM latency"
ce="-t device_to_device_memcpy_read_ce -t device_to_device_memcpy_write_ce"
ce="$ce -t device_to_device_bidirectional_memcpy_read_ce -t device_to_device_bidirectional_memcpy_write_ce"
ce="$ce -t host_to_device_memcpy_ce -t device_to_host_memcpy_ce"
timed nvbandwidth-ce 90 "$A/nvbandwidth" -j $ce > "$W/nvb-ce.json" 2> "$W/nvb-ce.err"; say "nvbandwidth CE rc=$?"
sm="-t device_to_device_memcpy_read_sm -t device_to_device_bidirectional_memcpy_read_sm"
timed nvbandwidth-sm 90 "$A/nvbandwidth" -j $sm > "$W/nvb-sm.json" 2> "$W/nvb-sm.err"; say "nvbandwidth SM rc=$?"
timed nvbandwidth-latency 90 "$A/nvbandwidth" -j -t device_to_device_latency_sm > "$W/nvb-lat.json" \
  2> "$W/nvb-lat.err"; say "nvbandwidth latency rc=$?"
say "== ours again after nvbandwidth (same clocks, same hour)"
timed bandwidth-sm-after 60 python3 -m topodoctor bandwidth -m sm -o "$W/sm-after.json" > "$W/sm-after.txt" 2>&1
say "sm (after) rc=$?"

say "== side by side"
timeout -k 5 "$(lim 60)" python3 tests/gpu/sm_copies_compare.py "$W" 2>&1 | tee "$W/summary.txt"
say "== nothing left behind"; pgrep -af "topodoctor|nvbandwidth|p2pBandwidth" | grep -v pgrep | head
timeout -k 5 "$(lim 20)" nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader | head
tar czf "$OUT/sm.tgz" -C "$W" . ; ls -la "$OUT"; say "done"
