"""Every synthetic task of the paper, with exact ground truth, as padded set tensors.

One call, one dataset::

    data = make_task("meb_radius", n_sets=1000, seed=0, d=8)
    data.x     # (N, n_max, d_in) float32, zero padded
    data.mask  # (N, n_max) bool, True = real element
    data.y     # (N, d_out) float32 (or (N,) int64 class labels)

``make_splits`` gives train/val/test with distinct derived seeds, ``cache=True`` stores datasets
under ``data/cache/`` (or ``$MZLITE_CACHE``), and ``baseline_r2`` fits a ridge regression on simple
permutation-invariant set statistics so every table can show how hard its task really is (on the
paper's own MEB generator, three statistics give test R^2 ~ 0.99; benchmarks/README.md).

Conventions shared by every task (the paper leaves them open; we fix them here):
- Set sizes n ~ U{n_min, ..., n_max} (inclusive), one draw per set; x has exactly n_max (or, for two
  packed sets, 2 n_max) rows so shapes do not depend on the seed.
- Points are generated in float64, rounded to float32 (what the model sees), and the target is
  computed from the rounded points, so the stored target is exact for the stored input.
- ``normalise="scale"`` (geometric tasks only) centres each set at its centroid and divides it by
  its RMS spread r = sqrt(mean_i ||x_i - mean||^2) BEFORE the target is computed, so the target is
  the raw target divided by r^p with p its degree of homogeneity (p = 1 for lengths: MEB, MST, SGSP;
  p = 2 for squared lengths: Chamfer, covariance norm, PCA error; p = d for hull volume; p = 0 for
  the Mahalanobis distance). ``SetData.scale`` keeps r. For two packed sets (Chamfer/rotation
  matching) the centroid and r are those of the union. Tasks whose target is not translation
  invariant (set statistics, quadratic TDOF, few-shot, meta-regression) reject it.
- Functions that a dataset shares across splits (the quadratic-TDOF matrices, the meta-regression
  basis) come from ``function_seed``, never from ``seed``.

Where things are: ``dataset`` (the ``SetData`` object), ``registry`` (``TASKS``, ``make_task``,
``make_splits``, the cache), one module a family of generators (``statistics``, ``matching``,
``geometric``, ``functions``, ``digits``), ``geometry`` (the exact target of ONE set: MEB, hull
volume, MST, Chamfer, SGSP, covariance statistics), ``difficulty`` (``baseline_r2``) and
``_build`` (what the generators share: checks, sampling, padding, normalisation, parallel
targets) and ``readings`` (the named readings of the paper's task descriptions:
``reading_options``, ``task_reading``).
"""

from .dataset import SetData
from .difficulty import baseline_r2, set_features
from .digits import digits_geometry_dataset, image_points
from .functions import meta_basis, meta_regression_dataset, quadratic_basis, quadratic_tdof_dataset
from .geometric import hull_volume_dataset, meb_radius_dataset, mst_weight_dataset, sgsp_dataset
from .matching import (
    chamfer_matching_dataset,
    few_shot_retrieval_dataset,
    procrustes_rotation,
    rotation_matching_dataset,
    small_rotation,
)
from .readings import TASK_READINGS, TaskReading, reading_options, readings_of, task_reading
from .registry import (
    CODE_VERSION,
    TASKS,
    Splits,
    cache_path,
    default_cache_dir,
    derive_seed,
    make_splits,
    make_task,
    task_options,
)
from .statistics import set_regression_dataset, set_stat_dataset, statistical_dataset

__all__ = [
    "CODE_VERSION",
    "TASKS",
    "TASK_READINGS",
    "TaskReading",
    "baseline_r2",
    "cache_path",
    "chamfer_matching_dataset",
    "default_cache_dir",
    "derive_seed",
    "digits_geometry_dataset",
    "image_points",
    "few_shot_retrieval_dataset",
    "hull_volume_dataset",
    "make_splits",
    "make_task",
    "meb_radius_dataset",
    "meta_basis",
    "meta_regression_dataset",
    "mst_weight_dataset",
    "quadratic_basis",
    "procrustes_rotation",
    "quadratic_tdof_dataset",
    "reading_options",
    "readings_of",
    "rotation_matching_dataset",
    "set_features",
    "set_regression_dataset",
    "set_stat_dataset",
    "SetData",
    "sgsp_dataset",
    "small_rotation",
    "Splits",
    "statistical_dataset",
    "task_options",
    "task_reading",
]
