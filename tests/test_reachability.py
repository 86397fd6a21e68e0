"""mzlite.reachability against brute-force references: the algebra of Alanwar et al.'s matrix
zonotopes written out entry by entry, grid searches, closed-form support functions and Monte
Carlo trajectories of the true system."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from scipy.optimize import linprog

from mzlite.reachability import (
    Trajectories,
    box_matrix_zonotope,
    cartesian_product,
    consistent_set_bounds,
    consistent_systems,
    noise_matrix_zonotope,
    reachable_sets,
    sample_trajectories,
    simulate,
)
from mzlite.zonotope import MatrixZonotope, Zonotope

D = torch.float64
A_TRUE = torch.tensor([[0.9, -0.3], [0.3, 0.9]], dtype=D)
B_TRUE = torch.tensor([[0.0], [0.5]], dtype=D)
AB_TRUE = torch.cat([A_TRUE, B_TRUE], 1)
X0 = Zonotope(torch.tensor([1.0, 0.0], dtype=D), 0.1 * torch.eye(2, dtype=D))
U = Zonotope(torch.tensor([0.5], dtype=D), torch.tensor([[0.5]], dtype=D))
W = Zonotope(torch.zeros(2, dtype=D), torch.tensor([[0.02, 0.0], [0.01, 0.02]], dtype=D))


def _data(n_traj=4, steps=10, seed=0):
    return sample_trajectories(A_TRUE, B_TRUE, X0, U, W, n_traj, steps, seed=seed)


def test_simulate_is_the_recursion():
    x0 = torch.tensor([1.0, -1.0], dtype=D)
    u = torch.tensor([[1.0], [-2.0], [0.5]], dtype=D)
    w = torch.tensor([[0.1, 0.0], [0.0, -0.1], [0.2, 0.2]], dtype=D)
    states = simulate(A_TRUE, B_TRUE, x0, u, w)
    x = x0
    assert torch.equal(states[0], x0)
    for k in range(3):
        x = A_TRUE @ x + B_TRUE @ u[k] + w[k]
        assert torch.allclose(states[k + 1], x)


def test_data_matrices_line_up_transitions():
    data = _data(2, 3)
    Xm, Um, Xp = data.matrices()
    assert Xm.shape == (2, 6) and Um.shape == (1, 6) and Xp.shape == (2, 6)
    # column j of X_+ is the successor of column j of X_-: the noise is what [A B] leaves over
    resid = Xp - AB_TRUE @ torch.cat([Xm, Um])
    assert bool(W.contains(resid.T).all())
    assert torch.equal(Xm[:, 3], data.states[1, 0]) and torch.equal(Xp[:, 3], data.states[1, 1])


def test_noise_matrix_zonotope_is_every_noise_sequence():
    T = 4
    Mw = noise_matrix_zonotope(W, T)
    assert Mw.shape == (2, T) and Mw.num_generators == W.num_generators * T
    alpha = torch.rand(T, W.num_generators, dtype=D) * 2 - 1  # (T, q): coefficients per column
    seq = (W.center + alpha @ W.generators).T  # (n, T), every column in Z_w
    # entry by entry: the coefficient of generator i * T + j is alpha_j[i]
    xi = alpha.T.reshape(-1)
    assert torch.allclose(Mw.center + (xi[:, None, None] * Mw.generators).sum(0), seq)
    assert bool(Mw.contains(seq))
    outside = seq.clone()
    outside[:, 2] = W.center + 1.5 * W.generators.sum(0)  # one column leaves Z_w
    assert not bool(Mw.contains(outside))


def test_consistent_systems_is_theorem_1_written_out():
    data = _data(2, 5)
    Xm, Um, Xp = data.matrices()
    H = torch.cat([Xm, Um])
    H_pinv = torch.linalg.pinv(H)
    Mw = noise_matrix_zonotope(W, data.num_samples)
    ref_center = (Xp - Mw.center) @ H_pinv
    ref_gens = torch.stack([-G @ H_pinv for G in Mw.generators])
    M = consistent_systems(data, W)
    assert torch.allclose(M.center, ref_center, atol=1e-10)
    assert torch.allclose(M.generators, ref_gens, atol=1e-10)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_true_system_is_consistent_and_a_wrong_one_is_not(seed):
    M = consistent_systems(_data(3, 8, seed), W)
    assert bool(M.contains(AB_TRUE))
    lo, hi = M.interval_hull()
    assert bool(((lo <= AB_TRUE) & (AB_TRUE <= hi)).all())
    wrong = AB_TRUE.clone()
    wrong[0, 0] += 0.5
    assert not bool(M.contains(wrong))


def _grid_bounds(data, r, n_grid=801):
    # brute force for a scalar system x+ = a x + b u + w, |w| <= r: keep the grid points that
    # explain every transition
    Xm, Um, Xp = (t.numpy()[0] for t in data.matrices())
    a, b = np.meshgrid(np.linspace(0.0, 1.2, n_grid), np.linspace(-0.5, 1.5, n_grid))
    ok = np.ones_like(a, dtype=bool)
    for x, u, xp in zip(Xm, Um, Xp, strict=True):
        ok &= np.abs(xp - a * x - b * u) <= r
    assert ok.any()
    return (a[ok].min(), a[ok].max()), (b[ok].min(), b[ok].max()), 2.0 / (n_grid - 1)


def test_exact_bounds_match_a_grid_search():
    A, B, r = torch.tensor([[0.7]], dtype=D), torch.tensor([[1.0]], dtype=D), 0.05
    noise = Zonotope(torch.zeros(1, dtype=D), torch.tensor([[r]], dtype=D))
    x0 = Zonotope(torch.ones(1, dtype=D), torch.tensor([[0.5]], dtype=D))
    data = sample_trajectories(A, B, x0, Zonotope(torch.zeros(1, dtype=D), torch.eye(1, dtype=D)),
                               noise, 3, 6, seed=4)  # fmt: skip
    lo, hi = consistent_set_bounds(data, noise)
    (a_lo, a_hi), (b_lo, b_hi), step = _grid_bounds(data, r)
    assert abs(lo[0, 0] - a_lo) <= step and abs(hi[0, 0] - a_hi) <= step
    assert abs(lo[0, 1] - b_lo) <= step and abs(hi[0, 1] - b_hi) <= step


def test_exact_consistent_set_lies_inside_the_matrix_zonotope():
    data = _data(2, 8, seed=3)
    M = consistent_systems(data, W)
    lo, hi = consistent_set_bounds(data, W)
    m_lo, m_hi = M.interval_hull()
    tol = 1e-9
    assert bool((m_lo <= lo + tol).all() and (hi <= m_hi + tol).all())
    assert bool(((lo - tol <= AB_TRUE) & (AB_TRUE <= hi + tol)).all())
    # extreme points of the exact set (LPs in random directions) are systems of M_Sigma
    Xm, Um, Xp = (t.numpy() for t in data.matrices())
    H = np.concatenate([Xm, Um])
    n, T, p = 2, H.shape[1], 3
    G = W.generators.numpy()
    A_eq = np.zeros((n * T, n * p + 2 * T))
    for j in range(T):
        A_eq[j * n : (j + 1) * n, : n * p] = np.kron(np.eye(n), H[:, j])
        A_eq[j * n : (j + 1) * n, n * p + 2 * j : n * p + 2 * j + 2] = G.T
    b_eq = Xp.T.reshape(-1)
    rng = np.random.default_rng(0)
    for _ in range(4):
        cost = np.concatenate([rng.normal(size=n * p), np.zeros(2 * T)])
        res = linprog(
            cost, A_eq=A_eq, b_eq=b_eq, bounds=[(None, None)] * (n * p) + [(-1, 1)] * (2 * T)
        )
        assert res.status == 0
        assert bool(M.contains(torch.tensor(res.x[: n * p].reshape(n, p))))


def test_more_data_shrinks_the_exact_set_and_the_noise_bound_scales_the_matrix_zonotope():
    data = _data(8, 10, seed=5)
    few, many = consistent_set_bounds(data.first(1), W), consistent_set_bounds(data.first(3), W)
    assert bool(((many[1] - many[0]) <= (few[1] - few[0]) + 1e-9).all())
    # M_Sigma's radius is linear in the noise generators: sum_ij |g_i| |(H^+)_j| entry-wise
    lo1, hi1 = consistent_systems(data, W).interval_hull()
    lo2, hi2 = consistent_systems(data, Zonotope(W.center, 2 * W.generators)).interval_hull()
    assert torch.allclose(hi2 - lo2, 2 * (hi1 - lo1))
    H_pinv = torch.linalg.pinv(torch.cat(data.matrices()[:2]))  # (T, n + m)
    ref = torch.einsum("qi,tp->ip", W.generators.abs(), H_pinv.abs())
    assert torch.allclose((hi1 - lo1) / 2, ref)


def test_box_matrix_zonotope_is_the_box():
    lo = torch.tensor([[0.0, -1.0], [2.0, 0.5]], dtype=D)
    hi = torch.tensor([[1.0, -1.0], [3.0, 0.75]], dtype=D)
    box = box_matrix_zonotope(lo, hi)
    blo, bhi = box.interval_hull()
    assert torch.allclose(blo, lo) and torch.allclose(bhi, hi)
    assert box.num_generators == 3  # the fixed entry needs none
    assert bool(box.contains(torch.stack([lo, hi, (lo + hi) / 2])).all())
    with pytest.raises(ValueError, match="lower <= upper"):
        box_matrix_zonotope(hi, lo)


def test_rank_deficient_data_raise_naming_the_problem():
    # a constant input and one trajectory at rest: [X_-; U_-] has rank 1
    states = torch.zeros(1, 4, 2, dtype=D)
    inputs = torch.ones(1, 3, 1, dtype=D)
    with pytest.raises(ValueError, match=r"rank 1 < n \+ m = 3"):
        consistent_systems(Trajectories(states, inputs), W)


def test_cartesian_product_against_samples_and_corners():
    a = Zonotope(torch.tensor([1.0], dtype=D), torch.tensor([[0.5]], dtype=D))
    b = Zonotope(torch.tensor([-1.0], dtype=D), torch.tensor([[0.25], [0.25]], dtype=D))
    ab = cartesian_product(a, b)
    assert ab.dim == 2 and ab.num_generators == 3
    corners = torch.tensor(list(itertools.product([0.5, 1.5], [-1.5, -0.5])), dtype=D)
    assert bool(ab.contains(corners).all())
    assert not bool(ab.contains(torch.tensor([1.6, -1.0], dtype=D)))
    pts = torch.cat([a.sample(50, seed=0), b.sample(50, seed=1)], -1)
    assert bool(ab.contains(pts).all())
    lo, hi = ab.interval_hull()
    assert torch.allclose(lo, corners.min(0).values) and torch.allclose(hi, corners.max(0).values)


def _support_exact(l, k):
    # h_{R_k}(l) for R_k = A^k X0 + sum_i A^(k-1-i) (B U + W), written with the adjoint l^T A^j
    def h(z, M):
        v = l @ M
        return float(v @ z.center + (z.generators @ v).abs().sum())

    Ak = torch.linalg.matrix_power
    out = h(X0, Ak(A_TRUE, k))
    for i in range(k):
        P = Ak(A_TRUE, k - 1 - i)
        out += h(U, P @ B_TRUE) + h(W, P)
    return out


def test_model_based_reachable_sets_are_exact():
    sets = reachable_sets(AB_TRUE, X0, U, W, steps=5, order=None)
    dirs = torch.randn(16, 2, dtype=D)
    for k, R in enumerate(sets):
        for l in dirs:
            assert abs(float(R.support(l)) - _support_exact(l, k)) < 1e-10


def test_data_driven_sets_contain_the_true_systems_trajectories_and_reachable_sets():
    M = consistent_systems(_data(5, 10, seed=6), W)
    steps = 6
    dd = reachable_sets(M, X0, U, W, steps, order=20)
    exact = reachable_sets(AB_TRUE, X0, U, W, steps, order=None)
    assert all(R.num_generators <= 20 * 2 for R in dd[1:])
    runs = sample_trajectories(A_TRUE, B_TRUE, X0, U, W, 500, steps, seed=7).states  # (N, K+1, n)
    # extreme runs too: corners of X0, inputs and noise at their bounds
    g = torch.Generator().manual_seed(8)
    sign = lambda *s: torch.randint(0, 2, s, generator=g).to(D) * 2 - 1  # noqa: E731
    x0 = X0.center + sign(200, 2) @ X0.generators
    u = U.center + sign(200, steps, 1) @ U.generators
    w = W.center + sign(200, steps, 2) @ W.generators
    runs = torch.cat([runs, simulate(A_TRUE, B_TRUE, x0, u, w)])
    for k in range(steps + 1):
        assert bool(dd[k].contains(runs[:, k]).all()), f"a true state escapes R_{k}"
        assert bool(dd[k].contains(exact[k].vertices()).all()), f"R_{k} of [A B] escapes"
        assert bool(exact[k].contains(runs[:, k]).all())


def test_reachable_sets_validate_their_input():
    with pytest.raises(ValueError, match=r"\(n, n \+ m\) = \(2, 3\)"):
        reachable_sets(A_TRUE, X0, U, W, 3)
    with pytest.raises(ValueError, match="steps"):
        reachable_sets(AB_TRUE, X0, U, W, -1)
    with pytest.raises(ValueError, match="order"):
        reachable_sets(AB_TRUE, X0, U, W, 2, order=0.5)


def test_matrix_zonotope_interval_hull_and_vec_against_enumeration():
    g = torch.Generator().manual_seed(0)
    mz = MatrixZonotope(torch.randn(2, 3, generator=g, dtype=D),
                        torch.randn(4, 2, 3, generator=g, dtype=D))  # fmt: skip
    corners = torch.tensor(list(itertools.product([-1.0, 1.0], repeat=4)), dtype=D)  # (16, 4)
    mats = mz.center + torch.einsum("kl,lpq->kpq", corners, mz.generators)
    lo, hi = mz.interval_hull()
    assert torch.allclose(lo, mats.min(0).values) and torch.allclose(hi, mats.max(0).values)
    assert bool(mz.contains(mats).all())
    assert bool(mz.contains(mz.sample(20, seed=1)).all())
    assert not bool(mz.contains(hi + 0.1))
    v = mz.vec()
    assert v.dim == 6 and torch.equal(v.center, mz.center.reshape(6))
    with pytest.raises(ValueError, match=r"\(\.\.\., 2, 3\)"):
        mz.contains(torch.zeros(3, 2, dtype=D))


def test_chapter_11_checkers_name_the_typical_mistakes():
    from mzlite.exercises import check

    assert check("ch11.generators", 100)
    assert "T alone" in check("ch11.generators", 50).message
    assert check("ch11.step", 2223)
    assert "noise" in check("ch11.step", 2221).message
    assert "cross generators" in check("ch11.step", 21 + 100 + 2).message

    def transposed(X_minus, U_minus, X_plus):
        H = torch.cat([X_minus, U_minus])
        return (X_plus @ torch.linalg.pinv(H)).T

    assert "transposed" in check("ch11.least_squares", transposed).message
    assert check("ch11.least_squares", lambda Xm, Um, Xp: transposed(Xm, Um, Xp).T)
    assert "nothing" in check("ch11.least_squares", lambda *a: None).message
    assert check("ch11.noise_scale", 2.0) and not check("ch11.noise_scale", 4.0)
