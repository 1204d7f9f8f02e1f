#!/usr/bin/env bash
# On a 2-GPU host: small messages through every path (collectives --latency, beside nccl-tests
# eager and -G when $ANCHORS has it), --algo ring,tree on all_reduce 1M-1G with the run-to-run
# spread, check --level quick and long on both GPUs (the peer comparison), and the runs across
# emulated nodes (a real hang judged by `job`, a slowed node named by --pairwise, two nodes against
# --predict --nodes 2). Everything into $OUT/small.tgz.
#
#   OUT=/tmp/out [ANCHORS=/path/to/anchors] bash tests/gpu/small_msg_host.sh     # <= 240 s
#
# NVSHMEM: wheels in .whl/ (nvshmem4py-cu13, cuda-core, numpy) are installed into /tmp/site when
# nvshmem4py is not importable already. Bounded: every command under timeout(1) within what is
# left of TOTAL seconds; a failure is printed and the rest still runs. NVLink multicast stays off.
set -u
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
TOTAL=${TOTAL:-235}
T0=$SECONDS
OUT=${OUT:-/tmp/small-out}
W=/tmp/small
rm -rf "$W"
mkdir -p "$W" "$OUT"
exec > >(tee "$W/run.log") 2>&1
left() { echo $((TOTAL - (SECONDS - T0))); }
lim() { # the seconds a command may take: what it asks, within what is left (5 s kept for packing)
  local want=$1 l
  l=$(($(left) - 5))
  ((l < want)) && want=$l
  ((want < 1)) && want=1
  echo "$want"
}
td() { local s; s=$(lim "$1"); shift; timeout -k 5 "$s" python3 -m topodoctor "$@"; }
stage() { echo; echo "== $1 ($((SECONDS - T0)) s in, $(left) s left)"; }

stage "environment"
nvidia-smi -L 2>&1 | head -4
if ! timeout -k 5 30 python3 -c "import nvshmem.core" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
  timeout -k 5 60 python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl &&
    export PYTHONPATH=/tmp/site:$PYTHONPATH || echo "could not install .whl/*.whl"
fi
timeout -k 5 30 python3 - <<'EOF' 2>&1 | tail -1
from importlib import metadata
names = ("nvshmem4py-cu13", "nvidia-nvshmem-cu13", "cuda-core", "cuda-bindings", "cuda-pathfinder", "numpy", "torch")
def version(p):
    try:
        return metadata.version(p)
    except metadata.PackageNotFoundError:
        return "absent"
print("; ".join(f"{p} {version(p)}" for p in names))
EOF
# (torch, NCCL and nvshmem4py's versions as the ranks saw them are in latency.json)

stage "small messages: collectives --latency"
td 90 collectives --latency -o "$W/latency.json" > "$W/latency.txt" 2> "$W/latency.err"
echo "rc=$?"
cat "$W/latency.txt"
tail -3 "$W/latency.err"

NT=${ANCHORS:-/nonexistent}/nccl-tests/build
if [ -x "$NT/all_reduce_perf" ]; then
  stage "the same sizes through nccl-tests (eager, then -G: CUDA graphs)"
  export LD_LIBRARY_PATH=$ANCHORS/nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  nt() { local name=$1; shift; timeout -k 5 "$(lim 20)" "$@" > "$W/nt-$name.txt" 2>&1; echo "$name rc=$?"; grep -E '^ +[0-9]+ ' "$W/nt-$name.txt" | tr -s ' ' | cut -c1-120; }
  nt allreduce-eager "$NT/all_reduce_perf" -g 2 -b 1K -e 1M -f 1024 -w 5 -n 20
  nt allreduce-graph "$NT/all_reduce_perf" -g 2 -b 1K -e 1M -f 1024 -w 5 -n 20 -G 20
  nt allreduce-100m "$NT/all_reduce_perf" -g 2 -b 100M -e 100M -w 5 -n 20
  nt sendrecv-eager "$NT/sendrecv_perf" -g 2 -b 1K -e 100K -f 100 -w 5 -n 20
else
  echo "(no nccl-tests in \$ANCHORS: the reference runs are skipped)"
fi

stage "--algo ring,tree on all_reduce 1M-1G"
td 75 collectives --op all_reduce --size 1M:1G --step-factor 4 --algo ring,tree -f json > "$W/algo.json" 2> "$W/algo.err"
echo "rc=$?"
timeout -k 5 30 python3 - "$W/algo.json" > "$W/algo.txt" 2>&1 <<'EOF'
import json, sys
from topodoctor.core.codec import from_jsonable
from topodoctor.measure.collectives.sweeps import AlgoSweep
from topodoctor.report.collectives_sweeps import algo_lines
try:
    doc = json.load(open(sys.argv[1]))["algorithms"]
except (OSError, ValueError, KeyError) as exc:
    sys.exit(f"no --algo result: {type(exc).__name__}: {exc}")
print("\n".join(algo_lines(from_jsonable(AlgoSweep, doc, "algo sweep"))))
EOF
cat "$W/algo.txt"
tail -3 "$W/algo.err"

summary() { # FILE: the check's one line and its findings, from its JSON
  timeout -k 5 20 python3 - "$1" <<'EOF' 2>&1 | cut -c1-220
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as exc:
    sys.exit(f"no JSON: {exc}")
print(d.get("reason"), f"({d.get('elapsed_s')} s, measured {d.get('measured')})")
for f in d.get("findings", []):
    print(" ", f["code"], f["severity"], f["subject"], f["message"][:150])
EOF
}

stage "check --level quick (both GPUs, peers compared)"
td 60 check --level quick -f json > "$W/check-quick.json" 2> "$W/check-quick.err"
echo "rc=$?"
summary "$W/check-quick.json"

stage "emulated nodes: a staged hang, a slowed node, two nodes against the model"
budget=$(($(left) - 90))
((budget < 60)) && budget=60
OUT=$W timeout -k 5 "$(lim $((budget + 10)))" python3 tests/gpu/emulated_nodes.py job pairwise two-nodes --budget "$budget"
echo "rc=$?"

stage "check --level long (both GPUs, peers compared)"
td 150 check --level long -f json > "$W/check-long.json" 2> "$W/check-long.err"
echo "rc=$?"
summary "$W/check-long.json"

stage "left behind"
pgrep -af "emulated_nodes.py|while True: pass|topodoctor.measure.collectives" | grep -v pgrep | head -5
echo "done in $((SECONDS - T0)) s"
tar czf "$OUT/small.tgz" -C "$W" . && ls -la "$OUT/small.tgz"
