"""The messages of NCCL and the programs around it that one pattern each reads, with the kind each
names and whether it is a root cause or a consequence: the table ``nccl.classify`` tries after the
readings that need code (verbs, completions, CUDA errors, sockets). Each pattern is the meaning of
its source's words (the file is named beside it). Data only."""

from __future__ import annotations

import re

from topodoctor.nccl.torch_reasons import HEARTBEAT, TIMEOUT_AT

# Cause kinds, in the order a log's root cause is chosen (earlier wins). Consequences (a peer
# that went away, a flushed work request) come last: they follow whatever failed first.
ROOT = 0
CONSEQUENCE = 1

# One pattern per kind for the rest: (kind, pattern, rank)
SIMPLE: tuple[tuple[str, re.Pattern[str], int], ...] = (
    ("net-plugin", re.compile(r"Failed to initialize any NET plugin|Error: network (?P<net>\S+) not found"), ROOT),
    (
        "socket-ifname",
        re.compile(
            r"no socket interface found|No usable listening interface found"
            r"|Socket creation failed : Address family not supported|no device found (?:matching|after excluding)"
            # transport/net_ib.cc, net_socket.cc: ncclFindInterfaces found none (NCCL_SOCKET_IFNAME, an IB port's IP)
            r"|NET/IB : No IP interface found|NET/Socket : no interface found"
        ),
        ROOT,
    ),
    (
        "duplicate-gpu",
        re.compile(
            # a title cut before the bus id keeps the ranks
            r"Duplicate GPU detected : rank (?P<a>\d+) and rank (?P<b>\d+) both on CUDA device(?: (?P<dev>\w+))?"
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
            r"|Unable to allocate shared memory \(\d+ bytes\) : No space left on device"  # include/shm.h before 2.4
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
            # proxy.cc, enqueue.cc (2.28+): the communicator was aborted or revoked (ncclCommAbort / ncclCommRevoke)
            r"|Comm \S+ is in abort state|: communicator was revoked"
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
    # include/shm.h before 2.4: the segment's allocation failed, with the errno's text (the reason itself)
    ("shm-create", re.compile(r"Unable to allocate shared memory \((?P<size>\d+) bytes\) : (?P<err>[^(\n]+)"), ROOT),
    (
        "collective-mismatch",
        re.compile(
            r"collective mismatch error,? local size (?P<a>\d+) remote(?: size)? (?P<b>\d+)"  # 2.10+; 2.3.7 - 2.9.9
            r"|[Mm]essage truncated : receiv(?:ing|ed) (?P<a2>[\d,]+) bytes instead of (?P<b2>[\d,]+)"
            r"|Mismatched collective detected, please check your collective calls at and around rank (?P<around>\d+)"
            # init.cc's hang check of the same releases: its words name the class, "may be" as they are
            r"|may be caused by a collective mismatch around rank (?P<around2>\d+)"
        ),
        ROOT,
    ),
    (
        "graph-file",
        re.compile(
            # graph/xml.cc: a channel naming a device this job lacks, a file of another NCCL's graph format, no file
            r"XML Import Channel : dev (?P<dev>-?\d+) not found"
            r"|XML Graph has wrong version (?P<version>-?\d+), (?P<needed>\d+) needed"
            r"|Could not open XML graph file (?P<file>\S+)(?: : (?P<err>[^\n]+))?"
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
            # 2.31 says "nor symKernelId available" where a symmetric kernel was possible too
            r"(?i:no algorithm/protocol (?:nor symKernelId )?available)"
            r"(?: for function (?P<func>\w+)(?: with datatype (?P<dtype>\w+))?"
            r"\.?(?: NCCL_ALGO was set to (?P<algo>[^.]+)\.)?(?: NCCL_PROTO was set to (?P<proto>[^.]+)\.)?)?"
            r"|Detected mixed local (?P<what>Net|CollNet) device counts across ranks"
            # init.cc (its own typo "Invalig" in 2.27+), then tuning.cc's NCCL_ALGO/PROTO, topo.cc's FORCE_MERGE
            r"|Invali[dg] config (?P<attr>[\w/]+) attribute value(?: (?P<attr_value>-?\d+))?"
            r'|(?:All entries except the first must have a prefix: |Unrecognized (?P<part>\w+) token "(?P<token>[^"]*)"'
            r' when parsing )"(?P<value>[^"]*)"|(?:TOPO/NET : Could not force merge NICs |TOPO/NET : Only matched \d+ '
            r"devices, \d+ requested from |Specified fused NIC )(?P<fused>\S+?)(?=\.? |\.?$)"
            # bootstrap.cc: NCCL_COMM_ID not <addr>:<port>; the values NCCL refuses by name
            r"|(?P<commid>Invalid NCCL_COMM_ID, please use format)"
            # the address parser under it, which 2.24+'s RAS also runs on NCCL_RAS_ADDR (default localhost:28028)
            r"|(?P<addrstr>Net : No valid (?:<IPv4_or_hostname>:<port>|\[IPv6\]:port) pair found"
            r"|Net : error encountered when getting address info)"
            r"|'?(?P<setting>NCCL_WORK_FIFO_DEPTH|NCCL_IB_SUBNET_PREFIX_LEN)=(?P<set>-?\d+)'? is "
            r"(?:too small|out of range)"
            r"|merge multiple devices together when (?P<setting2>NCCL_IB_MERGE_NICS)=0"
            r'|(?P<setting3>NCCL_NVLS_ENABLE) has been set to "1" and communicator has multiple ranks using the same'
            # transport/net_ib (2.20+): the NICs NCCL is to merge or connect have different link layers (IB / RoCE)
            r"|(?P<layers>Attempted to (?:connect|merge) incompatible devices"
            r"|Remote \S+ device is incompatible with the local"
            r"|Can't (?:connect|merge) net devices with different link_layer"
            r"|merge multiple devices together with different link_layer)"
        ),
        ROOT,
    ),
    # misc/socket.cc: the address NCCL was to connect to is not one (the peer's handle or a local interface)
    ("bad-address", re.compile(r"with family (?P<family>\d+) is neither AF_INET\(\d+\) nor AF_INET6"), ROOT),
    # misc/socket.cc, os/linux.cc: NCCL_COMM_ID names an address no local interface shares a subnet with
    ("subnet", re.compile(r"No interface found in the same subnet as remote address(?: (?P<addr>[^\s,;]+))?"), ROOT),
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
            # libfabric's own lines too, where the plugin's are not pasted ("fi_getinfo: provider efa output empty
            # list", the -FI_ENODATA that follows it)
            r"(?:NET/OFI |(?=fi_getinfo: ))(?P<what>fi_getinfo: (?:provider \w+ output empty list|-\d+ \([^)]*\))"
            r"|OFI fi_getinfo\(\) call failed|Couldn't find any optimal provider"
            r"|Unable to register memory|[\w ]*?fi_\w+ failed|Unable to (?:create|open|allocate|find|get|insert)[^.:]*"
            r"|Creating new endpoint for domain \S+ failed|Failed (?:call )?to (?:post|process)\w*[\w ]*"
            r"|Couldn't [a-z][\w -]*?(?=[.:]|$)"  # its libfabric calls: "Couldn't enable endpoint. RC: -12, ..."
            r"|Request completed with error)"  # a completion queue's error entry (RC: the provider's errno)
            r"(?:[^:]*: (?P<err>.*))?"
        ),
        ROOT,
    ),
    # nccl-rdma-sharp-plugins' sharp_plugin.c: the SHARP (CollNet) plugin's libsharp_coll calls
    (
        "sharp",
        re.compile(
            r"(?P<what>SHARP coll init error|SHARP group create failed|SHARP regmr failed"
            r"|SHARP : unable to allocate request|SHARP allreduce failed)(?:: (?P<err>[^(\n]+?)\((?P<num>-?\d+)\))?"
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
            # the link editor building against NCCL (GNU ld): the libnccl a library needs not found, or no
            # definition of one of its symbols ("undefined reference to `ncclAllReduce'")
            r"|warning: (?P<lib3>libnccl\.so[.\d]*), needed by \S+, not found"
            r"|undefined reference to [`'\"](?P<sym2>nccl\w+)['\"]"
            r"|(?P<lib2>libnccl\.so[.\d]*): version [`'\"](?P<ver>[^'\"`]+)['\"`] not found"
            r"|version [`'\"](?P<ver2>NCCL_[\d.]+)['\"`] not found"
            # XLA's NCCL stub (JAX, TensorFlow): its dlopen of libnccl found none
            r"|(?P<noload>Unable to load NCCL library)"
            # TensorFlow built without NCCL (its Windows and CPU builds): the NCCL ops have no kernel
            r"|(?P<nokernel>No OpKernel was registered to support Op '(?P<op>Nccl\w+)')"
            # dev_runtime.cc, devcomm/ (2.29+): the device API compares the nccl.h built with and the libnccl loaded
            r"|NCCL library (?:version )?is (?:too old|not backwards compatible)\. This application was compiled "
            r"with NCCL version (?P<built>[\w.]*\w), but is running with NCCL library version (?P<runs>[\w.]*\w)"
            r"|(?P<older>The application was compiled with too old version of NCCL)\. It was compiled with NCCL "
            r"version (?P<built2>[\w.]*\w), but is running with NCCL library version (?P<runs2>[\w.]*\w)"
        ),
        ROOT,
    ),
    # init.cc: a rank outside the communicator (ncclInvalidArgument): the launch's world size is off
    ("invalid-rank", re.compile(r"Invalid rank requested(?: : (?P<rank>-?\d+)/(?P<nranks>-?\d+))?"), ROOT),
    # bootstrap.cc's root: the processes that reached it disagree on the communicator's size (2.3 - 2.22 "mismatch
    # in rank count", 2.23+ "mismatch in info": nranks, nroots, iroot), or a rank checked in twice (two processes
    # with one RANK, or two jobs whose ranks reach one root: the same NCCL_COMM_ID or unique id)
    (
        "invalid-rank",
        re.compile(
            r"Bootstrap Root : (?:mismatch in rank count from procs (?P<rootn>-?\d+) : (?P<procn>-?\d+)"
            r"|mismatch in info from procs, nranks (?P<rootn2>-?\d+) vs (?P<procn2>-?\d+)"
            r"|rank (?P<twice>-?\d+) of (?P<nranks>-?\d+) ranks has already checked in)"
        ),
        ROOT,
    ),
    # mnnvl.cc (2.25+), init.cc (2.20 - 2.24, NCCL_MNNVL_ENABLE=1): a multi-node NVLink domain whose fabric memory
    # (IMEX channels, the nvidia-imex daemon) does not work: the allocation of a FABRIC handle failed ("channel
    # configuration") or its export / import did ("IMEX configuration")
    (
        "mnnvl",
        re.compile(
            r"MNNVL \(cliqueSize (?P<clique>\d+)\) is available but not (?:working|supported) on this system"
            r"(?:\. Check the IMEX (?P<imex>channel configuration|configuration))?"
            r"|(?P<forced>MNNVL is not supported on this system)"
        ),
        ROOT,
    ),
    # group.cc, init.cc, enqueue.cc, bootstrap.cc, dev_runtime.cc: the program called NCCL against its API's rules
    # (ncclInvalidUsage / ncclInvalidArgument with NCCL's own words for the rule)
    (
        "invalid-usage",
        re.compile(
            r"(?P<rule>ncclGroupEnd: not in a group call"
            r"|Blocking and nonblocking communicators are not allowed in the same group"
            r"|Attempt to use communicator before the previous operation returned ncclSuccess"
            r"|Trying to (?:send|recv) to self without a matching (?:recv|send)"
            r"|Either none or all communicators in a ncclGroup\(\) can be CUDA graph captured"
            r"|Streams given to a communicator within a NCCL group must either be all uncaptured or all captured"
            r"|(?P<struct>ncclConfig_t|ncclSimInfo_t|ncclDevCommRequirements_t|ncclCommProperties_t) argument "
            r"(?:must be )?(?:not )?initialized via (?P<init>NCCL_\w+_INITIALIZER)"
            r"|(?P<fp8>FP8 reduction support begins with sm90 capable devices)"
            r"|Data type supplied to user-created ncclRedOp_t does not match"
            r"|ncclRedOpDestroy : +(?:operator is garbage|invalid communicator passed|operator is a NCCL builtin"
            r"|operator unknown to this communicator)"
            r"|Invalid device (?P<dev>-?\d+) \(totalnDev=(?P<ndev>\d+)\)|invalid device count \(-?\d+\) requested"
            r"|improper usage of ncclCommInitRank: nId = -?\d+, nranks=-?\d+"
            r"|(?P<commid>ncclCommGetUniqueId should not be called when NCCL_COMM_ID is set))"
        ),
        ROOT,
    ),
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
    # net_ib's async thread (2.23+): a fatal event of the RDMA device, a completion queue or a queue pair, which
    # fails the communicator on its next network call (NCCL_IB_RETURN_ASYNC_EVENTS); SRQ events it ignores
    (
        "ib-async-fatal",
        re.compile(  # libibverbs' words for an event: lower case but "CQ error"
            r"NET/IB ?: (?P<dev>[\w.-]+):(?P<port>\d+) async fatal event(?: on (?P<on>QP|CQ)\b[^:]*)?: "
            r"(?P<what>CQ error|[a-z ]*[a-z])\b"
        ),
        ROOT,
    ),
    # NVSHMEM's IBGDA transport (beside NCCL in DeepEP's processes): a device it cannot drive, skipped
    ("nvshmem-not-mlx5", re.compile(r"device (?P<dev>[\w.-]+) is not enumerated as an mlx5 device"), ROOT),
    # misc/strongstream.cc: a CUDA graph capture this driver or NCCL build cannot do
    ("graph-capture", re.compile(r"NCCL cannot be captured in a graph"), ROOT),
    # misc/nvmlwrap.cc: NVML, which NCCL asks for the topology, failed
    # misc/nvmlwrap.cc (2.3 - 2.29), os/linux.cc (2.30, with dlerror): the dlopen of NVML's library itself failed
    (
        "nvml",
        re.compile(
            r"(?P<call>nvml\w+)\(\d*\) failed: (?P<err>[^.\n]+)"
            r"|Failed to open (?P<lib>libnvidia-ml\.so(?:\.1|\[\.1\])?)(?:: (?P<dlerr>[^\n]+))?"
        ),
        ROOT,
    ),
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
