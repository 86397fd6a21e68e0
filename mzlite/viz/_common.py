"""What the figure modules of ``mzlite.viz`` share."""

from __future__ import annotations

import torch


def _matrix(name: str, M) -> torch.Tensor:
    if not isinstance(M, torch.Tensor):
        M = torch.as_tensor(M)
    if M.ndim != 2:
        raise ValueError(f"{name} must be a matrix of shape (p, q), got shape {tuple(M.shape)}")
    return M.detach().to("cpu", torch.float64)
