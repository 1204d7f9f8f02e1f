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

REFUSED = "refused"  # the remote rejected the request's address or key: its registrations or device went away
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
    # 7 (REMOTE_ERROR_BAD_ADDRESS) in the words of 1.21 and 1.22+; 1.18 - 1.20 say only "Invalid address" (read by
    # its number below)
    (
        "7",
        r"Destination ENI is down or does not run EFA|Remote key \(RKEY\) not registered or does not match remote IOVA"
        r"|Remote memory registration is invalid",
        REFUSED,
    ),
    # aws-ofi-nccl's platform-aws banner beside FI_EHOSTUNREACH, which EFA returns for packets its security group drops
    ("FI_EHOSTUNREACH", r"security group on either this instance or the peer instance", UNREACHED),
)
_PATTERNS = tuple((status, re.compile(words), group) for status, words, group in _STATUSES)
# only in the plugin's or the provider's own lines: the words are libfabric's
_WHERE = re.compile(r"NET/OFI|libfabric|\befa\b|completed with error|prov_errno|fi_addr_efa", re.I)
_GROUP_OF = {status: group for status, _, group in _STATUSES}
# the status's number where the line prints it: aws-ofi-nccl's "Error: 9 (...)" and "prov_errno: 4124", libfabric's
# own EFA warning "err: 5, message: ... (7)"
_NUMBER = re.compile(r"Error: (?P<a>\d+) \(|prov_errno: (?P<b>\d+)|\((?P<c>\d+)\)\s*$")
_EFA_LINE = re.compile(r"::efa:|fi_addr_efa|NET/OFI .*completed with error")
_MESSAGE = re.compile(r"message: (?P<msg>.+?) My EFA addr")
_PEER_HOST = re.compile(r"Peer host id: (?P<host>[\w.-]+)")
_PEER_ADDR = re.compile(r"Peer EFA addr: (?P<addr>\S+)")


def peer_gone(text: str) -> dict[str, str] | None:
    """The EFA status ``text`` prints, when it is one that says the remote end went away, refused the request or
    was never reached: the status, its words, its group, the peer's host and address where printed."""
    if not _WHERE.search(text):
        return None
    found = next(((status, m.group(0), group) for status, p, group in _PATTERNS if (m := p.search(text))), None)
    if found is None and _EFA_LINE.search(text) and (n := _NUMBER.search(text)):
        number = n.group("a") or n.group("b") or n.group("c")
        if number in _GROUP_OF:  # words of a release the table does not hold: the number is the provider's own
            said = m.group("msg") if (m := _MESSAGE.search(text)) else f"status {number}"
            found = (number, said, _GROUP_OF[number])
    if found is None:
        return None
    status, said, group = found
    fields = {"status": status, "said": said, "group": group}
    if (host := _PEER_HOST.search(text)) and host.group("host") not in ("N/A", "(null)"):
        fields["peer_host"] = host.group("host").rstrip(",.")
    if addr := _PEER_ADDR.search(text):
        fields["peer_addr"] = addr.group("addr").rstrip(",.")
    return fields
