"""What an experiment is: cells, tables, profiles and the checks that keep them valid."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from functools import cache
from importlib import resources
from pathlib import Path

import yaml

from mzlite import nn as _nn
from mzlite import tasks as _tasks
from mzlite._paths import data_root
from mzlite.train import TrainConfig

RESULT_FORMAT = "mzlite.result/1"
SET_STATS = "set_stats"  # the yardstick every table carries: a ridge on simple set statistics
SET_STATS_LABEL = _nn.model_spec(SET_STATS).display
_ID = re.compile(r"^[A-Za-z0-9_.=-]+$")


def prose_data(name: str):
    """The data in ``name``, a YAML file beside this module: the prose the book shows (the paper's
    words, our readings, the tables' titles and notes), kept as data that diffs as text."""
    return yaml.safe_load(resources.files(__package__).joinpath(name).read_text(encoding="utf-8"))


def default_results_dir() -> Path:
    """``$MZLITE_RESULTS``, else ``results`` in ``data_root()`` (the repository's ``data/``, not the
    working directory's, so that notebooks and the CLI find the same files)."""
    return Path(os.environ.get("MZLITE_RESULTS", data_root() / "results"))


def results_root(results_dir=None) -> Path:
    return Path(results_dir) if results_dir is not None else default_results_dir()


default_cache_dir = _tasks.default_cache_dir  # $MZLITE_CACHE, else data/cache


def search_path(profile: str, results_dir=None) -> Path:
    """Where the learning-rate search of ``profile`` writes its trials and choice."""
    return results_root(results_dir) / "lr-search" / f"{profile}.json"


def search_choice(profile: str, results_dir=None, table: str | None = None) -> dict[str, dict]:
    """``{family: {"lr": ..., "schedule": ...}}`` as the committed search of ``profile`` chose
    ({} before it ran); with ``table``, a family's choice for that table where its search made one
    (``choice_by_table``), else its choice over all its studies (``search_in_effect``)."""
    path = search_path(profile, results_dir)
    if not path.exists():
        return {}
    shared, by_table = _read_choice(path, path.stat().st_mtime_ns)
    return {fam: dict(by_table.get((fam, table), train)) for fam, train in shared.items()}


def search_in_effect(out: dict) -> dict[str, dict]:
    """``{family: its choice record}`` that search file ``out`` trains with. While the families'
    deciding methods differ (a new search decided some), a family the new method decided keeps the
    choice it ``replaced``: no verdict sets a family at its new rate against another at its old."""
    methods = out.get("methods", {})
    if len({methods.get(fam) for fam in out["choice"]}) <= 1:
        return dict(out["choice"])
    old = out.get("replaced", {})
    return {fam: old[fam]["choice"] if fam in old else c for fam, c in out["choice"].items()}


@cache
def _read_choice(path: Path, mtime_ns: int) -> tuple[dict, dict]:
    out = json.loads(path.read_text())
    in_effect = search_in_effect(out)
    shared = {fam: dict(c["train"]) for fam, c in in_effect.items()}
    by_table = {(fam, table): dict(c["train"])
                for fam, tables in out.get("choice_by_table", {}).items()
                if in_effect.get(fam) is out["choice"].get(fam)
                for table, c in tables.items()}  # fmt: skip
    return shared, by_table


@dataclass(frozen=True)
class PaperRef:
    """One number of ``data/paper``: table ``row`` x ``column``, compared with our ``metric``
    ("r2", "mse", ...) times ``scale`` (tab:main-results prints Task D's MSE x 10^2)."""

    row: str
    column: str
    metric: str = "r2"
    scale: float = 1.0


@dataclass(frozen=True)
class Derived:
    """A paper number computed from two of our cells: mean ``metric`` of cell ``num`` divided by
    that of cell ``den`` (tab:tdof-verify's "MSE ratio" = MSE(ST-4L) / MSE(MZ-1L))."""

    row: str
    column: str
    num: str
    den: str
    metric: str = "mse"


@dataclass(frozen=True)
class Cell:
    """One experiment of a table: ``model`` (of ``mzlite.nn.MODELS``) with ``model_kwargs``
    (``match_params``: widened to that many parameters at the task's d_in) on ``task`` with
    ``options``; ``sizes`` and ``full_seeds`` are the full profile's (n_train, n_val, n_test) and
    seeds; ``train`` overrides the paper's ``TrainConfig``; ``row``/``column`` place it in the
    report; ``paper`` lists the numbers it reproduces. ``paper_size``: train at ``sizes`` under
    every profile (no ``max_sizes`` cap): the training-set-size ablation."""

    id: str
    task: str
    options: dict
    model: str
    row: str
    column: str
    model_kwargs: dict = field(default_factory=dict)
    match_params: int | None = None
    paper: tuple[PaperRef, ...] = ()
    sizes: tuple[int, int, int] = (10_000, 2_000, 2_000)
    batch_size: int = 128
    train: dict = field(default_factory=dict)
    full_seeds: int = 5
    part: str = "main"
    note: str = ""
    paper_size: bool = False

    def __post_init__(self):
        if not isinstance(self.id, str) or not _ID.match(self.id) or "__" in self.id:
            raise ValueError(f"cell id must match {_ID.pattern} without '__', got {self.id!r}")
        check_task_options(self.task, self.options)
        check_model_name(self.model)
        if self.part not in ("main", "ablation"):
            raise ValueError(f"part must be 'main' or 'ablation', got {self.part!r}")
        if len(self.sizes) != 3 or any(not isinstance(n, int) or n < 1 for n in self.sizes):
            raise ValueError(f"sizes must be three ints >= 1 (train, val, test), got {self.sizes}")
        bad = sorted(set(self.train) - set(TrainConfig.__dataclass_fields__))
        if bad:
            raise ValueError(f"unknown TrainConfig field(s) {bad} in cell {self.id!r}")


@dataclass(frozen=True)
class Profile:
    """How much to run: ``sizes`` (None: each cell's own) capped at ``max_sizes``, ``seeds`` (None:
    each cell's ``full_seeds``), ``train`` overrides of the paper's ``TrainConfig``, ``batch_size``
    (None: the cell's), ``data_seed`` (shared by every model and seed). ``lr_by_family``: a rate per
    model family (a cell's own ``train["lr"]`` wins), from ``lr_source``. ``fixed_train``: fields of
    ``train`` no cell overrides. ``searched``: each family's ``lr`` and ``schedule`` from the
    profile's committed learning-rate search (``search_choice``). ``sizes_by_table``: a table's
    sizes where the profile fixes sizes the paper does not state."""

    name: str
    sizes: tuple[int, int, int] | None
    seeds: int | None
    train: dict
    batch_size: int | None = None
    data_seed: int = 0
    max_sizes: tuple[int, int, int] | None = None
    description: str = ""
    lr_by_family: dict = field(default_factory=dict)
    lr_source: str = ""
    fixed_train: tuple[str, ...] = ()
    searched: bool = False
    sizes_by_table: dict = field(default_factory=dict)

    def __post_init__(self):
        loose = sorted(set(self.fixed_train) - set(self.train))
        if loose:
            raise ValueError(f"fixed_train names fields the profile's train does not set: {loose}")


# Sizes of the tables whose training sets the paper does not state, under the profiles at the
# paper's sizes: the upper end of its 5-10K range for synthetic tasks (as tab:meb's cells)
UNSTATED_PAPER_SIZES = {"tab:tdof-verify": (10_000, 2_000, 2_000)}


def set_count_text(n: int) -> str:
    """A number of sets as the paper writes it: 10K, 2K, 500."""
    return f"{n / 1000:g}K" if n >= 1000 else str(n)


def sizes_text(sizes) -> str:
    """Training, validation and test sizes as the paper writes them: "10K/2K/2K"."""
    return "/".join(set_count_text(n) for n in sizes)


TDOF_PAPER_SIZES = sizes_text(UNSTATED_PAPER_SIZES["tab:tdof-verify"])  # profiles, table notes
# the converged CPU protocol's training, the rate's halving its successors anneal with, and the
# annealed CPU protocol's training
_CONVERGED = {"epochs": 200, "warmup_epochs": 3, "patience": 20, "normalize_targets": True}
_HALVING = {"decay_patience": 5, "decay_factor": 0.5}
_ANNEALED = {**_CONVERGED, "schedule": "plateau", **_HALVING}


# The rates per family of ``_lr_probed`` come from ``benchmarks/lr_probe.py`` (its outputs kept
# beside it, ``lr_probe-<profile>.txt``): the smallest rate within 2 % of the lowest mean relative
# excess validation loss over a family's cells. cpu-converged's (2026-11-23) ran one seed for 10
# epochs (the tab:meb cells ``abl-d8-lr*`` check its order of magnitude); cpu-annealed's
# (2026-11-25, 74195e2) seeds 0 and 1, MZ with the default generator normalisation.
def _lr_probed(name: str, train: dict, **lr_by_family: float) -> Profile:
    """A CPU profile of 3 seeds, training and validation sets capped at 2K and 500 (test sets the
    paper's), each family at the rate ``benchmarks/lr_probe.py`` chose for it."""
    src = f"benchmarks/lr_probe.py (validation split; lr_probe-{name}.txt)"
    cap = (2_000, 500, 2_000)
    return Profile(name, None, 3, train, max_sizes=cap, lr_by_family=lr_by_family, lr_source=src)


def _paper_sized(name: str, lr_source: str, schedule: str | None = None, **rates) -> Profile:
    """cpu-annealed's reading at the paper's sizes (tab:tdof-verify's: ``UNSTATED_PAPER_SIZES``),
    5 warm-up epochs, float32, 3 seeds; the rates searched, or ``rates`` (``lr_by_family``)."""
    train = {**_CONVERGED, "warmup_epochs": 5, **_HALVING, "amp": False}
    train.update({"schedule": schedule} if schedule else {})
    return Profile(name, None, 3, train, lr_source=lr_source, searched=not rates,
                   sizes_by_table=UNSTATED_PAPER_SIZES, **rates)  # fmt: skip


_PROFILES = {
    # lr 1e-3 so that 3 epochs of 4 steps visibly move the curves; the numbers mean nothing.
    "smoke": Profile("smoke", (128, 64, 64), 1,
                     {"epochs": 3, "warmup_epochs": 1, "patience": None, "lr": 1e-3},
                     batch_size=32, fixed_train=("epochs",)),
    # "What 30 epochs show": the first CPU protocol, kept so that its committed results keep their
    # reading (lr 1e-3: the paper's 1e-4 barely moves in 30 epochs; float32, as they were trained
    # before bf16 autocast became fit's CPU default): a schedule ablation.
    "cpu": Profile("cpu", None, 1,
                   {"epochs": 30, "warmup_epochs": 2, "patience": 10, "lr": 1e-3, "amp": False},
                   max_sizes=(2_000, 500, 1_000), fixed_train=("epochs",)),
    # The converged CPU protocol (issue 9): runs end by early stopping (the paper's cap 200 and
    # patience 20), not by a cap. Targets standardised (app:opt-confound; metrics in original
    # units). Training sets capped at 2K and validation at 500, as CPU time is linear in them;
    # test sets the paper's (a test pass is one forward, and shrinks the error of every mean).
    "cpu-converged": _lr_probed("cpu-converged", _CONVERGED, mz=3e-3, baseline=1e-3, deepsets=1e-3),
    # The annealed CPU protocol (issue 23), cpu-converged's successor: a schedule that anneals
    # within the run that early stopping ends (cpu-converged's cosine spans the 200-epoch cap, so
    # 78% of its MZ runs stopped with the rate still >= 30% of its peak): the rate halves after 5
    # epochs without a new best, and patience 20 stops a run three halvings after its last best.
    "cpu-annealed": _lr_probed("cpu-annealed", _ANNEALED, mz=1e-3, baseline=1e-3, deepsets=1e-3),
    # The paper's sizes (issue 33): cpu-annealed's reading at each cell's own (the paper's) sizes,
    # warm-up and patience in epochs as the paper states them (about its optimiser steps at these
    # sizes); each family's lr and schedule from the search. Float32: the paper names no mixed
    # precision (a profile's precision is part of its experiment).
    "paper-sizes": _paper_sized(
        "paper-sizes", "the learning-rate search of this profile (data/results/lr-search)"),
    # As paper-sizes trained before Task B joined the search (issue 50): each family at the
    # choices of its studies on Tasks F and G and tab:tdof-verify L = 16, from the search file as
    # it was then (paper-sizes-fg.json, frozen: paper-sizes.json at 5f41b41). Superseded.
    "paper-sizes-fg": _paper_sized(
        "paper-sizes-fg", "the learning-rate search of paper-sizes before Task B's studies "
        "(data/results/lr-search/paper-sizes-fg.json)"),
    # As paper-sizes trained before the rung-sized search (issue 49) decided every family: each
    # at the choice of the search it replaced, which censored cosine (all three a plateau;
    # paper-sizes.json's "replaced"). Superseded: ``results.retire`` keeps the paper-sizes
    # campaign of those rates here once the new choices train, as a labelled ablation.
    "paper-sizes-censored": _paper_sized(
        "paper-sizes-censored", "the search before issue 49, which censored cosine "
        "(data/results/lr-search)", schedule="plateau",
        lr_by_family={"mz": 1e-3, "baseline": 1e-3, "deepsets": 3e-3}),
    # The paper's protocol: TrainConfig's defaults are app:impl's hyperparameter table, at the
    # sizes of paper-sizes, so that its verdicts differ from paper-sizes' in the optimiser alone.
    "full": Profile("full", None, None, {"amp": False}, sizes_by_table=UNSTATED_PAPER_SIZES),
}  # fmt: skip
_WORDS = prose_data("profiles.yaml")  # each profile's words, as the CLI and the book show them
PROFILES = {name: replace(p, description=_WORDS[name].replace("{paper_sizes}", TDOF_PAPER_SIZES))
            for name, p in _PROFILES.items()}  # fmt: skip


@dataclass(frozen=True)
class TableSpec:
    """A paper table: ``label``, ``title``, ``cells``, ``derived`` numbers; ``notes`` says what
    is not reproduced and why; ``chapter`` the notebook (no suffix) that runs and reads it."""

    label: str
    title: str
    cells: tuple[Cell, ...]
    derived: tuple[Derived, ...] = ()
    notes: str = ""
    chapter: str = ""

    def __post_init__(self):
        if not re.fullmatch(r"\d\d_[a-z0-9_]+", self.chapter):
            raise ValueError(f"{self.label}: chapter must be a notebook name like "
                             f"'06_relational_benchmarks', got {self.chapter!r}")  # fmt: skip
        ids = [c.id for c in self.cells]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"{self.label}: duplicate cell ids {dup}")
        for d in self.derived:
            for c in (d.num, d.den):
                if c not in ids:
                    raise ValueError(f"{self.label}: derived {d.column!r} names no cell {c!r}")

    @property
    def dirname(self) -> str:
        return self.label.replace(":", "-")

    def cell(self, cell_id: str) -> Cell:
        for c in self.cells:
            if c.id == cell_id:
                return c
        raise ValueError(
            f"no cell {cell_id!r} in {self.label}; cells: {[c.id for c in self.cells]}"
        )

    @property
    def models(self) -> list[str]:
        return sorted({c.model for c in self.cells})

    def yardsticks(self, cell_id: str) -> list[str]:
        """The set-statistics cells on the data of ``cell_id`` (its task, options and sizes; a
        closed form, so no training setting tells two apart), its own column's first."""
        c = self.cell(cell_id)
        same = [y for y in self.cells if y.model == SET_STATS
                and (y.task, y.options, y.sizes, y.paper_size)
                == (c.task, c.options, c.sizes, c.paper_size)]  # fmt: skip
        return [y.id for y in sorted(same, key=lambda y: y.column != c.column)]


def check_task_options(task: str, options: dict) -> dict:
    """``options`` of ``task`` with its defaults filled in. Unknown task/options, ``d < 1`` and
    ``n_min > n_max`` raise ValueError naming the valid choices, before any data is generated."""
    valid = _tasks.task_options(task)  # unknown task: ValueError listing the tasks
    bad = sorted(set(options) - set(valid))
    if bad:
        raise ValueError(f"unknown option(s) {bad} for task {task!r}; valid: {sorted(valid)}")
    full = {**valid, **options}
    for k in ("d", "L", "n_min", "n_max"):
        v = full.get(k)
        if k in full and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise ValueError(f"{k} must be an int >= 1 for task {task!r}, got {v!r}")
    if "n_min" in full and full["n_min"] > full["n_max"]:
        raise ValueError(f"n_min must be <= n_max for task {task!r}, got n_min={full['n_min']} > "
                         f"n_max={full['n_max']}")  # fmt: skip
    return full


def task_options_diff(result: dict, cell: Cell) -> dict:
    """``{"task_options.<option>": (the result's, the cell's)}`` where a result's data differ from
    ``cell``'s (an option newer than the result reads its default), and ``task_reading``."""
    mine, mine_reading = _resolved_reading(cell.task, cell.options)
    theirs, their_reading = _resolved_reading(result["task"], result.get("task_options") or {})
    out = _differences("task_options", theirs, mine, mine.keys() | theirs.keys())
    if their_reading != mine_reading:
        out["task_reading"] = (their_reading, mine_reading)
    return out


# train_config fields that say where and how a run was executed, not what it computed
WHERE_TRAINED = ("seed", "device", "num_threads", "eval_batch_size")


def train_config_diff(recorded: dict, today: dict, skip: tuple[str, ...] = ()) -> dict:
    """``{"train_config.<field>": (recorded, today's)}`` where a result's ``train_config`` differs
    from its job's ``today`` (``WHERE_TRAINED``, ``skip`` and fields one side lacks left out)."""
    keys = (recorded.keys() & today.keys()) - {*WHERE_TRAINED, *skip}
    return _differences("train_config", recorded, today, keys)


def _differences(what: str, old: dict, new: dict, keys) -> dict:
    pairs = {k: (old.get(k), new.get(k)) for k in sorted(keys)}
    return {f"{what}.{k}": pair for k, pair in pairs.items() if pair[0] != pair[1]}


def _resolved_reading(task: str, options: dict) -> tuple[dict, str]:
    """(``check_task_options``, ``task_reading``) of ``options``, cached: readers compare every
    result of a table with its cell's options."""
    try:
        full, reading = _resolved_reading_cached(task, tuple(sorted(options.items())))
    except TypeError:  # an unhashable option value: compute it afresh
        full = check_task_options(task, options)
        return full, _tasks.task_reading(task, full)
    return dict(full), reading


@cache
def _resolved_reading_cached(task: str, items: tuple) -> tuple[tuple, str]:
    full = check_task_options(task, dict(items))
    return tuple(sorted(full.items())), _tasks.task_reading(task, full)


def model_family(name: str) -> str:
    """The learning-rate family of model ``name``: its ``ModelSpec.family`` ("mz", "deepsets",
    "baseline": every other trained model, probed with the Set Transformer, or "closed_form")."""
    check_model_name(name)
    return _nn.model_spec(name).family


def check_model_name(name: str) -> None:
    valid = (*_nn.MODELS, "standard")  # a cell may name a model by its alias "standard"
    if name not in valid:
        raise ValueError(f"unknown model {name!r}; valid models: {', '.join(valid)}")
