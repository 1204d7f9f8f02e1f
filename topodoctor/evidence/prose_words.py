"""The words the prose reader (prose.py) knows: what names a figure's kind and role, the ops, nodes,
sizes, NICs and the cloud instances and NVIDIA systems whose GPUs and NICs their names fix.

Instances and systems, as their makers list them: AWS EC2 accelerated computing instances (p4d.24xlarge,
p4de.24xlarge: 8 x A100 SXM, EFA 4 x 100 Gb/s; p5.48xlarge, p5e.48xlarge: 8 x H100 / H200 SXM, EFA 3200
Gb/s in 32 x 100; p5en.48xlarge: 8 x H200, 16 x 200), NVIDIA DGX A100 (8 x A100 SXM, 8 x ConnectX-6 HDR
200 Gb/s for compute), DGX H100 / H200 (8 x H100 / H200 SXM, 8 x ConnectX-7 NDR 400 Gb/s), DGX B200
(8 x B200, 8 x 400 Gb/s), Azure ND A100 v4 (ND96asr_v4, ND96amsr_A100_v4: 8 x A100, 8 x HDR 200) and ND
H100 v5 (ND96isr_H100_v5: 8 x H100, 8 x NDR 400). AWS's G instances with EFA (g4dn: T4, g5: A10G, g6: L4, g6e:
L40S) carry EFA without GPUDirect RDMA: EC2 offers GPUDirect RDMA only on its P instances from p4d on, so a G
instance's traffic between nodes is staged through host memory by design.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from topodoctor.model.evidence_prose import HostKind, Scope

WORD_NUMBERS = {"one": 1, "single": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
                "eight": 8, "ten": 10, "twelve": 12, "sixteen": 16, "both": 2}  # fmt: skip
_NUM = r"(\d{1,4}|one|single|two|three|four|five|six|seven|eight|ten|twelve|sixteen)"

BUSBW = re.compile(r"\bbus[ _-]?(?:bw|bandwidths?)\b|\bbusbw\b|\bwire[ _-]?(?:bw|bandwidth|speed)\b", re.I)
ALGBW = re.compile(r"\balg(?:o|orithm)?[ _-]?(?:bw|bandwidth)\b|\balgbw\b", re.I)
EXPECTED = re.compile(
    r"\b(?:specs?|specifications?|advertised|advertises|claims?|claimed|officials?|official|theoretical(?:ly)?|"
    r"in theory|peak (?:for|of) |datasheet|data sheet|expected|expecting|expect|should|supposed|rated|"
    r"marketing|nominal|promised|quoted?|according to|GTC|whitepaper|white paper"
    r"|(?:I|we) (?:thought|hoped|assumed) (?:it|that|this)? ?(?:would|could|should|will|can))\b"
    r"|理论|标称|官方|预期|期望|应该",  # Chinese: theoretical, nominal, official, expected, should
    re.I,
)
MEASURED = re.compile(
    r"\b(?:observed?|get|got|getting|gets|see|saw|seeing|seen|measured?|measuring|achieved?|achieving|"
    r"reached|reaching|reports?|reported|shows?|showed|maxed|average|result|results|only|obtained?|"
    r"is about|around|approximately|tops? out|saturat\w*)\b",
    re.I,
)
NIC_WORDS = re.compile(
    r"\b(?:HDR|NDR|EDR|FDR|XDR|EFA|RoCE(?:v2)?|InfiniBand|IB|NICs?|HCAs?|net|network|networks|ethernet|TCP(?:/IP)?|"
    r"ConnectX[-\w]*|CX-?\d|Mellanox|adapters?|uplinks?|ports?|interconnects?)\b",
    re.I,
)
NVLINK = re.compile(r"\bNVLink\w*\b|\bNVSwitch\w*\b", re.I)
# a figure of one link, not of the GPU ("the B/W per link is <20GB/s", "each NVLink gives 25 GB/s")
PER_LINK = re.compile(r"\b(?:per|each|a single|one)\s+(?:NVLink\s+)?links?\b|\bper[ -]NVLink\b", re.I)
NVLS = re.compile(r"\bNVLS\b|\bNVLink[ -]?SHARP\b|\bNVLS[ -]?SHARP\b", re.I)
IMAGES = re.compile(
    r"!\[[^\]]*\]\([^)]*\)|\bscreen ?shots?\b|\b(?:attached|following|below|the) (?:image|picture|figure|graph)s?\b"
    r"|\.(?:png|jpe?g)\b",
    re.I,
)
# a sentence that quotes a figure from elsewhere: its figures are what someone said, not measured
QUOTED = re.compile(r"\baccording to\b|\bGTC\b|\bwhite ?paper\b|\bdata ?sheet\b", re.I)
COMPARED = re.compile(r"^\s*(?:instead of|rather than)\b", re.I)  # "480 GB/s instead of 555": the 555 is not measured
DUAL_PORT = re.compile(r"\bdual[ -]port\b|\btwo ports\b|\b2 ports\b", re.I)
OTHER_TOOLS = re.compile(
    r"\b(?:iperf3?|NTTTCP|ib_(?:write|read|send)_(?:bw|lat)|perftest|ibdump|nvbandwidth|p2pBandwidthLatencyTest|"
    r"bandwidthTest|nvloom|(?:cuda)?memcpy\w*|qperf|sockperf|netperf|PCIe|PCI-E"
    # transfer engines' and MPI's own benchmarks (Mooncake, NIXL, UCX, OSU): their figures are no collective's
    r"|transfer_engine_bench|nixlbench|ucx_perftest|osu_(?:bw|bibw|mbw_mr|latency))\b",
    re.I,
)
# the communication library a post is about when it is not NCCL: UCX and MPI (the OSU benchmarks), NVSHMEM, the
# transfer engines; a post that names NCCL or its tests is NCCL's whatever else it names
OTHER_STACKS = (
    ("UCX", re.compile(r"\bUCX\b|\bucx_\w+|\bUCX_\w+", re.I)),
    ("MPI", re.compile(r"\bosu_\w+|\bOMB\b|\bOpen ?MPI\b|\bompi\b|\bMVAPICH\w*|\bHPC-X\b", re.I)),
    ("NVSHMEM", re.compile(r"\bNVSHMEM\w*|\bDeepEP\b", re.I)),
    ("a transfer engine", re.compile(r"\bMooncake\b|\btransfer_engine\w*|\bNIXL\b|\bnixlbench\b", re.I)),
    ("Gloo", re.compile(r"\bgloo\b", re.I)),  # torch's CPU backend: TCP between the hosts, no GPU's links
    ("BytePS", re.compile(r"\bBytePS\b|\bps-lite\b", re.I)),  # its own RDMA van (ps-lite), not NCCL's network
)


def stack_of(text: str, nccl_named: bool) -> str:
    """The library other than NCCL the text is about ("UCX"), "" where it names NCCL or none."""
    return "" if nccl_named else next((name for name, rx in OTHER_STACKS if rx.search(text)), "")


# a NIC's load as a monitor shows it ("network trans/receive is about 20M/s", iftop's): the link's traffic, not a
# collective's bandwidth, so it is kept beside the run as another tool's figure is
TRAFFIC = re.compile(
    r"\b(?:network|NIC|net|ethernet|eth\d*|interface)\s+(?:trans\w*|receiv\w*|send\w*|traffic|rx|tx|usage|load)\b"
    r"|\b(?!send\s*/\s*recv\b)(?:trans\w*|send\w*|rx|tx)\s*/\s*(?:receiv\w*|recv|rx|tx)\b"  # send/recv: NCCL's op
    r"|\b(?:iftop|nload|bmon|nethogs|sar -n DEV)\b"
    r"|\bnetwork traffic\b",
    re.I,
)
SHARED_NIC = re.compile(
    r"\bother (?:computing |compute )?(?:workloads?|jobs?|traffic)\b|\bstorage traffic\b|\bshared\b", re.I
)
_OPS = (
    ("all_reduce", r"\ball[ _-]?reduce\w*|\bAR\b|ncclAllReduce"),
    ("all_gather", r"\ball[ _-]?gather\w*|\b(?-i:AG)\b|ncclAllGather"),
    ("reduce_scatter", r"\breduce[ _-]?scatter\w*|ncclReduceScatter"),
    ("all_to_all", r"\ball[ _-]?to[ _-]?all\w*|\balltoall\w*|\b(?-i:A2A)\b"),
    ("broadcast", r"\bbroadcast\w*|ncclBroadcast"),
    ("sendrecv", r"\bsend[ _/-]?recv\w*|\bp2p_perf\b|\bncclSend\b"),
)
_OP_BLIND = re.compile("|".join(f"(?P<{name}>{rx})" for name, rx in _OPS if name != "all_reduce"), re.I)
_AR = re.compile(r"\ball[ _-]?reduce\w*|ncclAllReduce", re.I)
_CLAUSE = re.compile(r"[;,]\s+|\s+(?:but|however|whereas|while|which|because|although|though|since|and then)\s+"
                     r"|\s+(?=instead of\b|rather than\b)",
                     re.I)  # fmt: skip
_NODES = re.compile(
    # "32 H100 nodes", "32 (256 GPUS) H100 nodes": a count in brackets between the number and its nodes
    r"(?<![\w.])" + _NUM + r"[ -](?:\([^)]{1,24}\)[ -])?"
    r"(?:(?:compute|gpu|GPU|physical|identical|AWS|Azure|DGX|HGX|\w*\d\w*)[ -]){0,2}"
    r"(?:nodes?|machines?|servers?|hosts?|instances?|boxes)\b",
    re.I,
)
_DUAL_NODE = re.compile(r"\bdual[ -](?:nodes?|machines?|servers?|hosts?)\b", re.I)
_ONE_NODE = re.compile(
    r"\b(?:single|one)[ -]?(?:node|machine|server|host|box)\b|\bintra[ -]?node\b|\bwithin (?:a|one) node\b", re.I
)
_MULTI_NODE = re.compile(
    r"\bmulti[ -]?(?:node|host|machine)s?\b|\binter[ -]?node\b|\bacross (?:the )?(?:nodes|machines|servers)\b|"
    r"\bbetween (?:the )?(?:nodes|machines|servers)\b|\bcluster\b",
    re.I,
)
_SIZE = re.compile(
    r"(?:\bat|\bsizes?(?: used)?(?: (?:of|is|was|up to))?:?|messages? of|up to|with)\s*"
    r"(\d+(?:\.\d+)?)\s*([KMG])i?B?\b(?!\s*/|\s*ps)"
    r"|(?<![\w.])(\d+(?:\.\d+)?)\s*([KMG])i?B?\s+(?:messages?|sizes?|buffers?|packages?|packets?|payloads?)\b",
    re.I,
)
_SIZE_SCALE = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
_NIC_KIND = re.compile(
    r"\b(HDR100|HDR|NDR200|NDR|EDR|FDR|XDR|EFA|RoCE(?:v2)?|InfiniBand|IB|TCP(?:/IP)?|Ethernet)\b", re.I
)
# a generation's rate per port (Gb/s): IBTA's 4x rates
KIND_GBIT_S = {"HDR100": 100.0, "HDR": 200.0, "NDR200": 200.0, "NDR": 400.0, "EDR": 100.0, "FDR": 56.0, "XDR": 800.0}
# Ethernet named by its rate in words: gigabit, 10 gigabit, and the Chinese 千兆 (1 Gb/s) and 万兆 (10 Gb/s)
_ETHERNET_RATE = re.compile(r"\b10[ -]gigabit\b|\bgigabit\b|千兆|万兆", re.I)
_NIC_G = re.compile(r"(?<![\w.])(\d{2,3})\s*G(?:b|bit|bps|bE)?\b(?!\s*/|\s*[Bb]ytes)")
_NIC_COUNT_AFTER = re.compile(
    r"\b(?:IB|InfiniBand|RoCE|HDR|NDR|EDR|EFA|NICs?|HCAs?)\s*\d{2,3}\s*G(?:b|bps|bit)?(?:/s)?\s*(?:x|×|\*)\s*(\d{1,2})\b",
    re.I,
)
_NIC_COUNT = re.compile(
    # "8 x ConnectX-7" and "8x CX-7" alike, never the GPUs' count ("8xH100", "8x H100 with 2x CX-7")
    r"\b" + _NUM + r"(?:(?![\w.])|(?=[x×]\s))\s*(?:x|×|\*)?\s*"
    r"(?:(?!GPU|gpu|\band\b|\bthe\b|\bwith\b|[AHBLTV]\d{2,3}\b)[\w/*-]+\s*){0,4}?"
    r"(?:NICs?|HCAs?|Mellanox|ConnectX[-\w]*|CX-?\d\w*"
    r"|(?:IB|InfiniBand|network|NIC|RoCE|HDR|NDR|EDR|EFA|Ethernet)\s+(?:cards?|nics?|adapters?|ports?))\b",
    re.I,
)


def number(word: str) -> int | None:
    """A count as written: digits, or the small number words."""
    return int(word) if word.isdigit() else WORD_NUMBERS.get(word.lower())


def clauses(sentence: str) -> list[str]:
    """A sentence's clauses: what a figure's words belong to ("I expected 2.5 GB/s, but it maxed out at 1.7")."""
    return [c for c in _CLAUSE.split(sentence) if c.strip()]


def op_of(text: str) -> str:
    """The first collective the text names, as nccl-tests names it ("AR" only in capitals)."""
    m = _OP_BLIND.search(text)
    ar = _AR.search(text) or re.search(r"\bAR\b", text)  # "AR" in capitals only: "ar" is a word
    if ar is not None and (m is None or ar.start() < m.start()):
        return "all_reduce"
    return next((k for k, v in m.groupdict().items() if v), "") if m is not None else ""


def nodes_of(text: str) -> tuple[int | None, bool]:
    """The nodes the text says the run spans, and whether it says the run is across nodes at all."""
    for m in _NODES.finditer(text):
        before = text[max(0, m.start() - 12) : m.start()].lower()
        if re.search(r"\b(?:per|each|in a|every)\s*$", before):
            continue
        if re.search(r"[x×*]\s*$", before) and re.match(r"\S+\s+(?:node|machine|server|host)\b", m.group(0)):
            continue  # "H800 * 8 node": an 8-GPU node
        n = number(m.group(1))
        if n:
            return n, n > 1
    if _DUAL_NODE.search(text):
        return 2, True  # "in the KVM environment on dual-node"
    if _ONE_NODE.search(text):
        return 1, False
    return None, bool(_MULTI_NODE.search(text))


def scope_of(sentence: str) -> Scope:
    """Where one sentence places its figures: on one node, across nodes, or neither said."""
    n, across = nodes_of(sentence)
    return "nodes" if across else ("one-node" if n == 1 else "")


def size_of(text: str) -> int | None:
    """The largest message size the text states (nccl-tests' -e, "at 1GB", "8M~128M packages")."""
    sizes = []
    for m in _SIZE.finditer(text):
        value, scale = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
        sizes.append(int(float(value) * _SIZE_SCALE[scale.upper()]))
    return max(sizes) if sizes else None


def nic_of(text: str, said_gbit_s: list[float]) -> tuple[str, float | None, int | None]:
    """The NIC's kind, one NIC's rate (Gb/s) and how many a node has, as far as the text says."""
    kinds = [m.group(1) for m in _NIC_KIND.finditer(text)]
    kind = next((k for k in kinds if k.upper() in KIND_GBIT_S), kinds[0] if kinds else "")
    norm = {"INFINIBAND": "InfiniBand", "ETHERNET": "Ethernet", "ROCE": "RoCE", "ROCEV2": "RoCE", "TCP/IP": "TCP"}
    kind = norm.get(kind.upper(), kind.upper() if kind.upper() in KIND_GBIT_S or kind.upper() in ("EFA", "IB", "TCP")
                    else kind)  # fmt: skip
    rate = said_gbit_s[0] if said_gbit_s else None
    if rate is None:
        for m in _NIC_G.finditer(text):
            near = text[max(0, m.start() - 30) : m.end() + 30]
            if _NIC_KIND.search(near) or re.search(r"\b(?:NICs?|HCAs?|cards?|adapters?|network)\b", near, re.I):
                rate = float(m.group(1))
                break
    if rate is None and (eth := _ETHERNET_RATE.search(text)):  # "a gigabit LAN", "内网是千兆的"
        kind, rate = kind or "Ethernet", 10.0 if eth.group(0).lower() in ("万兆", "10 gigabit", "10-gigabit") else 1.0
    if rate is None and kind in KIND_GBIT_S:
        rate = KIND_GBIT_S[kind]
    count = next((n for m in _NIC_COUNT.finditer(text) if (n := number(m.group(1)))), None)
    if count is None and (after := _NIC_COUNT_AFTER.search(text)):
        count = int(after.group(1))  # "IB 200Gb * 4"
    return kind, rate, count


@dataclass(frozen=True)
class Instance:
    """A cloud instance or NVIDIA system: the GPUs and NICs its name fixes."""

    pattern: str
    gpu: str  # as the GPU model table reads it
    gpus: int
    nic: str
    nic_gbit_s: float
    nics: int  # 0 where the name does not fix it (a family named without its size)
    gdr: bool = True  # whether the instance's NICs can reach GPU memory directly (GPUDirect RDMA)
    family: str = ""  # the name it is known by in a message ("g6e")


INSTANCES = (
    Instance(r"\bp4de\.24x(?:large)?\b", "A100 SXM4 80GB", 8, "EFA", 100.0, 4),
    Instance(r"\bp4d\.24x(?:large)?\b", "A100 SXM4 40GB", 8, "EFA", 100.0, 4),
    Instance(r"\bp5en\.48x(?:large)?\b", "H200", 8, "EFA", 200.0, 16),
    Instance(r"\bp5e\.48x(?:large)?\b", "H200", 8, "EFA", 100.0, 32),
    Instance(r"\bp5\.48x(?:large)?\b", "H100 SXM", 8, "EFA", 100.0, 32),
    Instance(r"\bDGX[ -]?1\b", "V100 SXM2", 8, "EDR", 100.0, 4),  # DGX-1 with V100: hybrid cube mesh, 4 x EDR
    Instance(r"\bDGX[ -]?A100\b", "A100 SXM", 8, "HDR", 200.0, 8),
    Instance(r"\bDGX[ -]?H100\b", "H100 SXM", 8, "NDR", 400.0, 8),
    Instance(r"\bDGX[ -]?H200\b", "H200", 8, "NDR", 400.0, 8),
    Instance(r"\bDGX[ -]?B200\b", "B200", 8, "NDR", 400.0, 8),
    Instance(r"\bND96a(?:m)?sr(?:_A100)?_v4\b|\bND A100 v4\b", "A100 SXM", 8, "HDR", 200.0, 8),
    Instance(r"\bND96isr_H100_v5\b|\bND H100 v5\b", "H100 SXM", 8, "NDR", 400.0, 8),
    # EC2's G instances, each family by its name with or without a size ("g6e nodes", "g5.48xlarge")
    Instance(r"\bg6e(?:\.\w+)?\b", "L40S", 0, "EFA", 100.0, 0, gdr=False, family="g6e"),
    Instance(r"\bg6\.\d*x?large\b|\bg6 (?:instances?|nodes?)\b", "L4", 0, "EFA", 100.0, 0, gdr=False, family="g6"),
    Instance(r"\bg5\.\d*x?large\b|\bg5 (?:instances?|nodes?)\b", "A10G", 0, "EFA", 100.0, 0, gdr=False, family="g5"),
    Instance(r"\bg4dn(?:\.\w+)?\b", "T4", 0, "EFA", 100.0, 0, gdr=False, family="g4dn"),
)
_INSTANCES = tuple((re.compile(i.pattern, re.I), i) for i in INSTANCES)


def instance_of(text: str) -> Instance | None:
    """The first instance or system the text names."""
    return next((i for rx, i in _INSTANCES if rx.search(text)), None)


# The kinds of host a description names, each a class of known causes of a slow run (diagnosis/evidence_hosts.py).
# "passthrough" is a VM's only where it is not the IOMMU's own pass-through mode (iommu=pt), which is bare metal.
_HOSTS: tuple[tuple[HostKind, re.Pattern[str]], ...] = (
    ("epyc", re.compile(r"\bEPYC\b|\bAMD\s+(?:CPUs?|processors?|systems?|servers?|platforms?)\b", re.I)),
    (
        "vm",
        re.compile(
            r"\bVMs?\b|\bvirtual machines?\b|\bKVM\b|\bQEMU\b|\bhypervisors?\b|\bSR-?IOV\b|\bvGPU\b"
            r"|\bVMware\b|\bESXi\b|\bvfio\b|\bguests?\b(?= (?:VM|OS|kernel))|(?<!iommu )(?<!iommu=)"
            r"\bpass[- ]?through(?:ed)?\b(?! mode)",
            re.I,
        ),
    ),
    (
        "bond",
        re.compile(
            r"\bmlx5_bond\w*|\bbond(?:ed|ing)? (?:RoCE|NICs?|network|ports?|interfaces?|mode)\b"
            r"|\bRoCE (?:LAG|bond\w*)\b|\bbond nics?\b",
            re.I,
        ),
    ),
    ("roce", re.compile(r"\bRoCE(?:v2)?\b", re.I)),
    # named, not inferred from a model: "A100" alone is a card as often as a board
    # (DGX-1 and the DGX Station join their GPUs directly: a hybrid cube mesh, or all pairs, without NVSwitch)
    ("nvswitch", re.compile(r"\bNVSwitch\w*\b|\bHGX\b|\bDGX\b(?![ -]?(?:1|Station|Spark)\b)|SXM\d?\b", re.I)),
)
# the run said to be short of what it should give: words that say so by themselves ("much slower", "did not
# perform as expected", "25% of baremetal speed"), or a shortfall's words with a word of speed in the text
SLOW_ITSELF = re.compile(
    r"\bslow(?:er|ly|s|down|ness)?\b|\bnot perform\w* as expected\b|\bunder-?perform\w*"
    r"|\bperformance (?:drop|loss|degrad)|\d+ ?% of (?:bare[ -]?metal|the (?:link|line|expected|theoretical))"
    r"|很慢|缓慢|变慢|太慢|速度慢|性能(?:下降|差|很差|低)|降速",  # Chinese: slow, slowed down, performance drops
    re.I,
)
SLOW = re.compile(
    r"\blow(?:er)?\b(?![ -](?:latency|level|power))|\bpoor(?:ly)?\b|\bdrops?\b|\bdropped\b|\bdegrad\w*|\bworse\b"
    r"|\black\b|\bnot (?:even )?as (?:good|fast|high|expected)\b|\bnot (?:reach\w*|meet\w*|achiev\w*)\b"
    r"|\bcan(?:no|')t reach\b"
    r"|\bfar (?:from|below|away)\b|\bregress\w*|\bbut only (?:about |around |~)?\d",
    re.I,
)
SPEED = re.compile(r"\bbandwidths?\b|\bbusbw\b|\balgbw\b|\bperformance\b|\bperf\b|\bspeeds?\b|\bthroughput\b"
                   r"|\brates?\b|\bfast\w*|\bslow\w*|[GM]B/s|[GM]bps|\bGb/s"
                   r"|速度|带宽|性能|吞吐", re.I)  # fmt: skip  # Chinese: speed, bandwidth, performance, throughput
# asks whether what it gets is what it should ("Is this normal?", "Does this bandwidth value meet the expectation?")
ASKS = re.compile(
    r"\bis (?:it|this|that) (?:normal|expected|reasonable|right|correct|ok)\b|\breasonable\b|\bmeet\w* (?:the |our )?"
    r"expectations?\b|\bas expected\b|\bwhat (?:bandwidth|speed|performance)\b|\bshould (?:I|we) (?:expect|get|see)\b"
    r"|正常吗|是否正常|合理吗|是否合理",  # Chinese: is it normal, is it reasonable
    re.I,
)


def hosts_of(text: str) -> tuple[HostKind, ...]:
    """The kinds of host the text names, in the table's order."""
    return tuple(kind for kind, rx in _HOSTS if rx.search(text))


def slow_of(text: str) -> bool:
    """Whether the text says the run is short or slow."""
    return bool(SLOW_ITSELF.search(text) or (SLOW.search(text) and SPEED.search(text)))


def asks_of(sentences: list[str]) -> bool:
    """Whether a sentence asks about a speed: a question that names one, or the words of asking whether it is right."""
    return any(ASKS.search(s) or ("?" in s and SPEED.search(s)) for s in sentences)


# GPUs named by their number rather than their model ("both GPUs", "on 4 GPUs", "a single GPU"), and the words of
# GPUs left idle by the job ("underutilized", "only 50% utilization"): a post about a multi-GPU run's speed
GPUS_SAID = re.compile(r"\b(?:both|two|all|multiple|several|\d{1,3})\s+GPUs\b|\bsingle GPU\b", re.I)
# a trouble said of a speed ("an issue with Tensor Parallelism" over latency figures): a question about speed too
TROUBLE = re.compile(r"\b(?:issues?|problems?|concerns?)\b", re.I)
TIMING = re.compile(r"\blatency\b|\bbenchmark\w*|\bper token\b", re.I)
UNDERUSED = re.compile(r"\bunder-?utili[sz]\w*|\blow (?:GPU )?utili[sz]ation\b|\bonly \d{1,3} ?% of\b", re.I)


# A rig's GPUs listed one per line, as a report or a post lists its parts: "GPU 0: NVIDIA GeForce RTX 5090 (Blackwell,
# 32 GB)", "- **GPU 1**: RTX 3090 Ti" (read after its markdown is taken off), "cuda:1 = RTX 4090"
_LISTED = re.compile(r"^(?:GPU|cuda:?)\s*#?(\d+)\s*[:=]\s*(.+?)\s*(?:[(,;|]|$)", re.I)


def listed_gpus(said: list[tuple[int, str]]) -> tuple[tuple[int, str], ...]:
    """The GPUs the sentences list one per line, by index (the first naming of an index kept)."""
    out: dict[int, str] = {}
    for _, text in said:
        if (m := _LISTED.match(text)) and m.group(2).strip():
            out.setdefault(int(m.group(1)), m.group(2).strip())
    return tuple(sorted(out.items()))


# A GPU put on a PCIe link by the sentences: "GPU 1 on PCIe 2.0 x4", "GPU1 sits in a PCIe Gen3 x8 slot"
_PCIE_LINK = re.compile(
    r"\bGPU\s*#?(\d+)\b[^.;\n]{0,40}?\bPCI[- ]?e(?:xpress)?\s*(?:Gen\s*|v)?([1-6])(?:\.0)?\s*[x×]\s*(1|2|4|8|16)\b",
    re.I,
)


def pcie_said(text: str) -> tuple[tuple[int, int, int], ...]:
    """(GPU, generation, width) of each GPU the text puts on a PCIe link, the first saying of a GPU kept."""
    out: dict[int, tuple[int, int, int]] = {}
    for m in _PCIE_LINK.finditer(text):
        out.setdefault(int(m.group(1)), (int(m.group(1)), int(m.group(2)), int(m.group(3))))
    return tuple(out.values())


# AMD's GPUs and their stack, named: an Instinct part, ROCm and its tools, AMD's GPU links (xGMI, Infinity Fabric)
AMD_GPUS = re.compile(r"\bMI[1-4]\d{1,2}[AXH]?\b|\bInstinct\b|\bROCm\b|rocm_bandwidth_test|\bRCCL\b|\bxGMI\b"
                      r"|\bRadeon\b")  # fmt: skip


# a GPU count in words, English or Chinese: "two GPUs", "四张卡", "两张显卡", "8卡"
_NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "six": 6, "eight": 8, "两": 2, "二": 2, "三": 3, "四": 4, "六": 6,
                 "八": 8}  # fmt: skip
_COUNT_WORDS = re.compile(
    r"\b(two|three|four|six|eight)\s+(?:NVIDIA\s+)?GPUs\b|(两|二|三|四|六|八|\d{1,2})\s*(?:张|块|个)?\s*(?:显卡|GPU|卡)",
    re.I,
)


def gpu_count_said(text: str) -> int | None:
    """The GPUs a text counts in words ("two GPUs", "两张显卡"); None where it counts none."""
    m = _COUNT_WORDS.search(text)
    if m is None:
        return None
    word = (m.group(1) or m.group(2)).lower()
    return int(word) if word.isdigit() else _NUMBER_WORDS[word]
