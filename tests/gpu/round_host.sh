#!/usr/bin/env bash
# One pass on the one-GPU host after the stage layout: the GPU tests, every command live, a fresh
# recording of the host, and the start-up benchmark. Results under $OUT.
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m compileall -q topodoctor tests >/dev/null
td() { python3 -m topodoctor "$@"; }
echo "== GPU tests"; timeout 240 python3 -m pytest -q -p no:cacheprovider -n 0 -m gpu tests/gpu 2>&1 | tail -6
echo "== scan"; td scan > "$OUT/scan.txt" 2>&1; echo "rc=$?"; nvidia-smi topo -m > "$OUT/smi-topo.txt" 2>&1
echo "== check"; td check -f line; echo "rc=$?"
echo "== check --level quick"; TIMEFORMAT='wall %R s'; time td check --level quick -f line; echo "rc=$?"
echo "== bandwidth --quick"; time td bandwidth --quick -f json -o "$OUT/bw-quick.json" > /dev/null; echo "rc=$?"
echo "== collectives (one GPU)"; td collectives --op all_reduce --size 1M -f line 2>&1 | tail -2; echo "rc=${PIPESTATUS[0]}"
echo "== collectives --predict"; td collectives --predict --replay h200-x4 | tail -4
echo "== job --live"; td job --live --live-seconds 1 -f line; echo "rc=$?"
echo "== nccl-log"; td nccl-log fixtures/nccl-logs/failures/net-ib -f json | python3 -c "import json,sys; d=json.load(sys.stdin); print([f['code'] for f in d['findings']])"
echo "== record"; td record -o "$OUT/h200-x1.json" --label h200-x1; echo "rc=$?"
td check --replay "$OUT/h200-x1.json" -f line; echo "replay rc=$?"
echo "== start-up"; python3 tests/benchmarks/startup.py 7 | tee "$OUT/startup.json"
