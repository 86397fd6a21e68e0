"""The named readings of the paper's task descriptions (mzlite.tasks.readings) and the generator
options they stand for, each against an independent computation or the property the reading is
for."""

import math

import numpy as np
import pytest
import scipy.linalg
import torch
from scipy.optimize import linear_sum_assignment
from scipy.spatial.transform import Rotation

from mzlite import tasks as T
from mzlite.tasks.readings import CUSTOM, DEFAULT_READING, reading_keys


def _packed(data, i):
    s = data.x[i][data.mask[i]].double().numpy()
    return s[s[:, -1] == 0, :-1], s[s[:, -1] == 1, :-1]


def _chamfer_loops(A, B):
    ab = np.mean([((B - a) ** 2).sum(1).min() for a in A])
    ba = np.mean([((A - b) ** 2).sum(1).min() for b in B])
    return ab + ba


# ---------------------------------------------------------------------------------------------
# The registry of readings
# ---------------------------------------------------------------------------------------------


def test_every_reading_reads_back_as_itself_and_v1_is_the_generators_default():
    for r in T.TASK_READINGS:
        assert T.task_reading(r.task, T.reading_options(r.task, r.name)) == r.name
    for task in T.TASKS:
        assert T.task_reading(task, {}) == DEFAULT_READING
        assert DEFAULT_READING in T.readings_of(task)


def test_options_no_reading_sets_do_not_change_the_reading_but_reading_options_do():
    assert T.task_reading("rotation_matching", {"d": 64, "noise": 0.2}) == "v1"
    # max_angle's default is the near copy's 0.3; noise is no reading option
    assert T.task_reading("chamfer_matching", {"noise": 1.0, "rotation": "small"}) == "near-copy"
    assert T.task_reading("chamfer_matching", {"rotation": "small", "max_angle": 0.5}) == CUSTOM
    assert T.task_reading("chamfer_matching", {"max_angle": 0.5}) == CUSTOM  # unused, but set
    assert "max_angle" in reading_keys("chamfer_matching")


def test_unknown_readings_and_options_are_refused_by_name():
    with pytest.raises(ValueError, match="near-copy"):
        T.reading_options("chamfer_matching", "nope")
    with pytest.raises(ValueError, match="unknown option"):
        T.task_reading("chamfer_matching", {"colour": 1})
    with pytest.raises(ValueError, match="valid"):
        T.TaskReading("chamfer_matching", "x", {"colour": 1}, "")
    with pytest.raises(ValueError, match="task"):
        T.readings_of("no_such_task")


def test_every_reading_generates_data():
    for r in T.TASK_READINGS:
        opts = dict(r.options)
        if r.task == "quadratic_tdof":
            opts.setdefault("L", 4)
        data = T.make_task(r.task, 3, seed=0, **opts)
        assert torch.isfinite(data.y).all() and len(data) == 3


# ---------------------------------------------------------------------------------------------
# Task B: how far the copy turns and how many points the independent cloud has
# ---------------------------------------------------------------------------------------------


def test_small_rotation_is_a_rotation_by_at_most_max_angle():
    rng = np.random.default_rng(0)
    angles = []
    for d in (2, 3, 5):
        for _ in range(50):
            R = T.small_rotation(rng, d, 0.3)
            np.testing.assert_allclose(R @ R.T, np.eye(d), atol=1e-12)
            assert np.linalg.det(R) == pytest.approx(1.0)
            # every principal angle (the arguments of R's eigenvalues) is at most 0.3
            assert np.abs(np.angle(np.linalg.eigvals(R))).max() <= 0.3 + 1e-9
            if d == 3:  # the turn about its axis, by scipy
                angles.append(Rotation.from_matrix(R).magnitude())
    assert max(angles) > 0.25 and min(angles) < 0.05  # theta ~ U(0, 0.3) fills the range


def _classes(reading, n_sets=300, seed=3):
    """Chamfer distances of matched copies and of independent clouds under ``reading``: the
    same generator with p_match 1 and 0."""
    opts = T.reading_options("chamfer_matching", reading)
    copies = T.make_task("chamfer_matching", n_sets, seed, p_match=1.0, **opts)
    clouds = T.make_task("chamfer_matching", n_sets, seed, p_match=0.0, **opts)
    return copies, clouds


def test_a_near_copy_is_nearer_a_than_an_independent_cloud_and_a_haar_copy_is_not():
    copies, clouds = _classes("near-copy")
    assert copies.y.mean() < 0.2 * clouds.y.mean()
    # the copy's Chamfer distance to A is the noise's plus a turn of at most 0.3 rad: every copy
    # lies below the independent clouds' 5th percentile
    assert copies.y.max() < np.quantile(clouds.y.numpy(), 0.05)
    haar_copies, haar_clouds = _classes("v1")
    assert haar_copies.y.mean() > 0.7 * haar_clouds.y.mean()  # v1: as far as a cloud


def test_the_targets_of_every_reading_are_chamfer_distances_of_the_packed_sets():
    for reading in T.readings_of("chamfer_matching"):
        data = T.make_task(
            "chamfer_matching", 8, seed=1, **T.reading_options("chamfer_matching", reading)
        )
        for i in range(len(data)):
            A, B = _packed(data, i)
            assert data.y[i, 0].item() == pytest.approx(_chamfer_loops(A, B), rel=1e-5)


def test_same_size_independent_clouds_leave_no_size_to_count():
    for reading in ("near-copy-same-size", "same-size"):
        _, clouds = _classes(reading, 60)
        for i in range(len(clouds)):
            A, B = _packed(clouds, i)
            assert len(A) == len(B)
    _, own = _classes("near-copy", 60)
    assert sum(len(_packed(own, i)[0]) != len(_packed(own, i)[1]) for i in range(60)) > 40


def test_v1_data_are_unchanged_by_the_new_options_defaults():
    old = T.make_task("chamfer_matching", 20, seed=4)
    explicit = T.make_task(
        "chamfer_matching", 20, seed=4, rotation="haar", independent_size="own", max_angle=0.1
    )
    assert torch.equal(old.x, explicit.x) and torch.equal(old.y, explicit.y)


def test_set_size_features_find_the_leak_of_v1_and_not_of_the_same_size_reading():
    def size_r2(reading):
        opts = T.reading_options("chamfer_matching", reading)
        tr = T.make_task("chamfer_matching", 1500, 1, **opts)
        te = T.make_task("chamfer_matching", 600, 2, **opts)
        return T.baseline_r2(tr, te, features="size")["r2"]

    assert size_r2("near-copy") > 0.3  # |n_A - n_B| > 0 only for an independent cloud
    assert size_r2("near-copy-same-size") < 0.15


def test_size_features_count_each_packed_part():
    data = T.make_task("chamfer_matching", 30, 0)
    X, names = T.set_features(data, "size")
    assert names == ["n", "1/n", "n_part0", "n_part1", "|n_part0 - n_part1|"]
    for i in range(30):
        A, B = _packed(data, i)
        np.testing.assert_allclose(X[i], [len(A) + len(B), 1 / (len(A) + len(B)), len(A),
                                          len(B), abs(len(A) - len(B))])  # fmt: skip
    X, names = T.set_features(T.make_task("mst_weight", 5, 0), "size")
    assert names == ["n", "1/n"] and X.shape == (5, 2)


# ---------------------------------------------------------------------------------------------
# Task F: the Chamfer distance after the optimal alignment
# ---------------------------------------------------------------------------------------------


def test_procrustes_rotation_against_scipy_and_a_search_over_angles():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(20, 3))
    R = Rotation.random(random_state=2).as_matrix()
    b = a @ R.T + 0.05 * rng.normal(size=a.shape)
    Q = T.procrustes_rotation(a, b)
    # scipy's orthogonal Procrustes solves min ||a Omega - b|| over O(d): Omega = Q^T here
    omega, _ = scipy.linalg.orthogonal_procrustes(a, b)
    np.testing.assert_allclose(Q, omega.T, atol=1e-10)
    np.testing.assert_allclose(Q, R, atol=0.05)
    # in the plane, against the best of 20,000 angles; a reflection would fit better here
    a2 = rng.normal(size=(15, 2))
    b2 = a2 * np.array([1.0, -1.0]) + 0.3 * rng.normal(size=a2.shape)  # a mirror image
    Q2 = T.procrustes_rotation(a2, b2)
    assert np.linalg.det(Q2) == pytest.approx(1.0)
    th = np.linspace(-math.pi, math.pi, 20_000)
    rot = np.stack([np.cos(th), -np.sin(th), np.sin(th), np.cos(th)], 1).reshape(-1, 2, 2)
    loss = ((np.einsum("tij,nj->tni", rot, a2) - b2) ** 2).sum((1, 2))
    assert ((a2 @ Q2.T - b2) ** 2).sum() <= loss.min() + 1e-6


def _correspondence(A, B):
    """The hidden pairing of A's and B's points, recovered from their sorted distances to the
    other points of their own set (a rotation keeps them; the noise is small)."""
    pa = np.sort(np.linalg.norm(A[:, None] - A[None], axis=-1), 1)
    pb = np.sort(np.linalg.norm(B[:, None] - B[None], axis=-1), 1)
    rows, cols = linear_sum_assignment(((pa[:, None] - pb[None]) ** 2).sum(-1))
    return B[cols[np.argsort(rows)]]


def test_aligned_target_is_the_chamfer_distance_after_the_best_rotation():
    data = T.make_task("rotation_matching", 10, seed=2, target="aligned")
    same = T.make_task("rotation_matching", 10, seed=2)
    assert torch.equal(data.x, same.x)  # one input, another target
    for i in range(len(data)):
        A, B = _packed(data, i)
        Bm = _correspondence(A, B)
        omega, _ = scipy.linalg.orthogonal_procrustes(A, Bm)  # min ||A Omega - B||, Omega in O(8)
        assert np.linalg.det(omega) > 0  # a rotation: the noise is far too small to mirror
        # B = R A + eps with eps ~ N(0, 0.1^2): the residual is the noise, nowhere near CD(A, B)
        assert data.y[i, 0].item() == pytest.approx(_chamfer_loops(A @ omega, B), rel=1e-3)
        assert data.y[i, 0].item() < 2 * 8 * 0.1**2 * 2 < same.y[i, 0].item()


def test_small_angle_reading_keeps_b_nearer_a():
    small = T.make_task(
        "rotation_matching", 200, 0, **T.reading_options("rotation_matching", "small-angle")
    )
    wide = T.make_task("rotation_matching", 200, 0)
    assert small.y.mean() < 0.5 * wide.y.mean()


# ---------------------------------------------------------------------------------------------
# The quadratic-TDOF target: M_0 and the scale
# ---------------------------------------------------------------------------------------------


def _means(data):
    return (data.x.double().sum(1) / data.mask.sum(1, keepdim=True)).numpy()


def test_m0_zero_unscaled_is_eq_quadratic_tdof_without_its_linear_term():
    L, d = 5, 9
    data = T.make_task("quadratic_tdof", 300, 0, L=L, d=d, m0="zero", scale="none")
    w, _, M = T.quadratic_basis(L, d, 0, "random")
    mu = _means(data)
    f = [sum(m[l] * (w @ M[l] @ m) for l in range(L)) for m in mu]  # loops, no M_0, no 1/sqrt
    np.testing.assert_allclose(data.y[:, 0].numpy(), f, rtol=1e-4, atol=1e-4)
    scaled = T.make_task("quadratic_tdof", 300, 0, L=L, d=d, m0="zero")
    np.testing.assert_allclose(scaled.y.numpy() * math.sqrt(L), data.y.numpy(), rtol=1e-5)
    # f = mu^T B mu with B = sum_l e_l (M_l^T w)^T and mu ~ N(0, I): Var f = 2 ||sym(B)||_F^2
    big = T.make_task("quadratic_tdof", 4000, 1, L=L, d=d, m0="zero", scale="none")
    B = np.zeros((d, d))
    B[:L] = np.stack([M[l].T @ w for l in range(L)])
    var = 2 * (((B + B.T) / 2) ** 2).sum()
    assert big.y.var().item() == pytest.approx(var, rel=0.1)


def test_the_witness_reading_is_the_lemmas_target():
    opts = {**T.reading_options("quadratic_tdof", "witness-d64"), "L": 32}
    data = T.make_task("quadratic_tdof", 50, 0, **opts)
    w = T.quadratic_basis(32, 64, 0, "witness")[0]
    mu = _means(data)
    # (sum_l mu_l e_l e_d^T) mu = e_{1..L}-weighted mu_d: f = mu_d sum_{l <= L} w_l mu_l
    np.testing.assert_allclose(data.y[:, 0].numpy(), mu[:, 63] * (mu[:, :32] @ w[:32]),
                               rtol=1e-4, atol=1e-4)  # fmt: skip


def test_a_task_of_constant_size_leaves_the_size_ridge_at_the_mean():
    tr = T.make_task("few_shot_retrieval", 200, 1)
    te = T.make_task("few_shot_retrieval", 100, 2)
    fit = T.baseline_r2(tr, te, features="size")
    assert fit["features"] == [] and fit["r2"] <= 0.0  # 5 support and 20 query elements, always
