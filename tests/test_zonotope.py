"""Zonotope and matrix-zonotope algebra against independent references: brute-force corner
enumeration, scipy's ConvexHull and LP, the shoelace formula, Monte Carlo, and sampled sets."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.spatial import ConvexHull

from mzlite.zonotope import MatrixZonotope, Zonotope

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True)
BATCHES = [(), (2,), (2, 3)]


def rand(*shape, seed=0, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def make_z(d, m, batch=(), seed=0, dtype=torch.float64):
    return Zonotope(
        rand(*batch, d, seed=seed, dtype=dtype), rand(*batch, m, d, seed=seed + 1, dtype=dtype)
    )


@st.composite
def zonotopes(draw, dims=(1, 6), gens=(0, 6)):
    d = draw(st.integers(*dims))
    m = draw(st.integers(*gens))
    batch = draw(st.sampled_from(BATCHES))
    seed = draw(st.integers(0, 10_000))
    return make_z(d, m, batch, seed)


def corners(c: np.ndarray, G: np.ndarray) -> np.ndarray:
    """All 2^m points c + sum_g s_g g, s in {-1, 1}^m: the zonotope is their convex hull."""
    S = np.array(list(itertools.product((-1.0, 1.0), repeat=G.shape[0])))
    return c + S @ G


def shoelace(V: torch.Tensor) -> torch.Tensor:
    x, y = V[..., 0], V[..., 1]
    return 0.5 * (x * y.roll(-1, -1) - x.roll(-1, -1) * y).sum(-1)


# ---------------------------------------------------------------------------------------------
# membership and support
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(zonotopes(), st.integers(0, 1000))
def test_sampled_points_are_inside_by_contains_and_support(z, seed):
    pts = z.sample(6, seed=seed)  # (n, *batch, d)
    assert pts.shape == (6, *z.batch_shape, z.dim)
    assert bool(z.contains(pts).all())
    dirs = rand(5, *z.batch_shape, z.dim, seed=seed)  # (K, *batch, d)
    h = z.support(dirs)  # (K, *batch)
    proj = (dirs.unsqueeze(1) * pts.unsqueeze(0)).sum(-1)  # (K, n, *batch)
    assert bool((proj <= h.unsqueeze(1) + 1e-9).all())


@SETTINGS
@given(zonotopes(gens=(1, 6)), st.integers(0, 1000))
def test_contains_is_exact_at_support_points(z, seed):
    # The maximiser of <l, x> is c + sum_g sign(<l, g>) g (on the boundary: inside); a step
    # beyond it along l leaves the set (its support value exceeds h(l)): outside.
    l = rand(*z.batch_shape, z.dim, seed=seed)
    s = torch.sign((z.generators * l.unsqueeze(-2)).sum(-1))  # (*batch, m)
    touch = z.center + (s.unsqueeze(-1) * z.generators).sum(-2)
    assert torch.allclose((l * touch).sum(-1), z.support(l))
    assert bool(z.contains(touch).all())
    beyond = touch + 0.05 * l / l.norm(dim=-1, keepdim=True)
    assert not bool(z.contains(beyond).any())


@SETTINGS
@given(st.integers(0, 6), st.sampled_from(BATCHES), st.integers(0, 1000))
def test_2d_halfspace_test_agrees_with_the_lp(m, batch, seed):
    z = make_z(2, m, batch, seed)
    lo, hi = z.interval_hull()
    u = torch.rand(
        40, *batch, 2, generator=torch.Generator().manual_seed(seed), dtype=torch.float64
    )
    pts = lo + u * (hi - lo) * 1.2 - 0.1 * (hi - lo)
    fast = z.contains(pts, tol=1e-9)
    lp = Zonotope._contains_lp(z.center, z.generators, pts, 1e-9, fast.shape)
    assert torch.equal(fast, lp)


def test_contains_degenerate_2d_and_1d():
    seg = Zonotope(torch.zeros(2), torch.tensor([[1.0, 1.0], [2.0, 2.0]]))  # a segment
    pts = torch.tensor([[3.0, 3.0], [2.9, 3.0], [0.0, 0.0], [3.1, 3.1]])
    assert seg.contains(pts).tolist() == [True, False, True, False]
    point = Zonotope(torch.ones(2), torch.zeros(0, 2))
    assert point.contains(torch.tensor([[1.0, 1.0], [1.0, 1.1]])).tolist() == [True, False]
    z1 = Zonotope(torch.tensor([1.0]), torch.tensor([[0.5], [-1.0]]))
    got = z1.contains(torch.tensor([[-0.5], [2.5], [2.6]]))
    assert got.tolist() == [True, True, False]


@SETTINGS
@given(zonotopes(gens=(0, 4)), zonotopes(gens=(0, 4)), st.integers(0, 1000))
def test_support_of_minkowski_sum_is_sum_of_supports(z1, z2, seed):
    z2 = make_z(z1.dim, z2.num_generators, z2.batch_shape, seed)
    try:
        batch = torch.broadcast_shapes(z1.batch_shape, z2.batch_shape)
    except RuntimeError:
        with pytest.raises(ValueError, match="not broadcast-compatible"):
            z1 + z2
        return
    s = z1 + z2
    assert s.num_generators == z1.num_generators + z2.num_generators
    dirs = rand(7, *batch, z1.dim, seed=seed + 1)
    assert torch.allclose(s.support(dirs), z1.support(dirs) + z2.support(dirs))


def test_support_batched_over_directions_and_zonotopes():
    z = make_z(3, 4, (5,), seed=3)
    dirs = rand(7, 3, seed=4)
    h = z.support(dirs[:, None, :])  # (7, 5)
    assert h.shape == (7, 5)
    for k in range(7):
        for b in range(5):
            pts = corners(z.center[b].numpy(), z.generators[b].numpy())
            assert h[k, b].item() == pytest.approx((pts @ dirs[k].numpy()).max())


# ---------------------------------------------------------------------------------------------
# interval hull, vertices, volume
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(zonotopes(dims=(2, 2), gens=(1, 7)))
def test_interval_hull_is_the_box_of_the_vertices_2d(z):
    V = z.vertices()  # (*batch, 2m, 2)
    assert V.shape == (*z.batch_shape, 2 * z.num_generators, 2)
    lo, hi = z.interval_hull()
    assert torch.allclose(lo, V.amin(-2)) and torch.allclose(hi, V.amax(-2))
    half = (hi - lo) / 2
    assert torch.allclose(half.sum(-1), z.ihw())


@SETTINGS
@given(zonotopes(dims=(1, 6), gens=(0, 6)))
def test_interval_hull_matches_brute_force_corners(z):
    n = z.batch_shape.numel()
    c = z.center.reshape(n, z.dim).numpy()
    G = z.generators.reshape(n, z.num_generators, z.dim).numpy()
    lo, hi = (t.reshape(n, z.dim).numpy() for t in z.interval_hull())
    for b in range(n):
        P = corners(c[b], G[b])
        np.testing.assert_allclose(lo[b], P.min(0), atol=1e-12)
        np.testing.assert_allclose(hi[b], P.max(0), atol=1e-12)


@SETTINGS
@given(zonotopes(dims=(2, 2), gens=(0, 7)))
def test_shoelace_area_of_vertices_equals_volume_and_is_ccw(z):
    V = z.vertices()
    area = shoelace(V)
    assert bool((area >= -1e-12).all()), "vertices are not counter-clockwise"
    assert torch.allclose(area, z.volume(), atol=1e-10)


@pytest.mark.parametrize("m", [1, 2, 3, 5, 8])
def test_vertices_2d_are_the_hull_of_all_corners(m):
    z = make_z(2, m, seed=m)
    hull = ConvexHull(corners(z.center.numpy(), z.generators.numpy())) if m >= 2 else None
    V = z.vertices().numpy()
    if hull is None:  # a segment: its two ends
        ends = corners(z.center.numpy(), z.generators.numpy())
        assert all(np.abs(V - e).sum(1).min() < 1e-12 for e in ends)
        return
    ref = hull.points[hull.vertices]
    assert len(ref) == 2 * m  # general position
    assert all(np.abs(V - r).sum(1).min() < 1e-10 for r in ref)
    assert hull.volume == pytest.approx(z.volume().item())


@pytest.mark.parametrize("m", [3, 4, 6, 8])
def test_vertices_3d_and_volume_against_brute_force_hull(m):
    z = make_z(3, m, seed=10 + m)
    hull = ConvexHull(corners(z.center.numpy(), z.generators.numpy()))
    ref = hull.points[hull.vertices]
    V = z.vertices().numpy()
    assert len(V) == len(ref) == 2 * sum(math.comb(m - 1, i) for i in range(3))
    assert all(np.abs(V - r).sum(1).min() < 1e-10 for r in ref)
    assert z.volume().item() == pytest.approx(hull.volume, rel=1e-9)


def test_vertices_3d_with_coplanar_generators():
    G = torch.tensor([[1.0, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]], dtype=torch.float64)
    z = Zonotope(torch.zeros(3, dtype=torch.float64), G)  # hexagonal prism
    V = z.vertices()
    assert V.shape == (12, 3)
    assert z.volume().item() == pytest.approx(ConvexHull(V.numpy()).volume) == pytest.approx(24.0)


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 6])
def test_volume_of_a_box_and_a_parallelotope(d):
    w = rand(d, seed=d).abs() + 0.1
    box = Zonotope(torch.zeros(d, dtype=torch.float64), torch.diag(w))
    assert box.volume().item() == pytest.approx(torch.prod(2 * w).item())
    A = rand(d, d, seed=20 + d)  # parallelotope: the image of the cube [-1, 1]^d under A^T
    par = Zonotope(torch.zeros(d, dtype=torch.float64), A)
    assert par.volume().item() == pytest.approx(2.0**d * abs(np.linalg.det(A.numpy())))


def test_volume_monte_carlo_2d():
    z = make_z(2, 5, seed=7)
    lo, hi = z.interval_hull()
    u = torch.rand(200_000, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    frac = z.contains(lo + u * (hi - lo)).double().mean()
    est = (frac * torch.prod(hi - lo)).item()
    assert est == pytest.approx(z.volume().item(), rel=0.02)


def test_volume_of_too_few_generators_is_zero_and_guard_raises():
    assert make_z(3, 2, (2,)).volume().tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match=r"C\(30, 6\).*limit"):
        make_z(6, 30).volume(limit=1000)


# ---------------------------------------------------------------------------------------------
# reduction
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(zonotopes(gens=(0, 14)), st.sampled_from([1, 1.5, 2, 3]), st.integers(0, 1000))
def test_reduce_over_approximates_and_reaches_the_order(z, order, seed):
    r = z.reduce(order)
    assert r.num_generators <= order * z.dim
    if z.num_generators <= order * z.dim:
        assert r is z
    dirs = rand(50, *z.batch_shape, z.dim, seed=seed)
    assert bool((r.support(dirs) >= z.support(dirs) - 1e-9).all())
    assert torch.allclose(r.center, z.center)


def test_reduce_order_one_is_the_interval_hull_and_keeps_the_largest():
    z = make_z(2, 6, seed=1)
    lo, hi = z.interval_hull()
    box = z.reduce(1)
    assert torch.allclose(box.generators, torch.diag((hi - lo) / 2))
    G = torch.tensor([[3.0, 3.0], [0.1, 0.1], [0.0, 1.0], [0.2, -0.1], [1.0, 0.0]])
    r = Zonotope(torch.zeros(2), G).reduce(2)  # keep 2: [3, 3] and [0.2, -0.1] (scores 3, .1)
    assert r.num_generators == 4
    assert torch.allclose(r.generators[:2], G[[0, 3]])
    assert torch.allclose(r.generators[2:], torch.tensor([[1.1, 0.0], [0.0, 1.1]]))


def test_reduce_drops_zero_generators_before_deciding():
    # two nonzero generators in R^2 are within order 1's budget of 2: zonopy and CORA drop the
    # eight zeros and return the parallelogram; counting them would box it to [-2, 2]^2
    g1, g2 = [1.0, 1.0], [1.0, -1.0]
    G = torch.tensor([g1] + [[0.0, 0.0]] * 8 + [g2])
    r = Zonotope(torch.tensor([0.5, 0.0]), G).reduce(1)
    assert torch.equal(r.generators, torch.tensor([g1, g2]))
    assert torch.equal(r.center, torch.tensor([0.5, 0.0]))
    assert Zonotope(torch.zeros(2), torch.zeros(5, 2)).reduce(1).num_generators == 0


def test_reduce_decides_each_zonotope_of_a_batch_on_its_own_nonzero_generators():
    sparse = torch.tensor([[0.0, 0.0], [2.0, 1.0], [0.0, 0.0], [0.0, 0.0], [1.0, -3.0]])
    dense = torch.tensor([[3.0, 3.0], [0.1, 0.1], [0.0, 1.0], [0.2, -0.1], [1.0, 0.0]])
    batch = Zonotope(torch.zeros(2, 2), torch.stack([sparse, dense])).reduce(1.5)  # budget 3
    assert batch.num_generators == 3
    # the sparse one exactly (its two generators, then a zero one), the dense one by Girard
    assert torch.equal(batch.generators[0], torch.tensor([[2.0, 1.0], [1.0, -3.0], [0.0, 0.0]]))
    alone = Zonotope(torch.zeros(2), dense).reduce(1.5)
    assert torch.equal(batch.generators[1], alone.generators)
    assert torch.allclose(alone.generators, torch.tensor([[3.0, 3.0], [1.3, 0.0], [0.0, 1.2]]))


# ---------------------------------------------------------------------------------------------
# linear maps and matrix zonotopes
# ---------------------------------------------------------------------------------------------


@SETTINGS
@given(zonotopes(), st.integers(1, 4), st.integers(0, 1000))
def test_linear_map_maps_samples(z, k, seed):
    A = rand(k, z.dim, seed=seed)
    mapped = A @ z
    assert mapped.dim == k and mapped.num_generators == z.num_generators
    expected = (A @ z.sample(5, seed=seed).unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(mapped.sample(5, seed=seed), expected)
    assert torch.allclose(z.linear_map(A).center, mapped.center)


@SETTINGS
@given(
    st.integers(1, 4), st.integers(1, 4), st.integers(0, 3), st.integers(0, 3),
    st.sampled_from([(), (2,)]), st.integers(0, 1000),
)  # fmt: skip
def test_matrix_zonotope_product_contains_sampled_products(p, q, L, h, batch, seed):
    mz = MatrixZonotope(rand(*batch, p, q, seed=seed), rand(*batch, L, p, q, seed=seed + 1))
    z = make_z(q, h, batch, seed + 2)
    prod = mz @ z
    assert prod.num_generators == h + L + L * h
    assert torch.allclose(prod.center, (mz.center @ z.center.unsqueeze(-1)).squeeze(-1))
    M = mz.sample(12, seed=seed)  # (k, *batch, p, q)
    x = z.sample(12, seed=seed + 3)  # (k, *batch, q)
    Mx = (M @ x.unsqueeze(-1)).squeeze(-1)  # (k, *batch, p)
    assert bool(prod.contains(Mx).all())
    dirs = rand(6, 1, *batch, p, seed=seed)
    assert bool(((dirs * Mx).sum(-1) <= prod.support(dirs) + 1e-9).all())
    exact = mz @ x  # {M x} for fixed x: exact, L generators
    assert exact.num_generators == L and exact.batch_shape == (12, *batch)
    assert bool(exact.contains(Mx).all())


def test_matrix_zonotope_product_generators_are_the_paper_formula():
    mz = MatrixZonotope(rand(2, 3, seed=1), rand(2, 2, 3, seed=2))
    z = make_z(3, 2, seed=3)
    G = (mz @ z).generators
    Mc, Ml, c, g = mz.center, mz.generators, z.center, z.generators
    ref = [Mc @ g[0], Mc @ g[1], Ml[0] @ c, Ml[1] @ c]
    ref += [Ml[l] @ g[k] for l in range(2) for k in range(2)]
    assert torch.allclose(G, torch.stack(ref))


def test_matrix_zonotope_times_matrix_zonotope_contains_products():
    A = MatrixZonotope(rand(2, 3, seed=1), rand(2, 2, 3, seed=2))
    B = MatrixZonotope(rand(3, 2, seed=3), rand(3, 3, 2, seed=4))
    AB = A @ B
    assert AB.shape == (2, 2) and AB.num_generators == 3 + 2 + 2 * 3
    prods = A.sample(20, seed=0) @ B.sample(20, seed=1)  # (20, 2, 2)
    flat = Zonotope(AB.center.reshape(4), AB.generators.reshape(-1, 4))
    assert bool(flat.contains(prods.reshape(20, 4)).all())
    W = rand(4, 2, seed=5)
    left = W @ A
    assert left.shape == (4, 3) and torch.allclose(left.generators[1], W @ A.generators[1])
    S = A + A
    assert S.num_generators == 4 and torch.allclose(S.center, 2 * A.center)


# ---------------------------------------------------------------------------------------------
# arithmetic, batching, dtypes, gradients
# ---------------------------------------------------------------------------------------------


def test_translation_scaling_negation_indexing_and_to():
    z = make_z(2, 3, (4,), seed=2)
    v = rand(2, seed=9)
    assert torch.allclose((z + v).center, z.center + v) and torch.equal(
        (v + z).generators, z.generators
    )
    assert torch.allclose((z - v).center, z.center - v)
    assert torch.allclose((2.0 * z).generators, 2 * z.generators)
    assert torch.allclose((z * torch.tensor(0.5, dtype=torch.float64)).center, 0.5 * z.center)
    assert torch.allclose((-z).center, -z.center)
    assert z[1].batch_shape == () and torch.equal(z[1].generators, z.generators[1])
    assert z[1:3].batch_shape == (2,)
    z32 = z.to(torch.float32)
    assert z32.dtype == torch.float32 and z32.device.type == "cpu"
    assert "num_generators=3" in repr(z) and "batch_shape=(4,)" in repr(z)
    # centre and generators broadcast: one centre shared by a batch of generator sets
    zb = Zonotope(torch.zeros(2), torch.ones(5, 3, 2))
    assert zb.batch_shape == (5,) and zb.center.shape == (5, 2)
    assert torch.equal(z.sample(3, seed=1), z.sample(3, seed=1))


def test_float32_and_float64_agree():
    z64 = make_z(2, 5, (3,), seed=4)
    z32 = z64.to(torch.float32)
    mz64 = MatrixZonotope(rand(2, 2, seed=5), rand(3, 2, 2, seed=6))
    mz32 = mz64.to(torch.float32)
    dirs = rand(4, 1, 2, seed=7)
    pairs = [
        (z64.volume(), z32.volume()),
        (z64.support(dirs), z32.support(dirs.float())),
        (z64.interval_hull()[1], z32.interval_hull()[1]),
        (z64.vertices(), z32.vertices()),
        (z64.reduce(1.5).generators, z32.reduce(1.5).generators),
        ((mz64 @ z64).generators, (mz32 @ z32).generators),
    ]
    for a, b in pairs:
        assert b.dtype == torch.float32
        assert torch.allclose(a, b.double(), rtol=1e-5, atol=1e-5)
    pts = z64.sample(20, seed=0)
    assert torch.equal(z64.contains(pts), z32.contains(pts.float()))


def test_gradients_flow_and_are_finite():
    c = rand(2, seed=1).requires_grad_()
    G = rand(4, 2, seed=2).requires_grad_()
    A = rand(3, 2, seed=3).requires_grad_()
    z = Zonotope(c, G)
    lo, hi = (A @ z).interval_hull()
    loss = z.volume() + z.support(rand(3, 2, seed=4)).sum() + (hi - lo).sum() + z.vertices().sum()
    loss.backward()
    for t in (c, G, A):
        assert t.grad is not None and bool(torch.isfinite(t.grad).all())
    # against finite differences
    dirs = rand(3, 3, seed=5)
    c0 = torch.zeros(3, dtype=torch.float64)
    assert torch.autograd.gradcheck(
        lambda g: Zonotope(c0, g).volume(), (rand(4, 3, seed=6).requires_grad_(),)
    )
    assert torch.autograd.gradcheck(
        lambda g: Zonotope(c0, g).support(dirs), (rand(4, 3, seed=7).requires_grad_(),)
    )


# ---------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------


def test_bad_input_raises_with_the_argument_named():
    z = make_z(2, 3)
    with pytest.raises(ValueError, match=r"generators must have shape \(\.\.\., m, d\) with d = 2"):
        Zonotope(torch.zeros(2), torch.zeros(3, 3))
    with pytest.raises(ValueError, match=r"generators must have shape \(\.\.\., m, d\)"):
        Zonotope(torch.zeros(2), torch.zeros(2))
    with pytest.raises(ValueError, match=r"center must have shape \(\.\.\., d\)"):
        Zonotope(torch.tensor(1.0), torch.zeros(3, 1))
    with pytest.raises(ValueError, match="not broadcast-compatible"):
        Zonotope(torch.zeros(3, 2), torch.zeros(4, 1, 2))
    with pytest.raises(ValueError, match="generators contains NaN"):
        Zonotope(torch.zeros(2), torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(ValueError, match="center contains NaN or inf"):
        Zonotope(torch.tensor([float("inf"), 0.0]), torch.zeros(1, 2))
    with pytest.raises(TypeError, match="center must be a floating-point tensor"):
        Zonotope(torch.zeros(2, dtype=torch.long), torch.zeros(1, 2))
    with pytest.raises(TypeError, match="generators has dtype torch.float32"):
        Zonotope(torch.zeros(2, dtype=torch.float64), torch.zeros(1, 2, dtype=torch.float32))
    with pytest.raises(ValueError, match=r"A must have shape \(\.\.\., k, d\) with d = 2"):
        rand(3, 3) @ z
    with pytest.raises(TypeError, match="A has dtype"):
        z.linear_map(torch.zeros(2, 2, dtype=torch.float32))
    with pytest.raises(ValueError, match="Minkowski sum needs equal dims"):
        z + make_z(3, 1)
    with pytest.raises(ValueError, match=r"translation vector must have shape \(\.\.\., d\)"):
        z + torch.zeros(3, dtype=torch.float64)
    with pytest.raises(TypeError, match="scale must be a real number"):
        torch.ones(2, dtype=torch.float64) * z
    with pytest.raises(ValueError, match=r"direction must have shape \(\.\.\., d\) with d = 2"):
        z.support(torch.zeros(3, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"points must have shape \(\.\.\., d\) with d = 2"):
        z.contains(torch.zeros(4, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="points contains NaN"):
        z.contains(torch.tensor([float("nan"), 0.0], dtype=torch.float64))
    with pytest.raises(ValueError, match="vertices\\(\\) needs a zonotope of dim d = 2 or 3"):
        make_z(4, 5).vertices()
    with pytest.raises(ValueError, match="batch_shape"):
        make_z(3, 4, (2,)).vertices()
    with pytest.raises(ValueError, match="rank 3"):
        Zonotope(torch.zeros(3), torch.tensor([[1.0, 0, 0], [0, 1, 0], [1, 1, 0]])).vertices()
    for bad in (0, 0.5, -1, True, "2"):
        with pytest.raises(ValueError, match="order must be a real number >= 1"):
            z.reduce(bad)
    with pytest.raises(ValueError, match="n must be an int >= 0"):
        z.sample(-1)
    with pytest.raises(IndexError, match="batch dimensions only"):
        z[0]


def test_bad_matrix_zonotope_input_raises_with_the_argument_named():
    with pytest.raises(ValueError, match=r"generators must have shape \(\.\.\., L, p, q\)"):
        MatrixZonotope(torch.zeros(2, 3), torch.zeros(4, 3, 2))
    with pytest.raises(ValueError, match=r"center must have shape \(\.\.\., p, q\)"):
        MatrixZonotope(torch.zeros(3), torch.zeros(4, 3, 2))
    with pytest.raises(ValueError, match="generators contains NaN"):
        MatrixZonotope(torch.zeros(2, 2), torch.full((1, 2, 2), float("nan")))
    mz = MatrixZonotope(rand(2, 3), rand(2, 2, 3))
    with pytest.raises(ValueError, match="mz @ z needs z of dim q = 3"):
        mz @ make_z(2, 1)
    with pytest.raises(ValueError, match=r"x must have shape \(\.\.\., q\) with q = 3"):
        mz @ rand(2)
    with pytest.raises(ValueError, match=r"mz @ other needs other of shape \(3, r\)"):
        mz @ mz
    with pytest.raises(TypeError, match="z has dtype torch.float32"):
        mz @ make_z(3, 1, dtype=torch.float32)
    with pytest.raises(ValueError, match="k must be an int >= 0"):
        mz.sample(1.5)
