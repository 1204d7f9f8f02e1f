"""NCCL's socket connect retries, read for the one that used up its count: the connection failed there, even
where the WARN after it was not pasted. Text in, the retry's fields out.

What each release prints (src/misc/socket.cc; src/os/linux.cc from 2.27):
- 2.24 - 2.26: ``socketPollConnect: connect returned No route to host, retrying (34/34) after sleep for 3400
  msec``; 2.27+ name the address (``connect to 10.0.0.2<43211> returned ...``). The count is NCCL_SOCKET_RETRY_CNT
  (34 by default); k is printed after its increment, so k == n is the last retry: its failure ends in
  ``exceeded error retry count`` and ncclRemoteError. ETIMEDOUT, EHOSTUNREACH and ECONNREFUSED are retried (2.27+
  EINTR and EAGAIN too); any other errno fails at once with ``Connect to ... failed``.
- before 2.24: ``Call to connect returned Connection refused, retrying`` once every 1000 refused attempts of
  RETRY_REFUSED_TIMES (20000, 1 ms apart): the 19th line is the last before ``exceeded retries (20000)``.

A retry with attempts left is no failure; but one to an address that reaches no other node (link-local, a
bridge's), in a run that then failed, is the connection that never came: NCCL's sockets picked that interface.
A paste of nothing but retries of the old form (no count tells how many attempts were left) is the connection
its poster saw fail (GPUDirect-TCPX's plugin prints the old form
from its own copy of socket.cc): the failure, its cause one of the candidates of a refused connect."""

from __future__ import annotations

import re
from collections.abc import Mapping

_ERRNO = r"[A-Z][A-Za-z ]*?[a-z]"
RETRY = re.compile(
    rf"(?:(?<![\w/.-])(?P<func>\w+): )?connect (?:to (?P<addr>\S+) )?returned (?P<err>{_ERRNO}), retrying "
    r"\((?P<k>\d+)/(?P<n>\d+)\)"
    rf"|Call to connect returned (?P<old>{_ERRNO}), retrying"
)
# interfaces of a container, VM or VPN bridge, whose addresses no other node reaches
BRIDGES = ("veth", "docker", "virbr", "br-", "cni", "flannel", "cali", "tun")
OLD_PRINT_EVERY = 1000  # socket.cc before 2.24: `refusedRetries % 1000 == 0`
OLD_REFUSED_TIMES = 20_000  # RETRY_REFUSED_TIMES
OLD_LAST_PRINT = OLD_REFUSED_TIMES // OLD_PRINT_EVERY - 1  # the print at 20000 is the WARN instead


class Retries:
    """The connect retries of one file, per process (host:pid): which one reached its count."""

    def __init__(self) -> None:
        self.old_prints: dict[str, int] = {}  # host:pid -> lines of the old form so far

    def last(self, msg: str, proc: str) -> dict[str, str] | None:
        """The fields of ``msg`` where it is the retry that reached its count (err, addr, retries "k/n"); None
        for a retry with attempts left or any other message."""
        if "retrying" not in msg or (m := RETRY.search(msg)) is None:
            return None
        if m["old"]:
            seen = self.old_prints[proc] = self.old_prints.get(proc, 0) + 1
            if seen < OLD_LAST_PRINT:
                return None
            done = seen * OLD_PRINT_EVERY
            return {"err": m["old"], "addr": "", "retries": f"{done}/{OLD_REFUSED_TIMES}"}
        if int(m["k"]) < int(m["n"]):
            return None
        return {"err": m["err"], "addr": (m["addr"] or "").rstrip(","), "retries": f"{m['k']}/{m['n']}"}


def with_attempts_left(msg: str) -> dict[str, str] | None:
    """The fields of a retry with attempts left (err, addr, retries "k/n"; the old form names only the errno);
    None for any other."""
    if "retrying" not in msg or (m := RETRY.search(msg)) is None:
        return None
    if m["old"]:
        return {"err": m["old"], "addr": "", "retries": ""}
    if int(m["k"]) >= int(m["n"]):
        return None
    return {"err": m["err"], "addr": (m["addr"] or "").rstrip(","), "retries": f"{m['k']}/{m['n']}"}


def link_local(addr: str) -> bool:
    """Whether an address as NCCL prints it (``169.254.1.2<port>``, ``fe80::1%eth0<port>``) is link-local."""
    return addr.split("<", 1)[0].strip("[]").lower().startswith(("169.254.", "fe80:"))


def unroutable(addr: str, socket_ifs: Mapping[str, str], hosts: int) -> bool:
    """Whether the address a connect went to is not one the nodes route between them: link-local (169.254/16,
    fe80::/10: only its own link, and a node-local agent's address is the same on every node), loopback where the
    ranks are on several hosts, or the address of a bridge or container interface NCCL's sockets list."""
    ip = addr.split("<", 1)[0].strip("[]")
    if link_local(addr) or (ip.startswith("127.") and hosts > 1):
        return True
    return any(a.split("<", 1)[0] == ip and n.startswith(BRIDGES) for n, a in socket_ifs.items() if ip)
