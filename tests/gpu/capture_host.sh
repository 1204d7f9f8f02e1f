#!/usr/bin/env bash
# Run on a GPU host: record the host, save what nvidia-smi says, and time the
# scan. Writes into $OUT if set, else ./capture-out. Usage: tests/gpu/capture_host.sh LABEL
set -u
label=${1:?label}
out=${OUT:-capture-out}
mkdir -p "$out"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
td="python3 -m topodoctor"
nvidia-smi topo -m > "$out/$label.nvidia-smi-topo.txt" 2>&1
nvidia-smi -q > "$out/$label.nvidia-smi-q.txt" 2>&1
nvidia-smi nvlink -s -i 0 > "$out/$label.nvidia-smi-nvlink.txt" 2>&1
python3 -c 'import pynvml, torch, typer, rich, networkx; print("nvidia-ml-py", pynvml.__version__ if hasattr(pynvml, "__version__") else "?", "torch", torch.__version__, "typer", typer.__version__, "networkx", networkx.__version__)' > "$out/$label.versions.txt" 2>&1
$td record -o "$out/$label.json" --label "$label" 2>&1
$td record -o "$out/$label.noscrub.json" --label "$label" --no-scrub 2>&1
$td scan --format json > "$out/$label.live.json" 2>"$out/$label.live.err"; echo "live scan rc=$?"
$td scan --format json --replay "$out/$label.noscrub.json" > "$out/$label.replay.json"; echo "replay rc=$?"
python3 - "$out/$label.live.json" "$out/$label.replay.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
def strip(d):  # counters tick between two probes; compare the rest exactly
    for g in d["snapshot"]["gpus"]:
        for l in g["nvlinks"]:
            l["errors"] = None
    d["origin"] = None
    return d
print("live == replay (error counters aside):", strip(a) == strip(b))
PY
$td scan > "$out/$label.scan.txt" 2>&1; echo "text scan rc=$?"
python3 - "$out/$label.nvidia-smi-topo.txt" <<'PY'
import sys, json
from topodoctor.probe.sources import probe_host
from topodoctor.topology.topo_matrix import build_matrix, parse_nvidia_smi, diff
ours = build_matrix(probe_host().snapshot)
theirs = parse_nvidia_smi(open(sys.argv[1]).read())
d = diff(ours, theirs)
print("topo -m matrix equal:", not d, d[:10])
PY
TIMEFORMAT='scan wall %R s'; for i in 1 2 3 4 5; do time $td scan > /dev/null; done
TIMEFORMAT='help wall %R s'; for i in 1 2 3; do time $td --help > /dev/null; done
python3 -c '
import time; t0=time.perf_counter(); from topodoctor.probe.sources import probe_host; s=probe_host(); t1=time.perf_counter()
import networkx; t2=time.perf_counter()
from topodoctor.topology.graph import build_graph; from topodoctor.topology.topo_matrix import build_matrix; m=build_matrix(s.snapshot, build_graph(s.snapshot)); t3=time.perf_counter()
print("probe %.3f s, import networkx %.3f s, graph+matrix %.3f s" % (t1-t0, t2-t1, t3-t2))'
for d in /sys/bus/pci/devices/*; do echo "$d -> $(readlink -f $d) class=$(cat $d/class) numa=$(cat $d/numa_node 2>/dev/null)"; done > "$out/$label.pci.txt"
ls /sys/class/infiniband /sys/class/net >> "$out/$label.pci.txt" 2>&1
python3 -X importtime -m topodoctor scan --format json 2>"$out/$label.importtime.txt" >/dev/null
echo "slowest imports (us, cumulative):"; sort -t'|' -k2 -n "$out/$label.importtime.txt" | tail -6
nxdir=$(python3 -c "import networkx,os;print(os.path.dirname(networkx.__file__))"); ls -d "$nxdir/__pycache__" 2>&1 | head -1
python3 - "$out/$label.json" <<'PY'
import json, sys, collections
calls = json.load(open(sys.argv[1]))["nvml"]
tot = collections.Counter(); n = collections.Counter()
for c in calls:
    tot[c["fn"]] += c.get("ms", 0); n[c["fn"]] += 1
print("NVML ms by call:", [(f, n[f], round(t, 1)) for f, t in tot.most_common(8)], "total", round(sum(tot.values()), 1))
PY
python3 -c 'import sys, topodoctor.cli.commands; import topodoctor.probe; print("torch imported by scan path:", "torch" in sys.modules)'
ls -la "$out"
