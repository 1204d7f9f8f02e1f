"""The table of known bugs of NCCL releases (``KNOWN_BUGS``): for each, the versions that have it, the message it
logs, the release that fixed it, where that is said (NCCL's release notes, the commit of the release tag, the
issue thread where a maintainer settled it), the workaround where one is known, and what tells it from the other
causes of its message. Data only; ``nccl.known_bugs`` matches it against a log."""

from __future__ import annotations

import re
from dataclasses import dataclass

Version = tuple[int, int, int]


@dataclass(frozen=True)
class KnownBug:
    """One bug: ``first`` .. ``last`` (inclusive) print ``symptom`` (read in a message, and in
    ``source`` when that is not "": the file NCCL names); ``fixed_in`` is the first good release."""

    name: str
    first: Version
    last: Version
    symptom: re.Pattern[str]
    source: str  # the NCCL file that prints it ("" for any)
    fixed_in: str
    what: str  # the bug, in a few words
    reference: str  # release notes or the thread
    workaround: str = ""
    platform: str = ""  # where the bug shows (GPUs, fabric): said with the finding
    alone: bool = False  # the message alone shows the run fails on it (no failure need follow in the log)
    weak: re.Pattern[str] | None = None  # a message that shows it only when no other cause is found (a fallback)
    generic: bool = False  # the symptom is a message many causes print: the bug is then a candidate, not the cause
    # the other causes of the symptom where it is generic (the site's, the maintainers'); a weak symptom always is
    others: tuple[str, ...] = ()
    tells: str = ""  # what tells the bug from the others (the fixed release, a line of the log)
    lines: tuple[str, ...] = ()  # the lines of ``source`` that print it, where the file prints it elsewhere too
    settings: tuple[str, ...] = ()  # variables whose setting, shown in the log, makes the bug's own message generic
    # (file, line or "*", releases): where only the bug's releases print the symptom, so a WARN's file:line (NCCL's
    # WARN prints the site's __FILE__:__LINE__), or its words alone ("*"), name the release of a log without a banner
    sites: tuple[tuple[str, str, str], ...] = ()
    # the bug is the first candidate of its own message in a log that names no version and no site of it
    unversioned: bool = False
    # the lines at which the bug's releases print the symptom, shared with releases without the bug: a WARN at one
    # of them keeps the bug a candidate of a log without a version (another line rules it out)
    printed_at: tuple[str, ...] = ()
    # the GPUs on which every run of the bug's releases fails: a log that names one (nccl-tests' device list, torch)
    # under such a release shows the bug without its message (a post cut before the error, a title)
    gpus: re.Pattern[str] | None = None
    # the consumer GPUs a generic bug needs (its platform; the log's ``gpu_names``): a log that names none of them
    # does not show the bug, whose message the site's other causes print on any GPU
    needs: re.Pattern[str] | None = None
    # the nccl-tests run that shows a bug of some ops and sizes only: (its op, the least size in bytes, the least GPUs
    # per process); a log of another run, or of none, does not show it
    run: tuple[str, int, int] | None = None
    # the symptom is too common (a hang, a timeout) to list the bug as a candidate of a log that names no version
    versioned: bool = False


# the INFO line that shows a bug (enqueue.cc, 2.25+): the kernels ask more shared memory than the GPU has
INFO_SIGN = "exceeds device/fn maxSharedMem"

KNOWN_BUGS = (
    KnownBug(
        "nccl-1",
        (1, 0, 0),
        (1, 99, 99),
        re.compile(""),
        "",
        "NCCL 2",
        "NCCL 1.x is the single-process library NCCL 2 replaced in 2017, for the GPUs of one node only (ranks across "
        "nodes came with NCCL 2); its failures are not fixed any more",
        "NVIDIA/nccl-tests#5 (settled by updating NCCL 1.0 to NCCL 2)",
        generic=True,
        others=("the failure's own cause, which the message names whatever the release (see the next finding)",),
        tells="the same program built against NCCL 2: a failure that stays is the message's own cause",
        # NCCL 1.x's WARN names src/core.cu (its one library file); NCCL 2 has none of that name
        sites=(("core.cu", "*", "1.x"),),
    ),
    KnownBug(
        "blackwell-shared-memory-size",
        (2, 25, 0),
        (2, 26, 1),
        re.compile(re.escape(INFO_SIGN)),
        "",
        "2.26.2",
        "the kernels ask more shared memory than the GPU has (sm_120), so they cannot run",
        "NVIDIA/nccl-tests#287 (the maintainers: 2.25.1 cannot work on RTX 5090; 2.26.2 works); 2.26.2-1 release "
        "notes: shared memory usage fixed on recent Blackwell GPUs",
        platform="Blackwell GPUs (RTX 50xx, RTX PRO 6000: sm_120)",
        alone=True,
    ),
    KnownBug(
        "shm-eintr",
        (2, 0, 0),
        (2, 3, 7),
        re.compile(r"Unable to allocate shared memory \(\d+ bytes\) : Interrupted system call"),
        "",
        "2.4.2",
        "a signal that interrupted the shared-memory segment's allocation (posix_fallocate, EINTR) failed the "
        "communicator's init: the call was not retried",
        "NVIDIA/nccl pull 152 'Rework shared memory code to use SYSCHECK macros' (retries EINTR and EAGAIN; fixes "
        "NVIDIA/nccl#137); 2.4.2-1's src/include/shm.h is the reworked code, 2.3.7-1's still prints these words",
        "NCCL_SHM_DISABLE=1 (no shared-memory transport)",
        alone=True,
        # the words: only the releases before the rework print them (2.4.2 and later say "Call to posix_fallocate")
        sites=(("", "*", "2.3.7 and earlier"),),
    ),
    KnownBug(
        "all-gather-above-4g",
        (2, 3, 0),
        (2, 6, 3),
        re.compile(r"Out of bounds values : [1-9]"),  # nccl-tests' check of the results
        "",
        "2.6.4",
        "all_gather above 4 GiB with several GPUs per process: the direct primitives' offsets were 32-bit, so the "
        "data landed in the wrong place",
        "NVIDIA/nccl commit c38f174b 'Fix Allgather operations above 4G with multiple GPUs per process' (fixes "
        "NVIDIA/nccl-tests#37), first in 2.6.4-1",
        "one GPU per process (nccl-tests `-g 1` with one rank per GPU), or all_gathers below 4 GiB",
        alone=True,
        run=("all_gather", 1 << 32, 2),
    ),
    KnownBug(
        "ll-cleanup-hang",
        (2, 4, 0),
        (2, 4, 5),
        # no message of its own: a hang the post says, or a watchdog's timeout, which many causes make (generic)
        re.compile(r"(?i)\b(?:hangs?|hanging|hung|stuck|deadlock\w*|freez\w+|timed? ?out)\b"),
        "",
        "2.4.6",
        "the LL protocol's buffer cleanup could hang long-running jobs",
        "NCCL 2.4.6-1 release notes: 'Fix LL cleanup hang during long running DL jobs'; NVIDIA/nccl#238 (hangs of "
        "2.4.2 across nodes, worked around with NCCL_LL_THRESHOLD=0)",
        "NCCL_LL_THRESHOLD=0 (no LL protocol)",
        generic=True,
        versioned=True,
        others=(
            "the hang's other causes, which any release shows (a rank that never joined, the network, PCIe P2P: see "
            "the hang's own finding)",
        ),
        tells="the same job with NCCL_LL_THRESHOLD=0, or on NCCL 2.4.6 or later: a hang that stays is not the bug",
    ),
    KnownBug(
        "proxy-error-as-internal",
        (2, 18, 0),
        (2, 18, 6),
        re.compile(r"(?!)"),  # the sign is weak: 2.18 says "internal error" for the proxy's failure, whatever it was
        "",
        "2.19.1",
        "a failure of NCCL's proxy thread (a /dev/shm segment, a socket, a registration) comes back as 'internal "
        "error': the main thread read the proxy's closed socket, not the proxy's result",
        "NCCL's source: in 2.18 proxy.cc's ncclPollProxyResponse returns ncclInternalError when the proxy's "
        "socket closes ('Socket recv failed while polling'); 2.19.1-1 returns the proxy's own result",
        "rerun with NCCL_DEBUG=WARN: the proxy's own WARN before 'Socket recv failed while polling' names the error",
        weak=re.compile(r"internal error", re.I),
        others=(
            "a real internal error: NCCL's own consistency check failed (a bug of the release, or the program using "
            "NCCL out of its contract)",
            "a mix of NCCL builds in one job (a framework's bundled NCCL beside the system's, ranks on different "
            "releases)",
        ),
        tells="NCCL 2.19.1 or later returns the proxy's own result (a system or remote error, not an internal one); "
        "under 2.18 NCCL_DEBUG=WARN shows the proxy's WARN before 'Socket recv failed while polling'",
    ),
    KnownBug(
        "connector-copy-before-sync",
        (2, 18, 0),
        (2, 18, 5),
        re.compile(r"Cuda failure (?:\d+ )?'invalid argument'"),
        "transport.cc",
        "2.18.6",
        "connecting a channel copied a connector to a device address read by a copy that had not completed yet, so "
        "CUDA refused the address",
        "NCCL's git log: 'Fix cudaMemcpyAsync bug' (4365458, fixes NVIDIA/nccl#957) in 2.18.6-1, the second "
        "cudaMemcpyAsync of transport.cc (lines 154 and 174 in 2.18.1 - 2.18.5) used the first one's result without "
        "a sync; NVIDIA/nccl#1024 (the maintainers: the bug fixed in 2.18.6)",
        lines=("154", "174"),
    ),
    KnownBug(
        "ring-loop-back-pci-speed",
        (2, 19, 0),
        (2, 19, 3),
        re.compile(r"ring \d+ does not loop back to start"),
        "",
        "2.19.4",
        "the topology read uninitialised PCI link speeds where sysfs gives none, so ranks computed different rings",
        "NVIDIA/nccl#1020 (the maintainers: fixed in 2.20); NCCL 2.19.4-1 release notes: topology detection made "
        "deterministic when PCI speeds are not available",
        "NCCL_TOPO_FILE with a topology dumped on one node (NCCL_TOPO_DUMP_FILE) gives every rank the same view",
    ),
    KnownBug(
        "pci-sort-nic-without-busid",
        (2, 18, 5),
        (2, 20, 2),
        re.compile(r"Attribute busid of node nic not found"),
        "",
        "2.20.3",
        "the topology's sort of PCI devices by bus id read a bus id from every device under the CPU, and a NIC "
        "that has none (a virtual or non-PCI NIC) failed it as an internal error",
        "NCCL's source: 2.18.5-1 keeps PCI devices ordered by bus id (graph/xml.cc, issue #820) with "
        "xmlGetAttrStr on each sibling, which fails on a node without one; 2.20.3-1 reads it with xmlGetAttr and "
        "skips those",
        "NCCL_TOPO_FILE with a topology whose NICs sit under a PCI node, or leave the NIC without a PCI path out "
        "(NCCL_SOCKET_IFNAME / NCCL_IB_HCA)",
        others=("a topology file (NCCL_TOPO_FILE) whose nic node has no busid attribute",),
        tells="the NCCL version banner (2.20.3 fixed it) and NCCL_TOPO_FILE; at INFO a NIC NCCL found outside PCI "
        "('network path ... is not a PCI device (usb)', a virtual NIC) is the bug's trigger",
        settings=("NCCL_TOPO_FILE",),
        unversioned=True,
        printed_at=("85",),  # graph/xml.h:85 in 2.16.2 - 2.20.5 (the bug's releases among them), :101 from 2.21.5
    ),
    KnownBug(
        "vm-nvswitch-unseen",
        (2, 6, 0),
        (2, 7, 5),
        # the NVLink's remote end as NVML reports an NVSwitch the VM does not show: bus id fffffff:ffff:ff
        re.compile(r"Could not find real path of /sys/class/pci_bus/f{7}/\.\./\.\./f{7}:f{4}"),
        "graph/xml.cc",
        "2.7.6",
        "inside a VM that does not show the NVSwitches, the topology's reader looked up the NVLinks' remote end "
        "(bus id fffffff:ffff:ff) in /sys and failed",
        "NCCL 2.7.6-1 release notes: 'Fix crash when NVswitch is not visible inside a VM' (src/graph/xml.cc: a "
        "remote NVLink device not visible inside the VM is taken as an NVSwitch)",
        platform="VMs with NVSwitch GPUs whose switches are not passed through (A100 cloud instances)",
    ),
    KnownBug(
        "blackwell-sm120-2.25",
        (2, 25, 0),
        (2, 26, 1),
        re.compile(r"(?!)"),  # no message of its own: the GPU and the release show it
        "",
        "2.26.2",
        "NCCL 2.25 has no working kernels for these GPUs (sm_120): its kernels ask more shared memory than they have",
        "NVIDIA/nccl-tests#287 (the maintainers: 2.25.1 cannot work on RTX 5090; 2.26.2 works); 2.26.2-1 release "
        "notes: shared memory usage fixed on recent Blackwell GPUs",
        platform="Blackwell workstation GPUs (RTX 50xx, RTX PRO 6000: sm_120)",
        alone=True,
        gpus=re.compile(r"RTX 50[6-9]0|RTX PRO \d000 Blackwell|RTX PRO 6000", re.I),
    ),
    KnownBug(
        "blackwell-shared-memory",
        (2, 25, 0),
        (2, 26, 1),
        re.compile(r"Cuda failure (?:\d+ )?'invalid argument'|CUDA error \d+ 'invalid argument'", re.I),
        "enqueue.cc",
        "2.26.2",
        "the kernels' shared-memory size was wrong for recent Blackwell GPUs, so setting it or launching failed",
        "NCCL 2.26.2-1 release notes: shared memory usage fixed on recent Blackwell GPUs (NVIDIA/nccl-tests#287, "
        "#291, NVIDIA/nccl#1637)",
        platform="Blackwell GPUs (B200, GB200, RTX 50xx / RTX PRO 6000)",
        generic=True,
        others=(
            "the launch's own arguments: a kernel NCCL built for another architecture, or two NCCL builds in one "
            "process",
        ),
        tells="the GPU (the bug needs a Blackwell GPU) and NCCL 2.26.2, which fixed it: a failure that stays there is "
        "not the bug",
    ),
    KnownBug(
        "kernel-launch-invalid-argument-2.25.1",
        (2, 25, 0),
        (2, 25, 1),
        # CUCHECK's form (the driver call's number before its words): CUDACHECK prints no number
        re.compile(r"Cuda failure \d+ 'invalid argument'"),
        "enqueue.cc",
        "2.26.2",
        "the launch of NCCL's kernels (cuLaunchKernelEx with the attributes 2.25.1 sets: the kernel's shared memory, "
        "the launch's cluster and memory-sync domain) refused with 'invalid argument'",
        "NCCL's source: enqueue.cc:1500 is the CUCHECK of cuLaunchKernelEx in 2.25.1-1 alone (at 2.26.2 that line "
        "holds other code; 2.28.7 - 2.28.9 have a CUDACHECK there, which prints no error number); NCCL 2.26.2-1 "
        "release notes (shared memory usage on recent GPUs, kernel launch fixes)",
        others=(
            "a kernel of the program that faulted before (CUDA errors are sticky): CUDA_LAUNCH_BLOCKING=1 shows the "
            "first",
            "an NCCL built without code for this GPU's architecture, or two NCCL builds in one process",
        ),
        tells="NCCL 2.26.2 or later: a launch that still fails there is not the bug",
        sites=(("enqueue.cc", "1500", "2.25.1"),),
    ),
    KnownBug(
        "nic-fusion-path",
        (2, 25, 0),
        (2, 26, 6),
        re.compile(r"Could not find NET with id \S+"),
        "",
        "2.27.3",
        "NIC fusion merged the NICs so that the topology search found no path, and its fallback named a NIC "
        "that no longer existed",
        "NVIDIA/nccl#1748 (works with NCCL 2.27); NCCL 2.26.2-1 release notes: NIC fusion auto-merge failures "
        "made non-fatal",
        "NCCL_NET_MERGE_LEVEL=LOC turns NIC fusion off (it did not help every reporter: upgrading did)",
        weak=re.compile(r"Could not find a path for pattern \d+"),
        others=(
            "ranks that see different systems (different NICs, GPUs or settings such as NCCL_TOPO_FILE), so the "
            "topology search finds no common pattern",
            "ranks on different NCCL versions",
        ),
        tells="NCCL_NET_MERGE_LEVEL=LOC (NIC fusion off) or NCCL 2.27.3: a failure that stays is not the bug",
        settings=("NCCL_GRAPH_FILE", "NCCL_TOPO_FILE"),  # a file naming a NIC the node lacks prints the same id
        # ncclTopoIdToNetDev's WARN at the release tags: topo.h:221 (2.21.5 - 2.22.3), :222, :226, :230 (2.25.1),
        # :234 (2.26.2 - 2.26.6), :248 (2.27.3) and later lines; only 2.25 - 2.26 print it at :230 and :234
        sites=(("graph/topo.h", "230", "2.25.1"), ("graph/topo.h", "234", "2.26.2 - 2.26.6")),
        # the maintainers (NVIDIA/nccl#1748): the tree search's fallback names NET id 0, which NIC fusion leaves
        # without a NIC; reported on 2.25 - 2.26, settled by 2.27
        unversioned=True,
    ),
    KnownBug(
        "cuda-graph-capture-old-driver",
        (2, 9, 6),
        (2, 9, 8),
        re.compile(r"API call is not supported in the installed CUDA driver"),
        "enqueue.cc",
        "2.9.9",
        "every collective's check for CUDA graph capture (cudaStreamGetCaptureInfo_v2, CUDA 11.3's call) failed on "
        "drivers older than R465, which CUDA's enhanced compatibility otherwise lets an 11.x build run on",
        "NCCL 2.9.9-1: enqueue.cc's ncclGetCudaGraph asks cudaStreamIsCapturing instead below driver 11.3 (the "
        "CUDACHECK of cudaStreamGetCaptureInfo_v2 sits at enqueue.cc:802 in 2.9.6-1 and 2.9.8-1)",
        "a driver of R465 or later, or NCCL built against CUDA 11.2",
        others=("a CUDA runtime newer than the driver supports (the driver older than the build needs)",),
        tells="`cudaDriverVersion` in the INFO lines against the build's `+cudaX.Y`: NCCL 2.9.9 with that driver",
        sites=(("enqueue.cc", "802", "2.9.6 - 2.9.8"),),
    ),
    KnownBug(
        "nic-fusion-merge-fatal",
        (2, 24, 0),
        (2, 26, 1),
        re.compile(r"Tried merging multiple devices together and failed\. Try setting NCCL_NET_MERGE_LEVEL=LOC"),
        "graph/topo.cc",
        "2.26.2",
        "NIC fusion's automatic merge stopped init where the network plugin refused to fuse NICs (IB beside RoCE)",
        "NCCL 2.26.2-1 release notes: auto-merge failures of NIC fusion made non-fatal (merging IB and RoCE "
        "devices); graph/topo.cc ncclTopoMakeVnic returns the plugin's ncclInvalidUsage in 2.24.3 - 2.25.1",
        "NCCL_NET_MERGE_LEVEL=LOC turns NIC fusion off (the message's own advice)",
        others=("NCCL_NET_FORCE_MERGE naming NICs the plugin cannot fuse",),
        tells="NCCL_NET_FORCE_MERGE in the log's `set by environment` lines: a forced group is the setting's",
        settings=("NCCL_NET_FORCE_MERGE",),
        sites=(("", "*", "2.24.3 - 2.25.1"),),  # these words are a WARN of those releases alone (2.26.2: an INFO)
    ),
    KnownBug(
        "illegal-address-large-collectives",
        (2, 26, 2),
        (2, 26, 2),
        re.compile(r"illegal memory access", re.I),
        "",
        "a later release (2.31.2 tested good)",
        "collectives of 512 KiB and more faulted between two GPUs without NVLink on a Blackwell workstation",
        "NVIDIA/nccl#2418",
        "NCCL_PROTO=Simple or NCCL_P2P_DISABLE=1 narrows it down until NCCL is upgraded",
        platform="Blackwell workstation GPUs (RTX 50xx, RTX PRO 6000) over PCIe",
        generic=True,
        others=(
            "a kernel of the program that faulted earlier (CUDA reports it at NCCL's next call: CUDA_LAUNCH_BLOCKING=1 "
            "shows the kernel)",
            "a buffer freed or reused while NCCL still worked on it (user buffer registration, a CUDA graph)",
        ),
        tells="the GPU (the bug needs Blackwell workstation GPUs over PCIe), NCCL_PROTO=Simple making it go away, and "
        "an upgrade: a fault that stays is not the bug",
        # the CUCHECK of cuLaunchKernelEx sits at enqueue.cc:1556 in 2.26.2-1 alone (2.26.3 has other code there):
        # a fault reported by the kernels' launch there names the release of a log without a banner
        sites=(("enqueue.cc", "1556", "2.26.2"),),
        needs=re.compile(r"RTX 50[6-9]0|RTX PRO \d000", re.I),
    ),
    KnownBug(
        "uds-name-split-communicators",
        (2, 20, 0),
        (2, 20, 4),
        re.compile(r"UDS: Binding to socket \S+ failed : Address already in use"),
        "misc/ipcsocket.cc",
        "2.20.5",
        "2.20.3's proxy named its UDS socket (the cuMem handles' channel, made for every communicator) by the rank "
        "and the process's hash alone, so two communicators of one process with a rank in common (ncclCommSplit) "
        "bound the same name",
        "NCCL 2.20.5-1 release notes: UDS connection failure when using ncclCommSplit fixed (Issue #1185); proxy.cc "
        "2.20.5 names the socket from a random per-communicator address instead of the pidHash",
        others=("two processes with the same host and PID hash: containers sharing one network namespace",),
        tells="the release (2.20.3 only) and a second communicator of the process (a split, a new process group)",
        unversioned=True,
        printed_at=("57",),  # misc/ipcsocket.cc:57 in 2.18.1 - 2.22.3, :58 from 2.23.4
    ),
    KnownBug(
        "roce-gid-type-unmapped-in-container",
        (2, 23, 4),
        (2, 26, 1),
        re.compile(r"read failed in ncclIbRoceGetVersionNum: Invalid argument", re.I),
        "",
        "2.26.2",
        "the GID index search read each candidate's RoCE type from sysfs and gave up on EINVAL, which a container "
        "returns for a GID index not mapped into its sysfs, instead of moving on to the next index",
        "NCCL 2.26.2-1 release notes: GID index detection made more resilient (it gave up too soon when the detected "
        "index was not mapped to the container's sysfs; issues #1538, #1573); net_ib.cc ncclIbRoceGetVersionNum "
        "returns success on EINVAL from 2.26.2",
        "NCCL_IB_GID_INDEX set to an index the container maps (the RoCE v2 index of the pod's address, "
        "`show_gids` in the pod) skips the search",
        platform="RoCE NICs inside containers (Kubernetes pods, SR-IOV)",
        alone=True,
        # the words with EINVAL are printed by 2.23.4 - 2.26.1 alone: from 2.26.2 EINVAL is skipped in silence
        sites=(("", "*", "2.23.4 - 2.26.1"),),
        unversioned=True,
    ),
)
