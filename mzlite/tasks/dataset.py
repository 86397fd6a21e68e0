"""The dataset object every task returns: padded sets, their mask and exact targets."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch


@dataclass
class SetData:
    """A padded dataset of sets. ``y`` is ``(N, d_out)`` float32 for regression, ``(N,)`` int64 for
    classification. ``scale`` is the per-set RMS spread divided out by ``normalise="scale"`` (None
    otherwise). ``options`` holds every option the generator used (defaults resolved)."""

    x: torch.Tensor  # (N, n_max, d_in) float32
    mask: torch.Tensor  # (N, n_max) bool
    y: torch.Tensor  # (N, d_out) float32 or (N,) int64
    task: str
    options: dict = field(default_factory=dict)
    seed: int = 0
    scale: torch.Tensor | None = None  # (N,) float32

    def __post_init__(self):
        N = self.x.shape[0]
        xs, ms, ys = tuple(self.x.shape), tuple(self.mask.shape), tuple(self.y.shape)
        if self.x.ndim != 3 or self.x.dtype != torch.float32:
            raise ValueError(
                f"x must be float32 of shape (N, n_max, d_in), got {self.x.dtype} {xs}"
            )
        if self.mask.dtype != torch.bool or ms != xs[:2]:
            raise ValueError(f"mask must be bool of shape {xs[:2]}, got {self.mask.dtype} {ms}")
        if self.y.shape[0] != N or not (
            (self.y.ndim == 2 and self.y.dtype == torch.float32)
            or (self.y.ndim == 1 and self.y.dtype == torch.int64)
        ):
            raise ValueError(
                f"y must be float32 (N, d_out) or int64 (N,) with N={N}, got {self.y.dtype} {ys}"
            )

    def __len__(self) -> int:
        return self.x.shape[0]

    @property
    def d_in(self) -> int:
        return self.x.shape[2]

    @property
    def d_out(self) -> int:
        """Output width: number of regression targets, or number of classes for classification."""
        return int(self.y.max()) + 1 if self.is_classification else self.y.shape[1]

    @property
    def is_classification(self) -> bool:
        return self.y.dtype == torch.int64

    def subset(self, idx) -> SetData:
        """The sets at ``idx`` (anything that indexes a tensor's first dimension)."""
        idx = torch.as_tensor(idx)
        return SetData(
            self.x[idx],
            self.mask[idx],
            self.y[idx],
            self.task,
            dict(self.options),
            self.seed,
            None if self.scale is None else self.scale[idx],
        )

    def points(self, i: int) -> np.ndarray:
        """The real elements of set ``i`` as a float64 array ``(n_i, d_in)`` (padding removed)."""
        if not -len(self) <= i < len(self):
            raise IndexError(f"set index {i} is out of range for {len(self)} sets")
        return self.x[i][self.mask[i]].numpy().astype(np.float64)

    def sets(self) -> list[np.ndarray]:
        """The real elements of every set as float64 arrays ``(n_i, d_in)`` (padding removed)."""
        x, m = self.x.numpy().astype(np.float64), self.mask.numpy()
        return [x[i][m[i]] for i in range(len(self))]
