"""Every synthetic task of the paper, with exact ground truth, as padded set tensors.

One call, one dataset::

    data = make_task("meb_radius", n_sets=1000, seed=0, d=8)
    data.x     # (N, n_max, d_in) float32, zero padded
    data.mask  # (N, n_max) bool, True = real element
    data.y     # (N, d_out) float32 (or (N,) int64 class labels)

``make_splits`` gives train/val/test with distinct derived seeds, ``cache=True`` stores datasets
under ``data/cache/`` (or ``$MZLITE_CACHE``), and ``baseline_r2`` fits a ridge regression on simple
permutation-invariant set statistics so every table can show how hard its task really is (on the
paper's own MEB generator, three statistics give test R^2 ~ 0.99; notes/measurements.md).

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
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import math
import multiprocessing as mp
import os
import warnings
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from mzlite import geometry
from mzlite._io import atomic_write_bytes

# The cache key includes a hash of this file and geometry.py: editing either invalidates old
# entries.
_SRC = Path(__file__).read_bytes() + Path(geometry.__file__).read_bytes()
CODE_VERSION = hashlib.sha256(_SRC).hexdigest()[:12]


# ---------------------------------------------------------------------------------------------
# The dataset object
# ---------------------------------------------------------------------------------------------


@dataclass
class SetData:
    """A padded dataset of sets. ``y`` is ``(N, d_out)`` float32 for regression, ``(N,)`` int64 for
    classification. ``scale`` is the per-set RMS spread divided out by ``normalise="scale"`` (None
    otherwise). ``options`` holds every option the generator used (defaults resolved)."""

    x: torch.Tensor  # (N, n_max, d_in) float32
    mask: torch.Tensor  # (N, n_max) bool
    y: torch.Tensor  # (N, d_out) float32 or (N,) int64
    task: str
    options: dict = field(default_factory=dict)
    seed: int = 0
    scale: torch.Tensor | None = None  # (N,) float32

    def __post_init__(self):
        N = self.x.shape[0]
        xs, ms, ys = tuple(self.x.shape), tuple(self.mask.shape), tuple(self.y.shape)
        if self.x.ndim != 3 or self.x.dtype != torch.float32:
            raise ValueError(
                f"x must be float32 of shape (N, n_max, d_in), got {self.x.dtype} {xs}"
            )
        if self.mask.dtype != torch.bool or ms != xs[:2]:
            raise ValueError(f"mask must be bool of shape {xs[:2]}, got {self.mask.dtype} {ms}")
        if self.y.shape[0] != N or not (
            (self.y.ndim == 2 and self.y.dtype == torch.float32)
            or (self.y.ndim == 1 and self.y.dtype == torch.int64)
        ):
            raise ValueError(
                f"y must be float32 (N, d_out) or int64 (N,) with N={N}, got {self.y.dtype} {ys}"
            )

    def __len__(self) -> int:
        return self.x.shape[0]

    @property
    def d_in(self) -> int:
        return self.x.shape[2]

    @property
    def d_out(self) -> int:
        """Output width: number of regression targets, or number of classes for classification."""
        return int(self.y.max()) + 1 if self.is_classification else self.y.shape[1]

    @property
    def is_classification(self) -> bool:
        return self.y.dtype == torch.int64

    def subset(self, idx) -> SetData:
        """The sets at ``idx`` (anything that indexes a tensor's first dimension)."""
        idx = torch.as_tensor(idx)
        return SetData(
            self.x[idx],
            self.mask[idx],
            self.y[idx],
            self.task,
            dict(self.options),
            self.seed,
            None if self.scale is None else self.scale[idx],
        )

    def sets(self) -> list[np.ndarray]:
        """The real elements of every set as float64 arrays ``(n_i, d_in)`` (padding removed)."""
        x, m = self.x.numpy().astype(np.float64), self.mask.numpy()
        return [x[i][m[i]] for i in range(len(self))]


# ---------------------------------------------------------------------------------------------
# Small helpers: validation, sampling, padding, normalisation, parallel targets
# ---------------------------------------------------------------------------------------------


def _check_int(name: str, value, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if lo is not None and value < lo:
        raise ValueError(f"{name} must be >= {lo}, got {value}")
    if hi is not None and value > hi:
        raise ValueError(f"{name} must be <= {hi}, got {value}")
    return int(value)


def _check_float(
    name: str, value, lo: float | None = None, hi: float | None = None, open_lo=False
) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    v = float(value)
    if (
        not math.isfinite(v)
        or (lo is not None and (v <= lo if open_lo else v < lo))
        or (hi is not None and v > hi)
    ):
        rng = f"{'(' if open_lo else '['}{lo}, {hi if hi is not None else 'inf'}]"
        raise ValueError(f"{name} must be a finite number in {rng}, got {value!r}")
    return v


def _check_choice(name: str, value, choices) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def _check_common(n_sets, d, n_min, n_max, seed) -> None:
    _check_int("n_sets", n_sets, 1)
    _check_int("d", d, 1)
    _check_int("n_min", n_min, 1)
    _check_int("n_max", n_max, 1)
    _check_int("seed", seed, 0)
    if n_min > n_max:
        raise ValueError(f"n_min must be <= n_max, got n_min={n_min} > n_max={n_max}")


def _check_normalise(normalise, allowed: bool = True) -> str:
    _check_choice("normalise", normalise, ("none", "scale"))
    if normalise == "scale" and not allowed:
        raise ValueError(
            "normalise='scale' is not defined for this task (its target is not translation "
            "invariant); use normalise='none'"
        )
    return normalise


def _sizes(rng: np.random.Generator, N: int, n_min: int, n_max: int) -> np.ndarray:
    return rng.integers(n_min, n_max + 1, size=N)


def _to32(a: np.ndarray) -> np.ndarray:
    """Round to float32 and back: targets are computed on exactly what the model sees."""
    return a.astype(np.float32).astype(np.float64)


def _centre_scale(p: np.ndarray) -> tuple[np.ndarray, float]:
    c = p - p.mean(0)
    r = float(np.sqrt((c**2).sum(1).mean()))
    if r == 0.0:
        return c, 1.0  # a set of identical points: nothing to scale
    return c / r, r


def _pad(sets: list[np.ndarray], n_max: int) -> tuple[torch.Tensor, torch.Tensor]:
    N, d = len(sets), sets[0].shape[1]
    x = np.zeros((N, n_max, d), dtype=np.float32)  # (N, n_max, d)
    mask = np.zeros((N, n_max), dtype=bool)
    for i, s in enumerate(sets):
        x[i, : len(s)] = s
        mask[i, : len(s)] = True
    return torch.from_numpy(x), torch.from_numpy(mask)


def _pack(parts: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """Stack several point sets into one, appending a type-indicator column to each part (part k
    gets the value k, so two parts give the paper's binary indicator), in a random row order: a
    non-invariant model must not find the parts by position."""
    rows = [np.concatenate([p, np.full((len(p), 1), float(k))], 1) for k, p in enumerate(parts)]
    s = np.concatenate(rows, 0)
    return s[rng.permutation(len(s))]


def _chunk_worker(args):
    fn, sets, kw = args
    return [fn(s, **kw) for s in sets]


def _pool_context():
    # forkserver: no fork() of a process that already runs torch threads; spawn where unavailable
    methods = mp.get_all_start_methods()
    return mp.get_context("forkserver" if "forkserver" in methods else "spawn")


def _map_targets(fn, sets: list, workers: int | None = 1, **kw) -> np.ndarray:
    """``[fn(s, **kw) for s in sets]`` as a float64 array, over ``workers`` processes (None = all
    cores). ``fn`` must be a module-level function (it is pickled by reference)."""
    if workers is None:
        workers = os.cpu_count() or 1
    workers = _check_int("workers", workers, 1)
    if workers == 1 or len(sets) < 64:
        return np.array([fn(s, **kw) for s in sets], dtype=np.float64)
    chunks = np.array_split(np.arange(len(sets)), workers * 4)
    jobs = [(fn, [sets[i] for i in c], kw) for c in chunks if len(c)]
    try:
        with ProcessPoolExecutor(workers, mp_context=_pool_context()) as ex:
            out = [v for part in ex.map(_chunk_worker, jobs) for v in part]
    except BrokenProcessPool as e:
        # e.g. a __main__ read from stdin cannot be re-imported by workers: compute serially instead
        warnings.warn(f"process pool failed ({e}); computing targets in this process", stacklevel=3)
        out = [fn(s, **kw) for s in sets]
    return np.array(out, dtype=np.float64)


def _gaussian_mixture_sets(
    rng, N, d, n_min, n_max, k_max=3, mean_std=2.0, spread_min=0.2, spread_max=1.0
):
    """Mixture-of-Gaussians point sets (notes/measurements.md, the MEB generator): per set K ~
    U{1..k_max} components, means ~ N(0, mean_std^2 I), isotropic scales ~ U(spread_min,
    spread_max), each point picks a component uniformly."""
    sizes = _sizes(rng, N, n_min, n_max)
    out = []
    for n in sizes:
        K = rng.integers(1, k_max + 1)
        mu = rng.normal(0.0, mean_std, size=(K, d))  # (K, d)
        s = rng.uniform(spread_min, spread_max, size=K)  # (K,)
        z = rng.integers(0, K, size=n)  # (n,) component of each point
        out.append(mu[z] + s[z, None] * rng.normal(size=(n, d)))
    return out


def _haar_orthogonal(rng, d: int, special: bool = False) -> np.ndarray:
    """A Haar-random orthogonal matrix (QR of a Gaussian matrix with the sign fix of Mezzadri 2007);
    ``special=True`` flips one column so det = +1 (a rotation)."""
    q, r = np.linalg.qr(rng.normal(size=(d, d)))
    q = q * np.sign(np.diag(r))
    if special and np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def _finish(task, options, seed, sets, y, n_rows, scale=None, classification=False) -> SetData:
    x, mask = _pad(sets, n_rows)
    yt = (
        torch.as_tensor(np.asarray(y), dtype=torch.int64)
        if classification
        else torch.as_tensor(np.asarray(y, dtype=np.float32).reshape(len(sets), -1))
    )
    sc = None if scale is None else torch.as_tensor(np.asarray(scale, dtype=np.float32))
    return SetData(x, mask, yt, task, options, seed, sc)


def _normalise_sets(sets, normalise):
    """Apply the per-set normalisation; returns (sets, scale or None)."""
    if normalise == "none":
        return sets, None
    out, rs = zip(*[_centre_scale(s) for s in sets], strict=True)
    return list(out), np.array(rs)


def _geometric_task(task, opts, seed, sets, n_rows, normalise, fn, workers, **fn_kw) -> SetData:
    sets, scale = _normalise_sets(sets, normalise)
    sets = [_to32(s) for s in sets]
    y = _map_targets(fn, sets, workers, **fn_kw)
    return _finish(task, opts, seed, sets, y, n_rows, scale)


def _opts(local: dict) -> dict:
    return {k: v for k, v in local.items() if k not in ("n_sets", "seed", "workers", "rng")}


# ---------------------------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------------------------

_SET_STATS = {
    "max": lambda s: s.max(0),
    "sum": lambda s: s.sum(0),
    "median": lambda s: np.median(s, 0),
    "range": lambda s: s.max(0) - s.min(0),
}


def set_stat(
    n_sets: int,
    *,
    stat: str = "max",
    d: int = 16,
    n_min: int = 10,
    n_max: int = 50,
    seed: int = 0,
    normalise: str = "none",
) -> SetData:
    """Per-dimension set statistic summed over dimensions: y = sum_j stat_i(x_ij), stat in {max,
    sum, median, range} (tab:slot-baseline; tab:scaling sweeps d in {16, 64, 128} and n up to 1000;
    the defaults d=16, n in [10, 50] are its first column).

    Open choices fixed here: elements x_i ~ N(0, I_d) i.i.d.; each statistic is taken per dimension
    over the elements and summed over the d dimensions, as Task A's "sum of dimension-wise maxima"
    (this reading, not sum_i max_j x_ij, is the one consistent with the paper's Task-A numbers: MSE
    3.43 at R^2 0.811 implies Var(y) ~ 18, and our generator gives Var(y) ~ 19 at d=16, n in [10,
    100])."""
    _check_common(n_sets, d, n_min, n_max, seed)
    _check_choice("stat", stat, _SET_STATS)
    _check_normalise(normalise, allowed=False)
    opts = _opts(locals())
    rng = np.random.default_rng(seed)
    sets = [_to32(rng.normal(size=(n, d))) for n in _sizes(rng, n_sets, n_min, n_max)]
    y = [_SET_STATS[stat](s).sum() for s in sets]
    return _finish("set_stat", opts, seed, sets, y, n_max)


def set_regression(
    n_sets: int,
    *,
    d: int = 16,
    n_min: int = 10,
    n_max: int = 100,
    seed: int = 0,
    normalise: str = "none",
) -> SetData:
    """Task A, set regression (app:task-descriptions): x_i in R^16, n ~ U(10, 100), y = sum of the
    dimension-wise maxima, sum_j max_i x_ij. This is :func:`set_stat` with stat="max" (the "Max"
    column of tab:mz-efficient/tab:slot-baseline, whose Standard R^2 ~ 0.81 matches Task A's).
    Elements are N(0, I_d) (not stated in the paper)."""
    data = set_stat(
        n_sets, stat="max", d=d, n_min=n_min, n_max=n_max, seed=seed, normalise=normalise
    )
    data.task = "set_regression"
    data.options.pop("stat")
    return data


def chamfer_matching(
    n_sets: int,
    *,
    d: int = 3,
    n_min: int = 10,
    n_max: int = 30,
    noise: float = 0.3,
    p_match: float = 0.5,
    point_std: float = 8.0,
    seed: int = 0,
    normalise: str = "none",
    workers: int | None = 1,
) -> SetData:
    """Task B, Chamfer set matching in R^3 (app:task-descriptions; tab:ambiguity, tab:sizegen).

    A has n_A ~ U{n_min..n_max} points ~ N(0, point_std^2 I_d). With probability ``p_match`` (0.5) B
    is a rotated-noisy copy, B = R A + eps with R Haar-random in SO(d) and eps ~ N(0, noise^2 I);
    otherwise B is an independent cloud from the same distribution with its own size. Both sets are
    packed into one set with a binary type indicator column (0 = A, 1 = B), d_in = d + 1, rows
    shuffled; x has 2 n_max rows. y = symmetric squared Chamfer distance
    (:func:`mzlite.geometry.chamfer_distance`).

    Open choices: the point distribution and ``point_std = 8`` (chosen so Var(y) ~ 1.4e3, the value
    the paper's Task-B numbers imply: MSE 138 at R^2 0.901), noise = 0.3 (tab:ambiguity's row that
    equals tab:sizegen's default row), Haar rotations, no translation."""
    _check_common(n_sets, d, n_min, n_max, seed)
    _check_float("noise", noise, 0.0)
    _check_float("p_match", p_match, 0.0, 1.0)
    _check_float("point_std", point_std, 0.0, open_lo=True)
    _check_normalise(normalise)
    opts = _opts(locals())
    rng = np.random.default_rng(seed)
    pairs = []
    for n in _sizes(rng, n_sets, n_min, n_max):
        A = rng.normal(0.0, point_std, size=(n, d))
        if rng.random() < p_match:
            B = A @ _haar_orthogonal(rng, d, special=True).T + rng.normal(0.0, noise, size=(n, d))
        else:
            B = rng.normal(0.0, point_std, size=(rng.integers(n_min, n_max + 1), d))
        pairs.append((A, B))
    return _pair_task("chamfer_matching", opts, seed, pairs, rng, n_max, normalise, workers)


def _chamfer_packed(s: np.ndarray) -> float:
    return geometry.chamfer_distance(s[s[:, -1] == 0, :-1], s[s[:, -1] == 1, :-1])


def _pair_task(task, opts, seed, pairs, rng, n_max, normalise, workers) -> SetData:
    scale = None
    if normalise == "scale":
        normed, rs = [], []
        for A, B in pairs:
            U = np.concatenate([A, B])
            c = U.mean(0)
            r = float(np.sqrt(((U - c) ** 2).sum(1).mean())) or 1.0
            normed.append(((A - c) / r, (B - c) / r))
            rs.append(r)
        pairs, scale = normed, np.array(rs)
    sets = [_to32(_pack([A, B], rng)) for A, B in pairs]
    y = _map_targets(_chamfer_packed, sets, workers)
    return _finish(task, opts, seed, sets, y, 2 * n_max, scale)


def few_shot_retrieval(
    n_sets: int,
    *,
    d: int = 8,
    k_support: int = 5,
    n_query: int = 20,
    n_classes: int = 5,
    noise_min: float = 0.3,
    noise_max: float = 1.5,
    seed: int = 0,
    normalise: str = "none",
) -> SetData:
    """Task D, few-shot set retrieval (app:task-descriptions): a support set of K=5 elements of a
    target class and a query set of 20 elements of mixed classes; predict the fraction of the query
    in the target class. 8 features + a binary type indicator (1 = support, 0 = query), d_in = 9;
    rows shuffled.

    Open choices: each episode draws its own ``n_classes = 5`` class prototypes ~ N(0, I_d) and a
    noise scale sigma ~ U(0.3, 1.5) (the paper's range); elements are prototype + N(0, sigma^2 I).
    The number of target-class queries m ~ U{0..n_query}; the other queries pick a non-target class
    uniformly. y = m / n_query (Var(y) ~ 0.09; the paper's MSE 2.60e-2 at R^2 0.646 implies ~
    0.07)."""
    _check_common(n_sets, d, 1, 1, seed)
    _check_int("k_support", k_support, 1)
    _check_int("n_query", n_query, 1)
    _check_int("n_classes", n_classes, 2)
    _check_float("noise_min", noise_min, 0.0)
    _check_float("noise_max", noise_max, 0.0)
    if noise_min > noise_max:
        raise ValueError(f"noise_min must be <= noise_max, got {noise_min} > {noise_max}")
    _check_normalise(normalise, allowed=False)
    opts = _opts(locals())
    rng = np.random.default_rng(seed)
    sets, y = [], []
    for _ in range(n_sets):
        protos = rng.normal(size=(n_classes, d))  # (C, d); class 0 is the target class
        sigma = rng.uniform(noise_min, noise_max)
        m = rng.integers(0, n_query + 1)
        q_cls = np.concatenate([np.zeros(m, int), rng.integers(1, n_classes, size=n_query - m)])
        support = protos[0] + sigma * rng.normal(size=(k_support, d))
        query = protos[q_cls] + sigma * rng.normal(size=(n_query, d))
        sets.append(_to32(_pack([query, support], rng)))  # indicator 0 = query, 1 = support
        y.append(m / n_query)
    return _finish("few_shot_retrieval", opts, seed, sets, y, k_support + n_query)


def _givens_batch(
    X: np.ndarray, angle_seed: int, max_angle: float, inverse: bool = False
) -> np.ndarray:
    """Rotate every row of every set in X (N, n, d) by its set's R = G_(1,2) G_(1,3) ... G_(d-1,d),
    one Givens rotation per plane p < q (lexicographic), or by R^T if ``inverse``. The angles of the
    planes (p, q > p) for all N sets are U(-max_angle, max_angle) from default_rng([angle_seed, p]),
    regenerated on demand: storing N d(d-1)/2 angles would take gigabytes at d = 512."""
    N, n, d = X.shape
    # (d, N, n): each coordinate one contiguous slab; .copy() so the input is never modified
    Xt = X.transpose(2, 0, 1).copy()
    # R x = G_1 (G_2 (... G_M x)): the last factor acts first; R^T x = G_M^T (... G_1^T x)
    for p in range(d - 1) if inverse else reversed(range(d - 1)):
        th = np.random.default_rng([angle_seed, p]).uniform(-max_angle, max_angle, size=(d, N))
        for q in range(p + 1, d) if inverse else reversed(range(p + 1, d)):
            t = -th[q] if inverse else th[q]
            c, s = np.cos(t)[:, None], np.sin(t)[:, None]  # (N, 1)
            xp, xq = Xt[p].copy(), Xt[q]  # (N, n)
            Xt[p] = c * xp - s * xq
            Xt[q] = s * xp + c * xq
    return Xt.transpose(1, 2, 0)


def rotation_matching(
    n_sets: int,
    *,
    d: int = 8,
    n_min: int = 10,
    n_max: int = 30,
    noise: float = 0.1,
    max_angle: float = math.pi,
    point_std: float = 6.0,
    target: str = "chamfer",
    seed: int = 0,
    normalise: str = "none",
    workers: int | None = 1,
) -> SetData:
    """Task F, rotation-dependent set matching in R^d (app:task-descriptions; tab:rotmatch-scale for
    d up to 512). A has n ~ U{n_min..n_max} points ~ N(0, point_std^2 I_d); B = R(theta) A + eps
    with R the product of Givens rotations in all d(d-1)/2 planes (lexicographic order), angles ~
    U(-max_angle, max_angle) per plane and set, eps ~ N(0, 0.1^2 I). A and B are packed with a
    binary type indicator (0 = A, 1 = B), d_in = d + 1, rows shuffled; x has 2 n_max rows.

    The target ("post-alignment Chamfer distance" in the paper) has two readings:
    - ``target="chamfer"`` (default): CD(A, B), the Chamfer distance of the sets as given; a model
      has to find R to relate them. This is the only reading consistent with the paper's numbers
      (MSE 487 at R^2 0.904 implies Var(y) ~ 5e3; point_std = 6 gives Var(y) ~ 5e3 at d=8).
    - ``target="residual"``: CD(A, R^T B) = CD(A, A + R^T eps), the residual after exact alignment;
      it only measures the noise (tiny variance), so it cannot be what the paper's tables report.

    With ``normalise="scale"`` the target is divided by r^2 (r the RMS spread of A u B). Cost:
    d(d-1)/2 vectorised Givens updates (seconds at d = 256 for a few thousand sets)."""
    _check_common(n_sets, d, n_min, n_max, seed)
    if d < 2:
        raise ValueError(f"d must be >= 2 for a rotation, got {d}")
    _check_float("noise", noise, 0.0)
    _check_float("max_angle", max_angle, 0.0)
    _check_float("point_std", point_std, 0.0, open_lo=True)
    _check_choice("target", target, ("chamfer", "residual"))
    _check_normalise(normalise)
    opts = _opts(locals())
    rng = np.random.default_rng(seed)
    sizes = _sizes(rng, n_sets, n_min, n_max)
    mask = np.arange(n_max)[None, :] < sizes[:, None]  # (N, n_max)
    A = rng.normal(0.0, point_std, size=(n_sets, n_max, d)) * mask[..., None]  # (N, n_max, d)
    angle_seed = int(rng.integers(2**63))
    eps = rng.normal(0.0, noise, size=A.shape) * mask[..., None]
    B = _givens_batch(A, angle_seed, max_angle) + eps  # (N, n_max, d)
    pairs = [(A[i, :n], B[i, :n]) for i, n in enumerate(sizes)]
    data = _pair_task("rotation_matching", opts, seed, pairs, rng, n_max, normalise, workers)
    if target == "residual":
        back = _givens_batch(B, angle_seed, max_angle, inverse=True)  # R^T B = A + R^T eps
        r = np.ones(n_sets) if data.scale is None else data.scale.numpy().astype(np.float64)
        y = [
            geometry.chamfer_distance(A[i, :n], back[i, :n]) / r[i] ** 2
            for i, n in enumerate(sizes)
        ]
        data.y = torch.as_tensor(np.asarray(y, dtype=np.float32).reshape(-1, 1))
    return data


def mst_weight(
    n_sets: int,
    *,
    d: int = 8,
    n_min: int = 10,
    n_max: int = 30,
    k_max: int = 3,
    mean_std: float = 3.0,
    spread_min: float = 0.5,
    spread_max: float = 2.0,
    seed: int = 0,
    normalise: str = "none",
    workers: int | None = 1,
) -> SetData:
    """Task G, minimum-spanning-tree weight (app:task-descriptions; tab:mst-scale, tab:mst-normed
    sweep d up to 256): n ~ U(10, 30) points in R^8 from 1-3 random clusters "with varying centres
    and spreads"; y = total Euclidean MST length (:func:`mzlite.geometry.mst_weight`).

    Open choices: the mixture generator of :func:`meb_radius` with K ~ U{1..3}, centres ~ N(0, 3^2
    I), isotropic spreads ~ U(0.5, 2.0); these make Var(y) ~ 7e2 at d=8, the value the paper's
    Task-G numbers imply (MSE 210 at R^2 0.712). Targets grow like sqrt(d); the paper's raw-target
    baselines collapse at high d partly for that reason (app:opt-confound), hence
    ``normalise="scale"`` (p = 1)."""
    _check_common(n_sets, d, n_min, n_max, seed)
    _check_mixture(k_max, mean_std, spread_min, spread_max)
    _check_normalise(normalise)
    opts = _opts(locals())
    rng = np.random.default_rng(seed)
    sets = _gaussian_mixture_sets(
        rng, n_sets, d, n_min, n_max, k_max, mean_std, spread_min, spread_max
    )
    return _geometric_task(
        "mst_weight", opts, seed, sets, n_max, normalise, geometry.mst_weight, workers
    )


def _check_mixture(k_max, mean_std, spread_min, spread_max):
    _check_int("k_max", k_max, 1)
    _check_float("mean_std", mean_std, 0.0)
    _check_float("spread_min", spread_min, 0.0)
    _check_float("spread_max", spread_max, 0.0)
    if spread_min > spread_max:
        raise ValueError(f"spread_min must be <= spread_max, got {spread_min} > {spread_max}")


def meb_radius(
    n_sets: int,
    *,
    d: int = 8,
    n_min: int = 10,
    n_max: int = 30,
    k_max: int = 3,
    mean_std: float = 2.0,
    spread_min: float = 0.2,
    spread_max: float = 1.0,
    seed: int = 0,
    normalise: str = "none",
    workers: int | None = 1,
) -> SetData:
    """Minimum-enclosing-ball radius (tab:meb, app:meb; d in {8, 16, 32}): "mixtures of Gaussians
    with n in [10, 30]", exact radius (:func:`mzlite.geometry.meb`, certified to 1e-6 relative).

    Open choices: the generator of notes/measurements.md: K ~ U{1, 2, 3} components, means ~ N(0,
    2^2 I), isotropic scales ~ U(0.2, 1.0), each point picks a component uniformly. On these raw
    sets simple statistics (RMS spread, max distance to the centroid, n) predict the radius with R^2
    ~ 0.99 (see :func:`baseline_r2`); ``normalise="scale"`` (y = R / rms) leaves them at ~ 0.6."""
    _check_common(n_sets, d, n_min, n_max, seed)
    _check_mixture(k_max, mean_std, spread_min, spread_max)
    _check_normalise(normalise)
    opts = _opts(locals())
    rng = np.random.default_rng(seed)
    sets = _gaussian_mixture_sets(
        rng, n_sets, d, n_min, n_max, k_max, mean_std, spread_min, spread_max
    )
    return _geometric_task(
        "meb_radius", opts, seed, sets, n_max, normalise, geometry.meb_radius, workers
    )


def hull_volume(
    n_sets: int,
    *,
    d: int = 3,
    n_min: int = 15,
    n_max: int = 35,
    k_max: int = 3,
    mean_std: float = 2.0,
    spread_min: float = 0.2,
    spread_max: float = 1.0,
    seed: int = 0,
    normalise: str = "none",
    workers: int | None = 1,
) -> SetData:
    """Convex-hull volume (tab:hull, tab:hull-normed; d in {3, 6, 9}, n in [15, 35]), exact via
    Qhull (:func:`mzlite.geometry.hull_volume`; degenerate sets give 0.0).

    Open choices: the paper does not give the point distribution; we reuse the MEB mixture generator
    (K ~ U{1..3}, means N(0, 2^2 I), scales U(0.2, 1.0)), giving raw volumes of 1e0-1e3 as the
    paper's "10^1-10^3". ``normalise="scale"`` divides the volume by rms^d."""
    _check_common(n_sets, d, n_min, n_max, seed)
    _check_mixture(k_max, mean_std, spread_min, spread_max)
    _check_normalise(normalise)
    opts = _opts(locals())
    rng = np.random.default_rng(seed)
    sets = _gaussian_mixture_sets(
        rng, n_sets, d, n_min, n_max, k_max, mean_std, spread_min, spread_max
    )
    return _geometric_task(
        "hull_volume", opts, seed, sets, n_max, normalise, geometry.hull_volume, workers
    )


_SGSP = {
    "diameter": geometry.diameter,
    "knn_radius": geometry.knn_radius,
    "k_smallest_sum": geometry.k_smallest_pairwise_sum,
    "kcenter": geometry.kcenter_cost,
}


def sgsp(
    n_sets: int,
    *,
    target: str = "diameter",
    k: int = 5,
    d: int = 8,
    n_min: int = 10,
    n_max: int = 30,
    k_max: int = 3,
    mean_std: float = 2.0,
    spread_min: float = 0.2,
    spread_max: float = 1.0,
    seed: int = 0,
    normalise: str = "none",
    workers: int | None = 1,
) -> SetData:
    """Sparse geometric set predicates (tab:sgsp, app:sgsp; d in {8, 16, 32}): ``target`` is
    "diameter" (max pairwise distance), "knn_radius" (median over points of the
    k-th-nearest-neighbour distance), "k_smallest_sum" (sum of the k smallest pairwise distances) or
    "kcenter" (furthest-first k-center cost, started at the point furthest from the centroid); see
    mzlite.geometry.

    Open choices: k = 5 for all three k-targets (the paper gives k=5 for k-center and k-NN radius in
    its real-data rows, nothing for k-smallest); the MEB mixture generator and n in [10, 30] (the
    paper does not give the SGSP distribution)."""
    _check_common(n_sets, d, n_min, n_max, seed)
    _check_choice("target", target, _SGSP)
    _check_int("k", k, 1)
    if target == "knn_radius" and n_min < k + 1:
        raise ValueError(
            f"n_min must be >= k + 1 = {k + 1} for target='knn_radius', got n_min={n_min}"
        )
    if target == "k_smallest_sum" and n_min * (n_min - 1) // 2 < k:
        raise ValueError(
            f"n_min must give n_min(n_min-1)/2 >= k={k} pairs for 'k_smallest_sum', got {n_min}"
        )
    _check_mixture(k_max, mean_std, spread_min, spread_max)
    _check_normalise(normalise)
    opts = _opts(locals())
    rng = np.random.default_rng(seed)
    sets = _gaussian_mixture_sets(
        rng, n_sets, d, n_min, n_max, k_max, mean_std, spread_min, spread_max
    )
    kw = {} if target == "diameter" else {"k": k}
    return _geometric_task("sgsp", opts, seed, sets, n_max, normalise, _SGSP[target], workers, **kw)


def quadratic_basis(L: int, d: int, function_seed: int = 0, basis: str = "random"):
    """The fixed function of :func:`quadratic_tdof`: (w (d,), M0 (d, d), M (L, d, d)).

    "random": L + 1 Gaussian matrices Frobenius-orthonormalised together (QR of their vec's), then
    scaled by sqrt(d) so each w^T M_l mu has unit variance; w is a uniform unit vector. "witness":
    Lemma lem:comp-orth's M_l = e_l e_d^T, M_0 = 0 (needs L <= d - 1)."""
    rng = np.random.default_rng(function_seed)
    w = rng.normal(size=d)
    w /= np.linalg.norm(w)
    if basis == "witness":
        M = np.zeros((L, d, d))
        for l in range(L):
            M[l, l, d - 1] = 1.0
        return w, np.zeros((d, d)), M
    G = rng.normal(size=(d * d, L + 1))
    Q, _ = np.linalg.qr(G)  # (d^2, L+1) orthonormal columns = Frobenius-orthonormal matrices
    Ms = Q.T.reshape(L + 1, d, d) * math.sqrt(d)
    return w, Ms[0], Ms[1:]


def quadratic_tdof(
    n_sets: int,
    *,
    L: int = 8,
    d: int = 32,
    n_min: int = 10,
    n_max: int = 30,
    within_std: float = 1.0,
    basis: str = "random",
    function_seed: int = 0,
    seed: int = 0,
    normalise: str = "none",
) -> SetData:
    """Quadratic-TDOF target (eq:quadratic-tdof; tab:tdof-verify, tab:egnn-comparison,
    tab:gen-ablation): f(S) = w^T (M_0 + sum_{l=1}^L mu(S)_l M_l) mu(S), mu(S) the set mean, {M_l}
    Frobenius-orthogonal, so TDOF(f) = L.

    Sets are drawn so that mu(S) has exactly i.i.d. standard-Gaussian coordinates, the input
    distribution of thm:tdof-depth: mu ~ N(0, I_d), x_i = mu + within_std (e_i - mean_j e_j), e_i ~
    N(0, I_d); the deviations are centred so the sample mean IS mu. n ~ U{10..30}.

    Open choices: d = 32 (L must be <= d since the gates are coordinates of mu; tab:tdof-verify goes
    up to L = 32); w, M_0, M_l from ``function_seed`` (shared by all splits; see
    :func:`quadratic_basis`); "random" basis includes M_0 orthogonal to all M_l and divides f by
    sqrt(L + 1), so Var(f) ~ 1 for every L (the paper calls the task scale-free); "witness" is
    lem:comp-orth (M_0 = 0) divided by ||w_{1..L}||."""
    _check_common(n_sets, d, n_min, n_max, seed)
    _check_choice("basis", basis, ("random", "witness"))
    _check_int("L", L, 1, d - 1 if basis == "witness" else d)
    _check_float("within_std", within_std, 0.0)
    _check_int("function_seed", function_seed, 0)
    _check_normalise(normalise, allowed=False)
    opts = _opts(locals())
    w, M0, M = quadratic_basis(L, d, function_seed, basis)
    norm = math.sqrt(L + 1) if basis == "random" else float(np.linalg.norm(w[:L]))
    rng = np.random.default_rng(seed)
    sets, y = [], []
    for n in _sizes(rng, n_sets, n_min, n_max):
        mu = rng.normal(size=d)
        e = rng.normal(size=(n, d))
        s = _to32(mu + within_std * (e - e.mean(0)))
        m = s.mean(0)  # the rounded set's own mean: the target is exact for the stored input
        T = M0 + np.einsum("l,lij->ij", m[:L], M)  # (d, d)
        sets.append(s)
        y.append(w @ T @ m / norm)
    return _finish("quadratic_tdof", opts, seed, sets, y, n_max)


def _anisotropic_sets(rng, N, d, n_min, n_max, log_scale_min, log_scale_max):
    out = []
    for n in _sizes(rng, N, n_min, n_max):
        Q = _haar_orthogonal(rng, d)
        s = np.exp(rng.uniform(log_scale_min, log_scale_max, size=d))
        out.append(rng.normal(size=d) + (rng.normal(size=(n, d)) * s) @ Q.T)
    return out


def _cov(s: np.ndarray) -> np.ndarray:
    c = s - s.mean(0)
    return c.T @ c / len(s)


def cov_frobenius(points) -> float:
    """||Sigma||_F of the biased (1/n) sample covariance."""
    return float(np.linalg.norm(_cov(np.asarray(points, dtype=np.float64))))


def pca_error(points, k: int) -> float:
    """Mean squared residual of projecting the centred points on their top-k principal directions,
    (1/n) sum_i ||(I - V_k V_k^T)(x_i - mean)||^2 = sum of the d - k smallest covariance
    eigenvalues."""
    ev = np.linalg.eigvalsh(_cov(np.asarray(points, dtype=np.float64)))  # ascending
    return float(max(ev[: len(ev) - k].sum(), 0.0))


def mahalanobis_packed(s: np.ndarray, ridge: float) -> float:
    """Mahalanobis distance of the query row (indicator 1) to the reference rows (indicator 0):
    sqrt((q - m)^T (Sigma + lam I)^{-1} (q - m)), Sigma the biased covariance of the references and
    lam = ridge * trace(Sigma) / d (scale-equivariant, so the distance is scale invariant)."""
    ref, q = s[s[:, -1] == 0, :-1], s[s[:, -1] == 1, :-1][0]
    S = _cov(ref)
    lam = ridge * np.trace(S) / S.shape[0]
    v = q - ref.mean(0)
    return float(np.sqrt(v @ np.linalg.solve(S + lam * np.eye(S.shape[0]), v)))


def statistical(
    n_sets: int,
    *,
    target: str = "cov_frobenius",
    d: int = 8,
    n_min: int = 20,
    n_max: int = 40,
    pca_k: int | None = None,
    ridge: float = 0.01,
    log_scale_min: float = math.log(0.25),
    log_scale_max: float = math.log(2.0),
    seed: int = 0,
    normalise: str = "none",
    workers: int | None = 1,
) -> SetData:
    """Statistical targets of tab:egnn-comparison ("CN d=8", "Mah d=8", "PCA d=16"), all invariant
    under rotations and translations of the set, as the paper says:
    - "cov_frobenius": ||Sigma(S)||_F, Sigma the biased (1/n) sample covariance;
    - "mahalanobis": one element is a query (indicator column = 1, others 0, d_in = d + 1); y is its
      Mahalanobis distance to the other elements with covariance Sigma_ref + lam I, lam = ridge *
      trace(Sigma_ref)/d (prop:tdof-natural uses a regularised covariance; the paper gives no lam);
    - "pca_error": mean squared residual after projecting the centred set on its top-k principal
      components (k = ``pca_k``, default d // 4), i.e. the sum of the d - k smallest eigenvalues of
      Sigma.

    Open choices: each set is an anisotropic Gaussian with its own frame, x = m + Q diag(s) z, m ~
    N(0, I), Q Haar-orthogonal, log s_j ~ U(log 0.25, log 2), z ~ N(0, I); the query is one more
    draw from the same Gaussian. n ~ U{20..40} (more points than d=16 dimensions, so covariances are
    usually full rank)."""
    _check_common(n_sets, d, n_min, n_max, seed)
    _check_choice("target", target, ("cov_frobenius", "mahalanobis", "pca_error"))
    if pca_k is None:
        pca_k = max(d // 4, 1)
    _check_int("pca_k", pca_k, 0, d)
    _check_float("ridge", ridge, 0.0, open_lo=True)
    _check_float("log_scale_min", log_scale_min)
    _check_float("log_scale_max", log_scale_max)
    if target == "mahalanobis" and n_min < 3:
        raise ValueError(
            f"n_min must be >= 3 for target='mahalanobis' (query + >= 2 references), got {n_min}"
        )
    _check_normalise(normalise)
    opts = _opts(locals())
    rng = np.random.default_rng(seed)
    sets = _anisotropic_sets(rng, n_sets, d, n_min, n_max, log_scale_min, log_scale_max)
    if target == "mahalanobis":
        pairs = [(s[1:], s[:1]) for s in sets]  # (references, query)
        sets, scale = _normalise_sets([np.concatenate([r, q]) for r, q in pairs], normalise)
        sets = [_to32(_pack([s[:-1], s[-1:]], rng)) for s in sets]
        y = _map_targets(mahalanobis_packed, sets, workers, ridge=ridge)
        return _finish("statistical", opts, seed, sets, y, n_max, scale)
    fn, kw = (cov_frobenius, {}) if target == "cov_frobenius" else (pca_error, {"k": pca_k})
    return _geometric_task("statistical", opts, seed, sets, n_max, normalise, fn, workers, **kw)


def meta_basis(L: int, d: int, function_seed: int = 0) -> np.ndarray:
    """The fixed basis of :func:`meta_regression`: (L, d, d) with i.i.d. N(0, 1/d) entries."""
    return np.random.default_rng(function_seed).normal(0.0, 1.0 / math.sqrt(d), size=(L, d, d))


def meta_regression(
    n_sets: int,
    *,
    L: int = 32,
    d: int = 8,
    k_support: int = 30,
    function_seed: int = 0,
    seed: int = 0,
    normalise: str = "none",
) -> SetData:
    """Few-shot meta-regression (tab:meta-reg, app:meta-regression): a shared basis M_1..M_L (d x
    d), per task c ~ N(0, I_L) and A = sum_l c_l M_l; K = 30 support pairs (x_i, A x_i) and one
    query x_q; y = A x_q (d_out = d = 8). L in {4, 8, 16, 32}.

    Tokens: support [x_i, A x_i, 1], query [x_q, 0, 0] (d_in = 2d + 1), rows shuffled. Open choices:
    x ~ N(0, I_d); basis entries N(0, 1/d) from ``function_seed`` (shared by all splits). Then
    Var(y_j) = L, i.e. 32 at L = 32: the paper's non-learning baselines sit at MSE ~ 30.8, which is
    what predicting 0 gives, so this scale matches the paper's."""
    _check_common(n_sets, d, 1, 1, seed)
    _check_int("L", L, 1)
    _check_int("k_support", k_support, 1)
    _check_int("function_seed", function_seed, 0)
    _check_normalise(normalise, allowed=False)
    opts = _opts(locals())
    M = meta_basis(L, d, function_seed)
    rng = np.random.default_rng(seed)
    sets, y = [], []
    for _ in range(n_sets):
        A = np.einsum("l,lij->ij", rng.normal(size=L), M)  # (d, d)
        xs = rng.normal(size=(k_support, d))
        xq = rng.normal(size=d)
        support = np.concatenate([xs, xs @ A.T, np.ones((k_support, 1))], 1)  # (K, 2d+1)
        query = np.concatenate([xq, np.zeros(d + 1)])[None]  # (1, 2d+1)
        s = np.concatenate([support, query])
        sets.append(_to32(s[rng.permutation(len(s))]))
        y.append(_to32(A) @ _to32(xq))
    return _finish("meta_regression", opts, seed, sets, y, k_support + 1)


# --- sklearn digits as 2-D point clouds (the paper's Tier-1 rows of tab:transfer-matrix) --------

_DIGIT_TARGETS = {
    "meb": geometry.meb_radius,
    "hull": geometry.hull_volume,
    "mst": geometry.mst_weight,
    "kcenter": geometry.kcenter_cost,
}
_DIGIT_SPLITS = {"train": (0.0, 0.7), "val": (0.7, 0.85), "test": (0.85, 1.0), "all": (0.0, 1.0)}


def _digits():
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:  # pragma: no cover
        raise ImportError(
            "digits_geometry needs scikit-learn (its bundled 8x8 digits; no download)"
        ) from e
    d = load_digits()  # shipped inside the package: never a network access
    return d.images, d.target


def digits_geometry(
    n_sets: int,
    *,
    target: str = "meb",
    variant: str = "raw",
    threshold: int = 8,
    affine_std: float = 0.3,
    split: str = "all",
    k: int = 5,
    seed: int = 0,
    normalise: str = "none",
    workers: int | None = 1,
) -> SetData:
    """scikit-learn's bundled 8x8 digits as 2-D point clouds: the Tier-1 "raw pixel coordinates of
    on-pixels" rows of tab:transfer-matrix (MNIST/Fashion-MNIST/CIFAR there; the digits ship with
    scikit-learn, so nothing is downloaded). ``target`` is a geometric target, "meb" | "hull" |
    "mst" | "kcenter" (k = 5), as in that table, or "class" (the digit, int64 labels).

    Points: pixels with intensity >= ``threshold`` (8 of 16), coordinates (col, 7 - row) / 7 in [0,
    1]^2. ``variant``: "raw"; "affine" (TDOF-4): x -> A (x - 1/2) + 1/2 with A = I + N(0,
    affine_std^2) entries per set; "mixture": the union of 3 digits, each shifted by an offset ~
    U(0, 2)^2 (y must then be geometric). Images are drawn with replacement from a fixed 70/15/15
    partition of the 1797 images (``split``; :func:`make_splits` passes train/val/test, so test
    images never appear in training)."""
    _check_int("n_sets", n_sets, 1)
    _check_int("seed", seed, 0)
    _check_choice("target", target, (*_DIGIT_TARGETS, "class"))
    _check_choice("variant", variant, ("raw", "affine", "mixture"))
    _check_int("threshold", threshold, 1, 16)
    _check_float("affine_std", affine_std, 0.0)
    _check_choice("split", split, _DIGIT_SPLITS)
    _check_int("k", k, 1)
    _check_normalise(normalise, allowed=target != "class")
    if target == "class" and variant == "mixture":
        raise ValueError("target='class' needs variant='raw' or 'affine' (a mixture has 3 labels)")
    opts = _opts(locals())
    images, labels = _digits()
    perm = np.random.default_rng(12345).permutation(
        len(images)
    )  # fixed partition, independent of seed
    lo, hi = _DIGIT_SPLITS[split]
    pool = perm[int(lo * len(perm)) : int(hi * len(perm))]
    rng = np.random.default_rng(seed)

    def cloud(i):
        r, c = np.nonzero(images[i] >= threshold)
        return np.stack([c, 7 - r], 1) / 7.0

    sets, y = [], []
    for _ in range(n_sets):
        if variant == "mixture":
            idx = rng.choice(pool, size=3)
            s = np.concatenate([cloud(i) + rng.uniform(0, 2, size=2) for i in idx])
        else:
            i = rng.choice(pool)
            s = cloud(i)
            if variant == "affine":
                A = np.eye(2) + rng.normal(0.0, affine_std, size=(2, 2))
                s = (s - 0.5) @ A.T + 0.5
            y.append(labels[i])
        sets.append(s)
    n_rows = 3 * 64 if variant == "mixture" else 64
    if target == "class":
        return _finish(
            "digits_geometry", opts, seed, [_to32(s) for s in sets], y, n_rows, classification=True
        )
    kw = {"k": k} if target == "kcenter" else {}
    return _geometric_task(
        "digits_geometry",
        opts,
        seed,
        sets,
        n_rows,
        normalise,
        _DIGIT_TARGETS[target],
        workers,
        **kw,
    )


# ---------------------------------------------------------------------------------------------
# Registry, splits, cache
# ---------------------------------------------------------------------------------------------

TASKS: dict[str, callable] = {
    "set_regression": set_regression,  # Task A
    "chamfer_matching": chamfer_matching,  # Task B
    "few_shot_retrieval": few_shot_retrieval,  # Task D
    "rotation_matching": rotation_matching,  # Task F
    "mst_weight": mst_weight,  # Task G
    "meb_radius": meb_radius,
    "hull_volume": hull_volume,
    "sgsp": sgsp,
    "quadratic_tdof": quadratic_tdof,
    "set_stat": set_stat,
    "statistical": statistical,
    "meta_regression": meta_regression,
    "digits_geometry": digits_geometry,
}

_NOT_OPTIONS = ("n_sets", "seed", "workers")


def task_options(name: str) -> dict:
    """The options of task ``name`` with their defaults (excluding n_sets, seed, workers)."""
    fn = _get(name)
    return {
        k: p.default for k, p in inspect.signature(fn).parameters.items() if k not in _NOT_OPTIONS
    }


def _get(name: str):
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; valid tasks: {', '.join(sorted(TASKS))}")
    return TASKS[name]


def _resolve(name: str, opts: dict) -> dict:
    valid = task_options(name)
    bad = sorted(set(opts) - set(valid))
    if bad:
        raise ValueError(
            f"unknown option(s) {bad} for task {name!r}; valid options: {sorted(valid)}"
        )
    return {**valid, **opts}


def default_cache_dir() -> Path:
    """``$MZLITE_CACHE`` if set, else ``data/cache`` in the repository checkout mzlite runs from
    (so notebooks, tests and the CLI share one cache whatever their working directory), else
    ``~/.cache/mzlite`` for an installed package."""
    if "MZLITE_CACHE" in os.environ:
        return Path(os.environ["MZLITE_CACHE"])
    repo = Path(__file__).resolve().parents[1]
    if (repo / "pyproject.toml").is_file():
        return repo / "data" / "cache"
    return Path.home() / ".cache" / "mzlite"


def cache_path(
    name: str, n_sets: int, seed: int = 0, cache_dir: str | os.PathLike | None = None, **opts
) -> Path:
    """Where the cached dataset for these arguments lives: the file name carries the task, size,
    seed and a hash of (task, resolved options, n_sets, seed, CODE_VERSION)."""
    full = _resolve(name, opts)
    blob = json.dumps(
        {
            "task": name,
            "options": full,
            "n_sets": int(n_sets),
            "seed": int(seed),
            "version": CODE_VERSION,
        },
        sort_keys=True,
        default=repr,
    )
    key = hashlib.sha256(blob.encode()).hexdigest()[:16]
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return root / f"{name}-N{n_sets}-s{seed}-{key}.pt"


def _save(data: SetData, path: Path) -> None:
    buf = io.BytesIO()
    torch.save(
        {
            "x": data.x,
            "mask": data.mask,
            "y": data.y,
            "task": data.task,
            "options": data.options,
            "seed": data.seed,
            "scale": data.scale,
            "version": CODE_VERSION,
        },
        buf,
    )
    atomic_write_bytes(path, buf.getvalue())


def _load(path: Path) -> SetData:
    d = torch.load(path, map_location="cpu", weights_only=True)
    return SetData(d["x"], d["mask"], d["y"], d["task"], d["options"], d["seed"], d["scale"])


def make_task(
    name: str,
    n_sets: int,
    seed: int = 0,
    *,
    cache: bool = False,
    cache_dir: str | os.PathLike | None = None,
    workers: int | None = 1,
    **opts,
) -> SetData:
    """Generate task ``name`` (a key of :data:`TASKS`) with ``n_sets`` sets.

    Unknown task names or options raise ValueError listing the valid ones. With ``cache=True`` the
    dataset is loaded from / saved to :func:`cache_path` (atomic write; a corrupt entry is
    regenerated). ``workers`` processes compute slow targets (None = all cores); it does not change
    the data."""
    fn = _get(name)
    _resolve(name, opts)  # unknown options raise here, before any work
    kw = dict(opts)
    if "workers" in inspect.signature(fn).parameters:
        kw["workers"] = workers
    if not cache:
        return fn(n_sets, seed=seed, **kw)
    path = cache_path(name, n_sets, seed, cache_dir, **opts)
    if path.exists():
        try:
            data = _load(path)
            if len(data) == n_sets and data.seed == seed:
                return data
        except Exception as e:  # a corrupt or foreign file: regenerate, never trust it
            warnings.warn(f"ignoring unreadable cache entry {path}: {e}", stacklevel=2)
    data = fn(n_sets, seed=seed, **kw)
    _save(data, path)
    return data


class Splits(NamedTuple):
    train: SetData
    val: SetData
    test: SetData


def derive_seed(seed: int, index: int) -> int:
    """A seed for split ``index`` derived from ``seed`` (numpy SeedSequence; distinct for 0, 1,
    2)."""
    return int(np.random.SeedSequence([int(seed), int(index)]).generate_state(1)[0])


def make_splits(
    name: str,
    n_train: int,
    n_val: int,
    n_test: int,
    seed: int = 0,
    *,
    cache: bool = False,
    cache_dir: str | os.PathLike | None = None,
    workers: int | None = 1,
    **opts,
) -> Splits:
    """Train/val/test datasets of task ``name`` with seeds ``derive_seed(seed, 0/1/2)`` and
    identical options (so function-level randomness, e.g. ``function_seed``, is shared). Tasks with
    a ``split`` option (digits) get split="train"/"val"/"test" unless given."""
    for nm, v in (("n_train", n_train), ("n_val", n_val), ("n_test", n_test)):
        _check_int(nm, v, 1)
    has_split = "split" in task_options(name) and "split" not in opts
    out = []
    for i, (part, n) in enumerate((("train", n_train), ("val", n_val), ("test", n_test))):
        kw = {**opts, "split": part} if has_split else opts
        out.append(
            make_task(
                name,
                n,
                derive_seed(seed, i),
                cache=cache,
                cache_dir=cache_dir,
                workers=workers,
                **kw,
            )
        )
    return Splits(*out)


# ---------------------------------------------------------------------------------------------
# How hard is the task really? A ridge regression on simple set statistics
# ---------------------------------------------------------------------------------------------


def set_features(data: SetData, features: str = "all") -> tuple[np.ndarray, list[str]]:
    """Permutation-invariant statistics of every set, ``(N, F)`` float64, and their names.

    "basic": n, RMS spread around the centroid, max distance to the centroid (the three statistics
    that give R^2 ~ 0.99 on raw MEB sets). "all": these plus the mean element norm and the per-
    dimension mean, std, min and max (4 d_in more)."""
    _check_choice("features", features, ("basic", "all"))
    x = data.x.double().numpy()  # (N, n, d_in)
    m = data.mask.numpy()[..., None]  # (N, n, 1)
    cnt = m.sum(1)  # (N, 1)
    mean = (x * m).sum(1) / cnt  # (N, d_in)
    dev = np.where(m, x - mean[:, None], 0.0)
    dist = np.sqrt((dev**2).sum(-1))  # (N, n) distance to the centroid (0 on padding)
    rms = np.sqrt((dist**2).sum(1, keepdims=True) / cnt)
    cols = [cnt, rms, dist.max(1, keepdims=True)]
    names = ["n", "rms_spread", "max_dist_to_centroid"]
    if features == "all":
        norm = np.where(m[..., 0], np.sqrt((x**2).sum(-1)), 0.0).sum(1, keepdims=True) / cnt
        std = np.sqrt((dev**2).sum(1) / cnt)
        mn = np.where(m, x, np.inf).min(1)
        mx = np.where(m, x, -np.inf).max(1)
        cols += [norm, mean, std, mn, mx]
        d = x.shape[2]
        names += ["mean_norm"] + [
            f"{s}_{j}" for s in ("mean", "std", "min", "max") for j in range(d)
        ]
    return np.concatenate(cols, 1), names


_ALPHAS = tuple(10.0**k for k in range(-6, 4))


def baseline_r2(
    data_train: SetData,
    data_test: SetData,
    *,
    features: str = "all",
    alphas=_ALPHAS,
) -> dict:
    """Test R^2 of a ridge regression on :func:`set_features` (standardised on train; the ridge
    strength picked from ``alphas`` by exact leave-one-out error on train). R^2 = 1 - SSE/SST per
    output (SST around the test mean), averaged over outputs. Returns {"r2", "r2_per_output",
    "alpha", "features", "n_train", "n_test"}. Regression tasks only."""
    for nm, dset in (("data_train", data_train), ("data_test", data_test)):
        if not isinstance(dset, SetData):
            raise TypeError(f"{nm} must be a SetData, got {type(dset).__name__}")
        if dset.is_classification:
            raise ValueError(f"{nm} has class labels; baseline_r2 is for regression targets")
    if data_train.d_in != data_test.d_in or data_train.y.shape[1] != data_test.y.shape[1]:
        raise ValueError("data_train and data_test must have the same d_in and d_out")
    Xtr, names = set_features(data_train, features)
    Xte, _ = set_features(data_test, features)
    keep = Xtr.std(0) > 1e-12  # constant columns (e.g. n for fixed-size tasks) carry nothing
    mu, sd = Xtr[:, keep].mean(0), Xtr[:, keep].std(0)
    Xtr, Xte = (Xtr[:, keep] - mu) / sd, (Xte[:, keep] - mu) / sd
    names = [n for n, k in zip(names, keep, strict=True) if k]
    ytr, yte = data_train.y.double().numpy(), data_test.y.double().numpy()
    ym = ytr.mean(0)
    # LOO residual of ridge: r_i / (1 - H_ii), with H from the SVD of the centred design
    U, s, Vt = np.linalg.svd(Xtr, full_matrices=False)
    Uy = U.T @ (ytr - ym)
    best = None
    for a in alphas:
        f = s**2 / (s**2 + a)
        fit = U @ (f[:, None] * Uy)
        h = (U**2 * f).sum(1) + 1.0 / len(Xtr)  # + 1/n: the intercept
        loo = (((ytr - ym - fit) / (1 - h)[:, None]) ** 2).mean()
        if best is None or loo < best[0]:
            best = (loo, a)
    a = best[1]
    coef = Vt.T @ ((s / (s**2 + a))[:, None] * Uy)  # (F, d_out)
    pred = Xte @ coef + ym
    sst = ((yte - yte.mean(0)) ** 2).sum(0)
    r2 = 1.0 - ((yte - pred) ** 2).sum(0) / np.where(sst > 0, sst, np.nan)
    return {
        "r2": float(np.nanmean(r2)),
        "r2_per_output": [float(v) for v in r2],
        "alpha": float(a),
        "features": names,
        "n_train": len(data_train),
        "n_test": len(data_test),
    }
