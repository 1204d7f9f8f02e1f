"""The NVSHMEM path of ``collectives --latency``, through nvshmem4py (the ``nvshmem`` extra;
imports torch, and nvshmem4py only when asked to open it).

NVSHMEM starts from a unique id that rank 0 makes and the world's process group carries to the
others (a broadcast of its bytes), every PE bound to its rank's GPU. Point-to-point is a ping-pong
of ``put_signal`` and ``signal_wait`` on the rank's stream (the signal a counter both ranks step
together); all_reduce is NVSHMEM's own on-stream ``reduce`` over the world team. Symmetric
buffers are allocated per size (nvshmem4py moves a whole allocation, not a view of one).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

import torch  # this module is a measuring process: importing torch is its job
import torch.distributed as dist

from topodoctor.measure.collectives.rank.latency import NO_GPU, Bench, Job, first_line
from topodoctor.model.collective_latency import LatencyOp

HEAP_MARGIN = 64 << 20  # NVSHMEM's own use of its symmetric heap, beside our buffers
HEAP_DEFAULT = 1 << 30  # NVSHMEM_SYMMETRIC_SIZE's default: never asked for less


class Nvshmem:
    """One rank's NVSHMEM: opened (imported), started (a collective init), then a cell at a time."""

    def __init__(self, bench: Bench) -> None:
        self.bench = bench
        self.core: Any = None
        self.device_cls: Any = None
        self.versions: dict[str, str] = {}
        self.buffers: dict[tuple[str, int], tuple[torch.Tensor, torch.Tensor]] = {}
        self.signal: Any = None
        self.step = 0  # the ping-pong's signal value, stepped alike on ranks 0 and 1

    def open(self) -> str:
        """Import nvshmem4py and what it needs; '' or why the path is not available."""
        if not self.bench.cuda:
            return NO_GPU
        try:
            import nvshmem.core as core  # the optional extra: absent means "not available"
        except ModuleNotFoundError as exc:
            if not exc.name or exc.name.startswith("nvshmem"):
                return "nvshmem4py is not installed (pip install 'topodoctor[nvshmem]')"
            return f"{exc.name}, which nvshmem4py needs, is not installed (pip install 'topodoctor[nvshmem]')"
        except Exception as exc:  # installed but broken (a library it loads, a version skew)
            return f"nvshmem4py could not load: {first_line(exc)}"
        try:
            from cuda.core import Device  # cuda.core >= 0.5 (nvshmem4py >= 0.3)
        except ImportError:
            try:
                from cuda.core.experimental import Device  # cuda.core 0.4 (nvshmem4py 0.1, 0.2)
            except ImportError as exc:
                return f"cuda.core could not load: {first_line(exc)}"
        self.core, self.device_cls = core, Device
        return ""

    def start(self, agree: Callable[[str], str]) -> str:
        """NVSHMEM's init on every rank, from a unique id rank 0 makes; '' or why not (agreed)."""
        b, core = self.bench, self.core
        top = 2 * max(b.plan.all_reduce_sizes, default=0) + 2 * max(b.plan.p2p_sizes, default=0) + HEAP_MARGIN
        # The spawned ranks share one host: the bootstrap over loopback, no network transport.
        os.environ.setdefault("NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME", "lo")
        os.environ.setdefault("NVSHMEM_REMOTE_TRANSPORT", "none")
        os.environ.setdefault("NVSHMEM_SYMMETRIC_SIZE", str(max(top, HEAP_DEFAULT)))
        why, raw = "", b""
        uid: Any = None
        try:
            import numpy as np  # nvshmem4py's own dependency: present once it imported

            self.device = self.device_cls(b.rank.device.index)
            self.device.set_current()
            uid = core.get_unique_id(empty=b.me != 0)
            raw = bytes(uid._data.view(np.uint8))  # the id's bytes, as NVIDIA's examples send them
        except Exception as exc:  # no id: nobody starts
            why = first_line(exc)
        why = agree(why)
        if why:
            return why
        carried = torch.tensor(list(raw), dtype=torch.uint8, device=b.rank.device)
        dist.broadcast(carried, 0, group=b.rank.control)
        try:
            if b.me != 0:
                uid._data.view(np.uint8)[:] = np.frombuffer(bytes(carried.tolist()), dtype=np.uint8)
            core.init(device=self.device, uid=uid, rank=b.me, nranks=b.n, initializer_method="uid")
            v = core.get_version()
            self.versions = {"nvshmem4py": str(v.nvshmem4py_version), "libnvshmem": str(v.libnvshmem_version)}
            sig = core.tensor((1,), dtype=torch.int64)
            sig.zero_()
            from nvshmem.core.interop.torch import tensor_get_buffer  # the Buffer behind a tensor

            self.signal = tensor_get_buffer(sig)[0]
            self._sig = sig
            b.rank.synced()
        except Exception as exc:  # a rank that failed here: its peers hear it now
            why = first_line(exc)
        return agree(why)

    def stream(self) -> Any:
        """The rank's current torch stream, as nvshmem4py takes one."""
        return self.core.NvshmemStream(torch.cuda.current_stream())

    def pair(self, op: LatencyOp, size: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Two symmetric buffers of this size (an allocation is collective: every rank asks)."""
        key = (op, size)
        if key not in self.buffers:
            count = max(size // 4, 1)
            self.buffers[key] = (
                self.core.tensor((count,), dtype=torch.float32),
                self.core.tensor((count,), dtype=torch.float32),
            )
        return self.buffers[key]

    def prepare(self, op: LatencyOp, size: int) -> Job:
        """The cell's job: buffers allocated and filled, the calls built."""
        b, core = self.bench, self.core
        count = max(size // 4, 1)
        src, dst = self.pair(op, size)
        src.copy_(b.rank.pattern(b.me, count))
        b.rank.synced()
        if op == "all_reduce":
            team = core.Teams.TEAM_WORLD

            def call() -> None:
                core.reduce(team, dst, src, "sum", stream=self.stream())

            def job() -> tuple[float, float]:
                us = b.eager_us(call)
                if not b.plan.check:
                    return us, math.nan
                dst.fill_(-1.0)
                b.line_up()
                call()
                return us, b.wrong(dst, b.rank.sum_pattern(count))

            return job
        pong = self._ping_pong(src, dst)

        def job_p2p() -> tuple[float, float]:
            return b.eager_us(pong, 2), b.pong_wrong(pong, dst, count)

        return job_p2p

    def _ping_pong(self, send: torch.Tensor, recv: torch.Tensor) -> Callable[[], None]:
        b, core = self.bench, self.core
        peer = b.peer
        if peer is None:
            return lambda: None
        ge, put = core.ComparisonType.CMP_GE, core.SignalOp.SIGNAL_SET

        def pong() -> None:
            self.step += 1
            s = self.stream()
            if b.me == 0:
                core.put_signal(recv, send, self.signal, self.step, put, remote_pe=peer, stream=s)
                core.signal_wait(self.signal, self.step, ge, stream=s)
            else:
                core.signal_wait(self.signal, self.step, ge, stream=s)
                core.put_signal(recv, send, self.signal, self.step, put, remote_pe=peer, stream=s)

        return pong
