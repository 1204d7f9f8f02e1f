"""The candidates of a failure no class names, from the site that printed it: what the message's
words say of its kind (an allocation that returned nothing, NCCL's own consistency check, a setting
NCCL refused, the CUDA driver's library) and, else, what the part of NCCL that prints it does
(misc/socket.cc's sockets, proxy.cc's proxy thread, net_ib's verbs, shmutils' /dev/shm segments,
p2p.cc's CUDA IPC, the allocators, the NET plugins, the argument checks). Read from the sites in
NCCL's source (2.18 - 2.30), aws-ofi-nccl's and the IB / SHARP plugin's: each candidate is what can
make that code path fail, with what tells it apart. A ranked list, never a verdict: the finding stays
cause not found. Data and one pure function; no I/O."""

from __future__ import annotations

import re

Candidate = tuple[str, str]  # (the cause, what tells it apart)

_PEER_FIRST = (
    "another rank failed first and this one saw it go (its process exited, its node dropped off)",
    "every rank's log: the earliest WARN of the job is the cause, the rest follow it",
)
_BUG = (
    "a bug of this NCCL release",
    "the version banner (NCCL_DEBUG=VERSION); NVIDIA/nccl's issues and release notes for the message; a newer release",
)
_TWO_NCCLS = (
    "two NCCL builds in one job (ranks, or the program and the libnccl it loads, on different versions)",
    "each rank's version banner; `ldd` / LD_LIBRARY_PATH for a second libnccl.so.2",
)

_STRAY = (
    (
        "a program that is not NCCL connected to NCCL's port: a port scanner, a metrics scraper, a health check",
        "the first bytes it sent, read as text (misc/socket.cc prints them as the wrong magic); `ss -tnp` on the "
        "port; NCCL ignores the connection and accepts again (2.26 and earlier warn; NVIDIA/nccl#1808: the proxy "
        "thread could hang on one)",
    ),
    (
        "a rank of another job or of an earlier run reached this port (stale processes, two jobs sharing "
        "NCCL_COMM_ID / MASTER_ADDR and port)",
        "`ps` on the node for processes of an earlier run; the job's rendezvous settings",
    ),
    (
        "ranks on different NCCL versions, whose handshake differs",
        "each rank's version banner",
    ),
)
_MAGIC = re.compile(r"wrong magic (?P<got>[0-9a-fA-F]{1,16}) != [0-9a-fA-F]+")


def stray_bytes(message: str) -> str:
    """The bytes a stray connection sent, as text, where misc/socket.cc's ``wrong magic`` WARN (NCCL 2.26 and
    earlier) shows them and they are printable ('GET /met': an HTTP client); "" otherwise."""
    m = _MAGIC.search(message)
    if m is None:
        return ""
    raw = int(m["got"], 16).to_bytes(8, "little").rstrip(b"\0")  # the 8 bytes as received, x86 order
    return raw.decode("ascii") if raw and all(32 <= b < 127 for b in raw) else ""


# What the words of a message say of its kind, tried in order before the site's part of NCCL
FAMILIES: tuple[tuple[str, re.Pattern[str], tuple[Candidate, ...]], ...] = (
    ("a connection that was not the peer's", re.compile(r"socketFinalizeAccept.*wrong (?:magic|type)"), _STRAY),
    # transport.cc selectTransport: P2P, SHM and the network all refused the pair (the network connects ranks of one
    # host only where ncclTopoCheckNet allows it, off by default)
    (
        "no transport between two ranks",
        re.compile(r"No transport found for rank"),
        (
            (
                "NCCL_P2P_DISABLE=1 together with NCCL_SHM_DISABLE=1: ranks of one host are left with no transport",
                "the `set by environment` lines (and /etc/nccl.conf); unset one of the two",
            ),
            (
                "ranks of one host in containers that share neither /dev/shm nor the IPC namespace (SHM needs one "
                "/dev/shm, P2P one IPC namespace)",
                "the two ranks' bus ids on one host in the message; `--ipc=host` or a shared /dev/shm for the pods",
            ),
            (
                "NCCL_P2P_LEVEL below the path between the two GPUs with SHM off",
                "NCCL_P2P_LEVEL and NCCL_SHM_DISABLE in the log; `nvidia-smi topo -m` for the path",
            ),
        ),
    ),
    (
        "an allocation that returned nothing",
        re.compile(
            r"(?i)\b(?:[mc]alloc|host alloc|cuMemCreate|cuMemAlloc)\b.*(?:failed|returned null)"
            r"|failed to (?:cuda )?(?:host )?(?:malloc|alloc|calloc|allocate)|unable to allocate|allocation failed"
            r"|out of memory|cannot allocate"
        ),
        (
            (
                "the memory the allocation draws on is exhausted: host memory under the container's limit, or GPU "
                "memory the program (or another process on the GPU) holds",
                "`free -g` / the container's memory limit; `nvidia-smi` for the GPU's memory and its other processes",
            ),
            (
                "NCCL asking for more than usual: many channels or peers, a large NCCL_BUFFSIZE, NCCL_NCHANNELS / "
                "NCCL_MIN_NCHANNELS raised",
                "the NCCL_* settings in the log; NCCL_BUFFSIZE and the channel counts back to their defaults",
            ),
            (
                "pinned or cuMem memory refused: the locked-memory limit, or cuMem allocations the driver or a VM "
                "does not support",
                "`ulimit -l`; NCCL_CUMEM_ENABLE=0 makes NCCL allocate the older way",
            ),
        ),
    ),
    (
        "NCCL's own consistency check",
        re.compile(
            r"(?i)loop at element|has been lost|nonexistent|null operation|inactive op|doesn't match|does not match|"
            r"internal error|should not|should only|pointer is null|invalid key|not found in tracked|unknown .*index|"
            r"mismatched response|unexpected|already (?:suspended|exported|registered)|not initialized|"
            r"uninitialized|out of range|not in the range|invalid request"
        ),
        (
            (
                "the program using NCCL out of its contract: a communicator used from two threads at once, after "
                "ncclCommAbort / destroy, or a buffer freed while NCCL still used it",
                "the program's calls around the failure (TORCH_DISTRIBUTED_DEBUG=DETAIL, CUDA_LAUNCH_BLOCKING=1)",
            ),
            _BUG,
            _TWO_NCCLS,
        ),
    ),
    (
        "the CUDA driver's library",
        re.compile(r"(?i)cuda library|missing symbol|driver version|pfn functions|cuDriverGetVersion|Retrieve \w+ "),
        (
            (
                "a CUDA driver older than this NCCL needs, or a container's compat libcuda that does not match the "
                "host's kernel module",
                "`nvidia-smi` (the driver) against the CUDA the NCCL build names in its banner (+cudaX.Y)",
            ),
            (
                "no usable libcuda in the process: NCCL_CUDA_PATH or LD_LIBRARY_PATH pointing elsewhere, no GPU "
                "visible",
                "`ldconfig -p | grep libcuda`, CUDA_VISIBLE_DEVICES, NCCL_CUDA_PATH",
            ),
        ),
    ),
    (
        "a setting or feature NCCL refused",
        re.compile(
            r"(?i)invalid config|NCCL_[A-Z0-9_]{3,}|please (?:specify|set)|not supported (?:with|on|by|prior)|"
            r"requires|must be (?:set|initialized|[0-9])|is not (?:supported|compatible)|incompatible"
        ),
        (
            (
                "a setting: the NCCL_* variable or the communicator config the message names, set in the "
                "environment, /etc/nccl.conf or ~/.nccl.conf",
                "the variable the message names and the `set by environment` lines; run once with it unset",
            ),
            (
                "hardware, driver or CUDA that lacks the feature the setting or the program asks for",
                "the driver and CUDA versions (`nvidia-smi`), the GPU model, the NIC's firmware",
            ),
            _TWO_NCCLS,
        ),
    ),
)

_SOCKET = (
    _PEER_FIRST,
    (
        "the socket network between the hosts: NCCL_SOCKET_IFNAME (or NCCL's choice) on an interface that does not "
        "reach the peer, a firewall, a missing route",
        "the `Bootstrap : Using` / `NET/Socket : Using` lines on every node; `nc -zv <peer> <port>` between nodes",
    ),
    (
        "the host's limits in a large job: file descriptors (`ulimit -n`) or ephemeral ports",
        "errno 'Too many open files' or 'Cannot assign requested address' on another rank; `ulimit -n`",
    ),
)
_UDS = (
    _PEER_FIRST,
    (
        "local ranks that cannot reach each other's Unix sockets (NCCL's cuMem handle exchange): abstract sockets "
        "belong to a network namespace, so ranks in separate containers or pods on one node",
        "one container per node or --network=host / hostNetwork; NCCL_CUMEM_ENABLE=0 turns the exchange off",
    ),
)
_IB = (
    (
        "the NIC or its port: a port not Active, a link down or flapping, the device reset by its driver",
        "`ibstat` / `ibv_devinfo` (State: Active), the kernel log (mlx5_core), the port counters",
    ),
    _PEER_FIRST,
    (
        "RDMA resources of the host: the locked-memory limit, the NIC's queue pairs or memory regions",
        "`ulimit -l` (unlimited), the NIC's resources (`rdma resource`)",
    ),
    (
        "the verbs stack: rdma-core / MOFED and the kernel driver, or /dev/infiniband missing from the container",
        "`ibv_devinfo` inside the container; NCCL_IB_DISABLE=1 runs over sockets to confirm the RDMA path is it",
    ),
)
_SHM = (
    (
        "/dev/shm too small or not shared between a node's ranks (a container's 64 MB default, separate IPC "
        "namespaces)",
        "`df -h /dev/shm` in the container; --shm-size / --ipc=host; NCCL_SHM_DISABLE=1 runs without the segment",
    ),
    (
        "/dev/shm that this user may not write, or segments left by another user",
        "`ls -ld /dev/shm` (drwxrwxrwt), `ls -l /dev/shm/nccl-*`",
    ),
    _PEER_FIRST,
)
_P2P = (
    (
        "CUDA IPC between the node's processes refused: ranks in separate containers or PID / IPC namespaces",
        "one container per node or --ipc=host; NCCL_CUMEM_ENABLE=0 (legacy IPC) or NCCL_P2P_DISABLE=1 as a test",
    ),
    (
        "GPUs that cannot reach each other's memory: PCIe ACS, a VM, a GPU without P2P",
        "`nvidia-smi topo -p2p r`; NCCL_P2P_DISABLE=1 makes it go away if it is P2P",
    ),
    _PEER_FIRST,
)
_PROXY = (
    (
        "a call the proxy thread made for a transport failed: this rank's earlier WARN of the network, SHM or P2P "
        "is the cause",
        "this rank's log before the proxy's WARN; NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,PROXY",
    ),
    _PEER_FIRST,
    _UDS[1],
    _BUG,
)
_NET = (
    (
        "the NET plugin: one built for another NCCL, or NCCL_NET / NCCL_NET_PLUGIN naming another network",
        "the `NET/Plugin` lines (which plugin loaded), `Using network ...`; NCCL_NET_PLUGIN=none to test",
    ),
    (
        "the network's own failure: the IB, socket or plugin WARN before this one",
        "the first NET WARN of the log",
    ),
    (
        "CollNet / SHARP asked for and not available",
        "NCCL_COLLNET_ENABLE, the SHARP daemon (sharpd); NCCL_COLLNET_ENABLE=0 to test",
    ),
)
_USAGE = (
    (
        "the program's calls: ranks calling NCCL differently, an argument or a communicator NCCL cannot use, a "
        "communicator used after abort or destroy",
        "TORCH_DISTRIBUTED_DEBUG=DETAIL (the ranks' calls side by side); NCCL_DEBUG=INFO around the call",
    ),
    _TWO_NCCLS,
    _BUG,
)
_GDR = (
    (
        "GDRCopy: the gdrdrv kernel module and libgdrapi absent, of different versions, or not in the container",
        "`lsmod | grep gdrdrv`; NCCL_GDRCOPY_ENABLE=0 runs without it",
    ),
    (
        "the GPU's BAR1 space exhausted by the mappings",
        "`nvidia-smi -q -d MEMORY` (BAR1 Memory Usage)",
    ),
)
_NVLINK = (
    (
        "the NVLink fabric: the Fabric Manager or IMEX service not running or not ready, or the channels not in "
        "the container",
        "`nvidia-smi -q | grep -A3 Fabric`, `systemctl status nvidia-fabricmanager nvidia-imex`; "
        "NCCL_NVLS_ENABLE=0 / NCCL_MNNVL_ENABLE=0 to test",
    ),
    _PEER_FIRST,
)
_NVML = (
    (
        "NVML in the process: a driver and library of different versions (reboot after a driver update), no "
        "libnvidia-ml in the container",
        "`nvidia-smi` in the container",
    ),
)
_OFI = (
    (
        "libfabric's provider (EFA): the device not in the container, the provider or libfabric too old for this "
        "aws-ofi-nccl",
        "`fi_info -p efa` in the container; the plugin's `NET/OFI Selected provider is` line",
    ),
    (
        "the memory the plugin registers: the locked-memory limit, GPUDirect RDMA (FI_EFA_USE_DEVICE_RDMA)",
        "`ulimit -l`; the plugin's memory registration WARN before this one",
    ),
    _PEER_FIRST,
    (
        "aws-ofi-nccl built for another NCCL or CUDA than the job loads",
        "the plugin's version line (`NET/OFI Initializing aws-ofi-nccl`) against NCCL's banner",
    ),
)
_UCX = (
    (
        "UCX: its transports (UCX_TLS, UCX_NET_DEVICES) reaching no peer, or UCX older than the plugin",
        "`ucx_info -d`; the plugin's NET/UCX lines; NCCL_PLUGIN_P2P=ib to use the plugin's verbs path instead",
    ),
    _PEER_FIRST,
)
_GRAPH = (
    (
        "a setting of the topology or tuning: NCCL_TOPO_FILE, NCCL_GRAPH_FILE, NCCL_ALGO / NCCL_PROTO, a tuner "
        "plugin (NCCL_TUNER_PLUGIN), set on some nodes only or naming what the host lacks",
        "the NCCL_* settings in the log; run once without them",
    ),
    (
        "ranks that see different systems or run different NCCL versions",
        "each node's version banner and NCCL_DEBUG_SUBSYS=GRAPH output",
    ),
    _BUG,
)
_OLD = (
    (
        "an NCCL release of 2.4.2 or older, long replaced",
        "the version banner; upgrade NCCL (and the framework that bundles it)",
    ),
    _PEER_FIRST,
    _USAGE[0],
)
_GRAPHS = (
    (
        "the program's CUDA graph capture around NCCL calls: a capture mode or stream NCCL cannot use",
        "the program's torch.cuda.graph / capture settings; run once without graph capture",
    ),
    (
        "a driver older than CUDA graph support of NCCL needs",
        "`nvidia-smi` (the driver) against the CUDA the NCCL build names",
    ),
)
_RAS = (
    (
        "NCCL's RAS subsystem (2.24+): its socket thread or its peers",
        "NCCL_RAS_ENABLE=0 runs without it; the RAS lines of other ranks",
    ),
    _PEER_FIRST,
)
_OTHER = (_PEER_FIRST, _BUG, _TWO_NCCLS)

# The site's part of NCCL, by the path of the file that prints it (first match wins)
AREAS: tuple[tuple[str, re.Pattern[str], tuple[Candidate, ...]], ...] = (
    ("NCCL's Unix-socket exchange", re.compile(r"ipcsocket|windows_ipcsocket"), _UDS),
    ("NCCL's sockets", re.compile(r"socket|bootstrap|os/(?:linux|windows)"), _SOCKET),
    ("the proxy thread", re.compile(r"^proxy\.cc$"), _PROXY),
    ("NCCL's RDMA (IB verbs)", re.compile(r"net_ib|ibvwrap|ibvsymbols|mlx5dv|ib_plugin|p2p_plugin|ibvcore"), _IB),
    ("/dev/shm segments", re.compile(r"shmutils|(?:^|/)shm\.(?:h|cc)$|transport/shm"), _SHM),
    ("CUDA IPC between GPUs", re.compile(r"transport/p2p|register"), _P2P),
    ("GDRCopy", re.compile(r"gdrwrap"), _GDR),
    ("the NVLink fabric", re.compile(r"nvls|mnnvl|imex"), _NVLINK),
    ("NVML", re.compile(r"nvmlwrap"), _NVML),
    ("the network transport", re.compile(r"(?:^|/)net\.cc$|coll_net|plugin/|transport\.cc$|^plugin\.c$"), _NET),
    (
        "NCCL's calls from the program",
        re.compile(r"enqueue|group|argcheck|dev_runtime|rma/|gin/|scheduler|ce_coll|common_coll|collectives|init\.cc"),
        _USAGE,
    ),
    ("NCCL's memory", re.compile(r"alloc|mem_manager|utils"), FAMILIES[0][2]),
    ("aws-ofi-nccl (NET/OFI)", re.compile(r"nccl_ofi|platform-aws|(?:^|/)cm/|stats/"), _OFI),
    ("the UCX plugin", re.compile(r"ucx"), _UCX),
    ("the topology search and tuning", re.compile(r"^graph/"), _GRAPH),
    ("CUDA graph capture", re.compile(r"strongstream"), _GRAPHS),
    ("NCCL's RAS", re.compile(r"^ras/"), _RAS),
    ("NCCL 2.4.2 or older", re.compile(r"\.cu$"), _OLD),
)


# the parts of NCCL that join the ranks of one node only: a failure there between two machines means NCCL took
# them for one
NODE_LOCAL = frozenset(("CUDA IPC between GPUs", "/dev/shm segments"))


def site_candidates(message: str, files: tuple[str, ...]) -> tuple[str, list[str]]:
    """What kind of failure a message of no class is, and its candidates, most likely first, each
    with what tells it apart: from its words, else from the part of NCCL that prints it (``files``,
    as the catalogue names them); ("", []) for a message of no known site and no telling words."""
    for kind, words, causes in FAMILIES:
        if words.search(message):
            listed = [f"{what} [tells: {tells}]" for what, tells in causes]
            if text := stray_bytes(message):  # printable bytes: no NCCL peer sent them
                listed[0] = f"{causes[0][0]}: its first bytes read {text!r} [tells: {causes[0][1]}]"
            return kind, listed
    for f in files:  # the first file is its site (the one the WARN names, first); others print the same words
        for kind, where, causes in AREAS:
            if where.search(f):
                return kind, [f"{what} [tells: {tells}]" for what, tells in causes]
    if files:
        return "NCCL", [f"{what} [tells: {tells}]" for what, tells in _OTHER]
    return "", []
