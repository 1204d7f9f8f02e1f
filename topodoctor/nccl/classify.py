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
from topodoctor.nccl.net_peer import peer_gone
from topodoctor.nccl.torch_reasons import HEARTBEAT, TIMEOUT_AT

# Cause kinds, in the order a log's root cause is chosen (earlier wins). Consequences (a peer
# that went away, a flushed work request) come last: they follow whatever failed first.
ROOT = 0
CONSEQUENCE = 1


@dataclass(frozen=True)
class Reading:
    """One message read: its kind, the fields that make the fix specific, and the rank of the
    kind (ROOT or CONSEQUENCE)."""

    kind: str
    fields: dict[str, str]
    rank: int = ROOT


_CUDA_FAILURE = re.compile(
    r"Cuda failure (?:(?P<num>\d+) )?'(?P<msg>[^']*)'?|CUDA error (?P<num2>\d+) '(?P<msg2>[^']*)'"
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
    r"Got completion (?:from peer (?P<peer>\S+) )?with (?:status=(?:(?P<sname>[A-Za-z_ ]+)\()?(?P<s1>\d+)\)?"
    r"|error (?P<s2>\d+))(?P<rest>.*)"
)
_HCA = re.compile(r"\bhca (?P<hca>[\w.-]+)")

# Sockets: the errno text a connect or a transfer ended with (misc/socket.cc, os/linux.cc, TCPX's socket_utils.cc)
_CONNECT = re.compile(
    r"(?:[Cc]onnect to (?P<addr>\S+?)(?: from \S+)? (?:failed|returned)|Call to connect (?:failed|returned)"
    r"|(?<![\w/.-])\w+: connect returned)"
    r"(?:\s*:\s*|\s+with error\s+|\s+)(?:\d+\()?(?P<err>Connection refused|No route to host|Network is unreachable"
    r"|Connection timed out|Software caused connection abort|Cannot assign requested address|Connection reset by peer"
    r"|Operation now in progress)(?!,? retrying)"  # a retry is not the failure (nccl.connect_retries)
)
# socket.cc before 2.24: the refused (ECONNREFUSED) or timed-out (ETIMEDOUT) connects ran out of retries
_EXCEEDED = re.compile(r"socket(?:Start|Poll)Connect: exceeded (?P<what>retries|timeouts) \(\d+\)")
_NO_POLLOUT = re.compile(r"socketPollConnect poll\(\) (?:returned 1, no POLLOUT|failed)")
_PEER_LOST = re.compile(
    r"Connection closed by remote peer(?: (?P<peer>\S+))?|Connection reset by peer|Broken pipe"
    r"|remote process exited or there was a network error|Socket recv failed|ncclRemoteError"
    r"|gloo/transport/tcp/pair\.cc:\d+\] Connection closed by peer (?P<gpeer>\S+)"  # torch's gloo: the peer closed
)

# One pattern per kind for the rest: (kind, pattern, rank)
_SIMPLE: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("net-plugin", re.compile(r"Failed to initialize any NET plugin|Error: network (?P<net>\S+) not found"), ROOT),
    (
        "socket-ifname",
        re.compile(
            r"no socket interface found|No usable listening interface found"
            r"|Socket creation failed : Address family not supported|no device found (?:matching|after excluding)"
        ),
        ROOT,
    ),
    (
        "duplicate-gpu",
        re.compile(
            r"Duplicate GPU detected : rank (?P<a>\d+) and rank (?P<b>\d+) both on CUDA device (?P<dev>\w+)"
            r"|Multiple Ranks are using the same GPU|Multiple ranks detected using the same GPU on this node"
        ),
        ROOT,
    ),
    (
        "version-mismatch",
        re.compile(
            r"Mismatched NCCL version detected : rank (?P<a>\d+) version (?P<va>\d+) rank (?P<b>\d+) "
            r"version (?P<vb>\d+)"
        ),
        ROOT,
    ),
    # misc/shmutils.cc, include/shm.h: /dev/shm ran out of room (only these texts say so)
    (
        "shm-full",
        re.compile(
            r"posix_fallocate failed\s*:?\s*(?P<err>No space left on device)?"
            r"|failed to extend (?P<seg>\S+) to (?P<size>\d+) bytes(?:, error: (?P<err2>[^(]+))?"
            r"|shared memory segment (?P<seg2>\S+) \(size (?P<size2>\d+)\), error: No space left on device"
            r"|failed to create shared memory file (?P<seg3>[^\s,]+),? error:? (?P<err3>No space left on device)"
        ),
        ROOT,
    ),
    # a segment NCCL may not create or open: /dev/shm's permissions, not its size
    (
        "shm-permission",
        re.compile(
            r"Call to shm_open failed ?: ?(?P<err>Permission denied)"
            r"|shared memory (?:segment|file) (?P<seg>[^\s,]+),?(?: \(size \d+\))?,? error:? "
            r"(?P<err2>Permission denied)"
        ),
        ROOT,
    ),
    # a peer's segment of size 0 or a name of garbage: not a /dev/shm segment NCCL made (cuMem host memory)
    (
        "cumem-host",
        re.compile(
            r"shared memory segment (?P<seg>/dev/shm/nccl-[^\s(]*[^\w\s/.(-][^\s(]*|[^\s(]*) \(size (?P<size>0)\)"
            # NCCL names its segments /dev/shm/nccl-XXXXXX (mkstemp): an empty suffix is none of its names
            r"|shared memory segment (?P<seg2>/dev/shm/nccl-) \(size (?P<size2>\d+)\)"
        ),
        ROOT,
    ),
    (
        "shm-attach",
        re.compile(
            r"Error while attaching to shared memory segment (?P<seg>\S+)[^,]*, error: (?P<err>No such file[^(]*)"
        ),
        ROOT,
    ),
    ("rem-allocator", re.compile(r"\[Rem Allocator\] (?:Allocation failed|Poll failed)"), ROOT),
    # what a proxy thread or the main thread says after another failure: no cause of its own
    (
        "secondary",
        re.compile(
            r"\[Proxy Service \d+\] Failed to execute|Proxy Call to rank \d+ failed|\[Service thread\] Error"
            # aws-ofi-nccl's API wrappers on a NULL communicator: NCCL closing a connection that was never made
            r"|NET/OFI Invalid communicator object provided"
        ),
        CONSEQUENCE,
    ),
    # the summary after a segment's creation or attachment failed (shm.h 2.4 - 2.11, shmutils.cc / os/linux.cc
    # 2.12+; the errno from 2.22): the reason is the line before it, when printed
    (
        "shm-create",
        re.compile(
            r"Error while (?P<how>creating|attaching to) shared memory segment (?P<seg>\S+) \(size (?P<size>\d+)\)"
            r"(?:, error: (?P<err>[^(]+?) \((?P<errno>\d+)\))?"
        ),
        CONSEQUENCE,
    ),
    (
        "collective-mismatch",
        re.compile(
            r"collective mismatch error,? local size (?P<a>\d+) remote(?: size)? (?P<b>\d+)"  # 2.10+; 2.3.7 - 2.9.9
            r"|[Mm]essage truncated : receiv(?:ing|ed) (?P<a2>[\d,]+) bytes instead of (?P<b2>[\d,]+)"
            r"|Mismatched collective detected, please check your collective calls at and around rank (?P<around>\d+)"
        ),
        ROOT,
    ),
    (
        "graph-file",
        re.compile(
            r"XML Import Channel : dev (?P<dev>-?\d+) not found|XML Graph has wrong version"
            r"|Could not open XML graph file (?P<file>\S+)"
        ),
        ROOT,
    ),
    (
        "topo-attr",
        re.compile(
            r"Attribute (?P<attr>\w+) of node (?P<node>\w+) not found"
            r"|XML Topology has wrong version|XML Parse|XML Mismatch"
        ),
        ROOT,
    ),
    ("topo-reverse", re.compile(r"Failed to find reverse path from remNode (?P<rem>\S+)"), ROOT),
    ("topo-sysfs", re.compile(r"Could not find real path of (?P<path>/sys/\S+)"), ROOT),
    # enqueue.cc / init.cc: a setting NCCL cannot honour
    (
        "invalid-setting",
        re.compile(
            r"(?i:no algorithm/protocol available)(?: for function (?P<func>\w+)(?: with datatype (?P<dtype>\w+))?"
            r"\.?(?: NCCL_ALGO was set to (?P<algo>[^.]+)\.)?(?: NCCL_PROTO was set to (?P<proto>[^.]+)\.)?)?"
            r"|Detected mixed local (?P<what>Net|CollNet) device counts across ranks"
            r"|Invalid config (?P<attr>\w+) attribute value"  # then tuning.cc's NCCL_ALGO/PROTO, topo.cc's FORCE_MERGE
            r'|(?:All entries except the first must have a prefix: |Unrecognized (?P<part>\w+) token "(?P<token>[^"]*)"'
            r' when parsing )"(?P<value>[^"]*)"|(?:TOPO/NET : Could not force merge NICs |TOPO/NET : Only matched \d+ '
            r"devices, \d+ requested from |Specified fused NIC )(?P<fused>\S+?)(?=\.? |\.?$)"
        ),
        ROOT,
    ),
    # misc/socket.cc: the address NCCL was to connect to is not one (the peer's handle or a local interface)
    ("bad-address", re.compile(r"with family (?P<family>\d+) is neither AF_INET\(\d+\) nor AF_INET6"), ROOT),
    # misc/socket.cc, os/linux.cc: NCCL_COMM_ID names an address no local interface shares a subnet with
    ("subnet", re.compile(r"No interface found in the same subnet as remote address (?P<addr>[^\s,;]+)"), ROOT),
    # graph/rings.cc, graph/search.cc: the rings or paths NCCL computed are inconsistent between ranks
    (
        "graph-search",
        re.compile(
            r"ring (?P<ring>\d+) does not (?P<how>loop back to start|contain rank \d+)"
            r"|Could not find (?P<what>NET with id \S+|net id \S+|NIC for rank \d+|any local path from gpu \d+ to net)"
            r"|P2P is disabled between NVLINK connected GPUs \d+ and \d+"
        ),
        ROOT,
    ),
    # libfabric's EFA provider aborting the process on ENOMEM: the locked-memory limit (it pins its buffers)
    ("efa-memlock", re.compile(r"Libfabric error: \(-12\) Cannot allocate memory"), ROOT),
    # aws-ofi-nccl (NCCL_OFI_WARN prints "NET/OFI "): libfabric / EFA calls of the plugin
    (
        "ofi",
        re.compile(
            r"NET/OFI (?P<what>OFI fi_getinfo\(\) call failed|Couldn't find any optimal provider"
            r"|Unable to register memory|[\w ]*?fi_\w+ failed|Unable to (?:create|open|allocate|find|get)[^.:]*)"
            r"(?:[^:]*: (?P<err>.*))?"
        ),
        ROOT,
    ),
    # torch's ProcessGroupWrapper (TORCH_DISTRIBUTED_DEBUG=DETAIL / INFO): the ranks called different collectives.
    # 1.10-1.12 name one rank ("Rank 0 is running inconsistent collective: CollectiveFingerPrint(...)"), 1.13+
    # both, 2.1+ add "Collectives differ in the following aspects: ..." (ProcessGroupWrapper.cpp)
    (
        "torch-mismatch",
        re.compile(
            r"Detected mismatch between collectives on ranks\.?(?:\s*Rank (?P<a>\d+) is running(?: inconsistent)?"
            r"(?: collective:)? (?P<ca>.*?)(?:,? but Rank (?P<b>\d+) is running(?: collective:)? (?P<cb>.*?))?\.?\s*$)?"
        ),
        ROOT,
    ),
    # torch's flight recorder analyser (torchfrtrace, tools/flight_recorder): the dumps of the ranks disagree on
    # one collective's type, sizes or dtype ("Error type: SIZE_OR_SYNTAX_MISMATCH, Expected input sizes ...")
    (
        "torch-mismatch",
        re.compile(
            r"Error type: (?P<fr>COLLECTIVE_TYPE_MISMATCH|SIZE_OR_SYNTAX_MISMATCH|COLLECTIVE_DTYPE_MISMATCH)"
            r"(?:,\s*(?P<culprit>.*?))?\.?\s*$"
        ),
        ROOT,
    ),
    # the dynamic linker: the libnccl loaded is not the one the program was built against
    (
        "nccl-library",
        re.compile(
            # ld.so's words, with or without the colon a title drops (a URL's %20 for its spaces): a libnccl
            # without a symbol or a symbol version
            r"[Uu]ndefined(?: |%20)symbol:?(?: |%20)[\"'`]?(?P<sym>nccl\w+)"
            r"|(?P<lib>libnccl\.so[.\d]*): cannot open shared object"
            r"|(?P<lib2>libnccl\.so[.\d]*): version [`'\"](?P<ver>[^'\"`]+)['\"`] not found"
            r"|version [`'\"](?P<ver2>NCCL_[\d.]+)['\"`] not found"
            # XLA's NCCL stub (JAX, TensorFlow): its dlopen of libnccl found none
            r"|(?P<noload>Unable to load NCCL library)"
        ),
        ROOT,
    ),
    # init.cc: a rank outside the communicator (ncclInvalidArgument): the launch's world size is off
    ("invalid-rank", re.compile(r"Invalid rank requested : (?P<rank>-?\d+)/(?P<nranks>-?\d+)"), ROOT),
    # misc/argcheck.cc: an argument of a call NCCL rejects before running it (ncclInvalidArgument);
    # the range it prints ends at the communicator's nRanks, not nRanks - 1
    (
        "invalid-argument",
        re.compile(
            r"(?:(?<!\w)(?P<op>\w+) : )?"
            r"(?:invalid root (?P<root>-?\d+) \(root should be in the 0\.\.(?P<n>-?\d+) range\)"
            r"|(?<!\w)(?P<ptr>\w+) \S+ is not a valid pointer|(?<!\w)(?P<null>\w+) argument is NULL"
            r"|(?<!\w)(?P<buf>\w+) allocated on device (?P<dev>-?\d+) mismatchs with NCCL device (?P<ncdev>-?\d+)"
            r"|invalid type (?P<type>-?\d+)|invalid reduction operation (?P<redop>-?\d+)"
            r"|reduction operation (?P<userop>-?\d+) unknown to this communicator)"
            r"|(?P<corrupt>corrupted comm object detected)"
            r"|comm (?P<destroyed>\S+) has already been destroyed"  # init.cc's guard against a second ncclCommDestroy
        ),
        ROOT,
    ),
    # transport/net_ib: a device NCCL could not open or query at init is skipped, the others are used
    (
        "ib-device-skipped",
        re.compile(r"NET/IB ?: Unable to (?:open|query) (?:device (?P<dev>[\w.-]+)|port(?:_num)? (?P<port>\d+))"),
        ROOT,
    ),
    # misc/strongstream.cc: a CUDA graph capture this driver or NCCL build cannot do
    ("graph-capture", re.compile(r"NCCL cannot be captured in a graph"), ROOT),
    # misc/nvmlwrap.cc: NVML, which NCCL asks for the topology, failed
    ("nvml", re.compile(r"(?P<call>nvml\w+)\(\d*\) failed: (?P<err>[^.\n]+)"), ROOT),
    # nccl-tests' check of the results
    ("wrong-results", re.compile(r"Out of bounds values : (?P<n>[1-9]\d*) FAILED"), ROOT),
    # torch's heartbeat monitor (2.2+): the NCCL watchdog thread itself made no progress, so the process is killed
    (
        "watchdog-stuck",
        re.compile(r"watchdog got stuck for (?P<secs>\d+) seconds without making progress"),
        CONSEQUENCE,
    ),
    # torch's WorkNCCL past its timeout, in every torch's words (ProcessGroupNCCL.cpp): the work printed as
    # 1.8-1.9 "WorkNCCL(OpType=X, TensorShape=[..], Timeout(ms)=N)", 1.10-2.0 with "SeqNum=N, " first, 2.1+
    # with ", NumelIn=N, NumelOut=N"; said by the watchdog ("[Rank N] Watchdog caught collective operation
    # timeout: ... ran for N milliseconds before timing out", in later releases after "[PG ID 0 PG GUID
    # 0(default_pg) Rank N] "), by 1.x's blocking wait ("[Rank N] Caught collective operation timeout: ..."),
    # or by the blocking wait that names no duration ("[Rank N] Work WorkNCCL(...) timed out in blocking wait")
    (
        "watchdog-timeout",
        re.compile(
            r"(?=[\[WC])"
            r"(?=.*?(?:collective operation timeout|milliseconds before timing out|timed out in blocking wait))"
            r"(?:(?:\[(?:PG [^\]]*?)?Rank (?P<wrank>\d+)\]\s*)?"
            r"(?:(?:Watchdog caught|Caught) collective operation timeout: |Work ))?"
            r"WorkNCCL\((?:SeqNum=(?P<seq>\d+),\s*)?OpType=(?P<op>\w+)(?:,\s*NumelIn=(?P<numel>\d+))?[^)]*?"
            r"Timeout\(ms\)=(?P<timeout>\d+)\)"
            r"(?: ran for (?P<ran>\d+) milliseconds before timing out| (?P<blocking>timed out in blocking wait))?"
        ),
        CONSEQUENCE,
    ),
    ("watchdog-timeout", TIMEOUT_AT, CONSEQUENCE),  # the watchdog's own line for the work it timed out
    ("watchdog-stuck", HEARTBEAT, CONSEQUENCE),  # the heartbeat monitor: the watchdog thread made no progress
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
    for kind, pat, rank in _SIMPLE:
        if m := pat.search(text):
            return Reading(kind, {k: v for k, v in m.groupdict().items() if v is not None}, rank)
    if m := _CONNECT.search(text):
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
    if "Cannot allocate memory" in err and call.startswith(
        ("ibv_reg_mr", "ibv_create_cq", "ibv_create_qp", "ibv_alloc_pd", "ibv_create_srq")
    ):
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
    msg = (m.group("msg") if m.group("msg") is not None else m.group("msg2") or "").strip()
    fields = {"num": num, "msg": msg}
    for pat, kind in _CUDA_KIND:
        if pat.search(msg) or (kind == "fabric-not-ready" and num == "802"):
            return Reading(kind, fields)
    return Reading("nvls" if nvls else "cuda-failure", fields)
