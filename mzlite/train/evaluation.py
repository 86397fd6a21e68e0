"""``predict`` and ``evaluate``: a model's outputs and metrics on a dataset, batched, in eval mode,
in the units of the targets."""

from __future__ import annotations

import torch
from torch import nn

from mzlite._checks import resolve_device

from .config import TrainConfig, check_int_field
from .data import (
    SetTensors,
    as_set_tensors,
    batch_rows,
    model_device,
    param_dtype,
    task_of,
    to_device,
)
from .history import History
from .metrics import classification_metrics, regression_metrics
from .precision import autocast, resolve_amp
from .scaling import standardised_outputs, target_scaling


@torch.no_grad()
def predict_rows(
    model: nn.Module, d: SetTensors, batch_size: int, trim: bool, amp: bool | None
) -> torch.Tensor:
    """Model outputs for every row of an on-device dataset, in the model's (trained) units.

    With ``trim`` the rows are visited in order of set size, so each batch holds sets of similar
    size and is cut to its longest one (in training that would change the data order, here it
    changes nothing but speed); outputs are put back in the original row order."""
    was_training = model.training
    model.eval()
    device = d.x.device
    amp = resolve_amp(amp, device, d.x.dtype)
    order = torch.argsort(d.lengths, stable=True) if trim else torch.arange(len(d))  # (N,) CPU
    outs = []
    try:
        for i in range(0, len(d), batch_size):
            idx_cpu = order[i : i + batch_size]
            x, mask, _ = batch_rows(d, idx_cpu.to(device), idx_cpu, trim)
            with autocast(device, amp):
                out = model(x, mask)  # (B, d_out)
            outs.append(out.float() if out.dtype == torch.bfloat16 else out)
    finally:
        model.train(was_training)
    cat = torch.cat(outs)  # (N, d_out) in visiting order
    out = torch.empty_like(cat)
    out[order.to(device)] = cat
    return out


def target_stats_pair(target_stats):
    """``(mean, std)`` tensors from a History, a ``(mean, std)`` pair, or None."""
    if target_stats is None:
        return None
    if isinstance(target_stats, History):
        if target_stats.target_mean is None:
            return None
        target_stats = (target_stats.target_mean, target_stats.target_std)
    try:
        mean, std = target_stats
    except (TypeError, ValueError):
        raise TypeError("target_stats must be a History, a (mean, std) pair or None") from None
    mean = torch.as_tensor(mean, dtype=torch.float64).reshape(-1)
    std = torch.as_tensor(std, dtype=torch.float64).reshape(-1)
    if mean.shape != std.shape or not bool((std > 0).all()):
        raise ValueError("target_stats must be (mean, std) of equal length with std > 0")
    return mean, std


def resolve_eval_args(model, config, device, batch_size, task):
    if isinstance(config, TrainConfig):
        batch_size = batch_size or config.eval_batch_size or config.batch_size
        device = device if device is not None else config.device
        task = task or config.task
        amp, trim = config.amp, config.trim_padding  # None: resolved per device in predict_rows
    elif config is None or (isinstance(config, int) and not isinstance(config, bool)):
        batch_size = batch_size or config or 256
        amp, trim = False, True  # without a run's config: full precision
        # ... and where the model is ("auto" would send data to a GPU beside a CPU model)
        device = device if device is not None else model_device(model)
    else:
        raise TypeError(f"config must be a TrainConfig, a batch size (int) or None, got {config!r}")
    check_int_field("batch_size", batch_size, 1)
    return batch_size, resolve_device("auto" if device is None else device), task, amp, trim


def predict(
    model: nn.Module,
    data,
    config: TrainConfig | int | None = None,
    device=None,
    *,
    batch_size: int | None = None,
    target_stats=None,
    task: str | None = None,
) -> torch.Tensor:
    """Predictions ``(N, d_out)`` (float32, CPU) for every set of ``data``, batched, in eval mode
    and without gradients, in the units of the targets: a model trained by a
    ``normalize_targets`` fit carries its target scaling, and ``pred * std + mean`` is applied
    (in float64). ``target_stats`` (the History of such a fit, or a ``(mean, std)`` pair) gives
    the statistics for a model that does not carry them, and must agree with those it carries.
    For classification these are the logits ``(N, C)``."""
    batch_size, device, task, amp, trim = resolve_eval_args(model, config, device, batch_size, task)
    task = task or task_of(data)
    d = to_device(as_set_tensors("data", data, task), device, param_dtype(model))
    with standardised_outputs(model):
        pred = predict_rows(model, d, batch_size, trim, amp).double()
    stats = target_stats_pair(target_stats)
    own = target_scaling(model)
    if own is not None:
        own = (own.mean.cpu(), own.std.cpu())
        if stats is not None and not all(
            a.shape == b.shape and torch.allclose(a, b) for a, b in zip(stats, own, strict=True)
        ):
            raise ValueError(
                "target_stats differ from the target scaling the model carries (model."
                "target_scaling); leave target_stats out to use the model's own"
            )
        stats = stats if stats is not None else own
    if stats is not None:
        mean, std = (s.to(pred.device) for s in stats)
        if pred.shape[1] != mean.shape[0]:
            raise ValueError(
                f"target_stats has {mean.shape[0]} outputs but the model gives {pred.shape[1]}"
            )
        pred = pred * std + mean
    return pred.float().cpu()


def evaluate(
    model: nn.Module,
    data,
    config: TrainConfig | int | None = None,
    device=None,
    *,
    batch_size: int | None = None,
    target_stats=None,
    task: str | None = None,
) -> dict:
    """Metrics of ``model`` on ``data`` (batched, eval mode, no grad, mask passed through).

    ``config`` is the run's TrainConfig (task, eval batch size, device, amp) or just a batch size;
    ``device`` defaults to the config's, and without a TrainConfig to the model's own.
    ``task`` defaults to the config's, else it is inferred: integer ``y`` means classification.
    Regression: ``mse``, ``mae``, ``r2`` (see ``regression_metrics``) in ORIGINAL units: a model
    trained by a ``normalize_targets`` fit carries its target statistics (``predict``); for a
    model that does not, pass ``target_stats=history`` (an error is raised if the config says the
    targets were normalised and no statistics are known). Classification: ``accuracy``,
    ``cross_entropy``."""
    if (
        isinstance(config, TrainConfig)
        and config.normalize_targets
        and target_stats is None
        and target_scaling(model) is None
    ):
        raise ValueError(
            "config.normalize_targets is True but the model carries no target scaling: pass "
            "target_stats=history (the History returned by fit) so metrics are reported in "
            "original units"
        )
    batch_size, dev, task, _, _ = resolve_eval_args(model, config, device, batch_size, task)
    task = task or task_of(data)
    d = as_set_tensors("data", data, task)
    pred = predict(
        model, data, config, device, batch_size=batch_size, target_stats=target_stats, task=task
    )
    if task == "classification":
        return classification_metrics(pred, d.y)
    return regression_metrics(pred, d.y)
