"""Any program's NCCL output as plain data: one ``LogFile`` per file, the lines that matter as
``Event``s. Text in, data out; nothing here reads a file or judges.

A file may be one rank's ``NCCL_DEBUG_FILE``, a job's stderr holding every rank (torch prefixes
its lines ``[rank3]:``, mpirun ``[1,3]<stdout>:``, Ray ``(RayWorker pid=..., ip=...)``, pdsh and
srun ``host: `` / ``0: ``, many add a timestamp), or nccl-tests' output. NCCL's own structure is
found wherever it sits in the line: ``host:pid:tid [dev] file.cc:line NCCL WARN msg`` (before
2.5 without ``NCCL``, 1.x ``WARN file.cu:line msg``), the return-code trail ``NCCL INFO
file.cc:line -> N [Async thread]`` (include/checks.h's NCCLCHECK), torch's ``NCCL error ... Last
error:`` block and nccl-tests' ``Test NCCL/CUDA failure``. What a message means is
``nccl.classify``'s part (then the catalogue's); how the run ended, ``nccl.outcome``'s.

NCCL_DEBUG decides how much NCCL says: unset, only the framework's error (and ``Last error:``);
WARN, the version banner and the WARN lines; INFO, all of it (transports, channels, the trail).
"""

from __future__ import annotations

import re

from topodoctor.nccl.account import account
from topodoctor.nccl.catalogue import lookup
from topodoctor.nccl.choices import parse_choices
from topodoctor.nccl.classify import classify
from topodoctor.nccl.continuation import ends_in_trail
from topodoctor.nccl.framework_lines import FrameworkLines
from topodoctor.nccl.gid_lines import listed_gids
from topodoctor.nccl.grammar import ANSI as _ANSI
from topodoctor.nccl.grammar import COMM_ID as _COMM_ID
from topodoctor.nccl.grammar import DIAG as _DIAG
from topodoctor.nccl.grammar import IB_DEV as _IB_DEV
from topodoctor.nccl.grammar import IB_USING as _IB_USING
from topodoctor.nccl.grammar import INIT as _INIT
from topodoctor.nccl.grammar import INIT_RANK as _INIT_RANK
from topodoctor.nccl.grammar import OLD_INFO as _OLD_INFO
from topodoctor.nccl.grammar import OLD_WARN as _OLD_WARN
from topodoctor.nccl.grammar import PROXY_CLOSE as _PROXY_CLOSE
from topodoctor.nccl.grammar import QUOTED_WARN as _QUOTED_WARN
from topodoctor.nccl.grammar import RAY_REPEATED as _RAY_REPEATED
from topodoctor.nccl.grammar import SET_TO as _SET_TO
from topodoctor.nccl.grammar import SOCK_IF as _SOCK_IF
from topodoctor.nccl.grammar import SOCK_IFS_ONLY as _SOCK_IFS_ONLY
from topodoctor.nccl.grammar import SOCK_NAME as _SOCK_NAME
from topodoctor.nccl.grammar import SOCK_USING as _SOCK_USING
from topodoctor.nccl.grammar import TOPO_FILE as _TOPO_FILE
from topodoctor.nccl.grammar import TRAIL as _TRAIL
from topodoctor.nccl.grammar import V1_WARN as _V1_WARN
from topodoctor.nccl.grammar import VERSION as _VERSION
from topodoctor.nccl.grammar import VERSION_TAIL as _VERSION_TAIL
from topodoctor.nccl.grammar import VERSION_WRAPPED as _WRAPPED
from topodoctor.nccl.grammar import WARN as _WARN
from topodoctor.nccl.grammar import origin_host, plugin_unloadable, said_versions
from topodoctor.nccl.info_signs import nccl_wheels, read_signs, shm_rows
from topodoctor.nccl.launcher_lines import DISTRIBUTED_WORDS
from topodoctor.nccl.logfile import NOT_FAILURES, Event, LogFile, dedupe_versions
from topodoctor.nccl.outcome import process
from topodoctor.nccl.stall_lines import (
    said_failed,
    said_firewall,
    said_not_ready,
    said_oom,
    stalled,
    title_connect,
    title_cuda,
    title_duplicate,
    title_line,
    title_quoted,
)
from topodoctor.nccl.tests_run import TestsRun, lone_ranks, tests_run

__all__ = ["Event", "LogFile", "parse_file"]
# where a trail means the call failed all the way up: the init / group thread, a proxy thread
_TOP_TAGS = ("Async thread", "Proxy Thread", "Progress Thread", "Proxy Service", "bthread")
_TOP_SRC = re.compile(r"(?:^|/)(?:init|group|enqueue|collectives)\.(?:cc|cu)$")
_TORCH_RANK = re.compile(r"\[rank(\d+)\]:")
# output of NCCL's world where no line names NCCL: torch.distributed's own words (its store, process groups,
# launcher, rank prefix) and nccl-tests' (its rows: size, count, type, redop; its rank lines; its summary)
_DISTRIBUTED = re.compile(
    r"torch\.distributed|c10d|ProcessGroup|DistBackendError|TCPStore|ChildFailedError|Watchdog caught collective"
    r"|collective operation timeout|Detected mismatch between collectives|^\[rank\d+\]:|TORCH_DISTRIBUTED"
    r"|gloo/transport/"
    r"|\d\s+\d+\s+(?:float|double|half|bfloat16|u?int(?:8|32|64)|fp8_e4m3|fp8_e5m2)\s+(?:sum|prod|min|max|avg|none)\s"
    r"|Avg bus bandwidth|algbw\s+[\d.]+\s+busbw|Out of bounds values|\bRank\s+\d+ (?:Group\s+\d+ )?Pid\s+\d+ on "
)
_PROGRESS = re.compile(
    r"(?i)\b(?:epoch|step|iter(?:ation)?)\b\s*[:=\[]?\s*\d|\bloss(?: is)?\s*[:=]?\s*-?[\d.]"
    r"|\d\s*(?:it|samples|tokens)/s\b|^\s*\d+\s+\d+\s+\w+\s+\w+\s+-?\d+\s+[\d.]+\s+[\d.]+"
    r"|# Avg bus bandwidth"
)


_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'"})


class _Reader(FrameworkLines):
    """NCCL's own lines; every other line goes to ``FrameworkLines.other``."""

    def line(self, i: int, raw: str) -> None:
        # Most of a long log is NCCL INFO: substring checks guard every pattern (a 64 MiB log in seconds)
        line = (_ANSI.sub("", raw) if "\x1b" in raw else raw).rstrip()
        self.nccl_seen = self.nccl_seen or "NCCL" in line
        rank = self.file_rank
        if "[rank" in line and (m := _TORCH_RANK.search(line)):
            rank = int(m.group(1))
            self.ranks[rank] = None
        if "NCCL version" in line or line.endswith("NCCL"):
            self._version(i, line)
        if ": Using " in line and (m := _SOCK_USING.search(line)):  # at INFO, or the line pasted bare
            found = {d.group("name"): d.group("addr") for d in _SOCK_IF.finditer(m.group(1))}
            # an address the poster replaced ("[0]ib0.<ip>"): the interface's name is still NCCL's
            self.socket_ifs.update(found or {n: "" for n in _SOCK_NAME.findall(m.group(1))})
        elif line.lstrip().startswith("[") and _SOCK_IFS_ONLY.match(line):  # the listing wrapped after "Using"
            self.socket_ifs.update({d.group("name"): d.group("addr") for d in _SOCK_IF.finditer(line)})
        if (at := line.find("NCCL INFO ")) >= 0:
            self.seen("INFO")
            self._host(line, at)
            self._info(i, line, line[at + 10 :], rank)
        elif "WARN" in line and (
            (m := _WARN.search(line))
            or (m := _OLD_WARN.search(line) or _V1_WARN.search(line))
            or ((m := _QUOTED_WARN.search(line)) and lookup(m.group("msg").strip()) is not None)
        ):
            self.seen("WARN")
            self._host(line, line.find("WARN"))
            msg = m.group("msg").rstrip("*").strip()
            src = m.group("src") or ""
            # a WARN wrapped at a space reads whole first: its first half may read as a vaguer class
            reading, known = self.outcome.warn(i, line, self.wrapped(i, msg, src, (" ",)) or classify(msg, src), msg)
            known |= {"said": msg, "at": m.group("line") or ""}
            self.add(reading.kind if reading else "warn", i, line, rank, reading, src, known)
        elif " INFO " in line and (m := _OLD_INFO.search(line)):  # NCCL before 2.5: "INFO" without "NCCL"
            self.seen("INFO")
            self._info(i, line, m.group("msg"), rank)
        elif "NCCL DIAG" in line and (
            m := _DIAG.search(line)
        ):  # 2.31+: NCCL's own diagnosis; a known text is its class
            self.seen("INFO")
            reading = classify(m.group("msg"))
            self.add(reading.kind if reading else "diag", i, line, rank, reading, fields={"said": m.group("msg")})
        else:
            self.other(i, line, rank)
            if (
                "NCCL" not in line
                and "nThread" not in line  # nccl-tests' header ("step: 2(factor) warmup iters: 5") is no progress
                and _PROGRESS.search(line)
                and not (self.events and self.events[-1].line_no == i + 1)
            ):
                self.progress_at.append(i)

    def _host(self, line: str, end: int) -> None:
        """The host of NCCL's ``host:pid:tid [dev]`` prefix before position ``end``."""
        prefix = line[: line.find(" [", 0, end)]
        if prefix in self.prefixes:  # one parse per process and thread
            return
        self.prefixes.add(prefix)
        head = prefix.rsplit(" ", 1)[-1].rsplit(":", 3)
        if len(head) >= 3 and head[-1].isdigit() and head[-2].isdigit():
            host = head[-3].rsplit("]", 1)[-1].rsplit(">:", 1)[-1]
            if host:
                self.hosts[host] = None

    def _version(self, i: int, line: str) -> None:
        if m := _VERSION.search(line):
            self.versions[m.group("v") + (m.group("suffix") or "")] = None
            self.seen("VERSION")
        elif (
            (t := _VERSION_TAIL.search(line))  # the banner or torch's text wrapped after "version" or "NCCL"
            and i + 1 < len(self.lines)
            and (m := _WRAPPED[bool(t["word"])].match(self.lines[i + 1]))
        ):
            self.versions[m.group(1) + (m.group(2) or "")] = None
            self.seen("VERSION")

    def _info(self, i: int, line: str, msg: str, rank: int | None) -> None:
        self.outcome.info(i, line, msg)
        if " -> " in msg and (".c" in msg or ".h:" in msg) and (m := _TRAIL.search(msg)):
            tag = m.group("tag") or ""
            self.trail_src[m.group("src").rsplit("/", 1)[-1]] = None
            self.trail_path.append(m.group("src"))
            if tag.startswith(_TOP_TAGS) or _TOP_SRC.search(m.group("src")):
                self.failed_at.append(i)
                if self.per_kind.get("trail", 0) == 0:
                    path = " -> ".join(dict.fromkeys(self.trail_path[-6:]))
                    self.add(
                        "trail",
                        i,
                        line,
                        rank,
                        source=self.trail_path[0],
                        fields={"code": m.group("code"), "tag": tag, "path": path},
                    )
            return
        self.trail_path = []
        if "retrying" in msg:
            self.retry(i, line, rank, msg, process(line))
        if " set " in msg and (m := _SET_TO.search(msg)):
            self.env[m.group(1)] = m.group(2)
            if "set by environment" in msg:
                self.shown.setdefault(m.group(1), (m.group(2), i + 1))
            if m.group(1) == "NCCL_TOPO_FILE":
                self.topo_file = m.group(2)
        if "comm 0x" in msg and (m := _INIT_RANK.search(msg)):
            self.ranks[int(m.group(1) or m.group(3))] = None
        if "commId" in msg and (m := _INIT.search(msg)) and m["bus"] and (c := _COMM_ID.search(msg)):
            self.inits.setdefault((origin_host(line), c["id"]), {}).setdefault(m["rank"], (m["bus"], i))
        if "NET/IB" in msg and "; OOB " in msg:  # the out-of-band (bootstrap's) interface the IB line names
            tail = msg.split("; OOB ", 1)[1]
            self.socket_ifs.update({d.group("name"): d.group("addr") for d in _SOCK_IF.finditer(tail)})
        if "NET/IB" in msg and (m := _IB_USING.search(msg)):  # per host: two hosts may name one device apart
            found = {d.group("dev"): d.group("layer") for d in _IB_DEV.finditer(m.group(1))}
            self.layers.setdefault(origin_host(line), {}).update(found)
        if "NET/Plugin" in msg and (err := plugin_unloadable(msg)):
            self.add("net-plugin-broken", i, line, rank, fields={"err": err})
        if "NET/IB" in msg and "No device found" in msg:
            self.add("ib-no-device", i, line, rank)
        if "topology file" in msg and (m := _TOPO_FILE.search(msg)):
            self.topo_file = m.group(1)


# a launch flag or setting that names one GPU twice: the launcher starts two ranks on it
_TWICE = re.compile(
    r"(?i)(?:--gpus|--devices|\bdevices|\bgpus|gpu_ids|CUDA_VISIBLE_DEVICES)\s*[=: ]\s*[\"'\[(]?\s*(\d+)\s*,\s*\1\b"
)


def one_gpu_twice(inits: dict[tuple[str, str], dict[str, tuple[str, int]]]) -> tuple[str, str, str, int] | None:
    """Two ranks of one communicator whose init lines on one host name one GPU (its bus id): (rank, rank, bus id,
    the later line), or None. NCCL refuses that with "Duplicate GPU detected", a line a paste may lose."""
    for ranks in inits.values():
        seen: dict[str, str] = {}
        for rank, (bus, at) in sorted(ranks.items(), key=lambda kv: kv[1][1]):
            if bus in seen and seen[bus] != rank:
                return seen[bus], rank, bus, at
            seen.setdefault(bus, rank)
    return None


def _named_twice(lines: list[str], events: list[Event]) -> tuple[int, str, str] | None:
    """In a run NCCL refused as invalid usage: the line of a launch or setting naming one GPU twice
    (``--gpus "0,0"``, ``CUDA_VISIBLE_DEVICES=1,1``), the GPU and the words, or None: two ranks then share it."""
    if not any(e.kind == "nccl-error" and e.fields.get("class", "").startswith("invalid usage") for e in events):
        return None
    for i, line in enumerate(lines):
        if m := _TWICE.search(line):
            return i, m.group(1), m.group(0)
    return None


def bare_class(events: list[Event]) -> bool:
    """Whether the failures read are NCCL's error class alone, with no reason beside it."""
    bare = [e for e in events if e.kind not in NOT_FAILURES]
    return bool(bare) and all(e.kind == "nccl-error" and not e.fields.get("reason") for e in bare)


def parse_file(name: str, text: str) -> LogFile:
    """One file's NCCL output."""
    if "\u2018" in text or "\u2019" in text:  # an editor's typographic quotes; NCCL and CUDA print straight ones
        text = text.translate(_QUOTES)
    lines = _RAY_REPEATED.sub("", text).splitlines() if "across cluster]" in text else text.splitlines()
    r = _Reader(name, lines)
    for i, raw in enumerate(lines):
        r.line(i, raw)
    r.stack_end()
    closing = next((i for i, ln in enumerate(lines) if _PROXY_CLOSE.search(ln)), None) if "Close" in text else None
    if (end := ends_in_trail(lines, r.trail_path)) is not None and closing is None:  # a trail of the teardown's
        r.failed_at.append(end)
    r.failed_at += r.outcome.failed_on_warn(r.failed_at, r.progress_at) if closing is None else []
    post_failed = said_failed(lines)  # the post's own words that the run failed, or (below) that it hangs
    ended = post_failed or stalled(lines, False)
    if not r.failed_at and ended is not None and closing is None and any(e.kind not in NOT_FAILURES for e in r.events):
        r.failed_at.append(ended[0])  # a WARN the post's words say the run died of (or hung on)
    elif post_failed is not None and r.outcome.caught_warns[:1] == [title_line(lines)] and not r.failed_at:
        r.failed_at.append(r.outcome.caught_warns[0])  # the post's title is a WARN its source fails after
    r.retries_end(ended is not None)
    # 2.30+ lets ranks share a GPU where NCCL_MULTI_RANK_GPU_ENABLE=1; a run that failed with its WARN cut shows it
    shares = r.env.get("NCCL_MULTI_RANK_GPU_ENABLE", "0").strip() not in ("", "0")
    if r.failed_at and not shares and "duplicate-gpu" not in r.per_kind and (shared := one_gpu_twice(r.inits)):
        a, b, bus, at = shared
        r.add("duplicate-gpu", at, lines[at], r.file_rank, fields={"a": a, "b": b, "dev": bus, "from": "init"})
    if "duplicate-gpu" not in r.per_kind and (named := _named_twice(lines, r.events)) is not None:
        at, dev, said = named
        r.add("duplicate-gpu", at, lines[at], r.file_rank, fields={"dev": dev, "from": "words", "said": said})
    for i, said in r.outcome.symptoms:  # INFO lines that show a known bug of the version (nccl.known_bugs)
        r.add("bug-symptom", i, r.lines[i], r.file_rank, fields={"said": said})
    nccl_lines = [ln for ln in lines if "NCCL" in ln]
    info = r.level == "INFO"
    failing = [e.line_no - 1 for e in r.events if e.kind not in NOT_FAILURES] + r.failed_at
    last_failure = max(failing, default=-1)
    nccl_tests = any(ln.startswith("# nThread") for ln in lines[:40])
    # the failure is NCCL's error class alone, or torch's "Last error:" with nothing after it
    bare = bare_class(r.events) or (bool(r.failed_at) and all(e.kind in NOT_FAILURES for e in r.events))
    if not failing and (quoted := title_connect(lines)) is not None:  # the title quotes the socket error
        r.add("connect", quoted[0], lines[quoted[0]], r.file_rank, fields=quoted[1])
    elif (not failing or bare_class(r.events)) and (quoted_msg := title_quoted(lines)) is not None:
        at, reading = quoted_msg  # the title quotes NCCL's message, whose lines the paste does not hold
        r.add(reading.kind, at, lines[at], r.file_rank, reading, fields={**reading.fields, "from": "title"})
    elif bare and (oom := said_oom(lines)) is not None:  # an error class, its OOM said in words
        r.add("gpu-oom", oom[0], lines[oom[0]], r.file_rank, fields=oom[1])
    elif bare and (wall := said_firewall(lines)) is not None:  # a firewall between the nodes, said
        r.add("connect", wall[0], lines[wall[0]], r.file_rank, fields=wall[1])
    elif not failing and (dup := title_duplicate(lines)) is not None:  # the title quotes NCCL's refusal
        r.add("duplicate-gpu", dup[0], lines[dup[0]], r.file_rank, fields=dup[1])
    elif (not failing or bare) and (ready := said_not_ready(lines)) is not None:  # CUDA's 802, in the post's words
        r.add("fabric-not-ready", ready[0], lines[ready[0]], r.file_rank, fields=ready[1])
    elif not failing and (cuda := title_cuda(lines)) is not None:  # the title quotes a CUDA error that names its cause
        r.add("cuda-failure", cuda[0], lines[cuda[0]], r.file_rank, fields=cuda[1])
    elif (
        not failing
        and (stop := stalled(lines, nccl_tests)) is not None
        and (stop[1]["how"] == "said" or post_failed is None)  # nccl-tests that stopped, said to have crashed
    ):  # no failure line, yet it stopped
        kind = "run-stalled" if stop[1]["how"] == "said" else "tests-stopped"
        r.add(kind, stop[0], lines[stop[0]], r.file_rank, fields=stop[1])
    elif not failing and not r.progress_at and post_failed is not None:  # said, not shown
        r.add("said-failed", post_failed[0], lines[post_failed[0]], r.file_rank, fields=post_failed[1])
    if closing is not None and not r.failed_at:  # the proxy's errors while the ranks shut down, and nothing else
        r.add("proxy-teardown", closing, lines[closing], r.file_rank, fields={"said": lines[closing].strip()[:200]})
    lone = lone_ranks(lines) if "Pid" in text else None  # processes that each ran a test of one rank alone
    if lone is not None:
        r.add("separate-tests", lone[0], lines[lone[0]], None, fields={"procs": str(lone[1]), "hosts": str(lone[2])})
    return LogFile(
        name=name,
        level=r.level,
        versions=tuple(dedupe_versions(r.versions)),
        ranks=tuple(sorted(r.ranks)),
        hosts=tuple(r.hosts),
        events=r.outcome.settled(r.events, bool(r.failed_at)),
        last_errors=tuple(r.last_errors),
        env=r.env,
        account=account(["\n".join(nccl_lines)]) if info else None,
        choices=parse_choices(nccl_lines) if info else None,
        nccl_tests=nccl_tests,
        failed=bool(r.failed_at),
        went_on=last_failure >= 0 and any(p > last_failure for p in r.progress_at),
        worked_first=bool(failing) and any(p < min(failing) for p in r.progress_at),
        link_layers=r.layers,
        socket_ifs=r.socket_ifs,
        launch_nodes=r.launch_nodes,
        overcommit=r.overcommit,
        said_versions=() if r.versions else tuple(said_versions(lines)),
        tests=tests_run(lines) if "_perf" in text or nccl_tests else TestsRun(),
        gpu_names=tuple(r.gpus),
        topo_file=r.topo_file,
        trail_sources=tuple(r.trail_src),
        variables=tuple((n, v, at) for n, (v, at) in r.shown.items()),
        # NCCL 2.2 and older print "INFO" with no "NCCL" before it
        signs=(read_signs([ln for ln in lines if "NCCL" in ln or " INFO " in ln]) if info else ())
        + listed_gids(lines)
        + shm_rows(lines)
        + nccl_wheels(lines),
        speaks=bool(r.events or r.versions or r.failed_at or r.level != "unset")
        or "nccl" in text.lower()
        or any(_DISTRIBUTED.search(ln) or DISTRIBUTED_WORDS.search(ln) for ln in lines),
    )
