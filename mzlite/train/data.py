"""Training and evaluation data as tensors: checked once (``as_set_tensors``), moved to the device
once, and cut into batches trimmed to their longest real set."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from mzlite._checks import as_float_tensor, check_mask


@dataclass
class SetTensors:
    x: torch.Tensor  # (N, n, d_in)
    mask: torch.Tensor  # (N, n) bool
    y: torch.Tensor  # (N, d_out) float, or (N,) int64 labels
    lengths: torch.Tensor  # (N,) CPU int64: 1 + index of the last real element

    def __len__(self) -> int:
        return self.x.shape[0]


def as_set_tensors(name: str, data, task: str) -> SetTensors:
    """Validate ``data`` (``.x/.mask/.y`` object or ``(x, mask, y)`` tuple) for ``task``."""
    if isinstance(data, (tuple, list)):
        if len(data) != 3:
            raise ValueError(f"{name} as a sequence must be (x, mask, y), got {len(data)} items")
        x, mask, y = data
    else:
        try:
            x, mask, y = data.x, data.mask, data.y
        except AttributeError:
            raise TypeError(
                f"{name} must have .x, .mask, .y tensors or be an (x, mask, y) tuple, "
                f"got {type(data).__name__}"
            ) from None
    x = as_float_tensor(f"{name}.x", x)
    if x.ndim != 3:
        raise ValueError(f"{name}.x must have shape (N, n, d_in), got {tuple(x.shape)}")
    N, n = x.shape[:2]
    if N == 0:
        raise ValueError(f"{name} is empty (N = 0)")
    try:
        mask = check_mask(mask, N, n, x.device)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{name}.{e}") from None
    if not bool(torch.isfinite(x[mask]).all()):
        raise ValueError(f"{name}.x contains NaN or inf values in real (mask=True) elements")
    if not isinstance(y, torch.Tensor):
        y = torch.as_tensor(np.asarray(y))
    if y.ndim == 0 or y.shape[0] != N:
        raise ValueError(
            f"{name}.y must have N = {N} rows like {name}.x, got shape {tuple(y.shape)}"
        )
    if task == "classification":
        if y.is_floating_point() or y.dtype == torch.bool:
            raise TypeError(
                f"{name}.y must hold integer class labels for task='classification', got {y.dtype}"
            )
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1:
            raise ValueError(f"{name}.y must have shape (N,) of class labels, got {tuple(y.shape)}")
        if bool((y < 0).any()):
            raise ValueError(f"{name}.y has negative class labels")
        y = y.long()
    else:
        y = as_float_tensor(f"{name}.y", y)
        if y.ndim == 1:
            y = y[:, None]  # (N, 1): one output, so (B, 1) predictions never broadcast
        if y.ndim != 2:
            raise ValueError(f"{name}.y must have shape (N, d_out) or (N,), got {tuple(y.shape)}")
        if not bool(torch.isfinite(y).all()):
            raise ValueError(f"{name}.y contains NaN or inf values")
    idx = torch.arange(1, n + 1, device=mask.device)  # (n,)
    lengths = (mask * idx).amax(dim=1).cpu()  # (N,) last real position + 1
    return SetTensors(x, mask, y, lengths)


def to_device(d: SetTensors, device: torch.device, dtype: torch.dtype) -> SetTensors:
    """Move a whole dataset once (no per-batch host-to-device copies)."""
    y = d.y.to(device, dtype) if d.y.is_floating_point() else d.y.to(device)
    return SetTensors(d.x.to(device, dtype), d.mask.to(device), y, d.lengths)


def batch_rows(d: SetTensors, idx: torch.Tensor, idx_cpu: torch.Tensor, trim: bool):
    """Rows ``idx`` of ``d``, cut to the longest real set when ``trim`` (columns after the last
    real element of every row are padding everywhere, so dropping them changes no output)."""
    x, mask, y = d.x[idx], d.mask[idx], d.y[idx]  # (B, n, d), (B, n), (B, ...)
    if trim:
        n_b = int(d.lengths[idx_cpu].max())  # computed on the CPU copy: no device sync
        x, mask = x[:, :n_b], mask[:, :n_b]
    return x, mask, y


def param_dtype(model: nn.Module) -> torch.dtype:
    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.get_default_dtype()


def task_of(data) -> str:
    """Integer targets mean classification, floating ones regression."""
    y = data[2] if isinstance(data, (tuple, list)) else data.y
    return "regression" if torch.as_tensor(y).is_floating_point() else "classification"


def model_device(model: nn.Module) -> torch.device:
    """Where the model's parameters live (CPU for a model without any)."""
    for p in model.parameters():
        return p.device
    return torch.device("cpu")
