"""The causes of the launchers' classes whose words fit several: a rank killed by SIGKILL (who sent it) and a
rank that could not reach torch's c10d store (why), most likely first, with what tells each apart; the line
of the log that singles one out (the job's OOM killer, Ray's memory monitor; a store on the loopback
address, which no firewall between nodes stands in front of). Data; ``nccl.causes`` weighs them."""

from __future__ import annotations

from collections.abc import Sequence

from topodoctor.nccl.evidence import LogContext
from topodoctor.nccl.launcher_lines import OOM_WHATS
from topodoctor.nccl.log_signs import ClassCause, ClassCauses
from topodoctor.nccl.parse import Event

_LOOPBACK = ("127.", "localhost", "::1", "[::1]")


def oom_said(evs: Sequence[Event], ctx: LogContext) -> str:
    """The log's own line that the memory killed it: Slurm's or the kernel's OOM kill, Ray's memory monitor."""
    e = next((e for e in evs if e.fields.get("what") in OOM_WHATS), None)
    return f"'{e.fields.get('said', '')[:120]}' ({e.fields['what']})" if e else ""


def _signal_known(evs: Sequence[Event], ctx: LogContext) -> bool:
    """A line names the signal (SIGKILL, -9) or the memory: no crash of the process's own."""
    return any(not e.fields.get("what", "").startswith("Ray: a worker") for e in evs)


def _loopback(evs: Sequence[Event], ctx: LogContext) -> bool:
    return any(e.fields.get("addr", "").startswith(_LOOPBACK) for e in evs)


# socket.cpp's errno of the client's last try (connect_error): what each says of where the store is
_UNRESOLVED = ("-2", "-3")  # EAI_NONAME, EAI_AGAIN: MASTER_ADDR does not resolve from this node
_DROPPED = ("110", "113")  # ETIMEDOUT, EHOSTUNREACH: the network drops or cannot route to the store's host
_REFUSED = "111"  # ECONNREFUSED: the host answered, nothing listens on that port (yet)


def _errno(evs: Sequence[Event]) -> str:
    return next((e.fields["connect_errno"] for e in evs if e.fields.get("connect_errno")), "")


def _unresolved(evs: Sequence[Event], ctx: LogContext) -> str:
    """The client's try whose name lookup failed: the log's own line that MASTER_ADDR does not resolve."""
    e = next((e for e in evs if e.fields.get("connect_errno") in _UNRESOLVED), None)
    return "" if e is None else f"`{e.fields['connect_host']}: {e.fields.get('connect_err', '')}`"


def _joined(evs: Sequence[Event], ctx: LogContext) -> bool:
    return any(e.fields.get("joined") for e in evs)


SMALL_SHM = 1 << 30  # a /dev/shm under this is a container's default or near it, not a host's half of memory


def _small_shm(evs: Sequence[Event], ctx: LogContext) -> str:
    """The pasted `df` row of a small /dev/shm, or ""."""
    return next((f"`{s.said}`" for s in ctx.signs if s.kind == "shm-size" and int(s.value) < SMALL_SHM), "")


LAUNCHER_CAUSES = (
    ClassCauses(
        "TD094",
        (
            ClassCause(
                "/dev/shm too small or full where the rank runs (a container's default 64 MB: --shm-size=1g or "
                "--ipc=host; a Kubernetes emptyDir with medium: Memory): NCCL 2.12 - 2.18 size their segments without "
                "reserving them, so a full /dev/shm is a Bus error at the first write rather than a WARN (2.19.1's "
                "release notes: SHM allocation failures detected to avoid the Bus Error); torch's DataLoader workers' "
                "shared memory ends the same way",
                "`df -h /dev/shm` in the rank's container while the job starts; NCCL_SHM_DISABLE=1 (NCCL's segments) "
                "or num_workers=0 (the DataLoader's) making it go away",
                shows=_small_shm,
            ),
            ClassCause(
                "a mapped file truncated or removed under the process (a cleanup of /dev/shm while the job ran, a "
                "file on a network file system that changed)",
                "what else touched /dev/shm or the mapped file at that time",
            ),
            ClassCause(
                "a memory error of the host",
                "`dmesg -T | grep -i -E 'mce|memory error|bus error'` on that host",
            ),
        ),
        "`df -h /dev/shm` in the container, the NCCL version banner (NCCL_DEBUG=VERSION) and the rank's last lines",
    ),
    ClassCauses(
        "TD090",
        (
            ClassCause(
                "the memory: the kernel's OOM killer or the job's memory limit (a cgroup of Slurm, Kubernetes, "
                "Ray's memory monitor) killed the rank that used the most host memory",
                "`dmesg -T | grep -i -e oom -e 'killed process'` on that host at that time; `sacct -j JOB -o "
                "State,MaxRSS,ReqMem` (OUT_OF_MEMORY) or `kubectl describe pod` (OOMKilled)",
                oom_said,
            ),
            ClassCause(
                "the scheduler: the job's time limit, a preemption or a cancel (Slurm sends SIGTERM, then "
                "SIGKILL after KillWait)",
                "`sacct -j JOB -o State,Elapsed,Timelimit` (TIMEOUT, PREEMPTED, CANCELLED), the scheduler's log",
            ),
            ClassCause(
                "a user or another program: `kill -9`, `ray stop --force`, a health check that ends hung ranks",
                "the host's audit or shell history, the cluster's health checks; no OOM line and no scheduler state",
            ),
            ClassCause(
                "a crash of the worker itself (SIGSEGV, an abort in a native library): Ray's actor died without "
                "saying which signal ended it",
                "the worker's own log (`ray logs worker-*`, its stderr) for a segfault or an abort before it died",
                ruled_out=_signal_known,
            ),
        ),
        "the killed rank's host: `dmesg -T` at the time of the kill, and the job's accounting (sacct, kubectl)",
    ),
    ClassCauses(
        "TD072",
        (
            ClassCause(
                "a rank never reached the rendezvous in time: the store's own rank (rank 0, on MASTER_ADDR) where a "
                "client timed out, the communicator's root rank that puts NCCL's unique id, the missing ranks where "
                "the store waited for clients (a crash at start, a node that never started, a long step before "
                "init_process_group or the first collective on some ranks)",
                "each rank's own output and the time it called init_process_group and its first collective",
                first=lambda evs, ctx: (
                    _loopback(evs, ctx) or _joined(evs, ctx) or evs[0].kind == "store" or _errno(evs) == _REFUSED
                ),
            ),
            ClassCause(
                "MASTER_ADDR / MASTER_PORT do not name the store from this node: another address or port than the "
                "one rank 0 listens on, a name that resolves elsewhere, an interface not routed between nodes",
                "`nc -zv MASTER_ADDR MASTER_PORT` from the failing node; `ss -ltnp` on rank 0's host",
                shows=_unresolved,
            ),
            ClassCause(
                "a firewall or security group between the nodes drops MASTER_PORT",
                "`nc -zv MASTER_ADDR MASTER_PORT` from another node, the security group's rules",
                first=lambda evs, ctx: _errno(evs) in _DROPPED,
                ruled_out=lambda evs, ctx: _loopback(evs, ctx) or _errno(evs) == _REFUSED,
            ),
        ),
        "rank 0's output, each node's MASTER_ADDR and MASTER_PORT, `nc -zv MASTER_ADDR MASTER_PORT` from each node",
        # the store's timeout, and torch's fetch of NCCL's unique id that timed out ("got error: Socket Timeout")
        lambda evs: (
            evs[0].kind == "store-timeout" or (evs[0].kind == "store" and "Timeout" in evs[0].fields.get("err", ""))
        ),
    ),
)
