"""The training protocol: ``TrainConfig`` (the paper's hyperparameters as defaults), the
learning-rate schedule ``lr_at`` and ``seed_everything``."""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, fields

import numpy as np
import torch

from .._checks import check_device

TASKS = ("regression", "classification")


SCHEDULES = ("cosine", "plateau")
WARMUP_EPOCHS = 5  # the paper's linear warm-up (App. app:impl)


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
      Appendix ``app:meb``). 0 disables it. Left unset it is the paper's 5, or ``epochs`` when
      the run is shorter (a 1-epoch run warms up over its one epoch); set, it must be <= epochs.
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
    # None: the paper's WARMUP_EPOCHS, cut to ``epochs`` (resolved in __post_init__, so the field
    # always holds the int that ran); a short run should not fail on a default the user never set
    warmup_epochs: int | None = None
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
        check_int_field("epochs", self.epochs, 1)
        check_int_field("batch_size", self.batch_size, 1)
        if self.eval_batch_size is not None:
            check_int_field("eval_batch_size", self.eval_batch_size, 1)
        if self.warmup_epochs is None:
            self.warmup_epochs = min(WARMUP_EPOCHS, self.epochs)
        check_int_field("warmup_epochs", self.warmup_epochs, 0)
        if self.warmup_epochs > self.epochs:
            raise ValueError(
                f"warmup_epochs must be <= epochs ({self.epochs}), got {self.warmup_epochs} "
                f"(left unset it is min({WARMUP_EPOCHS}, epochs))"
            )
        check_float_field("lr", self.lr, positive=True)
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        check_int_field("decay_patience", self.decay_patience, 1)
        if not (isinstance(self.decay_factor, (int, float)) and 0 < self.decay_factor < 1):
            raise ValueError(f"decay_factor must be a float in (0, 1), got {self.decay_factor!r}")
        check_float_field("weight_decay", self.weight_decay)
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
            check_float_field("grad_clip", self.grad_clip, positive=True)
        if self.patience is not None:
            check_int_field("patience", self.patience, 1)
        check_float_field("min_delta", self.min_delta)
        for name in ("restore_best", "normalize_targets", "trim_padding"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.amp is not None and not isinstance(self.amp, bool):
            raise ValueError(f"amp must be a bool or None (auto), got {self.amp!r}")
        check_int_field("seed", self.seed, 0)
        check_device(self.device)
        if self.num_threads is not None:
            check_int_field("num_threads", self.num_threads, 1)
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


def check_int_field(name: str, v, lo: int) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")


def check_float_field(name: str, v, positive: bool = False) -> None:
    ok = isinstance(v, (int, float, np.floating)) and not isinstance(v, bool) and math.isfinite(v)
    if not ok or (v <= 0 if positive else v < 0):
        raise ValueError(
            f"{name} must be a finite float {'> 0' if positive else '>= 0'}, got {v!r}"
        )


def seed_everything(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global RNG and torch (CPU and CUDA). Call it before
    building a model so its initialisation is reproducible; ``fit`` seeds the rest itself."""
    check_int_field("seed", seed, 0)
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
