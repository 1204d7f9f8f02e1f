"""A foreign load for the diagnosis runs: a bf16 GEMM loop on one GPU for a while, as another
user's job would hold it. Usage: python3 foreign_gemm.py DEVICE SECONDS"""

import sys
import time

import torch

device, seconds = int(sys.argv[1]), float(sys.argv[2])
torch.cuda.set_device(device)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.monotonic() + seconds
print(f"foreign GEMM on GPU{device} for {seconds} s", flush=True)
while time.monotonic() < end:
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
