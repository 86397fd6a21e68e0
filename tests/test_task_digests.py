"""Every generated dataset stays bit for bit what it was: a SHA-256 of each case's tensors, task
name and options, compared with digests recorded from the code at commit abea232 (before
mzlite.tasks became a package; digits_geometry's re-recorded when its coordinates became pixel
units, a change meant to change that data). A case covers every task, every target, variant and
normalisation, ``make_splits`` and the parallel target path.

Re-record the digests of the tasks whose data a change is meant to change, naming them, and say
so in the commit (``PYTHONPATH=. python tests/test_task_digests.py --record=meb_radius,sgsp``);
every other task keeps its recorded digests, so a new task or an unrelated change still fails."""

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
import pytest

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
    # the named task readings beside v1 (mzlite.tasks.TASK_READINGS)
    cases += [("rotation_matching", 6, 7, {"d": 5, "target": "aligned", "max_angle": 0.3})]
    cases += [("chamfer_matching", 6, 10, {"rotation": "small", "independent_size": "same"})]
    cases += [("quadratic_tdof", 6, 5, {"L": 3, "d": 5, "m0": "zero", "scale": "none"})]
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


def _entries() -> list[tuple[str, str, object]]:
    """Every case as (task name, key, a function making its data)."""
    out = [(c[0], _key(*c), lambda c=c: T.make_task(c[0], c[1], c[2], **c[3])) for c in _cases()]
    for name, sizes, seed, opts, label in (
        ("meb_radius", (5, 4, 3), 11, {"d": 4}, "make_splits meb_radius 5/4/3 seed=11 d=4"),
        ("digits_geometry", (4, 4, 4), 12, {"target": "hull"},
         "make_splits digits_geometry 4/4/4 seed=12 hull"),
    ):  # fmt: skip
        for i, part in enumerate(("train", "val", "test")):
            make = lambda name=name, sizes=sizes, seed=seed, opts=opts, i=i: (  # noqa: E731
                T.make_splits(name, *sizes, seed=seed, **opts)[i]
            )
            out.append((name, f"{label} {part}", make))
    # more than 64 sets and two workers: the process-pool path
    out.append(
        (
            "hull_volume",
            "hull_volume N=80 seed=0 d=4 workers=2",
            lambda: T.make_task("hull_volume", 80, seed=0, d=4, workers=2),
        )
    )
    return out


def _compute(tasks=None) -> dict[str, str]:
    """Digests of every case, or of the cases of ``tasks`` (names) only."""
    return {
        key: _digest(make()) for task, key, make in _entries() if tasks is None or task in tasks
    }


def rerecord(recorded: dict[str, str], computed: dict[str, str], tasks) -> dict[str, str]:
    """``recorded`` with the entries of ``tasks`` replaced by ``computed`` (the digests of those
    tasks' cases, all of them): their new cases added, their dropped cases removed, every other
    task's entries left as they were."""
    task_of = {key: task for task, key, _ in _entries()}
    unknown = sorted(k for k in computed if task_of.get(k) not in tasks)
    if unknown:
        raise ValueError(f"computed digests of tasks not named: {unknown}")
    kept = {k: v for k, v in recorded.items() if task_of.get(k) not in tasks}
    return dict(sorted({**kept, **computed}.items()))


def parse_record_arg(arg: str) -> list[str]:
    """``--record=a,b`` -> ``["a", "b"]``, each a registered task; a bare ``--record`` refuses."""
    names = arg.partition("=")[2].split(",") if arg.startswith("--record=") else []
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise SystemExit(
            "name the tasks to re-record: --record=TASK[,TASK...] (valid: "
            + ", ".join(sorted(T.TASKS))
            + "); the others keep their digests"
        )
    bad = [n for n in names if n not in T.TASKS]
    if bad:
        raise SystemExit(f"unknown task(s) {bad}; valid: {', '.join(sorted(T.TASKS))}")
    return names


@pytest.mark.integration  # every task's data regenerated, the process-pool path included
def test_every_dataset_is_bit_for_bit_unchanged():
    want = json.loads(DIGESTS.read_text())["digests"]
    got = _compute()
    assert sorted(got) == sorted(want), (
        f"not recorded: {sorted(set(got) - set(want))}; recorded but gone: "
        f"{sorted(set(want) - set(got))} (re-record the tasks meant to change: see the docstring)"
    )
    changed = [k for k in want if got[k] != want[k]]
    assert not changed, f"datasets changed: {changed}"


def test_rerecord_replaces_the_named_tasks_only():
    keys = {task: [k for t, k, _ in _entries() if t == task] for task in ("sgsp", "meb_radius")}
    recorded = {k: "old" for task in keys for k in keys[task]}
    computed = {k: "new" for k in keys["sgsp"][1:]}  # sgsp lost a case
    merged = rerecord(recorded, computed, ["sgsp"])
    assert {k: merged[k] for k in keys["meb_radius"]} == {k: "old" for k in keys["meb_radius"]}
    assert {k for k in merged if k in keys["sgsp"]} == set(keys["sgsp"][1:])
    assert all(merged[k] == "new" for k in keys["sgsp"][1:])
    with pytest.raises(ValueError, match="not named"):
        rerecord(recorded, {keys["meb_radius"][0]: "new"}, ["sgsp"])


def test_record_needs_task_names():
    assert parse_record_arg("--record=sgsp, meb_radius") == ["sgsp", "meb_radius"]
    for bad in ("--record", "--record=", "--record=no_such_task"):
        with pytest.raises(SystemExit):
            parse_record_arg(bad)


if __name__ == "__main__" and len(sys.argv) == 2 and sys.argv[1].startswith("--record"):
    import subprocess

    names = parse_record_arg(sys.argv[1])
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    record = json.loads(DIGESTS.read_text())
    record["digests"] = rerecord(record["digests"], _compute(names), names)
    record.setdefault("rerecorded", {}).update({n: commit for n in names})
    DIGESTS.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    print(f"digests of {', '.join(names)} re-recorded from {commit}; the others unchanged")
