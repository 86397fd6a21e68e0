"""Wall-clock timing that waits for the accelerator, for the chapters and the benchmarks.

A CUDA call returns before the GPU has finished, so a timer must synchronise the device before it
starts and before it stops; on a CPU there is nothing to wait for. ``time_call`` does exactly
that for one call; ``median_time`` repeats it after warm-up calls (the first calls pay for
allocation and kernel selection), which is how ratios measured side by side stay stable on a
shared machine.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch


def synchronize(device: str | torch.device = "cpu") -> None:
    """Wait until every queued operation on ``device`` has finished (a no-op on a CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], object], device: str | torch.device = "cpu") -> float:
    """Seconds one call of ``fn()`` takes, the device synchronised before and after."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    return time.perf_counter() - t0


def median_time(
    fn: Callable[[], object],
    device: str | torch.device = "cpu",
    *,
    repeats: int = 5,
    warmup: int = 1,
) -> float:
    """Median seconds of ``repeats`` calls of ``fn()`` after ``warmup`` untimed ones."""
    for name, v, lo in (("repeats", repeats, 1), ("warmup", warmup, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    for _ in range(warmup):
        fn()
    return statistics.median(time_call(fn, device) for _ in range(repeats))
