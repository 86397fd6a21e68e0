"""The registry of tasks by name, their options, derived split seeds and the on-disk cache."""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import os
import warnings
from pathlib import Path
from typing import NamedTuple

import numpy as np
import torch

from mzlite._io import atomic_write_bytes
from mzlite._paths import REPO_ROOT, in_checkout
from mzlite.registry import Registry

from ._build import _check_int
from .dataset import SetData
from .digits import digits_geometry_dataset
from .functions import meta_regression_dataset, quadratic_tdof_dataset
from .geometric import hull_volume_dataset, meb_radius_dataset, mst_weight_dataset, sgsp_dataset
from .matching import (
    chamfer_matching_dataset,
    few_shot_retrieval_dataset,
    rotation_matching_dataset,
)
from .statistics import set_regression_dataset, set_stat_dataset, statistical_dataset

# The cache key includes a hash of every source file of this package: editing any of them
# invalidates old entries.
_SRC = b"".join(p.read_bytes() for p in sorted(Path(__file__).parent.glob("*.py")))
CODE_VERSION = hashlib.sha256(_SRC).hexdigest()[:12]


# Each task's generator, by the task's name (the name results, caches and tables use).
TASKS: Registry = Registry(
    "task",
    [
        ("set_regression", set_regression_dataset),  # Task A
        ("chamfer_matching", chamfer_matching_dataset),  # Task B
        ("few_shot_retrieval", few_shot_retrieval_dataset),  # Task D
        ("rotation_matching", rotation_matching_dataset),  # Task F
        ("mst_weight", mst_weight_dataset),  # Task G
        ("meb_radius", meb_radius_dataset),
        ("hull_volume", hull_volume_dataset),
        ("sgsp", sgsp_dataset),
        ("quadratic_tdof", quadratic_tdof_dataset),
        ("set_stat", set_stat_dataset),
        ("statistical", statistical_dataset),
        ("meta_regression", meta_regression_dataset),
        ("digits_geometry", digits_geometry_dataset),
    ],
)

_NOT_OPTIONS = ("n_sets", "seed", "workers")


def task_options(name: str) -> dict:
    """The options of task ``name`` with their defaults (excluding n_sets, seed, workers)."""
    fn = TASKS[name]
    return {
        k: p.default for k, p in inspect.signature(fn).parameters.items() if k not in _NOT_OPTIONS
    }


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
    if in_checkout():
        return REPO_ROOT / "data" / "cache"
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
    fn = TASKS[name]
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
