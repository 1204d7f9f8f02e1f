"""Start-up of the commands a prolog and a person run most, side by side with `nvidia-smi topo -m`
and a bare interpreter in the same run (GPU host), and the modules each loads.

    python3 tests/benchmarks/startup.py [ROUNDS]      # prints one JSON document

Rounds interleave the commands, so a slow moment of the host weighs on all of them alike; the
medians are what docs/benchmarks.md reports. Run it with bytecode compiled, as a pip install
leaves it (python3 -m compileall -q topodoctor). The interpreter it runs under is the one every
command runs with, and the document names it and the ``.pth`` files its site runs at each start
(the GPU hosts' image runs numba-cuda's, 28 ms before any code): tests/benchmarks/clean_venv.sh
makes a venv that holds topodoctor's dependencies alone, as pipx or uv would, to run it under."""

from __future__ import annotations

import json
import os
import site
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = [sys.executable]
TD = [*PY, "-m", "topodoctor"]
COMMANDS = {
    "nvidia-smi topo -m": ["nvidia-smi", "topo", "-m"],
    "python3 -c pass": [*PY, "-c", "pass"],
    # The floor of any tool in Python that asks NVML: the interpreter, the binding, the driver's start.
    "python3 -c 'import pynvml; nvmlInit()'": [*PY, "-c", "import pynvml; pynvml.nvmlInit()"],
    "topodoctor --version": [*TD, "--version"],
    "topodoctor --help": [*TD, "--help"],
    "topodoctor scan": [*TD, "scan"],
    "topodoctor check -f line": [*TD, "check", "-f", "line"],
    "topodoctor check --replay h200-x4 -f line": [*TD, "check", "--replay", "h200-x4", "-f", "line"],
}
COUNTED = ["python3 -c pass", "topodoctor --version", "topodoctor --help", "topodoctor check --replay h200-x4 -f line"]
COUNTED += ["topodoctor check -f line", "topodoctor scan"]


def wall(argv: list[str]) -> float:
    """Seconds from spawn to reaped. No ``timeout``: with one, subprocess polls the child with
    sleeps of up to 50 ms, and every figure lands on a 50 ms step (the device call's own limit
    ends a hang)."""
    t0 = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - t0


def modules(argv: list[str]) -> int:
    """Modules imported, the forked probe child's included (its -X importtime lines share stderr)."""
    out = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    return sum(1 for line in out.stderr.splitlines() if line.startswith("import time:"))


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    env_ok = all(os.environ.get(k) for k in ("NCCL_NVLS_ENABLE",))
    for argv in COMMANDS.values():  # page the files in once
        wall(argv)
    walls: dict[str, list[float]] = {k: [] for k in COMMANDS}
    for _ in range(rounds):
        for name, argv in COMMANDS.items():
            walls[name].append(wall(argv))
    med = {k: statistics.median(v) for k, v in walls.items()}
    smi = med["nvidia-smi topo -m"]
    doc = {
        "rounds": rounds,
        "median_s": {k: round(v, 4) for k, v in med.items()},
        "min_s": {k: round(min(v), 4) for k, v in walls.items()},
        "max_s": {k: round(max(v), 4) for k, v in walls.items()},
        "scan / nvidia-smi topo -m": round(med["topodoctor scan"] / smi, 2),
        "check / nvidia-smi topo -m": round(med["topodoctor check -f line"] / smi, 2),
        "NVML floor / nvidia-smi topo -m": round(med["python3 -c 'import pynvml; nvmlInit()'"] / smi, 2),
        "modules": {k: modules(COMMANDS[k]) for k in COUNTED},
        "nvls_off": env_ok,
        "python": sys.executable,
        "site_pth": sorted(p.name for d in site.getsitepackages() for p in Path(d).glob("*.pth")),
    }
    print(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
