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

``fit_stacked(models, train, val, configs)`` trains K models of one architecture (a cell's seeds,
or rates) as one vectorised model, each as its own ``fit`` would (``mzlite.train.stacked``).

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

from mzlite._checks import resolve_device

from .checkpoints import CHECKPOINT_FORMAT, load_checkpoint, save_checkpoint
from .config import SCHEDULES, TASKS, TrainConfig, lr_at, seed_everything
from .evaluation import evaluate, predict
from .history import History
from .loop import fit
from .metrics import classification_metrics, regression_metrics
from .precision import cpu_has_bf16, resolve_amp
from .scaling import (
    TargetScaling,
    load_model_state,
    remove_target_scaling,
    set_target_scaling,
    standardised_outputs,
    target_scaling,
)
from .stacked import PER_MODEL_FIELDS, fit_stacked

__all__ = [
    "CHECKPOINT_FORMAT",
    "SCHEDULES",
    "TASKS",
    "History",
    "PER_MODEL_FIELDS",
    "TargetScaling",
    "TrainConfig",
    "classification_metrics",
    "cpu_has_bf16",
    "evaluate",
    "fit",
    "fit_stacked",
    "load_checkpoint",
    "load_model_state",
    "lr_at",
    "predict",
    "regression_metrics",
    "remove_target_scaling",
    "resolve_amp",
    "resolve_device",
    "save_checkpoint",
    "seed_everything",
    "set_target_scaling",
    "standardised_outputs",
    "target_scaling",
]
