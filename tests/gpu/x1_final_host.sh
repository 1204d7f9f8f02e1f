#!/usr/bin/env bash
# On a one-GPU host, the code as it stands: the copy timer's passes (host copies beside nvbandwidth in the
# same call, alternating; the SM copies; a size in K/M/G), the checks that measure, the GPU tests, and
# `diagnose` on the reference tools' output made there. Results in $OUT/x1-final.tgz.
#   bash tests/gpu/x1_final_host.sh [ANCHORS_DIR]
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
anchors=${1:-anchors}
W=/tmp/x1final; rm -rf "$W"; mkdir -p "$W"
t() { timeout -k 5 "$@"; }
td() { t "$1" python3 -m topodoctor "${@:2}"; }
( bash "$anchors/build.sh" /tmp/anchors > "$W/build.log" 2>&1 ) &
build=$!
python3 -m compileall -q topodoctor >/dev/null
nvidia-smi --query-compute-apps=pid,used_memory --format=csv > "$W/compute-apps.txt" 2>&1
echo "== passes"
s=$SECONDS; td 60 bandwidth --mode sm -f json -o "$W/bw-sm.json" > "$W/bw-sm.txt" 2>&1; echo "bandwidth --mode sm rc=$? $((SECONDS - s)) s"
s=$SECONDS; td 60 bandwidth --size 256M -f json -o "$W/bw-256M.json" > "$W/bw-256M.txt" 2>&1; echo "bandwidth --size 256M rc=$? $((SECONDS - s)) s"
s=$SECONDS; td 60 check --bandwidth -f line > "$W/check-bw.txt" 2>&1; echo "check --bandwidth rc=$? $((SECONDS - s)) s: $(cat "$W/check-bw.txt")"
s=$SECONDS; td 120 check --level quick -f json > "$W/check-quick.json" 2>"$W/check-quick.err"; echo "check --level quick rc=$? $((SECONDS - s)) s"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('quick:', d['verdict'], d.get('measured'), [(f['code'], f['severity']) for f in d['findings']], d.get('not_measured'))" "$W/check-quick.json"
echo "== GPU tests"
t 200 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu -n 0 > "$W/gpu-tests.txt" 2>&1; echo "gpu tests rc=$?"; tail -5 "$W/gpu-tests.txt"
wait $build; cat "$W/build.log"
A=/tmp/anchors; export LD_LIBRARY_PATH=$A/nccl/lib:${LD_LIBRARY_PATH:-}
echo "== host copies beside nvbandwidth, alternating"
for i in 1 2 3; do
  td 60 bandwidth -f json -o "$W/td-bw-$i.json" > /dev/null 2>&1; echo "td bw rc=$?"
  t 60 $A/nvbandwidth -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce > "$W/nvb-$i.json" 2>&1
done
python3 - "$W" <<'PY'
import glob, json, statistics as st, sys
w = sys.argv[1]
ours, theirs = {"h2d": [], "d2h": []}, {"h2d": [], "d2h": []}
for p in sorted(glob.glob(f"{w}/td-bw-*.json")):
    res = json.load(open(p)); res = res.get("result", res)
    for m in res.get("measurements", []):
        if m.get("mode") in ours and m.get("value"):
            ours[m["mode"]].append(m["value"]["median"])
for p in sorted(glob.glob(f"{w}/nvb-*.json")):
    for tc in json.load(open(p)).get("nvbandwidth", {}).get("testcases", []):
        k = {"host_to_device_memcpy_ce": "h2d", "device_to_host_memcpy_ce": "d2h"}.get(tc.get("name"))
        if k and tc.get("bandwidth_matrix"):
            theirs[k].append(float(tc["bandwidth_matrix"][0][0]))
for k in ours:
    if ours[k] and theirs[k]:
        print(k, "ours", ours[k], "nvbandwidth", theirs[k], "ratio", round(st.median(ours[k]) / st.median(theirs[k]), 3))
    else:
        print(k, "missing", ours[k], theirs[k])
PY
echo "== diagnose on this host's reference output"
t 60 $A/nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce device_local_copy > "$W/nvb.txt" 2>&1
t 60 $A/nccl-tests/build/all_reduce_perf -b 1M -e 64M -f 4 -g 1 > "$W/nt.txt" 2>&1
nvidia-smi topo -m > "$W/topo.txt" 2>&1; nvidia-smi -q > "$W/smi-q.txt" 2>&1
td 30 diagnose "$W/nvb.txt" "$W/nt.txt" "$W/topo.txt" "$W/smi-q.txt" > "$W/diagnose.txt" 2>&1; echo "diagnose rc=$?"; cat "$W/diagnose.txt" | head -30
tar -C /tmp -czf "$OUT/x1-final.tgz" x1final
