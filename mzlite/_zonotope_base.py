"""What ``mzlite.zonotope``'s two classes share: the batched centre-and-generators layout
(``_CenterAndGenerators``: batch shape, indexing, ``to``, ``detach``) and the helpers for
broadcasting, random sampling and scalars."""

from __future__ import annotations

from numbers import Real

import torch


def _broadcast(names: tuple[str, str], a: torch.Size, b: torch.Size) -> torch.Size:
    try:
        return torch.broadcast_shapes(a, b)
    except RuntimeError as e:
        raise ValueError(
            f"batch shapes of {names[0]} {tuple(a)} and {names[1]} {tuple(b)} "
            "are not broadcast-compatible"
        ) from e


def _make_generator(generator: torch.Generator | None, seed: int | None) -> torch.Generator | None:
    if generator is not None and seed is not None:
        raise ValueError("pass either generator or seed, not both")
    if seed is not None:
        return torch.Generator().manual_seed(int(seed))
    return generator


def _uniform_signed(shape, generator, like: torch.Tensor) -> torch.Tensor:
    """Uniform samples in [-1, 1]; drawn on the generator's device (CPU for a seed) then moved."""
    dev = generator.device if generator is not None else like.device
    u = torch.rand(shape, generator=generator, dtype=like.dtype, device=dev)
    return (2 * u - 1).to(like.device)


def _as_scalar(name: str, s) -> torch.Tensor | float:
    if isinstance(s, Real) and not isinstance(s, bool):
        return float(s)
    if isinstance(s, torch.Tensor) and s.ndim == 0 and s.is_floating_point():
        return s
    raise TypeError(
        f"{name} must be a real number or a 0-dim float tensor; for a matrix use `A @ z` "
        f"(got {type(s).__name__}{'' if not isinstance(s, torch.Tensor) else tuple(s.shape)})"
    )


# ---------------------------------------------------------------------------------------------
# What a zonotope and a matrix zonotope share
# ---------------------------------------------------------------------------------------------


class _CenterAndGenerators:
    """A centre ``(..., *event)`` and generators ``(..., m, *event)`` with one batch shape ``...``:
    the event is a vector for a ``Zonotope`` and a matrix for a ``MatrixZonotope``."""

    _event_ndim: int  # 1: the centre is a vector; 2: a matrix
    _noun: str  # for messages

    @classmethod
    def _new(cls, center: torch.Tensor, generators: torch.Tensor):
        # Internal constructor: results of operations on valid zonotopes need no re-validation
        # (and re-checking finiteness would force a device sync on every op).
        k = cls._event_ndim
        obj = cls.__new__(cls)
        batch = torch.broadcast_shapes(center.shape[:-k], generators.shape[: -k - 1])
        obj.center = center.expand(*batch, *center.shape[-k:])
        obj.generators = generators.expand(*batch, *generators.shape[-k - 1 :])
        return obj

    @property
    def num_generators(self) -> int:
        return self.generators.shape[-self._event_ndim - 1]

    @property
    def batch_shape(self) -> torch.Size:
        return self.center.shape[: -self._event_ndim]

    @property
    def dtype(self) -> torch.dtype:
        return self.center.dtype

    @property
    def device(self) -> torch.device:
        return self.center.device

    def __getitem__(self, idx):
        items = idx if isinstance(idx, tuple) else (idx,)
        if any(i is Ellipsis or i is None for i in items) or len(items) > len(self.batch_shape):
            raise IndexError(
                f"a {self._noun} indexes its batch dimensions only: "
                f"batch_shape={tuple(self.batch_shape)}, "
                f"got index {idx!r} (no Ellipsis/None)"
            )
        return self._new(self.center[idx], self.generators[idx])

    def to(self, *args, **kwargs):
        """Move/cast like ``torch.Tensor.to`` (device and/or float dtype)."""
        c = self.center.to(*args, **kwargs)
        if not c.is_floating_point():
            raise TypeError(f"{type(self).__name__}.to needs a floating dtype, got {c.dtype}")
        return self._new(c, self.generators.to(*args, **kwargs))

    def detach(self):
        return self._new(self.center.detach(), self.generators.detach())
