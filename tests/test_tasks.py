"""mzlite.tasks: shapes, determinism, exact targets recomputed independently from the stored
tensors,
normalisation, validation, splits, baseline_r2, the cache and mzlite._io."""

import json
import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from mzlite import _io
from mzlite import tasks as T
from mzlite.tasks import geometry as G
from mzlite.tasks.matching import _givens_batch

SMALL = {  # cheap options for every registered task
    "set_regression": {},
    "chamfer_matching": {},
    "few_shot_retrieval": {},
    "rotation_matching": {},
    "mst_weight": {},
    "meb_radius": {},
    "hull_volume": {},
    "sgsp": {"target": "kcenter"},
    "quadratic_tdof": {"L": 4, "d": 8},
    "set_stat": {"stat": "range"},
    "statistical": {"target": "mahalanobis"},
    "meta_regression": {"L": 4},
    "digits_geometry": {"target": "hull"},
}


def test_registry_is_covered():
    assert set(SMALL) == set(T.TASKS)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_shapes_dtypes_padding_determinism(name):
    a = T.make_task(name, 12, seed=3, **SMALL[name])
    b = T.make_task(name, 12, seed=3, **SMALL[name])
    c = T.make_task(name, 12, seed=4, **SMALL[name])
    assert a.x.dtype == torch.float32 and a.mask.dtype == torch.bool and len(a) == 12
    assert a.y.dtype in (torch.float32, torch.int64) and torch.isfinite(a.y.float()).all()
    assert a.mask.any(1).all()
    assert (a.x[~a.mask] == 0).all()  # padding is zeros
    # real rows come first: padding only at the end of each set
    assert (a.mask.int().diff(dim=1) <= 0).all()
    for t in ("x", "mask", "y"):
        assert torch.equal(getattr(a, t), getattr(b, t))
    assert not torch.equal(a.x, c.x)
    assert a.task == name and a.options == {**T.task_options(name), **SMALL[name]} | (
        {"pca_k": a.options["pca_k"]} if name == "statistical" else {}
    )


def test_set_sizes_and_rows():
    d = T.make_task("meb_radius", 300, seed=0, n_min=10, n_max=30)
    n = d.mask.sum(1)
    assert d.x.shape[1] == 30 and n.min() >= 10 and n.max() <= 30 and len(n.unique()) > 15
    h = T.make_task("hull_volume", 5, seed=0)
    assert h.x.shape == (5, 35, 3)
    c = T.make_task("chamfer_matching", 5, seed=0)
    assert c.x.shape == (5, 60, 4)


# --- targets recomputed from the stored tensors -------------------------------------------------


def _real(data, i):
    return data.x[i][data.mask[i]].double().numpy()


@pytest.mark.parametrize(
    "name, opts, fn",
    [
        ("meb_radius", {}, G.meb_radius),
        ("mst_weight", {"d": 4}, G.mst_weight),
        ("hull_volume", {"d": 3}, G.hull_volume),
        ("sgsp", {"target": "diameter"}, G.diameter),
        ("sgsp", {"target": "knn_radius"}, lambda p: G.knn_radius(p, 5)),
        ("sgsp", {"target": "k_smallest_sum"}, lambda p: G.k_smallest_pairwise_sum(p, 5)),
        ("digits_geometry", {"target": "meb"}, G.meb_radius),
        ("digits_geometry", {"target": "mst", "variant": "mixture"}, G.mst_weight),
    ],
)
def test_geometric_targets_and_padding_invariance(name, opts, fn):
    data = T.make_task(name, 10, seed=1, **opts)
    rng = np.random.default_rng(0)
    for i in range(len(data)):
        p = _real(data, i)
        assert data.y[i, 0].item() == pytest.approx(fn(p), rel=1e-5)
        # the target sees only the real rows: shuffling them or appending padding changes nothing
        assert fn(p[rng.permutation(len(p))]) == pytest.approx(fn(p), rel=1e-9, abs=1e-12)


def test_set_stat_targets():
    for stat, f in [("max", np.max), ("sum", np.sum), ("median", np.median), ("range", np.ptp)]:
        data = T.make_task("set_stat", 6, seed=2, stat=stat, d=5, n_min=3, n_max=9)
        for i in range(6):
            p = _real(data, i)
            assert data.y[i, 0].item() == pytest.approx(f(p, axis=0).sum(), rel=1e-5, abs=1e-5)
    a = T.make_task("set_regression", 4, seed=0)
    assert a.x.shape == (4, 100, 16) and "stat" not in a.options


def _split_packed(data, i):
    s = _real(data, i)
    return s[s[:, -1] == 0, :-1], s[s[:, -1] == 1, :-1]


def _chamfer_loops(A, B):
    ab = np.mean([((B - a) ** 2).sum(1).min() for a in A])
    ba = np.mean([((A - b) ** 2).sum(1).min() for b in B])
    return ab + ba


def test_chamfer_matching_targets():
    data = T.make_task("chamfer_matching", 40, seed=5)
    matched = 0
    for i in range(len(data)):
        A, B = _split_packed(data, i)
        assert data.y[i, 0].item() == pytest.approx(_chamfer_loops(A, B), rel=1e-5)
        if len(A) == len(B):  # a rotated copy keeps all pairwise distances up to the noise
            dA = np.linalg.norm(A[:, None] - A[None], axis=-1)
            matched += bool(
                np.allclose(
                    np.sort(dA.ravel()),
                    np.sort(np.linalg.norm(B[:, None] - B[None], axis=-1).ravel()),
                    atol=3.0,
                )
            )
    assert 10 <= matched <= 30


def test_rotation_matching_is_a_rotation_plus_noise():
    data = T.make_task("rotation_matching", 6, seed=0, d=6, n_min=5, n_max=8)
    res = T.make_task("rotation_matching", 6, seed=0, d=6, n_min=5, n_max=8, target="residual")
    assert torch.equal(data.x, res.x)
    for i in range(6):
        A, B = _split_packed(data, i)
        assert len(A) == len(B)
        assert data.y[i, 0].item() == pytest.approx(_chamfer_loops(A, B), rel=1e-5)
        # B = R A + eps: the Gram structure is kept, so some orthogonal R maps A close to B;
        # orthogonal Procrustes on the hidden correspondence is unknown, so compare norms instead
        np.testing.assert_allclose(
            np.sort(np.linalg.norm(A, axis=1)), np.sort(np.linalg.norm(B, axis=1)), atol=0.6
        )
        # residual target: CD(A, A + R^T eps) ~ 2 d noise^2 at most
        assert 0 < res.y[i, 0].item() < 2 * 6 * 0.1**2 * 3


def test_givens_batch_is_orthogonal_and_inverse():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3, 7, 5))
    Y = _givens_batch(X, 123, math.pi)
    np.testing.assert_allclose(np.linalg.norm(Y, axis=-1), np.linalg.norm(X, axis=-1))
    np.testing.assert_allclose(_givens_batch(Y, 123, math.pi, inverse=True), X, atol=1e-12)
    assert not np.allclose(Y, X)


def test_few_shot_structure():
    data = T.make_task("few_shot_retrieval", 20, seed=0)
    assert data.x.shape == (20, 25, 9) and data.mask.all()
    ind = data.x[..., -1]
    assert (ind.sum(1) == 5).all()
    m = data.y[:, 0] * 20
    assert torch.allclose(m, m.round(), atol=1e-5) and data.y.min() >= 0 and data.y.max() <= 1


def test_quadratic_tdof_target_and_input_distribution():
    L, d = 6, 10
    data = T.make_task("quadratic_tdof", 2000, seed=0, L=L, d=d)
    w, M0, M = T.quadratic_basis(L, d, 0, "random")
    gram = np.einsum("aij,bij->ab", np.concatenate([M0[None], M]), np.concatenate([M0[None], M]))
    np.testing.assert_allclose(gram, d * np.eye(L + 1), atol=1e-9)  # Frobenius-orthogonal
    mu = (data.x.double().sum(1) / data.mask.sum(1, keepdim=True)).numpy()  # (N, d) set means
    f = np.array([w @ (M0 + np.einsum("l,lij->ij", m[:L], M)) @ m for m in mu]) / math.sqrt(L + 1)
    np.testing.assert_allclose(data.y[:, 0].numpy(), f, rtol=1e-4, atol=1e-5)
    # thm:tdof-depth: mu(S) has i.i.d. standard-Gaussian coordinates
    assert abs(mu.mean()) < 0.03 and abs(mu.var() - 1) < 0.05
    assert np.abs(np.corrcoef(mu.T) - np.eye(d)).max() < 0.1
    wit = T.make_task("quadratic_tdof", 50, seed=0, L=3, d=5, basis="witness")
    mu = (wit.x.double().sum(1) / wit.mask.sum(1, keepdim=True)).numpy()
    w = T.quadratic_basis(3, 5, 0, "witness")[0]
    ref = (mu[:, :3] @ w[:3]) * mu[:, 4] / np.linalg.norm(w[:3])  # sum_l mu_l w_l mu_d
    np.testing.assert_allclose(wit.y[:, 0].numpy(), ref, rtol=1e-4, atol=1e-5)


def test_meta_regression_recovers_operator():
    d = 4
    data = T.make_task("meta_regression", 5, seed=0, L=3, d=d, k_support=12)
    assert data.x.shape == (5, 13, 2 * d + 1) and data.y.shape == (5, d)
    for i in range(5):
        s = _real(data, i)
        sup, q = s[s[:, -1] == 1], s[s[:, -1] == 0]
        A = np.linalg.lstsq(sup[:, :d], sup[:, d : 2 * d], rcond=None)[0].T
        np.testing.assert_allclose(data.y[i].numpy(), A @ q[0, :d], rtol=1e-3, atol=1e-4)


def test_statistical_targets():
    for target in ("cov_frobenius", "pca_error", "mahalanobis"):
        data = T.make_task("statistical", 5, seed=1, target=target, d=4, n_min=8, n_max=12)
        for i in range(5):
            s = _real(data, i)
            if target == "mahalanobis":
                ref, q = s[s[:, -1] == 0, :-1], s[s[:, -1] == 1, :-1][0]
                C = np.cov(ref.T, bias=True)
                C += 0.01 * np.trace(C) / 4 * np.eye(4)
                v = q - ref.mean(0)
                want = math.sqrt(v @ np.linalg.inv(C) @ v)
            else:
                C = np.cov(s.T, bias=True)
                if target == "cov_frobenius":
                    want = math.sqrt((C**2).sum())
                else:  # residual of the best rank-1 projection (pca_k = d // 4 = 1)
                    X = s - s.mean(0)
                    v = np.linalg.svd(X)[2][0]
                    want = ((X - np.outer(X @ v, v)) ** 2).sum(1).mean()
            assert data.y[i, 0].item() == pytest.approx(want, rel=1e-4)


def test_digits_class_labels_and_split_partition():
    data = T.make_task("digits_geometry", 30, seed=0, target="class")
    assert data.is_classification and data.y.shape == (30,) and data.d_out <= 10
    assert data.x.shape == (30, 64, 2)
    pts = data.x[data.mask]  # raw pixel coordinates, centred on the 8x8 image
    assert pts.min() >= -3.5 and pts.max() <= 3.5 and torch.equal(pts + 0.5, (pts + 0.5).round())
    lo_hi = T.digits._DIGIT_SPLITS
    assert lo_hi["train"][1] == lo_hi["val"][0] and lo_hi["val"][1] == lo_hi["test"][0]
    sp = T.make_splits("digits_geometry", 5, 5, 5, target="meb")
    assert [s.options["split"] for s in sp] == ["train", "val", "test"]


# --- normalisation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, opts, power",
    [
        ("meb_radius", {}, 1),
        ("mst_weight", {}, 1),
        ("hull_volume", {"d": 3}, 3),
        ("sgsp", {"target": "kcenter"}, 1),
        ("chamfer_matching", {}, 2),
        ("statistical", {}, 2),
    ],
)
def test_normalise_scale_divides_target_by_rms_power(name, opts, power):
    raw = T.make_task(name, 15, seed=7, **opts)
    nor = T.make_task(name, 15, seed=7, normalise="scale", **opts)
    r = nor.scale.double()
    np.testing.assert_allclose(nor.y[:, 0].double(), raw.y[:, 0].double() / r**power, rtol=1e-4)
    for i in range(15):
        p = _real(nor, i)
        coords = p[:, :-1] if name == "chamfer_matching" else p
        np.testing.assert_allclose(coords.mean(0), 0, atol=1e-5)
        assert np.sqrt(((coords - coords.mean(0)) ** 2).sum(1).mean()) == pytest.approx(1, rel=1e-5)
    assert raw.scale is None


def test_normalise_rejected_where_undefined():
    for name in ("set_stat", "quadratic_tdof", "few_shot_retrieval", "meta_regression"):
        with pytest.raises(ValueError, match="normalise"):
            T.make_task(name, 3, normalise="scale")
    with pytest.raises(ValueError, match="normalise must be one of"):
        T.make_task("meb_radius", 3, normalise="rms")


# --- validation ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"d": 0}, "d must be >= 1"),
        ({"n_min": 20, "n_max": 10}, "n_min must be <= n_max"),
        ({"n_min": 0}, "n_min must be >= 1"),
        ({"n_sets": 0}, "n_sets must be >= 1"),
        ({"colour": 3}, r"unknown option\(s\) \['colour'\].*valid options"),
        ({"k_max": 2.5}, "k_max must be an integer"),
    ],
)
def test_validation_errors(kw, match):
    n_sets = kw.pop("n_sets", 3)
    with pytest.raises(ValueError, match=match):
        T.make_task("meb_radius", n_sets, **kw)


def test_unknown_task_lists_valid_names():
    with pytest.raises(ValueError, match="meb_radius"):
        T.make_task("meb", 3)
    with pytest.raises(ValueError, match="target must be one of"):
        T.make_task("sgsp", 3, target="radius")
    with pytest.raises(ValueError, match="L must be <= 8"):
        T.make_task("quadratic_tdof", 3, d=8, L=9)


# --- splits, baseline_r2 -----------------------------------------------------------------------


def test_make_splits_distinct_seeds_shared_function():
    sp = T.make_splits("quadratic_tdof", 20, 10, 10, seed=1, L=4, d=8)
    seeds = {s.seed for s in sp}
    assert len(seeds) == 3 and [len(s) for s in sp] == [20, 10, 10]
    assert not torch.equal(sp.train.x[:10], sp.val.x)
    again = T.make_splits("quadratic_tdof", 20, 10, 10, seed=1, L=4, d=8)
    assert all(
        torch.equal(a.x, b.x) and torch.equal(a.y, b.y) for a, b in zip(sp, again, strict=True)
    )
    with pytest.raises(ValueError, match="n_val"):
        T.make_splits("meb_radius", 5, 0, 5)


def test_baseline_r2_reproduces_meb_measurement():
    sp = T.make_splits("meb_radius", 1500, 1, 600, seed=0)
    res = T.baseline_r2(sp.train, sp.test, features="basic")
    assert res["r2"] > 0.97 and res["features"] == ["n", "rms_spread", "max_dist_to_centroid"]
    spn = T.make_splits("meb_radius", 1500, 1, 600, seed=0, normalise="scale")
    assert T.baseline_r2(spn.train, spn.test, features="basic")["r2"] < 0.8


def test_baseline_r2_exact_linear_and_noise():
    # sum of per-dimension maxima is a linear function of the max_j features: R^2 = 1
    sp = T.make_splits("set_stat", 300, 1, 200, stat="max", d=4)
    assert T.baseline_r2(sp.train, sp.test)["r2"] > 0.9999
    noise = sp.test.subset(torch.arange(200))
    noise.y = torch.randn(200, 1, generator=torch.Generator().manual_seed(0))
    tr = sp.train.subset(torch.arange(300))
    tr.y = torch.randn(300, 1, generator=torch.Generator().manual_seed(1))
    assert T.baseline_r2(tr, noise)["r2"] < 0.05
    cls = T.make_task("digits_geometry", 5, target="class")
    with pytest.raises(ValueError, match="regression"):
        T.baseline_r2(cls, cls)


# --- cache and atomic writes ---------------------------------------------------------------------


def test_cache_roundtrip_is_identical_and_fast(tmp_path, monkeypatch):
    t0 = time.perf_counter()
    a = T.make_task("meb_radius", 300, seed=2, cache=True, cache_dir=tmp_path)
    t_gen = time.perf_counter() - t0
    files = list(tmp_path.glob("*.pt"))
    assert len(files) == 1 and files[0].name.startswith("meb_radius-N300-s2-")

    def boom(*a, **k):
        raise AssertionError("regenerated instead of loading the cache")

    monkeypatch.setattr(G, "meb_radius", boom)  # any regeneration would call the exact solver
    t0 = time.perf_counter()
    b = T.make_task("meb_radius", 300, seed=2, cache=True, cache_dir=tmp_path)
    assert time.perf_counter() - t0 < max(t_gen, 0.05)
    for f in ("x", "mask", "y"):
        assert torch.equal(getattr(a, f), getattr(b, f))
    assert b.options == a.options and b.task == "meb_radius"
    monkeypatch.undo()
    # other options, seeds and sizes are different entries; the env variable moves the default dir
    monkeypatch.setenv("MZLITE_CACHE", str(tmp_path / "env"))
    T.make_task("meb_radius", 300, seed=2, cache=True, d=3)
    T.make_task("meb_radius", 300, seed=3, cache=True)
    assert len(list((tmp_path / "env").glob("*.pt"))) == 2
    assert T.cache_path("meb_radius", 300, 2) != T.cache_path("meb_radius", 300, 2, d=3)


@pytest.mark.filterwarnings("ignore:Detected pickle protocol")
def test_corrupt_cache_entry_is_regenerated(tmp_path):
    path = T.cache_path("sgsp", 20, 0, tmp_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x80not a torch file")
    with pytest.warns(UserWarning, match="unreadable cache"):
        a = T.make_task("sgsp", 20, cache=True, cache_dir=tmp_path)
    assert torch.equal(a.y, T.make_task("sgsp", 20).y)
    assert torch.equal(T.make_task("sgsp", 20, cache=True, cache_dir=tmp_path).y, a.y)


def test_failed_write_never_becomes_the_entry(tmp_path, monkeypatch):
    def crash(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(_io.os, "replace", crash)
    with pytest.raises(OSError, match="disk full"):
        T.make_task("sgsp", 20, cache=True, cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # no entry, no temp file left behind
    monkeypatch.undo()
    # an old entry survives a failed overwrite intact
    p = tmp_path / "r.json"
    _io.atomic_write_json(p, {"a": 1})
    monkeypatch.setattr(_io.os, "replace", crash)
    with pytest.raises(OSError):
        _io.atomic_write_text(p, "garbage")
    assert json.loads(p.read_text()) == {"a": 1} and [x.name for x in tmp_path.iterdir()] == [
        "r.json"
    ]


def test_atomic_io_helpers(tmp_path):
    p = _io.atomic_write_json(tmp_path / "a" / "b.json", {"x": [1, 2]})
    assert json.loads(Path(p).read_text()) == {"x": [1, 2]}
    with pytest.raises(TypeError):
        _io.atomic_write_json(tmp_path / "c.json", {"x": object()})
    with pytest.raises(ValueError):
        _io.atomic_write_json(tmp_path / "c.json", {"x": float("nan")})
    assert not (tmp_path / "c.json").exists()
    _io.atomic_write_bytes(tmp_path / "d.bin", b"\x00\x01")
    assert (tmp_path / "d.bin").read_bytes() == b"\x00\x01"
    assert sorted(os.listdir(tmp_path)) == ["a", "d.bin"]


@pytest.mark.slow  # process pools
def test_parallel_workers_give_identical_data():
    one = T.make_task("hull_volume", 80, seed=0, d=4)
    two = T.make_task("hull_volume", 80, seed=0, d=4, workers=2)
    assert torch.equal(one.y, two.y) and torch.equal(one.x, two.x)


def test_default_cache_dir_is_the_checkouts_data_cache(monkeypatch):
    monkeypatch.delenv("MZLITE_CACHE", raising=False)
    repo = Path(__file__).resolve().parents[1]
    assert T.default_cache_dir() == repo / "data" / "cache"
    monkeypatch.setenv("MZLITE_CACHE", "/elsewhere")
    assert T.default_cache_dir() == Path("/elsewhere")


def test_points_are_one_sets_real_elements():
    data = T.make_task("meb_radius", 4, seed=0, n_min=3, n_max=9)
    for i, s in enumerate(data.sets()):
        p = data.points(i)
        assert p.dtype == np.float64 and p.shape == (int(data.mask[i].sum()), data.d_in)
        np.testing.assert_array_equal(p, s)
        np.testing.assert_array_equal(p, data.x[i, : len(p)].double().numpy())
    with pytest.raises(IndexError, match="out of range for 4 sets"):
        data.points(4)
