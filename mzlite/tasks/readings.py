"""Named readings of the paper's task descriptions: which generator options stand for which way of
reading app:task-descriptions where its words leave a choice open.

    reading_options("chamfer_matching", "near-copy")   # the options that make that reading
    task_reading("chamfer_matching", {"d": 3})          # "v1": the name of what these options make

A reading is a set of generator options; every option a reading of a task sets is a *reading
option* of that task, and the reading of a dataset is the one whose reading options its resolved
options equal (the generator's defaults filling the rest). "v1" is each generator as it was before
readings were named, so results made then keep their meaning; options that match no named reading
read "custom". A result records its reading (``mzlite.repro``'s ``task_reading`` field), so that
results of two readings are never read as one experiment.
"""

from __future__ import annotations

from dataclasses import dataclass

from .registry import TASKS, task_options

__all__ = ["TaskReading", "TASK_READINGS", "CUSTOM", "DEFAULT_READING", "reading_options",
           "task_reading", "readings_of", "reading_keys"]  # fmt: skip

DEFAULT_READING = "v1"  # every generator as it was before readings were named
CUSTOM = "custom"  # options that match no named reading


@dataclass(frozen=True)
class TaskReading:
    """One reading of task ``task``: ``name``, the generator ``options`` it sets (every other
    option at the generator's default) and what it means (``summary``)."""

    task: str
    name: str
    options: dict
    summary: str

    def __post_init__(self):
        valid = task_options(self.task)  # an unknown task raises here, listing the tasks
        bad = sorted(set(self.options) - set(valid))
        if bad:
            raise ValueError(
                f"reading {self.name!r} of {self.task!r} sets unknown option(s) {bad}; valid: "
                f"{sorted(valid)}"
            )


_SMALL = {"rotation": "small", "max_angle": 0.3}

TASK_READINGS: tuple[TaskReading, ...] = (
    TaskReading(
        "chamfer_matching", "v1", {},
        "the copy turned by a Haar-random rotation (as far from A as an independent cloud); the "
        "independent cloud draws its own size, so set sizes tell the classes apart",
    ),
    TaskReading(
        "chamfer_matching", "near-copy", dict(_SMALL),
        "the copy turned by at most 0.3 rad, so it stays near A; the independent cloud draws its "
        "own size",
    ),
    TaskReading(
        "chamfer_matching", "near-copy-same-size", {**_SMALL, "independent_size": "same"},
        "the copy turned by at most 0.3 rad; the independent cloud has as many points as A, so "
        "set sizes carry no class",
    ),
    TaskReading(
        "chamfer_matching", "same-size", {"independent_size": "same"},
        "a Haar-random rotation; the independent cloud has as many points as A",
    ),
    TaskReading(
        "rotation_matching", "v1", {},
        "the Chamfer distance before alignment; Givens angles U(-pi, pi) in every plane",
    ),
    TaskReading(
        "rotation_matching", "small-angle", {"max_angle": 0.3},
        "the Chamfer distance before alignment; Givens angles U(-0.3, 0.3) in every plane",
    ),
    TaskReading(
        "rotation_matching", "residual", {"target": "residual"},
        "the Chamfer distance after undoing the sample's own rotation, CD(A, R^T B); angles "
        "U(-pi, pi)",
    ),
    TaskReading(
        "rotation_matching", "aligned", {"target": "aligned"},
        "the Chamfer distance after the rotation that best aligns A to B, CD(Q A, B) (orthogonal "
        "Procrustes); angles U(-pi, pi)",
    ),
    TaskReading(
        "quadratic_tdof", "v1", {},
        "d = 32, random Frobenius-orthogonal M_0 and M_l, f divided by sqrt(L + 1)",
    ),
    TaskReading(
        "quadratic_tdof", "m0-zero", {"m0": "zero", "scale": "none"},
        "d = 32, random Frobenius-orthogonal M_l, M_0 = 0, eq:quadratic-tdof unscaled",
    ),
    TaskReading(
        "quadratic_tdof", "witness-d64",
        {"basis": "witness", "m0": "zero", "scale": "none", "d": 64},
        "lem:comp-orth's witness M_l = e_l e_d^T, M_0 = 0, unscaled, d = 64 (the paper's only d)",
    ),
)  # fmt: skip


def _check_unique() -> None:
    seen: set[tuple[str, str]] = set()
    for r in TASK_READINGS:
        if (r.task, r.name) in seen:
            raise ValueError(f"reading {r.name!r} of {r.task!r} is registered twice")
        seen.add((r.task, r.name))


_check_unique()


def readings_of(task: str) -> dict[str, TaskReading]:
    """The named readings of ``task`` by name (``{"v1": ...}`` for a task with no other reading:
    its generator is the only one)."""
    if task not in TASKS:
        TASKS[task]  # raises, listing the tasks
    out = {r.name: r for r in TASK_READINGS if r.task == task}
    return out or {DEFAULT_READING: TaskReading(task, DEFAULT_READING, {}, "the generator")}


def reading_keys(task: str) -> tuple[str, ...]:
    """The reading options of ``task``: every option one of its readings sets (sorted)."""
    return tuple(sorted({k for r in readings_of(task).values() for k in r.options}))


def reading_options(task: str, name: str) -> dict:
    """The generator options that make reading ``name`` of ``task`` (pass them to ``make_task``
    or a ``Cell``); an unknown name raises, listing the task's readings."""
    known = readings_of(task)
    if name not in known:
        raise ValueError(f"task {task!r} has no reading {name!r}; its readings: {sorted(known)}")
    return dict(known[name].options)


def task_reading(task: str, options: dict) -> str:
    """The name of the reading that ``options`` of ``task`` make (unset options at the
    generator's defaults): the reading whose reading options they equal, else ``CUSTOM``. Options
    no reading sets (d, sizes, noise) do not enter: a rotation-matching set at d = 64 reads v1."""
    defaults = task_options(task)
    bad = sorted(set(options) - set(defaults))
    if bad:
        raise ValueError(f"unknown option(s) {bad} for task {task!r}; valid: {sorted(defaults)}")
    resolved = {**defaults, **options}
    keys = reading_keys(task)
    for name, r in readings_of(task).items():
        want = {**{k: defaults[k] for k in keys}, **r.options}
        if all(resolved[k] == want[k] for k in keys):
            return name
    return CUSTOM
