"""What a plan may add to the one CUDA timer (``kernels.KernelTimer``): the part it holds, named
here so that the timer needs nothing of the plans (``on_gpu.OnGpu`` is the bandwidth pass's)."""

from __future__ import annotations

from ctypes import c_void_p
from typing import Protocol

from topodoctor.measure.timer.engine import TimerGpu
from topodoctor.measure.timer.protocol import Answer


class Checks(Protocol):
    """What a plan adds to the timer (``on_gpu.OnGpu``): its own start, the data checks on the
    GPU, and the SM tasks it refuses. Each check answers None where it leaves the work to the timer."""

    def hello(self, answer: Answer, task: Answer) -> Answer:
        """The hello's answer, once the copy engine's timer has started CUDA."""

    def same(self, g: TimerGpu, dptr: int, size: int) -> bool | None:
        """Whether a device buffer holds the pattern, checked on the GPU; None: not here."""

    def clear(self, g: TimerGpu, pinned: int, size: int, stream: c_void_p) -> bool:
        """Whether the pinned buffer's zeroing was queued on the GPU."""

    def host_same(self, g: TimerGpu, pinned: int, size: int) -> bool | None:
        """Whether a pinned buffer holds the pattern, checked by the GPU; None: not here."""

    def refusal(self, readers: list[tuple[int, int]]) -> Answer | None:
        """Why an SM task reading through each ``(reader, owner)`` pair cannot run, or None."""
