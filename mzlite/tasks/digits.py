"""scikit-learn's bundled 8x8 digits as 2-D point clouds, with geometric targets or class labels."""

from __future__ import annotations

import numpy as np

from . import geometry
from ._build import (
    _check_choice,
    _check_float,
    _check_int,
    _check_normalise,
    _finish,
    _geometric_task,
    _opts,
    _to32,
)
from .dataset import SetData

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


def image_points(image, threshold: int = 8) -> np.ndarray:
    """The on-pixels of one 8x8 digit image as a 2-D point set: ``image`` (8, 8) intensities
    0..16 -> points (n, 2) float64, the pixels with intensity >= ``threshold``, in row-major
    order, at ``(col - 3.5, 3.5 - row)``: pixel units, centred on the image, y pointing up (so a
    cloud looks like the digit when plotted)."""
    image = np.asarray(image)
    if image.shape != (8, 8):
        raise ValueError(f"image must have shape (8, 8), got {image.shape}")
    _check_int("threshold", threshold, 1, 16)
    r, c = np.nonzero(image >= threshold)
    return np.stack([c - 3.5, 3.5 - r], 1).astype(np.float64)


def digits_geometry_dataset(
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

    Points: pixels with intensity >= ``threshold`` (8 of 16), at their raw pixel coordinates
    centred on the image, (col - 3.5, 3.5 - row) in pixel units (-3.5..3.5), as
    ``image_points`` gives them. Pixel units, not [0, 1]: at a spread of ~0.25 per coordinate
    the Set Transformer barely learns the MEB radius (chapter 10 trains it both ways).
    ``variant``: "raw"; "affine" (TDOF-4): x -> A x with A = I + N(0, affine_std^2) entries per
    set (about the image centre); "mixture": the union of 3 digits, each shifted by an offset
    ~ U(-7, 7)^2 pixels (y must then be geometric). Images are drawn with replacement from a
    fixed 70/15/15 partition of the 1797 images (``split``; :func:`make_splits` passes
    train/val/test, so test images never appear in training)."""
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
        return image_points(images[i], threshold)

    sets, y = [], []
    for _ in range(n_sets):
        if variant == "mixture":
            idx = rng.choice(pool, size=3)
            s = np.concatenate([cloud(i) + rng.uniform(-7, 7, size=2) for i in idx])
        else:
            i = rng.choice(pool)
            s = cloud(i)
            if variant == "affine":
                A = np.eye(2) + rng.normal(0.0, affine_std, size=(2, 2))
                s = s @ A.T
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
