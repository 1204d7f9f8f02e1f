"""The spin kernel that holds a CUDA stream while timed work is queued behind it, calibrated once
per GPU. Shared by the copy timer and the collectives' ranks, both measuring child processes (it
imports torch)."""

from __future__ import annotations

from collections.abc import Callable

import torch

# torch leaves these unannotated; the signatures below are the ones this module relies on.
_new_stream: Callable[..., torch.cuda.Stream] = torch.cuda.Stream
_new_event: Callable[..., torch.cuda.Event] = torch.cuda.Event
_spin: Callable[[int], None] = torch.cuda._sleep

_cycles_per_ms: dict[int, float] = {}


def hold_cycles(device: int, ms: float) -> int:
    """Spin-kernel cycles that last about ``ms`` on this GPU (calibrated once, ~1 ms)."""
    if device not in _cycles_per_ms:
        s = _new_stream(device=device)
        a, b = _new_event(enable_timing=True), _new_event(enable_timing=True)
        with torch.cuda.device(device), torch.cuda.stream(s):
            _spin(1000)
            a.record(s)
            _spin(2_000_000)
            b.record(s)
        b.synchronize()
        _cycles_per_ms[device] = 2_000_000 / max(a.elapsed_time(b), 1e-3)
    return int(_cycles_per_ms[device] * ms)
