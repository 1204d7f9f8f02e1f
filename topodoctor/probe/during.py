"""NVML while a measurement runs: the one sampler on a thread beside the ranks or the copy timer.

Each sample reads, per GPU, utilisation, clock-event reasons, power, temperature and SM clock
(``Sampler``), then the compute processes on it: a process seen for the first time is named once
from /proc (owner, parent, command line, Slurm job: ``processes.describe``) and, when it is not
topodoctor's own, kept with the first and last sample that listed it, so one that started and
ended between the reads before and after the run is still seen. Where such a process is on a GPU,
NVML's per-process samples give its share of the SMs. Before the first sample and after the last,
the link error counters: the PCIe replay counter and every NVLink's replay, recovery and CRC
counters, in one field batch per GPU.

Cheap by design: about a dozen NVML calls a GPU per sample (tens of microseconds each, answered
from the driver's own bookkeeping, nothing runs on the GPU), /proc read once per new process, a
sample every 0.2 s, and past ``MAX_TICKS`` samples the interval doubles each time the count does,
so a long run costs a bounded number of samples. The thread is a daemon that ``stop`` ends within
one sample; a reading that fails ends the sampling, never the measurement.

nvidia-smi equivalents: ``--query-compute-apps=pid,used_memory``, ``pmon -s u``,
``--query-gpu=utilization.gpu,clocks_event_reasons.active,power.draw,temperature.gpu,clocks.sm``,
``-q -d PCIE`` (replays), ``nvlink -e`` (error counters).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from topodoctor.core.budget import command_pid
from topodoctor.model.collectives import CollectivesResult
from topodoctor.model.copies import BandwidthResult
from topodoctor.model.during import GpuDuring, RunSampling, SeenProcess
from topodoctor.model.fitness import reason_names
from topodoctor.model.snapshot import ComputeProcess, HostSnapshot
from topodoctor.probe.api import NvmlApi
from topodoctor.probe.gpu import field_values
from topodoctor.probe.processes import Me, describe, listed_processes, whoami
from topodoctor.probe.sampler import GpuSample, Sampler, limits
from topodoctor.probe.sysfs import LiveSysfs, Sysfs

INTERVAL_S = 0.2
MAX_TICKS = 1200  # four minutes at 0.2 s; then the interval doubles each time the count does
WATCHED = ("util", "reasons", "power_w", "temp_c", "sm_mhz")
FI_PCIE_REPLAY = 94  # NVML_FI_DEV_PCIE_REPLAY_COUNTER
# NVML_FI_DEV_NVLINK_ERROR_DL_{REPLAY,RECOVERY,CRC}, per link (scopeId = link)
LINK_COUNTERS = {161: "replay", 162: "recovery", 163: "crc"}
# Why the counters after are missing from what a measurement sent before its closing read: the
# process ended before that read answered (the command says how, where it knows).
CLOSING_UNREAD = "not read: the measuring process ended before its closing read"


@dataclass
class _Seen:
    proc: ComputeProcess
    first_s: float
    last_s: float
    samples: int = 0
    memory: int | None = None
    sm_util: int | None = None


@dataclass
class _Gpu:
    """What the samples of one GPU add up to so far."""

    n: int = 0
    utils: list[int] = field(default_factory=list)
    reasons: dict[str, int] = field(default_factory=dict)
    power_max: float | None = None
    temp_max: int | None = None
    sm_min: int | None = None
    seen: dict[int, _Seen] = field(default_factory=dict)
    own: set[int] = field(default_factory=set)
    util_stamp: int = 0  # the newest per-process utilisation sample read (NVML's microseconds)

    def fold(self, r: GpuSample) -> None:
        self.n += 1
        if r.util is not None:
            self.utils.append(r.util)
        for name in reason_names(r.reasons or 0):
            self.reasons[name] = self.reasons.get(name, 0) + 1
        self.power_max = _most(self.power_max, r.power_w)
        self.temp_max = _most(self.temp_max, r.temp_c)
        if r.sm_mhz is not None:
            self.sm_min = r.sm_mhz if self.sm_min is None else min(self.sm_min, r.sm_mhz)


def _most(a: Any, b: Any) -> Any:
    return b if a is None else (a if b is None else max(a, b))


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class RunWatch:
    """Samples GPUs ``indices`` from ``start`` to ``stop`` on a daemon thread; ``links`` gives
    each GPU's NVLink count (for the counters). ``fs`` reads /proc (the live one by default).
    A process is topodoctor's own when /proc says so (``processes.describe``: the sampling process,
    its children, its Slurm job) or it is one of ``commands`` or their child: a check samples in
    the child its command forked, and the command's copy timer, started early, is its sibling."""

    def __init__(
        self,
        api: NvmlApi,
        indices: list[int],
        links: dict[int, int] | None = None,
        fs: Sysfs | None = None,
        interval_s: float = INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        commands: Iterable[int] = (),
    ) -> None:
        self.api = api
        self.sampler = Sampler(api, indices, interval_s, WATCHED, on_tick=self._fold)
        self.nvml, self.fs, self.links = self.sampler.nvml, fs or LiveSysfs("/"), links or {}
        self.interval_s, self.clock = interval_s, clock
        # processes whose children are topodoctor's too: the command that forked the sampling process
        self.commands = frozenset(commands)
        self.gpus = {i: _Gpu() for i in self.sampler.handles}
        self.known: dict[int, ComputeProcess] = {}  # pid -> as /proc named it, once
        self.me: Me | None = None
        self.t0 = 0.0
        self.ticks = 0
        self.stretch_at = MAX_TICKS
        self.before: dict[int, tuple[dict[str, int], str]] = {}
        self.limits: dict[int, tuple[int | None, float | None]] = {}

    def start(self, thread: bool = True) -> RunWatch:
        """Read the counters and limits, then start sampling on the thread (without ``thread``,
        each sample is the caller's ``sampler.tick()``); returns the watch."""
        for i in self.sampler.handles:
            self.before[i] = self._counters(i)
            lim = limits(self.api, i)
            self.limits[i] = (lim.sm_mhz_max, lim.power_limit_w)
        self.t0 = self.clock()
        if thread:
            self.sampler.start()
        return self

    def stop(self, before_closing: Callable[[RunSampling], None] | None = None) -> RunSampling:
        """Stop sampling, read the counters again, and return what the samples showed.
        ``before_closing`` is handed what the samples showed before that closing read (each GPU's
        counters after: ``CLOSING_UNREAD``): NVML's answer to that read once took the process down
        (SIGSEGV) on the GPU hosts, and the caller can send what it measured first."""
        self.sampler.stop()
        duration = self.clock() - self.t0
        if before_closing is not None:
            before_closing(self._sampling(duration, {i: ({}, CLOSING_UNREAD) for i in self.gpus}))
        closing = {i: self._counters(i) if i not in self.sampler.errors else ({}, "") for i in self.gpus}
        return self._sampling(duration, closing)

    def _sampling(self, duration: float, closing: dict[int, tuple[dict[str, int], str]]) -> RunSampling:
        """What the samples showed, with ``closing``: each GPU's counters after and why not read."""
        error = self.sampler.failure
        gpus = []
        for i, g in sorted(self.gpus.items()):
            after, why = closing[i]
            before, why_before = self.before.get(i, ({}, ""))
            sm_max, power_limit = self.limits.get(i, (None, None))
            foreign = tuple(
                SeenProcess(
                    s.proc.pid,
                    _int(s.proc.uid),
                    s.proc.cmdline if isinstance(s.proc.cmdline, str) else None,
                    s.memory,
                    round(s.first_s, 2),
                    round(s.last_s, 2),
                    s.samples,
                    s.sm_util,
                )
                for s in sorted(g.seen.values(), key=lambda s: (s.first_s, s.proc.pid))
            )
            gpus.append(
                GpuDuring(
                    index=i,
                    samples=g.n,
                    util_max_pct=max(g.utils) if g.utils else None,
                    reasons=dict(g.reasons),
                    power_max_w=g.power_max,
                    power_limit_w=power_limit,
                    temp_max_c=g.temp_max,
                    sm_mhz_min=g.sm_min,
                    sm_mhz_max=sm_max,
                    foreign=foreign,
                    own=len(g.own),
                    counters_before=before,
                    counters_after=after,
                    counters_error=why_before or why,
                    error=self.sampler.errors.get(i, ""),
                )
            )
        tick_ms = 1000 * self.sampler.busy_s / self.ticks if self.ticks else None
        return RunSampling(
            self.interval_s,
            round(duration, 3),
            self.ticks,
            tuple(gpus),
            None if tick_ms is None else round(tick_ms, 3),
            error,
        )

    def _fold(self) -> None:
        """After each sample of the metrics: fold them in, then list the processes."""
        at = self.clock() - self.t0
        for r in self.sampler.readings:
            if r.index in self.gpus:
                self.gpus[r.index].fold(r)
        self.sampler.readings.clear()
        for i, h in self.sampler.handles.items():
            if i not in self.sampler.errors:
                self._processes(i, h, at)
        self.ticks += 1
        if self.ticks >= self.stretch_at:
            self.sampler.interval_s *= 2
            self.stretch_at *= 2

    def _processes(self, i: int, h: str, at: float) -> None:
        """``nvmlDeviceGetComputeRunningProcesses``; someone else's processes kept with when they were
        seen, and their SM share from ``nvmlDeviceGetProcessUtilization``."""
        listed = self.nvml.ask("nvmlDeviceGetComputeRunningProcesses", h, convert=listed_processes)
        if not isinstance(listed, tuple):
            return
        g = self.gpus[i]
        foreign = False
        for pid, mem in listed:
            proc = self.known.get(pid)
            if proc is None:
                if self.me is None:
                    self.me = whoami(self.fs)
                proc = self.known[pid] = describe(self.fs, pid, mem, self.me)
            if proc.ours or pid in self.commands or proc.parent_pid in self.commands:
                g.own.add(pid)
                continue
            foreign = True
            s = g.seen.setdefault(pid, _Seen(proc, at, at))
            s.last_s, s.samples, s.memory = at, s.samples + 1, _most(s.memory, mem)
        if foreign:
            self._process_util(g, h)

    def _process_util(self, g: _Gpu, h: str) -> None:
        got = self.nvml.ask("nvmlDeviceGetProcessUtilization", h, g.util_stamp)
        if not isinstance(got, list):
            return  # no samples since the last read (NOT_FOUND), or not supported: the share stays unread
        for sample in got:
            pid, sm, stamp = _int(sample.get("pid")), _int(sample.get("smUtil")), _int(sample.get("timeStamp"))
            if pid in g.seen and sm is not None:
                g.seen[pid].sm_util = _most(g.seen[pid].sm_util, sm)
            if stamp is not None:
                g.util_stamp = max(g.util_stamp, stamp)

    def _counters(self, i: int) -> tuple[dict[str, int], str]:
        """The PCIe replay counter and each NVLink's replay, recovery and CRC counters
        (``nvmlDeviceGetFieldValues``), and the first reason one could not be read."""
        ids = [[FI_PCIE_REPLAY, 0]] + [[fid, link] for link in range(self.links.get(i, 0)) for fid in LINK_COUNTERS]
        got = field_values(self.nvml, self.sampler.handles[i], ids)
        out: dict[str, int] = {}
        why = ""
        for (fid, scope), v in got.items():
            name = "pcie_replay" if fid == FI_PCIE_REPLAY else f"nvlink{scope}_{LINK_COUNTERS[fid]}"
            if isinstance(v, int):
                out[name] = v
            elif not why:
                why = f"{name}: {v}"
        return out, why


R = TypeVar("R", CollectivesResult, BandwidthResult)


class Watch:
    """A ``RunWatch`` around one measurement, or nothing where there is no NVML binding or host:
    ``with watch(api, snap) as w: res = measure(...)``, then ``w.attach(res)``. Starting or
    stopping never raises: a sampling that could not be made leaves the result as it was."""

    def __init__(self, run: RunWatch | None) -> None:
        self.run = run
        self.sampling: RunSampling | None = None

    def start(self) -> Watch:
        """Start sampling (where there is anything to sample)."""
        try:
            self.run = self.run.start() if self.run is not None else None
        except Exception:  # a reading the boundary did not foresee: no sampling, the measurement goes on
            self.run = None
        return self

    def stop(self, before_closing: Callable[[RunSampling], None] | None = None) -> RunSampling | None:
        """Stop sampling; what it saw, or None (``before_closing``: as ``RunWatch.stop`` takes it)."""
        if self.run is not None and self.sampling is None:
            try:
                self.sampling = self.run.stop(before_closing)
            except Exception:  # as in start: never the measurement's failure
                self.sampling = None
        return self.sampling

    def __enter__(self) -> Watch:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def attach(self, res: R) -> R:
        """The result with what was seen of the GPUs it used (those of its ``activity``)."""
        if self.sampling is None:
            return res
        used = {a.index for a in res.activity}
        gpus = tuple(g for g in self.sampling.gpus if g.index in used)
        return replace(res, during=replace(self.sampling, gpus=gpus))


def watch(api: NvmlApi | None, snap: HostSnapshot | None, gpus: Iterable[int] | None = None) -> Watch:
    """A watch of the live GPUs of ``snap`` (or of ``gpus`` among them) through ``api``, not yet
    started; it watches nothing without an NVML binding or a host."""
    if api is None or snap is None:
        return Watch(None)
    wanted = None if gpus is None else set(gpus)
    live = [g for g in snap.gpus if g.lost is None and (wanted is None or g.index in wanted)]
    links = {g.index: len(g.nvlinks) for g in live}
    try:
        return Watch(RunWatch(api, [g.index for g in live], links, commands=(command_pid(),)))
    except Exception:  # a binding that fails unforeseen asking for handles: no sampling, the measurement goes on
        return Watch(None)
