"""The launchers' and the job's own words for how a distributed run ended, where NCCL said nothing: the
elastic agent's failure table (torch/distributed/elastic: ``Root Cause (first observed failure)`` with its
host, rank and ``exitcode : -9 (pid: N)``), its ``failed (exitcode: -9) local_rank: N`` line, the
deepspeed launcher's ``exits with return code = -9``, Slurm's ``srun: error: host: task N: Killed`` and
``Detected N oom_kill event``, Kubernetes' ``OOMKilled``, Ray's dead actor and its memory monitor, and torch's
c10d store (TCPStore: the client's timeout, the server waiting for clients, the port already in use). One
table of shapes, read by ``FrameworkLines`` for the lines no NCCL prefix carries. Text in, data out."""

from __future__ import annotations

import re
from collections.abc import Sequence

from topodoctor.nccl.layer_lines import LAYER_WORDS, LAYERS
from topodoctor.nccl.line_shape import LauncherLine

# the kill's own words: who died, and the signal; what sent it is not in them
_KILLED = (
    LauncherLine(
        "process-killed",
        re.compile(r"failed \(exitcode: -9\) local_rank: (?P<local_rank>\d+) \(pid: (?P<pid>\d+)\)"),
        "torch's elastic agent: its first failed worker was killed by SIGKILL",
    ),
    LauncherLine(  # any other exit code of the first failed worker: its own output holds the cause
        "root-cause",
        re.compile(
            r"failed \(exitcode: (?P<exitcode>-?[1-9]\d*)\) local_rank: (?P<local_rank>\d+) \(pid: (?P<pid>\d+)\)"
        ),
        "torch's elastic agent: its first failed worker",
    ),
    LauncherLine(
        "process-killed",
        re.compile(r"(?:sigkill_handler\].*)?(?P<said>exits with return code = -9)\b"),
        "the deepspeed launcher: a rank's process was killed by SIGKILL",
    ),
    LauncherLine(
        "process-killed",
        re.compile(r"srun: error: (?P<host>[\w.-]+): tasks? (?P<rank>[\d,-]+): Killed\b"),
        "srun: a task was killed",
    ),
    LauncherLine(  # the shell's report of a job it ran (bash's "line N: PID Killed  cmd", or "Killed" alone)
        "process-killed",
        re.compile(r"^(?:.*?: line \d+: +\d+ )?Killed(?: {2,}\S.*)?$"),
        "the shell: a process of the run was killed by SIGKILL",
        needs_run=True,
    ),
    LauncherLine(
        "process-killed",
        re.compile(
            r"The actor is dead because its worker process has died|The actor died unexpectedly"
            r"|A worker died or was killed while executing a task by an unexpected system error"
        ),
        "Ray: a worker process died without a word of its own",
    ),
)
# the kill's cause in so many words: the memory (the kernel's or the cgroup's OOM killer, Ray's memory monitor)
_OOM = (
    LauncherLine(
        "process-killed",
        re.compile(r"Detected \d+ oom[-_]kill events?|task \d+: Out Of Memory|\bOOMKilled\b"),
        "the memory: the job's cgroup OOM killer (Slurm, Kubernetes)",
    ),
    LauncherLine(
        "process-killed",
        re.compile(r"killed due to memory pressure \(OOM\)|which exceeds the memory usage threshold"),
        "the memory: Ray's memory monitor killed workers",
    ),
    LauncherLine(
        "process-killed",
        re.compile(r"Out of memory: Killed process \d+|oom-kill:constraint="),
        "the memory: the kernel's OOM killer",
    ),
)
# torch's c10d store (TCPStore over MASTER_ADDR:MASTER_PORT)
_STORE = (
    LauncherLine(  # torch's store client whose server end closed: rank 0's process, which holds the store, is gone
        "peer-lost",
        re.compile(r"(?:RuntimeError|DistNetworkError|DistStoreError): Connection reset by peer\s*$"),
        "the store's other end (rank 0's process, which holds torch's c10d store) closed the connection",
        needs_run=True,
    ),
    LauncherLine(
        "store-port-in-use",
        re.compile(
            r"server socket has failed to (?:listen|bind)[^\n]*?(?:errno: 98|EADDRINUSE|[Aa]ddress already in use)"
        ),
        "the port the store listens on is held by another process on this host",
    ),
    LauncherLine(  # the same bind's errno in c10d's other wordings: before 1.10 (tcputils) std::system_error's text
        # alone as the RuntimeError; from 2.2 the reason on the line after "failed to listen" (code, name, message)
        "store-port-in-use",
        # (a paste may break those onto lines of their own: "code: -98," then "name: EADDRINUSE,")
        re.compile(
            r"(?:RuntimeError|DistNetworkError): Address already in use\s*$|(?:code: -98, |^\s*)name: EADDRINUSE"
        ),
        "the port the store listens on is held by another process on this host",
        needs_run=True,
    ),
    LauncherLine(
        "store-timeout",
        re.compile(
            r"client socket has timed out after (?P<after>\d+\w*) while trying to connect to "
            r"\(?(?P<addr>[\w.:\[\]-]+?), ?(?P<port>\d+)\)?"
        ),
        "a rank could not reach torch's c10d store",
    ),
    LauncherLine(
        "store-timeout",
        re.compile(
            r"DistStoreError: Timed out after (?P<after>\d+) seconds waiting for (?:clients|workers)\. "
            r"(?P<joined>\d+/\d+)"
        ),
        "the store's server waited for ranks that never came",
    ),
    LauncherLine(  # c10d's own words for a store call that got no answer in time (TCPStore, its socket)
        "store-timeout",
        re.compile(r"(?:^|[Ee]rror: |\]: )Socket Timeout\b"),
        "torch's c10d store did not answer in time",
        needs_run=True,
    ),
    LauncherLine(
        "store-timeout",
        re.compile(r"DistStoreError: wait timeout after (?P<after>\d+\w*), keys: (?P<keys>\S+)"),
        "a rank waited for a key of torch's c10d store no rank set",
    ),
    LauncherLine(  # socket.cpp's end of a client's tries (2.0+): every address of MASTER_ADDR refused or failed
        "store-timeout",
        re.compile(
            r"client socket has failed to connect to any network address of "
            r"\(?(?P<addr>[\w.:\[\]-]+?), ?(?P<port>\d+)\)?"
        ),
        "a rank could not reach torch's c10d store",
    ),
    LauncherLine(  # distributed_c10d's barrier after init (1.x - 2.0): only worker_count of world_size ranks came
        "store-timeout",
        re.compile(
            r"Timed out initializing process group in store based barrier on rank:? (?P<rank>\d+), for key: \S+ "
            r"\(world_size=(?P<world>\d+), worker_count=(?P<count>\d+), timeout=(?P<after>[\d:.]+)\)"
        ),
        "the ranks' barrier in torch's c10d store timed out: not every rank reached init_process_group",
    ),
    LauncherLine(  # torch.distributed.elastic's rendezvous (c10d or etcd backend): the nodes did not all join
        "store-timeout",
        re.compile(r"RendezvousTimeoutError\b"),
        "torch's elastic rendezvous timed out: not every node joined it within its join timeout",
    ),
    LauncherLine(  # Ray's collective group (ray.util.collective): its ranks never all met at its rendezvous
        "store-timeout",
        re.compile(r"Unable to meet other processes at the rendezvous store"),
        "Ray's collective group rendezvous timed out: not every rank joined the group",
    ),
    # socket.cpp's name lookup of the store's host (MASTER_ADDR) for one address family: a warning of its own where
    # the host has no address of that family; a host that is a file path or nothing is a launch that set it wrong
    LauncherLine(
        "store-host",
        re.compile(
            r"The IPv[46] network addresses of \((?P<host>[^,()]*/[^,()]*|\s*), (?P<port>\d+)\) cannot be retrieved"
            r"(?: \(gai error: (?P<gai>-?\d+) - (?P<why>[^)]*)\))?"
        ),
        "torch's c10d store address (MASTER_ADDR) is not a host name",
    ),
    LauncherLine(  # torch 1.x's TCPStore: getaddrinfo found no address for MASTER_ADDR
        "store-host",
        re.compile(r"ValueError: host not found: (?P<why>Name or service not known|.*name resolution.*)"),
        "torch's c10d store address (MASTER_ADDR) does not resolve",
    ),
    # the store's server went away under a client: a consequence of the process that held it (rank 0) ending
    LauncherLine(
        "store-closed",
        re.compile(
            r"TCPStore\S* server has shut down too early|\[c10d\] recvValue failed on SocketImpl\(.*?"
            r"remote=\[?(?P<peer>[^\]\s)]+)\]?:?\d*\): Connection reset by peer"
        ),
        "torch's c10d store closed the connection: the process that held it (rank 0) ended",
    ),
    LauncherLine(  # TCPStore's client (2.3+) reading a reply the server never sent: the server's process ended
        "store-closed",
        re.compile(r"Failed to recv, got 0 bytes\. Connection was likely closed"),
        "torch's c10d store closed the connection: the process that held it (rank 0) ended",
    ),
)
# a rank's SIGBUS in the words of the program that caught it (UCX's backtrace, Open MPI's, Python's faulthandler,
# the shell, srun): in a run with NCCL most often shared memory touched past what /dev/shm holds
_BUS = (
    LauncherLine(
        "bus-error",
        re.compile(
            r"Caught signal 7 \(Bus error[^)]*\)|Signal: Bus error \(7\)|Fatal Python error: Bus error"
            r"|\bBus error \(core dumped\)|srun: error: [\w.-]+: tasks? [\d,-]+: Bus error"
            r"|received signal SIGBUS, Bus error"  # gdb's stop on the signal
            r"|\*\*\* SIGBUS received at time="  # abseil's failure-signal handler (Ray's workers, XLA)
        ),
        "the process died of SIGBUS (Bus error)",
        needs_run=True,
    ),
    LauncherLine(  # the deepspeed launcher's words for a rank that died of signal 7: distributed by themselves
        "bus-error",
        re.compile(r"(?:sigkill_handler\].*)?(?P<said>exits with return code = -7)\b"),
        "the deepspeed launcher: a rank's process died of SIGBUS",
    ),
)
# a process that crashed in native code, in the words of what caught it: glibc's heap check (malloc.c's
# malloc_printerr, which aborts), Open MPI's signal handler, the shell, Python's faulthandler, UCX, torch's elastic
_CRASH = (
    LauncherLine(
        "process-crash",
        re.compile(
            r"(?P<heap>(?:free|malloc|realloc|calloc|munmap_chunk|malloc_consolidate|_int_free|_int_malloc"
            r"|_int_realloc|tcache_thread_shutdown)\(\): (?:invalid|corrupted|double|unaligned|memory|mismatching"
            r"|chunk|largebin|smallbin|unsorted)[\w .()!-]*?|double free or corruption(?: \([!\w]+\))?"
            r"|corrupted size vs\. prev_size(?: in fastbins| while consolidating)?"
            r"|corrupted double-linked list(?: \(not small\))?)"
            r"(?=\s*(?:: 0x[0-9a-f]+|\*\*\*|$|error\b|with\b))"
        ),
        "glibc's heap check found the process's memory corrupted and aborted it (SIGABRT)",
        needs_run=True,
    ),
    LauncherLine(
        "process-crash",
        re.compile(
            r"Signal: (?P<signame>Segmentation fault|Aborted) \((?:11|6)\)|(?P<signame2>Segmentation fault|Aborted) "
            r"\(core dumped\)|Fatal Python error: (?P<signame3>Segmentation fault|Aborted)"
            r"|Caught signal (?:11|6) \((?P<signame4>Segmentation fault|Aborted)"
            r"|Signal (?:6|11) \((?P<signame5>SIGABRT|SIGSEGV)\) received by PID"
            r"|exited on signal (?:11|6) \((?P<signame6>Segmentation fault|Aborted)\)"  # mpirun's, prterun's
            r"|!+ (?P<signame7>Segfault) encountered !+"  # a Python crash handler's banner (sglang's, vLLM's)
            r"|^\[[\w.-]+:\d+\] \*\*\* Process received signal \*\*\*"  # Open MPI's banner, which a paste may end on
        ),
        "the process died of a signal of its own code (SIGSEGV or SIGABRT)",
        needs_run=True,
    ),
)
# torch's caching allocator in a rank of a distributed run ("Tried to allocate"): the GPU's memory is full
_GPU = (
    LauncherLine(
        "gpu-oom",
        re.compile(
            r"(?:OutOfMemoryError|RuntimeError): CUDA out of memory\. Tried to allocate (?P<size>[\d.]+ [KMGT]i?B)"
        ),
        "torch's allocator in a rank ran out of GPU memory",
        needs_run=True,
    ),
)
# srun's end of another task of the step: a task killed beside it is what srun did after it, not the cause
SRUN_OTHER_END = re.compile(
    r"srun: error: [\w.-]+: tasks? [\d,-]+: (?:Exited with exit code [1-9]|Bus error|Segmentation fault)"
)
# kinds that follow a failure elsewhere: a known root cause leads
CONSEQUENCES = frozenset(("store-closed", "process-crash"))
# kinds that are no failure by themselves: the store's server also closes when rank 0 ends a run that went well
# torch's Gloo backend (ProcessGroupGloo: its ranks' TCP mesh, bound to the address of the host's name or of
# GLOO_SOCKET_IFNAME; with no address for the name it binds the loopback, which other nodes cannot reach)
_GLOO = (
    LauncherLine(
        "gloo-connect",
        re.compile(r"Gloo connectFullMesh failed"),
        "torch's Gloo backend could not connect its ranks' mesh",
    ),
    LauncherLine(  # gloo/transport/tcp/device.cc: GLOO_SOCKET_IFNAME names an interface with no address here
        "gloo-connect",
        re.compile(r"ifa != nullptr\. Unable to find address for: (?P<ifname>[\w.:@-]+)"),
        "torch's Gloo backend found no address for the interface GLOO_SOCKET_IFNAME names",
    ),
)
# the run's end in words that name no failed rank (kind "root-cause", field "outside": what they mean): torch
# elastic's agent signalled itself (api.py's _terminate_process_handler raises SignalException on SIGTERM, SIGINT,
# SIGHUP, SIGQUIT), its rendezvous closed by another node's agent, Gloo's wait for a peer's data that timed out
_ENDS = (
    LauncherLine(
        "root-cause",
        re.compile(r"SignalException: Process (?P<pid>\d+) got signal: (?P<signum>\d+)"),
        "torch's elastic agent itself received a signal: the job was ended from outside it (the scheduler's time "
        "limit or a preemption, scancel or kill, Ctrl+C), not by a rank's own failure",
    ),
    LauncherLine(
        "root-cause",
        re.compile(r"RendezvousClosedError\b"),
        "torch's elastic rendezvous was closed by another node's agent (its job ended, or it used up its restarts "
        "after a failure): the cause is in that node's log",
    ),
    LauncherLine(
        "root-cause",
        re.compile(r"gloo/transport/tcp/\S+\] Timed out waiting (?P<after>\d+ms) for (?P<op>recv|send) operation"),
        "torch's Gloo backend timed out waiting for a peer's data: a peer never joined the collective (it died, hung "
        "or was busy elsewhere) or the network between them dropped it",
    ),
)
AFTER_FAILURE = frozenset(("store-closed",))
TABLE: tuple[LauncherLine, ...] = _KILLED + _OOM + _STORE + _BUS + LAYERS + _CRASH + _GPU + _GLOO + _ENDS
OUTSIDE_WHATS = frozenset(e.what for e in _ENDS)
OOM_WHATS = frozenset(e.what for e in _OOM)
# a word of the table must be in a line before any pattern is tried (most lines of a log are none of these)
_GUARD = re.compile(
    r"exitcode: |return code = -[79]|srun: error|actor|worker died|oom|OOM|Out Of Memory|Out of memory|server socket"
    r"|client socket|DistStoreError|TCPStore|recvValue|CUDA out of memory|Socket Timeout|Bus error|EADDRINUSE"
    r"|Address already in use|\(\): |corrupt|Segmentation fault|Segfault|Aborted|received by PID|exited on signal"
    r"|Killed|Process received signal|connectFullMesh|Unable to find address for|network address(?:es)? of"
    r"|store based barrier|Rendezvous|Connection reset by peer"
    r"|rendezvous store|Failed to recv|SignalException|Timed out waiting|host not found|" + LAYER_WORDS
)
# a crash's line counts in a run whose file holds these anywhere (the crash is often printed before them)
CRASH_KINDS = frozenset(("bus-error", "process-crash"))
# the launchers' words that make a file speak of a distributed run even where no line names NCCL or torch
DISTRIBUTED_WORDS = re.compile(
    r"(?:sigkill_handler\].*)?exits with return code = -[79]\b"
    r"|server socket has failed to listen on any local network address"
    r"|client socket has timed out after|The actor is dead because its worker process has died"
    r"|Workers \(tasks / actors\) killed due to memory pressure|A worker died or was killed while executing a task"
    r"|\*\*\* Process received signal \*\*\*|noticed that process rank \d+"  # Open MPI's, of a process of its job
    r"|Signal \d+ \(SIG[A-Z]+\) received by PID \d+"  # torch's elastic agent: its worker's signal
    r"|Gloo connectFullMesh failed"  # torch's Gloo backend, in a run that may never load NCCL
    r"|^\(RayWorker\w* pid=\d+\)"  # a worker actor of a Ray job of several GPUs (vLLM's tensor parallel)
    r"|client socket has failed to connect to|torch\.distributed\.elastic"  # torch's c10d store, its agent
)
# torch.distributed.elastic's failure table: the block after "Root Cause (first observed failure):"
ROOT_CAUSE = "Root Cause (first observed failure)"
_FIELD = re.compile(r"^\s*(?P<key>time|host|rank|exitcode|error_file|traceback)\s*:\s*(?P<value>.*?)\s*$")
_EXITCODE = re.compile(r"(?P<code>-?\d+)(?: \(pid: (?P<pid>\d+)\))?")
ROOT_CAUSE_LINES = 8  # [0]: then time, host, rank, exitcode, error_file, traceback


def reading(line: str, in_run: bool = True) -> tuple[str, dict[str, str]] | None:
    """The kind and fields of a launcher's line (``what`` its words settle, ``said`` the words), or None;
    ``in_run``: the log is of a distributed run, so words any program may print count too."""
    if not _GUARD.search(line):
        return None
    for entry in TABLE:
        if (in_run or not entry.needs_run) and (m := entry.pattern.search(line)):
            fields = {k: v for k, v in m.groupdict().items() if v}
            return entry.kind, {"said": m.group(0)} | fields | {"what": entry.what}
    return None


# socket.cpp's words for each try of a client to connect to the store, with the errno (111 refused: nothing
# listens there; 113 no route, 110 timed out: the network drops it; -2/-3: the name does not resolve)
_CONNECT_ERR = re.compile(
    r"client socket has failed to connect to \[?(?P<host>[^\]\s]+?)\]?:(?P<port>\d+) \(errno: (?P<errno>-?\d+) - "
    r"(?P<err>[^)]+)\)"
)
CONNECT_LOOKBACK = 200  # lines before a store's timeout searched for the client's last failed try


def connect_error(lines: Sequence[str], at: int) -> dict[str, str]:
    """The last failed try of a store client at or before line ``at``: host, port, errno and its words."""
    for line in reversed(lines[max(0, at - CONNECT_LOOKBACK) : at + 1]):
        if "failed to connect" in line and (m := _CONNECT_ERR.search(line)):
            return {"connect_" + k: v.strip() for k, v in m.groupdict().items()}
    return {}


def root_cause(lines: Sequence[str], at: int) -> dict[str, str]:
    """The fields of the elastic agent's root cause, from the lines after ``ROOT_CAUSE`` at ``at``:
    time, host, rank, exitcode, pid, traceback (those printed; a paste may cut the block)."""
    out: dict[str, str] = {}
    for line in lines[at + 1 : at + 1 + ROOT_CAUSE_LINES]:
        if line.strip().startswith("==="):
            break
        if m := _FIELD.match(line):
            out[m["key"]] = m["value"]
    if m := _EXITCODE.match(out.get("exitcode", "")):
        out["exitcode"] = m["code"]
        if m["pid"]:
            out["pid"] = m["pid"]
    return out


def root_cause_said(fields: dict[str, str]) -> str:
    """The root cause as the table states it: ``rank 0 (local_rank: 0) on host, exitcode -9 (pid 14750)``."""
    rank = f"rank {fields['rank']}" if fields.get("rank") else ""
    rank = rank or (f"local_rank {fields['local_rank']}" if fields.get("local_rank") else "")
    parts = [rank, f"on {fields['host']}" if fields.get("host") else ""]
    if fields.get("exitcode"):
        parts.append(f"exitcode {fields['exitcode']}" + (f" (pid {fields['pid']})" if fields.get("pid") else ""))
    if fields.get("time"):
        parts.append(f"at {fields['time']}")
    return ", ".join(p for p in parts if p)


# what a signal that ended the first failed rank says of it (the elastic table's negative exit code)
_SIGNALS = {
    "-6": "SIGABRT: the rank aborted itself (torch's NCCL watchdog ends the process after a collective failed or "
    "timed out; an uncaught C++ exception, `terminate called`)",
    "-7": "SIGBUS: most often a /dev/shm too small for the dataloader's or NCCL's shared memory (a container's "
    "64 MiB default: --shm-size, --ipc=host), or a mapped file truncated under the process",
    "-11": "SIGSEGV: the rank crashed in native code (a library, a driver, an extension)",
    "-15": "SIGTERM: something ended the rank from outside (the launcher after another rank failed, the scheduler)",
}


def signal_said(exitcode: str) -> str:
    """What the signal of a negative exit code says of the rank's end; "" for any other code."""
    return _SIGNALS.get(exitcode, "")
