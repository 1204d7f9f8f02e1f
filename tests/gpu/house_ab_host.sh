#!/usr/bin/env bash
# Start-up A/B on a GPU host: `scan` and `check -f line` (live) of the code before the two-process
# layout (BASE: the NVML server, the ask-ahead lists, the hand-written plain parser) against this
# tree, interleaved round by round in one call with `nvidia-smi topo -m` as the yardstick
# (tests/benchmarks/compare.py), plus a replayed check and each side's module count. The new code
# must stay within 15 ms of the old on both live commands. About 90 s. Results: "$OUT/house.tgz".
#
#     OUT=/tmp/out bash tests/gpu/house_ab_host.sh            # BASE=87123a7 unless given
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
unset PYTHONPATH  # each copy imports its own package (compare.py runs it from its directory)
BASE=${BASE:-87123a7}
ROUNDS=${ROUNDS:-31}
OUT=${OUT:?set OUT to a directory}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
res="$work/house"
mkdir -p "$res" "$work/base"

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "base: $BASE; new: $(git rev-parse --short HEAD 2>/dev/null) (+ uncommitted: $(git status --short 2>/dev/null | wc -l) files)"
  echo "python: $(python3 -c 'import sys; print(sys.version.split()[0])')"
  timeout -k 5 20 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
} > "$res/host.txt" 2>&1
cat "$res/host.txt"

# The old code, from this repository's own history; both sides compiled as pip leaves them.
# (or from BASE_TREE, a copy of that commit's tree made beforehand where the repository's history
# does not travel: `git archive 87123a7 topodoctor | tar -x -C .base`)
if [ -n "${BASE_TREE:-}" ]; then
  cp -r "$BASE_TREE"/. "$work/base" || { echo "cannot copy $BASE_TREE"; exit 2; }
else
  timeout -k 5 30 git archive "$BASE" | tar -x -C "$work/base" || { echo "cannot check out $BASE"; exit 2; }
fi
# Bytecode as a pip install leaves it, for everything either side imports (the image sets
# PYTHONDONTWRITEBYTECODE and may hold its packages' sources uncompiled): the runs below write into
# one prefix the first time they import a module, and every timed run reads it from there.
export PYTHONPYCACHEPREFIX=$work/pyc
unset PYTHONDONTWRITEBYTECODE
timeout -k 5 60 python3 -m compileall -q topodoctor "$work/base/topodoctor" > /dev/null

# Both sides answer the same before they are timed (rc, and the whole output of a text scan).
for side in base new; do
  dir=$PWD; [ "$side" = base ] && dir="$work/base"
  (cd "$dir" && timeout -k 5 30 python3 -m topodoctor scan > "$res/scan-$side.txt" 2>&1; echo "scan rc=$?"
   timeout -k 5 30 python3 -m topodoctor check -f line > "$res/check-$side.txt" 2>&1; echo "check rc=$?"
   for args in "check --replay h200-x4 -f line" "check -f line" "scan"; do
     n=$(timeout -k 5 30 python3 -X importtime -m topodoctor $args 2>&1 >/dev/null | grep -c '^import time:')
     echo "modules ($args): $n"
   done) > "$res/sanity-$side.txt" 2>&1
  echo "== $side"; cat "$res/sanity-$side.txt"; head -1 "$res/check-$side.txt"
done
(cd "$work/base" && timeout -k 5 30 python3 -m topodoctor check --replay h200-x4 -f line > /dev/null 2>&1)
timeout -k 5 30 python3 -m topodoctor check --replay h200-x4 -f line > /dev/null 2>&1
timeout -k 5 30 python3 tests/benchmarks/compare.py 1 "$work/base" "$PWD" -- scan > /dev/null 2>&1  # its own imports
if cmp -s "$res/scan-base.txt" "$res/scan-new.txt"; then echo "scan text: identical"; else echo "scan text: DIFFERS"; fi

# Interleaved: each round runs nvidia-smi topo -m, the old code and the new, in that order.
ab() {  # NAME ROUNDS SECONDS ARGS...
  local name=$1 rounds=$2 limit=$3; shift 3
  timeout -k 5 "$limit" python3 tests/benchmarks/compare.py "$rounds" "$work/base" "$PWD" -- "$@" > "$res/ab-$name.json"
  echo "rc=$? $name: $(cat "$res/ab-$name.json")"
}
ab scan "$ROUNDS" 35 scan
ab check "$ROUNDS" 35 check -f line
ab replay 9 20 check --replay h200-x4 -f line  # no driver: the parent's own start-up, not gated

python3 - "$res" "$work/base" "$PWD" <<'EOF' | tee "$res/verdict.txt"
import json, sys
res, base, new = sys.argv[1:]
for name in ("scan", "check", "replay"):
    try:
        doc = json.load(open(f"{res}/ab-{name}.json"))["median_ratio_min"]
    except (OSError, ValueError, KeyError):
        print(f"{name}: no result")
        continue
    b, n = doc[base][0], doc[new][0]
    gate = "" if name == "replay" else ("  within 15 ms" if n - b <= 0.015 else "  OVER 15 ms")
    print(f"{name}: old {b * 1e3:.1f} ms, new {n * 1e3:.1f} ms ({(n - b) * 1e3:+.1f} ms); "
          f"x nvidia-smi topo -m: old {doc[base][1]}, new {doc[new][1]}{gate}")
EOF
tar -czf "$OUT/house.tgz" -C "$work" house
echo "wrote $OUT/house.tgz"
