"""Target scaling: a model trained on standardised targets answers in the targets' units."""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch import nn


class TargetScaling(nn.Module):
    """The per-output ``mean`` and ``std`` (float64 buffers) of the training targets that a
    ``normalize_targets`` fit standardised. ``fit`` attaches it to the model it trained as
    ``model.target_scaling``, with a forward hook that maps the model's standardised output ``y``
    back to ``y * std + mean``: the trained model answers in the units of its targets, and the
    statistics travel with its ``state_dict`` (so checkpoints keep them)."""

    def __init__(self, mean, std):
        super().__init__()
        mean = torch.as_tensor(mean, dtype=torch.float64).reshape(-1)
        std = torch.as_tensor(std, dtype=torch.float64).reshape(-1)
        if mean.shape != std.shape or not bool((std > 0).all()):
            raise ValueError("target scaling needs (mean, std) of equal length with std > 0")
        self.register_buffer("mean", mean)  # (d_out,)
        self.register_buffer("std", std)  # (d_out,)
        self.enabled = True

    def forward(self, y: torch.Tensor) -> torch.Tensor:  # (B, d_out), standardised
        return (y.double() * self.std + self.mean).to(y.dtype)


def _scale_output(model, args, output):
    scaling = model.target_scaling
    if not scaling.enabled:
        return output
    if isinstance(output, tuple):  # (y, details) of return_details=True
        return (scaling(output[0]), *output[1:])
    return scaling(output)


def target_scaling(model: nn.Module) -> TargetScaling | None:
    """The ``TargetScaling`` that ``model`` carries, or None."""
    scaling = getattr(model, "target_scaling", None)
    return scaling if isinstance(scaling, TargetScaling) else None


def set_target_scaling(model: nn.Module, mean, std) -> TargetScaling:
    """Make ``model`` answer in target units: outputs ``y * std + mean`` (replacing any scaling it
    carried). ``fit`` calls it after a ``normalize_targets`` run."""
    remove_target_scaling(model)
    param = next(model.parameters(), None)
    scaling = TargetScaling(mean, std).to(param.device if param is not None else "cpu")
    model.target_scaling = scaling
    scaling._hook = model.register_forward_hook(_scale_output)
    return scaling


def remove_target_scaling(model: nn.Module) -> None:
    """Drop the target scaling ``model`` carries (a no-op when it carries none)."""
    scaling = target_scaling(model)
    if scaling is not None:
        scaling._hook.remove()
        del model.target_scaling


@contextmanager
def standardised_outputs(model: nn.Module):
    """Within the block, ``model`` answers in the standardised units it was trained in."""
    scaling = target_scaling(model)
    if scaling is None:
        yield model
        return
    scaling.enabled = False
    try:
        yield model
    finally:
        scaling.enabled = True


def load_model_state(model: nn.Module, state: dict) -> None:
    """``model.load_state_dict(state)``, with the target scaling the state carries (if any)."""
    if "target_scaling.mean" in state:
        set_target_scaling(model, state["target_scaling.mean"], state["target_scaling.std"])
    else:
        remove_target_scaling(model)
    model.load_state_dict(state)
