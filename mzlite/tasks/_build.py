"""What the task generators share: validation, sampling, padding, normalisation and targets
computed in parallel worker processes."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import warnings
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import numpy as np
import torch

from .dataset import SetData


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
    _check_order("n_min", n_min, "n_max", n_max)


def _check_order(lo_name: str, lo, hi_name: str, hi) -> None:
    """``lo <= hi`` for a pair of bounds, e.g. n_min and n_max."""
    if lo > hi:
        raise ValueError(f"{lo_name} must be <= {hi_name}, got {lo_name}={lo} > {hi_name}={hi}")


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
    """Mixture-of-Gaussians point sets (the MEB generator of benchmarks/README.md): per set K ~
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


def _check_mixture(k_max, mean_std, spread_min, spread_max):
    _check_int("k_max", k_max, 1)
    _check_float("mean_std", mean_std, 0.0)
    _check_float("spread_min", spread_min, 0.0)
    _check_float("spread_max", spread_max, 0.0)
    _check_order("spread_min", spread_min, "spread_max", spread_max)


def _mixture_dataset(task: str, n_sets: int, seed: int, workers, opts: dict, fn, **fn_kw):
    """A dataset of Gaussian-mixture sets (:func:`_gaussian_mixture_sets`) with the target
    ``fn(set, **fn_kw)`` of each set; ``opts`` are the generator's options (``_opts(locals())``)."""
    o = opts
    _check_common(n_sets, o["d"], o["n_min"], o["n_max"], seed)
    _check_mixture(o["k_max"], o["mean_std"], o["spread_min"], o["spread_max"])
    _check_normalise(o["normalise"])
    rng = np.random.default_rng(seed)
    sets = _gaussian_mixture_sets(
        rng,
        n_sets,
        o["d"],
        o["n_min"],
        o["n_max"],
        o["k_max"],
        o["mean_std"],
        o["spread_min"],
        o["spread_max"],
    )
    return _geometric_task(task, opts, seed, sets, o["n_max"], o["normalise"], fn, workers, **fn_kw)
