"""``History``: what ``fit`` did, epoch by epoch, as it is stored in every result."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields

from mzlite._io import json_safe

from .config import TrainConfig


@dataclass
class History:
    """What ``fit`` did, epoch by epoch (epochs are numbered from 1).

    ``train_loss``/``val_loss`` are in training units (standardised with ``normalize_targets``);
    ``val_metrics`` are in original units. ``lr`` is the rate of the epoch's last step.
    ``stop_reason`` is "completed", "early_stopping", "callback" or "diverged"; ``wall_time_s``
    adds up every ``fit`` call of the run (resumes included), ``cpu_time_s`` the CPU seconds of the
    process in them (all its threads; a stack's for each member), which other jobs on a loaded
    machine do not inflate; None for a run resumed from a checkpoint that did not record it.
    ``train_target_var`` (regression): the variance of the training targets in training units,
    the loss of the mean predictor, so that ``min(train_loss) / train_target_var`` says whether
    the run fitted its training set (``mzlite.repro.experiments.stats.fit_check``)."""

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
    cpu_time_s: float | None = 0.0
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
        if "cpu_time_s" not in d:  # written before it was recorded: the sum would miss a part
            h.cpu_time_s = None
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
