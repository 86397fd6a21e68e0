"""Two small torch helpers every part of the package shares: a mode switch that is always undone,
and a model applied to many sets a chunk at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch


@contextmanager
def eval_mode(model: torch.nn.Module, training: bool = False) -> Iterator[torch.nn.Module]:
    """Run the block with ``model`` in eval mode (``training=True``: train mode, e.g. MC-Dropout),
    and give it back in the mode it had, also when the block raises."""
    was_training = model.training
    model.train(training)
    try:
        yield model
    finally:
        model.train(was_training)


def map_batches(fn: Callable, x: torch.Tensor, mask: torch.Tensor | None, batch_size: int) -> list:
    """``fn(x_chunk, mask_chunk)`` for consecutive chunks of ``batch_size`` sets of ``x`` (N, n, d)
    and ``mask`` (N, n) | None, in order: one result per chunk."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    return [
        fn(x[i : i + batch_size], None if mask is None else mask[i : i + batch_size])
        for i in range(0, x.shape[0], batch_size)
    ]
