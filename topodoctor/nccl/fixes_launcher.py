"""The findings of the launchers' and the job's own words (``nccl.launcher_lines``): a rank killed (TD090),
the store's port in use (TD091), a rank that died of SIGBUS (TD094), a rank that could not reach torch's c10d
store, or torch's Gloo backend that could not connect its ranks (TD072). The killed rank is the one the launcher
names as the first observed failure where its table says so; the cause is the memory only where a line of the log
says so (``causes_launcher`` ranks the candidates otherwise). Data in, a ``Said`` out; no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from topodoctor.core.text import numbered
from topodoctor.nccl.evidence import Builder, LogContext, Said, with_general
from topodoctor.nccl.explanations import EXPLANATIONS
from topodoctor.nccl.launcher_lines import root_cause_said
from topodoctor.nccl.parse import Event


def _killed(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    root = next((e for e in evs if e.fields.get("root")), None)  # the elastic table's first observed failure
    ev = root or next((e for e in evs if not e.fields.get("oom")), evs[0])
    if root is not None:
        msg = f"the launcher's first observed failure: {root_cause_said(dict(root.fields))}, killed by SIGKILL"
    elif ev.fields.get("oom"):
        msg = f"a rank's process was killed: {ev.fields.get('what', '')}"
    else:
        msg = f"{ev.fields.get('what', 'a rank was killed')}: {ev.fields.get('said', '')[:120]}"
    return Said("TD090", msg, with_general("TD090", ""), {"signal": "SIGKILL"})


def _port_in_use(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    said = f.get("said", "")
    port = next((p for p in _ports(evs) if p), "")
    msg = "torch's c10d store could not listen: address already in use" + (f" (port {port})" if port else "")
    specific = f"Port {port} is held on this host; {port} is torch's default MASTER_PORT." if port == "29500" else ""
    return Said("TD091", msg, with_general("TD091", specific), {"port": port, "said": said})


def _ports(evs: Sequence[Event]) -> list[str]:
    """The port each line names (``port: 29500``, ``0.0.0.0:29500 (errno: 98``)."""
    out = []
    for e in evs:
        text = e.text
        at = text.find("port: ")
        if at >= 0:
            out.append(text[at + 6 :].split(",")[0].strip())
        elif "(errno: 98" in text:
            out.append(text.split("(errno: 98")[0].rstrip().rsplit(":", 1)[-1])
    return [p for p in out if p.isdigit()]


def _store_timeout(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    where = f"{f['addr']}:{f['port']}" if f.get("addr") and f.get("port") else "MASTER_ADDR:MASTER_PORT"
    after = f.get("after", "")
    after = f"{after} s" if after.isdigit() else after
    if f.get("joined"):
        msg = f"torch's c10d store waited {after} for its ranks: only {f['joined']} joined"
    elif f.get("world"):  # the store-based barrier: worker_count of world_size ranks came
        came = f"{f.get('count', '?')} of {f['world']} ranks reached it"
        msg = f"torch's c10d store barrier timed out after {after}: {came}"
    elif "rendezvous" in f.get("what", ""):
        msg = f["what"]
    else:
        msg = f"a rank could not reach torch's c10d store at {where}" + (f" within {after}" if after else "")
    if f.get("connect_errno"):  # the client's last try, in socket.cpp's words
        msg += f" (its last try: errno {f['connect_errno']}, {f.get('connect_err', '')})"
    extra: dict[str, object] = {"store": where}
    if f.get("connect_errno"):
        extra["errno"] = f["connect_errno"]
    return Said("TD072", msg, "", extra)


def _store_closed(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    peer = next((e.fields["peer"] for e in evs if e.fields.get("peer")), "")
    msg = (
        "torch's c10d store closed its connection" + (f" ({peer})" if peer else "") + ": the process that held it ended"
    )
    fix = "The store lives in rank 0's process (MASTER_ADDR): read rank 0's output for why it ended first. "
    return Said("TD046", msg, fix + EXPLANATIONS["TD046"].fix)


def _bus_error(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    """A SIGBUS: memory mapped from a file was touched where the file has no page to give (tmpfs full, the file
    truncated); NCCL's /dev/shm segments are such files. Its candidates are the class's (nccl.causes_launcher)."""
    msg = f"a process of the run died of SIGBUS ({f.get('said', 'Bus error')[:80]}): a mapped page had no memory"
    return Said("TD094", msg, EXPLANATIONS["TD094"].fix, {"signal": "SIGBUS"})


# torch's ProcessGroupGloo warns "Unable to resolve hostname to a (local) address. Using the loopback address as
# fallback" when the host's name has no address: the other nodes then connect to 127.0.0.1, their own host
_GLOO_CAUSES = (
    "Gloo bound to the loopback or another interface the other nodes cannot reach: set GLOO_SOCKET_IFNAME (and "
    "NCCL_SOCKET_IFNAME, TP_SOCKET_IFNAME with it) to the interface the nodes route on every node (`ip -br addr`), "
    "or make the host's name resolve to that interface's address (/etc/hosts, the pod's hostname)",
    "the peer's process not listening (it failed or had not started): its own output",
    "a firewall or security group between the nodes dropping the ephemeral ports Gloo listens on",
)


def _gloo_connect(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    if ifname := next((e.fields["ifname"] for e in evs if e.fields.get("ifname")), ""):
        return Said(
            "TD072",
            f"torch's Gloo backend found no address for interface {ifname} (GLOO_SOCKET_IFNAME): it does not exist "
            "on this host or has no IPv4/IPv6 address",
            "Set GLOO_SOCKET_IFNAME (and NCCL_SOCKET_IFNAME with it) to an interface every node has, up and with an "
            "address (`ip -br addr` on each node: the names differ between hosts, eth0 against ens5 or enp*), or "
            "unset it to let Gloo take the address of the host's name.",
            {"ifname": ifname},
        )
    said = " ".join(e.text for e in evs)
    loopback = "127.0.0.1" in said or "loopback" in said
    msg = "torch's Gloo backend could not connect its ranks" + (" (to the loopback address)" if loopback else "")
    ranked = numbered(_GLOO_CAUSES)
    fix = f"Candidates, most likely first: {ranked}. Collect next: the `Unable to resolve hostname` warning of each "
    fix += "rank, `hostname -i` and `ip -br addr` on every node."
    return Said("TD072", msg, fix, {"candidates": list(_GLOO_CAUSES)})


def _store_host(f: Mapping[str, str], evs: Sequence[Event], ctx: LogContext) -> Said:
    host = f.get("host", "").strip()
    if f.get("why") and not host:  # the lookup itself failed: a name this host's resolver does not know
        msg = f"torch's c10d store address (MASTER_ADDR) does not resolve: host not found ({f['why'].strip()})"
    else:
        what = f"'{host}', a file path," if host else "empty,"
        msg = f"torch's c10d store address (MASTER_ADDR) is {what} not a host: no rank can look it up or reach it"
    fix = (
        "Set MASTER_ADDR (torchrun --master-addr, the launcher's --master_addr) to rank 0's host name or IP on every "
        "node: a launcher line that takes its value from the wrong field or a shell that prints a path into it "
        "(a sourced rc file's output in a hostfile or `$(...)`) sets it wrong; `echo $MASTER_ADDR` on each node, "
        "and `getent hosts $MASTER_ADDR` where a rank runs (a scheduler that placed the job on other nodes than the "
        "script names, a name only one node's /etc/hosts knows)."
    )
    return Said("TD072", msg, fix, {"store": f"{host}:{f.get('port', '')}"})


LAUNCHER: dict[str, Builder] = {
    "gloo-connect": _gloo_connect,
    "bus-error": _bus_error,
    "process-killed": _killed,
    "store-port-in-use": _port_in_use,
    "store-timeout": _store_timeout,
    "store-closed": _store_closed,
    "store-host": _store_host,
}
