"""Every generated dataset stays bit for bit what it was: a SHA-256 of each case's tensors, task
name and options, compared with digests recorded from the code at commit abea232 (before
mzlite.tasks became a package; digits_geometry's re-recorded when its coordinates became pixel
units, a change meant to change that data). A case covers every task, every target, variant and
normalisation, ``make_splits`` and the parallel target path.

Regenerate ``tests/data/task_digests.json`` (``python tests/test_task_digests.py --record``) only
for a change that is meant to change the data, and say so in the commit."""

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from mzlite import tasks as T

DIGESTS = Path(__file__).parent / "data" / "task_digests.json"


def _cases() -> list[tuple[str, int, int, dict]]:
    """(task, n_sets, seed, options): the paper's default settings at a few sets each, plus every
    option that changes how data or targets are made."""
    cases = [(name, 6, 1, {}) for name in sorted(T.TASKS)]
    cases += [("set_stat", 6, 2, {"stat": s}) for s in ("max", "sum", "median", "range")]
    cases += [("sgsp", 6, 3, {"target": t}) for t in ("diameter", "knn_radius", "k_smallest_sum")]
    cases += [("sgsp", 6, 3, {"target": "kcenter", "k": 3})]
    cases += [("statistical", 6, 4, {"target": t}) for t in ("mahalanobis", "pca_error")]
    cases += [("quadratic_tdof", 6, 5, {"L": 3, "d": 5, "basis": "witness"})]
    cases += [("quadratic_tdof", 6, 5, {"L": 4, "d": 8, "function_seed": 2})]
    cases += [("meta_regression", 4, 6, {"L": 4, "function_seed": 1})]
    cases += [("rotation_matching", 6, 7, {"d": 5, "target": "residual"})]
    cases += [("rotation_matching", 4, 7, {"d": 16})]
    for target in ("meb", "hull", "mst", "kcenter"):
        for variant in ("raw", "affine", "mixture"):
            cases.append(("digits_geometry", 5, 8, {"target": target, "variant": variant}))
    cases += [
        ("digits_geometry", 6, 8, {"target": "class", "variant": v}) for v in ("raw", "affine")
    ]
    cases += [("digits_geometry", 6, 8, {"target": "meb", "split": "test"})]
    for name, opts in (
        ("meb_radius", {}),
        ("mst_weight", {}),
        ("hull_volume", {}),
        ("chamfer_matching", {}),
        ("rotation_matching", {}),
        ("sgsp", {"target": "knn_radius"}),
        ("statistical", {"target": "cov_frobenius"}),
        ("statistical", {"target": "mahalanobis"}),
        ("statistical", {"target": "pca_error"}),
        ("digits_geometry", {"target": "mst", "variant": "mixture"}),
    ):
        cases.append((name, 6, 9, {**opts, "normalise": "scale"}))
    return cases


def _key(name: str, n_sets: int, seed: int, opts: dict) -> str:
    return f"{name} N={n_sets} seed={seed} " + json.dumps(opts, sort_keys=True)


def _digest(data) -> str:
    h = hashlib.sha256()
    for t in (data.x, data.mask, data.y) + (() if data.scale is None else (data.scale,)):
        a = t.numpy()
        h.update(f"{a.dtype}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    h.update(
        json.dumps([data.task, data.seed, data.options], sort_keys=True, default=repr).encode()
    )
    return h.hexdigest()


def _compute() -> dict[str, str]:
    out = {_key(*c): _digest(T.make_task(c[0], c[1], c[2], **c[3])) for c in _cases()}
    splits = T.make_splits("meb_radius", 5, 4, 3, seed=11, d=4)
    for part, data in zip(("train", "val", "test"), splits, strict=True):
        out[f"make_splits meb_radius 5/4/3 seed=11 d=4 {part}"] = _digest(data)
    digits = T.make_splits("digits_geometry", 4, 4, 4, seed=12, target="hull")
    for part, data in zip(("train", "val", "test"), digits, strict=True):
        out[f"make_splits digits_geometry 4/4/4 seed=12 hull {part}"] = _digest(data)
    # more than 64 sets and two workers: the process-pool path
    out["hull_volume N=80 seed=0 d=4 workers=2"] = _digest(
        T.make_task("hull_volume", 80, seed=0, d=4, workers=2)
    )
    return out


def test_every_dataset_is_bit_for_bit_unchanged():
    want = json.loads(DIGESTS.read_text())["digests"]
    got = _compute()
    assert sorted(got) == sorted(want)
    changed = [k for k in want if got[k] != want[k]]
    assert not changed, f"datasets changed: {changed}"


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    import subprocess

    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    record = {"recorded_from": commit, "digests": _compute()}
    DIGESTS.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"{len(record['digests'])} digests recorded from {commit}")
