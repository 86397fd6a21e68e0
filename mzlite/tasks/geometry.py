"""Exact computational-geometry targets: minimum enclosing ball, convex-hull volume, MST weight,
Chamfer distance and the sparse geometric set predicates (SGSP) of the paper.

Every function takes ONE set as a NumPy array ``points`` of shape ``(n, d)`` holding only the real
elements (no padding) and returns a Python float. The task generators apply them set by set (and in
parallel) to padded batches. The code is numpy/scipy only (no torch), so worker processes import it
cheaply; scipy is imported by the functions that use it (scipy.spatial costs about half a second
of CPU to import, and most processes that import the tasks, a chapter's kernel among them, never
compute a geometric target).

Paper references: MEB radius (tab:meb, app:meb, ground truth "Welzl's algorithm"), convex-hull
volume "computed exactly via the QHull algorithm" (tab:hull, app:hull), MST weight (Task G,
tab:mst-scale), Chamfer distance (Task B, prop:chamfer-tdof), SGSP: diameter, k-NN radius,
k-smallest pairwise sum, furthest-first k-center cost (tab:sgsp, app:sgsp).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


def _as_points(name: str, points, min_n: int = 1) -> np.ndarray:
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2:
        raise ValueError(f"{name} must have shape (n, d), got shape {p.shape}")
    if p.shape[0] < min_n or p.shape[1] < 1:
        raise ValueError(
            f"{name} must have shape (n, d) with n >= {min_n} and d >= 1, got {p.shape}"
        )
    if not np.isfinite(p).all():
        raise ValueError(f"{name} contains NaN or inf values")
    return p


# ---------------------------------------------------------------------------------------------
# Minimum enclosing ball
# ---------------------------------------------------------------------------------------------


class MEB(NamedTuple):
    """Result of :func:`meb`: ``radius`` is the primal (feasible) radius; ``lower`` is the dual
    lower bound sqrt(sum_i lam_i ||p_i - sum_j lam_j p_j||^2) certified by the support weights
    ``lam``; ``gap = (radius - lower) / radius`` (0 for a single point)."""

    center: np.ndarray  # (d,)
    radius: float
    support: np.ndarray  # (k,) indices of the support points, k <= d + 1
    lam: np.ndarray  # (k,) convex weights of the centre over the support points
    lower: float
    gap: float


def _circumcenter(Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre of the smallest sphere through the rows of ``Q`` (k, d): the point of aff(Q) that is
    equidistant to all rows. Returns (centre (d,), affine weights lam (k,), sum lam = 1)."""
    k = Q.shape[0]
    if k == 1:
        return Q[0].copy(), np.ones(1)
    q0 = Q[0]
    U = Q[1:] - q0  # (k-1, d)
    G = U @ U.T  # (k-1, k-1)
    rhs = 0.5 * np.einsum("ij,ij->i", U, U)
    # lstsq, not solve: a numerically affinely-dependent support must not crash (it is then dropped)
    alpha = np.linalg.lstsq(G, rhs, rcond=None)[0]
    lam = np.concatenate([[1.0 - alpha.sum()], alpha])
    return q0 + alpha @ U, lam


def meb(points, *, tol: float = 1e-6, max_iter: int | None = None) -> MEB:
    """Exact minimum enclosing ball of ``points`` (n, d) with an optimality certificate.

    Algorithm: the pivoting method of Fischer, Gaertner & Kutz ("Fast smallest-enclosing-ball
    computation in high dimensions", ESA 2003), the high-dimensional successor of Welzl's algorithm
    that the paper cites (app:meb). It keeps a ball whose boundary holds a support set T; it walks
    the centre towards the circumcentre of T, adding the first point that would leave the ball, and
    drops a support point whose affine weight is negative. It is exact in exact arithmetic and,
    unlike Welzl's recursion, fast for d up to hundreds (Welzl's expected cost grows like (d+1)!).

    Certificate (why we can call it exact in floating point): at the end the centre is a convex
    combination c = sum_i lam_i p_i of support points, so sum_i lam_i ||p_i - c||^2 is a value of
    the dual QP max_{lam in simplex} sum lam_i ||p_i||^2 - ||sum lam_i p_i||^2 = R*^2 (weak duality)
    and max_i ||p_i - c|| is a feasible radius: lower <= R* <= radius. We raise if the relative gap
    exceeds ``tol`` (default 1e-6; in practice it is ~1e-15).
    """
    P = _as_points("points", points)
    n, d = P.shape
    if max_iter is None:
        max_iter = 50 * (n + d) + 100
    c = P[0].copy()
    T = [int(np.argmax(((P - c) ** 2).sum(1)))]
    scale = float(np.sqrt(((P - P.mean(0)) ** 2).sum(1).max())) + 1e-300
    for _ in range(max_iter):
        Q = P[T]  # (k, d)
        cc, lam = _circumcenter(Q)
        step = cc - c  # (d,)
        if np.linalg.norm(step) <= 1e-12 * scale:
            if lam.min() >= -1e-12:
                break
            del T[int(np.argmin(lam))]  # c is outside conv(T): the most negative weight leaves
            continue
        # walk c(t) = c + t * step, t in [0, 1]; all of T stays on the boundary. For p not in T
        # f_p(t) = ||p - c(t)||^2 - ||q0 - c(t)||^2 = a_p - 2 t step.(p - q0) becomes 0 at t_p.
        inT = np.zeros(n, dtype=bool)
        inT[T] = True
        q0 = Q[0]
        a = ((P - c) ** 2).sum(1) - ((q0 - c) ** 2).sum()  # (n,) <= 0 up to rounding
        den = 2.0 * (P - q0) @ step  # (n,)
        grow = (~inT) & (den < 0)
        t = np.full(n, np.inf)
        # a point already on/over the boundary (rounding) stops the walk at once: t = 0
        t[grow] = np.where(a[grow] >= 0, 0.0, a[grow] / den[grow])
        j = int(np.argmin(t))
        if t[j] < 1.0:
            c = c + t[j] * step
            T.append(j)
        else:
            c = cc
    else:
        raise RuntimeError(f"meb did not converge in {max_iter} pivots (n={n}, d={d})")
    Q = P[T]
    _, lam = _circumcenter(Q)
    lam = np.clip(lam, 0.0, None)
    lam = lam / lam.sum()
    center = lam @ Q  # (d,) a convex combination: the dual certificate needs exactly this point
    radius = float(np.sqrt(((P - center) ** 2).sum(1).max()))
    lower = float(np.sqrt(max(float(lam @ ((Q - center) ** 2).sum(1)), 0.0)))
    gap = 0.0 if radius == 0.0 else (radius - lower) / radius
    if gap > tol:
        raise RuntimeError(
            f"meb certificate failed: relative primal-dual gap {gap:.2e} > tol={tol:g}"
        )
    return MEB(center, radius, np.asarray(T), lam, lower, gap)


def meb_radius(points) -> float:
    """Radius of the exact minimum enclosing ball (see :func:`meb`; certified to 1e-6 relative)."""
    return meb(points).radius


def badoiu_clarkson_radius(points, n_iter: int = 1000) -> float:
    """Badoiu-Clarkson core-set iteration: a (1 + O(1/sqrt(n_iter))) upper bound on the MEB radius.

    Loose and slow; kept as an independent sanity check of :func:`meb`, not as a target."""
    P = _as_points("points", points)
    c = P[0].copy()
    for i in range(1, n_iter + 1):
        f = P[np.argmax(((P - c) ** 2).sum(1))]
        c += (f - c) / (i + 1)
    return float(np.sqrt(((P - c) ** 2).sum(1).max()))


# ---------------------------------------------------------------------------------------------
# Convex hull, MST, Chamfer
# ---------------------------------------------------------------------------------------------


def hull_volume(points, rel_rank_tol: float = 1e-10) -> float:
    """d-dimensional volume of the convex hull (Qhull via scipy.spatial.ConvexHull; tab:hull).

    Degenerate sets have volume 0.0 by definition and never raise: n <= d, points confined to a
    lower-dimensional affine subspace (coplanar/collinear, detected by the smallest singular value
    of the centred points falling below ``rel_rank_tol`` times the largest), or a Qhull precision
    error. Duplicate points are fine. For d = 1 the "volume" is the length max - min."""
    P = _as_points("points", points)
    n, d = P.shape
    if d == 1:
        return float(P.max() - P.min())
    if n <= d:
        return 0.0
    s = np.linalg.svd(P - P.mean(0), compute_uv=False)
    if s[0] == 0.0 or s[-1] <= rel_rank_tol * s[0]:
        return 0.0
    from scipy.spatial import ConvexHull, QhullError

    try:
        return float(ConvexHull(P).volume)
    except QhullError:
        return 0.0


def mst_weight(points) -> float:
    """Total Euclidean length of the minimum spanning tree (Task G, tab:mst-scale).

    scipy's ``minimum_spanning_tree`` reads a 0 in the distance matrix as "no edge", so duplicate
    points would disconnect the graph and silently drop weight. Duplicates add only zero-length
    edges to an MST, so we deduplicate first (exact)."""
    from scipy.sparse.csgraph import minimum_spanning_tree
    from scipy.spatial.distance import pdist, squareform

    P = _as_points("points", points)
    U = np.unique(P, axis=0)
    if U.shape[0] <= 1:
        return 0.0
    D = squareform(pdist(U))
    # distinct float points can still round to distance 0 (differences below ~1e-154): keep them
    # connected with the smallest positive edge instead of losing the edge
    off = ~np.eye(D.shape[0], dtype=bool)
    D[off & (D == 0.0)] = np.finfo(np.float64).tiny
    return float(minimum_spanning_tree(D).sum())


def chamfer_distance(a, b) -> float:
    """Symmetric Chamfer distance with SQUARED Euclidean distances, each direction averaged:

        CD(A, B) = mean_{a in A} min_{b in B} ||a - b||^2 + mean_{b in B} min_{a in A} ||a - b||^2.

    The paper (Task B; remark after prop:chamfer-tdof) writes one direction, (1/n) sum_i ||a_i -
    nn(a_i, B)||^2; we use the usual symmetric sum of both directions so the target does not depend
    on which set is called A."""
    A = _as_points("a", a)
    B = _as_points("b", b)
    if A.shape[1] != B.shape[1]:
        raise ValueError(
            f"a and b must have the same dimension d, got {A.shape[1]} and {B.shape[1]}"
        )
    from scipy.spatial.distance import cdist

    D = cdist(A, B, "sqeuclidean")  # (n_a, n_b)
    return float(D.min(1).mean() + D.min(0).mean())


# ---------------------------------------------------------------------------------------------
# Sparse geometric set predicates (tab:sgsp)
# ---------------------------------------------------------------------------------------------


def diameter(points) -> float:
    """Largest pairwise Euclidean distance (0.0 for one point)."""
    from scipy.spatial.distance import pdist

    P = _as_points("points", points)
    return float(pdist(P).max()) if P.shape[0] > 1 else 0.0


def knn_radius(points, k: int = 5) -> float:
    """Median over the points of the distance to their k-th nearest OTHER point (the paper's "k=5
    median k-NN radius"). Needs n >= k + 1."""
    P = _as_points("points", points)
    n = P.shape[0]
    if not 1 <= k <= n - 1:
        raise ValueError(f"k must be in [1, n - 1] = [1, {n - 1}] for n={n} points, got k={k}")
    from scipy.spatial.distance import pdist, squareform

    D = squareform(pdist(P))
    np.fill_diagonal(D, np.inf)
    kth = np.partition(D, k - 1, axis=1)[:, k - 1]  # (n,)
    return float(np.median(kth))


def k_smallest_pairwise_sum(points, k: int = 5) -> float:
    """Sum of the k smallest of the n(n-1)/2 pairwise Euclidean distances (k=5 by default; the paper
    does not give k). Needs n(n-1)/2 >= k."""
    from scipy.spatial.distance import pdist

    P = _as_points("points", points)
    dist = pdist(P)
    if not 1 <= k <= dist.size:
        raise ValueError(f"k must be in [1, n(n-1)/2] = [1, {dist.size}], got k={k}")
    return float(np.partition(dist, k - 1)[:k].sum())


def kcenter_cost(points, k: int = 5) -> float:
    """Furthest-first (Gonzalez) k-center cost: pick k centres greedily, each the point furthest
    from the centres so far, and return max_i min_c ||p_i - c|| (the "k-center furthest cost", k=5).

    The paper does not say where the traversal starts; the textbook "arbitrary first point" would
    make the target depend on element order, so we start at the point furthest from the centroid
    (permutation invariant up to exact ties). Returns 0.0 when n <= k."""
    P = _as_points("points", points)
    n = P.shape[0]
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if n <= k:
        return 0.0
    first = int(np.argmax(((P - P.mean(0)) ** 2).sum(1)))
    dmin = np.sqrt(((P - P[first]) ** 2).sum(1))  # (n,) distance to the nearest centre so far
    for _ in range(k - 1):
        nxt = int(np.argmax(dmin))
        dmin = np.minimum(dmin, np.sqrt(((P - P[nxt]) ** 2).sum(1)))
    return float(dmin.max())


# ---------------------------------------------------------------------------------------------
# Statistical targets (tab:egnn-comparison)
# ---------------------------------------------------------------------------------------------


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
