#!/usr/bin/env bash
# One call on a two-GPU host for the matrix's wall and the command's start, side by side:
#   1. the reference tools built (.anchors/build.sh, in the background while nothing is timed);
#   2. the host copies' buffer zeroed by a GPU through its mapping, checked byte for byte;
#   3. the default matrix's wall against p2pBandwidthLatencyTest, alternating (wall_host.sh);
#   4. nvbandwidth's copy-engine figures for the pairs and the host links beside our JSON;
#   5. the start-up A/B of scan and check -f line against the code before the house's step 2
#      (house_ab_host.sh, BASE_TREE=.base), and each side traced process by process
#      (start_trace.py), 5 runs of each command;
#   6. CUDA's start alone and beside a live probe (cuinit_contention.py).
# NO_NVB=1 skips the reference tools' build and nvbandwidth (p2pBandwidthLatencyTest is built alone);
# TRACE_ONLY=1 runs the traces and part 6 alone.
#     OUT=/tmp/out ROUNDS=9 AB_ROUNDS=21 bash tests/gpu/wall_start_host.sh
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:?set OUT}
say() { echo "$*" | tee -a "$OUT/log.txt"; }
A=/tmp/anchors
[ -n "${TRACE_ONLY:-}" ] && AB_ROUNDS=0  # the traces alone (part 5's second half)
[ -z "${TRACE_ONLY:-}" ] && {
if [ -z "${NO_NVB:-}" ]; then (bash .anchors/build.sh "$A" > "$OUT/build.txt" 2>&1) & else (true) & fi
builder=$!

say "== the host buffer zeroed by the GPU through its mapping"
PYTHONPATH=$PWD timeout -k 5 60 python3 - <<'EOF' 2>&1 | tee -a "$OUT/log.txt"
import ctypes
from topodoctor.measure.timer import engine as copy_engine
from topodoctor.measure.timer import kernels, on_gpu, plans
t = plans.timer(plans.BANDWIDTH)
t.hello({"op": "hello", "visible": None, "peers": True, "kernels": True})
n = 64 << 20
t.prepare({"op": "prepare", "modes": ["h2d", "d2h"], "size": n, "host_size": n})
pinned = t.host_buffers[(n, "io")]
fell_back = []
real = copy_engine.Timer._clear
copy_engine.Timer._clear = lambda self, *a: fell_back.append(1) or real(self, *a)
for g in t.gpus:
    ctypes.memset(pinned, 0x5A, n)
    stream = t._stream(g, 0)
    t._clear(g, pinned, n, stream)
    t.cu("cuCtxSetCurrent", g.ctx)
    t.cu("cuCtxSynchronize")
    zero = ctypes.string_at(pinned, n).count(0) == n
    print(f"GPU ordinal {g.ordinal}: zeroed by the GPU {zero}, CPU fallback {bool(fell_back)}")
for d in ("h2d", "d2h"):
    for g in t.gpus:
        a = t.host({"op": "host", "dev": g.ordinal, "dir": d, "size": n, "iters": 4, "samples": 5})
        print(d, g.ordinal, "verified", a["verified"], "median GB/s", sorted(a["samples"])[2], a["timings"])
EOF
wait "$builder"; [ -z "${NO_NVB:-}" ] && cat "$OUT/build.txt" && ln -sf "$A/p2pBandwidthLatencyTest" /tmp/p2pBandwidthLatencyTest

say "== the default matrix's wall against p2pBandwidthLatencyTest"
OUT=$OUT ROUNDS=${ROUNDS:-9} bash tests/gpu/wall_host.sh 2>&1 | tee -a "$OUT/log.txt"
[ -z "${NO_NVB:-}" ] && say "== nvbandwidth's copy engine" && timeout -k 5 120 "$A/nvbandwidth" -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce \
  device_to_device_memcpy_write_ce device_to_device_memcpy_read_ce device_to_device_bidirectional_memcpy_write_ce \
  > "$OUT/nvb-ce.json" 2> "$OUT/nvb-ce.err" && say "nvbandwidth rc=$?"
timeout -k 5 60 python3 -m topodoctor bandwidth -f json -o "$OUT/bandwidth-after.json" > /dev/null 2>&1

}
say "== start-up A/B"
[ "${AB_ROUNDS:-21}" -gt 0 ] && BASE_TREE=$PWD/.base ROUNDS=${AB_ROUNDS:-21} OUT=$OUT bash tests/gpu/house_ab_host.sh 2>&1 | tail -8 | tee -a "$OUT/log.txt"
say "== traced"
export PYTHONPYCACHEPREFIX=/tmp/topodoctor-pyc-trace
unset PYTHONDONTWRITEBYTECODE
for side in base new; do
  dir=$PWD; [ "$side" = base ] && dir=$PWD/.base
  for args in "scan" "check -f line"; do  # split into words on purpose below
    tag=$(echo "$args" | tr -d ' -')
    # shellcheck disable=SC2086
    (cd "$dir" && timeout -k 5 30 python3 -m topodoctor $args > /dev/null 2>&1)  # bytecode
    for i in 1 2 3 4 5; do
      # shellcheck disable=SC2086
      (cd "$dir" && t0=$(date +%s.%N) && timeout -k 5 30 python3 "$OLDPWD/tests/gpu/start_trace.py" \
        "$OUT/trace-$side-$tag-$i.txt" $args > /dev/null 2>&1; t1=$(date +%s.%N)
       echo "$side $tag $i wall $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", b - a }')") >> "$OUT/trace-walls.txt"
    done
  done
done
tee -a "$OUT/log.txt" < "$OUT/trace-walls.txt"
(cd "$OUT" && tar -czf traces.tgz trace-*-*.txt && rm -f trace-*-*.txt)  # one file back, not twenty
say "== CUDA's start alone and beside a probe"
[ "${CONTENTION_ROUNDS:-7}" -gt 0 ] && PYTHONPATH=$PWD timeout -k 5 200 python3 tests/gpu/cuinit_contention.py "${CONTENTION_ROUNDS:-7}" 2>&1 | tee -a "$OUT/log.txt"
say "== nothing left behind"; pgrep -af "topodoctor|nvbandwidth|p2pBandwidth" | grep -v pgrep | head
