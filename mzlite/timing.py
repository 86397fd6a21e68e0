"""Wall-clock timing that waits for the accelerator, for the chapters and the benchmarks.

A CUDA call returns before the GPU has finished, so a timer must synchronise the device before it
starts and before it stops; on a CPU there is nothing to wait for. ``time_call`` does exactly
that for one call; ``median_time`` hands the repeating to ``torch.utils.benchmark.Timer`` (its
warm-up, blocks of calls sized to the clock, the median over blocks), which is how ratios
measured side by side stay stable on a shared machine.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch.utils import benchmark


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
    fn: Callable[[], object], device: str | torch.device = "cpu", *, min_run_time: float = 0.2
) -> float:
    """Median seconds of one call of ``fn()``, measured by ``torch.utils.benchmark.Timer`` for at
    least ``min_run_time`` seconds after its warm-up, with the device synchronised around every
    block of calls and with torch's current number of threads (the Timer's default is one)."""
    if isinstance(min_run_time, bool) or not isinstance(min_run_time, (int, float)):
        raise TypeError(f"min_run_time must be a number of seconds, got {min_run_time!r}")
    if not min_run_time > 0:
        raise ValueError(f"min_run_time must be > 0 seconds, got {min_run_time!r}")
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")

    def clock() -> float:
        synchronize(device)
        return time.perf_counter()

    timer = benchmark.Timer(
        "fn()", globals={"fn": fn}, timer=clock, num_threads=torch.get_num_threads()
    )
    return timer.blocked_autorange(min_run_time=min_run_time).median
