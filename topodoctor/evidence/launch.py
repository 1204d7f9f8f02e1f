"""Command lines and dumps that set a job's environment: ``docker run --gpus ... -e NCCL_X=1
--ipc=host --shm-size``, ``mpirun -x NCCL_X=1``, ``srun --export=...``, ``export NCCL_X=...``,
``NCCL_X=1 torchrun ...``, ``env | grep NCCL`` dumps and Kubernetes env YAML (``- name: NCCL_X`` /
``value: ...``). A command a paste continued with ``\\`` is joined first; a shell prompt in front
(``$ ``, ``root@host:~# ``) is dropped; each command of a ``;`` / ``&&`` list is read on its own
(``rm -r out; NCCL_P2P_DISABLE=1 python -m torch.distributed.launch ...``). A name whose underscores a
Markdown paste ate (``NCCL MIN NCHANNELS=8 ./build/all reduce perf``) is read only where the words
joined by ``_`` are a variable NCCL reads (``nccl.variables``).
"""

from __future__ import annotations

import re
import shlex
from contextlib import suppress
from dataclasses import replace

from topodoctor.core.errors import InputError
from topodoctor.core.sizes import parse_size
from topodoctor.evidence.lines import Block, Parts
from topodoctor.model.evidence import EvidenceSetting, Launch
from topodoctor.nccl.variables import known

# the variables that bear on a GPU job's communication
_NAME = (
    r"(?:NCCL|CUDA|NVIDIA|UCX|FI|TORCH_NCCL|TORCH_DISTRIBUTED|OMPI_MCA|PMIX_MCA|GLOO|MLX5|IBV|RDMAV|HCOLL|NVSHMEM)_\w+"
)
_PROMPT = re.compile(r"^\s*(?:\$|#|>|\(\S+\)\s*\$|[\w.-]+@[\w.-]+:[^$#]*[$#])\s+")
_LAUNCHER = re.compile(
    r"(?:^|\s|/)(docker|podman|nvidia-docker|mpirun|mpiexec|srun|sbatch|torchrun|enroot|kubectl|deepspeed|composer"
    r"|torch\.distributed\.(?:launch|run))\b"
    r"(?:\s+(?:run|start|exec|create))?"
)
_PERF = re.compile(r"(?:^|\s|/)([a-z_]+_perf)(?:_mpi)?(?=\s)")  # an nccl-tests binary (all_reduce_perf)
_LIST = re.compile(r"\s*(?:;|&&|\|\|)\s*")  # a shell list: each command's own prefix
_EATEN = re.compile(r"(?:^|\s)(NCCL(?: [A-Z0-9]+)+)=(\S+)")  # NCCL_MIN_NCHANNELS with its underscores lost
_EXPORT = re.compile(rf"^\s*(?:export|setenv|set -x)\s+({_NAME})[= ](\S*)")
_ASSIGN = re.compile(rf"^\s*(?:-\s+)?({_NAME})=(\"[^\"]*\"|'[^']*'|\S*)\s*$")
_INLINE = re.compile(rf"(?:^|\s)({_NAME})=(\S+)")
_K8S_NAME = re.compile(rf"^\s*-\s*name:\s*[\"']?({_NAME})[\"']?\s*$")
_YAML_MAP = re.compile(rf"^\s+({_NAME}):\s*[\"']?([^\"'\s]*)[\"']?\s*$")  # compose's environment: mapping
_K8S_VALUE = re.compile(r"^\s*value:\s*(.*?)\s*$")
_SBATCH = re.compile(r"^#SBATCH\s+--export=(\S+)")
# mpirun's / horovodrun's host list: -H node1:2,node2:2 (or --host, --hosts); a name, then its slots
_HOSTS = re.compile(r"(?:^|\s)(?:-H|--host|--hosts)[ =]([\w.-]+(?::\d+)?(?:,[\w.-]+(?::\d+)?)*)(?=\s|$)")
MAX_TEXT = 300


def _unprompted(line: str) -> str:
    return _PROMPT.sub("", line, count=1) if not line.startswith("#SBATCH") else line


def _eaten(text: str) -> list[tuple[str, str]]:
    """(name, value) of each ``NCCL MIN NCHANNELS=8`` that names a variable NCCL reads."""
    out = []
    for words, value in _EATEN.findall(text):
        parts = words.split()
        # the last run of words from an "NCCL" that names a variable ("ran NCCL MIN NCHANNELS=8" is read too)
        names = ["_".join(parts[k:]) for k, w in enumerate(parts) if w == "NCCL"]
        name = next((n for n in reversed(names) if n in known()), "")
        if name:
            out.append((name, value))
    return out


def _prefixed(line: str) -> bool:
    """A command with variables in front: ``NCCL_X=1 prog``, also as one command of a ``;`` list."""
    for cmd in _LIST.split(line):
        if _INLINE.match(cmd) and len(cmd.split()) > 1:
            return True
        if (m := _EATEN.match(cmd)) and _eaten(cmd) and len(cmd[m.end() :].split()) > 0:
            return True
    return False


def starts(lines: list[str], i: int) -> bool:
    """Whether a command line, an export, an env dump or env YAML begins at line ``i``."""
    line = _unprompted(lines[i])
    if _LAUNCHER.search(line) and (" -" in line or line.rstrip().endswith("\\")):
        return True
    if _prefixed(line) or (_PERF.search(line) and " -" in line):
        return True
    return bool(
        _EXPORT.match(line) or _ASSIGN.match(line) or _K8S_NAME.match(line) or _SBATCH.match(line)
        or _YAML_MAP.match(line)
        or (_INLINE.search(line) and len(line.split()) > 1 and _INLINE.match(line))
    )  # fmt: skip


def read(lines: list[str], i: int, piece: int) -> Block:
    """The commands and settings from line ``i`` while lines go on being of this kind."""
    parts = Parts()
    j = i
    while j < len(lines):
        line = _unprompted(lines[j])
        if not line.strip():
            if j + 1 < len(lines) and starts(lines, j + 1):
                j += 1
                continue
            break
        if not starts(lines, j) and not _K8S_VALUE.match(line):
            break
        if m := _K8S_NAME.match(line):
            value = ""
            if j + 1 < len(lines) and (v := _K8S_VALUE.match(lines[j + 1])):
                value = v.group(1).strip("\"'")
                j += 1
            parts.settings.append(EvidenceSetting(piece, m.group(1), value, "kubernetes env"))
        elif m := _EXPORT.match(line):
            parts.settings.append(EvidenceSetting(piece, m.group(1), m.group(2).strip("\"'"), "export"))
        elif m := _ASSIGN.match(line):
            parts.settings.append(EvidenceSetting(piece, m.group(1), m.group(2).strip("\"'"), "env"))
        elif m := _YAML_MAP.match(line):
            parts.settings.append(EvidenceSetting(piece, m.group(1), m.group(2), "compose environment"))
        elif m := _SBATCH.match(line):
            parts.settings += _export_list(m.group(1), piece, "sbatch --export")
        elif _K8S_VALUE.match(line):
            pass
        else:
            text = line.rstrip()
            while text.endswith("\\") and j + 1 < len(lines):
                j += 1
                text = text[:-1] + " " + lines[j].strip()
            _command(text, piece, parts)
        j += 1
    return Block("command-line", i, j, parts)


def _words(text: str) -> list[str]:
    try:
        return shlex.split(text, comments=False)
    except ValueError:  # an unbalanced quote in a cut paste
        return text.split()


def _command(text: str, piece: int, parts: Parts) -> None:
    """One command line's settings and launch (each command of a ``;`` / ``&&`` list on its own)."""
    cmds = _LIST.split(text)
    if len(cmds) > 1:
        for cmd in cmds:
            if cmd.strip():
                _command(cmd, piece, parts)
        return
    m = _LAUNCHER.search(text)
    words = _words(text)
    head = text.split(m.group(1))[0] if m else text
    for name, value in _INLINE.findall(head):
        parts.settings.append(EvidenceSetting(piece, name, value.strip("\"'"), "command prefix"))
    if not _INLINE.search(head):
        for name, value in _eaten(head):
            parts.settings.append(EvidenceSetting(piece, name, value.strip("\"'"), "command prefix (underscores lost)"))
    perf = _PERF.search(text)
    if m is None and perf is None:
        return
    if m is None:
        bare = _nccl_tests(text, words, piece, "nccl-tests")
        visible = next((x.value for x in parts.settings if x.name == "CUDA_VISIBLE_DEVICES" and x.piece == piece), "")
        parts.launches.append(replace(bare, gpus=visible))
        return
    launcher = {"nvidia-docker": "docker", "mpiexec": "mpirun"}.get(m.group(1), m.group(1))
    launcher = "torchrun" if launcher.startswith("torch.distributed") else launcher
    gpus = ""
    ipc = net = priv = None
    shm = ""
    devices: list[str] = []
    k = 0
    while k < len(words):
        w = words[k]
        flag, eq, inline = w.partition("=")
        nxt = inline if eq else (words[k + 1] if k + 1 < len(words) else "")
        step = 1 if eq else 2
        if flag in ("-e", "--env") and launcher in ("docker", "podman", "enroot"):
            _setting(nxt, piece, parts, f"{launcher} run -e")
            k += step
            continue
        if flag == "-x" and launcher == "mpirun":
            _setting(nxt, piece, parts, "mpirun -x")
            k += step
            continue
        if flag in ("--export", "--container-env") and launcher in ("srun", "sbatch"):
            parts.settings += _export_list(nxt, piece, f"{launcher} {flag}")
            k += step
            continue
        if flag == "--gpus":
            gpus = nxt.strip("\"'")
            k += step
            continue
        if flag == "--ipc":
            ipc = nxt == "host"
        elif flag in ("--network", "--net"):
            net = nxt == "host"
        elif flag == "--shm-size":
            shm = nxt
        elif flag == "--device":
            devices.append(nxt)
        elif flag == "--privileged":
            priv = True
        elif flag in ("--ipc", "--network", "--net", "--shm-size", "--device") or not flag.startswith("-"):
            pass
        if flag in ("--ipc", "--network", "--net", "--shm-size", "--device") and not eq:
            k += 2
            continue
        k += 1
    for s in parts.settings:
        if s.name in ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES") and not gpus:
            gpus = s.value
    hosts = _hosts(text)
    launch = Launch(piece, launcher, gpus, ipc, shm, net, tuple(devices), priv, text[:MAX_TEXT], hosts=hosts,
                    nodes=_nodes(text, launcher, hosts), processes=_processes(text, launcher))  # fmt: skip
    if perf is not None:
        program = _nccl_tests(text, words, piece, launcher)
        launch = replace(launch, program=program.program, min_bytes=program.min_bytes, max_bytes=program.max_bytes,
                         gpus_per_process=program.gpus_per_process)  # fmt: skip
    parts.launches.append(launch)


def _nccl_tests(text: str, words: list[str], piece: int, launcher: str) -> Launch:
    """An nccl-tests binary's run: the binary, its -b / -e sizes (K, M, G binary, as it reads them), and the GPUs
    each process drives (-g GPUs per thread, -t threads; 1 each by default)."""
    perf = _PERF.search(text)
    program = perf.group(1) if perf else ""
    after = words[next((k for k, w in enumerate(words) if w.rsplit("/", 1)[-1].startswith(program)), 0) :]
    sizes: dict[str, int | None] = {"min": None, "max": None}
    counts: dict[str, int] = {}
    for k, w in enumerate(after):
        flag, eq, inline = w.partition("=")
        key = {"-b": "min", "--minbytes": "min", "-e": "max", "--maxbytes": "max"}.get(flag)
        value = inline if eq else (after[k + 1] if k + 1 < len(after) else "")
        if key is not None and value:
            with suppress(InputError):  # a size nccl-tests would refuse too: not shown
                sizes[key] = parse_size(value, limit=None)
        count = {"-g": "gpus", "--ngpus": "gpus", "-t": "threads", "--nthreads": "threads"}.get(flag)
        if count is not None and value.isdigit() and int(value) > 0:
            counts.setdefault(count, int(value))
    per_process = counts.get("gpus", 1) * counts.get("threads", 1) if counts else None
    return Launch(piece, launcher, text=text[:MAX_TEXT], program=program, min_bytes=sizes["min"],
                  max_bytes=sizes["max"], hosts=_hosts(text), nodes=_nodes(text, launcher, _hosts(text)),
                  gpus_per_process=per_process)  # fmt: skip


def _hosts(text: str) -> tuple[tuple[str, int | None], ...]:
    """The hosts a launcher's -H list names, each with its slots where given."""
    m = _HOSTS.search(text)
    if m is None:
        return ()
    out = []
    for item in m.group(1).split(","):
        name, _, slots = item.partition(":")
        out.append((name, int(slots) if slots.isdigit() else None))
    return tuple(out)


# mpirun -np 16 (-n, --np, -c), srun -n 16 / --ntasks 16; srun -N 2 --ntasks-per-node 8
_NP = re.compile(r"(?:^|\s)(?:-np|--np|-n|-c|--ntasks)[ =](\d+)(?=\s|$)")
_PER_NODE = re.compile(r"(?:^|\s)--ntasks-per-node[ =](\d+)(?=\s|$)")


def _processes(text: str, launcher: str) -> int | None:
    """The processes an MPI launcher starts as its own flags say (before the program: nccl-tests' -n is
    its iterations), or None where they say nothing of them."""
    if launcher not in ("mpirun", "srun"):
        return None
    perf = _PERF.search(text)
    head = text[: perf.start()] if perf else text
    if m := _NP.search(head):
        return int(m.group(1))
    per = _PER_NODE.search(head)
    nodes = _SRUN_NODES.search(head) if launcher == "srun" else None
    if per and nodes:
        return int(per.group(1)) * int(nodes.group(1))
    return None


_NNODES = re.compile(r"(?:^|\s)--nnodes[ =](\d+)(?::\d+)?(?=\s|$)")  # torchrun's --nnodes 2 (or 1:4 elastic)
_SRUN_NODES = re.compile(r"(?:^|\s)(?:-N|--nodes)[ =]?(\d+)(?=\s|$)")
_NODE_RANK = re.compile(r"(?:^|\s)--node[_-]rank[ =](\d+)(?=\s|$)")  # composer, torchrun, deepspeed


def _nodes(text: str, launcher: str, hosts: tuple[tuple[str, int | None], ...]) -> int | None:
    """The nodes a launch spans as its line says, or None where it says nothing of them."""
    if len({h for h, _ in hosts}) > 1:
        return len({h for h, _ in hosts})
    if m := _NNODES.search(text):
        return int(m.group(1))
    if launcher in ("srun", "sbatch") and (m := _SRUN_NODES.search(text)):
        return int(m.group(1))
    if _NODE_RANK.search(text):
        return 2  # a node rank is given where a run spans two nodes at least
    return None


def _setting(word: str, piece: int, parts: Parts, how: str) -> None:
    name, eq, value = word.partition("=")
    if re.fullmatch(_NAME, name) or eq:
        parts.settings.append(
            EvidenceSetting(piece, name, value.strip("\"'") if eq else "(from the caller's environment)", how)
        )


def _export_list(text: str, piece: int, how: str) -> list[EvidenceSetting]:
    """srun's ``--export=ALL,NCCL_X=1,NCCL_Y=2``."""
    out = []
    for item in text.strip("\"'").split(","):
        name, eq, value = item.partition("=")
        if eq and re.fullmatch(_NAME, name):
            out.append(EvidenceSetting(piece, name, value, how))
    return out
