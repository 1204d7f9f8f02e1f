"""The findings ``topodoctor diagnose`` gives on a user's evidence (TD021 - TD039, TD970 - TD997): each code's name,
severity, title and documentation. Data only: the rules registry lists them, the judge uses them."""

from __future__ import annotations

from dataclasses import dataclass

from topodoctor.model.findings import Severity


@dataclass(frozen=True)
class DiagnosisCode:
    """One diagnosis: its code, name, severity (``also``: the others it may raise) and its documentation."""

    code: str
    name: str
    severity: Severity
    title: str
    why: str
    how: str
    also: tuple[Severity, ...] = ()

    @property
    def doc(self) -> str:
        """As a rule's docstring: the title, then the sections the registry reads."""
        return f"{self.title}\n\nWhy it matters: {self.why}\n\nHow to fix: {self.how}\n"


CODES: tuple[DiagnosisCode, ...] = (
    DiagnosisCode(
        "TD021", "diag-normal", "info",
        "The figures are what this hardware gives: nothing is wrong with the run.",
        "Half of the slow runs people ask about are not slow: 0 nvls channels on a GPU without NVLink SHARP, "
        "about 360 GB/s all_reduce busbw on eight H100 or H200 behind NVSwitch, under 30 GB/s on PCIe GPUs, "
        "NCCL's socket network on one node whose channels all go through P2P. The finding states the figure "
        "expected and its basis.",
        "Nothing to fix. To go faster, change the hardware or the GPUs chosen (NVLink-connected pairs, GPUs under "
        "one PCIe switch, a faster network).",
    ),
    DiagnosisCode(
        "TD022", "diag-cause-not-found", "warning",
        "A run is short of what this hardware gives, and the evidence does not say why.",
        "A confident wrong cause costs more than none: the finding names the candidates the evidence could not "
        "tell apart and the output that would.",
        "Post the outputs the finding names (NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=INIT,GRAPH,ENV, "
        "`nvidia-smi topo -m`, `nvidia-smi -q`) and run `topodoctor diagnose` again with them.",
        also=("info",),
    ),
    DiagnosisCode(
        "TD023", "diag-p2p-variable", "error",
        "A variable turned NCCL's P2P off or limited it, and the traffic went through host memory.",
        "NCCL_P2P_DISABLE=1, or NCCL_P2P_LEVEL below the pair's path (LOC, or PIX on GPUs joined by NVLink "
        "through a bridge), sends what NVLink or PCIe peer copies would carry through SHM: a tenth of NVLink.",
        "Unset NCCL_P2P_DISABLE and NCCL_P2P_LEVEL (NCCL picks P2P wherever the path allows); where they were "
        "set to avoid a hang, fix what hung (ACS, IOMMU) instead.",
    ),
    DiagnosisCode(
        "TD024", "diag-transport-fallback", "error",
        "NCCL carried traffic through SHM or the network between GPUs it would join by P2P.",
        "With no variable asking for it, the ranks could not open each other's memory: separate containers "
        "without a shared IPC namespace, P2P not supported by the driver, NCCL_HOSTID set apart. It costs "
        "most of the bandwidth NVLink or PCIe peer copies give.",
        "Run the ranks in one container, or with --ipc=host (and --pid=host) on every container of the node; "
        "check `nvidia-smi topo -p2p r` for the pair; unset NCCL_HOSTID.",
    ),
    DiagnosisCode(
        "TD025", "diag-socket-not-ib", "error",
        "NCCL ran between nodes over its TCP socket transport.",
        "Where the nodes have RDMA NICs NCCL did not use, TCP sockets carry a few GB/s where InfiniBand or RoCE "
        "carry 25-50 per NIC: NCCL falls back to sockets when libibverbs cannot be loaded, when the container has "
        "no /dev/infiniband, or when NCCL_IB_DISABLE=1. Where the network is TCP alone, the socket transport is "
        "the ceiling: each connection's data is split evenly over its TCP streams, so the slowest stream's rate "
        "times the streams is what NCCL gets, whatever the streams' sum an iperf run reports.",
        "The finding's fix follows the network the evidence shows. RDMA NICs listed: rdma-core / libibverbs in the "
        "image, --device=/dev/infiniband (and --cap-add=IPC_LOCK) on the container, NCCL_IB_DISABLE unset, "
        "NCCL_IB_HCA naming the NICs; NCCL then logs `NET/IB : Using`. TCP only: one stream's rate (`iperf3 -P N`) "
        "and NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD (at most 16 threads, 64 sockets). Not shown: post "
        "`ibv_devinfo` of a node.",
        also=("warning",),  # a TCP-only network, or one whose NICs are not shown: the fix depends on which
    ),
    DiagnosisCode(
        "TD026", "diag-gdr-off", "warning",
        "GPUDirect RDMA is off, or on for only one side, between nodes.",
        "Without GPUDirect RDMA every network transfer is staged through host memory: a multi-node all_reduce "
        "loses most of the NICs' rate. One host without it slows every ring that crosses it.",
        "Load nvidia_peermem (or use DMA-BUF, NCCL 2.19+ with a 5.12+ kernel) on the host the finding names; "
        "check NCCL_NET_GDR_LEVEL; place the NIC under the GPU's PCIe switch.",
    ),
    DiagnosisCode(
        "TD027", "diag-across-sockets", "info",
        "The GPUs' traffic crosses the CPU sockets' interconnect (SYS).",
        "A pair that topo -m shows as SYS has no peer path NCCL uses by default: its traffic goes through host "
        "memory over the inter-socket link, at a fraction of a PCIe switch's rate.",
        "Choose GPUs under one socket (CUDA_VISIBLE_DEVICES by topo -m's NUMA affinity), or accept the figure: it "
        "is what the host gives across sockets.",
        also=("warning",),  # where P2P was pushed across the sockets (NCCL_P2P_LEVEL=SYS)
    ),
    DiagnosisCode(
        "TD028", "diag-vm-flat-topology", "warning",
        "Inside a VM every GPU pair shows as PHB: the PCIe switches the GPUs share are hidden.",
        "A hypervisor that passes GPUs through without their PCIe tree shows NCCL a flat topology: NCCL then "
        "sees no peer path and uses SHM, though the GPUs sit under one switch.",
        "Give NCCL the real topology: NCCL_TOPO_FILE with the XML of the host (the cloud's published file, or "
        "NCCL_TOPO_DUMP_FILE on the bare-metal host); or ask the provider for a VM that shows the switches.",
    ),
    DiagnosisCode(
        "TD029", "diag-acs-iommu", "error",
        "Peer copies are slower than copies staged through the host: ACS or the IOMMU redirects them.",
        "With ACS request redirection on the PCIe switches (or the IOMMU translating peer traffic) every peer "
        "write goes up to the root complex and back: P2P then runs below the staged rate, and NCCL can hang.",
        "Disable ACS on the switches the GPUs share (`setpci` on each bridge, or the BIOS), or run the IOMMU in "
        "passthrough (iommu=pt); NCCL_P2P_DISABLE=1 is only a workaround.",
    ),
    DiagnosisCode(
        "TD030", "diag-pcie-downtrained", "error",
        "A GPU's PCIe link trained below what it and its slot can do.",
        "A link at x8 or Gen3 halves or quarters every host copy and every PCIe peer path through it.",
        "Reseat the card or riser, check the slot's BIOS setting; an idle GPU drops its generation to save "
        "power, so judge the width, or the generation under load.",
    ),
    DiagnosisCode(
        "TD031", "diag-nvlinks-missing", "error",
        "Fewer NVLinks are up than this GPU model has.",
        "Each missing link takes its share of the bandwidth NCCL's rings get (H100 SXM: 1/18 per link); a pair "
        "shown as NV12 where the model has 18 lost a third.",
        "Run `nvidia-smi nvlink -s` and `-e` on the host; check the fabric manager and the NVSwitch state; a "
        "link down on a baseboard needs the vendor.",
        also=("warning",),  # a PCIe path between NVSwitch GPUs without a figure, or in the reporter's words
    ),
    DiagnosisCode(
        "TD032", "diag-ring-crosses-pcie", "info",
        "Only some GPU pairs are NVLinked: a ring over all the GPUs must cross PCIe.",
        "NVLink bridges join pairs (or quads) of cards; a collective over more GPUs runs at the PCIe hop's rate, "
        "whatever the bridges carry.",
        "Run the job's tensor-parallel groups within the bridged pairs, or accept the PCIe figure: it is what "
        "these GPUs give together.",
        also=("warning",),  # the topology shown without a figure: where to place a job is the question
    ),
    DiagnosisCode(
        "TD033", "diag-no-p2p-gpus", "warning",
        "These GPUs have no peer-to-peer path: NCCL stages every transfer through host memory.",
        "GeForce cards (RTX 3090 without its bridge, 4090, 5090) are not allowed peer access over PCIe by the "
        "driver, and some chipsets refuse it (topo -p2p: CNS); NCCL uses SHM, bounded by each GPU's PCIe link and "
        "the host's memory.",
        "Nothing NCCL can change: that is what these GPUs give. For faster collectives use GPUs with NVLink or "
        "PCIe peer access.",
        also=("info",),  # beside a shortfall it does not explain: said, not blamed
    ),
    DiagnosisCode(
        "TD034", "diag-container-split", "error",
        "The ranks of one node run in containers that each see one GPU, so NCCL cannot join them by P2P.",
        "A container started with one GPU (--gpus device=N) shows it as CUDA device 0 and hides its peers: "
        "NCCL connects the ranks through SHM or the network instead of NVLink.",
        "Start one container per node with all its GPUs (--gpus all) and one rank per GPU inside, or share the "
        "IPC and PID namespaces between the containers (--ipc=host --pid=host).",
    ),
    DiagnosisCode(
        "TD035", "diag-fewer-nics", "warning",
        "NCCL used fewer of the node's RDMA NICs than it has.",
        "Each NIC carries its share of a node's traffic; NCCL_IB_HCA naming one of four caps the run at a quarter.",
        "List every NIC in NCCL_IB_HCA (or unset it: NCCL uses every active HCA), and check the ports are up "
        "(`ibstat`).",
    ),
    DiagnosisCode(
        "TD036", "diag-nccl-setting", "error",
        "A setting caps NCCL: channels, protocol, algorithm, threads or buffers.",
        "NCCL_MAX_NCHANNELS, NCCL_PROTO, NCCL_ALGO, NCCL_NTHREADS and NCCL_BUFFSIZE below their defaults hold "
        "NCCL under what the links carry (one channel: a twentieth of NVSwitch).",
        "Unset the variable unless it is there on purpose: NCCL picks channels, protocol and algorithm from "
        "the topology and the size.",
        also=("info", "warning"),  # no figure shows it did harm: said (a cap, a buffer), or warned (a protocol)
    ),
    DiagnosisCode(
        "TD037", "diag-nccl-regression", "warning",
        "The NCCL version has a known performance regression on this kind of host.",
        "Some releases were slower than their neighbours on some hardware; the table (diagnosis/"
        "perf_regressions.py) names each with the thread that showed it.",
        "Run the same test with the release the finding names as unaffected, and report the difference.",
    ),
    DiagnosisCode(
        "TD038", "diag-common-node", "error",
        "In a sweep of node pairs, every slow pair has one node in common.",
        "A node with a bad NIC, cable or switch port slows every pair it joins; the others pass.",
        "Drain the node and check its NICs (`ibstat`, port counters, cables); run the pair sweep again without it.",
    ),
    DiagnosisCode(
        "TD039", "diag-one-gpu-slow", "warning",
        "One GPU's copies (or one rank) are much slower than the others': something else runs on it.",
        "A foreign process or GEMM on one GPU time-slices it; every collective waits for the slowest rank.",
        "Look at `nvidia-smi` on that GPU during the run (processes, utilisation, clocks event reasons) and "
        "stop what else runs there.",
    ),
    DiagnosisCode(
        "TD986", "diag-host-candidates", "warning",
        "The run is said to be slow on a kind of host known for some causes, and nothing shown decides which.",
        "An AMD EPYC host (the IOMMU, ACS, the NPS setting), a virtual machine (ATS and ACS, a flat PCI tree, "
        "GPUDirect RDMA in the guest), a bonded RoCE NIC (one queue pair drives one port), RoCE without flow "
        "control, an NVSwitch host without its fabric manager: each is a known cause of slow NCCL or peer "
        "traffic, and the words that name the host name none of them. A guess would be a confident wrong cause.",
        "Post the output the finding asks for first (it tells the two likeliest apart), then the others it "
        "lists, and run `topodoctor diagnose` again with them.",
    ),
    DiagnosisCode(
        "TD987", "diag-expected-unmeasured", "info",
        "A question about speed with no figure: what this hardware should reach, and how to measure it.",
        "Many slow-run questions post the hardware and no figure (or the figure as an image): the answer is the "
        "figure this hardware gives in NCCL's model, so a run can be held against it.",
        "Run nccl-tests (`all_reduce_perf -b 8 -e 8G -f 2 -g N`, or one process per GPU) and post its output as "
        "text, with its header.",
    ),
    DiagnosisCode(
        "TD991", "diag-nvls-node-counts", "warning",
        "NVLS figures compared across node counts: NCCL's own model does not hold them to one rate.",
        "Across nodes NCCL runs NVLS as NVLSTree, and its tuning model (tuning.cc) credits NVLSTree on two nodes "
        "with twice the inter-node bandwidth it gives more; from 2.19.3 NVLSTree also moves 64 KiB chunks on 4 "
        "nodes or more. A drop from two nodes to four is then no fault by itself, nor proof of none.",
        "Run the same sizes with NCCL_ALGO=RING on each node count and post them with NCCL_DEBUG=INFO "
        "NCCL_DEBUG_SUBSYS=INIT,TUNING: the rings hold the network to one rate.",
    ),
    DiagnosisCode(
        "TD993", "diag-nics-one-pci-link", "warning",
        "NCCL's topology puts several NICs behind one PCI link, so its search builds fewer rings than NICs.",
        "NCCL rates each PCI link (width x lane rate / 80: Gen4 x16 is 24 GB/s) and takes every ring channel's "
        "bandwidth off each link of its path; NICs whose nets sit under one pci element of its topology share that "
        "link, so two HDR NICs behind one Gen4 x16 link fit one ring of 24 GB/s where they carry 48.",
        "Post NCCL_TOPO_DUMP_FILE's dump with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH and `lspci -tv`. Where "
        "each NIC has its own link (under a PCIe switch), give NCCL the real tree with NCCL_TOPO_FILE; one "
        "dual-port card shares its link by design.",
    ),
    DiagnosisCode(
        "TD982", "diag-nic-port-rate", "warning",
        "A NIC port negotiated a lower rate than its sibling ports: the network runs at that port's rate.",
        "A port that trained down (a cable, a transceiver or a switch port) carries its share of every ring at "
        "its rate; the listing also gives the network's ceiling: NCCL's busbw between nodes reaches about 0.95 "
        "of the active ports' line rate (24 GB/s per 200 Gb/s port).",
        "Check the port's cable, transceiver and switch port (`ibstat`, `mlxlink -d <dev> -m`); reseat or swap "
        "them until it negotiates its siblings' rate.",
        also=("info",),  # the ports' ceiling, down ports, an adapter on a slower fabric: said, not blamed
    ),
    DiagnosisCode(
        "TD983", "diag-separate-runs", "error",
        "The processes of a multi-host launch never joined one test: each printed a result of its own.",
        "nccl-tests prints its header and results from world rank 0 only when built with MPI (MPI=1); built "
        "without it, each process mpirun or srun starts runs alone on its host's GPUs, so several results "
        "follow one launch and nothing crosses the network.",
        "Rebuild nccl-tests with MPI: `make clean`, then `make MPI=1 MPI_HOME=/path/to/mpi`, and run again: one "
        "header listing every rank, one result.",
    ),
    DiagnosisCode(
        "TD984", "diag-nccl-search-short", "warning",
        "NCCL's graph search found fewer channels, a lower speed or a worse path than this hardware allows.",
        "NCCL's INFO log prints what its search found (`Pattern 4, ..., nChannels 12, bw 30.000000/30.000000, "
        "type NVL/PIX`): the channels a ring uses, the GB/s NCCL credits each, and the worst path inside the node. "
        "Their product is what NCCL expects of the links; the topology's model fills the same links with the same "
        "channel speeds, so a search that found less, or a path through PHB or SYS where NVLink joins the GPUs, "
        "caps every collective before a byte moves. The same line on a healthy run is the evidence that NCCL saw "
        "the hardware whole (information).",
        "Find what NCCL saw: post NCCL_TOPO_DUMP_FILE's output beside `nvidia-smi topo -m`. A virtual machine's "
        "flat PCI tree needs NCCL_TOPO_FILE; NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, NCCL_CROSS_NIC, NCCL_PXN_DISABLE or "
        "NCCL_NET_GDR_LEVEL set for the job narrow the paths: unset them and compare.",
        also=("info",),  # the search as the hardware allows: the evidence of a normal run
    ),
    DiagnosisCode(
        "TD985", "diag-nccl-search-failed", "warning",
        "NCCL's graph search found no path for a pattern and fell back to its simple order: one channel.",
        "`Could not find a path for pattern N, falling back to simple order` (search.cc) means the search "
        "gave up: NCCL builds one channel in rank order at 0.1 GB/s over SYS, and because every collective gets "
        "the fewer of the tree's and the ring's channels, a tree that fell back leaves the rings one channel too. "
        "The causes the source gives: the topology NCCL saw (a VM's flat PCI tree, a NIC or GPU it did not see), a "
        "setting that narrows the paths, or a release whose search fails on the node's layout.",
        "Post NCCL_TOPO_DUMP_FILE's output and the job's NCCL_* settings; where a release with a known search "
        "regression is named, run the release the finding names as unaffected.",
    ),
    DiagnosisCode(
        "TD988", "diag-scaling-nodes", "warning",
        "The job is said to run slower per GPU across nodes than on one: the network between the nodes is the "
        "first suspect.",
        "Data-parallel training all-reduces the gradients every step; across nodes that traffic crosses the node's "
        "NICs, at 2 (n - 1) / n of the gradients' bytes per step (a billion fp16 parameters: about 4 GB). NCCL's own "
        "model rates a 100 Gb/s NIC and a PCIe Gen3 x16 link alike at 12 GB/s (topo.h NET_BW, PCI_BW): a network "
        "slower than that is slower than every link inside a node, and the step waits for it. NCCL on sockets where "
        "InfiniBand exists (NCCL_IB_DISABLE=1, or no verbs device found: `NET/Socket` in its INFO log) does the "
        "same on a fast fabric.",
        "Run across nodes over InfiniBand or EFA (100 Gb/s a node at the least; NVIDIA's reference designs give each "
        "GPU its own 200-400 Gb/s NIC), and check with NCCL_DEBUG=INFO that NCCL uses it (`NET/IB`, not "
        "`NET/Socket`); on a slow network, fewer and larger all-reduces (gradient accumulation) hide part of it.",
    ),
    DiagnosisCode(
        "TD989", "diag-scaling-node", "info",
        "More GPUs of one node are said to be no faster (or slower) than fewer: normal without peer-to-peer, a "
        "fault to find with it.",
        "GPUs without peer-to-peer (GeForce, NVLink absent or inactive on a card whose driver gives no PCIe P2P) "
        "exchange every tensor through host memory: tensor parallelism exchanges activations every layer and data "
        "parallelism the gradients every step, so a small model gains less from another card than the exchange "
        "costs. On P2P-capable GPUs on PCIe, a step slower together than alone points at P2P redirected or refused "
        "(PCIe ACS on the switch or root ports, the IOMMU, a VM).",
        "Without P2P nothing is to fix (NVLink, or GPUs with PCIe P2P, go faster; a larger batch per GPU hides the "
        "exchange). With P2P: post `lspci -vvv | grep ACSCtl` and p2pBandwidthLatencyTest, and disable ACS "
        "redirection (BIOS, or setpci) where it is on.",
        ("warning",),
    ),
    DiagnosisCode(
        "TD990", "diag-faulty-gpu", "warning",
        "The job is slow only when one particular GPU takes part: that GPU is faulty.",
        "A collective runs at its slowest rank: one GPU held down (clocks, a PCIe link trained narrow, memory "
        "errors, a failing board) slows every step of every job it joins, while the same job on the others runs "
        "normally.",
        "Run without it (CUDA_VISIBLE_DEVICES of the others) to confirm, then post `nvidia-smi -q -i N` (clocks "
        "event reasons, PCIe link width, ECC and remapped rows) and `dcgmi diag -r 3`; a GPU that fails them is "
        "for its vendor.",
    ),
    DiagnosisCode(
        "TD992", "diag-power-capped", "warning",
        "A GPU runs with a power limit set below its board's default.",
        "Under load a GPU holds its power limit by lowering its clocks: capped below the default, it computes "
        "and copies slower than the same GPU at its default, and a job spread over several GPUs waits on the "
        "most capped one at every step.",
        "Read the limit in force with `nvidia-smi -q -d POWER`; where the cap was not meant, an admin restores "
        "the default (`nvidia-smi -i N -pl DEFAULT_W`, or the setting that applies it at boot); otherwise judge "
        "the run against the capped GPU, not the board's figures.",
    ),
    DiagnosisCode(
        "TD994", "diag-gpus-mixed", "warning",
        "The GPUs of one host that the run may span are of different models.",
        "Tensor parallelism splits every layer evenly and ends it in an all-reduce, and a data-parallel step "
        "ends in one too: each waits for its slowest member, so a group of a fast and a slow GPU runs at the "
        "slow one's pace (the fast one idles at the barrier, drawing little power), and the pair's P2P and NCCL "
        "rates are the lesser GPU's and link's.",
        "Judge the run against the slower model; keep a tensor-parallel group to GPUs of one model "
        "(CUDA_VISIBLE_DEVICES), or split the model by pipeline stages sized to each GPU instead.",
        ("info",),
    ),
    DiagnosisCode(
        "TD996", "diag-busbw-dip", "warning",
        "An nccl-tests run's bus bandwidth falls at some message sizes and climbs again at larger ones.",
        "Bus bandwidth rises with the message size until the links are full: a run that loses much of it at a few "
        "sizes and recovers after has NCCL choosing, at those sizes, an algorithm, a protocol or a number of "
        "channels that does worse on this system (its cost model, a tuner plugin, or a variable that bounds the "
        "choice), not a link that got slower.",
        "Post NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING output of a run over those sizes (the algorithm and "
        "protocol NCCL picks for each), then run the same sizes with NCCL_ALGO=Ring and with NCCL_PROTO=Simple: "
        "the one that removes the dip names the choice; the NCCL release's notes and a newer release may hold "
        "its tuning fix.",
    ),
    DiagnosisCode(
        "TD997", "diag-slower-after-version", "warning",
        "The reporter says the run is slower with one release of a library than with another.",
        "Where the hardware and the settings stayed and only a release changed (NCCL, UCX, the NET plugin, the "
        "driver, the framework), the new release's own change is the first suspect: a regression, or a changed "
        "default (a protocol threshold, a transport, the channel count) that does worse on this system.",
        "Run both releases on the same nodes with the same command and post each run's table and its debug output "
        "(NCCL_DEBUG=INFO; for UCX, UCX_LOG_LEVEL=info and UCX_PROTO_INFO=y), with each release's version line; "
        "try the newest release or the project's main branch, and read the release notes between the two for the "
        "fix or the changed default.",
    ),
    DiagnosisCode(
        "TD978", "diag-horovod-without-nccl", "warning",
        "Horovod is built without NCCL: its GPU tensors are reduced by Gloo or MPI through host memory.",
        "Horovod reduces GPU tensors with NCCL only where it was built with it (`horovodrun --check-build` lists "
        "NCCL under its tensor operations); otherwise Gloo or MPI copy every tensor to host memory first, so the "
        "GPUs' NVLink and GPUDirect RDMA carry nothing.",
        "Reinstall Horovod with NCCL: `HOROVOD_GPU_OPERATIONS=NCCL pip install --no-cache-dir horovod` (older "
        "releases: HOROVOD_GPU_ALLREDUCE=NCCL), with NCCL's headers and library found (HOROVOD_NCCL_HOME), then "
        "check that `horovodrun --check-build` marks NCCL.",
    ),
    DiagnosisCode(
        "TD970", "diag-latency-one-process", "warning",
        "A small collective's latency was measured with one process driving several GPUs.",
        "-g N launches each GPU's kernel in turn from one thread, adding CUDA's launch latency per GPU.",
        "Build nccl-tests with MPI=1, run one process per GPU (`mpirun -np N ./all_reduce_perf -g 1`) with `-G 100`.",
    ),
    DiagnosisCode(
        "TD971", "diag-one-rank-waits", "warning",
        "A collective is said to take long on one rank: that rank's wait for the others, not the transfer.",
        "A collective ends on every rank together, so a profile shows the longest one on the rank that came first.",
        "Find the late rank: when each rank launches it (nsys timelines of all ranks) and the host work before it.",
    ),
    DiagnosisCode(
        "TD979", "diag-gpu-buffers-staged", "warning",
        "A bandwidth test with its buffers in GPU memory runs far below the same test with them in host memory.",
        "Over one path, a message sent from GPU memory should go about as fast as one from host memory: the NIC "
        "reads GPU memory itself (GPUDirect RDMA) or the peer GPU's through CUDA IPC. A small share of the host "
        "figure is every message copied through host memory in small pieces.",
        "Load the peer-memory module (`modprobe nvidia-peermem`; nv_peer_mem with MOFED on old drivers) and check "
        "it with `lsmod`; give the library its GPU transports (UCX_TLS with cuda_copy, cuda_ipc, gdr_copy, or a "
        "CUDA-enabled build: `ucx_info -d`); keep the GPU and the NIC under one PCIe switch (`nvidia-smi topo -m`).",
    ),
    DiagnosisCode(
        "TD995", "diag-pcie-slot-narrow", "warning",
        "A GPU sits on a PCIe link narrower or older than the GPU's own.",
        "A card in a chipset slot, behind a riser or on an old board gets the slot's lanes and generation, not its "
        "own: every host copy and every PCIe peer path through it runs at that link's rate (PCIe 2.0 x4 carries "
        "about 2 GB/s of the 32 a Gen4 x16 card can), and a tensor-parallel group waits on that GPU at every "
        "all-reduce.",
        "Move the GPU to a CPU-attached slot wired for its full width (the board's manual lists which slots share "
        "lanes), or drop the riser; `nvidia-smi -q | grep -A3 'Link Width'` and `lspci -vv` LnkCap / LnkSta show "
        "the link the card trained to against what it can do.",
    ),
)  # fmt: skip
BY_CODE = {c.code: c for c in CODES}
