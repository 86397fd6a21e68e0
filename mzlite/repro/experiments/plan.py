"""How many CPU hours will a table take? Estimates from measured per-epoch costs.

    from mzlite.repro.experiments.plan import plan
    p = plan("tab:tdof-verify", profile="cpu-converged")
    print(p.to_text())          # one row per cell, a total per table; p.rows are plain dicts

A cell's estimate is ``jobs to run x epochs x CPU seconds per epoch``, each printed with its
source. The seconds come from the CPU results on disk per set unit (``_units``), else from other
tasks or like models (``_unit_cost``); the epochs from the profile's finished runs, else a prior
of 4 x patience (a run stops ``patience`` epochs after its best, which tends to come after 1-3
patience windows), at most the epoch cap. With ``measure`` costs recorded on other CPUs are
rescaled to this one per model family (``machine_speed``: the AVX2 EPYC of issue 51 prices an
epoch several times higher than the machines that wrote most results). Timings on a shared
machine drift by tens of percent: the plan orders runs by cost, it promises no finish time.
``decide`` (``plan TABLES --decide``) spends CPU hours where verdicts change (``_steps``)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from mzlite import nn as _nn
from mzlite._io import atomic_write_json
from mzlite.analysis.verdicts import Label
from mzlite.nn.fused import cpu_model
from mzlite.repro import experiments as ex
from mzlite.repro.experiments import engine
from mzlite.repro.experiments import scorecard as _sc
from mzlite.repro.experiments import stats as _stats
from mzlite.repro.experiments.uncertainty_study import models_per_job
from mzlite.repro.paper import spaced
from mzlite.tasks import make_task
from mzlite.timing import time_call, train_step_call
from mzlite.train import fit
from mzlite.train.config import check_int_field
from mzlite.train.loop import num_threads_during


def _units(sizes) -> float:
    return sizes[0] + sizes[1] * (1 / 3)  # a validation set costs about a third of a training set


def _cpu_s_per_epoch(res: dict) -> float | None:
    """CPU seconds per epoch per set unit: the run's process CPU time where it recorded it (load
    stretches wall time, not CPU time), else wall time x threads; None without a timing or for a
    GPU run (its wall time, beside 15 other jobs on one GPU, prices no CPU hour)."""
    n = res.get("epochs_run") or 0
    prov = res.get("provenance") or {}
    if n < 1 or not res.get("wall_time_s") or not str(prov.get("device", "cpu")).startswith("cpu"):
        return None
    cpu = (res.get("history") or {}).get("cpu_time_s")
    spent = cpu if cpu else res["wall_time_s"] * (prov.get("num_threads") or 1)
    return spent / n / _units(res["sizes"])


def _measured(results_dir) -> list[dict]:
    """Every trained, non-smoke result on disk: its cost per epoch per set unit."""
    out = []
    for label in ex.TABLES:
        # not smoke's: tiny data, per-step overhead dominates, nothing to scale
        for prof in [p for p in ex.PROFILES if p != "smoke"]:
            for r in ex.load_results(label, prof, results_dir):
                c = _cpu_s_per_epoch(r) if _nn.model_spec(r["model"]).trainable else None
                if c is not None:
                    kwargs = r.get("model_kwargs") or {}
                    out.append({**{k: r.get(k) for k in ("table", "cell", "task", "model")},
                                "profile": prof, "unit_s": c, "key": _model_key(r["model"], kwargs),
                                "kwargs": dict(kwargs)})  # fmt: skip
    return out


def _model_key(model: str, kwargs: dict) -> str:
    return model + "".join(f",{k}={v}" for k, v in sorted(kwargs.items()))


def _grouped(pairs) -> dict:
    """(key, value) pairs as ``{key: [values]}``, in order."""
    out: dict = {}
    for key, value in pairs:
        out.setdefault(key, []).append(value)
    return out


def _hours(v) -> str:
    return "?" if v is None else f"{v:.2f}"


@dataclass
class Plan:
    """Rows (dicts): ``table``, ``cell``, ``model``, ``sizes``, ``todo`` and ``done`` jobs,
    ``s_per_epoch`` (CPU s), ``cost_source``, ``epochs`` (expected), ``epochs_source`` and
    ``_tag``, ``epoch_cap``, ``cpu_h`` (expected) and ``cpu_h_cap`` (every job to the cap)."""

    profile: str
    rows: list[dict]
    workers: int = 1
    machine: dict | None = None  # machine_speed's records when the costs were rescaled here

    def totals(self) -> dict[str, dict]:
        """``_summed`` per table."""
        tables = dict.fromkeys(r["table"] for r in self.rows)
        return {t: _summed(r for r in self.rows if r["table"] == t) for t in tables}

    def to_text(self) -> str:
        prof = ex.get_profile(self.profile)
        out = [f"plan [{prof.name}]: {prof.description}"]
        out += [f"priced for this CPU ({m['cpu']}), {family} models: {m['factor']:.2f}x the cost "
                f"of the results on disk (an epoch of {m['reference']} here: "
                f"{1e3 * m['unit_here']:.3f} ms CPU per set unit, against "
                f"{1e3 * m['unit_recorded']:.3f} ms, the median of its {m['results']} "
                f"result(s); measured {m['when']})"
                for family, m in (self.machine or {}).items()]  # fmt: skip
        head = ("cell", "jobs", "s/epoch", "epochs", "CPU h", "CPU h at cap", "cost from")
        lines = [(f"{r['table']} {r['cell']}", f"{r['todo']} (+{r['done']} done)",
                  "?" if r["s_per_epoch"] is None else f"{r['s_per_epoch']:.1f}",
                  f"{r['epochs']:.0f} ({r['epochs_tag']})", _hours(r["cpu_h"]),
                  _hours(r["cpu_h_cap"]), r["cost_source"]) for r in self.rows]  # fmt: skip
        widths = [max([len(h), *(len(x[i]) for x in lines)]) for i, h in enumerate(head)]
        out += ["", *("  ".join(x[i].ljust(w) for i, w in enumerate(widths))
                      for x in (head, *lines)), ""]  # fmt: skip
        totals = self.totals()
        for label, t in totals.items():
            unk = f", {t['unknown']} cell(s) without an estimate" if t["unknown"] else ""
            out.append(f"{label}: {t['todo']} jobs to run ({t['done']} done): "
                       f"{t['cpu_h']:.1f} CPU h expected, {t['cpu_h_cap']:.1f} at the epoch cap"
                       f"{unk}")  # fmt: skip
        total_h, total_cap = (sum(t[k] for t in totals.values()) for k in ("cpu_h", "cpu_h_cap"))
        eps = sorted({r["epochs_source"] for r in self.rows if r["epochs_tag"] == "prior"})
        out.append(
            f"total: {total_h:.1f} CPU h expected ({total_cap:.1f} at the cap); with "
            f"{self.workers} worker(s) of one thread: ~{total_h / self.workers:.1f} h wall"
        )
        out.append("epochs: (cell)/(model)/(table): median of this profile's finished runs of the "
                   "same cell / model in the table / table" + ("; " if eps else "")
                   + "; ".join(eps))  # fmt: skip
        return "\n".join(out)

    __str__ = to_text

    def gpu_hours(self, throughput: dict) -> list[dict]:
        """GPU hours of each trained row from a measured throughput (``benchmarks/
        gpu_throughput.py --json``): its optimiser steps over the best model-steps per second of
        its model, else its family's (``GPU_STAND_INS``), in a stack no larger than its jobs."""
        out = []
        for r in [r for r in self.rows if _nn.model_spec(r["model"]).trainable and r["todo"]]:
            rates: dict[str, float] = {}
            for m in [m for m in throughput["rows"] if m.get("K", 1) <= r["todo"]]:
                rates[m["model"]] = max(rates.get(m["model"], 0.0), float(m["model_steps_per_s"]))
            batch = ex.get_table(r["table"]).cell(r["cell"]).batch_size
            family = _nn.model_spec(r["model"]).family
            stand_in = r["model"] if r["model"] in rates else GPU_STAND_INS.get(family)
            rate = rates.get(stand_in)
            steps = r["todo"] * math.ceil(r["sizes"][0] / batch)  # one epoch, all jobs
            out.append({
                "table": r["table"], "cell": r["cell"], "todo": r["todo"],
                "measured_as": stand_in if rate else None,
                "gpu_h": r["epochs"] * steps / rate / 3600 if rate else None,
                "gpu_h_cap": r["epoch_cap"] * steps / rate / 3600 if rate else None,
            })  # fmt: skip
        return out


# The model whose measured GPU throughput prices another model of its family (Plan.gpu_hours)
GPU_STAND_INS = {"mz": "mz_full", "baseline": "st", "deepsets": "st"}


def gpu_text(rows: list[dict], throughput: dict) -> str:
    """``Plan.gpu_hours`` as printed: a line per cell and the total."""
    out = [f"GPU hours from the throughput measured on {throughput.get('device', '?')} (commit "
           f"{throughput.get('commit', '?')}, batch {throughput.get('batch')}, sets padded to "
           f"{throughput.get('n_max')}):"]  # fmt: skip
    for r in rows:
        if r["gpu_h"] is None:
            out.append(f"  {r['table']} {r['cell']}: no measured throughput of its model")
        else:
            out.append(f"  {r['table']} {r['cell']}: {r['todo']} jobs, {r['gpu_h']:.2f} GPU h "
                       f"({r['gpu_h_cap']:.2f} at the cap), as {r['measured_as']}")  # fmt: skip
    known = [r for r in rows if r["gpu_h"] is not None]
    total, cap = sum(r["gpu_h"] for r in known), sum(r["gpu_h_cap"] for r in known)
    out.append(f"total: {total:.2f} GPU h expected ({cap:.2f} at the cap), about "
               f"{math.ceil(total * 6):d} device call(s) of 10 minutes")  # fmt: skip
    return "\n".join(out)


def plan(tables, profile: str = "cpu-converged", seeds=None, models=None, cells=None,
         results_dir=None, workers: int = 1, measure: bool = True) -> Plan:  # fmt: skip
    """The estimated cost of the jobs still to run of ``tables`` (a label or several) under
    ``profile``; ``seeds``/``models``/``cells`` filter as in ``jobs``; ``measure``: rescale to
    this CPU and time a model with no result on disk (a few seconds each)."""
    check_int_field("workers", workers, 1)
    prof = ex.get_profile(profile)
    tables = [tables] if isinstance(tables, (str, ex.TableSpec)) else list(tables)
    measured, timed = _measured(results_dir), {}
    machine = machine_speed(measured, prof.name, results_dir) if measure else {}
    rows = []
    for table in tables:
        spec = ex.get_table(table)
        mine = [r for r in ex.load_results(spec, prof.name, results_dir)
                if _nn.model_spec(r["model"]).trainable]  # fmt: skip
        every = ex.jobs(spec, prof.name, seeds, models, cells, results_dir)
        for cid, cjobs in _grouped((j.cell.id, j) for j in every).items():
            job = cjobs[0]
            cell = job.cell
            done = sum(map(ex.has_result, cjobs))  # a result of another experiment reruns
            todo = len(cjobs) - done
            if not _nn.model_spec(cell.model).trainable:
                cap, spe, epochs, tag = 0, 0.0, 0, "-"
                source = eps_src = "closed form"
            else:
                cfg = job.train_config()
                cap = cfg.epochs
                unit, source = _unit_cost(spec.label, cell, measured, timed, measure, prof.name)
                if machine and unit is not None and source != _TIMED_HERE:  # priced elsewhere
                    factor = _factor(machine, cell.model)
                    unit *= factor
                    source += f"; x{factor:.2f} for this CPU"
                epochs, tag, eps_src = _epochs(mine, cell, spec.label, cfg, prof.name)
                members = models_per_job(spec.label, cid)  # an ensemble's job trains them all
                spe = None if unit is None else unit * _units(job.sizes) * members
            rows.append({
                "table": spec.label, "cell": cid, "model": cell.model, "sizes": list(job.sizes),
                "todo": todo, "done": done, "epoch_cap": cap, "s_per_epoch": spe,
                "cost_source": source, "epochs": epochs, "epochs_source": eps_src,
                "epochs_tag": tag, "cpu_h": None if spe is None else todo * epochs * spe / 3600,
                "cpu_h_cap": None if spe is None else todo * cap * spe / 3600,
            })  # fmt: skip
    return Plan(prof.name, rows, workers, machine)


def _epochs(mine: list[dict], cell, label: str, cfg, profile: str) -> tuple[float, str, str]:
    """(expected epochs, tag, source) of ``cell``: the median of the finished runs of the
    narrowest scope that has some: this cell, this model in the table, the table (models stop at
    different epochs); for none, the "prior" min(4 x patience, cap)."""
    scopes = (("cell", "this cell", [r for r in mine if r["cell"] == cell.id]),
              ("model", f"{cell.model} in {label}", [r for r in mine if r["model"] == cell.model]),
              ("table", label, mine))  # fmt: skip
    for tag, scope, res in scopes:
        if ran := [r["epochs_run"] for r in res if r.get("epochs_run")]:
            source = f"median of {len(ran)} {profile} result(s) of {scope}"
            return float(statistics.median(ran)), tag, source
    epochs = float(min(4 * cfg.patience if cfg.patience else cfg.epochs, cfg.epochs))
    source = f"{label}: prior min(4 x patience, cap) = {epochs:.0f} (no {profile} results yet)"
    return epochs, "prior", source


def _unit_cost(label, cell, measured, timed, measure, profile):
    """(CPU s per set unit, source) of ``cell`` of table ``label``: the median of the results of
    this cell and of its model on its task (L or d change the cost little; pooling evens out
    drift), the profile's own if any; else ``_extrapolated``, ``_param_scaled`` or timed now."""
    key = _model_key(cell.model, cell.model_kwargs)
    like = [m for m in measured if (m["table"] == label and m["cell"] == cell.id)
            or (m["key"] == key and m["task"] == cell.task)]  # fmt: skip
    like = [m for m in like if m["profile"] == profile] or like
    if like:
        own = sum(m["table"] == label and m["cell"] == cell.id for m in like)
        return statistics.median(m["unit_s"] for m in like), (
            f"median of {len(like)} {'/'.join(sorted({m['profile'] for m in like}))} result(s) "
            f"of {cell.model} on {cell.task}"
            + (f" ({own} of this cell)" if own else ""))  # fmt: skip
    extrapolated = _extrapolated(cell, key, measured) or _param_scaled(cell, measured, profile)
    if extrapolated is not None:
        return extrapolated
    if not measure:
        if elsewhere := [m["unit_s"] for m in measured if m["key"] == key]:
            return statistics.median(elsewhere), (  # rough: set sizes and d differ between tasks
                f"rough: median of {len(elsewhere)} result(s) of {key} on other tasks (no result "
                "on this task; plan without --no-measure times it)")  # fmt: skip
        return None, "no result of this model on this task (measure=False)"
    # Time it beside a model that has results on this task, and scale that model's measured
    # cost: step timings miss the per-epoch overheads and see today's load, a ratio sees neither.
    refs = [m for m in measured if m["task"] == cell.task]
    if not refs:
        (unit,) = _timed([cell], timed)
        return unit, _TIMED_HERE
    ref_key = "st" if any(m["key"] == "st" for m in refs) else refs[0]["key"]
    ref = [m for m in refs if m["key"] == ref_key]
    mine, theirs = _timed([cell, ex.get_table(ref[0]["table"]).cell(ref[0]["cell"])], timed)
    ratio = mine / theirs
    unit = statistics.median(m["unit_s"] for m in ref) * ratio
    return unit, f"timed now: {ratio:.1f} x {ref_key} on {cell.task} (5 steps each, interleaved)"


_TIMED_HERE = "timed now (5 training steps, 1 thread; no result on this task to scale)"


def _extrapolated(cell, key: str, measured: list[dict]):
    """(unit cost, source) of ``cell``'s model on its task from other tasks: a reference model's
    cost here (the Set Transformer's where it has results) times the median ratio of the two
    models' costs where both have results; None when no task has both."""
    units = _grouped(((m["key"], m["task"]), m["unit_s"]) for m in measured)
    here = {k for k, task in units if task == cell.task}
    for ref in (["st"] if "st" in here else []) + sorted(here - {"st"}):
        ratios = [statistics.median(units[key, task]) / statistics.median(units[ref, task])
                  for task in sorted({task for k, task in units if k == key} - {cell.task})
                  if (ref, task) in units]  # fmt: skip
        if ratios:
            ratio = statistics.median(ratios)
            return statistics.median(units[ref, cell.task]) * ratio, (
                f"extrapolated: {ratio:.1f} x {ref} on {cell.task} (the two models' cost ratio "
                f"on {len(ratios)} other task(s))")  # fmt: skip
    return None


def _param_scaled(cell, measured: list[dict], profile):
    """(unit cost, source) of a model variant (``model_kwargs`` such as ``n_g``) from the results
    on its task of the model with a subset of its kwargs, else of a sibling of the same class,
    scaled by parameter count (a step's cost grows about linearly with it here); None without."""
    kw, cls = cell.model_kwargs, _nn.model_spec(cell.model).model
    like = [m for m in measured if m["task"] == cell.task and m["key"] != _model_key(cell.model, kw)
            and _nn.model_spec(m["model"]).model is cls
            and all(kw.get(k) == v for k, v in m["kwargs"].items())]  # fmt: skip
    if not like:
        return None
    like = [m for m in like if m["profile"] == profile] or like  # as for a cell's own results
    # the same model first (the plain one, else its nearest variant), else a sibling
    best = max((m["model"] == cell.model, len(m["kwargs"])) for m in like)
    like = [m for m in like if (m["model"] == cell.model, len(m["kwargs"])) == best]
    data = make_task(cell.task, 4, 0, **cell.options)
    base = dataclasses.replace(cell, model=like[0]["model"], model_kwargs=like[0]["kwargs"],
                               match_params=None)  # fmt: skip
    built = [ex.build_cell_model(c, data.d_in, data.d_out, 0) for c in (cell, base)]
    n_mine, n_base = (sum(p.numel() for p in model.parameters()) for model in built)
    ratio = n_mine / n_base
    return statistics.median(m["unit_s"] for m in like) * ratio, (
        f"scaled: {ratio:.2f} x {like[0]['key']} on {cell.task} by parameter count "
        f"({n_mine:,} / {n_base:,})")  # fmt: skip


def _timed(cells, timed) -> list[float]:
    """CPU seconds per training set of each of ``cells`` (median of 5 of fit's training steps on
    a batch of its task, one thread; validation sets are priced by _units), the models taking
    turns so that a change of load hits all alike; once per model, task, options and batch."""
    k = tuple((_model_key(c.model, c.model_kwargs), c.task,
               tuple(sorted(ex.check_task_options(c.task, c.options).items())), c.batch_size)
              for c in cells)  # fmt: skip
    if k not in timed:
        calls = []
        for cell in cells:
            data = make_task(cell.task, cell.batch_size, 12345, **cell.options)
            model = ex.build_cell_model(cell, data.d_in, data.d_out, 0)
            y = (data.y if data.y.ndim == 2 else data.y[:, None]).float()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            calls.append(train_step_call(model, opt, data.x, data.mask, y))
        with num_threads_during(1):
            rounds = [[time_call(call) for call in calls] for _ in range(6)]  # 1 warm-up round
        per_cell = zip(*rounds[1:], strict=True)
        timed[k] = [statistics.median(t) / c.batch_size
                    for t, c in zip(per_cell, cells, strict=True)]  # fmt: skip
    return timed[k]


# This machine against the machines that wrote the results

REFERENCE_FIT = dict(n_train=512, n_val=128, epochs=2)  # the second epoch is timed


def machine_speed(measured: list[dict], profile: str, results_dir=None) -> dict[str, dict]:
    """This CPU against the results on disk, per model family: ``{family: {"factor", "unit_here",
    "unit_recorded", "reference", "results", "cpu", "when"}}``, the factor being an epoch's cost
    here of the family's reference cell (most results, the cheapest of equals) over the median of
    its results (wall time, which load inflates: the factor errs low)."""
    own = [m for m in measured if m["profile"] == profile] or measured
    out = {}
    for family, mine in sorted(_grouped((ex.model_family(m["model"]), m) for m in own).items()):
        groups = _grouped(((m["table"], m["cell"], m["profile"]), m["unit_s"]) for m in mine)
        ref, units = min(groups.items(), key=lambda kv: (-len(kv[1]), statistics.median(kv[1])))
        here, when = _stored_epoch_cost(*ref, results_dir)
        recorded = statistics.median(units)
        out[family] = {"factor": here / recorded, "unit_here": here, "unit_recorded": recorded,
                       "reference": f"{ref[0]} {ref[1]} ({ref[2]})", "results": len(units),
                       "cpu": cpu_model(), "when": when}  # fmt: skip
    return out


def _factor(machine: dict[str, dict], model: str) -> float:
    """The factor of ``model``'s family, else the median factor of the families measured."""
    mine = machine.get(ex.model_family(model))
    return mine["factor"] if mine else statistics.median(m["factor"] for m in machine.values())


def _stored_epoch_cost(table: str, cell_id: str, profile: str, results_dir=None):
    """(``_epoch_cost_here`` of the cell's job, when it was timed), from the cache directory
    while its key (CPU, machine, torch, mzlite's nn and train sources, the fit) holds."""
    (job,) = ex.jobs(table, profile, [0], cells=[cell_id], results_dir=results_dir)
    cfg = job.train_config().to_dict()
    root = Path(_nn.__file__).parent.parent  # the code that sets an epoch's price: nn and train
    sources = [f for sub in ("nn", "train") for f in sorted((root / sub).rglob("*"))]
    code = b"".join(f.read_bytes() for f in sources if f.suffix in (".py", ".cpp"))
    key = json.loads(json.dumps({
        "cpu": cpu_model(), "machine": platform.node(), "torch": torch.__version__,
        "sources": hashlib.sha1(code).hexdigest()[:12], "reference": [table, cell_id, profile],
        "fit": REFERENCE_FIT,
        "config": {k: cfg.get(k) for k in ("lr", "amp", "batch_size", "weight_decay")},
    }, default=str))  # fmt: skip
    tag = hashlib.sha1(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
    path = ex.default_cache_dir() / "plan" / f"epoch-cost-{tag}.json"
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        stored = json.loads(path.read_text())
        if stored["key"] == key:
            return stored["unit_s"], stored["when"]
    stored = {"key": key, "unit_s": _epoch_cost_here(job),
              "when": time.strftime("%Y-%m-%d %H:%M %Z")}  # fmt: skip
    with contextlib.suppress(OSError):  # a read-only cache: timed again next time
        atomic_write_json(path, stored)
    return stored["unit_s"], stored["when"]


def _epoch_cost_here(job) -> float:
    """CPU seconds per set unit of an epoch of ``job``'s cell here (one thread, no early stop,
    ``REFERENCE_FIT``); the first epoch pays the one-off costs (kernel builds, allocations)."""
    n_train, n_val, epochs = (REFERENCE_FIT[k] for k in ("n_train", "n_val", "epochs"))
    cell = job.cell
    train = make_task(cell.task, n_train, 12345, **cell.options)
    val = make_task(cell.task, n_val, 54321, **cell.options)
    cfg = dataclasses.replace(job.train_config(), epochs=epochs, patience=None, device="cpu",
                              warmup_epochs=1, num_threads=1)  # fmt: skip
    model = ex.build_cell_model(cell, train.d_in, train.d_out, 0)
    marks = []
    fit(model, train, val, cfg, progress=False,
        callbacks=[lambda epoch, hist, model: marks.append(time.process_time())])  # fmt: skip
    return (marks[-1] - marks[-2]) / _units((n_train, n_val))


# The sequential decision rule: which runs can change a verdict, in which order, at what price

# The order models are tried in when no results say otherwise (the converged tables' strongest
# baselines first)
DEFAULT_STRENGTH = ("st_large", "st", "deepsets", "perceiver", "hypernet", "la_st", "st_film",
                    "egnn", "mamba_pma", "st_meanpool", "slot")  # fmt: skip
FIRST_STEP_BASELINES = 2  # the strongest baselines that run beside MZ in a claim's first step


def baseline_strength(results_dir=None) -> list[dict]:
    """Every non-MZ trained model, strongest first (rows ``{"model", "score", "columns"}``), by its
    mean normalised rank (0 = best) among the non-MZ models of each main column (per table and
    non-smoke profile) with two results; then those without in ``DEFAULT_STRENGTH`` order."""
    ranks: dict[str, list[float]] = {}
    for label in ex.TABLES:
        spec = ex.get_table(label)
        for prof in [p for p in ex.PROFILES if ex.get_profile(p).name != "smoke"]:
            by_cell = ex.results_by_cell(spec, prof, results_dir)
            cols: dict[str, dict[str, float]] = {}
            for c in spec.cells:
                ms = _nn.model_spec(c.model)
                vals = [r["metrics"]["test"].get("r2") for r in by_cell.get(c.id, [])]
                vals = [v for v in vals if v is not None]
                if c.part != "main" or not ms.trainable or ms.family == "mz" or not vals:
                    continue
                col, mean = cols.setdefault(c.column, {}), statistics.fmean(vals)
                col[c.model] = max(col.get(c.model, mean), mean)
            for col in cols.values():
                order = sorted(col, key=col.get, reverse=True)
                for i, m in enumerate(order if len(order) > 1 else ()):
                    ranks.setdefault(m, []).append(i / (len(order) - 1))
    default = {m: i for i, m in enumerate(DEFAULT_STRENGTH)}
    names = [n for n, s in _nn.MODELS.items() if s.trainable and s.family != "mz"]
    rows = [{"model": n, "score": statistics.fmean(ranks[n]) if n in ranks else None,
             "columns": len(ranks.get(n, []))} for n in names]  # fmt: skip
    return sorted(rows, key=lambda r: (r["score"] is None, r["score"] or 0.0,
                                       default.get(r["model"], len(default))))  # fmt: skip


def _summed(rows) -> dict:
    """``plan`` rows together: their ``todo``, ``done``, ``cpu_h``, ``cpu_h_cap`` and
    ``unknown``, the rows with jobs to run that no estimate prices."""
    rows = list(rows)
    return {**{k: sum(r[k] for r in rows) for k in ("todo", "done")},
            **{k: sum(r[k] or 0.0 for r in rows) for k in ("cpu_h", "cpu_h_cap")},
            "unknown": sum(r["cpu_h"] is None and r["todo"] > 0 for r in rows)}  # fmt: skip


def _summed_once(steps) -> dict:
    """``_summed`` of the cells of ``steps``, a cell that several steps run counted once."""
    return _summed({s["where"][k]: v for s in steps for k, v in s["price"].items()}.values())


@dataclass
class Decisions:
    """The sequential decision plan of ``decide``: ``claims``, one dict per claim with its
    ``status`` ("decided", "open"), its scorecard ``row``, ``steps`` (each ``{"step", "when",
    "cells", "where" (the table each cell runs in), "price" (``plan``'s rows), **_summed}``) and
    ``next``, an open claim's first step with jobs to run (None for a decided one)."""

    profile: str
    claims: list[dict]
    strength: list[dict]
    first: int = FIRST_STEP_BASELINES
    without: list[str] = dataclasses.field(default_factory=list)  # tables with no cell claims

    def next_jobs(self) -> list[tuple[str, str]]:
        """(table, cell) of every cell the next step of an open claim runs, once each (a shared
        cell in the table it is from)."""
        steps = [c["next"] for c in self.claims if c["next"]]
        cells = [s["where"][cid] for s in steps for cid in s["cells"]
                 if cid not in s["price"] or s["price"][cid]["todo"]]  # fmt: skip
        return list(dict.fromkeys(cells))

    def totals(self) -> dict:
        """CPU hours of the next steps (every cell once) and of every step of the open claims
        (each claim survives every step: the most the rule can cost)."""
        open_ = [c for c in self.claims if c["next"]]
        nxt = _summed_once(c["next"] for c in open_)
        worst = _summed_once(s for c in open_ for s in c["steps"])
        return {"next_cpu_h": nxt["cpu_h"], "next_jobs": nxt["todo"],
                "worst_cpu_h": worst["cpu_h"], "worst_cap_h": worst["cpu_h_cap"],
                "unknown": worst["unknown"]}  # fmt: skip

    def to_text(self) -> str:
        top = ", ".join(f"{r['model']} (" + ("no results" if r["score"] is None
                        else f"{r['score']:.2f}") + ")" for r in self.strength[:4])  # fmt: skip
        out = [
            f"decide [{self.profile}]: the sequential rule. Each claim that MZAttn beats every "
            f"model of its column runs MZ, the yardstick and the {self.first} strongest baselines "
            f"first; one baseline significantly better (R^2 gap > {_sc.TIE}, Welch p < "
            f"{_stats.ALPHA}, {_stats.MIN_SEEDS} converged seeds each) refutes it and the rest "
            "of the column is not run; a claim that survives gets the rest of its column.",
            f"baseline strength (mean normalised rank in the columns run so far, 0 = best): {top}",
            "",
        ]
        open_ = self._open()
        for c in open_:
            row = c["row"]
            out.append(f"{c['table']} {c['claim']}  [now: {row['verdict']}"
                       + (f": {row['why']}" if row.get("why") else "") + "]")  # fmt: skip
            for s in c["steps"]:
                more = f"; {s['unknown']} cell(s) without an estimate" if s["unknown"] else ""
                state = "done" if not s["todo"] else f"{s['todo']} job(s) (+{s['done']} done)"
                names = [cid if s["where"][cid] == (c["table"], cid)
                         else f"{cid} (= {' '.join(s['where'][cid])})"
                         for cid in s["cells"]]  # fmt: skip
                out.append(f"  step {s['step']} ({s['when']}): {', '.join(names)}: {state}, "
                           f"{s['cpu_h']:.2f} CPU h expected ({s['cpu_h_cap']:.2f} at the cap"
                           f"{more})")  # fmt: skip
        if decided := [c for c in self.claims if c["status"] == "decided"]:
            out += ["", f"decided ({len(decided)}):"]
            for c in decided:
                out.append(f"  {c['table']} {c['claim']}: {c['row']['verdict']} "
                           f"({c['row'].get('why') or ''})")  # fmt: skip
        if self.without:
            out += ["", "no cell claims to order (rank claims are judged over every setting, or "
                    f"none are registered): {', '.join(self.without)}; plan prices them "
                    "whole"]  # fmt: skip
        t, nxt = self.totals(), self.next_jobs()
        unk = f"; {t['unknown']} cell(s) without an estimate" if t["unknown"] else ""
        out += [
            "",
            f"next steps of the {len(open_)} open claim(s): {t['next_jobs']} job(s), "
            f"{t['next_cpu_h']:.1f} CPU h expected",
            f"every step of every open claim (each survives): {t['worst_cpu_h']:.1f} CPU h "
            f"expected, {t['worst_cap_h']:.1f} at the epoch cap{unk}",
            "the next steps, one command per table:" if nxt else "nothing to run",
            *(f"  {c}" for c in _commands(nxt, self.profile, " --workers 1 --threads 1")),
        ]
        return "\n".join(out)

    __str__ = to_text

    def _open(self) -> list[dict]:
        """The open claims, the cheapest next step first (one that no estimate prices whole
        after those priced)."""
        open_ = [c for c in self.claims if c["next"]]
        return sorted(open_, key=lambda c: (bool(c["next"]["unknown"]), c["next"]["cpu_h"]))

    def next_steps(self) -> list[dict]:
        """One row per open claim, cheapest next step first: its step's words, price and
        ``command`` (one per table: a shared cell runs in the table it is from)."""
        out = []
        for c in self._open():
            step = c["next"]
            left = [step["where"][cid] for cid, r in step["price"].items() if r["todo"]]
            out.append({
                "claim": c["claim"], "table": c["table"], "text": c["row"]["text"],
                "step": step["step"], "steps": len(c["steps"]), "when": step["when"],
                "cells": list(step["cells"]), "cells_text": step_words(c["table"], step["cells"]),
                **{k: step[k] for k in ("todo", "cpu_h", "cpu_h_cap", "unknown")},
                "command": "; ".join(_commands(left, self.profile)),
            })  # fmt: skip
        return out


def _commands(pairs, profile: str, how: str = "") -> list[str]:
    """One ``run`` command per table of the (table, cell id) ``pairs``."""
    return [f"python -m mzlite run {table} --profile {profile}{how} --cells {','.join(ids)}"
            for table, ids in _grouped(pairs).items()]  # fmt: skip


def step_words(table: str, cells) -> str:
    """The cells of a step in words: "MZAttn-Full, set statistics (ridge), ST-Large and Standard
    at d = 8"; a bare setting as the row (tab:ablation's "4") is named with its model."""
    chosen = [ex.get_table(table).cell(c) for c in cells]
    models = list(dict.fromkeys(spaced(_row_words(c)) for c in chosen))
    columns = list(dict.fromkeys(spaced(c.column) for c in chosen))
    said = ", ".join(models[:-1]) + (" and " if len(models) > 1 else "") + models[-1]
    return f"{said} at {', '.join(columns)}"


def _row_words(cell) -> str:
    if any(ch.isalpha() for ch in cell.row):
        return cell.row
    kwargs = ", ".join(f"{k}={v}" for k, v in cell.model_kwargs.items())
    return _nn.model_spec(cell.model).display + (f" ({kwargs})" if kwargs else f" {cell.row}")


def priced(sc, profile: str = "cpu-annealed", results_dir=None, decisions: Decisions | None = None):
    """``sc`` (a ``Scorecard``) with each "not run" claim's reason replaced by its next step (a
    ``Decisions.next_steps`` row: what runs next, at what cost); rank claims keep theirs (it
    names the coverage page). ``decisions``: ``decide`` of those tables under ``profile``."""
    prof = ex.get_profile(profile).name
    tables = list(dict.fromkeys(r["table"] for r in sc.rows if r["verdict"] == Label.NOT_RUN))
    if decisions is not None and decisions.profile != prof:
        raise ValueError(f"decisions were made under {decisions.profile!r}, not {prof!r}")
    steps = {}
    if tables:
        d = decisions or decide(tables, prof, results_dir=results_dir, measure=False)
        steps = {(r["table"], r["claim"]): r for r in d.next_steps()}
    rows = []
    for r in sc.rows:
        step = steps.get((r["table"], r["claim"]))
        if r["verdict"] == Label.NOT_RUN and step is not None:
            price = (
                f"{step['cpu_h']:.1f} CPU h expected ({step['cpu_h_cap']:.1f} at the epoch cap)"
                if not step["unknown"]
                else f"not priced yet ({step['unknown']} cell(s) of models that never ran on "
                "the task)"
            )
            reason = (
                f"no result yet: next under the sequential rule (`plan --decide`), {step['todo']} "
                f"runs of {step['cells_text']}: {price} under {prof}"
            )
            r = {**r, "reason": reason, "next_step": step}
        rows.append(r)
    return _sc.Scorecard(rows, sc.profiles)


def _steps(claim, spec, strength: list[str], first: int) -> list[tuple[str, list[str]]]:
    """(when, cells) of each step of ``claim``: for a compare claim on R^2, MZ, the column's
    yardstick and the ``first`` strongest of the compared cells, then the rest; for a monotone
    claim, the ``first`` strongest of its cells, then the rest; else one step."""
    rank = {m: i for i, m in enumerate(strength)}
    if claim.read_on:  # it reads other cells (Claim.read_on): those are the ones to run
        claim = dataclasses.replace(claim, cells=tuple(claim.on(claim.read_on)(c, None)
                                    for c in claim.cells), read_on="", twins=())  # fmt: skip

    def strongest_first(ids):
        return sorted(ids, key=lambda b: rank.get(spec.cell(b).model, len(rank)))

    if claim.monotone:
        ordered = strongest_first(claim.cells)
        step1 = ordered[:first] or ordered
        rest = ordered[len(step1) :]
        return [("first", step1)] + ([("only if step 1 does not fail it", rest)] if rest else [])
    if claim.compare is None or claim.metric != "r2":
        return [("all of the claim's cells", list(claim.cells))]
    a, bs = claim.compare
    yard = spec.yardsticks(a)[:1]  # the one the engine reads
    ordered = strongest_first(bs)
    step1 = [a, *yard, *ordered[:first]]
    rest = list(dict.fromkeys(c for c in (*ordered[first:], *claim.cells) if c not in step1))
    return [("first", step1)] + ([("only if no model of step 1 refutes it", rest)] if rest else [])


def decide(tables, profile: str = "cpu-annealed", seeds=None, results_dir=None,
           measure: bool = True, first: int = FIRST_STEP_BASELINES) -> Decisions:  # fmt: skip
    """The ``Decisions`` on the scorecard's claims about ``tables``: each claim's verdict on
    ``profile`` alone and its steps, priced by ``plan``; decided when a model refutes it, its cells
    have their seeds, or a more faithful profile decided it (``engine.judge``)."""
    check_int_field("first", first, 0)  # the baselines in the first step
    profile = ex.get_profile(profile).name
    tables = [tables] if isinstance(tables, (str, ex.TableSpec)) else list(tables)
    labels = [ex.get_table(t).label for t in tables]
    strength = baseline_strength(results_dir)
    order = [r["model"] for r in strength]
    claims = [c for label in labels for c in _sc.claims(label) if isinstance(c, _sc.Claim)]
    planned = [(c, _steps(c, ex.get_table(c.table), order, first)) for c in claims]
    # a cell that is the same experiment as an earlier cell runs there: of its own table
    # (experiments.aliases: Task B's claim on near-copy at 1e-3 under cpu-annealed) or another's
    lent = {label: {**{c: (label, a) for c, a in ex.aliases(label, profile).items()},
                    **ex.shared(label, profile)} for label in labels}  # fmt: skip

    def where(table, cid):
        return lent[table].get(cid, (table, cid))

    wanted = _grouped(where(c.table, cid) for c, steps in planned for _, ids in steps
                      for cid in ids)  # fmt: skip
    price = {}
    for label, cells in wanted.items():
        p = plan(label, profile, seeds, cells=sorted(set(cells)), results_dir=results_dir,
                 measure=measure)  # fmt: skip
        price.update({(r["table"], r["cell"]): r for r in p.rows})
    out = []
    # a claim that a more faithful profile decided already needs nothing run under this one
    strongest = engine.judge_all(claims, results_dir=results_dir)
    rank = _sc.PROFILE_ORDER.index(profile) if profile in _sc.PROFILE_ORDER else math.inf
    for (c, steps), best in zip(planned, strongest, strict=True):
        row = _sc.evaluate(c, (profile,), results_dir)
        rows = []
        for i, (when, ids) in enumerate(steps, start=1):
            at = {cid: where(c.table, cid) for cid in ids}
            got = {cid: price[at[cid]] for cid in ids if at[cid] in price}
            rows.append({"step": i, "when": when, "cells": ids, "where": at, "price": got,
                         **_summed(got.values())})  # fmt: skip
        done = row.get("refuted_by") is not None or (best.decisive and best.profile_rank < rank)
        nxt = None if done else next((s for s in rows if s["todo"]), None)
        out.append({"claim": c.id, "table": c.table, "status": "open" if nxt else "decided",
                    "row": row, "steps": rows, "next": nxt})  # fmt: skip
    without = [label for label in labels if not any(c.table == label for c, _ in planned)]
    return Decisions(profile, out, strength, first, without)


__all__ = [
    "DEFAULT_STRENGTH", "Decisions", "Plan", "baseline_strength", "decide", "machine_speed",
    "plan", "priced", "step_words",
]  # fmt: skip
