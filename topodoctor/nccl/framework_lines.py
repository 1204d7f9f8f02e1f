"""The lines of a log that are not NCCL's own prefix: torch's error and its ``Last error:``, torch's CUDA
check, its store and watchdog, nccl-tests' header and failures, a command line's NCCL variables, and
NCCL's messages pasted without their prefix. ``nccl.parse`` reads NCCL's own lines and hands every
other line here. Text in, data out."""

from __future__ import annotations

import re

from topodoctor.nccl.classify import CONSEQUENCE, ROOT, Reading, classify
from topodoctor.nccl.grammar import ANSI as _ANSI
from topodoctor.nccl.grammar import ASSIGNED as _ASSIGNED
from topodoctor.nccl.grammar import BARE_OK as _BARE_OK
from topodoctor.nccl.grammar import CUMEM_HOST_PROBE, NT_RANK
from topodoctor.nccl.grammar import MAPPED as _MAPPED
from topodoctor.nccl.grammar import SET_TO_NEXT as _SET_TO_NEXT
from topodoctor.nccl.launcher_lines import (
    AFTER_FAILURE,
    CONSEQUENCES,
    CRASH_KINDS,
    DISTRIBUTED_WORDS,
    ROOT_CAUSE,
    SRUN_OTHER_END,
    connect_error,
    root_cause,
    root_cause_said,
)
from topodoctor.nccl.launcher_lines import reading as launcher_reading
from topodoctor.nccl.read_state import ReadState
from topodoctor.nccl.torch_reasons import DUMP_SIGNAL, WATCHDOG_STATUS, torch_failed, usage
from topodoctor.nccl.torch_stack import TIMEOUT, frame_kind, stack_kind
from topodoctor.nccl.variables import parse_version, shown

_TORCH_ERROR = re.compile(
    r"NCCL [Ee]rror(?: in: \S+,| \d+:|:) (?P<cls>[a-z][a-z ]*[a-z])(?=\s*\(run with|,|\.?\s*$)"
    r"(?:.*?NCCL version (?P<v>\d+\.\d+\.\d+(?:[+-][\w.]*\w)?))?"  # not a quote or stop pasted after it
)
_NCCL_RESULT = re.compile(r"\bnccl(?P<cls>UnhandledCuda|System|Internal|InvalidArgument|InvalidUsage|Remote)Error\b")
# a launcher's node count: torchrun's, torch.distributed.launch's and accelerate launch's --nnodes (--nnode)
_LAUNCH_NODES = re.compile(r"(?:torchrun|distributed\.launch|launch\.py|accelerate launch)\b.*?--nnodes?[= ](\d+)")
# a launch line's processes per node beside the GPUs it leaves visible ("CUDA_VISIBLE_DEVICES=1 torchrun
# --nproc_per_node=4"): more processes than GPUs put two ranks on one GPU
_PROCS = re.compile(r"--nproc[_-]per[_-]node[= ](\d+)")
_VISIBLE = re.compile(r"\bCUDA_VISIBLE_DEVICES=([\d,]+)(?=\s)")
# mpirun's (and horovodrun's) host list, "-H a:4,b:4" / "--host a,b": the hosts it launches on
_MPI_HOSTS = re.compile(r"\b(?:mpirun|mpiexec|horovodrun)\b.*?\s(?:-H|--?host)[= ](\S+)")
CRASH_STACK_LINES = 40  # the frames a crash handler prints under its banner
_LAST_ERROR = re.compile(r"(?:Last error:|Original reason for failure was:)\s*(?P<rest>.*)$")
# any framework's words for NCCL's error class (horovod "ncclCommInitRank failed: ...", XLA "NCCL operation ...
# failed: ...", TensorFlow "NCCL failure: ..."): a failed call even without torch's header
_NCCL_CLASS = re.compile(
    r"(?i)nccl.*?\b(?P<cls>unhandled cuda error|unhandled system error|internal error|invalid usage"
    r"|remote process exited or there was a network error|(?<=\()invalid argument(?=\)))"  # XLA: "NCCL error 4 (..."
    # the class before the framework's NCCL file (Paddle's "unhandled cuda error at [.../nccl_helper.h:70]")
    r"|\b(?P<before>unhandled cuda error|unhandled system error|internal error|invalid usage) at \[[^\]]*nccl"
)
# the result strings only NCCL's ncclGetErrorString prints, which a framework may quote with NCCL named on a line near
_OWN_CLASS = re.compile(r"(?i)\b(?P<cls>unhandled cuda error|unhandled system error)\b")
_TITLE_SPAN = 40  # the lines under a post's title read for NCCL's name
# torch's c10d store could not bind its port, in c10d's words (Python's own socket says "OSError: [Errno 98]")
# a socket's bare errno is torch's store's where the store's words stand just above it: the word, the lines looked
# back over, and the store's words (the bind in its traceback, the client in init_process_group's, c10d's reason
# under its own "server socket has failed to listen")
_STORE_WORDS = (
    ("Address already in use", 12, ("TCPStore", "init_process_group")),
    ("Connection reset by peer", 12, ("init_process_group", "distributed_c10d")),
    ("EADDRINUSE", 6, ("server socket has failed",)),
)
_STORE_BIND = re.compile(r"\b(?:RuntimeError|DistNetworkError): Address already in use")
# torch's c10d store, which carries NCCL's unique id, failed: rank 0 (the store) died or is unreachable
_STORE = re.compile(r"retrieving ncclUniqueId from \[\d+\] via c10d key-value store.*?got error: (?P<err>.+)$")
# what follows an empty "Last error:": torch's own next message (glog [W1125 ...], a traceback)
_NOT_REASON = re.compile(r"\s*(?:#{1,6}\s|\*\*|```|\[rank|\[[WEIF]\d{4}|Exception raised|frame #|Traceback|\s*File \")")
# torch's own CUDA check (c10_cuda_check_implementation) raised in a rank or in the NCCL watchdog:
# "RuntimeError: CUDA error: ...", "what():  CUDA error: ...", "terminated with exception: CUDA error: ..."
_TORCH_CUDA = re.compile(
    r"(?:[Ee]xception|Error|what\(\)):\s+CUDA error: (?P<msg>.+?)\.?(?=\s*(?:CUDA kernel errors|Compile with|$))"
)
# vLLM's CUDACHECK (csrc/custom_all_reduce.cuh, its peer-to-peer all-reduce) and sglang's copy of it:
# "Failed: Cuda error /path/custom_all_reduce.cuh:307 'invalid argument'"
_CUDART_CHECK = re.compile(r"Failed: (?:Cuda|CUDA) error (?P<where>\S+:\d+) '(?P<msg>[^']+)'")
# (the next line " .. host pid N: Test failure common.cu:891" may be pasted onto it)
_TEST_FAIL = re.compile(
    r"(?:Test )?(?P<what>NCCL|CUDA|Cuda|HIP) failure (?P<where>\S+:\d+) '(?P<text>[^\n]*?)'?"
    r"(?:\s+\.\. \S+ pid \d+: .*)?\s*$"
)
# HIP's error names as rccl-tests print them, and CUDA's words for the same error (hip_runtime_api.h)
HIP_NAMES = {
    "hipErrorInvalidDevice": "invalid device ordinal",
    "hipErrorNoDevice": "no CUDA-capable device is detected",
    "hipErrorOutOfMemory": "out of memory",
    "hipErrorInvalidValue": "invalid argument",
    "hipErrorIllegalAddress": "an illegal memory access was encountered",
    "hipErrorNoBinaryForGpu": "no kernel image is available for execution on the device",
    "hipErrorInvalidDeviceFunction": "invalid device function",
}
_TEST_ABORT = re.compile(r"Test failure \S+:\d+")
# XLA's rendezvous of a process's device threads before NCCL's communicator init (rendezvous.cc): still waiting
_XLA_CLIQUE = re.compile(
    r"waiting for `?initialize clique for rank \d+; clique=devices=\[(?P<devices>[\d, ]+)\].*?"
    r"may be stuck(?:\. Expected (?P<threads>\d+) threads)?"
)
_NT_LIBRARY = re.compile(r"^# nccl-tests version \S+ .*nccl-library=(\d+)|^# NCCL Tests compiled with NCCL (\d+\.\d+)")
_PG_RANK = re.compile(r"\[PG [^\]]*?Rank (?P<rank>\d+)\]")  # torch's prefix of a process group's message
_GPU_NAME = re.compile(r"NVIDIA (?:GeForce|RTX|TITAN|Quadro)[\w -]*?(?=\s*$|\s{2}|\)|,)")


class FrameworkLines(ReadState):
    """The reader of the lines no NCCL prefix carries."""

    def other(self, i: int, line: str, rank: int | None) -> None:
        """A line of no known message: what it still shows (the variables a command line or an environment dump
        sets, a GeForce GPU's name, a test's header)."""
        if "-nnode" in line and (m := _LAUNCH_NODES.search(line)):  # torchrun / torch.distributed.launch / accelerate
            self.launch_nodes = max(self.launch_nodes or 0, int(m.group(1)))
        procs = _PROCS.search(line) if "nproc" in line else None  # most lines are no launch line
        seen = _VISIBLE.search(line) if procs else None
        if procs and seen and int(procs.group(1)) > len([g for g in seen.group(1).split(",") if g]):
            self.overcommit = self.overcommit or line.strip()[:200]
        if ("host" in line or "-H" in line) and (m := _MPI_HOSTS.search(line)):
            hosts = {h.split(":", 1)[0] for h in m.group(1).split(",") if h}
            self.launch_nodes = max(self.launch_nodes or 0, len(hosts))
        if "NCCL_" in line:  # a command line, an environment dump, a job spec's YAML or dict: the variables it sets
            mapped = _MAPPED.match(line)
            for a in [mapped] if mapped else _ASSIGNED.finditer(line):
                self.shown.setdefault(a.group(1), (a.group(2), i + 1))
        if ("GeForce" in line or "RTX" in line or "TITAN" in line) and (m := _GPU_NAME.search(line)):
            self.gpus[m.group(0).strip()] = None
        if line.startswith("#"):
            if (reading := classify(line)) and reading.kind == "wrong-results":
                self.failed_at.append(i)
                self.add(reading.kind, i, line, rank, reading, fields={"said": line.strip("# ")})
            if m := _NT_LIBRARY.search(line):  # nccl-library=22703, or NCCL 1's "compiled with NCCL 1.0"
                code = parse_version(m.group(1)) if m.group(1) else None  # NCCL's version code, either scheme
                self.versions[f"{m.group(2)}.0" if m.group(2) else shown(code) if code else m.group(1)] = None
            if m := NT_RANK.match(line):
                self.ranks[int(m.group(1))] = None
                self.hosts[m.group(3)] = None
            return
        if m := _LAST_ERROR.search(line):
            self._last_error(i, line, m, rank)
            return
        if "retrying" in line and self.retry(i, line, rank, line, ""):  # NCCL's connect retry pasted bare
            return
        if kind := frame_kind(line):  # a frame of torch's stack: which function raised
            self.stack.setdefault(kind, i)
            return
        if m := _TORCH_ERROR.search(line):
            self.failed_at.append(i)
            if m.group("v"):
                self.versions.setdefault(m.group("v"), None)
            self.add("nccl-error", i, line, rank, fields={"class": m.group("cls").strip()})
            return
        if m := _NCCL_RESULT.search(line):
            self.failed_at.append(i)
            self.add("nccl-error", i, line, rank, fields={"class": m.group("cls")})
            return
        if m := _TEST_FAIL.search(line):
            self._test_failure(i, line, m, rank)
            return
        # torch's CUDA error counts in its NCCL watchdog, or in a log that already spoke of NCCL
        distributed = self.nccl_seen or "watchdog" in line or "[rank" in line  # torch's rank prefix: a distributed run
        if "CUDA error: " in line and (distributed or self._run_words()) and (m := _TORCH_CUDA.search(line)):
            self.failed_at.append(i)
            reading = classify(f"Cuda failure '{m.group('msg')}'")
            self.add(reading.kind if reading else "cuda-failure", i, line, rank, reading, fields={"said": m.group(0)})
            return
        if "Failed: " in line and (m := _CUDART_CHECK.search(line)):  # vLLM's and sglang's own CUDA check
            self.failed_at.append(i)
            reading = classify(f"Cuda failure '{m['msg']}'")
            fields = {"said": line.strip(), "where": m["where"]}  # the program's own file, not NCCL's site
            self.add(reading.kind if reading else "cuda-failure", i, line, rank, reading, fields=fields)
            return
        if "ncclUniqueId" in line and (m := _STORE.search(line)):
            self.failed_at.append(i)
            self.add("store", i, line, rank, fields={"err": m.group("err").strip()})
            return
        if "unknown result code" in line and "nccl" in line.lower():  # ncclGetErrorString of a code it lacks
            self.failed_at.append(i)
            self.add("nccl-library", i, line, rank, fields={"unknown": "1", "said": line.strip()[:200]})
            return
        if "Cuda failure" not in line and (m := _NCCL_CLASS.search(line)):
            self.failed_at.append(i)
            self.add("nccl-error", i, line, rank, fields={"class": (m.group("cls") or m.group("before")).lower()})
            return
        if (m := _OWN_CLASS.search(line)) and self._nccl_near(i):
            self.failed_at.append(i)  # TensorFlow's "Internal:  unhandled cuda error" over "[[node .../NcclAllReduce"
            self.add("nccl-error", i, line, rank, fields={"class": m.group("cls").lower()})
            return
        if _TEST_ABORT.search(line):
            self.failed_at.append(i)
            return
        if "initialize clique" in line and (m := _XLA_CLIQUE.search(line)):  # JAX's NCCL init never completed
            devices, threads = len(m["devices"].split(",")), int(m["threads"] or 0)
            fields = {"how": "xla", "said": line.strip()[:200], "nodes": "1" if threads and devices > threads else ""}
            self.add("run-stalled", i, line, rank, fields=fields)
            return
        if "dump signal" in line and (m := DUMP_SIGNAL.search(line)):  # the heartbeat monitor: a rank timed out
            self._dump_signal(i, line, m, rank)
            return
        if what := usage(line):  # torch refused the program's arguments before calling NCCL
            self.failed_at.append(i)
            self.add("torch-usage", i, line, rank, fields={"what": what, "said": line.strip()[:200]})
            return
        if self._launcher(i, line, rank):  # a launcher's or the job's own words for how the run ended
            return
        if self.outcome.other(i, line, self.nccl_seen):  # torch's own words that NCCL failed
            self.failed_at.append(i)
            if said := torch_failed(line):  # what they say of the failure, for a log that holds no other reason
                self.add("torch-failed", i, line, rank, fields=said)
        if i != self.consumed and _BARE_OK.search(line) and (reading := classify(line) or self.wrapped(i, line)):
            if reading.kind == "nvls" and not reading.fields.get("msg") and i + 1 < len(self.lines):
                reading = classify(f"{line} {self.lines[i + 1]}") or reading  # the CUDA error on the next line
                self.consumed = i + 1
            elif (
                reading.kind == "invalid-setting" and i + 1 < len(self.lines) and _SET_TO_NEXT.match(self.lines[i + 1])
            ):
                # enqueue.cc's WARN wrapped before its " NCCL_ALGO was set to X." tail: the setting is the cause
                reading = classify(f"{line} {self.lines[i + 1].strip()}") or reading
                self.consumed = i + 1
            fields = {"said": line.strip()}
            self.failed_at += self.outcome.bare(i, line, reading)
            if reading.kind == "watchdog-timeout":
                who = reading.fields.get("wrank") or ("" if rank is None else str(rank))
                fields |= self._watchdog_pg(i, reading.fields.get("seq", ""), who)
            self.add(reading.kind, i, line, rank, reading, fields=fields)

    def stack_end(self) -> None:
        """A ProcessGroupNCCL stack pasted without its message: what its frames say raised, as the failure.
        Quiet where the message itself was read (the watchdog's words, NCCL's error)."""
        kind = stack_kind(self.stack)
        if not kind or any(e.kind in ("watchdog-timeout", "watchdog-stuck") for e in self.events):
            return
        if kind != TIMEOUT and any(e.kind not in ("warn", "torch-failed") for e in self.events):
            return
        i = self.stack[kind]
        self.failed_at.append(i)
        self.add("watchdog-stack", i, self.lines[i], self.file_rank, fields={"stack": kind})

    def _dump_signal(self, i: int, line: str, m: re.Match[str], rank: int | None) -> None:
        """torch's heartbeat monitor on a rank's timeout: from another rank, this rank's own state of its default
        process group tells whether it had a collective in flight (read with the watchdog's timeouts); from this
        rank, its own watchdog line says more, and is read where pasted."""
        self.failed_at.append(i)
        if m["local"] and any(e.kind == "watchdog-timeout" for e in self.events):
            return
        fields = {"dump": "local" if m["local"] else m["src"], "enqueued": m["enqueued"], "completed": m["completed"]}
        if (who := _PG_RANK.search(line)) or rank is not None:
            fields["wrank"] = who["rank"] if who else str(rank)
        self.add("watchdog-timeout", i, line, rank, Reading("watchdog-timeout", fields, CONSEQUENCE))

    def _launcher(self, i: int, line: str, rank: int | None) -> bool:
        """A launcher's end of a run (``nccl.launcher_lines``): a killed rank, the memory that killed it, the
        store's port or timeout; the elastic agent's failure table and its first observed failure. True when
        the line is read."""
        if "ChildFailedError" in line:  # the elastic agent: a worker failed, whatever NCCL said
            self.failed_at.append(i)
            return False  # the run's own end too (``Outcome``)
        if ROOT_CAUSE in line:
            self.failed_at.append(i)
            fields = root_cause(self.lines, i)
            killed = fields.get("exitcode") == "-9" or "SIGKILL" in fields.get("traceback", "")
            bus = fields.get("exitcode") == "-7" or "SIGBUS" in fields.get("traceback", "")
            said = f"{line.strip()} {root_cause_said(fields)}"
            kind = "process-killed" if killed else "bus-error" if bus else "root-cause"
            self.add(kind, i, said, rank, fields=fields | {"root": "1"})
            return True
        # words any program prints (a GPU's memory full, a socket's timeout) count only in a distributed run
        in_run = self.nccl_seen or bool(self.ranks)
        for word, back, store in () if in_run else _STORE_WORDS:  # a bare errno under torch's store's own words
            if word in line:
                in_run = in_run or any(s in ln for ln in self.lines[max(0, i - back) : i] for s in store)
        # c10d raises a bind's errno as a RuntimeError (DistNetworkError from torch 2.1); Python's own socket: OSError
        in_run = in_run or ("Address already in use" in line and bool(_STORE_BIND.search(line)))
        read = launcher_reading(line, in_run)
        if read is None and not in_run and (crash := launcher_reading(line)) and crash[0] in CRASH_KINDS:
            read = crash if self._run_words() else None  # a backtrace names libnccl after the signal's line
        if read is None:
            return False
        kind, fields = read
        if kind not in AFTER_FAILURE or "Error: " in line:  # a store closed under a rank's call raises
            self.failed_at.append(i)
        if kind == "store-timeout":
            fields |= connect_error(self.lines, i)
        if kind == "process-crash" and any(CUMEM_HOST_PROBE in ln for ln in self.lines[i : i + CRASH_STACK_LINES]):
            fields |= {"frame": CUMEM_HOST_PROBE}  # the crash's own stack: NCCL's probe of cuMem host memory
        self.outcome.other(i, line, self.nccl_seen)  # the run's own end as well
        if "srun: error" in line and any(SRUN_OTHER_END.search(ln) for ln in self.lines if "srun: error" in ln):
            return True  # a task srun killed after another task of the step ended: a consequence
        self.add(kind, i, line, rank, Reading(kind, fields, CONSEQUENCE if kind in CONSEQUENCES else ROOT))
        return True

    def _run_words(self) -> bool:
        """Whether any line of the file names NCCL or a launcher's words of a distributed run (read once)."""
        if self.run_words is None:
            self.run_words = any("nccl" in ln.lower() or DISTRIBUTED_WORDS.search(ln) for ln in self.lines)
        return self.run_words

    def _watchdog_pg(self, i: int, seq: str, rank: str) -> dict[str, str]:
        """The process group of a timed-out work and this rank's last enqueued and completed work on it, from
        torch's next lines (``[PG 1 Rank 0] Exception ... at work: 1580, last enqueued NCCL work: 1580, ...``),
        where printed."""
        for nxt in self.lines[i + 1 : i + 4]:
            if " at work" in nxt and (m := WATCHDOG_STATUS.search(nxt)) and (m["seq"], m["rank"]) == (seq, rank):
                return {k: v for k in ("pg", "enqueued", "completed") if (v := m[k])}
        return {}

    def _nccl_near(self, i: int) -> bool:
        """Whether NCCL is named near line ``i``: within three lines, or, for a post's title, in the lines under it."""
        title = not any(ln.strip() for ln in self.lines[:i])
        near = self.lines[: i + _TITLE_SPAN] if title else self.lines[max(0, i - 3) : i + 4]
        return any("nccl" in ln.lower() for ln in near)

    def _last_error(self, i: int, line: str, m: re.Match[str], rank: int | None) -> None:
        """torch's ``Last error:`` and the line after it, whatever prefix both carry."""
        reason, at, text = m.group("rest").strip(), i, line
        if not reason and i + 1 < len(self.lines):
            prefix = line[: m.start()]
            nxt = _ANSI.sub("", self.lines[i + 1]).rstrip()
            said = nxt[len(prefix) :] if prefix.strip() and nxt.startswith(prefix) else nxt
            # an empty "Last error:" is followed by torch's next message, not NCCL's reason
            if said.strip() and not _NOT_REASON.match(said):
                reason, at, text = said.strip(), i + 1, nxt
                self.consumed = i + 1
        self.failed_at.append(i)
        self.last_errors.append(reason[:300])
        if reading := classify(reason) if reason else None:
            self.add(reading.kind, at, text, rank, reading, fields={"said": reason})

    def _test_failure(self, i: int, line: str, m: re.Match[str], rank: int | None) -> None:
        """nccl-tests: ``host: Test NCCL failure common.cu:1005 'class / ncclGetLastError()'``,
        ``Test CUDA failure common.cu:941 'CUDA error string'`` (older: ``Cuda failure common.cu:891``)."""
        self.failed_at.append(i)
        text = m.group("text").strip().rstrip("'")
        if m.group("what") == "NCCL":
            cls, _, reason = text.removesuffix(" /").partition(" / ")  # "'class / '": no last error
            reading = classify(reason) if reason.strip() else None
            if reading is None:
                self.add("nccl-error", i, line, rank, fields={"class": cls.strip(), "reason": reason.strip()})
                return
        else:  # rccl-tests print HIP's error name (hipGetErrorName): read as the CUDA words it stands for
            text = HIP_NAMES.get(text.split("'")[0].strip(), text)  # a title may go on after the quote
            reading = classify(f"Cuda failure '{text}'")
        assert reading is not None  # a CUDA error string always reads as some CUDA kind
        self.add(reading.kind, i, line, rank, reading, m.group("where"), {"said": text})
