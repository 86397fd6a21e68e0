"""Which precision a run uses: bf16 autocast where the CPU computes bf16 natively, float32 else."""

from __future__ import annotations

import torch


def cpu_has_bf16() -> bool:
    """True when this CPU computes bfloat16 dot products natively (AVX512-BF16 or AMX tiles).

    Without them oneDNN emulates bf16 and autocast costs time instead of saving it."""
    probes = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(torch.cpu, p, lambda: False)()) for p in probes)


def resolve_amp(amp: bool | None, device, dtype: torch.dtype = torch.float32) -> bool:
    """The precision ``TrainConfig.amp`` means on ``device`` for a model of ``dtype``: ``None``
    (auto) is True for a float32 model on a CPU with native bf16 (``cpu_has_bf16``), else False."""
    if amp is not None:
        return amp
    return torch.device(device).type == "cpu" and dtype == torch.float32 and cpu_has_bf16()


def autocast(device: torch.device, amp: bool):
    """bf16 autocast on CPU or CUDA; float64 tensors are never cast, so float64 models are exact."""
    on = amp and device.type in ("cpu", "cuda")
    return torch.autocast(device.type if on else "cpu", dtype=torch.bfloat16, enabled=on)
