#!/usr/bin/env bash
# The diagnosis evidence on a multi-GPU host: one NCCL setting changed at a time (and a foreign
# GEMM on the last GPU) through `collectives -o --log-dir` and `check --level quick`, a fresh
# recording of the host, all into $OUT/evidence.tgz. Bounded: every command under timeout(1).
set -u
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/tmp/evidence; rm -rf "$W"; mkdir -p "$W"
label=${1:-h100-x2}
python3 -m compileall -q topodoctor >/dev/null
td() { timeout -k 5 "$1" python3 -m topodoctor "${@:2}"; }
nvidia-smi topo -m > "$W/smi-topo.txt" 2>&1; nvidia-smi -L >> "$W/smi-topo.txt"
python3 -c "import torch; print('torch', torch.__version__, 'nccl', torch.cuda.nccl.version())" >> "$W/smi-topo.txt" 2>&1
echo "== record"; td 60 record -o "$W/$label.json" --label "$label"; echo "rc=$?"
td 30 scan > "$W/scan.txt" 2>&1; td 30 check -f json > "$W/check.json" 2>"$W/check.err"; echo "check rc=$?"
run() {  # NAME OPS SIZES [VAR=VALUE ...]
  local name=$1 ops=$2 sizes=$3; shift 3
  local t0=$SECONDS
  env "$@" timeout -k 5 120 python3 -m topodoctor collectives --op "$ops" --size "$sizes" -n 10 -w 2 \
    -o "$W/coll-$name.json" --log-dir "$W/logs-$name" > "$W/coll-$name.txt" 2>&1
  echo "$name rc=$? $((SECONDS - t0)) s: $(grep -E 'TD0|^ *1073741824' "$W/coll-$name.txt" | head -4 | tr -s ' ' | cut -c1-150 | tr '\n' '|')"
}
echo "== collectives, one setting at a time"
run default all_reduce,all_gather,reduce_scatter,all_to_all,broadcast,reduce,sendrecv 256M,1G
run proto-ll all_reduce 64M,1G NCCL_PROTO=LL
run proto-ll128 all_reduce 64M,1G NCCL_PROTO=LL128
run algo-tree all_reduce,all_gather 64M,1G NCCL_ALGO=Tree
run buffsize all_reduce 64M,1G NCCL_BUFFSIZE=65536
run nthreads all_reduce 64M,1G NCCL_NTHREADS=64
run maxch1 all_reduce 64M,1G NCCL_MAX_NCHANNELS=1
run ch2 all_reduce 64M,1G NCCL_MIN_NCHANNELS=2 NCCL_MAX_NCHANNELS=2
run maxctas all_reduce 64M,1G NCCL_MAX_CTAS=2
run minctas all_reduce 64M,1G NCCL_MIN_CTAS=32
run p2p-loc all_reduce 64M,1G NCCL_P2P_LEVEL=LOC
run p2p-disable all_reduce 64M,1G NCCL_P2P_DISABLE=1
run p2p-shm-off all_reduce 64M NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
run shm-off all_reduce 64M,1G NCCL_SHM_DISABLE=1
run cumem-off all_reduce 64M,1G NCCL_CUMEM_ENABLE=0
run launch-group all_reduce 64M,1G NCCL_LAUNCH_MODE=GROUP
run launch-blocking all_reduce 64M,1G CUDA_LAUNCH_BLOCKING=1
run net-chunk all_reduce 64M,1G NCCL_P2P_NET_CHUNKSIZE=4096
run gdr-level all_reduce 64M,1G NCCL_NET_GDR_LEVEL=LOC
run ib-disable all_reduce 64M,1G NCCL_IB_DISABLE=1
run p2p-memcpy all_reduce 64M,1G NCCL_P2P_USE_CUDA_MEMCPY=1
last=$(( $(nvidia-smi -L | wc -l) - 1 ))
echo "== foreign GEMM on GPU$last"
timeout -k 5 75 python3 tests/gpu/foreign_gemm.py "$last" 60 > "$W/gemm.log" 2>&1 &
gemm=$!; sleep 6
run foreign-gemm all_reduce 64M,1G
t0=$SECONDS; td 90 check --level quick -f json > "$W/check-quick-gemm.json" 2>"$W/check-quick-gemm.err"
echo "check quick (gemm) rc=$? $((SECONDS - t0)) s"
td 90 check --level quick -f line > "$W/check-quick-gemm.line" 2>&1
kill "$gemm" 2>/dev/null; wait "$gemm" 2>/dev/null; sleep 2
echo "== healthy check levels"
t0=$SECONDS; td 90 check --level quick -f json > "$W/check-quick.json" 2>"$W/check-quick.err"; echo "check quick rc=$? $((SECONDS - t0)) s"
td 90 check --level quick -f line > "$W/check-quick.line" 2>&1; cat "$W/check-quick.line" | cut -c1-200
t0=$SECONDS; td 180 check --level long -f json > "$W/check-long.json" 2>"$W/check-long.err"; echo "check long rc=$? $((SECONDS - t0)) s"
echo "== nothing left"; pgrep -af "topodoctor|foreign_gemm" | grep -v pgrep | head
tar czf "$OUT/evidence.tgz" -C "$W" .
ls -la "$OUT"
