"""Which precision a run uses: bf16 autocast where the CPU computes bf16 natively, float32 else.

The rule and the measurements behind it
---------------------------------------
``TrainConfig(amp=None)`` (auto) is the one place where the protocol leaves the precision free: a
profile that sets ``amp`` keeps it (the precision is part of its experiment), and every result
records the resolved value (``History.config["amp"]``), so this rule changes no recorded run.

On a CPU, auto resolves to bf16 autocast for a float32 model where the CPU has native bf16 dot
products (``cpu_has_bf16``: AVX512-BF16 or AMX tiles), else float32. Measured with ``fit``, 3
epochs of 1,024 sets, one thread, CPU time, medians of 3 (``benchmarks/fit_speed.py
precision``; the output, date and load are in ``benchmarks/README.md``):

- AMD Zen 4 (AVX512-BF16, no AMX): MZ-Full's step 1.77x faster in bf16 (the levers table).
- Intel Xeon with AMX-BF16, 2026-11-27: MZ-Full 8.24 s in bf16 against 13.64 s in float32
  (1.66x), the Set Transformer 2.48 s against 2.88 s (1.16x), with the fused zonotope
  LayerNorm kernel (``mzlite.nn.fused.zonotope_norm``). Before that kernel float32 was the
  faster one here (issue 36: MZ-Full 9.4 s against 10.8 s), because the eager zonotope
  LayerNorm made float32 copies of the whole generator stream under autocast; a bf16 matmul of
  the model's shapes (20,480 x 64 x 64) runs ~5x faster than float32 on AMX, and the casts
  around the products decide the rest.

So bf16 stays the CPU default where it is native, now measured on both CPUs (issue 36's earlier
run had the Set Transformer faster in float32, 2.7 s against 3.2 s: near enough for the load to
decide, while MZ-Full, 3x its cost, decides a table's time). One precision per CPU for every
model, not one per model: a table compares models trained under one rule, and a per-model choice
would make the precision a difference between its columns. Without native bf16, oneDNN emulates
it and autocast costs time instead of saving it. On CUDA bf16 stays opt-in (``amp=True``)."""

from __future__ import annotations

import torch


def cpu_has_bf16() -> bool:
    """True when this CPU computes bfloat16 dot products natively (AVX512-BF16 or AMX tiles).

    Without them oneDNN emulates bf16 and autocast costs time instead of saving it."""
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, p, lambda: False)()) for p in probes)


def resolve_amp(amp: bool | None, device, dtype: torch.dtype = torch.float32) -> bool:
    """The precision ``TrainConfig.amp`` means on ``device`` for a model of ``dtype``: ``None``
    (auto) is True for a float32 model on a CPU with native bf16 (``cpu_has_bf16``), else False
    (the rule and its measurements: this module's docstring)."""
    if amp is not None:
        return amp
    return torch.device(device).type == "cpu" and dtype == torch.float32 and cpu_has_bf16()


def autocast(device: torch.device, amp: bool):
    """bf16 autocast on CPU or CUDA; float64 tensors are never cast, so float64 models are exact."""
    on = amp and device.type in ("cpu", "cuda")
    return torch.autocast(device.type if on else "cpu", dtype=torch.bfloat16, enabled=on)
