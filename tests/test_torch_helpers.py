"""mzlite._torch: the mode switch is undone (also on error) and chunks cover every set once."""

import pytest
import torch

from mzlite._torch import eval_mode, map_batches


def test_eval_mode_restores_the_mode_even_on_error():
    model = torch.nn.Dropout(0.5).train()
    with eval_mode(model):
        assert not model.training
    assert model.training
    model.eval()
    with pytest.raises(RuntimeError), eval_mode(model, training=True):
        assert model.training
        raise RuntimeError("boom")
    assert not model.training


def test_map_batches_covers_every_set_in_order():
    x, mask = torch.arange(7.0).reshape(7, 1, 1), torch.ones(7, 1, dtype=torch.bool)
    chunks = map_batches(lambda xb, mb: (xb.flatten().tolist(), mb.shape[0]), x, mask, 3)
    assert chunks == [([0.0, 1.0, 2.0], 3), ([3.0, 4.0, 5.0], 3), ([6.0], 1)]
    assert map_batches(lambda xb, mb: mb, x, None, 4) == [None, None]
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        map_batches(lambda xb, mb: xb, x, mask, 0)
