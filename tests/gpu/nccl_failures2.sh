#!/usr/bin/env bash
# Second recording on the one-GPU host: real NCCL output for the failure classes the first one
# could not produce, and `collectives --algo` / `--scaling` under torchrun with real NCCL over two
# emulated nodes. From the repository root:
#
#     OUT=/some/dir bash tests/gpu/nccl_failures2.sh          # BACKEND=gloo tries the plumbing on a CPU
#
# Under $OUT:
#   failures/shm-small/{unset,warn,info}/rank{0,1}.txt, case.json      (a) /dev/shm of 64 KiB
#   nccl-builds.txt, failures/version-mismatch/{unset,warn,info}/...    (b) two NCCL versions, if the host has two
#   td-algo/, td-scaling/: node{A,B}.out (rank 0's JSON: nodeA), node{A,B}.err,
#                          logs-node{A,B}/nccl.<rank>.log, case.json     (c) the sweeps under torchrun
#   summary.txt                                                          what each case showed (also printed)
# Then, wherever the repository is: python3 fixtures/nccl_failures_import.py $OUT (see docs/fixtures.md).
#
# (a) What NCCL 2.28.9's source predicts. Two "nodes" (NCCL_HOSTID apart, sockets on lo), each in
# a mount namespace of its own whose /dev/shm is a 64 KiB tmpfs. With one rank per host NCCL's SHM
# transport (transport/shm.cc, the other ncclShmOpen caller) is never used, nor NVLS's (nvls.cc,
# NVLS off). The proxy is: NET/Socket connections have proxy progress, so proxy.cc's
# proxyProgressInit creates its ops pool with ncclShmOpen (sizeof(struct ncclProxyOpsPool): 2048
# ops per local rank x 72 local ranks, megabytes), and misc/shmutils.cc's fallocate fails with
# ENOSPC: "Error: failed to extend /dev/shm/nccl-XXXXXX to N bytes, error: No space left on device
# (28)", then "Error while creating shared memory segment ... (size N)". NCCL 2.22+ connects the
# rings at the first collective (NCCL_RUNTIME_CONNECT), so the first all_reduce fails, not the init.
# (Two ranks of one host would use SHM, but NCCL refuses two ranks on one GPU: duplicate-gpu.)
#
# Bounded: every launch runs under `timeout` (the search for NCCL builds 30 s, a case of (a)/(b) 45 s,
# all levels at once, the sweeps 115 s and 75 s, each also under topodoctor's own --timeout): under
# 5 minutes at worst, about 2 typically. Every process started carries TD_RUN_ID; at the end any
# still running is killed by its pid.
set -u
: "${OUT:?set OUT to the output folder}"
BACKEND=${BACKEND:-nccl}
SIZES=${SIZES:-1M,64M,256M} # a CPU try (BACKEND=gloo) takes smaller ones: SIZES=64K,1M
mkdir -p "$OUT"
realpath "$OUT" >"$OUT/out-path.txt" # the importer shortens this path to CAPTURE/ in the fixtures
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
TD_RUN_ID="td-failures2-$$-$(date +%s)"
export TD_RUN_ID
PY=${PYTHON:-python3}
START=$SECONDS

cleanup() {
    local p pid
    for p in /proc/[0-9]*; do
        pid=${p#/proc/}
        [ "$pid" = "$$" ] && continue
        if tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qx "TD_RUN_ID=$TD_RUN_ID"; then
            echo "cleanup: killing leftover process $pid: $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-120)"
            kill -9 "$pid" 2>/dev/null
        fi
    done
}
trap cleanup EXIT

say() { echo "== $* ($((SECONDS - START)) s)"; }

free_port() { "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# ---- (b) first: which NCCL builds the host has, and which one torch loads
say "NCCL builds on this host"
timeout 30 find / -xdev -name 'libnccl.so*' 2>/dev/null >"$OUT/nccl-builds.list"
"$PY" - "$OUT" <<'EOF' | tee "$OUT/nccl-builds.txt"
import os, re, subprocess, sys
out = sys.argv[1]
paths = [p.strip() for p in open(os.path.join(out, "nccl-builds.list")) if p.strip()]
code = "import torch; v = torch.cuda.nccl.version(); print(next((l.split()[-1] for l in open('/proc/self/maps') if 'libnccl' in l), ''))"
try:
    torch_lib = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout.strip()
except Exception as exc:
    torch_lib = ""
    print(f"torch's NCCL could not be located: {exc}")
if torch_lib and torch_lib not in paths:
    paths.append(torch_lib)
def version(path):
    try:
        data = open(path, "rb").read()
    except OSError:
        return None
    m = re.search(rb"NCCL version (\d+\.\d+\.\d+[^\x00\s]*)", data)
    return m.group(1).decode() if m else None
seen = {}
for p in paths:
    real = os.path.realpath(p)
    if real not in seen and os.path.isfile(real):
        seen[real] = version(real)
torch_real = os.path.realpath(torch_lib) if torch_lib else ""
mine = seen.get(torch_real)
print(f"torch loads: {torch_lib or '?'} -> {torch_real or '?'}: NCCL version {mine}")
for real, v in seen.items():
    print(f"found: {real}: NCCL version {v}")
def number(v):
    return (v or "").split("+")[0]
other = next((r for r, v in seen.items() if v and mine and number(v) != number(mine)), "")
print(f"OTHER={other}")
if not other:
    print("NO SECOND NCCL BUILD of another version on this host: version-mismatch is not recorded")
EOF
OTHER=$(sed -n 's/^OTHER=//p' "$OUT/nccl-builds.txt")

# ---- (a) and (b): two emulated nodes per case, NCCL_DEBUG unset, WARN and INFO, all at once
CASES=shm-small
[ -n "$OTHER" ] && CASES=shm-small,version-mismatch
say "failure cases: $CASES"
TD_OTHER_NCCL=$OTHER timeout -k 10 120 "$PY" tests/gpu/nccl_failures.py "$OUT/failures" --backend "$BACKEND" \
    --only "$CASES" --limit 45 2>&1 | tee "$OUT/failures.txt"

# ---- (c) the sweeps as two torchrun "nodes", one rank each, NCCL over sockets
pair() { # NAME LIMIT_S ARGS...: two torchrun launches (static rendezvous: nodeA is rank 0)
    local name=$1 limit=$2 port k node t=$SECONDS
    shift 2
    local d="$OUT/$name" pids=() codes=()
    mkdir -p "$d"
    port=$(free_port)
    for k in 0 1; do
        node=node$([ "$k" = 0 ] && echo A || echo B)
        NCCL_HOSTID=$node NCCL_SOCKET_IFNAME=lo NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV,TUNING \
            timeout -k 10 "$limit" "$PY" -m torch.distributed.run --nnodes 2 --nproc-per-node 1 --node-rank "$k" \
            --master-addr 127.0.0.1 --master-port "$port" \
            -m topodoctor collectives --backend "$BACKEND" "$@" --log-dir "$d/logs-$node" \
            >"$d/$node.out" 2>"$d/$node.err" &
        pids+=($!)
    done
    for k in 0 1; do
        wait "${pids[$k]}"
        codes+=($?)
    done
    printf '{"case": "%s", "exit_codes": [%s, %s], "wall_s": %s, "args": "%s"}\n' \
        "$name" "${codes[0]}" "${codes[1]}" "$((SECONDS - t))" "$*" | tee "$d/case.json"
}
# Every op at three sizes over sockets (about 2 GB/s): 10 timed iterations a row keep the three runs
# of --algo near a minute; the command's own budget still reports what it measured if it runs out.
say "td-algo: collectives --algo ring,tree --size $SIZES"
pair td-algo 115 --algo ring,tree --size "$SIZES" --iters 10 -f json --timeout 100
say "td-scaling: collectives --scaling --size $SIZES"
pair td-scaling 75 --scaling --size "$SIZES" --iters 10 -f json --timeout 60

# ---- what to look for
say "summary"
"$PY" - "$OUT" <<'EOF' 2>&1 | tee "$OUT/summary.txt"
import json, os, re, subprocess, sys
out = sys.argv[1]
from topodoctor.core.codec import from_jsonable
from topodoctor.measure.collectives.sweeps import AlgoSweep, ScalingSweep
from topodoctor.report.collectives_sweeps import algo_lines, scaling_lines

fail = os.path.join(out, "failures")
for case in sorted(os.listdir(fail)) if os.path.isdir(fail) else []:
    for level in ("unset", "warn", "info"):
        d = os.path.join(fail, case, level)
        if not os.path.isdir(d):
            continue
        meta = json.load(open(os.path.join(d, "case.json"))) if os.path.exists(os.path.join(d, "case.json")) else {}
        r = subprocess.run([sys.executable, "-m", "topodoctor", "nccl-log", d, "-f", "json"], capture_output=True, text=True)
        try:
            codes = [(f["code"], f["message"][:110]) for f in json.loads(r.stdout)["findings"]]
        except ValueError:
            codes = [("?", (r.stderr or r.stdout)[-200:])]
        print(f"{case}/{level}: exit codes {meta.get('exit_codes')}, {meta.get('wall_s')} s; nccl-log: {codes}")
        for name in sorted(os.listdir(d)):
            if name.endswith(".txt"):
                text = open(os.path.join(d, name), errors="replace").read()
                keep = [l for l in text.splitlines() if re.search(r"NCCL WARN|shared memory|Mismatched|NCCL \(|loaded|Last error|Error", l)]
                for l in keep[:6]:
                    print(f"    {name}: {l.strip()[:200]}")

def comms(path):
    """Per communicator set up in rank 0's log (from its Init START): the NCCL_ALGO it read (ENV
    subsystem) and the algorithms NCCL chose per op."""
    got, cur = [], None
    for line in open(path, errors="replace"):
        m = re.search(r"(ncclCommInit\w*|ncclCommSplit) comm (0x[0-9a-f]+) .*Init START", line)
        if m:
            cur = {"comm": m.group(2), "how": m.group(1), "algo": "-", "calls": {}}
            got.append(cur)
        m = re.search(r"NCCL_ALGO set by environment to (\S+)", line)
        if m and cur is not None:
            cur["algo"] = m.group(1)
        m = re.search(r"NCCL INFO (\w+): \d+ Bytes -> Algo (\w+) proto (\w+)", line)
        if m and cur is not None:
            key = f"{m.group(1)} {m.group(2)}"
            cur["calls"][key] = cur["calls"].get(key, 0) + 1
    return got

for name in ("td-algo", "td-scaling"):
    d = os.path.join(out, name)
    if not os.path.isdir(d):
        continue
    print(f"\n{name}: {open(os.path.join(d, 'case.json')).read().strip()}")
    text = open(os.path.join(d, "nodeA.out"), errors="replace").read()
    try:
        doc = json.loads(text[text.index("{"):])
    except ValueError:
        print(f"  no JSON from rank 0; nodeA.err ends: {open(os.path.join(d, 'nodeA.err'), errors='replace').read()[-1500:]}")
        continue
    if "algorithms" in doc:
        print("\n".join("  " + l for l in algo_lines(from_jsonable(AlgoSweep, doc["algorithms"], "sweep"))))
    if "scaling" in doc:
        print("\n".join("  " + l for l in scaling_lines(from_jsonable(ScalingSweep, doc["scaling"], "sweep"))))
    log = os.path.join(d, "logs-nodeA", "nccl.0.log")
    if os.path.exists(log):
        for c in comms(log):
            calls = ", ".join(f"{k} x{n}" for k, n in sorted(c["calls"].items()))
            print(f"  {c['how']} {c['comm']} NCCL_ALGO={c['algo']}: {calls}")
EOF
say "done"
