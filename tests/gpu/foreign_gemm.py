"""A foreign load for the diagnosis runs: a bf16 GEMM loop on one GPU for a while, as another
user's job would hold it. Usage: python3 foreign_gemm.py DEVICE SECONDS [GO_FILE]

With GO_FILE it imports torch, then waits (at most 120 s) for that file to exist before it touches
CUDA: it shows on the GPU only from then on, so a script can start it in the middle of a run."""

import os
import sys
import time

import torch

device, seconds = int(sys.argv[1]), float(sys.argv[2])
go = sys.argv[3] if len(sys.argv) > 3 else None
if go is not None:
    waited = time.monotonic() + 120
    while not os.path.exists(go) and time.monotonic() < waited:
        time.sleep(0.05)
torch.cuda.set_device(device)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.monotonic() + seconds
print(f"foreign GEMM on GPU{device} for {seconds} s from {time.time():.2f}", flush=True)
while time.monotonic() < end:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
print(f"foreign GEMM on GPU{device} done at {time.time():.2f}", flush=True)
