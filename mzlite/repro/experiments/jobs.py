"""Jobs: one (table, cell, seed, profile) to run, where its result lives, what is done."""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from mzlite.nn import model_spec
from mzlite.train import TrainConfig

from .specs import (
    PROFILES,
    WHERE_TRAINED,
    Cell,
    Profile,
    TableSpec,
    check_task_options,
    default_cache_dir,
    model_family,
    results_root,
    search_choice,
)
from .tables import get_profile, get_table, table_registry
from .uncertainty_study import TABLE as UNCERTAINTY_TABLE


def parse_seeds(text) -> list[int]:
    """``"0-4"`` -> [0, 1, 2, 3, 4]; ``"0,2,5"``; ``"3"``; or an int or iterable of ints >= 0."""
    if text is None:
        raise ValueError("seeds must be given")
    if not isinstance(text, str):
        out = [text] if isinstance(text, int) else list(text)  # a bool is refused below
        if not out or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in out):
            raise ValueError(f"seeds must be non-empty ints >= 0, got {out!r}")
        return sorted(set(out))
    out = set()
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", part)
        if m is None:
            raise ValueError(f"invalid seeds {text!r}: use a range '0-4', a list '0,2,5' or one "
                             "seed '3'")  # fmt: skip
        lo, hi = int(m[1]), int(m[2] or m[1])
        if lo > hi:
            raise ValueError(f"invalid seed range {part.strip()!r}: lo > hi (write e.g. '0-4')")
        out.update(range(lo, hi + 1))
    return sorted(out)


PRECISIONS = ("auto", "bf16", "float32")


@dataclass(frozen=True)
class Job:
    table: str
    cell: Cell
    seed: int
    profile: Profile
    result_path: Path
    checkpoint_path: Path
    cache_dir: Path
    device: str
    # "auto" (TrainConfig's amp=None: bf16 autocast on a CPU with native bf16, float32 else),
    # "bf16" or "float32": a GPU run asks for "bf16" to train the experiment of the bf16 CPU runs
    precision: str = "auto"

    @property
    def sizes(self) -> tuple[int, int, int]:
        p = self.profile
        if p.sizes:
            return p.sizes
        if self.table in p.sizes_by_table:
            return tuple(p.sizes_by_table[self.table])
        if p.max_sizes and not self.cell.paper_size:
            return tuple(min(a, b) for a, b in zip(self.cell.sizes, p.max_sizes, strict=True))
        return self.cell.sizes

    def train_config(self) -> TrainConfig:
        c, p = self.cell, self.profile
        fam = model_family(c.model)
        kw = {**p.train, "lr": p.lr_by_family[fam]} if fam in p.lr_by_family else dict(p.train)
        if p.searched:  # before its search has run: the profile's own (run() refuses to train)
            kw.update(search_choice(p.name, table=self.table).get(fam, {}))
        kw.update(c.train)  # a cell's own protocol (lr sweep, targets) wins ...
        kw.update({k: p.train[k] for k in p.fixed_train})  # ... except where the profile is fixed
        kw["batch_size"] = p.batch_size or c.batch_size
        kw["eval_batch_size"] = max(kw["batch_size"], 256)
        if self.precision != "auto":
            kw["amp"] = self.precision == "bf16"
        return TrainConfig(seed=self.seed, device=self.device, **kw)


def protocol(job: Job) -> dict:
    """The profile and its description, the model family and where its learning rate comes from:
    what a result was trained under, beside its ``train_config``."""
    c, p = job.cell, job.profile
    out = {"profile": p.name, "description": p.description}
    if model_spec(c.model).trainable:
        fam = model_family(c.model)
        if "lr" in c.train:
            src = f"cell {c.id}"
        elif p.searched or p.lr_by_family:
            src = f"profile {p.name}, family {fam}: {p.lr_source}"
        else:
            src = f"profile {p.name}" if "lr" in p.train else "the paper's (TrainConfig default)"
        out.update(family=fam, lr_source=src)
    return out


def bare_job(label: str, cell: Cell, prof: Profile) -> Job:
    """``cell``'s job under ``prof`` without files or a seed: what it trains and on what sizes."""
    return Job(label, cell, 0, prof, Path(), Path(), Path(), "cpu")


def _experiment_key(label: str, cell: Cell, prof: Profile, stated: bool = False) -> str:
    """Everything that decides what ``cell`` computes under ``prof`` but its seed and where it
    runs; ``stated``: model kwargs as ``_stated_kwargs``, for ``shared``. Within a table
    (``aliases``) kwargs count as written: a reading-ablation cell that names today's default is
    not the main cell, whose older profiles' results were trained under another default."""
    job = bare_job(label, cell, prof)
    kwargs = _stated_kwargs(cell) if stated else cell.model_kwargs
    key = {"task": cell.task, "options": check_task_options(cell.task, cell.options),
           "model": cell.model, "model_kwargs": kwargs, "match_params": cell.match_params,
           "sizes": list(job.sizes), "data_seed": prof.data_seed}  # fmt: skip
    if model_spec(cell.model).trainable:  # what it computes, not where or how fast
        cfg = job.train_config().to_dict()
        key["train"] = {k: v for k, v in cfg.items() if k not in WHERE_TRAINED}
    if label == UNCERTAINTY_TABLE:  # each cell computes its own method's metrics (MC-Dropout, ...)
        key["evaluation"] = f"uncertainty: {cell.id}"
    return json.dumps(key, sort_keys=True, default=str)


def _stated_kwargs(cell: Cell) -> dict:
    """A cell's model kwargs, the model's own settings filled in and its config's defaults left
    out: ``{"n_g": 8}`` and ``{}`` are the same MZAttn-Full (tab:ablation's n_g = 8 and
    tab:depth's two-block rows are tab:main-results' cells)."""
    spec = model_spec(cell.model)
    merged = {**spec.base, **cell.model_kwargs}
    config_fields = dataclasses.fields(spec.config) if spec.config is not None else ()
    defaults = {f.name: f.default for f in config_fields if f.default is not dataclasses.MISSING}
    return {k: v for k, v in merged.items() if k not in defaults or defaults[k] != v}


def aliases(table, profile: str = "smoke") -> dict[str, str]:
    """``{cell id: earlier cell id}`` for the cells of ``table`` that under ``profile`` are the
    same experiment as an earlier cell ("targets standardised" under ``cpu-converged``, "raw
    targets" under ``full``): not run again, ``results_by_cell`` gives them its results."""
    return _sameness(table, profile)[0]


def shared(table, profile: str = "smoke") -> dict[str, tuple[str, str]]:
    """``{cell id: (table, cell id)}`` for the cells of registered ``table`` that under registered
    ``profile`` are the same experiment as a cell of a table registered before it (under
    ``cpu-annealed`` tab:hull-normed's are tab:hull's): run once, under the earlier table, whose
    results ``results_by_cell`` gives them. Unregistered specs and profiles share nothing."""
    return _sameness(table, profile)[1]


def _sameness(table, profile: str) -> tuple[dict, dict]:
    """(``aliases``, ``shared``), cached for registered specs and profiles (which never change),
    keyed by the registry (a table registered for a while, ``Registry.registered``, has its own)."""
    spec, prof = get_table(table), get_profile(profile)
    if prof is not PROFILES.get(prof.name) or table_registry().get(spec.label) is not spec:
        return _aliases(spec, prof), {}
    registry = tuple((label, id(s)) for label, s in table_registry().items())
    same, lent = _registered_sameness(prof.name, registry)[spec.label]
    return dict(same), dict(lent)


def _aliases(spec: TableSpec, prof: Profile) -> dict[str, str]:
    first: dict[str, str] = {}
    runs_as = {c.id: first.setdefault(_experiment_key(spec.label, c, prof), c.id)
               for c in spec.cells}  # fmt: skip
    return {cell: earlier for cell, earlier in runs_as.items() if cell != earlier}


@cache
def _registered_sameness(profile: str, registry: tuple) -> dict[str, tuple[dict, dict]]:
    """Per table of ``registry`` under registered ``profile``: its ``aliases`` and ``shared``."""
    prof = get_profile(profile)
    first: dict[str, tuple[str, str]] = {}
    out = {}
    for label, spec in table_registry().items():
        same = _aliases(spec, prof)
        keys = {c.id: _experiment_key(label, c, prof, stated=True) for c in spec.cells
                if c.id not in same}  # fmt: skip
        runs_as = {cid: first.setdefault(key, (label, cid)) for cid, key in keys.items()}
        out[label] = (same, {cid: lender for cid, lender in runs_as.items() if lender[0] != label})
    return out


def result_path(table, cell_id: str, seed: int, profile: str, results_dir=None) -> Path:
    """``<results>/<profile>/<label-with-dashes>/<cell-id>__seed<k>.json``."""
    root = results_root(results_dir)
    return root / profile / get_table(table).dirname / f"{cell_id}__seed{seed}.json"


def job(table, cell_id: str, profile: str = "smoke", seed: int = 0) -> Job:
    """The job of one cell and seed under ``profile``. ValueError for an unknown cell id, a cell
    run as another (naming it), or a seed the cell does not run (a yardstick runs seed 0)."""
    spec = get_table(table)
    cell = spec.cell(cell_id)  # an unknown id raises, listing the table's cells
    lender = aliases(spec, profile).get(cell.id) or " ".join(shared(spec, profile).get(cell.id, ()))
    if lender:
        raise ValueError(f"cell {cell.id} is run as {lender} under {profile}: ask for that")
    (found,) = jobs(spec, profile, [seed], cells=[cell.id])
    if found.seed != seed:
        raise ValueError(f"cell {cell.id} runs seed {found.seed} only, got seed={seed}")
    return found


def jobs(table, profile: str = "smoke", seeds=None, models=None, cells=None, results_dir=None,
         cache_dir=None, device: str = "auto", precision: str = "auto") -> list[Job]:  # fmt: skip
    """Every (cell, seed) job of ``table`` under ``profile``, after the ``models`` (model names or
    ids of the table) and ``cells`` (cell-id glob patterns) filters; ``precision``: of
    ``PRECISIONS`` (``Job.precision``)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    spec, prof = get_table(table), get_profile(profile)
    seeds = None if seeds is None else parse_seeds(seeds)
    chosen = list(spec.cells)
    if models is not None:
        models = [models] if isinstance(models, str) else list(models)
        names = {c.id: {c.model, c.id.rsplit("-", 1)[-1]} for c in spec.cells}  # name or model id
        known = set().union(*names.values())
        bad = [m for m in models if m not in known]
        if bad:
            raise ValueError(f"unknown model(s) {bad} for {spec.label}; valid: {sorted(known)}")
        # a closed-form yardstick comes with any choice of models: it costs no training
        chosen = [c for c in chosen if names[c.id] & {*models} or not model_spec(c.model).trainable]
    if cells is not None:
        pats = [cells] if isinstance(cells, str) else list(cells)
        chosen = [c for c in chosen if any(fnmatch.fnmatch(c.id, p) for p in pats)]
        if not chosen:
            ids = [c.id for c in spec.cells]
            raise ValueError(f"cells {pats} match no cell of {spec.label}; cells: {ids}")
    same = {**aliases(spec, prof), **shared(spec, prof)}
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    checkpoints = cache_dir / "checkpoints" / prof.name / spec.dirname
    out = []
    for c in chosen:
        if c.id in same:  # run once, under the earlier cell's id
            continue
        if not model_spec(c.model).trainable:  # deterministic: one result, seed 0
            cell_seeds = [0]
        elif seeds is not None:
            cell_seeds = seeds
        else:
            cell_seeds = range(prof.seeds if prof.seeds is not None else c.full_seeds)
        for s in cell_seeds:
            path = result_path(spec, c.id, s, prof.name, results_dir)
            checkpoint = checkpoints / f"{c.id}__seed{s}.pt"
            out.append(Job(spec.label, c, s, prof, path, checkpoint, cache_dir, device, precision))
    return out
