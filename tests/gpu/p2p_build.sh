#!/usr/bin/env bash
# p2pBandwidthLatencyTest built once per machine into /tmp (about 10 s), from the reference sources
# carried in .anchors: the yardstick of every wall time the GPU scripts take. Names the GPUs first.
set -u
P2P=/tmp/p2pBandwidthLatencyTest
ARCH=$(timeout -k 5 20 nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
timeout -k 5 20 nvidia-smi -L
[ -x "$P2P" ] || timeout -k 5 90 nvcc -O3 -arch="sm_$ARCH" -I.anchors/p2pBandwidthLatencyTest \
  .anchors/p2pBandwidthLatencyTest/p2pBandwidthLatencyTest.cu -o "$P2P" || { echo "cannot build $P2P"; exit 2; }
