#!/usr/bin/env bash
# On a one-GPU host: the reference tools' real output for the evidence readers (nvidia-smi in its
# forms, nccl-tests text and -J, nvbandwidth text and -j, p2pBandwidthLatencyTest, an NCCL INFO log
# with its topology dump, two emulated nodes on the one GPU through NET/Socket), a fresh recording
# of the host, topodoctor's host copies beside nvbandwidth's, and the field-values stress
# (tests/gpu/field_values_stress.py). Everything lands in $OUT/x1-evidence.tgz.
#   bash tests/gpu/x1_evidence_host.sh [ANCHORS_DIR]   (ANCHORS_DIR: a carried copy of the anchors)
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
anchors=${1:-anchors}
W=/tmp/x1ev; rm -rf "$W"; mkdir -p "$W"
t() { timeout -k 5 "$@"; }
td() { t "$1" python3 -m topodoctor "${@:2}"; }
( bash "$anchors/build.sh" /tmp/anchors > "$W/build.log" 2>&1 ) &
build=$!
python3 -m compileall -q topodoctor >/dev/null
{ python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())'
  python3 -c 'import pynvml; print("nvidia-ml-py", getattr(pynvml, "__version__", "?"))'; } > "$W/versions.txt" 2>&1
nvidia-smi > "$W/smi.txt" 2>&1
nvidia-smi -L > "$W/smi-L.txt" 2>&1
nvidia-smi topo -m > "$W/smi-topo-m.txt" 2>&1
for m in r w n a p; do nvidia-smi topo -p2p $m > "$W/smi-topo-p2p-$m.txt" 2>&1; done
nvidia-smi nvlink -s > "$W/smi-nvlink-s.txt" 2>&1; echo "rc=$?" >> "$W/smi-nvlink-s.txt"
nvidia-smi nvlink -e > "$W/smi-nvlink-e.txt" 2>&1; echo "rc=$?" >> "$W/smi-nvlink-e.txt"
nvidia-smi -q > "$W/smi-q.txt" 2>&1
echo "== record"; td 60 record -o "$W/h200-x1.json" --label h200-x1; echo "record rc=$?"
td 30 check --replay "$W/h200-x1.json" -f json > "$W/check-replay.json" 2>&1; echo "replayed check rc=$?"
td 30 check -f json > "$W/check-live.json" 2>&1; echo "live check rc=$?"
echo "== field-values stress"
t 240 python3 tests/gpu/field_values_stress.py --runs 100 --out "$W/field-values.json"; echo "stress rc=$?"
wait $build; cat "$W/build.log"
A=/tmp/anchors; export LD_LIBRARY_PATH=$A/nccl/lib:${LD_LIBRARY_PATH:-}
NT=$A/nccl-tests/build
echo "== nccl-tests"
for op in all_reduce all_gather reduce_scatter alltoall broadcast reduce sendrecv; do
  t 60 "$NT/${op}_perf" -b 8 -e 256M -f 4 -g 1 > "$W/nt-$op.txt" 2>&1; echo "$op rc=$?"
done
t 60 "$NT/all_reduce_perf" -b 1M -e 256M -f 4 -g 1 -J "$W/nt-all_reduce.json" > "$W/nt-all_reduce-J.txt" 2>&1
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,TUNING NCCL_TOPO_DUMP_FILE=$W/nccl-topo-dump.xml \
  NCCL_GRAPH_DUMP_FILE=$W/nccl-graph-dump.xml t 60 "$NT/all_reduce_perf" -b 1M -e 64M -f 4 -g 1 > "$W/nt-info.txt" 2>&1
t 60 "$NT/all_reduce_perf" -b 1M -e 64M -f 4 -g 2 > "$W/nt-g2-one-gpu.txt" 2>&1; echo "g2 on one GPU rc=$?"
echo "== two emulated nodes on the one GPU (NET/Socket over lo)"
cat > /tmp/two_nodes.py <<'PY'
import os, time, torch, torch.distributed as dist
dist.init_process_group("nccl", device_id=torch.device("cuda", 0))
x = torch.ones(64 << 20, device="cuda:0")
for _ in range(3): dist.all_reduce(x)
torch.cuda.synchronize(); t0 = time.perf_counter()
for _ in range(5): dist.all_reduce(x)
torch.cuda.synchronize(); dt = (time.perf_counter() - t0) / 5
if dist.get_rank() == 0: print(f"all_reduce 256 MiB over 2 emulated nodes: {x.numel()*4/dt/1e9:.2f} GB/s algbw")
dist.destroy_process_group()
PY
for r in 0 1; do
  NCCL_HOSTID=node$r NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 \
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=0 t 90 python3 /tmp/two_nodes.py > "$W/two-nodes-rank$r.txt" 2>&1 &
done
wait
echo "== nvbandwidth"
t 30 $A/nvbandwidth -l > "$W/nvb-list.txt" 2>&1
t 120 $A/nvbandwidth -t host_to_device_memcpy_ce device_to_host_memcpy_ce host_to_device_bidirectional_memcpy_ce \
  device_local_copy host_device_latency_sm > "$W/nvb.txt" 2>&1; echo "nvb rc=$?"
t 60 $A/nvbandwidth -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce > "$W/nvb.json" 2>&1
t 60 $A/p2pBandwidthLatencyTest > "$W/p2pbw.txt" 2>&1; echo "p2pbw rc=$?"
echo "== topodoctor host copies beside nvbandwidth, alternating"
for i in 1 2 3; do
  td 60 bandwidth -f json -o "$W/td-bw-$i.json" > /dev/null 2>&1; echo "td bw rc=$?"
  t 60 $A/nvbandwidth -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce > "$W/nvb-$i.json" 2>&1
done
python3 - "$W" <<'PY'
import json, sys, glob, statistics as st
w = sys.argv[1]
ours = {"h2d": [], "d2h": []}
for p in sorted(glob.glob(f"{w}/td-bw-*.json")):
    try:
        d = json.load(open(p))
    except Exception as e:
        print("unreadable", p, e); continue
    res = d.get("result", d)
    for m in res.get("measurements", []):
        if m.get("mode") in ours and m.get("value"):
            ours[m["mode"]].append(m["value"]["median"])
theirs = {"h2d": [], "d2h": []}
for p in sorted(glob.glob(f"{w}/nvb-[0-9].json")):
    try:
        d = json.load(open(p))
    except Exception as e:
        print("unreadable", p, e); continue
    for tc in d.get("nvbandwidth", {}).get("testcases", []):
        key = {"host_to_device_memcpy_ce": "h2d", "device_to_host_memcpy_ce": "d2h"}.get(tc.get("name"))
        if key and tc.get("bandwidth_matrix"):
            theirs[key].append(float(tc["bandwidth_matrix"][0][0]))
for k in ours:
    if ours[k] and theirs[k]:
        print(k, "ours", [round(x, 1) for x in ours[k]], "nvbandwidth", theirs[k],
              "ratio", round(st.median(ours[k]) / st.median(theirs[k]), 3))
    else:
        print(k, "missing", ours[k], theirs[k])
PY
tar -C /tmp -czf "$OUT/x1-evidence.tgz" x1ev
ls -la "$W" | head -60
