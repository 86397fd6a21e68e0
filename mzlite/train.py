"""One trainer for every model and task, with the paper's protocol as its defaults.

The paper trains every architecture the same way (Experimental Setup and the hyperparameter table
of Appendix ``app:impl``): AdamW with lr 1e-4 and weight decay 1e-5, a 5-epoch linear warm-up from
0 followed by a cosine decay to 0, gradient clipping at l2 norm 1.0, batch size 128 (256 for the
geometric tasks), at most 200 epochs, early stopping on the validation loss with patience 20, and
(Appendix ``app:opt-confound``) optionally targets standardised with the training mean and std.
``TrainConfig`` holds exactly that; ``fit`` runs it::

    seed_everything(0)                       # model initialisation is the caller's business
    model = SomeSetModel(...)
    hist = fit(model, train, val, TrainConfig(batch_size=256, normalize_targets=True),
               checkpoint_path="runs/meb-d8-seed0.pt")
    evaluate(model, test, hist.config_obj())   # metrics in original units
    model(x, mask)                              # so are its answers: it carries the scaling

``train``/``val``/``test`` are anything with ``.x (N, n, d_in)``, ``.mask (N, n)`` and ``.y``
tensors (``mzlite.tasks.SetData``), or an ``(x, mask, y)`` tuple; the model is any ``nn.Module``
called as ``model(x, mask) -> (B, d_out)``. Training knows no specific model or task.

Choices the paper leaves open, fixed here (and stated again where they are made):
- The learning rate follows the schedule *per optimiser step*; the warm-up is linear from 0 and
  the cosine runs over the epoch cap (200), not over the epochs early stopping lets run.
- Weight decay applies to every parameter (the paper names no exemptions).
- The last, smaller batch of an epoch is kept; the train loss of an epoch is the sample-weighted
  mean of its batch losses (with dropout on, as it was computed).
- Early stopping watches the validation loss in the units the model is trained in (standardised
  when ``normalize_targets``); "improved" means lower than the best so far by more than
  ``min_delta``. The best weights are restored at the end.
- A non-finite training loss stops the run (``stop_reason="diverged"``) and restores the best
  weights, so a divergent cell still produces a result instead of an exception.
"""

from __future__ import annotations

import io
import math
import random
import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from mzlite._checks import as_float_tensor, check_mask, resolve_device
from mzlite._io import atomic_write_bytes, json_safe

CHECKPOINT_FORMAT = "mzlite.train/1"
TASKS = ("regression", "classification")
SCHEDULES = ("cosine", "plateau")
# Fields that may differ when a run is resumed: they change where it runs, not what it computes.
_RESUME_FREE = ("device", "num_threads")


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------


@dataclass
class TrainConfig:
    """The training protocol; the defaults are the paper's (hyperparameter table, ``app:impl``).

    - ``task``: ``"regression"`` (MSE loss; metrics MSE, MAE, R^2) or ``"classification"``
      (cross-entropy on logits ``(B, C)``, integer labels ``(N,)``; metrics accuracy, CE).
    - ``epochs``: the cap (200 synthetic, 150 real-world in the paper); the cosine decays over it.
    - ``schedule``: after the warm-up, ``"cosine"`` (the paper's: cosine to 0 over the epoch cap,
      whatever epoch early stopping ends the run at) or ``"plateau"`` (the rate is multiplied by
      ``decay_factor`` whenever ``decay_patience`` epochs pass without a new best validation loss,
      so that it anneals within the run early stopping ends: with patience 20, decay patience 5
      and factor 0.5 a run stops three halvings after its last best epoch). ``lr_at`` gives both.
    - ``batch_size``: 128 (synthetic) / 256 (geometric tasks) in the paper. ``eval_batch_size``
      (default: ``batch_size``) only changes speed and memory, never a result.
    - ``lr``, ``weight_decay``, ``betas``: AdamW; the paper gives lr 1e-4, wd 1e-5 and no betas
      (PyTorch's default (0.9, 0.999) is used).
    - ``warmup_epochs``: linear warm-up from 0 (5 in the paper; 10 for MZ-Large at d=16, 32 in
      Appendix ``app:meb``). 0 disables it.
    - ``grad_clip``: max l2 norm of all gradients together (1.0); ``None`` disables clipping.
    - ``patience``: early stopping on the validation loss (20; 300 for the ResNet-50 runs);
      ``None`` disables early stopping. ``restore_best`` loads the best epoch's weights at the end.
    - ``normalize_targets``: train on ``(y - mean) / std`` with the training set's per-output mean
      and std (Appendix ``app:opt-confound``). The trained model answers in original units: ``fit``
      attaches the statistics to it (``TargetScaling``; they are saved with its ``state_dict``),
      so metrics, ``predict`` and ``model(x, mask)`` need no History. Off by default because the
      paper's main tables train on raw targets.
    - ``trim_padding``: cut each batch to its longest real set (safe: padding never changes an
      output). Without dropout results agree to float rounding (~1e-8 relative, measured); with
      dropout on per-element tensors the dropout masks have another shape, so a trimmed run draws
      other (equally distributed) random numbers and is not bitwise the same run. Training
      batches are random, so with n ~ U(10, 100) and batch 128 nearly every batch still holds a
      set of ~100 and trimming saves little there; it pays when sets are padded beyond the data's
      largest set, and in evaluation, where rows are visited in order of size.
    - ``seed``: data order and the global RNG (dropout). Model *initialisation* is the caller's:
      call ``seed_everything(seed)`` (or ``torch.manual_seed``) before building the model.
    - ``device``: ``"auto"`` = CUDA when available, else CPU. ``num_threads``: CPU threads
      during ``fit``.
    - ``amp``: bfloat16 autocast of the forward pass (matrix products, and the element-wise work
      between them, in bf16; loss, gradients of the float32 master weights, optimiser state and
      metrics stay float32). ``None`` (default) = on for a float32 model on a CPU with native
      bf16 dot products (AVX512-BF16 or AMX; see ``cpu_has_bf16``), where it halves the time of
      a training step with results equal within seed noise (``benchmarks/fit_speed.py``), off
      elsewhere (on CUDA pass ``amp=True``). A resumed run keeps the precision it started with.
    Dropout (0.1 in the paper) belongs to the model, not to the trainer.
    """

    task: str = "regression"
    epochs: int = 200
    batch_size: int = 128
    eval_batch_size: int | None = None
    lr: float = 1e-4
    schedule: str = "cosine"
    decay_patience: int = 5
    decay_factor: float = 0.5
    weight_decay: float = 1e-5
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_epochs: int = 5
    grad_clip: float | None = 1.0
    patience: int | None = 20
    min_delta: float = 0.0
    restore_best: bool = True
    normalize_targets: bool = False
    trim_padding: bool = True
    seed: int = 0
    device: str = "auto"
    amp: bool | None = None
    num_threads: int | None = None

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        _int_field("epochs", self.epochs, 1)
        _int_field("batch_size", self.batch_size, 1)
        if self.eval_batch_size is not None:
            _int_field("eval_batch_size", self.eval_batch_size, 1)
        _int_field("warmup_epochs", self.warmup_epochs, 0)
        if self.warmup_epochs > self.epochs:
            raise ValueError(
                f"warmup_epochs must be <= epochs ({self.epochs}), got {self.warmup_epochs}"
            )
        _float_field("lr", self.lr, positive=True)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        _int_field("decay_patience", self.decay_patience, 1)
        if not (isinstance(self.decay_factor, (int, float)) and 0 < self.decay_factor < 1):
            raise ValueError(f"decay_factor must be a float in (0, 1), got {self.decay_factor!r}")
        _float_field("weight_decay", self.weight_decay)
        try:
            b1, b2 = (float(b) for b in self.betas)
        except (TypeError, ValueError):
            raise ValueError(
                f"betas must be a pair of floats in [0, 1), got {self.betas!r}"
            ) from None
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise ValueError(f"betas must be a pair of floats in [0, 1), got {self.betas!r}")
        self.betas = (b1, b2)
        if self.grad_clip is not None:
            _float_field("grad_clip", self.grad_clip, positive=True)
        if self.patience is not None:
            _int_field("patience", self.patience, 1)
        _float_field("min_delta", self.min_delta)
        for name in ("restore_best", "normalize_targets", "trim_padding"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.amp is not None and not isinstance(self.amp, bool):
            raise ValueError(f"amp must be a bool or None (auto), got {self.amp!r}")
        _int_field("seed", self.seed, 0)
        if not isinstance(self.device, (str, torch.device)):
            raise ValueError(
                f"device must be 'auto', 'cpu', 'cuda' or a torch.device, got {self.device!r}"
            )
        if self.num_threads is not None:
            _int_field("num_threads", self.num_threads, 1)
        if self.normalize_targets and self.task == "classification":
            raise ValueError("normalize_targets must be False when task='classification'")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["betas"] = list(d["betas"])
        d["device"] = str(d["device"])
        return d

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: (tuple(v) if k == "betas" else v) for k, v in d.items() if k in known})


def _int_field(name: str, v, lo: int) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")


def _float_field(name: str, v, positive: bool = False) -> None:
    ok = isinstance(v, (int, float, np.floating)) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or (v <= 0 if positive else v < 0):
        raise ValueError(
            f"{name} must be a finite float {'> 0' if positive else '>= 0'}, got {v!r}"
        )


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global RNG and torch (CPU and CUDA). Call it before
    building a model so its initialisation is reproducible; ``fit`` seeds the rest itself."""
    _int_field("seed", seed, 0)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def lr_at(step: int, steps_per_epoch: int, config: TrainConfig, decay: float = 1.0) -> float:
    """Learning rate of optimiser step ``step`` (0-based): linear warm-up, then the schedule.

    With W = warmup_epochs * steps_per_epoch and T = epochs * steps_per_epoch:
    ``lr * (step + 1) / W`` for step < W (rises from lr/W to lr, so no step is wasted at lr 0),
    then for ``schedule="cosine"`` ``lr * (1 + cos(pi * (step - W) / (T - W))) / 2`` (starts at
    lr, would reach 0 at step T), for ``schedule="plateau"`` ``lr * decay``, where ``decay`` is
    the product of the plateau decays so far (``fit`` keeps it; 1.0 before the first).
    """
    W = config.warmup_epochs * steps_per_epoch
    T = config.epochs * steps_per_epoch
    if step < W:
        return config.lr * (step + 1) / W
    if config.schedule == "plateau":
        return config.lr * decay
    return config.lr * 0.5 * (1.0 + math.cos(math.pi * (step - W) / max(T - W, 1)))


# ---------------------------------------------------------------------------------------------
# Data
# ---------------------------------------------------------------------------------------------


@dataclass
class _Data:
    x: torch.Tensor  # (N, n, d_in)
    mask: torch.Tensor  # (N, n) bool
    y: torch.Tensor  # (N, d_out) float, or (N,) int64 labels
    lengths: torch.Tensor  # (N,) CPU int64: 1 + index of the last real element

    def __len__(self) -> int:
        return self.x.shape[0]


def _as_data(name: str, data, task: str) -> _Data:
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
    return _Data(x, mask, y, lengths)


def _to_device(d: _Data, device: torch.device, dtype: torch.dtype) -> _Data:
    """Move a whole dataset once (no per-batch host-to-device copies)."""
    y = d.y.to(device, dtype) if d.y.is_floating_point() else d.y.to(device)
    return _Data(d.x.to(device, dtype), d.mask.to(device), y, d.lengths)


def _batch(d: _Data, idx: torch.Tensor, idx_cpu: torch.Tensor, trim: bool):
    """Rows ``idx`` of ``d``, cut to the longest real set when ``trim`` (columns after the last
    real element of every row are padding everywhere, so dropping them changes no output)."""
    x, mask, y = d.x[idx], d.mask[idx], d.y[idx]  # (B, n, d), (B, n), (B, ...)
    if trim:
        n_b = int(d.lengths[idx_cpu].max())  # computed on the CPU copy: no device sync
        x, mask = x[:, :n_b], mask[:, :n_b]
    return x, mask, y


def _param_dtype(model: nn.Module) -> torch.dtype:
    for p in model.parameters():
        if p.is_floating_point():
            return p.dtype
    return torch.get_default_dtype()


# ---------------------------------------------------------------------------------------------
# Metrics, prediction, evaluation
# ---------------------------------------------------------------------------------------------


def regression_metrics(pred: torch.Tensor, y: torch.Tensor) -> dict:
    """MSE, MAE (both averaged over samples and outputs) and R^2, computed in float64.

    R^2 is ``1 - SSE/SST`` per output with SST taken around the *evaluated set's own* mean
    (sklearn's ``r2_score`` convention), then averaged over outputs (``multioutput=
    "uniform_average"``). An output with SST = 0 gives NaN. ``r2_per_output`` is added when
    there is more than one output."""
    if pred.shape != y.shape:
        raise ValueError(f"predictions have shape {tuple(pred.shape)} but targets {tuple(y.shape)}")
    p, t = pred.detach().double().cpu(), y.detach().double().cpu()  # (N, d_out)
    err = p - t
    sse = (err**2).sum(0)  # (d_out,)
    sst = ((t - t.mean(0)) ** 2).sum(0)  # (d_out,)
    r2 = torch.where(sst > 0, 1 - sse / sst.clamp_min(1e-300), torch.full_like(sst, math.nan))
    out = {
        "mse": float((err**2).mean()),
        "mae": float(err.abs().mean()),
        "r2": float(r2.mean()),
        "n": int(t.shape[0]),
    }
    if t.shape[1] > 1:
        out["r2_per_output"] = [float(v) for v in r2]
    return out


def classification_metrics(logits: torch.Tensor, y: torch.Tensor) -> dict:
    """Accuracy (fraction, not percent) and mean cross-entropy (nats) of logits ``(N, C)``."""
    logits, y = logits.detach().double().cpu(), y.detach().cpu()
    return {
        "accuracy": float((logits.argmax(1) == y).double().mean()),
        "cross_entropy": float(F.cross_entropy(logits, y)),
        "n": int(y.shape[0]),
    }


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


def _autocast(device: torch.device, amp: bool):
    """bf16 autocast on CPU or CUDA; float64 tensors are never cast, so float64 models are exact."""
    on = amp and device.type in ("cpu", "cuda")
    return torch.autocast(device.type if on else "cpu", dtype=torch.bfloat16, enabled=on)


@torch.no_grad()
def _predict(
    model: nn.Module, d: _Data, batch_size: int, trim: bool, amp: bool | None
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
            x, mask, _ = _batch(d, idx_cpu.to(device), idx_cpu, trim)
            with _autocast(device, amp):
                out = model(x, mask)  # (B, d_out)
            outs.append(out.float() if out.dtype == torch.bfloat16 else out)
    finally:
        model.train(was_training)
    cat = torch.cat(outs)  # (N, d_out) in visiting order
    out = torch.empty_like(cat)
    out[order.to(device)] = cat
    return out


def _target_stats(target_stats):
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


def _task_of(data) -> str:
    """Integer targets mean classification, floating ones regression."""
    y = data[2] if isinstance(data, (tuple, list)) else data.y
    return "regression" if torch.as_tensor(y).is_floating_point() else "classification"


def _model_device(model: nn.Module) -> torch.device:
    """Where the model's parameters live (CPU for a model without any)."""
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _resolve_eval_args(model, config, device, batch_size, task):
    if isinstance(config, TrainConfig):
        batch_size = batch_size or config.eval_batch_size or config.batch_size
        device = device if device is not None else config.device
        task = task or config.task
        amp, trim = config.amp, config.trim_padding  # None: resolved per device in _predict
    elif config is None or (isinstance(config, int) and not isinstance(config, bool)):
        batch_size = batch_size or config or 256
        amp, trim = False, True  # without a run's config: full precision
        # ... and where the model is ("auto" would send data to a GPU beside a CPU model)
        device = device if device is not None else _model_device(model)
    else:
        raise TypeError(f"config must be a TrainConfig, a batch size (int) or None, got {config!r}")
    _int_field("batch_size", batch_size, 1)
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
    batch_size, device, task, amp, trim = _resolve_eval_args(
        model, config, device, batch_size, task
    )
    task = task or _task_of(data)
    d = _to_device(_as_data("data", data, task), device, _param_dtype(model))
    with standardised_outputs(model):
        pred = _predict(model, d, batch_size, trim, amp).double()
    stats = _target_stats(target_stats)
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
    batch_size, dev, task, _, _ = _resolve_eval_args(model, config, device, batch_size, task)
    task = task or _task_of(data)
    d = _as_data("data", data, task)
    pred = predict(
        model, data, config, device, batch_size=batch_size, target_stats=target_stats, task=task
    )
    if task == "classification":
        return classification_metrics(pred, d.y)
    return regression_metrics(pred, d.y)


# ---------------------------------------------------------------------------------------------
# History
# ---------------------------------------------------------------------------------------------


@dataclass
class History:
    """What ``fit`` did, epoch by epoch (epochs are numbered from 1).

    ``train_loss``/``val_loss`` are in training units (standardised with ``normalize_targets``);
    ``val_metrics`` are in original units. ``lr`` is the rate of the epoch's last step.
    ``stop_reason`` is "completed", "early_stopping", "callback" or "diverged"; ``wall_time_s``
    adds up every ``fit`` call of the run (resumes included). ``train_target_var`` (regression):
    the variance of the training targets in training units, the loss of the mean predictor, so
    that ``min(train_loss) / train_target_var`` says whether the run fitted its training set
    (``mzlite.experiments.stats.fit_check``)."""

    epoch: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_metrics: list[dict] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    epoch_time_s: list[float] = field(default_factory=list)
    best_epoch: int | None = None
    best_val_loss: float = math.inf
    stop_reason: str = "running"
    wall_time_s: float = 0.0
    target_mean: list[float] | None = None
    target_std: list[float] | None = None
    train_target_var: float | None = None
    config: dict = field(default_factory=dict)

    @property
    def epochs_run(self) -> int:
        return len(self.epoch)

    @property
    def stopped_early(self) -> bool:
        return self.stop_reason in ("early_stopping", "callback", "diverged")

    def config_obj(self) -> TrainConfig:
        return TrainConfig.from_dict(self.config)

    def to_dict(self) -> dict:
        """JSON-serialisable (strict: NaN/inf become None)."""
        d = json_safe(asdict(self))
        d["epochs_run"], d["stopped_early"] = self.epochs_run, self.stopped_early
        return d

    @classmethod
    def from_dict(cls, d: dict) -> History:
        known = {f.name for f in fields(cls)}
        h = cls(**{k: v for k, v in d.items() if k in known})
        nan = lambda v: math.nan if v is None else v  # noqa: E731
        h.train_loss = [nan(v) for v in h.train_loss]
        h.val_loss = [nan(v) for v in h.val_loss]
        h.best_val_loss = math.inf if h.best_val_loss is None else h.best_val_loss
        return h

    def plot(self, ax=None, metric: str | None = None):
        """Learning curves: train and val loss (log scale), the best epoch marked; with ``metric``
        (e.g. "r2") that validation metric on a twin axis. Returns the matplotlib Axes."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.5))
        ax.plot(self.epoch, self.train_loss, label="train loss")
        ax.plot(self.epoch, self.val_loss, label="val loss")
        if self.best_epoch is not None:
            ax.axvline(self.best_epoch, color="grey", ls=":", label=f"best epoch {self.best_epoch}")
        ax.set_yscale("log")
        ax.set_xlabel("epoch")
        ax.set_ylabel("loss")
        if metric is not None:
            ax2 = ax.twinx()
            ax2.plot(
                self.epoch,
                [m.get(metric, math.nan) for m in self.val_metrics],
                "g--",
                label=f"val {metric}",
            )
            ax2.set_ylabel(f"val {metric}")
            ax2.legend(loc="upper center", frameon=False)
        ax.legend(loc="upper right", frameon=False)
        return ax


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------


def save_checkpoint(path, state: dict) -> Path:
    """``torch.save`` into memory, then an atomic write (temp file + rename): an interrupted save
    leaves the previous checkpoint intact. ``state`` must hold only tensors, dicts, lists,
    numbers and strings, so it loads with ``weights_only=True``."""
    buf = io.BytesIO()
    torch.save(state, buf)
    return atomic_write_bytes(path, buf.getvalue())


def load_checkpoint(path, map_location=None) -> dict:
    """Load a checkpoint written by ``fit`` with ``torch.load(..., weights_only=True)``."""
    return torch.load(path, map_location=map_location, weights_only=True)


def _rng_state() -> dict:
    s = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        s["cuda"] = torch.cuda.get_rng_state_all()
    return s


def _set_rng_state(s: dict) -> None:
    torch.set_rng_state(s["torch"].cpu())
    if "cuda" in s and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([t.cpu() for t in s["cuda"]])


# what a checkpoint written before these fields existed was trained with
_LEGACY_CONFIG = {"schedule": "cosine", "decay_patience": 5, "decay_factor": 0.5}


def _check_resume(ckpt: dict, run_config: dict, stats) -> None:
    if ckpt.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint format {ckpt.get('format')!r} is not {CHECKPOINT_FORMAT!r}")
    old, new = {**_LEGACY_CONFIG, **ckpt["config"]}, run_config
    diff = sorted(k for k in new if k not in _RESUME_FREE and old.get(k) != new[k])
    if diff:
        detail = ", ".join(f"{k}: {old.get(k)!r} -> {new[k]!r}" for k in diff)
        raise ValueError(
            f"checkpoint_path holds a run with a different config ({detail}); use a new path "
            "or delete the old checkpoint"
        )
    old_stats = ckpt.get("target_stats")
    same = (old_stats is None) == (stats is None) and (
        stats is None
        or all(
            a.shape == b.shape and torch.allclose(a.cpu(), b.cpu())
            for a, b in zip(old_stats, stats, strict=True)
        )
    )
    if not same:
        raise ValueError(
            "checkpoint_path holds a run trained on different targets (train.y mean/std differ)"
        )


# ---------------------------------------------------------------------------------------------
# Target scaling: a model trained on standardised targets answers in the targets' units
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# fit
# ---------------------------------------------------------------------------------------------


def _check_output(pred: torch.Tensor, y: torch.Tensor, task: str) -> None:
    """Catch a model/target mismatch before it broadcasts into a wrong loss."""
    if task == "regression" and pred.shape != y.shape:
        raise ValueError(
            f"model output has shape {tuple(pred.shape)} but the targets have {tuple(y.shape)}; "
            "the model must return (B, d_out)"
        )
    if task == "classification":
        if pred.ndim != 2 or pred.shape[0] != y.shape[0]:
            raise ValueError(f"model output must be logits (B, C), got {tuple(pred.shape)}")
        if int(y.max()) >= pred.shape[1]:
            raise ValueError(
                f"class label {int(y.max())} is out of range for {pred.shape[1]} model outputs"
            )


def _adamw(model: nn.Module, config: TrainConfig, device: torch.device):
    """AdamW; on CPU and CUDA the fused kernel (one pass over all parameters instead of a chain
    of foreach ops: 1.1 vs 5.0 ms a step for MZ-Full on CPU, measured), the same update rule."""
    kw = dict(lr=config.lr, betas=config.betas, weight_decay=config.weight_decay)
    if device.type in ("cpu", "cuda"):
        try:
            return torch.optim.AdamW(model.parameters(), fused=True, **kw)
        except RuntimeError:  # a torch without the fused kernel for this device
            pass
    return torch.optim.AdamW(model.parameters(), **kw)


@dataclass
class _Run:
    """One ``fit``: what its steps share, and what a checkpoint holds."""

    model: nn.Module
    config: TrainConfig
    device: torch.device
    train: _Data  # targets in training units (standardised with normalize_targets)
    val: _Data  # targets in original units
    y_val: torch.Tensor  # (N_val, ...) the validation targets in training units
    stats: tuple[torch.Tensor, torch.Tensor] | None  # (mean, std) of normalize_targets
    optimizer: torch.optim.Optimizer
    steps_per_epoch: int
    hist: History
    run_config: dict  # the config as run: amp=None (auto) resolved, what History records
    checkpoint_path: Path | None
    epoch: int = 0  # epochs done
    step: int = 0  # optimiser steps done (the schedule's position)
    bad_epochs: int = 0
    decay: float = 1.0  # schedule "plateau": product of the decays so far
    decay_wait: int = 0  # schedule "plateau": epochs since the last best or the last decay
    best_state: dict | None = None


def _prepare(model, train, val, config: TrainConfig, checkpoint_path) -> _Run:
    """Validate the inputs, standardise the targets, move everything to the device."""
    if not isinstance(config, TrainConfig):
        raise TypeError(f"config must be a TrainConfig, got {type(config).__name__}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    device = resolve_device(config.device)
    tr = _as_data("train", train, config.task)
    va = _as_data("val", val, config.task)
    if config.task == "regression" and tr.y.shape[1] != va.y.shape[1]:
        raise ValueError(f"train.y has {tr.y.shape[1]} outputs but val.y has {va.y.shape[1]}")

    # Target normalisation (Appendix app:opt-confound): train mean/std per output, float64.
    stats = None
    if config.normalize_targets:
        y64 = tr.y.double()
        std = y64.std(0, unbiased=False)  # (d_out,)
        stats = (y64.mean(0).cpu(), torch.where(std > 0, std, torch.ones_like(std)).cpu())

    remove_target_scaling(model)  # trained in standardised units; a new scaling is set at the end
    model.to(device)
    dtype = _param_dtype(model)
    tr, va = _to_device(tr, device, dtype), _to_device(va, device, dtype)
    y_train, y_val = tr.y, va.y
    if stats is not None:
        m, s = (t.to(device, dtype) for t in stats)
        y_train, y_val = (tr.y - m) / s, (va.y - m) / s  # (N, d_out) standardised
    optimizer = _adamw(model, config, device)
    # amp=None (auto) is resolved once; History and checkpoint record what the run really used
    run_config = {**config.to_dict(), "amp": resolve_amp(config.amp, device, dtype)}
    hist = History(config=run_config)
    if stats is not None:
        hist.target_mean, hist.target_std = stats[0].tolist(), stats[1].tolist()
    if config.task == "regression":
        hist.train_target_var = float(y_train.double().var(0, unbiased=False).mean())
    return _Run(
        model,
        config,
        device,
        _Data(tr.x, tr.mask, y_train, tr.lengths),
        va,
        y_val,
        stats,
        optimizer,
        math.ceil(len(tr) / config.batch_size),
        hist,
        run_config,
        Path(checkpoint_path) if checkpoint_path is not None else None,
    )


def _resume(run: _Run) -> bool:
    """Continue from ``run.checkpoint_path`` if it exists (True if that run had finished); a
    fresh run seeds the global RNG (dropout) instead."""
    if run.checkpoint_path is None or not run.checkpoint_path.exists():
        torch.manual_seed(run.config.seed)  # dropout; the model's init was the caller's
        return False
    ckpt = load_checkpoint(run.checkpoint_path, map_location=run.device)
    if run.config.amp is None:  # auto keeps the precision the run started with
        run.run_config["amp"] = bool(ckpt["config"].get("amp"))
    _check_resume(ckpt, run.run_config, run.stats)
    load_model_state(run.model, ckpt["model"])
    run.optimizer.load_state_dict(ckpt["optimizer"])
    run.hist = History.from_dict(ckpt["history"])
    run.epoch, run.step = ckpt["epoch"], ckpt["scheduler"]["step"]
    run.bad_epochs, run.best_state = ckpt["bad_epochs"], ckpt["best_model"]
    run.decay = ckpt["scheduler"].get("decay", 1.0)  # absent: a checkpoint of a cosine run
    run.decay_wait = ckpt["scheduler"].get("decay_wait", 0)
    _set_rng_state(ckpt["rng"])
    if ckpt["finished"] and run.stats is not None and target_scaling(run.model) is None:
        set_target_scaling(run.model, *run.stats)  # a checkpoint written before target scaling
    return bool(ckpt["finished"])


def _save(run: _Run, finished: bool) -> None:
    """The whole state, atomically (nothing without a checkpoint path)."""
    if run.checkpoint_path is None:
        return
    save_checkpoint(
        run.checkpoint_path,
        {
            "format": CHECKPOINT_FORMAT,
            "config": run.run_config,
            "model": run.model.state_dict(),
            "best_model": run.best_state,
            "optimizer": run.optimizer.state_dict(),
            "scheduler": {
                "step": run.step,
                "steps_per_epoch": run.steps_per_epoch,
                "decay": run.decay,
                "decay_wait": run.decay_wait,
            },
            "epoch": run.epoch,
            "bad_epochs": run.bad_epochs,
            "history": asdict(run.hist),
            "rng": _rng_state(),
            "target_stats": list(run.stats) if run.stats is not None else None,
            "finished": finished,
        },
    )


def _train_one_epoch(run: _Run, epoch: int) -> tuple[float, float]:
    """One pass over the training set in this epoch's order; returns (train loss, last lr)."""
    model, config, device, tr = run.model, run.config, run.device, run.train
    loss_fn = F.mse_loss if config.task == "regression" else F.cross_entropy
    model.train()
    gen = torch.Generator().manual_seed(config.seed * 1_000_003 + epoch)
    perm_cpu = torch.randperm(len(tr), generator=gen)  # (N,) this epoch's data order
    perm = perm_cpu.to(device)
    loss_sum = torch.zeros((), device=device, dtype=torch.float64)
    for i in range(0, len(tr), config.batch_size):
        lr = lr_at(run.step, run.steps_per_epoch, config, run.decay)
        for g in run.optimizer.param_groups:
            g["lr"] = lr
        x, mask, y = _batch(
            tr,
            perm[i : i + config.batch_size],
            perm_cpu[i : i + config.batch_size],
            config.trim_padding,
        )
        with _autocast(device, run.run_config["amp"]):
            pred = model(x, mask)  # (B, d_out) or (B, C) logits
        if pred.dtype == torch.bfloat16:
            pred = pred.float()  # the loss in full precision
        if i == 0:
            _check_output(pred, y, config.task)
        loss = loss_fn(pred, y.to(pred.dtype) if y.is_floating_point() else y)
        run.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip is not None:
            nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        run.optimizer.step()
        run.step += 1
        loss_sum += loss.detach().double() * x.shape[0]
    return float(loss_sum) / len(tr), lr


def _validate(run: _Run) -> tuple[float, dict]:
    """Validation loss in training units (early stopping) and metrics in original units."""
    config, va, stats = run.config, run.val, run.stats
    eval_bs = config.eval_batch_size or config.batch_size
    vpred = _predict(run.model, va, eval_bs, config.trim_padding, run.run_config["amp"])
    if config.task == "regression":
        val_loss = float(F.mse_loss(vpred.double(), run.y_val.double()))
        if stats is not None:
            vpred = vpred.double() * stats[1].to(run.device) + stats[0].to(run.device)
        return val_loss, regression_metrics(vpred, va.y)
    return float(F.cross_entropy(vpred.double(), va.y)), classification_metrics(vpred, va.y)


def _record(run: _Run, epoch: int, train_loss, val_loss, metrics, lr, seconds: float) -> None:
    """Keep the best weights, append the epoch to the History, and say why to stop, if so."""
    hist, config = run.hist, run.config
    if math.isfinite(val_loss) and val_loss < hist.best_val_loss - config.min_delta:
        hist.best_val_loss, hist.best_epoch, run.bad_epochs = val_loss, epoch, 0
        run.best_state = {k: v.detach().clone() for k, v in run.model.state_dict().items()}
        run.decay_wait = 0
    else:
        run.bad_epochs += 1
        run.decay_wait += 1
    _plateau_decay(run, epoch)
    hist.epoch.append(epoch)
    hist.train_loss.append(train_loss)
    hist.val_loss.append(val_loss)
    hist.val_metrics.append(metrics)
    hist.lr.append(lr)
    hist.epoch_time_s.append(seconds)
    if not math.isfinite(train_loss):
        hist.stop_reason = "diverged"
    elif config.patience is not None and run.bad_epochs >= config.patience:
        hist.stop_reason = "early_stopping"
    elif epoch == config.epochs:
        hist.stop_reason = "completed"


def _plateau_decay(run: _Run, epoch: int) -> None:
    """Schedule "plateau": after the warm-up, multiply the rate by ``decay_factor`` once
    ``decay_patience`` epochs have passed without a new best (or since the last decay)."""
    config = run.config
    if config.schedule != "plateau" or epoch <= config.warmup_epochs:
        return
    if run.decay_wait >= config.decay_patience:
        run.decay *= config.decay_factor
        run.decay_wait = 0


def _checkpoint_and_ask(run: _Run, epoch: int, callbacks) -> bool:
    """Checkpoint a running epoch, then ask the callbacks; True when training stops."""
    run.epoch = epoch
    stopping = run.hist.stop_reason != "running"
    if not stopping:  # a stopping run writes its final checkpoint in _finish
        _save(run, finished=False)
    if any([bool(cb(epoch, run.hist, run.model)) for cb in callbacks]) and not stopping:
        run.hist.stop_reason = "callback"
    return run.hist.stop_reason != "running"


def _finish(run: _Run) -> None:
    """Restore the best weights and set the target scaling; the final checkpoint follows."""
    if run.hist.stop_reason == "running":  # only when resuming a run that had already hit the cap
        run.hist.stop_reason = "completed"
    if run.config.restore_best and run.best_state is not None:
        run.model.load_state_dict(run.best_state)
    if run.stats is not None:
        set_target_scaling(run.model, *run.stats)  # the trained model answers in target units
    run.epoch = run.hist.epochs_run


@contextmanager
def _num_threads(n: int | None):
    old = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n is not None:
            torch.set_num_threads(old)


def fit(
    model: nn.Module,
    train,
    val,
    config: TrainConfig | None = None,
    *,
    checkpoint_path=None,
    progress: bool = True,
    callbacks: Sequence[Callable] | None = None,
) -> History:
    """Train ``model`` on ``train``, early-stopping on ``val``; returns the ``History``.

    The model is moved to ``config.device`` and trained in place; at the end it holds the best
    epoch's weights (``restore_best``) and is left in eval mode.

    Determinism: on CPU two calls with the same config, data and initial weights give identical
    histories and weights. The data order of epoch e comes from a generator seeded with
    ``(seed, e)``; the global torch RNG (dropout) is seeded with ``seed`` at the start of a fresh
    run. Initialise the model reproducibly yourself (``seed_everything(seed)`` before building).

    Checkpoints: with ``checkpoint_path`` the whole state (model, best weights, optimiser, step of
    the schedule, early-stopping counters, history, RNG states, target statistics, config) is
    written atomically after every epoch. If the file exists, ``fit`` RESUMES from it (the config
    must match except ``device``/``num_threads``; the data order and RNG continue exactly, so an
    interrupted run ends with the same weights as an uninterrupted one). A finished run is just
    loaded. ``load_checkpoint`` reads it with ``weights_only=True``.

    ``callbacks``: each is called as ``cb(epoch, history, model)`` after every epoch (after its
    checkpoint, before the best weights are restored at the end); a truthy return value stops
    training (``stop_reason="callback"``).
    """
    from tqdm.auto import tqdm

    run = _prepare(model, train, val, TrainConfig() if config is None else config, checkpoint_path)
    callbacks, config = list(callbacks or []), run.config
    if _resume(run):
        model.eval()
        return run.hist
    with (
        _num_threads(config.num_threads),
        tqdm(
            total=config.epochs, initial=run.epoch, disable=not progress, unit="epoch", desc="fit"
        ) as bar,
    ):
        t_call = time.perf_counter()
        for epoch in range(run.epoch + 1, config.epochs + 1):
            t0 = time.perf_counter()
            train_loss, lr = _train_one_epoch(run, epoch)
            val_loss, metrics = _validate(run)
            _record(run, epoch, train_loss, val_loss, metrics, lr, time.perf_counter() - t0)
            bar.update(1)
            bar.set_postfix(train=f"{train_loss:.4g}", val=f"{val_loss:.4g}", lr=f"{lr:.2e}")
            run.hist.wall_time_s += time.perf_counter() - t_call
            t_call = time.perf_counter()
            if _checkpoint_and_ask(run, epoch, callbacks):
                break
        _finish(run)
        run.hist.wall_time_s += time.perf_counter() - t_call
        _save(run, finished=True)
    model.eval()
    return run.hist
