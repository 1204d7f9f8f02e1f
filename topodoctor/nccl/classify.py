"""What one NCCL message says went wrong, read from NCCL's own message structure: the call that
failed and its errno text, the CUDA error number and string, the verbs completion status, the
XML attribute, the socket call. The same text arrives as a WARN line, torch's ``Last error:``
line, nccl-tests' ``Test NCCL failure ... 'class / reason'`` or a line pasted on its own, so the
reading is the same for all. Text in, a ``Reading`` out; nothing here knows about files.

The formats are those of NCCL 2.2 - 2.30 (src/include/checks.h, misc/ibvwrap.cc,
transport/net_ib*, transport/nvls.cc, misc/shmutils.cc, misc/socket.cc, os/linux.cc,
graph/xml.h, graph/search.cc, graph/paths.cc, bootstrap.cc, init.cc).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topodoctor.nccl.cuda_errors import CUDA_KINDS as _CUDA_KIND
from topodoctor.nccl.message_kinds import CONSEQUENCE, ROOT, SIMPLE
from topodoctor.nccl.net_peer import peer_gone

__all__ = ["CONSEQUENCE", "ROOT", "Reading", "classify"]


@dataclass(frozen=True)
class Reading:
    """One message read: its kind, the fields that make the fix specific, and the rank of the
    kind (ROOT or CONSEQUENCE)."""

    kind: str
    fields: dict[str, str]
    rank: int = ROOT


_CUDA_FAILURE = re.compile(
    r"Cuda failure (?:(?P<num>\d+) )?'(?P<msg>[^']*)'?|CUDA error (?P<num2>\d+) '(?P<msg2>[^']*)'"
    # a WARN that names the runtime call and its error string (RCCL's p2p.cc: "hipIpcGetMemHandle failed : ...")
    r"|(?<![\w.])(?P<call>(?:cuda|hip|cu)[A-Z]\w*) failed\s*:\s*(?P<msg3>[a-z][a-z ]*[a-z])"
)
_SHM_TRANSPORT = ("transport/shm.cc", "/shm.cc")  # the SHM transport (2.23+: cuMem host memory), not shmutils
# each pattern below starts only where its first token can (a lookbehind or a literal first): tried at every
# position of a long run of word characters, an unanchored `\w+` or `.*?` would cost the square of its length
_ON_SOURCE = re.compile(r"(?<![\w./-])(?P<src>[\w./-]+\.(?:cc|cu|cpp|c|h|hpp)):\d+")

_VERBS = re.compile(
    r"Call to (?P<call>ibv_\w+) failed(?: with(?: error)?)?(?: (?P<num>\d+))? ?(?P<err>[A-Z][A-Za-z ]*[a-z])?"
)
_VERBS_DEV = re.compile(r"on dev (?P<dev>[\w.-]+?)(?::\d+)?,")
_COMPLETION = re.compile(
    # the peer's address, or nothing where NCCL printed none ("from peer with error 4": 2.18's empty address)
    r"Got completion (?:from peer (?:(?P<peer>(?!with )\S+) )?)?(?:with )?"  # "Got completion error 12" (old)
    r"(?:status=(?:(?P<sname>[A-Za-z_ ]+)\()?(?P<s1>\d+)\)?"
    r"|error (?P<s2>\d+))(?P<rest>.*)"
)
_HCA = re.compile(r"\bhca (?P<hca>[\w.-]+)")

# Sockets: the errno text a connect or a transfer ended with (misc/socket.cc, os/linux.cc, TCPX's socket_utils.cc)
_CONNECT = re.compile(
    r"(?:[Cc]onnect to (?P<addr>\S+?)(?: from \S+)? (?:failed|returned)|Call to connect (?:failed|returned|timeout)"
    r"|(?<![\w/.-])\w+: connect returned)"
    r"(?:\s*:\s*|\s+with error\s+|\s+)(?:\d+\()?(?P<err>Connection refused|No route to host|Network is unreachable"
    r"|Connection timed out|Software caused connection abort|Cannot assign requested address|Connection reset by peer"
    r"|Operation now in progress)(?!,? retrying)"  # a retry is not the failure (nccl.connect_retries)
)
# socket.cc before 2.24: the refused (ECONNREFUSED) or timed-out (ETIMEDOUT) connects ran out of retries
_EXCEEDED = re.compile(r"socket(?:Start|Poll)Connect: exceeded (?P<what>retries|timeouts) \(\d+\)")
# socket.cc: a non-blocking connect's refusal comes back from the first recv or send on the socket
_IO_REFUSED = re.compile(
    r"Net : Call to (?:recv|send) from (?P<addr>\S+) failed : (?P<err>Connection refused|No route to host"
    r"|Network is unreachable)"
)
_NO_POLLOUT = re.compile(r"socketPollConnect poll\(\) (?:returned 1, no POLLOUT|failed)")
_PEER_LOST = re.compile(
    r"Connection closed by remote peer(?: (?P<peer>\S+))?|Connection reset by peer|Broken pipe"
    r"|remote process exited or there was a network error|Socket recv failed|ncclRemoteError"
    r"|Net : Call to (?:recv|send) from \S+ failed : (?:Connection timed out|Connection reset by peer)"  # socket.cc
    r"|gloo/transport/tcp/pair\.cc:\d+\] Connection closed by peer (?P<gpeer>\S+)"  # torch's gloo: the peer closed
)


def classify(text: str, source: str = "") -> Reading | None:
    """What ``text`` (one NCCL message) says failed; ``source`` is the file:line NCCL printed
    it from, where known (``transport/nvls.cc``). None for a message of no known kind."""
    src = source or ((m.group("src")) if (m := _ON_SOURCE.search(text)) else "")
    if m := _VERBS.search(text):
        return _verbs(m, text)
    if m := _COMPLETION.search(text):
        status = int(m.group("s1") or m.group("s2"))
        fields = {"status": str(status), "peer": m.group("peer") or ""}
        if h := _HCA.search(m.group("rest")):
            fields["hca"] = h.group("hca")
        kind = {4: "ib-status-4", 5: "ib-status-5"}.get(
            status, "ib-status-remote" if status in (9, 10, 11, 13) else "ib-status-12"
        )
        return Reading(kind, fields, CONSEQUENCE if status == 5 else ROOT)
    nvls = "NVLS" in text or "NVLink SHARP" in text or src.endswith("nvls.cc")
    if nvls and (m := _CUDA_FAILURE.search(text)):
        return _cuda(m, nvls=True)
    if "Failed to bind NVLink SHARP" in text:  # the CUDA error may follow on the next line (NCCL 2.29+)
        return Reading("nvls", {"num": "", "msg": ""})
    if m := _CUDA_FAILURE.search(text):
        reading = _cuda(m, nvls=False)
        if reading.kind in ("cuda-failure", "p2p-unsupported") and src.split(":")[0].endswith(_SHM_TRANSPORT):
            return Reading("cumem-host", reading.fields)  # the SHM transport's host memory, not P2P
        if (
            reading.kind == "cuda-failure"
            and reading.fields["msg"] == "invalid argument"
            and ("shm" in src or "shmutils" in src)
        ):
            return Reading("shm-register", reading.fields)
        return reading
    for pat, kind in _CUDA_KIND:  # a CUDA error without NCCL's "Cuda failure" wrapper (p2p.cc, torch, CUDA)
        if m := pat.search(text):
            return Reading(kind, {"msg": m.group(0)})
    if gone := peer_gone(text):  # a NET plugin's provider: the remote end went away (libfabric's EFA statuses)
        return Reading("net-peer-gone", gone, CONSEQUENCE)
    for kind, pat, rank in SIMPLE:
        if m := pat.search(text):
            return Reading(kind, {k: v for k, v in m.groupdict().items() if v is not None}, rank)
    if m := _CONNECT.search(text) or _IO_REFUSED.search(text):
        return Reading("connect", {"err": m.group("err"), "addr": (m.group("addr") or "").rstrip(",")})
    if m := _EXCEEDED.search(text):
        err = "Connection refused" if m["what"] == "retries" else "Connection timed out"
        return Reading("connect", {"err": err, "addr": ""})
    if _NO_POLLOUT.search(text):
        return Reading("connect", {"err": "no answer to the connection (poll without POLLOUT)", "addr": ""})
    if m := _PEER_LOST.search(text):
        peer = m.group("peer") or m.group("gpeer") or ""
        return Reading("peer-lost", {"peer": peer, "text": m.group(0)}, CONSEQUENCE)
    return None


def _verbs(m: re.Match[str], text: str) -> Reading:
    call, err = m.group("call"), re.sub(r"\s+errno$", "", (m.group("err") or "").strip())
    dev = d.group("dev") if (d := _VERBS_DEV.search(text)) else ""
    fields = {"call": call, "err": err, "dev": dev}
    if call == "ibv_reg_dmabuf_mr" and "not supported" in err:
        return Reading("ib-dmabuf", fields)
    if "Cannot allocate memory" in err and call.startswith("ibv_reg_mr"):
        return Reading("ib-memlock", fields)
    if call == "ibv_open_device":  # net_ib's init skips a device it cannot open
        return Reading("ib-device-skipped", fields)
    if "No such device" in err:
        return Reading("ib-device", fields)
    if call == "ibv_modify_qp" and err:
        return Reading("ib-qp-connect", fields)
    return Reading("ib-verbs", fields)


def _cuda(m: re.Match[str], nvls: bool) -> Reading:
    num = m.group("num") or m.group("num2") or ""
    msg = next((g for g in (m.group("msg"), m.group("msg2"), m.group("msg3")) if g is not None), "").strip()
    fields = {"num": num, "msg": msg} | ({"call": m.group("call")} if m.group("call") else {})
    for pat, kind in _CUDA_KIND:
        if pat.search(msg) or (kind == "fabric-not-ready" and num == "802"):
            return Reading(kind, fields)
    return Reading("nvls" if nvls else "cuda-failure", fields)
