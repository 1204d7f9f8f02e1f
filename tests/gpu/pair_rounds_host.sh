#!/usr/bin/env bash
# Seconds per round of the pairwise finder on a 2-GPU host (tests/gpu/pair_rounds_host.py):
# six launches of four simulated nodes, with and without --pairwise. Bounded at 300 s in all;
# leaves $OUT/pair-rounds.tgz (the results and each launch's output).
#   OUT=/tmp/out bash tests/gpu/pair_rounds_host.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-/tmp/topodoctor-pair-rounds}
mkdir -p "$OUT"
work=$(mktemp -d)
OUT="$work" timeout -k 5 300 python tests/gpu/pair_rounds_host.py 2>&1 | tee "$work/pair_rounds.log"
rc=${PIPESTATUS[0]}
timeout -k 5 30 tar -czf "$OUT/pair-rounds.tgz" -C "$work" . && rm -rf "$work"
exit "$rc"
