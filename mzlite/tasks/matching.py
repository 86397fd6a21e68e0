"""Two sets packed into one with a type indicator: Chamfer set matching (Task B), few-shot set
retrieval (Task D) and rotation-dependent set matching (Task F)."""

from __future__ import annotations

import math

import numpy as np
import torch

from . import geometry
from ._build import (
    _check_choice,
    _check_common,
    _check_float,
    _check_int,
    _check_normalise,
    _check_order,
    _finish,
    _haar_orthogonal,
    _map_targets,
    _opts,
    _pack,
    _sizes,
    _to32,
)
from .dataset import SetData


def chamfer_matching_dataset(
    n_sets: int,
    *,
    d: int = 3,
    n_min: int = 10,
    n_max: int = 30,
    noise: float = 0.3,
    p_match: float = 0.5,
    point_std: float = 8.0,
    rotation: str = "haar",
    max_angle: float = 0.3,
    independent_size: str = "own",
    seed: int = 0,
    normalise: str = "none",
    workers: int | None = 1,
) -> SetData:
    """Task B, Chamfer set matching in R^3 (app:task-descriptions; tab:ambiguity, tab:sizegen).

    A has n_A ~ U{n_min..n_max} points ~ N(0, point_std^2 I_d). With probability ``p_match`` (0.5) B
    is a rotated-noisy copy, B = R A + eps with eps ~ N(0, noise^2 I); otherwise B is an
    independent cloud from the same distribution. Both sets are packed into one set with a binary
    type indicator column (0 = A, 1 = B), d_in = d + 1, rows shuffled; x has 2 n_max rows. y =
    symmetric squared Chamfer distance (:func:`geometry.chamfer_distance`).

    The paper says "a rotated-noisy version of A" and "an independent random cloud"; how far the
    rotation turns and how many points the independent cloud has are open (``TASK_READINGS``
    names the combinations):
    - ``rotation="haar"`` (reading v1): R Haar-random in SO(d). A copy turned that far is as far
      from A in Chamfer distance as an independent cloud is.
    - ``rotation="small"``: R = exp(theta K), K a random skew-symmetric matrix of spectral norm 1
      and theta ~ U(0, ``max_angle``), so no vector turns by more than ``max_angle`` radians
      (:func:`small_rotation`): the copy stays near A.
    - ``independent_size="own"`` (v1): the independent cloud draws its own size, while a copy has
      n_B = n_A, so the two set sizes tell the classes apart; ``"same"``: it has n_B = n_A too.

    Open choices: the point distribution and ``point_std = 8`` (chosen so Var(y) ~ 1.4e3, the value
    the paper's Task-B numbers imply: MSE 138 at R^2 0.901, under the v1 reading), noise = 0.3
    (tab:ambiguity's row that equals tab:sizegen's default row), no translation."""
    _check_common(n_sets, d, n_min, n_max, seed)
    _check_float("noise", noise, 0.0)
    _check_float("p_match", p_match, 0.0, 1.0)
    _check_float("point_std", point_std, 0.0, open_lo=True)
    _check_choice("rotation", rotation, ("haar", "small"))
    _check_float("max_angle", max_angle, 0.0, math.pi)
    _check_choice("independent_size", independent_size, ("own", "same"))
    _check_normalise(normalise)
    opts = _opts(locals())
    rng = np.random.default_rng(seed)
    pairs = []
    for n in _sizes(rng, n_sets, n_min, n_max):
        A = rng.normal(0.0, point_std, size=(n, d))
        if rng.random() < p_match:
            R = (
                _haar_orthogonal(rng, d, special=True)
                if rotation == "haar"
                else small_rotation(rng, d, max_angle)
            )
            B = A @ R.T + rng.normal(0.0, noise, size=(n, d))
        else:
            n_b = rng.integers(n_min, n_max + 1) if independent_size == "own" else n
            B = rng.normal(0.0, point_std, size=(n_b, d))
        pairs.append((A, B))
    return _pair_task("chamfer_matching", opts, seed, pairs, rng, n_max, normalise, workers)


def small_rotation(rng: np.random.Generator, d: int, max_angle: float) -> np.ndarray:
    """A random rotation of R^d that turns no vector by more than ``max_angle`` radians: exp(theta
    K) with K a Gaussian skew-symmetric matrix scaled to spectral norm 1 and theta ~ U(0,
    max_angle). Its principal angles are theta times K's (<= 1); in R^3 it is a turn by theta
    about a uniformly random axis."""
    import scipy.linalg  # here: importing it costs half a second that only this task needs

    g = rng.normal(size=(d, d))
    K = g - g.T
    K /= np.linalg.norm(K, 2)
    return scipy.linalg.expm(rng.uniform(0.0, max_angle) * K)


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


def few_shot_retrieval_dataset(
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
    _check_order("noise_min", noise_min, "noise_max", noise_max)
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


def rotation_matching_dataset(
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

    The target ("post-alignment Chamfer distance" in the paper) has three readings:
    - ``target="chamfer"`` (default, reading v1): CD(A, B), the Chamfer distance of the sets as
      given; a model has to find R to relate them. The only reading whose scale fits the paper's
      MSE (MSE 487 at R^2 0.904 implies Var(y) ~ 5e3; point_std = 6 gives Var(y) ~ 5e3 at d=8),
      but it is the distance before alignment, not after.
    - ``target="residual"``: CD(A, R^T B) = CD(A, A + R^T eps), the residual after undoing the
      sample's own rotation; it measures the noise only (a tiny variance: no MSE of the paper's).
    - ``target="aligned"``: CD(Q A, B) with Q the rotation that best aligns A to B over their
      hidden correspondence (orthogonal Procrustes in SO(d), :func:`procrustes_rotation`): the
      residual after the optimal alignment, which a model must find from the points alone.
    ``max_angle`` bounds the angle of every Givens factor (pi in v1: the paper gives no range).

    With ``normalise="scale"`` the target is divided by r^2 (r the RMS spread of A u B). Cost:
    d(d-1)/2 vectorised Givens updates (seconds at d = 256 for a few thousand sets)."""
    _check_common(n_sets, d, n_min, n_max, seed)
    if d < 2:
        raise ValueError(f"d must be >= 2 for a rotation, got {d}")
    _check_float("noise", noise, 0.0)
    _check_float("max_angle", max_angle, 0.0)
    _check_float("point_std", point_std, 0.0, open_lo=True)
    _check_choice("target", target, ("chamfer", "residual", "aligned"))
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
    if target != "chamfer":
        r = np.ones(n_sets) if data.scale is None else data.scale.numpy().astype(np.float64)
        if target == "residual":
            back = _givens_batch(B, angle_seed, max_angle, inverse=True)  # R^T B = A + R^T eps
            y = [
                geometry.chamfer_distance(A[i, :n], back[i, :n]) / r[i] ** 2
                for i, n in enumerate(sizes)
            ]
        else:
            y = []
            for i, n in enumerate(sizes):
                a, b = _to32(A[i, :n]), _to32(B[i, :n])  # the points the model sees
                Q = procrustes_rotation(a, b)
                y.append(geometry.chamfer_distance(a @ Q.T, b) / r[i] ** 2)
        data.y = torch.as_tensor(np.asarray(y, dtype=np.float32).reshape(-1, 1))
    return data


def procrustes_rotation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The rotation Q in SO(d) minimising sum_i ||Q a_i - b_i||^2 for corresponding rows of ``a``
    and ``b`` (n, d), about the origin (Task F's rotation has no translation): Kabsch's solution
    U diag(1, ..., 1, det(U V^T)) V^T from the SVD U S V^T of b^T a."""
    U, _, Vt = np.linalg.svd(b.T @ a)
    D = np.ones(a.shape[1])
    D[-1] = np.sign(np.linalg.det(U @ Vt))
    return (U * D) @ Vt
