"""The reporter's sentences read for plain claims: the GPUs and how many, the nodes, the op, each
bandwidth figure with its unit and what it is (busbw, algbw, a NIC's rate, a figure expected or quoted
from a spec), the message size, the NIC, NVLink SHARP, and figures posted as images.

Only the lines no other reader took are read (a table, a log or a command line stays its reader's), and
only those that read as sentences: no code, no table rows, no key = value lines. The rules are kept
narrow, because a claim is weaker evidence than a tool's output and a wrong one is worse than none: a
number is a bandwidth only with a bandwidth unit, a GPU is a model only by the GPU model table
(topology/gpu_models.py), and an input whose sentences claim nothing is no prose piece at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from topodoctor.evidence import prose_tables, scaling
from topodoctor.evidence.lines import Block, Parts
from topodoctor.evidence.prose_checked import CLAIMS, checked_of
from topodoctor.evidence.prose_latency import latency_of
from topodoctor.evidence.prose_words import (
    ALGBW,
    AMD_GPUS,
    BUSBW,
    COMPARED,
    DUAL_PORT,
    EXPECTED,
    GPUS_SAID,
    IMAGES,
    MEASURED,
    NIC_WORDS,
    NVLINK,
    NVLS,
    OTHER_TOOLS,
    QUOTED,
    SHARED_NIC,
    SPEED,
    TIMING,
    TRAFFIC,
    TROUBLE,
    UNDERUSED,
    asks_of,
    clauses,
    gpu_count_said,
    hosts_of,
    instance_of,
    listed_gpus,
    nic_of,
    nodes_of,
    op_of,
    pcie_said,
    scope_of,
    size_of,
    slow_of,
    stack_of,
)
from topodoctor.model.evidence import SAID_SETTING, SAID_WITH_SLOWDOWN, EvidenceSetting
from topodoctor.model.evidence_prose import Bound, FigureKind, FigureRole, FigureSaid, ProseSaid
from topodoctor.nccl.variables import table
from topodoctor.topology.gpu_models import MODELS, model_of

# a figure, or a range of them ("4~6GB/s", "365-370 GBps"), and its unit: B is bytes, b (or bps, bit) bits
_FIGURE = re.compile(
    r"(?<![\w.])(\d+(?:\.\d+)?)(?:\s*(?:~|-|–|to)\s*(\d+(?:\.\d+)?))?\+?\s?"  # "180+ GB/s": at least
    r"([KMGT])(i?)(B(?:ytes?)?|b(?:its?)?)?\s*(?:/\s*[sS](?:ec(?:ond)?)?\b|ps\b|PS\b|per\s+sec(?:ond)?\b)"
)
_UNIT_GBPS = {"K": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3}  # to GB/s (or Gb/s before the bit's / 8)
_BOUND_ABOVE = re.compile(r"(?:exceed\w*|above|over|more than|higher than|greater than|beyond|surpass\w*)\s*$", re.I)
_BOUND_BELOW = re.compile(r"(?:below|under|less than|lower than)\s*$", re.I)
# GPU names as people write them: NVIDIA's names and the usual short forms, with the part's qualifiers
_GPU = re.compile(
    r"(?:(?<![A-Za-z0-9_.])|(?<=\d[x×]))(?:NVIDIA\s+|Tesla\s+|GeForce\s+)?"  # "4xRTX 4090", "8卡A800" too
    r"((?:RTX\s*)?(?:GH200|GB200|B200|B100|H200|H100|H800|H20|A100|A800|A40|A30|A10G|A10|A6000|L40S|L40|L4|V100S?|"
    r"T4|P100)|RTX\s*(?:2080\s*Ti|3090|4090|5090)|(?<![\w.])2080\s*Ti\b"
    r"|(?:(?<=GPU: )|(?<=[Dd]ual )|(?<=GeForce )|(?<=\dx )|(?<=\d )|(?<=two ))(?:3090|4090|5090)"
    r"|(?:3090|4090|5090)(?=[单双两\d]*卡))"  # "3090单卡": a card of the model, in Chinese
    r"((?:[ _-]?(?:SXM\d?|PCIe|NVL|HBM\d?e?|\d+\s?G(?:B)?))*)s?(?![A-Za-z0-9_])",
    re.IGNORECASE,
)
_COUNT_BEFORE = re.compile(r"(\d{1,3})\s*(?:x|×|\*)?\s*(?:NVLink(?:ed)?\s+|SXM\d?\s+|NVIDIA\s+)?$", re.I)
# "H100 x 8", "H800 * 8 node" (an 8-GPU node), but not "A100 * 2 nodes"
_COUNT_AFTER = re.compile(r"^\s*(?:GPUs?\s*)?(?:x|×|\*)\s*(\d{1,3})\b(?!\s*(?:nodes|machines|servers|hosts))", re.I)
_COUNT_GPUS = re.compile(r"\b(\d{1,3})\s*(?:x\s*)?(?:-\s*)?GPUs?\b", re.I)
# code, tables and settings are not sentences
_CODE = re.compile(
    r"^\s*(?:def |class |import |from \S+ import |return\b|if .*:$|for .*:$|#!|//|/\*|\$ |\[[\w.-]+\]$|[{}])"
    r"|[a-z_][\w.]*\s*=\s*[\"'\[{(\d\w]|;\s*$|\)\s*:\s*$"
)
# what only a program's source or a configuration file holds
_SOURCE = re.compile(r"^\s*(?:def |class |import |from \S+ import |return\b|@\w+|#!|\[[\w.\x20\"-]+\]$|[\w.\"-]+ = \S)")
# a program's log line: a kernel or syslog timestamp, NCCL's host:pid:tid prefix, a logger's level
_LOG = re.compile(
    r"^\s*(?:\[\s*\d+\.\d+\]|\w{3} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d[T ]\d\d:\d\d|[\w.-]+:\d+:\d+ )"
    r"|\b(?:INFO|WARN(?:ING)?|ERROR|DEBUG)\b[\s:\]]"
)
_PYTHON = re.compile(r"(?:import \w|from [\w.]+ import |def \w|class \w|@\w|if __name__)")  # at the line's start
_WORD = re.compile(r"[A-Za-z]{2,}")
_CJK = re.compile(r"[\u4e00-\u9fff]")  # a Chinese sentence has no spaces: six of its characters make one
# a line of a hardware list: "GPU: 5090 *8", "NIC : 1 x HDR 200G", "Nodes: 12"
_SPEC = re.compile(r"(?:GPUs?|GPU model|NICs?|HCAs?|Network|Interconnect|Nodes?|Machines?|Servers?)\s*[:：]\s*\S", re.I)
# "... 480 GB/s. However ..." (not "15.3 GB/s"), and the ideographic full stop
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z`*(\[])|(?<=。)")
# an NCCL setting a sentence names, backticked or not ("when setting `NCCL_SHM_DISABLE=1` I see a large
# drop", "with NCCL_P2P_DISABLE=1 it is faster"): the value ends on a word character ("=1." is 1)
_SETTING = re.compile(r"(?<![\w$])`?(NCCL_[A-Z0-9_]+) ?= ?([\w^:/,.+-]*[\w^])`?")
# a kernel or BIOS setting a sentence names: the words of a host's description, not code
_BOOT_SETTING = re.compile(r"(?<![\w$])`?(?:amd_iommu|intel_iommu|iommu|pci|NPS)=\w+`?", re.I)
# another library's variable a sentence names ("In the UCX_LOG_LEVEL=data logs"): a word of it, not an assignment
_ENV_SETTING = re.compile(r"(?<![\w$])`?[A-Z][A-Z0-9]*_[A-Z0-9_]+=[\w:/,.+-]*`?")
_NCCL_NAMED = re.compile(r"\bnccl|_perf\b|\bbus ?bw\b|\balg ?bw\b|\bbus bandwidth\b", re.I)
MAX_SENTENCE = 300
_CONDITION = re.compile(
    r"\b(?:when|whenever|once|after|if|with)\b(?:\s+(?:I|we))?(?:\s+(?:set|setting|use|using|add|adding|enable|enabling))?\s*`?$",
    re.I,
)
# a drop against the run without it: the words of a comparison, not of a slow run alone
_DROP = re.compile(r"\bdrops?\b|\bdropped\b|\blower\b|\bworse\b|\bslower\b|\bdegrad\w*|\bregress\w*|\bdecreas\w*", re.I)
_TRIED = re.compile(r"\bstill\b|\b(?:not|n't) (?:help|solve|fix|change|improve)"
                    r"|\bno (?:change|effect|difference)\b", re.I)  # fmt: skip
MAX_SAID = 400  # sentences read from one input
MAX_FREE = 4000  # lines looked at to tell a program's source from a post
MAX_LINE = 4000  # a paragraph of a post; a longer line is a program's output, not a sentence


def is_sentence(line: str, item: bool = False) -> bool:
    """Whether a line reads as a sentence of a reporter (or, ``item``, a list item: "* 8 NVLink a800 GPU"):
    words, not code, a table row or a setting."""
    text = re.sub(r"`[^`]*`", "x", line.strip())  # what stands in backticks is quoted, not the line's syntax
    named = _SETTING.search(line)
    text = _SETTING.sub("setting", text)  # a setting named in a sentence is a word of it, not an assignment
    text = _BOOT_SETTING.sub("setting", text)  # "through amd_iommu=off and iommu=pt in grub", "NPS=4"
    text = _ENV_SETTING.sub("setting", text)
    if (
        not text
        or text.startswith("#")
        or len(text) > MAX_LINE
        or text.count("|") >= 2
        or _CODE.search(text)
        or _LOG.search(text)
    ):
        return False
    words = len(_WORD.findall(text)) >= (2 if item or named else 3) or len(_CJK.findall(text)) >= 6
    return bool(_SPEC.match(text)) or words


def _code_input(lines: list[str]) -> bool:
    """A program's source or a configuration file: its prose-like lines are comments and strings."""
    if sum(1 for ln in lines if _PYTHON.match(ln)) >= 2:
        return True
    code = sum(1 for ln in lines if _SOURCE.search(ln))
    return code >= 3 and code * 10 >= 3 * sum(1 for ln in lines if ln.strip())


# the words of a link's own rate, not of what a run got over it
_LINE_RATE = re.compile(
    r"\b(?:highest|maximum|max|peak|line rate|link speed|port speed|link rate|capacity|nominal)\b", re.I
)


def _role(clause: str, sentence: str, bits: bool, beside: str) -> tuple[FigureRole, bool]:
    """What the figure of ``clause`` stands for (``beside``: the words right around it), and whether it is
    NVLink's."""
    nvlink = bool(NVLINK.search(clause))
    if bits and NIC_WORDS.search(beside):
        return "nic", nvlink  # "a 100 Gbps net", "200Gb/s HDR", "EFA is advertised to be 100 Gbps"
    measured = any(rx.search(clause) for rx in (MEASURED, BUSBW, ALGBW)) or bool(op_of(clause))
    if EXPECTED.search(clause) and not re.search(r"\b(?:I|we)\s+(?:got|get|see|saw|observed|measured)\b", clause, re.I):
        return "expected", nvlink
    if bits and NIC_WORDS.search(clause) and not measured:
        return "nic", nvlink
    if nvlink and not measured:
        return "expected", nvlink
    if bits and NIC_WORDS.search(sentence) and not measured and not op_of(sentence):
        return "nic", nvlink
    if bits and NIC_WORDS.search(sentence) and _LINE_RATE.search(clause) and not op_of(clause):
        return "nic", nvlink  # "my NIC is a GB NIC, whose highest bandwidth is around 1000 Mbit/s"
    return "measured", nvlink


def _kind(clause: str, sentence: str) -> FigureKind:
    """busbw or algbw as the clause names it, else as the sentence does where it names one only."""
    for text in (clause, sentence):
        bus, alg = bool(BUSBW.search(text)), bool(ALGBW.search(text))
        if bus != alg:
            return "busbw" if bus else "algbw"
    return "unspecified"


def figures(sentence: str, line: int, paragraph: str = "") -> list[FigureSaid]:
    """Every bandwidth figure of one sentence, each with what its clause says it is; a sentence that names
    neither NCCL nor an op takes another tool named in its ``paragraph`` ("The ib_write_bw has been done ...
    the performance we got is around 85 Gb/s": perftest's figure, not NCCL's)."""
    out = []
    beside_tool = None if _NCCL_NAMED.search(sentence) or op_of(sentence) else OTHER_TOOLS.search(paragraph)
    for clause in clauses(sentence):
        for m in _FIGURE.finditer(clause):
            low, high, scale, _, byte_or_bit = m.group(1), m.group(2), m.group(3).upper(), m.group(4), m.group(5) or ""
            tail = clause[m.end(3) : m.end()].strip()
            bits = byte_or_bit.startswith("b") or (not byte_or_bit and tail.lower().startswith("ps"))
            bits = bits and not tail.startswith("PS")  # GB/S, GBPS: bytes written loud
            binary = (1 << {"K": 10, "M": 20, "G": 30, "T": 40}[scale]) / 1e9  # KiB/s .. TiB/s in GB/s
            value = float(high or low) * (binary if m.group(4) else _UNIT_GBPS[scale]) / (8.0 if bits else 1.0)
            before = clause[: m.start()]
            above = _BOUND_ABOVE.search(before) or "+" in clause[m.start() : m.start(3)]
            bound: Bound = "above" if above else ("below" if _BOUND_BELOW.search(before) else "")
            beside = " ".join(clause[: m.start()].split()[-2:] + clause[m.end() :].split()[:2])
            if EXPECTED.search(clause) and NIC_WORDS.search(clause):
                beside = clause  # the NIC's advertised rate
            role, nvlink = _role(clause, sentence, bits, beside)
            if QUOTED.search(sentence) or COMPARED.search(clause) or re.search(r"=\s*$", before):
                role = "nic" if role == "nic" else "expected"  # a figure quoted from a talk, or computed
            named = (
                OTHER_TOOLS.search(clause) or (None if op_of(clause) else OTHER_TOOLS.search(sentence)) or beside_tool
            )
            role = "measured" if named and role == "nic" else role  # another tool's measurement of the network
            traffic = None if named or _NCCL_NAMED.search(clause) else TRAFFIC.search(clause)
            out.append(
                FigureSaid(
                    line,
                    round(value, 4),
                    m.group(0).strip(),
                    _unit(m.group(0)),
                    _kind(clause, sentence),
                    role,
                    bound,
                    nvlink,
                    scope_of(sentence),
                    _figure_gpus(clause, m.start(), m.end(), sentence),
                    named.group(0) if named else (traffic.group(0) if traffic else ""),
                    sentence[:MAX_SENTENCE],
                    nodes_of(sentence)[0],
                    op_of(sentence),
                )
            )
    return out


def _figure_gpus(clause: str, start: int, end: int, sentence: str) -> int | None:
    """The GPUs a figure (``clause[start:end]``) was measured on: a count right after it ("45GB/s with 4
    GPUs") or right before it ("8 GPU max performance: 28GB/s"), else the one count its clause or sentence
    names."""
    after = _COUNT_GPUS.match(clause[end : end + 30].lstrip(" ,(").removeprefix("with ").removeprefix("on "))
    if after:
        return int(after.group(1))
    before = list(_COUNT_GPUS.finditer(clause[max(0, start - 40) : start]))
    if before:
        return int(before[-1].group(1))
    for text in (clause, sentence):
        counts = {int(g) for g in _COUNT_GPUS.findall(text)}
        if len(counts) == 1:
            return counts.pop()
    return None


def _unit(text: str) -> str:
    m = re.search(r"[KMGT]i?[A-Za-z]*\s*(?:/\s*\w+|ps|PS|per\s+\w+)", text)
    return m.group(0).replace(" ", "") if m else ""


def _gpus(text: str) -> tuple[str, str, int | None]:
    """The GPU as written, its name in the model table, and how many per node: the first GPU named with
    a count, else the first named; two different GPUs named (a comparison) leave the model unsaid, and of
    one GPU named several ways the most specific name is taken ("H100 PCIe", then "our H100s")."""
    found: list[tuple[str, int | None]] = []
    for hit in _GPU.finditer(text):
        name = (hit.group(1) + hit.group(2)).strip(" _-").replace("_", " ")
        name = f"RTX {name}" if name[:1].isdigit() else name  # "GPU: 5090 *8", "Dual 4090"
        before, after = text[max(0, hit.start() - 24) : hit.start()], text[hit.end() : hit.end() + 16]
        counted = _COUNT_BEFORE.search(before) or _COUNT_AFTER.search(after)
        dual = 2 if re.search(r"\b[Dd]ual\s+(?:NVIDIA\s+)?$", before) else None  # "Dual A100 bandwidth slower"
        found.append((name, int(counted.group(1)) if counted else dual))
    inst = instance_of(text)
    if inst is not None:
        found.insert(0, (inst.gpu, inst.gpus))
    if not found:
        return "", "", None
    first, count = next(((n, c) for n, c in found if c), found[0])
    if count is None and (g := _COUNT_GPUS.search(text)):
        count = int(g.group(1))
    count = count or gpu_count_said(text)
    if len({re.sub(r"^RTX\s*", "", n.upper()).split()[0].split("-")[0] for n, _ in found}) > 1:
        return first, "", count
    name = max((n for n, _ in found), key=len)
    model = model_of(name)
    return name, model.name if model is not None else "", count


def read(lines: list[str], taken: Iterable[int], piece: int) -> Block | None:
    """The claims of the sentences among ``lines`` that no other reader took; None where they claim
    nothing (no bandwidth figure, no GPU, no NIC)."""
    skip = set(taken)
    free = [(k, ln) for k, ln in enumerate(lines) if k not in skip and ln.strip()]
    if _code_input([ln for _, ln in free[:MAX_FREE]]):
        return None
    said: list[tuple[int, str]] = []
    rows = prose_tables.sentences(free)  # a pasted table's rows, as the sentences they stand for
    for k, ln in free:
        if k in rows:
            said += [(k, rows[k])] if rows[k] else []
            continue
        plain = _plain(ln)
        timed = not _LOG.search(plain) and scaling.timed(plain)  # "with nGPU=4, one batch takes 2.3s"
        if is_sentence(plain, plain != ln.strip()) or IMAGES.search(ln) or timed:
            said.append((k, plain))
            if len(said) == MAX_SAID:
                break  # a post's words are a few paragraphs: past this, a program's output, and bounded work
    if not said:
        return None
    text = " ".join(t for _, t in said)
    figs = _restated([f for k, t in said for sentence in _SENTENCE.split(t) for f in figures(sentence, k + 1, t)])
    gpu, model, count = _gpus(text)
    nic_kind, nic_rate, nics = nic_of(text, [f.gbps * 8 for f in figs if f.role == "nic"])
    inst = instance_of(text)
    if inst is not None:
        nic_kind, nic_rate, nics = nic_kind or inst.nic, nic_rate or inst.nic_gbit_s, nics or inst.nics or None
    nodes, across = nodes_of(text)
    settings = said_settings(said, piece)
    no_p2p = bool(model) and not next(m for m in MODELS if m.name == model).p2p_pcie  # "Dual 4090 ... slower"
    hosts = hosts_of(text)
    scaled = scaling.read(said, piece)
    # a time stated against the one expected ("24H ETA ... Shouldn't it be around 6hours") says slow as "slower" does
    slow = slow_of(text) or scaling.behind(text, scaled)
    asks = asks_of([s for _, t in said for s in _SENTENCE.split(t)])
    # "AMD EPYC ... Why is p2p performance so slow?"; "why is GPU underutilized ... 50% of both GPUs"
    named = bool(gpu or hosts or GPUS_SAID.search(text) or NVLINK.search(text))  # the GPUs, or their links
    trouble_said = bool(TROUBLE.search(text)) and bool(SPEED.search(text) or TIMING.search(text))
    about_speed = named and (slow or asks or trouble_said or bool(UNDERUSED.search(text)))
    checked = checked_of("\n".join(t for _, t in said))  # a claim within its line: a bullet list is no sentence
    trouble = "gdr-trouble" in checked  # "I have a problem with enabling GDR for my NIC": a question of its own
    links = pcie_said(text)  # "GPU 1 on PCIe 2.0 x4": a claim of its own
    placed = bool(CLAIMS & set(checked))  # how it was set up, changed, or what a profile showed
    stack = stack_of(text, bool(_NCCL_NAMED.search(text) or op_of(text)))
    placed = placed or bool(slow and stack)  # a slow run of UCX or a transfer engine, said in words
    if not (figs or count or nic_rate or (gpu and nodes) or settings or no_p2p or about_speed or scaled or trouble
            or links or placed):  # fmt: skip
        return None  # a GPU named in passing ("# the P100 is GPU0") claims nothing about the run
    used = [k for k, t in said if any(rx.search(t) for rx in (_FIGURE, _GPU, NIC_WORDS, IMAGES, _SETTING))
            or hosts_of(t) or (scaled and k + 1 in scaled.lines)]  # fmt: skip
    if stack:  # a post about another library's run: its figures are that library's, not a collective's busbw
        figs = [replace(x, tool=x.tool or stack) if x.role == "measured" else x for x in figs]
    claim = ProseSaid(piece, tuple(figs), gpu, model, count, nodes, across, op_of(text), size_of(text), nic_kind,
                      nic_rate, nics, bool(NVLS.search(text)), bool(IMAGES.search(text)),
                      bool(SHARED_NIC.search(text)), bool(DUAL_PORT.search(text)), hosts,
                      checked, slow, asks, tuple(k + 1 for k in used), scaled, listed_gpus(said), links,
                      bool(AMD_GPUS.search(text)),
                      tuple(dict.fromkeys(m.group(0) for m in _COPY_TOOLS.finditer(text))), stack,
                      inst.family if inst is not None and not inst.gdr else "", latency_of(text))  # fmt: skip
    first, last = (used or [said[0][0]])[0], (used or [said[-1][0]])[-1]
    cut = f"the sentences read up to line {said[-1][0] + 1} (the first {MAX_SAID})" if len(said) == MAX_SAID else ""
    return Block("prose", first, last + 1, Parts(settings=settings, prose=[claim]), cut=cut, lines=tuple(used))


_COPY_TOOLS = re.compile(r"\b(?:p2pBandwidthLatencyTest|nvbandwidth|bandwidthTest)\b")  # their output decides


def _restated(figs: list[FigureSaid]) -> list[FigureSaid]:
    """A figure in bits that repeats a NIC's rate the text states ("network: 10Gbps" ... "I think the 10Gbps
    bandwidth is not fully used") is that rate again, not a run's result."""
    rates = {f.gbps for f in figs if f.role == "nic"}
    # a figure said against the rate ("busbw exceeds 100Gbps") is a bound of the run's, not the rate again
    return [
        replace(f, role="nic") if f.role == "measured" and not f.bound and f.gbps in rates and _in_bits(f) else f
        for f in figs
    ]


def _in_bits(f: FigureSaid) -> bool:
    """Whether the figure was written in bits ("10Gbps", "100 Gb/s", "1000 Mbit/s"), as a link's rate is."""
    return f.unit[1:2] == "b" or "bit" in f.unit.lower()


def said_settings(said: list[tuple[int, str]], piece: int) -> list[EvidenceSetting]:
    """The NCCL variables of the table that the sentences name with a value: settings the run used, on
    the reporter's word (a sentence comparing a run with and without one names the slow run's setting)."""
    known = table()
    out: dict[str, EvidenceSetting] = {}
    for _, text in said:
        for m in _SETTING.finditer(text):
            if m.group(1) in known:
                how = SAID_WITH_SLOWDOWN if _with_slowdown(text, m.start()) else SAID_SETTING
                out.setdefault(m.group(1), EvidenceSetting(piece, m.group(1), m.group(2), how))
    return list(out.values())


def _with_slowdown(text: str, at: int) -> bool:
    """Whether the sentence of ``text`` holding the setting at ``at`` makes it the condition of a drop it
    names against the run without it ("when setting X=1 I see a large drop"), not one more thing tried ("X=1
    did not help") nor the setup of a run that is slow."""
    start = max((m.end() for m in _SENTENCE.finditer(text, 0, at)), default=0)
    end = next((m.start() for m in _SENTENCE.finditer(text, at)), len(text))
    sentence = text[start:end]
    return bool(
        _CONDITION.search(text[max(start, at - 24) : at]) and _DROP.search(sentence) and not _TRIED.search(sentence)
    )


def _plain(line: str) -> str:
    """A line without its markdown: bullets, emphasis, headings' marks."""
    return re.sub(r"^\s*(?:[*+-]|\d+[.)])\s+", "", line).replace("**", "").strip()
