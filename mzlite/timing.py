"""Wall-clock timing that waits for the accelerator, for the chapters and the benchmarks.

A CUDA call returns before the GPU has finished, so a timer must synchronise the device before it
starts and before it stops; on a CPU there is nothing to wait for. ``time_call`` does exactly
that for one call; ``median_time`` hands the repeating to ``torch.utils.benchmark.Timer`` (its
warm-up, blocks of calls sized to the clock, the median over blocks), which is how ratios
measured side by side stay stable on a shared machine. ``step_costs`` times a forward pass and a
training step of several models so, in interleaved rounds (chapter 4); ``forward_flops`` counts
the operations of a forward pass.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

PHASES = ("forward", "train step")


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

    from torch.utils import benchmark  # imported here: half a second that only timing needs

    timer = benchmark.Timer(
        "fn()", globals={"fn": fn}, timer=clock, num_threads=torch.get_num_threads()
    )
    return timer.blocked_autorange(min_run_time=min_run_time).median


def forward_call(model: nn.Module, x: torch.Tensor, mask: torch.Tensor) -> Callable[[], object]:
    """A call of ``model``'s forward pass on one batch in eval mode, without gradients."""

    def call():
        model.eval()
        with torch.no_grad():
            return model(x, mask)

    return call


def train_step_call(
    model: nn.Module,
    optimiser: torch.optim.Optimizer,
    x: torch.Tensor,
    mask: torch.Tensor,
    y: torch.Tensor,
    amp: bool = False,
) -> Callable[[], object]:
    """A call of one training step as ``fit`` takes it: forward (under bf16 autocast when
    ``amp``), MSE loss in float32, backward, clipping to norm 1, the optimiser's step."""

    def call():
        model.train()
        with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp):
            pred = model(x, mask)
        loss = nn.functional.mse_loss(pred.float(), y)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()

    return call


def step_costs(
    models: dict[str, nn.Module],
    x: torch.Tensor,
    mask: torch.Tensor,
    y: torch.Tensor,
    *,
    rounds: int = 3,
    min_run_time: float = 0.05,
    bf16: bool | None = None,
) -> dict[str, dict[str, float]]:
    """Median seconds of a forward pass and of a training step (AdamW at the paper's rate) of
    each model on one batch: ``{name: {"forward": s, "train step": s}}``, the median over
    ``rounds`` rounds, each timing every (model, phase) with ``median_time`` (at least
    ``min_run_time`` seconds), models interleaved. ``bf16`` (default: on CUDA) adds a "<name>
    (bf16)" row per model, its training step under bf16 autocast."""
    if not isinstance(models, dict) or not models:
        raise ValueError("models must be a non-empty dict {name: model}")
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an int >= 1, got {rounds!r}")
    device = x.device
    if bf16 is None:
        bf16 = device.type == "cuda"
    variants = [(k, m, False) for k, m in models.items()]
    if bf16:
        variants += [(f"{k} (bf16)", m, True) for k, m in models.items()]
    calls = {}
    for name, m, amp in variants:
        opt = torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=1e-5)
        calls[name] = {"forward": forward_call(m, x, mask),
                       "train step": train_step_call(m, opt, x, mask, y, amp)}  # fmt: skip
    times = {name: {p: [] for p in PHASES} for name in calls}
    for _ in range(rounds):
        for name, phases in calls.items():
            for p, fn in phases.items():
                times[name][p].append(median_time(fn, device, min_run_time=min_run_time))
    return {name: {p: statistics.median(v) for p, v in d.items()} for name, d in times.items()}


def forward_flops(model: nn.Module, x: torch.Tensor, mask: torch.Tensor) -> int:
    """Floating-point operations of one forward pass of ``model`` on one batch, counted by
    ``torch.utils.flop_counter`` (matrix products: 2 per multiply-add)."""
    model.eval()  # grad stays on: under no_grad torch's module tracker asserts on these models
    with FlopCounterMode(display=False) as counter:
        model(x, mask)
    return int(counter.get_total_flops())
