"""What a log with no failure line of its own still says of its run, read from its text: the post's own words
that it hangs (an issue's title pasted as its first line: "ncclAllReduce deadlocks on 2x RTX ...") or nccl-tests'
output that reached NCCL's init and never printed a result row, with what the words show of the GPUs (PCIe alone)
and the nodes; a title that quotes the socket error of a connection that failed; the post's words that the run
failed where the paste stops before the failure. Text in, an event's line and
fields out; ``nccl.stall`` holds the stalled run's causes, the connection is NCCL's TD072."""

from __future__ import annotations

import re
from collections.abc import Sequence

from topodoctor.nccl.classify import ROOT, Reading, classify
from topodoctor.nccl.cuda_errors import CUDA_STATES
from topodoctor.nccl.grammar import ORIGIN, OWN_LINE
from topodoctor.nccl.socket_causes import FIREWALL_SAID

_HANG = re.compile(
    r"(?i)\b(?:dead[- ]?lock(?:s|ed)?|hangs?|hanging|hung|stucks?|stall(?:s|ed|ing)?|freez(?:es|e|ing)|frozen"
    r"|spins? forever|no (?:activity|progress)|time[sd]? ?outs?|timed out"
    r"|never (?:returns|finishes|completes|ends))\b"
    r"|卡住|卡主|卡着|卡在|卡死|挂起|夯住|无响应"  # Chinese posts: stuck (卡主 its common misspelling), frozen, hung
)
# the line speaks of NCCL's world (a title about something else that hangs is not ours)
_COLLECTIVE = re.compile(
    r"(?i)nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|broadcast|collective|torch\.distributed|\bDDP\b"
    r"|\bFSDP\b|init_process_group|barrier|tensor.parallel|\bTP\s?\d|multi-?GPU|\bdistributed\b"
    r"|\b(?:multiple|several|two|2|four|4|eight|8) (?:GPUs|cards|graphics cards|(?:RTX )?[2345]0[789]0s?)\b"
)
# GPUs joined by PCIe alone, in the post's words (a log's consumer GPUs are the context's ``gpu_names``)
_PCIE = re.compile(
    r"(?i)\bPCIe\b|\bno NVLink\b|without NVLink|\bPHB\b|\bPIX\b|\bPXB\b|GeForce|\bRTX\b|\bTitan\b|\bA40\b"
    r"|\bL40S?\b|\bL4\b|\bA10\b|\bT4\b|\bA[456]000\b|\bAda\b|\b[2345]0[789]0(?: Ti)?s?\b"  # GeForce by number
)
_NODES = re.compile(
    r"(?i)multi-?node|\b(?:two|2|several|multiple|\d+) (?:nodes|machines|hosts|servers)\b|across nodes"
    r"|多机|多节点|跨节点|[两二三四多\d]+(?:个|台)?(?:节点|机器|服务器)"  # Chinese: several machines or nodes
)
_AFTER_TITLE = 200  # the lines under a title read for NCCL's own: a post's log follows its title closely
_TABLE_ROW = re.compile(r"^\s*\d+\s+\d+\s+\w+\s+\w+\s+-?\d+\s+[\d.]+\s+[\d.]+")


_PROSE_LINES = 8  # the reporter's sentences read under a title, before the first line of output
_PROSE_SPAN = 40  # the lines, blank ones among them, that may hold those sentences
# a line that starts as output (NCCL's prefix, a launcher's, a traceback, a log's date or level, the kernel's
# "[1038619.68]"), not a sentence that quotes a message in passing
_OUTPUT = re.compile(
    r"^\s*(?:\[\d+,\d+\]<std\w+>:|\S+:\d+:\d+ \[|NCCL (?:INFO|WARN)|Traceback|File \"|\[rank"
    r"|(?:\|\s*)?\[?\d{4}-\d\d-\d\d|[EWI]\d{4}|\[[WEIF](?:\d{4}| )|\[\s*\d+\.\d+\]|#|INFO|WARN|ERROR)"
)


# an issue template's heading of the reporter's own account of the bug, whose sentences follow it
_BUG_HEADING = re.compile(
    r"^\s*(?:#{1,4}\s*|\*\*)(?:Reproduction|Describe the bug|Bug description|Description|What happened\??"
    r"|Problem Description|The problem)\s*(?:\*\*)?:?\s*$",
    re.I,
)
_TEMPLATE_SPAN = 120  # the lines of a post searched for those headings: its template comes before any log


def _under_headings(lines: Sequence[str], start: int) -> list[int]:
    """The prose lines under an issue template's bug headings, each up to the first line of output."""
    out: list[int] = []
    for h in range(start, min(len(lines), start + _TEMPLATE_SPAN)):
        if not _BUG_HEADING.match(lines[h]):
            continue
        for i in range(h + 1, min(len(lines), h + 1 + _PROSE_SPAN)):
            if _OUTPUT.search(lines[i]) or len(out) >= 2 * _PROSE_LINES:
                break
            if lines[i].strip():
                out.append(i)
    return out


def _prose(lines: Sequence[str], first: int) -> list[int]:
    """The title's line and the prose lines under it, up to the first line of output; and the reporter's account
    under an issue template's bug headings."""
    out = [first]
    title = lines[first].lstrip()
    # a line of output alone on top, set apart by a blank line from sentences under it, is the post's title
    alone = first + 2 < len(lines) and not lines[first + 1].strip() and not _OUTPUT.search(lines[first + 2])
    if (ORIGIN.search(title) or (_OUTPUT.match(title) and not title.startswith("NCCL "))) and not alone:
        return out  # the text starts with output: it has no prose (an NCCL message alone on top is a post's title)
    for i in range(first + 1, min(len(lines), first + 1 + _PROSE_SPAN)):
        if _OUTPUT.search(lines[i]) or len(out) > _PROSE_LINES:
            break
        if lines[i].strip():  # a paragraph's blank lines are no sentence: a post's prose is read by its lines
            out.append(i)
    return out + [i for i in _under_headings(lines, first + 1) if i not in out]


def _nccl_info(line: str) -> bool:
    """NCCL's own INFO line: its words, or the prefix of NCCL 2.2 and older, which print no "NCCL"."""
    return "NCCL INFO" in line or (" INFO " in line and bool(ORIGIN.search(line)))


def title_line(lines: Sequence[str]) -> int | None:
    """The first line with words: where a pasted post puts its title."""
    return next((i for i, ln in enumerate(lines) if ln.strip()), None)


def stalled(lines: Sequence[str], nccl_tests: bool) -> tuple[int, dict[str, str]] | None:
    """Where a log that shows no failure says its run stopped, with what the text shows of the GPUs and nodes:
    the post's first line that says it hangs, or nccl-tests' output that reached NCCL's init (an NCCL INFO line)
    with no result row. None when neither."""
    first = title_line(lines)
    if first is None:
        return None
    title = lines[first]
    where = {"pcie": "1" if _PCIE.search(title) else "", "nodes": "1" if _NODES.search(title) else ""}
    # a title that names no collective still speaks of NCCL's world when NCCL's own lines follow it
    ours = _COLLECTIVE.search(title) or any(_nccl_info(ln) for ln in lines[first + 1 : first + _AFTER_TITLE])
    # the post's words: the title, then its prose up to the first line of output (a sentence may say it hangs)
    for i in _prose(lines, first):
        said = lines[i]
        if _HANG.search(said) and (ours or _COLLECTIVE.search(said)) and not ORIGIN.search(said):
            return i, {"how": "said", "said": said.strip()[:200], **where}
    if nccl_tests and any("NCCL INFO" in ln for ln in lines) and not any(_TABLE_ROW.match(ln) for ln in lines):
        last = max(i for i, ln in enumerate(lines) if ln.strip())
        return last, {"how": "tests", **where}
    return None


# the post's words that its run failed (an error, a crash), where the paste stops before the failure line
_FAILED = re.compile(
    r"(?i)\b(?:fail(?:s|ed|ing|ure)?|errors?|crash(?:es|ed|ing)?|exceptions?|abort(?:s|ed)?|segfaults?"
    r"|core dumped|out of memory|OOM|misaligned address|illegal (?:memory access|instruction|address)"
    r"|(?:does not|doesn't|did not|didn't|cannot|can't|could not|couldn't) (?:work|run|start)"
    r"|not working|unable to (?:run|start|launch|train|use|initiali[sz]e))\b"
)


# a program's own error line ("topodoctor: error: ..."), not the post's words
_LOGGED = re.compile(r"\s*[\w.-]+: (?:error|fatal|warning):")


def _post_says(lines: Sequence[str], words: re.Pattern[str]) -> int | None:
    """The first line of the post's words (its title or the prose under it) that ``words`` match, in NCCL's world
    (the line names it, or NCCL's own lines follow); None when none does."""
    first = title_line(lines)
    if first is None:
        return None
    ours = any(_nccl_info(ln) for ln in lines[first + 1 : first + _AFTER_TITLE])
    for i in _prose(lines, first):
        said = re.split(r"NCCL (?:WARN|INFO)", lines[i])[0]  # the reporter's words, not NCCL's message quoted after
        if _OUTPUT.search(said) or _LOGGED.match(said) or OWN_LINE.search(said):
            continue  # a program's own line (torch's glog "[W socket.cpp:...]", a date), not the post's words
        if words.search(said) and (ours or _COLLECTIVE.search(said)) and not ORIGIN.search(said):
            return i
    return None


def said_failed(lines: Sequence[str]) -> tuple[int, dict[str, str]] | None:
    """Where a log that shows no failure line says in the post's words that the run failed; None when it does not."""
    i = _post_says(lines, _FAILED)
    return None if i is None else (i, {"said": lines[i].strip()[:200]})


# the socket errors (strerror) a title quotes for a connection that failed ("NCCL Network is unreachable /
# Connection refused when initializing DDP"), as strerror spells them; the first named is taken
_SOCKET_ERRORS = {e.lower(): e for e in ("Connection refused", "Network is unreachable", "No route to host",
                                          "Connection timed out")}  # fmt: skip
_SOCKET_ERROR = re.compile(r"(?i)\b(" + "|".join(_SOCKET_ERRORS) + r")\b")


def title_cuda(lines: Sequence[str]) -> tuple[int, dict[str, str]] | None:
    """A first line (a post's title) that quotes a CUDA error whose own words state its cause (``CUDA_STATES``), over
    NCCL's lines or in NCCL's words, in a log that shows no failure line of its own; None when it does not."""
    first = title_line(lines)
    if first is None or ORIGIN.search(lines[first]):
        return None
    title = lines[first].lower()
    # "initialization error" in a title is as often NCCL's or the program's init as CUDA's: not its words alone
    said = next((s for s in CUDA_STATES if s in title and s != "initialization error"), "")
    ours = _COLLECTIVE.search(lines[first]) or any("NCCL INFO" in ln or "nGpus" in ln for ln in lines[first + 1 :])
    return (first, {"msg": said, "said": lines[first].strip()[:200]}) if said and ours else None


def title_connect(lines: Sequence[str]) -> tuple[int, dict[str, str]] | None:
    """A first line (a post's title) that says NCCL's connection failed with a socket error, in a log that
    shows no failure line of its own; None when it does not."""
    first = title_line(lines)
    if first is None or ORIGIN.search(lines[first]) or not _COLLECTIVE.search(lines[first]):
        return None
    m = _SOCKET_ERROR.search(lines[first])
    if m is None:
        return None
    return first, {"err": _SOCKET_ERRORS[m.group(1).lower()], "said": lines[first].strip()[:200]}


_DUPLICATE = re.compile(r"Duplicate GPU detected")  # init.cc's refusal of two ranks on one GPU, in NCCL's words


def title_duplicate(lines: Sequence[str]) -> tuple[int, dict[str, str]] | None:
    """A first line (a post's title) that quotes NCCL's "Duplicate GPU detected", in a log that shows no failure
    line of its own: the run failed on it; None when it does not."""
    first = title_line(lines)
    if first is None or ORIGIN.search(lines[first]) or not _DUPLICATE.search(lines[first]):
        return None
    return first, {"from": "title", "said": lines[first].strip()[:200]}


# the post's words that NCCL ran out of GPU memory ("NCCL init is hitting an OOM condition")
_OOM = re.compile(r"(?i)\b(?:out of (?:GPU |device )?memory|OOM)\b")


def said_oom(lines: Sequence[str]) -> tuple[int, dict[str, str]] | None:
    """Where the post's words say the run ran out of GPU memory; None when they do not."""
    i = _post_says(lines, _OOM)
    return None if i is None else (i, {"from": "words", "said": lines[i].strip()[:200]})


# the post's words that a firewall stands between the nodes ("only ports 40000-40050 are open", "behind a firewall"),
# not those that rule one out ("No firewall is blocking tcp between the nodes", "with the firewall disabled")
_PORTS_OPEN = re.compile(r"(?i)\bports? \d{2,5} ?(?:-|to|~) ?\d{2,5}\b[^.]{0,40}\b(?:open|allowed|blocked)")
_FIREWALL = re.compile(r"(?i)\bfirewalls?\b")
_NO_FIREWALL = re.compile(
    r"(?i)\b(?:no|not|without|disabled?|turned off|stopped|flushed)\b[^.]{0,20}\bfirewall"
    r"|\bfirewalls?\b[^.]{0,12}\b(?:off|disabled|down|stopped|inactive|not)\b"
)


def said_firewall(lines: Sequence[str]) -> tuple[int, dict[str, str]] | None:
    """Where the post's words say a firewall blocks the nodes' ports, in a log whose failure is NCCL's (the caller
    has it); None when they do not."""
    first = title_line(lines)
    for i in _prose(lines, first) if first is not None else []:
        said = _PORTS_OPEN.search(lines[i]) or (_FIREWALL.search(lines[i]) and not _NO_FIREWALL.search(lines[i]))
        if said and not (_OUTPUT.search(lines[i]) or ORIGIN.search(lines[i])):
            return i, {"err": FIREWALL_SAID, "from": "words", "said": lines[i].strip()[:200]}
    return None


# the post's words of CUDA's error 802 (cudaErrorSystemNotReady: NVSwitch's Fabric Manager has not registered the GPUs)
_NOT_READY = re.compile(r"(?i)\b(?:CUDA )?error:? 802\b|system not yet initiali[sz]ed|cudaErrorSystemNotReady")


def said_not_ready(lines: Sequence[str]) -> tuple[int, dict[str, str]] | None:
    """Where the post's words (its title or the sentences under it) say CUDA failed with error 802; None else."""
    i = _post_says(lines, _NOT_READY)
    return None if i is None else (i, {"from": "words", "said": lines[i].strip()[:200]})


_QUOTED = re.compile(r"`([^`]{1,300})`")  # a message the title sets in backticks, as a post quotes a line it got


def title_quoted(lines: Sequence[str]) -> tuple[int, Reading] | None:
    """A first line (a post's title) that quotes, in backticks, an NCCL message of a known kind that is a failure's
    own (``classify``: "fails at init with `Bootstrap : no socket interface found`"); None when it does not."""
    first = title_line(lines)
    if first is None or ORIGIN.search(lines[first]):
        return None
    for m in _QUOTED.finditer(lines[first]):
        if len(m.group(1)) >= 12 and (reading := classify(m.group(1))) is not None and reading.rank == ROOT:
            return first, reading
    return None
