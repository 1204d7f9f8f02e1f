"""How a run ended, as its log shows it: the lines that say the run itself failed (a Python
traceback, an abort, a launcher's non-zero exit) and the WARNs a run failed on when nothing else
says so (NCCL's source returns an error after them and the process printed nothing more). One
``Outcome`` per file, fed by ``nccl.parse``'s reader line by line; text in, line numbers out."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from topodoctor.nccl.catalogue import FATAL_KINDS, SOFT_KINDS, from_sources, sourced
from topodoctor.nccl.classify import Reading
from topodoctor.nccl.known_bugs_table import INFO_SIGN
from topodoctor.nccl.launcher_lines import AFTER_FAILURE
from topodoctor.nccl.logfile import Event

# the run's own end, in a log that spoke of NCCL: a Python traceback, an abort, a launcher's non-zero exit
RUN_FAILED = re.compile(
    r"Traceback \(most recent call last\)|terminate called after throwing|Aborted \(core dumped\)"
    r"|Segmentation fault|exited with (?:exit )?code [1-9]|\bexitcode\s*:\s*-?[1-9]|ChildFailedError"
    r"|Fatal Python error|srun: error: .*[Ee]xit(?:ed)? (?:with exit )?code [1-9]|will now abort\(\)"
    r"|NCCL Init failed \(\d+\)"  # NCCL 1.x's tests (test/mpi): ncclCommInitRank's result, then exit
)
# torch's ProcessGroupNCCL saying NCCL failed, whatever the reason (catalogue_extra's torch messages)
TORCH_FAILED = re.compile(
    r"NCCL communicator was aborted|Some NCCL operations have failed or timed out|DistBackendError: NCCL"
    r"|Process group watchdog thread terminated with exception"
)
# ProcessGroupNCCL's own words, which need no "NCCL" in the line: its watchdog thread died, its heartbeat monitor
# gave up on it, or it takes the process down after a failed work (c10d ProcessGroupNCCL.cpp)
TORCH_PG_FAILED = re.compile(
    r"Process group watchdog thread terminated with exception|Heartbeat monitor timed out! Process will be terminated"
    r"|To avoid data inconsistency, we are taking the entire process down"
    r"|failure detected by watchdog at work sequence id"  # 2.5+: its watchdog found a work failed or timed out
)
_PROCESS = re.compile(r"([\w.-]+:\d+):\d+ \[-?\d+\]")
# init.cc's commReclaim: the communicator's teardown failed; it prints this and returns ncclSuccess all the same
TEARDOWN = re.compile(r"commReclaim: cleanup comm \S+ rank -?\d+ failed in destroy/abort")
TEARDOWN_LINES = 3  # the WARN of the call that failed comes right before commReclaim's
# the classes whose message is the failure itself, wherever it is printed
FAILS = frozenset(("torch-mismatch", "nccl-library", "watchdog-timeout", "watchdog-stuck", "efa-memlock"))


def process(line: str) -> str:
    """The ``host:pid`` of NCCL's line prefix; "" when the line has none."""
    m = _PROCESS.search(line)
    return m.group(1) if m else ""


class Outcome:
    """What one file says of the run's end."""

    def __init__(self) -> None:
        self.fatal_warns: list[tuple[int, str]] = []  # WARNs of a class the run fails on: (line, host:pid)
        self.caught_warns: list[int] = []  # WARNs their source fails after, which a caller may have caught
        self.nccl_last: dict[str, int] = {}  # host:pid -> its last NCCL INFO line other than the trail
        self.ended_at: list[int] = []  # the run's own end: a traceback, an abort, a non-zero exit
        self.symptoms: list[tuple[int, str]] = []  # INFO lines that show a known bug: (line, message)
        self.teardown: list[tuple[int, str]] = []  # commReclaim's WARNs of a teardown that failed: (line, host:pid)
        self.plugin_warns: list[tuple[int, str]] = []  # a NET plugin's WARNs its source fails after: (line, host:pid)

    def warn(self, i: int, line: str, reading: Reading | None, msg: str) -> tuple[Reading | None, dict[str, str]]:
        """A WARN line read as ``reading``: the reading, the catalogue's where no narrower class
        read it, and what NCCL's sources say of it; notes whether the run fails on it."""
        if TEARDOWN.search(msg):
            self.teardown.append((i, process(line)))
        reading = reading or from_sources(msg)
        known = sourced(msg) if reading is None or reading.kind in FATAL_KINDS else {}
        if reading is not None and reading.kind in FATAL_KINDS and not reading.fields.get("area"):
            self.fatal_warns.append((i, process(line)))
        elif known.get("fatal"):  # the source fails after it, but a caller may catch it (a plugin NCCL drops)
            self.caught_warns.append(i)
            if reading is not None and reading.kind == "ofi":
                self.plugin_warns.append((i, process(line)))
        return reading, known

    def info(self, i: int, line: str, msg: str) -> None:
        """An NCCL INFO line: NCCL went on, unless it is the return-code trail; or a known bug's sign."""
        if (self.fatal_warns or self.caught_warns) and " -> " not in msg:
            self.nccl_last[process(line)] = i
        if INFO_SIGN in msg:
            self.symptoms.append((i, msg))

    def other(self, i: int, line: str, nccl_seen: bool) -> bool:
        """Any other line: the run's own end, in a log that spoke of NCCL; True when the line is
        torch's own statement that NCCL failed (an aborted communicator, a failed operation)."""
        if nccl_seen and RUN_FAILED.search(line):
            self.ended_at.append(i)
        return ("NCCL" in line and bool(TORCH_FAILED.search(line))) or bool(TORCH_PG_FAILED.search(line))

    def bare(self, i: int, line: str, reading: Reading) -> list[int]:
        """A message pasted without NCCL's prefix: the lines where the run failed on it."""
        if reading.kind in FATAL_KINDS:
            self.fatal_warns.append((i, process(line)))
        return [i] if reading.kind in FAILS else []

    def failed_on_warn(self, failed_at: list[int], progress_at: list[int]) -> list[int]:
        """The WARNs the run failed on where nothing else says it failed: one of a fatal class
        after which the process printed no NCCL line but the trail and the work made no progress;
        or one its source fails after, followed by the run's own end (a traceback, an abort, a
        non-zero exit)."""
        first = min([at for at, _ in self.fatal_warns] + self.caught_warns, default=-1)
        if failed_at or first < 0:
            return []
        if self.ended_at and self.ended_at[-1] > first:
            return [self.ended_at[-1]]
        out = []
        # a plugin NCCL drops is followed by NCCL's lines of the next network (net.cc): a log that ends on the
        # plugin's failure, with no such line, ended there (as the plugin's own classes do, ``FATAL_KINDS``);
        # after work that progressed it is the plugin's teardown, not the run's end
        plugin = self.plugin_warns if not progress_at else []
        for at, proc in self.fatal_warns + plugin:
            if self.at_teardown(at, proc):  # commReclaim reported it and returned success: the work was done
                continue
            if not self.went_on(at, proc) and not any(p > at for p in progress_at):
                out.append(at)
        return out

    def went_on(self, at: int, proc: str) -> bool:
        """Whether the process ``proc`` (host:pid; "" for any) printed an NCCL line past ``at`` other than the trail."""
        return any(i > at and (not proc or not p or p == proc) for p, i in self.nccl_last.items())

    def last_retry(self, i: int, line: str) -> None:
        """A connect retry that reached its count: its next failure is NCCL's error (socket.cc), as a fatal WARN."""
        self.fatal_warns.append((i, process(line)))

    def at_teardown(self, at: int, proc: str) -> bool:
        """Whether the line ``at`` is the call that failed in a communicator's teardown: commReclaim's
        WARN follows it in the same process (init.cc prints it and returns ncclSuccess)."""
        return any(0 < t - at <= TEARDOWN_LINES and (not p or not proc or p == proc) for t, p in self.teardown)

    def settled(self, events: Sequence[Event], failed: bool) -> tuple[Event, ...]:
        """The events as the run's end decides them: in a run that did not fail, a message whose class
        is the failure only when the run ends on it (a plugin that failed and NCCL fell back) is a WARN,
        and so is a call that failed in a communicator's teardown, which commReclaim reports and goes on."""
        if failed:
            return tuple(events)
        return tuple(
            replace(e, kind="warn")
            if e.kind in SOFT_KINDS or e.kind in AFTER_FAILURE or self.at_teardown(e.line_no - 1, process(e.text))
            else e
            for e in events
        )
