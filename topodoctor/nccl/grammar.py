"""The shapes of NCCL's own log lines, each declared once, for every reader (``parse``, ``account``,
``choices``). Text patterns only: what a line means is its reader's part.

A line is NCCL's prefix, wherever a launcher's own prefix puts it, then the level and the message::

    host:pid:tid [dev] NCCL INFO message                (2.5 and later; 2.29+ may add "(function)")
    host:pid:tid [dev] file.cc:line NCCL WARN message
    host:pid:tid [dev] INFO message                     (before 2.5: no "NCCL")
    host:pid:tid [dev] file.cc:line WARN message

The INFO messages read, in NCCL's source wording (src/init.cc, src/transport.cc, src/transport/
p2p.cc, shm.cc, net.cc, net_ib*.cc, net_socket.cc, src/graph/*.cc, src/misc/param.cc, 2.18 - 2.30)::

    NCCL version 2.28.9+cuda13.0
    ncclCommInitRankConfig comm 0x.. rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 60 commId 0x.. - Init START
    comm 0x.. rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0    (2.20 and later)
    Channel 00/24 : 0 1                                      (a ring, and the channel count)
    Trees [0] 1/-1/-1->0->-1 [1] ...
    Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1   (the search)
    Could not find a path for pattern 1, falling back to simple order       (a WARN to 2.26, INFO from 2.27)
    24 coll channels, 24 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer
    Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read           (P2P/IPC, P2P/direct pointer, P2P/indirect/2[2])
    Channel 00 : 0[0] -> 1[1] via SHM/direct/direct
    Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0/GDRDMA/Shared   (the receive side: [receive])
    Ring 00 : 0[0] -> 1[1] via P2P/IPC                       (before 2.5: "Ring" for "Channel";
    Ring 00 : 0[0] -> 1[1] via direct shared memory           2.4's SHM and network wording)
    Ring 00 : 0 -> 1 [send] via NET/IB/0
    NCCL_P2P_LEVEL set by environment to LOC                 (integers: "set by environment to 1.")
    Using network IB                                         (Socket, IBext_v8, AWS Libfabric, ...)
    NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO]; OOB eth0:10.0.0.1<0>
    NET/IB : No device found.
    NET/Socket : Using [0]bond0:10.0.0.1<0> [1]eth1:fe80::1%eth1<0>
    NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'     (or Enabled)
    GPU Direct RDMA Disabled for GPU 1b000 / HCA 0 (distance 5 > 3)     (graph/paths.cc; 2.27, 2.29: below)
    NVLS multicast support is not available on dev 0
"""

from __future__ import annotations

import re

# --- the line: NCCL's prefix, the level, the message

SRC = r"[\w./<>+-]+\.(?:cc|cu|cpp|c|h|hpp)"  # an NCCL source file as its lines name it
WARN = re.compile(rf"(?:(?P<src>{SRC}):(?P<line>\d+)\]?(?: \(\w+\))?[^\n]*?\s)?NCCL WARN (?P<msg>.*)")
OLD_WARN = re.compile(rf"(?P<src>{SRC}):(?P<line>\d+) WARN (?P<msg>.*)")  # NCCL before 2.5: no "NCCL"
V1_WARN = re.compile(rf"(?:^|\s)WARN (?P<src>{SRC}):(?P<line>\d+) (?P<msg>.*)")  # NCCL 1.x: "WARN src/core.cu:N"
# a WARN's words quoted without NCCL's prefix or site (an issue's title: "...: WARN NET/IB: read failed in ..."):
# read only where the words are a WARN message of the sources, since "WARN" alone is any program's level
QUOTED_WARN = re.compile(r"(?:^|[\s:(])(?P<src>)(?P<line>)WARN:? (?P<msg>[A-Za-z]\S*.*)")
OLD_INFO = re.compile(r"\S+:\d+:\d+ \[-?\d+\] INFO (?P<msg>.*)")
INFO = "NCCL INFO"  # where a 2.5+ INFO message starts (the message: after it, leading spaces dropped)
DIAG = re.compile(r"NCCL DIAG (?P<msg>.*)")  # 2.31+: NCCL's own diagnosis
# host:pid:tid [dev] before the level; the host is what precedes the pid (a launcher's prefix before it)
ORIGIN = re.compile(
    rf"(?P<host>[\w.-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>-?\d+)\] (?:{SRC}:\d+\]? )?(?:NCCL )?(?:INFO|WARN)\b"
)
# include/checks.h's NCCLCHECK trail: "file.cc:line -> N [Async thread]"
TRAIL = re.compile(rf"(?P<src>{SRC}):(?P<line>\d+) -> (?P<code>\d+)(?: \[(?P<tag>[^\]]+)\])?")
# nccl-tests' rank line (rank, pid, host, device, bus id, GPU name), with or without its group (2.x before
# rank groups), its "#" lost to Markdown; the one declaration, evidence/nccl_tests.py reads it too
NT_RANK = re.compile(
    r"^#?\s+Rank\s+(\d+)(?:\s+Group\s+\d+)?\s+Pid\s+(\d+) on\s+(\S+) device\s+(\d+) \[([^\]]*)\]\s*(.*)$"
)
# proxy.cc's service thread failing the Close operation of a local rank: the ranks were shutting down (their
# communicators destroyed, or the processes exiting), so its accept and receive errors are the teardown's
PROXY_CLOSE = re.compile(r"Failed to execute operation Close from rank (?P<rank>\d+)")
# Ray's log deduplication ends a line it folded with a count of the others, not part of the program's line
RAY_REPEATED = re.compile(r"[ \t]*\[repeated \d+x across cluster\](?=[ \t]*$)", re.M)
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# a line that starts a message of its own (NCCL's prefix or level, torch's rank or glog prefix, a
# traceback), not the rest of a message a terminal wrapped
OWN_LINE = re.compile(r"^\S+:\d+:\d+ \[\d+\]|^\[(?:rank\d+|[EWIF]\d{4}|\d+,\d+\])|NCCL (?:INFO|WARN)|^Traceback|^File ")

# --- the version banner, also wrapped after "NCCL version" or after "NCCL"

# (not the release a program was built with, which dev_runtime.cc's version check names: "compiled with NCCL version")
VERSION = re.compile(r"(?<!compiled with )NCCL version (?P<v>\d+\.\d+\.\d+)(?P<suffix>\+cuda[\d.]+)?")
VERSION_TAIL = re.compile(r"NCCL(?P<word> version)?\s*$")
# the next line of a wrapped banner: the version alone (after "version") or "version N" (after "NCCL")
VERSION_WRAPPED = {
    True: re.compile(r"\s*(\d+\.\d+\.\d+)(\+cuda[\d.]+)?"),
    False: re.compile(r"\s*version (\d+\.\d+\.\d+)(\+cuda[\d.]+)?"),
}

# --- the version in a reporter's words (an environment list, a title, pip or conda, vLLM's line), where no banner is
# pasted: "nccl version: 2.4.2 2.5.6", "[NCCL2.26.2]", "nvidia-nccl-cu12==2.20.5", "libnccl2=2.19.3-1", conda's
# "nccl 2.18.3.1", torch.cuda.nccl.version()'s "(2, 18, 1)"; never nccl-tests' own version
SAID_VERSION = re.compile(
    r"(?i)(?:(?<![\w.-])|(?<=nvidia-))(?:lib)?nccl(?![-_ ]?tests?\b)2?(?:[-_]cu\d+)?(?:\.so(?:\.\d+)?\.?)?"
    r"(?:[\s_]*(?:version|ver\.?|v)\b)?[\s:=()\"'`,]{0,40}v?(?P<v>[12]\.\d{1,2}\.\d{1,2})(?![\d])"
)
SAID_VERSION_MORE = re.compile(r"(?i)\s*(?:,|/|&|\band\b|\bor\b)?\s*v?(?P<v>[12]\.\d{1,2}\.\d{1,2})(?!\d)")
SAID_TUPLE = re.compile(r"(?i)nccl[\w.()]{0,25}[\s:=]{0,3}\(\s*(?P<a>2),\s*(?P<b>\d{1,2}),\s*(?P<c>\d{1,2})\s*\)")


def said_versions(lines: list[str]) -> list[str]:
    """The NCCL versions a text names in words, in order of first mention (``SAID_VERSION``)."""
    out: dict[str, None] = {}
    for line in lines:
        if "ccl" not in line.lower() or "NCCL INFO" in line:
            continue
        for m in SAID_VERSION.finditer(line):
            out[m["v"]] = None
            rest = line[m.end() :]
            while more := SAID_VERSION_MORE.match(rest):  # "2.4.2 2.5.6": the reporter tried both
                out[more["v"]] = None
                rest = rest[more.end() :]
        if t := SAID_TUPLE.search(line):
            out[f"{t['a']}.{t['b']}.{t['c']}"] = None
    return list(out)


# --- communicators and channels (INFO messages)

INIT = re.compile(
    r"ncclCommInit\w* comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+) cudaDev (?P<cuda>-?\d+)"
    r"(?: nvmlDev (?P<nvml>-?\d+))?(?: busId (?P<bus>[0-9a-fA-F]+))?"
)
CUMEM_HOST_PROBE = "ncclCuMemHostEnable"  # misc/cudawrap.cc (2.23+): NCCL's probe of cuMem host allocations
COMM_ID = re.compile(r"\bcommId (?P<id>0x[0-9a-f]+)")  # the communicator's id on its init lines (2.19+)
# the init line, or its "Init COMPLETE" twin without the function name: a rank the file speaks for
INIT_RANK = re.compile(r"ncclCommInit\w* comm 0x[0-9a-f]+ rank (\d+) nranks (\d+)|comm 0x[0-9a-f]+ rank (\d+) nranks")
COMM = re.compile(
    r"comm (?P<comm>0x[0-9a-f]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+)"
    r" localRanks (?P<local_ranks>\d+)"
)
RING = re.compile(r"^Channel (\d+)/(\d+) : ([\d ]+)$")
TREES = re.compile(r"^Trees (.*)$")
TREE = re.compile(r"\[\d+\] (\S+)")
# (2.12 - 2.16 print no nvls channels, and before 2.12 no collnet channels either)
CHANNELS = re.compile(r"^(\d+) coll channels, (?:\d+ collnet channels, )?(?:(\d+) nvls channels, )?(\d+) p2p channels")
# a connection; the bracket holds the device (busId in hex in 2.18, the NVML index from 2.19; the CUDA
# device in 2.4's shm.cc), and 2.4's network lines have none ("Ring 00 : 0 -> 1 [send] via NET/IB/0")
CONN = re.compile(
    r"^(?:Channel|Ring) (?P<channel>\d+)(?:/(?P<conn>\d+))? : (?P<src>\d+)(?:\[(?P<src_dev>[^\]]*)\])? -> "
    r"(?P<dst>\d+)(?:\[(?P<dst_dev>[^\]]*)\])?(?: \[(?P<side>send|receive)\])? via (?P<via>\S.*)$"
)
NO_NVLS = re.compile(r"NVLS multicast support is not available")

# --- the environment

# "set by environment to" (INFO of NCCL_ENV); some readers also take NCCL's "set to" of a derived value
SET_BY_ENV = re.compile(r"^(NCCL_\w+) set by environment to (.*?)\.?\s*$")
SET_TO = re.compile(r"(NCCL_\w+) set (?:by environment )?to (.*?)\.?\s*$")
TOPO_FILE = re.compile(r"Loading topology file (\S+)")
# a variable given on a command line or in an environment dump the log holds (mpirun -x NCCL_X=v, export, env)
ASSIGNED = re.compile(r"(?<![\w$/.-])(NCCL_[A-Z][A-Z0-9_]*)=([^\s'\",;]*)")
# a variable set in a YAML mapping or a dict a post pastes (a job spec's env, Kubernetes' or a cluster's task env)
MAPPED = re.compile(r"^\s*-?\s*[\"']?(NCCL_[A-Z][A-Z0-9_]*)[\"']?\s*:\s*[\"']?([^\s'\",#]+)")

# --- the network

NETWORK = re.compile(r"^Using network (?P<net>\S.*?)\s*$")
IB_USING = re.compile(r"NET/IB ?: Using (.*?)(?:; OOB|$)")
IB_DEV = re.compile(r"\[(?P<index>\d+)\](?P<dev>[\w.-]+):(?P<port>\d+)/(?P<layer>IB|RoCE)")
IB_NO_DEVICE = re.compile(r"NET/IB ?: No device found")
SOCK_USING = re.compile(
    r"(?:Bootstrap|NET/Socket|NET) ?: Using (?:interface )?(.*)$"
)  # [0]eth0:10.0.0.1<0> [1]veth12:fe80::...; NCCL 2.0 - 2.3: "NET : Using interface lo:127.0.0.1<0>", one per line
NET_SOCKET_USING = re.compile(r"NET/Socket ?: Using (.*)$")
SOCK_IF = re.compile(r"(?:\[(?P<index>\d+)\])?(?P<name>[\w.@-]+):(?P<addr>[\w.:%-]+?)<\d+>")
SOCK_NAME = re.compile(r"\[\d+\]([A-Za-z][\w@-]*)")  # the listing's names alone, where no address follows as NCCL's
# a line that holds nothing but the listing's "[N]name:addr<port>" items: the socket listing wrapped by a paste
SOCK_IFS_ONLY = re.compile(r"^\s*(?:\[\d+\][\w.@-]+:[\w.:%-]+?<\d+>\s*)+$")
# GPUDirect RDMA: per HCA (src/graph/topo.cc, every release), and per GPU and NIC pair as the graph
# decides it (src/graph/paths.cc): "for GPU <busId hex> / HCA <index>" 2.18 - 2.20, "... / HCA <netId hex>"
# 2.21 - 2.23, "for GPU <rank> / HCA <netId hex>" 2.24 - 2.28, "for GPU/<sys>-<local> (rank r) - NET/<sys>-
# <local> (" 2.29 (TRACE from 2.30)
GDR = re.compile(
    r"(?:NET/(?P<net>[^\s:]+) ?: )?GPU Direct RDMA (?P<state>Enabled|Disabled) for "
    r"(?:HCA (?P<hca>\d+) '(?P<name>[^']*)'"
    r"|GPU (?P<gpu>[0-9a-fA-F]+) / HCA (?P<nic>[0-9a-fA-F]+)\b"
    r"|GPU/(?P<gpu_id>\d+-\d+) \(rank (?P<rank>\d+)\) - NET/(?P<net_id>\d+-\d+))"
)

# --- what tells one cause of a failure class from another (read by ``nccl.info_signs``)

# net_ib's line for each RoCE queue pair: the GID index in use and the GID, as its two 64-bit halves (subnet
# prefix / interface id, the network-order bytes printed as the host's words). "NET/IB: Dev %d Port %d qpn %d
# mtu %d GID %ld (%lX/%lX)" 2.18; "... mtu %d query_ece={...} GID ..." 2.19 - 2.26; "NET/IB: NCCL Dev %d IbDev
# %d Port %d qpn %d mtu %d ... GID" (or "NCCL MergedDev") 2.20 - 2.29; "NET/IB: <function>: NCCL Dev %d IbDev
# %d Port %d qp_num %d mtu %d GID ..." 2.30. An IB port prints "LID %d" there instead (2.22+ "LID %d subnet-prefix
# %lu FLID %d"): the link is InfiniBand.
_QP = r"NET/IB: (?:\w+: )?(?:NCCL (?:Merged)?Dev|Dev) (?P<dev>\d+) (?:IbDev (?P<ibdev>\d+) )?Port (?P<port>\d+) "
_QP += r"qp(?:n|_num) \d+ mtu \d+ (?:.*?\} )?"
GID_IN_USE = re.compile(_QP + r"GID (?P<index>-?\d+) \((?P<prefix>[0-9A-F]{1,16})/(?P<iid>[0-9A-F]{1,16})\)", re.I)
QP_LID = re.compile(_QP + r"LID (?P<lid>\d+)", re.I)
# the SHM transport's host buffers of a local peer (transport/shm.cc, 2.19+): imported through cuMem, or as a
# /dev/shm file; "from tpProxyRank %d" 2.19 - 2.26, "from proxyRank %d" 2.27+
CUMEM_IMPORT = re.compile(r"CUMEM imported shareable host buffer from (?:tp)?[Pp]roxyRank (?P<rank>\d+)")
MMAP_IMPORT = re.compile(r"MMAP imported shareable host buffer (?P<path>\S+)")
CUMEM_HOST_FAILS = re.compile(r"cuMem host allocations do not appear to be working")  # init.cc, 2.27+
# the network plugin (src/net.cc 2.18 - 2.26, src/plugin/net.cc 2.27+): loaded, or none and NCCL's own
NET_PLUGIN = re.compile(r"NET/Plugin ?: Loaded net plugin (?P<name>.+?) \(v\d+\)")
NO_NET_PLUGIN = re.compile(r"NET/Plugin ?: (?:.*No plugin found|Could not find:|Using internal network plugin)")
# the dynamic linker's words when a plugin was found and did not load: 2.19 - 2.20 "dlerror=%s No plugin found",
# 2.21 - 2.22 "Plugin load returned %d : %s when loading", 2.23+ plugin_open.cc prints dlerror's text itself
PLUGIN_DLERROR = re.compile(
    r"NET/Plugin ?: (?:dlerror=|(?:Most recent )?[Pp]lugin load returned -?\d+ : )?(?P<err>\S+: "
    r"(?:cannot open shared object file|undefined symbol|version `|wrong ELF class|invalid ELF header|file too short)"
    r"[^\n]*)"
)
# aws-ofi-nccl: "Selected Provider is %s" (1.0 - 1.5), "... is %s (found %d nics)", "Selected provider is %s,
# fabric is %s (found %d nics)" (1.14+)
OFI_PROVIDER = re.compile(r"NET/OFI:? Selected [Pp]rovider is (?P<provider>[\w;-]+)")

# --- NCCL's choices (src/graph/tuning.cc's table, search.cc's graphs, enqueue.cc's per-call lines)

_PREFIX = r"NCCL INFO\s+"
ALGO_HEAD = re.compile(_PREFIX + r"Algorithm\s*\|(.*)$")
PROTO_HEAD = re.compile(_PREFIX + r"Protocol\s*\|(.*)$")
COST_ROW = re.compile(_PREFIX + r"(\w+)\s*\|((?:\s*-?[\d.]+/\s*-?[\d.]+\s*\|)+)\s*$")
COST_CELL = re.compile(r"(-?[\d.]+)/\s*(-?[\d.]+)")
# "speed" where 2.12 and later print "bw"
PATTERN = re.compile(
    _PREFIX
    + r"Pattern (\d+), crossNic (\d+), nChannels (\d+), (?:bw|speed) ([\d.]+)/([\d.]+), "
    + r"type (\w+)/(\w+), sameChannels (\d)"
)
# search.cc: the search found no graph; NCCL then builds one channel in rank order at 0.1 GB/s over SYS (a
# WARN to 2.26, INFO with GRAPH from 2.27)
SEARCH_FAILED = re.compile(r"Could not find a path for pattern (\d+), falling back to simple order")
# paths.cc printNodePaths (GRAPH): each GPU's paths, "GPU/2A000 :GPU/2A000 (0/5000.000000/LOC) GPU/AB000
# (3/10.000000/SYS) CPU/0 (1/24.000000/PHB) ..." (2.19+: "GPU/0-2a000", one decimal): hops/GB/s/type per node
GPU_PATHS = re.compile(_PREFIX + r"GPU/[\w-]+ :(?P<rest>.*)$")
PATH_TO_GPU = re.compile(r"GPU/[\w-]+ \((\d+)/([\d.]+)/(\w+)\)")
# xml.cc getPciPath, net_ib.cc: a device's sysfs path does not resolve (a bus id the host or VM does not have,
# /sys hidden), so the topology NCCL searches lacks where that device sits
NO_REAL_PATH = re.compile(r"Could not find real path of (\S+)")
# topo.cc ncclTopoPrintRec (GRAPH): the topology as a tree, each link "+ TYPE[GB/s] - NODE/id", a node's links
# indented under it: "+ PCI[24.0] - NIC/52000", "+ NET[25.0] - NET/0 (asic/port/bw)" (2.28: "NET/0-0 (coll/...)")
TOPO_LINK = re.compile(
    r"NCCL INFO (?P<indent>\s*)\+ (?P<type>[A-Z]+)\[\s*(?P<bw>[\d.]+)\] - (?P<node>[A-Z]+)/(?P<id>[\w-]+)"
    r"(?: \((?P<attrs>[^)]*)\))?"
)
CALL_NEW = re.compile(_PREFIX + r"(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}")
CALL_OLD = re.compile(_PREFIX + r"(?:(\w+): )?(\d+) Bytes -> Algo (\d+) proto (\d+) time ([\d.]+)")


def info_message(line: str) -> str | None:
    """The message of a 2.5+ INFO line (after ``NCCL INFO``, leading spaces dropped); None for any other line."""
    at = line.find(INFO)
    return None if at < 0 else line[at + len(INFO) :].lstrip()


def origin_host(line: str) -> str:
    """The host of NCCL's ``host:pid:tid [dev]`` prefix; "" where the line carries none (or a scrubbed one)."""
    m = ORIGIN.search(line)
    return m["host"] if m else ""


# a line pasted without NCCL's prefix counts only when its words are NCCL's own
# enqueue.cc's "No algorithm/protocol available ..." tail, on a line of its own where a paste wrapped it
SET_TO_NEXT = re.compile(r"\s*NCCL_(?:ALGO|PROTO) was set to ")
BARE_OK = re.compile(
    r"Call to ibv_|Got completion|Cuda failure|NVLink SHARP|socket\w*Connect|Net : Connect"
    r"|posix_fallocate|shared memory segment|failed to extend|Unable to allocate shared memory|Duplicate GPU detected"
    r"|Mismatched NCCL"
    r"|collective mismatch|[Mm]essage truncated|no socket interface found|XML Import Channel"
    r"|Attribute \w+ of node|WorkNCCL\((?:SeqNum|OpType)|Out of bounds values : [1-9]|^CUDA error \d+ '"
    r"|Detected mismatch between collectives|[Uu]ndefined(?: |%20)symbol:?(?: |%20)[\"'`]?nccl"
    r"|version [`'\"]NCCL_[\d.]+['\"`] not"
    r"|libnccl\.so[.\d]*: (?:cannot open|version)|display driver / cuda driver|forward compatibility was att"
    r"|libnccl\.so[.\d]*, needed by|undefined reference to [`'\"]nccl|Failed to find reverse path from remNode"
    r"|driver on your system is too old|CUDA driver version is insufficient"
    r"|No interface found in the same subnet|does not loop back to start|NET/OFI|Libfabric error|nor AF_INET6"
    r"|is not enumerated as an mlx5 device|fi_getinfo: (?:provider|-\d)"  # NVSHMEM's IBGDA; libfabric's own
    r"|No OpKernel was registered to support Op 'Nccl"  # TensorFlow built without NCCL
    r"|[Nn]o algorithm/protocol (?:nor symKernelId )?available for function|peer access is not supported between"
    r"|Invalid rank requested"
    r"|root should be in the 0\.\.\d+ range|watchdog got stuck for \d+ seconds|Error type: \w+_MISMATCH"
    r"|Unable to load NCCL library|P2P is disabled between NVLINK connected GPUs|Could not find NET with id"
    r"|Timeout at NCCL work: \d+|Heartbeat monitor timed out!|gloo/transport/tcp/pair\.cc:\d+\] Connection closed"
    r"|libfabric:\d+:\d+::efa:"
)


def plugin_unloadable(msg: str) -> str:
    """The dynamic linker's words where a NET plugin was found but did not load (a symbol or a library version
    missing, a dependency absent, a file of another architecture); "" where the plugin itself is absent, which
    is NCCL's own test (plugin_open.cc: the error names the file it looked for and says No such file)."""
    m = PLUGIN_DLERROR.search(msg)
    if m is None:
        return ""
    err = m["err"].split(" when loading ")[0].split(" No plugin found")[0].strip()
    missing = err.split(":", 1)[0].rsplit("/", 1)[-1]
    # the plugin's own file absent: NCCL's default name (RCCL's librccl-net), or the file it says it was loading
    loading = msg.split(" when loading ", 1)[1].split()[0] if " when loading " in msg else ""
    if "No such file or directory" in err and (
        missing.startswith(("libnccl-net", "librccl-net")) or missing == loading
    ):
        return ""
    return err[:300]
