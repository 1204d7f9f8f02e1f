"""The reporter's sentences read for how a job scales: the speeds they state (step times, throughputs, times to
finish, "2.20s/it", "30/s/gpu", "10K wps", "21 seconds per epoch", "34 hours"), each with the GPUs and nodes its
words place it on, the links they name in words ("10Gbps interconnect", "10 gigabit interface", "HDR
InfiniBand", "no NVLink", "nvlink says `<inactive>`", "connected with PCIE16"), and what they say of the count
("fine with 1-6 cards, slow with 7 or 8", "the more machines, the longer", "slower than on a single one").

Called by the prose reader (prose.py) on the lines no other reader took. A speed is a number with a unit of
speed or time and, for a bare time, a word that says what took it (an epoch, an iteration, the run); a count is
the nearest one its part of the sentence names. Chinese posts state counts as ``8卡`` (cards) and ``12机``
(machines): read as the English words are. Bounded by the prose reader's own caps on sentences.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace

from topodoctor.evidence.prose_words import KIND_GBIT_S, WORD_NUMBERS, asks_of, number, slow_of
from topodoctor.model.evidence_scaling import LinkKind, LinkSaid, Parallel, ScalingSaid, SpeedKind, SpeedSaid

_N = r"(\d+(?:\.\d+)?)\s*([kKM](?![a-zA-Z]{2}))?\s*"
_PER_S = r"\s*(?:/|per\s+)\s*(?:s|sec|second)\b"
# (unit, kind, pattern after the number): the first that matches names the unit
_UNITS: tuple[tuple[str, SpeedKind, str], ...] = (
    ("s/it", "step", r"(?:s|sec|seconds?)\s*/\s*(?:it|iter|iteration|step|batch)\b"),
    ("it/s", "rate", r"it(?:er(?:ation)?s?)?" + _PER_S),
    ("samples/s", "rate", r"(?:samples?|images?|imgs?|sequences?|seqs?)" + _PER_S),
    ("tokens/s", "rate", r"(?:tokens?|toks?)" + _PER_S + r"|tgs\b"),
    ("words/s", "rate", r"(?:words?" + _PER_S + r"|wps\b)"),
    ("TFLOPS", "rate", r"T(?:FLOP|flop)s?(?:/s)?\b"),
    ("samples/s", "rate", r"/\s*s\s*/\s*gpu\b"),  # "30/s/gpu": the unit's noun stands earlier in the sentence
)
_ASCII_EDGE = r"(?<![A-Za-z0-9_.])"  # a figure may follow CJK text directly ("3090单卡是51.82s/it")
_SPEED = re.compile(_ASCII_EDGE + _N + "(?:" + "|".join(f"(?P<u{k}>{p})" for k, (_, _, p) in enumerate(_UNITS)) + ")",
                    re.I)  # fmt: skip
# a benchmark's own result line, its label before the figure: tf_cnn_benchmarks' "total images/sec: 1188.51",
# Horovod's synthetic benchmarks' "Img/sec per GPU: 120.3" and "Total img/sec on 16 GPU(s): 1924.8"
_LABELED = re.compile(
    r"\b(images?|imgs?|samples?|sequences?|tokens?)\s*/\s*sec(?:ond)?\b((?:\s+per\s+GPU)?)(?:\s+on\s+\d+\s+GPU\(s\))?"
    r"\s*:\s*(\d+(?:\.\d+)?)",
    re.I,
)
_TIME_UNITS = r"(ms|milliseconds?|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?)\b(?!\s*/)"
_TIME = re.compile(_ASCII_EDGE + r"(\d+(?:\.\d+)?)\s*" + _TIME_UNITS, re.I)
# a time the reporter says the run should take ("Shouldn't it be around 6 hours", "expected about 2 s per step",
# "instead of 3 h"): a stated time longer than it is a shortfall against an expectation, as "slower" is
_EXPECTED_TIME = re.compile(
    r"\b(?:should(?:n'?t| not)?(?:\s+it)?\s+(?:be|take)|expect\w*(?:\s+it)?(?:\s+to\s+(?:be|take))?|instead of"
    r"|rather than)\s+(?:(?:around|about|roughly|approximately|approx\.?|only|under)\s+|~\s*)?(\d+(?:\.\d+)?)\s*"
    + _TIME_UNITS,
    re.I,
)
_BEHIND = 1.2  # a stated time this much over the expected one: past the slack of an estimate
_TO_S = {"ms": 1e-3, "mi": 1e-3, "s": 1.0, "se": 1.0, "mn": 60.0, "h": 3600.0, "hr": 3600.0, "ho": 3600.0, "d": 86400.0,
         "da": 86400.0}  # fmt: skip
_STEP_WORDS = re.compile(r"\b(?:per|each|every|one|a)\s+(?:iteration|step|batch|it)\b"
                         r"|\b(?:iteration|step|batch)[ -]?(?:time|duration)"
                         r"|\brunning time\b", re.I)  # fmt: skip
_TOTAL_WORDS = re.compile(r"\bepochs?\b|\bETA\b|\bto (?:train|finish|complete|conclu\w*|converge)\b|\bin total\b"
                          r"|\b(?:training|the run) (?:takes|took)\b", re.I)  # fmt: skip
_TAKES = re.compile(r"\b(?:takes?|took|taking|estimat\w*|lasts?|needs?)\b", re.I)
_PER_GPU = re.compile(r"per[ _]gpu|/\s*gpu\b|gpu/s(?:ec(?:ond)?)?\b|tokens/gpu", re.I)
_NUM = r"(\d{1,4}|" + "|".join(WORD_NUMBERS) + r")"
_GPU_COUNT = re.compile(
    r"(?<![\w.])" + _NUM + r"(?:\s*(?:or|and|to|-)\s*" + _NUM + r")?\s*(?:[x×*]\s*)?(?:(?:NVIDIA|Tesla|GeForce|"
    r"(?:RTX\s*)?[A-Z]{0,4}\d{2,4}\w*(?:\s*Ti)?|Titan\s*\w+|V100|[\w-]*\d[\w-]*)\s+){0,2}(?:GPUs?|cards?|devices?)\b"
    r"|\bnGPUs?\s*=\s*(\d+)|((?<!\d)\d{1,3}|单|双|两)\s*卡|(?<![\w.])" + _NUM + r"\s*[x×*]?\s*(?:NVIDIA\s+)?"
    r"(?=(?:A|H|B|V|L)\d{2,3}s?\b)",
    re.I,
)
# a node noun typed with one inner letter left out ("2 serer", "4 machnes"): the count still places the figure
_TYPOS = sorted({w[:i] + w[i + 1 :] for w in ("server", "machine") for i in range(1, len(w) - 1)})
_NODE_COUNT = re.compile(
    r"(?<![\w.])" + _NUM + r"(?:\s*(?:or|and|to|-)\s*" + _NUM + r")?[ -](?:(?:compute|gpu|physical|identical|"
    r"\w*\d\w*)[ -]){0,2}(?:nodes?|machines?|servers?|hosts?|instances?|(?:" + "|".join(_TYPOS) + r")s?)\b"
    r"|(?<![\d])(\d{1,3})\s*(?:机|台|节点)",
    re.I,
)
_ONE_NODE = re.compile(r"\b(?:a |one )?(?:single|one)[ -](?:node|machine|server|host|box)\b", re.I)
_SEGMENT = re.compile(r"[;；。]|(?<=[.!?])\s+|,?\s+(?:but|while|whereas|however)\s+|,\s+and\s+", re.I)
# links between nodes said in words: "10Gbps interconnect", "10 gigabit interface", "100G Ethernet", "25GbE",
# "a 100 Mbit LAN"; and the rate after its word: "Network: 95Mbit/s LAN"
_RATE = (
    r"(\d+(?:\.\d+)?)[\s-]*(?:(gigabits?(?:/s)?|G(?:bps|bits?|bE|b)?(?:/s)?)"
    r"|(megabits?|M(?:bps|bits?|b)(?:/s(?:ec)?)?))"
)
_LINK_WORD = (
    r"(ethernet|ether|interconnect|network|links?|interfaces?|NICs?|TCP|connections?|switch(?:es)?|RoCE|"
    r"InfiniBand|IB|EFA|LAN)"
)
_NET_RATE = re.compile(r"(?<![\w.])" + _RATE + r"[ -]?(?:\(\w+\)\s*)?" + _LINK_WORD + r"\b", re.I)
_NET_RATE_AFTER = re.compile(r"\b" + _LINK_WORD + r"\s*[:=]\s*" + _RATE + r"(?![\w/])", re.I)
_GIGABIT = re.compile(r"(?<![\w.-])(?<!\d )gigabit ethernet\b|(?<![\w.])GbE\b", re.I)  # 1 Gb/s, no figure before it
_NET_KIND = re.compile(
    r"\b(?:(HDR100|HDR|NDR200|NDR|EDR|FDR)\s*)?(InfiniBand|(?-i:IB)\b|EFA|RoCE(?:v2)?|Ethernet)|\b(HDR100|HDR|NDR|EDR)\b",
    re.I,
)
_NO_NVLINK = re.compile(
    r"\b(?:no|without|not (?:linked|connected) (?:with|by|through) (?:an? )?)\s*NVLink\w*|\bNVLink\w*\b[^.]{0,40}?"
    r"(?:<?inactive>?|not (?:active|connected|enabled|present|available)|(?:is |are )?down\b)",
    re.I,
)
_PCIE = re.compile(r"\b(?:PCI-?E|PCI Express)\s*(?:x?\d{1,2}|Gen\s*\d)?(?:\s*x\d{1,2})?\b|\bPCIE\d{1,2}\b", re.I)
_WORSE_NODES = re.compile(
    r"\b(?:increas\w*|more|add\w*)\s+(?:the\s+)?(?:number of\s+)?(?:machines|nodes|servers|hosts)\b[^.]{0,80}?"
    r"\b(?:eta|time|slower|longer|increase[sd]?|drops?|grows?|worse)\b"
    r"|\b(?:between|across)\s+(?:the\s+)?(?:machines|nodes|servers)\b[^.]{0,40}\bbottleneck"
    # the job spread to a second machine and slower for it ("using an identical machine ... becomes 10x slower")
    r"|\b(?:another|a second|an identical|an other|one more)\s+(?:machine|node|server|host)\b[^.]{0,120}?"
    r"\b(?:slower|longer|worse)\b"
    r"|\b(?:slower|lower|worse)\s+than (?:on |with |using |in )?(?:a |the )?(?:single|one|1)[ -]?"
    r"(?:machine|node|server|host)\b"
    r"|机器越多[^。，,]{0,10}(?:耗时|时间|越慢|越大|越长)|(?:\d+\s*机\s*>\s*){2,}\d+\s*机",
    re.I,
)
_WORSE_GPUS = re.compile(
    r"\bslower than (?:on |with )?(?:a |one )?(?:single|one)\b(?![ -](?:machine|node|server|host))"
    r"|\b(?:is|it's|was) not (?:any )?faster\b"
    r"|\bno faster\b|\b(?:doesn'?t|does not|do not|don'?t|won'?t|not) (?:speed|scale)\b"
    r"|\bslower (?:with|on|using) (?:more|\d+|two|multiple) (?:GPUs|cards)\b",
    re.I,
)
_GOOD_RANGE = re.compile(r"\b(?:normal\w*|fine|ok(?:ay)?|good|well)\b[^.]{0,40}?\b(\d{1,2})\s*(?:-|~|to)\s*(\d{1,2})\s*"
                         r"(?:GPUs?|cards?)", re.I)  # fmt: skip
_SLOW_FROM = re.compile(r"\bslow\w*\b[^.]{0,40}?\b(\d{1,2})\s*(?:or|and|-|to)?\s*(\d{1,2})?\s*(?:GPUs?|cards?)", re.I)
_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8}
_SLOW_GPU = re.compile(
    r"(?<!\band )(?<!\bbetween )\b(?:GPU|card|device|cuda:?)\s*#?(\d{1,2})\b"
    r"(?:(?!\b(?:GPU|card|device|and|or)\b|[,&/])[^.]){0,20}?\b(?:is|was|seems|looks)\s+(?:\w+\s+)?"
    r"(?:slow\w*|faulty|broken|bad|problematic|defective)"
    r"|\b(" + "|".join(_ORDINALS) + r")\s+(?:card|GPU)\b[^.]{0,20}?\b(?:is|was|seems)\s+(?:\w+\s+)?"
    r"(?:slow\w*|faulty|broken|bad|problematic|defective)",
    re.I,
)
_PARALLEL: tuple[tuple[Parallel, re.Pattern[str]], ...] = (
    ("tensor", re.compile(r"\btensor[ -]?parallel\w*|\btp[_-]?size\b|\s--tp\s+\d|\bTP\s*=\s*\d", re.I)),
    ("sharded", re.compile(r"\bzero[ -]?(?:stage[ -]?)?3\b|\bFSDP\b|\bfully[ -]sharded\b", re.I)),
    ("pipeline", re.compile(r"\bpipeline[ -]?parallel\w*", re.I)),
    (
        "data",
        re.compile(
            r"\bDDP\b|\bDistributedDataParallel\b|\bdata[ -]?parallel\w*|\bzero[ -]?(?:stage[ -]?)?[12]\b", re.I
        ),
    ),
)
_DISTRIBUTED = re.compile(r"\bmulti[ -]?(?:gpu|node|machine)s?\b|\bdistributed\b|\btorchrun\b|\bdeepspeed\b|"
                          r"\baccelerate\b|\bhorovod\b|多机|多卡|分布式", re.I)  # fmt: skip
MAX_SENTENCE = 300


_CJK_COUNTS = {"单": 1, "双": 2, "两": 2}


def _count(m: re.Match[str], groups: Iterable[int]) -> list[int]:
    out = []
    for g in groups:
        if m.group(g) and (n := _CJK_COUNTS.get(m.group(g)) or number(m.group(g))):
            out.append(n)
    return out


def _nearest(rx: re.Pattern[str], text: str, at: int, groups: tuple[int, ...], k: int, of: int) -> int | None:
    """The count of ``rx`` nearest ``at`` in ``text``; "two or three nodes" gives the ``k``-th of ``of`` speeds."""
    best: tuple[int, int] | None = None
    for m in rx.finditer(text):
        counts = _count(m, groups)
        if not counts:
            continue
        n = counts[min(k, len(counts) - 1)] if len(counts) == of and of > 1 else counts[-1]
        dist = at - m.end() if m.end() <= at else (m.start() - at) + 1  # before it first, on a tie
        if best is None or dist < best[0]:
            best = (dist, n)
    return best[1] if best else None


def _place(rx: re.Pattern[str], groups: tuple[int, ...], segment: str, at: int, sentence: str, at_s: int, k: int,
           of: int) -> int | None:  # fmt: skip
    got = _nearest(rx, segment, at, groups, k, of)
    return got if got is not None else _nearest(rx, sentence, at_s, groups, k, of)


_AFTER = re.compile(r"\s*,?\s*(?:on|with|using|for|in|across|over)\s+(?:a |the |all )?", re.I)


def _right_after(rx: re.Pattern[str], groups: tuple[int, ...], rest: str) -> int | None:
    """A count that follows the speed at once ("60 samples/s on 2 nodes"): it is that speed's, whatever stands
    nearer before it."""
    lead = _AFTER.match(rest)
    m = rx.match(rest, lead.end()) if lead else None
    counts = _count(m, groups) if m else []
    return counts[0] if counts else None


def _nodes(segment: str, at: int, sentence: str, at_s: int, k: int, of: int) -> int | None:
    got = _place(_NODE_COUNT, (1, 2, 3), segment, at, sentence, at_s, k, of)
    if got is None and (_ONE_NODE.search(segment) or _ONE_NODE.search(sentence)):
        return 1
    return got


def speeds(sentence: str, line: int, before: SpeedKind | None = None) -> list[SpeedSaid]:
    """Every speed of one sentence, with the GPUs and nodes its part of the sentence names; ``before``: the kind
    of the sentence's predecessor's time, for a bare time ("When using 2 GPUs, it also takes 21 seconds")."""
    out: list[SpeedSaid] = []
    start = 0
    for seg in _SEGMENT.split(sentence):
        if not seg:
            continue
        at_s = sentence.find(seg, start)
        start = max(start, at_s)
        found: list[tuple[int, float, str, SpeedKind, str]] = []
        taken: list[tuple[int, int]] = []
        for m in _SPEED.finditer(seg):
            k = next(i for i in range(len(_UNITS)) if m.group(f"u{i}"))
            unit, kind, _ = _UNITS[k]
            scale = {"k": 1e3, "m": 1e6}.get((m.group(2) or "").lower(), 1.0)
            found.append((m.start(), float(m.group(1)) * scale, unit, kind, m.group(0).strip()))
            taken.append((m.start(), m.end()))
        for m in _LABELED.finditer(seg):
            if not any(a <= m.start() < b for a, b in taken):
                unit = "tokens/s" if m.group(1).lower().startswith("token") else "samples/s"
                found.append((m.start(), float(m.group(3)), unit, "rate", m.group(0).strip()))
                taken.append((m.start(), m.end()))
        for m in _TIME.finditer(seg):
            if any(a <= m.start() < b for a, b in taken):
                continue
            timed: SpeedKind | None = (
                "step" if _STEP_WORDS.search(seg) else "total" if _TOTAL_WORDS.search(seg) else None
            )
            if timed is None and _TAKES.search(seg):
                timed = before
            if timed is None:
                continue
            kind = timed
            unit = m.group(2).lower()
            seconds = _seconds(m.group(1), unit)
            found.append((m.start(), seconds, "s/it" if kind == "step" else "s", kind, m.group(0).strip()))
        found.sort()
        before = next((x[3] for x in reversed(found) if x[3] != "rate"), before)
        for k, (at, value, unit, kind, text) in enumerate(found):
            rest = seg[at + len(text) :]
            gpus = _right_after(_GPU_COUNT, (1, 2, 3, 4, 5), rest)
            gpus = gpus or _place(_GPU_COUNT, (1, 2, 3, 4, 5), seg, at, sentence, at_s + at, k, len(found))
            nodes = _right_after(_NODE_COUNT, (1, 2, 3), rest) or _nodes(seg, at, sentence, at_s + at, k, len(found))
            per_gpu = bool(_PER_GPU.search(text) or _PER_GPU.search(seg[max(0, at - 40) : at + len(text) + 12]))
            out.append(SpeedSaid(line, value, unit, kind, text, per_gpu, gpus, nodes, sentence[:MAX_SENTENCE]))
    return out


def _counts_said(sentence: str, last: tuple[int | None, int | None]) -> tuple[int | None, int | None]:
    """The nodes and GPUs a sentence without a speed names, each kept from ``last`` where it names none; a new node
    count starts a new run, so its GPUs are the sentence's own or none."""
    nodes = next((c[0] for m in _NODE_COUNT.finditer(sentence) if (c := _count(m, (1, 2, 3)))), None)
    nodes = nodes if nodes is not None else (1 if _ONE_NODE.search(sentence) else None)
    gpus = next((c[0] for m in _GPU_COUNT.finditer(sentence) if (c := _count(m, (1, 2, 3, 4, 5)))), None)
    if nodes is not None:
        return nodes, gpus
    return last[0], gpus if gpus is not None else last[1]


def links(text: str, line: int) -> list[LinkSaid]:
    """The links one line names in words."""
    out: list[LinkSaid] = []
    rated = [(m, m.group(1), m.group(2), m.group(3), m.group(4)) for m in _NET_RATE.finditer(text)]
    taken = [m.span() for m, *_ in rated]
    rated += [
        (m, m.group(2), m.group(3), m.group(4), m.group(1))
        for m in _NET_RATE_AFTER.finditer(text)
        if not any(a < m.end() and m.start() < b for a, b in taken)  # the same rate read the other way round
    ]
    for m, value, _giga, mega, said in rated:
        word = said.lower()
        kind: LinkKind = "ethernet" if word.startswith(("ether", "tcp", "lan")) or "GbE" in m.group(0) else "network"
        kind = (
            "infiniband"
            if word in ("infiniband", "ib")
            else "efa"
            if word == "efa"
            else "roce"
            if word == "roce"
            else kind
        )
        gbit_s = float(value) / 1000 if mega else float(value)  # Mb/s said: the rate in Gb/s
        out.append(LinkSaid(line, kind, gbit_s, False, m.group(0).strip()))
    if (giga := _GIGABIT.search(text)) is not None:
        out.append(LinkSaid(line, "ethernet", 1.0, False, giga.group(0)))
    for m in _NET_KIND.finditer(text):
        gen, name = (m.group(1) or m.group(3) or "").upper(), (m.group(2) or "").lower()
        kind = (
            "efa"
            if name == "efa"
            else "roce"
            if name.startswith("roce")
            else "ethernet"
            if name == "ethernet"
            else "infiniband"
        )
        if not any(x.kind == kind for x in out):
            out.append(LinkSaid(line, kind, KIND_GBIT_S.get(gen), False, m.group(0).strip()))
    if (gone := _NO_NVLINK.search(text)) is not None:
        out.append(LinkSaid(line, "nvlink", None, True, gone.group(0).strip()))
    if (pcie := _PCIE.search(text)) is not None:
        out.append(LinkSaid(line, "pcie", None, False, pcie.group(0).strip()))
    return out


def _slow_gpu(text: str) -> tuple[int | None, int | None, int | None, str]:
    """A count sweep that breaks at one card ("normally if I use 1-6 cards, slow when I use 7 or 8"), and a GPU
    named as the slow one: (fine up to, slow from, the GPU's index from 0, the words)."""
    good = _GOOD_RANGE.search(text)
    up_to = int(good.group(2)) if good else None
    slow = _SLOW_FROM.search(text, good.end() if good else 0) if good else None
    from_ = int(slow.group(1)) if slow else None
    named = _SLOW_GPU.search(text)
    if named is not None:
        index = int(named.group(1)) if named.group(1) else _ORDINALS[named.group(2).lower()] - 1
        return up_to, from_, index, named.group(0)
    if up_to is not None and from_ == up_to + 1:
        words = text[good.start() : slow.end()] if good and slow else ""
        return up_to, from_, up_to, words  # the first card added when it turns slow: index up_to from 0
    return up_to, from_, None, ""


def read(said: list[tuple[int, str]], piece: int) -> ScalingSaid | None:
    """What the sentences (``said``: 0-based line, text) say of scaling; None where they say nothing of it."""
    found: list[SpeedSaid] = []
    seen: list[LinkSaid] = []
    used: set[int] = set()
    before: SpeedKind | None = None
    counts: tuple[int | None, int | None] = (None, None)  # the nodes and GPUs the last sentences named
    for k, text in said:
        for sentence in re.split(r"(?<=[.!?])\s+|(?<=。)", text):
            got = speeds(sentence, k + 1, before)
            if not got:
                counts = _counts_said(sentence, counts)
            elif all(x.nodes is None and x.gpus is None for x in got) and counts != (None, None):
                # "then I run this on two nodes. each one is 8 GPU. ... it's speed is X": the run the sentences
                # before it describe
                got = [replace(x, nodes=counts[0], gpus=counts[1]) for x in got]
            if got:
                before = next((s.kind for s in reversed(got) if s.kind != "rate"), before)
                found += got
                used.add(k + 1)
        got_links = links(text, k + 1)
        if got_links:
            seen += got_links
            used.add(k + 1)
    whole = " ".join(t for _, t in said)
    up_to, from_, gpu, words = _slow_gpu(whole)
    parallel: Parallel = next((p for p, rx in _PARALLEL if rx.search(whole)), "")
    worse_nodes, worse_gpus = bool(_WORSE_NODES.search(whole)), bool(_WORSE_GPUS.search(whole))
    counted = {s.nodes for s in found} | {s.gpus for s in found}
    distributed = bool(_DISTRIBUTED.search(whole) or _NODE_COUNT.search(whole) or _GPU_COUNT.search(whole))
    # a link named alone claims something only with its rate or as missing: "PCIe" or "NVLinks" alone is a legend's
    claimed = [x for x in seen if x.gbit_s or x.absent]
    about = distributed and (bool(counted - {None}) or slow_of(whole) or asks_of([t for _, t in said]))
    if not (found or claimed or worse_nodes or worse_gpus or gpu is not None or about):
        return None
    for k, text in said:
        if _WORSE_NODES.search(text) or _WORSE_GPUS.search(text) or (words and words[:20] in text):
            used.add(k + 1)
    return ScalingSaid(piece, tuple(found), tuple(seen), worse_nodes, worse_gpus, up_to, from_, gpu,
                       words[:MAX_SENTENCE], parallel, distributed, tuple(sorted(used)))  # fmt: skip


def _seconds(value: str, unit: str) -> float:
    u = unit.lower()
    return float(value) * _TO_S.get(u[:2] if u[:2] in _TO_S else u[:1], 1.0)


def behind(text: str, scaled: ScalingSaid | None) -> bool:
    """Whether a time the sentences state (an ETA, a time to finish, a step time) is longer than the one they say
    the run should take, of the same kind (a step's against a step's, a whole run's against a whole run's)."""
    if scaled is None:
        return False
    for m in _EXPECTED_TIME.finditer(text):
        kind = "s/it" if _STEP_WORDS.search(text[m.end() : m.end() + 40]) else "s"
        stated = [s.value for s in scaled.speeds if s.unit == kind]
        if stated and min(stated) > _BEHIND * _seconds(m.group(1), m.group(2)):
            return True
    return False


def timed(line: str) -> bool:
    """Whether a line that is not a sentence by the prose reader's test (``nGPU=4`` or ``init_method='env://'``
    reads as code) still states, in words, a speed or a time that something takes, or a job slower with more
    nodes or GPUs: five words or more (a Chinese line: four, a character a word)."""
    latin, cjk = len(re.findall(r"[A-Za-z]{2,}", line)), len(re.findall(r"[\u4e00-\u9fff]", line))
    if not (latin >= 5 or (cjk and latin + cjk >= 4)):
        return False
    return bool(_SPEED.search(line) or (_TIME.search(line) and _TAKES.search(line)) or _WORSE_NODES.search(line)
                or _WORSE_GPUS.search(line))  # fmt: skip
