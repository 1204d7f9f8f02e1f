"""The survivor's view of a peer that went away, as a NET plugin's provider words it: the completion statuses of
libfabric's EFA provider (prov/efa: efa_strerror.c before 1.21, the EFA_IO_COMP_STATUSES and EFA_PROV_ERRNOS
tables of efa_errno.h from 1.21), which aws-ofi-nccl prints inside its own completion WARN (``NET/OFI Request
0x.. completed with error. RC: N. Error: 9 (Invalid receiver queue pair number (QPN))``, 1.17+ ``Error: %d (%s)``,
1.8 ``Error: %s``, 1.21's platform-aws ``prov_errno: N, strerror: ...``), and the plugin's own banner for the
provider's FI_EHOSTUNREACH. Each status is read for what the provider says it means: the remote queue pair is
gone or the remote does not answer (the peer's process, its device or host), or the remote was never reached
(the security group, the subnet). Text in, the fields of ``nccl.classify``'s reading out."""

from __future__ import annotations

import re

GONE = "gone"  # the provider says the remote end no longer exists: the peer's process is usually not present
SILENT = "unresponsive"  # the remote answered once and stopped: the peer's process, device or host
UNREACHED = "unreachable"  # the remote never answered: the security group or the subnet first

# (status the provider prints, its words at any release, group); the longer wordings first
_STATUSES: tuple[tuple[str, str, str], ...] = (
    ("9", r"Invalid receiver queue pair number|Bad queue pair \(QP\) number", GONE),
    ("8", r"Receiver connection aborted|Connection was reset by remote peer", GONE),
    ("14", r"No valid address handle at remote side", GONE),
    ("4126", r"Unresponsive receiver \(reachable by EFA device but handshake failed\)", GONE),
    ("4124", r"Unresponsive receiver \(connection previously established\)", SILENT),
    ("13", r"Unresponsive receiver|Unresponsive remote", SILENT),
    ("15", r"Unreachable remote", UNREACHED),
    # aws-ofi-nccl's platform-aws banner beside FI_EHOSTUNREACH, which EFA returns for packets its security group drops
    ("FI_EHOSTUNREACH", r"security group on either this instance or the peer instance", UNREACHED),
)
_PATTERNS = tuple((status, re.compile(words), group) for status, words, group in _STATUSES)
# only in the plugin's or the provider's own lines: the words are libfabric's
_WHERE = re.compile(r"NET/OFI|libfabric|\befa\b|completed with error|prov_errno|fi_addr_efa", re.I)
_PEER_HOST = re.compile(r"Peer host id: (?P<host>[\w.-]+)")
_PEER_ADDR = re.compile(r"Peer EFA addr: (?P<addr>\S+)")


def peer_gone(text: str) -> dict[str, str] | None:
    """The EFA status ``text`` prints, when it is one that says the remote end went away or was never reached:
    the status, its words, its group, the peer's host and address where printed."""
    if not _WHERE.search(text):
        return None
    for status, pattern, group in _PATTERNS:
        if m := pattern.search(text):
            fields = {"status": status, "said": m.group(0), "group": group}
            if (host := _PEER_HOST.search(text)) and host.group("host") not in ("N/A", "(null)"):
                fields["peer_host"] = host.group("host").rstrip(",.")
            if addr := _PEER_ADDR.search(text):
                fields["peer_addr"] = addr.group("addr").rstrip(",.")
            return fields
    return None
