"""What the chapters measure on sets, operators and trained models.

- ``operators``: looking inside a trained MZ layer (the realised operators and gates, their
  cosines, norms and effective rank; fig:attn-viz, fig:mz-analysis) and the model checkpoints
  the book ships. Its functions are re-exported here: ``from mzlite.analysis import probe``.
- ``tdof``: the task degrees of freedom of a set operator, numerically (Prop. prop:tdof-natural).
- ``initialisation``: the paper's initialisation claims measured on an untrained MZ model
  (``initial_state``), for each reading of the generator normalisation.
- ``uncertainty``: IHW, MC-Dropout and ensemble uncertainty, and their calibration metrics.
"""

from .initialisation import InitialState, initial_state
from .operators import (
    CHECKPOINT_FORMAT,
    cosine_matrix,
    effective_rank,
    frobenius_norms,
    layer_words,
    load_model_checkpoint,
    mz_heads,
    probe,
    relative_frobenius_change,
    save_model_checkpoint,
    sign_flips,
)

__all__ = [
    "CHECKPOINT_FORMAT",
    "InitialState",
    "initial_state",
    "cosine_matrix",
    "effective_rank",
    "frobenius_norms",
    "layer_words",
    "load_model_checkpoint",
    "mz_heads",
    "probe",
    "relative_frobenius_change",
    "save_model_checkpoint",
    "sign_flips",
]
