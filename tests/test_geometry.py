"""mzlite.tasks.geometry against independent computations: brute force, a scipy dual QP, pure-Python
Prim, analytic volumes."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from mzlite.tasks import geometry as G


def _mixture(rng, n, d):
    K = rng.integers(1, 4)
    mu = rng.normal(0, 2, (K, d))
    s = rng.uniform(0.2, 1.0, K)
    z = rng.integers(0, K, n)
    return mu[z] + s[z, None] * rng.normal(size=(n, d))


def _haar(rng, d):
    q, r = np.linalg.qr(rng.normal(size=(d, d)))
    return q * np.sign(np.diag(r))


# --- MEB ---------------------------------------------------------------------------------------


def _meb_brute(P):
    """Smallest circumball over all affinely independent subsets of <= d+1 points that encloses
    every point: the MEB is the circumball of its support set."""
    n, d = P.shape
    best = math.inf
    for k in range(1, min(n, d + 1) + 1):
        for sub in itertools.combinations(range(n), k):
            Q = P[list(sub)]
            U = Q[1:] - Q[0]
            if k > 1 and np.linalg.matrix_rank(U, tol=1e-9) < k - 1:
                continue
            if k == 1:
                c = Q[0]
            else:
                alpha = np.linalg.solve(U @ U.T, 0.5 * (U * U).sum(1))
                c = Q[0] + alpha @ U
            r = np.sqrt(((Q - c) ** 2).sum(1).max())
            if np.sqrt(((P - c) ** 2).sum(1)).max() <= r * (1 + 1e-9) + 1e-12:
                best = min(best, r)
    return best


def _meb_dual_qp(P):
    """max_{lam in simplex} sum lam_i |p_i|^2 - |sum lam_i p_i|^2 with SLSQP (independent
    solver)."""
    n = len(P)
    b = (P**2).sum(1)
    res = minimize(
        lambda lam: -(lam @ b - ((lam @ P) ** 2).sum()),
        np.ones(n) / n,
        jac=lambda lam: -(b - 2 * P @ (lam @ P)),
        bounds=[(0, 1)] * n,
        constraints=[
            {"type": "eq", "fun": lambda lam: lam.sum() - 1, "jac": lambda lam: np.ones(n)}
        ],
        method="SLSQP",
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    return math.sqrt(-res.fun)


@pytest.mark.parametrize("d", [1, 2, 3])
def test_meb_matches_brute_force(d):
    rng = np.random.default_rng(d)
    for _ in range(25):
        P = rng.normal(size=(rng.integers(1, 8), d))
        assert G.meb_radius(P) == pytest.approx(_meb_brute(P), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("d", [8, 32])
def test_meb_matches_dual_qp_and_badoiu_clarkson(d):
    rng = np.random.default_rng(10 + d)
    for _ in range(8):
        P = _mixture(rng, rng.integers(10, 31), d)
        res = G.meb(P)
        assert res.gap < 1e-9
        assert res.radius == pytest.approx(_meb_dual_qp(P), rel=1e-6)
        assert len(res.support) <= d + 1
        # every point inside, support points on the boundary
        dist = np.sqrt(((P - res.center) ** 2).sum(1))
        assert dist.max() <= res.radius * (1 + 1e-12)
        np.testing.assert_allclose(dist[res.support], res.radius, rtol=1e-9)
        bc = G.badoiu_clarkson_radius(P, 2000)  # loose upper bound
        assert res.radius * (1 - 1e-12) <= bc <= res.radius * 1.01


def test_meb_points_on_sphere():
    rng = np.random.default_rng(0)
    for d in (2, 5, 16):
        u = rng.normal(size=(40, d))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        P = 3.0 * np.concatenate([u, [u[0] * 1, -u[0]]]) + 7.0  # an antipodal pair pins R = 3
        res = G.meb(P)
        assert res.radius == pytest.approx(3.0, rel=1e-10)
        np.testing.assert_allclose(res.center, 7.0, atol=1e-9)


def test_meb_degenerate_sets():
    assert G.meb_radius(np.ones((1, 4))) == 0.0
    assert G.meb_radius(np.ones((5, 3))) == 0.0  # all duplicates
    line = np.outer(np.array([0.0, 1.0, 5.0, 2.0, 5.0]), [1.0, 2.0, 2.0])  # collinear, |dir| = 3
    assert G.meb_radius(line) == pytest.approx(7.5)
    # many points, most of them inside: 150 keep the independent SLSQP check (a dense QP in n
    # variables) to a second even when BLAS threads compete for the cores
    big = np.random.default_rng(1).normal(size=(150, 3))
    assert G.meb_radius(big) == pytest.approx(_meb_dual_qp(big), rel=1e-6)
    with pytest.raises(ValueError, match="points"):
        G.meb_radius(np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        G.meb_radius(np.array([[0.0, np.nan]]))


# --- hull, MST, Chamfer ------------------------------------------------------------------------


def test_hull_volume_analytic():
    rng = np.random.default_rng(0)
    for d in (2, 3, 4):
        cube = np.array(list(itertools.product([0.0, 1.0], repeat=d)))
        inner = rng.uniform(0, 1, size=(10, d))
        assert G.hull_volume(np.concatenate([cube, inner]) * 2.0) == pytest.approx(2.0**d)
        simplex = np.concatenate([np.zeros((1, d)), np.eye(d)])
        assert G.hull_volume(simplex) == pytest.approx(1 / math.factorial(d))
    assert G.hull_volume(np.array([[0.0], [3.0], [1.0]])) == 3.0


def test_hull_volume_degenerate_is_zero():
    rng = np.random.default_rng(1)
    assert G.hull_volume(rng.normal(size=(3, 3))) == 0.0  # n <= d
    flat = np.concatenate([rng.normal(size=(10, 2)), np.zeros((10, 1))], 1)  # coplanar in R^3
    assert G.hull_volume(flat @ _haar(rng, 3).T) == 0.0
    assert G.hull_volume(np.outer(rng.normal(size=8), [1.0, 2.0])) == 0.0  # collinear in R^2
    assert G.hull_volume(np.ones((6, 3))) == 0.0  # all duplicates
    sq = np.array([[0, 0], [1, 0], [0, 1], [1, 1], [1, 1], [0, 0]], dtype=float)  # duplicates ok
    assert G.hull_volume(sq) == pytest.approx(1.0)


def _prim(P):
    n = len(P)
    done, best, total = [False] * n, [math.inf] * n, 0.0
    best[0] = 0.0
    for _ in range(n):
        u = min((i for i in range(n) if not done[i]), key=lambda i: best[i])
        done[u] = True
        total += best[u]
        for v in range(n):
            if not done[v]:
                best[v] = min(best[v], math.dist(P[u], P[v]))
    return total


def test_mst_matches_prim_including_duplicates():
    rng = np.random.default_rng(2)
    for _ in range(20):
        P = rng.normal(size=(rng.integers(1, 15), rng.integers(1, 6)))
        assert G.mst_weight(P) == pytest.approx(_prim(P.tolist()), rel=1e-12, abs=1e-12)
        D = np.concatenate([P, P[: len(P) // 2]])  # duplicated points: scipy alone drops edges
        assert G.mst_weight(D) == pytest.approx(_prim(D.tolist()), rel=1e-12, abs=1e-12)
    assert G.mst_weight(np.array([[0.0], [1.0], [3.0], [1.0]])) == pytest.approx(3.0)


def test_chamfer_matches_loops():
    rng = np.random.default_rng(3)
    A, B = rng.normal(size=(7, 3)), rng.normal(size=(4, 3))
    ab = np.mean([min(np.sum((a - b) ** 2) for b in B) for a in A])
    ba = np.mean([min(np.sum((a - b) ** 2) for a in A) for b in B])
    assert G.chamfer_distance(A, B) == pytest.approx(ab + ba)
    assert G.chamfer_distance(B, A) == pytest.approx(ab + ba)
    assert G.chamfer_distance(A, A[::-1]) == 0.0
    with pytest.raises(ValueError, match="dimension"):
        G.chamfer_distance(A, B[:, :2])


# --- SGSP --------------------------------------------------------------------------------------


def test_sgsp_against_loops():
    rng = np.random.default_rng(4)
    P = rng.normal(size=(12, 4))
    n = len(P)
    dist = [[math.dist(P[i], P[j]) for j in range(n)] for i in range(n)]
    pairs = sorted(dist[i][j] for i in range(n) for j in range(i + 1, n))
    assert G.diameter(P) == pytest.approx(pairs[-1])
    assert G.k_smallest_pairwise_sum(P, 5) == pytest.approx(sum(pairs[:5]))
    kth = [sorted(dist[i][j] for j in range(n) if j != i)[4] for i in range(n)]
    assert G.knn_radius(P, 5) == pytest.approx(float(np.median(kth)))
    cen = P.mean(0)
    centres = [max(range(n), key=lambda i: math.dist(P[i], cen))]
    for _ in range(4):
        centres.append(max(range(n), key=lambda i: min(dist[i][c] for c in centres)))
    assert G.kcenter_cost(P, 5) == pytest.approx(
        max(min(dist[i][c] for c in centres) for i in range(n))
    )
    assert G.kcenter_cost(P[:5], 5) == 0.0
    with pytest.raises(ValueError, match="k must be"):
        G.knn_radius(P[:3], 5)


_TARGETS = [
    G.meb_radius,
    G.hull_volume,
    G.mst_weight,
    G.diameter,
    G.kcenter_cost,
    lambda p: G.knn_radius(p, 3),
    lambda p: G.k_smallest_pairwise_sum(p, 4),
]


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(8, 20), st.integers(2, 5))
def test_targets_are_permutation_and_rigid_motion_invariant(seed, n, d):
    rng = np.random.default_rng(seed)
    P = _mixture(rng, n, d)
    perm = P[rng.permutation(n)]
    moved = P @ _haar(rng, d).T + rng.normal(size=d)  # rotation/reflection + translation
    for f in _TARGETS:
        ref = f(P)
        assert f(perm) == pytest.approx(ref, rel=1e-9, abs=1e-12)
        assert f(moved) == pytest.approx(ref, rel=1e-7, abs=1e-9)
