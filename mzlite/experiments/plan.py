"""How many CPU hours will a table take? Estimates from measured per-epoch costs.

    from mzlite.experiments.plan import plan
    p = plan("tab:tdof-verify", profile="cpu-converged")
    print(p.to_text())          # one row per cell, a total per table; p.rows are plain dicts

For every cell with (cell, seed) jobs still to run (``experiments.jobs``, after the ``models``
and ``cells`` filters), the estimate is ``jobs x epochs x seconds per epoch``:

- Seconds per epoch, on one thread, come from results already on disk (``wall_time_s /
  epochs_run``, times the result's thread count, so the unit is CPU seconds; results of the
  planned profile itself when it has some, since they ran its precision), rescaled to this
  profile's data sizes by ``n_train + n_val / 3`` (an epoch is a training pass plus a validation
  forward pass, about a third of a training step per set). In order: the same cell of the same
  table under any non-smoke profile; the same model (and options) on the same task in another
  cell or table; else, with ``measure``, five training steps of the model timed now on real
  sets of the task, interleaved with those of a model that has results on that task (the Set
  Transformer where it has), whose measured cost is scaled by the ratio ("timed now"). The
  source is printed beside each row.
- Epochs: the median ``epochs_run`` of this profile's finished results of the same cell, else
  of the same model in the table, else of the table (the row says which: cell, model, table);
  without any, a prior of 4 x patience (a run stops ``patience`` epochs after its best epoch,
  which under this protocol tends to come after 1-3 patience windows), capped at the epoch cap
  ("prior"). The cap gives the upper bound.

Timings on a shared machine drift by tens of percent; the plan orders runs by cost, it does not
promise a finish time. Workers divide the wall time, not the CPU hours.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from mzlite import experiments as ex
from mzlite import nn as _nn

EVAL_FRACTION = 1 / 3  # a validation set costs about a third of a training set (forward only)


def _units(sizes) -> float:
    return sizes[0] + EVAL_FRACTION * sizes[1]


def _cpu_s_per_epoch(res: dict) -> float | None:
    n = res.get("epochs_run") or 0
    if n < 1 or not res.get("wall_time_s"):
        return None
    threads = (res.get("provenance") or {}).get("num_threads") or 1
    return res["wall_time_s"] * threads / n / _units(res["sizes"])


def _measured(results_dir) -> list[dict]:
    """Every trained, non-smoke result on disk: its cost per epoch per set unit."""
    out = []
    for label in ex.TABLES:
        for prof in ex.PROFILES:
            if prof == "smoke":  # tiny data: per-step overhead dominates, nothing to scale
                continue
            for r in ex.load_results(label, prof, results_dir):
                c = _cpu_s_per_epoch(r) if _nn.model_spec(r["model"]).trainable else None
                if c is not None:
                    out.append({**{k: r.get(k) for k in ("table", "cell", "task", "model")},
                                "profile": prof, "unit_s": c,
                                "key": _model_key(r["model"], r.get("model_kwargs") or {}),
                                "options": r.get("task_options") or {}})  # fmt: skip
    return out


def _model_key(model: str, kwargs: dict) -> str:
    return model + "".join(f",{k}={v}" for k, v in sorted(kwargs.items()))


def _time_steps(cells: list[ex.Cell], steps: int = 5) -> list[float]:
    """CPU seconds per training set of each of ``cells``, timed now: ``steps`` training steps
    of each cell's model on ``batch_size`` real sets of its task, one thread, the models taking
    turns step by step (so a load change on a shared machine hits them alike); medians."""
    from mzlite.tasks import make_task

    runs = []
    for cell in cells:
        data = make_task(cell.task, cell.batch_size, 12345, **cell.options)
        model = ex.build_cell_model(cell, data.d_in, data.d_out, 0)
        y = (data.y if data.y.ndim == 2 else data.y[:, None]).float()
        runs.append((model, torch.optim.AdamW(model.parameters(), lr=1e-4), data, y, []))
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for i in range(steps + 1):  # the first step warms up
            for model, opt, data, y, times in runs:
                t0 = time.perf_counter()
                model.train()
                loss = torch.nn.functional.mse_loss(model(data.x, data.mask), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                if i:
                    times.append(time.perf_counter() - t0)
    finally:
        torch.set_num_threads(old)
    # per training set; validation sets are priced by _units
    return [statistics.median(r[4]) / c.batch_size for r, c in zip(runs, cells, strict=True)]


@dataclass
class Plan:
    """Rows (plain dicts) with ``to_text()`` and ``totals()``. Row keys: ``table``, ``cell``,
    ``model``, ``sizes``, ``todo`` and ``done`` jobs, ``s_per_epoch`` (CPU s, this cell's
    sizes), ``cost_source``, ``epochs`` (expected), ``epochs_source``, ``epochs_tag`` ("cell",
    "model", "table", "prior"), ``epoch_cap``,
    ``cpu_h`` (expected) and ``cpu_h_cap`` (every job to the cap)."""

    profile: str
    rows: list[dict]
    workers: int = 1

    def totals(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for r in self.rows:
            t = out.setdefault(r["table"], {"todo": 0, "done": 0, "cpu_h": 0.0, "cpu_h_cap": 0.0,
                                            "unknown": 0})  # fmt: skip
            t["todo"] += r["todo"]
            t["done"] += r["done"]
            if r["cpu_h"] is None:
                t["unknown"] += r["todo"] > 0
            else:
                t["cpu_h"] += r["cpu_h"]
                t["cpu_h_cap"] += r["cpu_h_cap"]
        return out

    def to_text(self) -> str:
        prof = ex.get_profile(self.profile)
        out = [f"plan [{prof.name}]: {prof.description}", ""]
        head = ("cell", "jobs", "s/epoch", "epochs", "CPU h", "CPU h at cap", "cost from")
        lines = []
        for r in self.rows:
            f = lambda v: "?" if v is None else f"{v:.2f}"  # noqa: E731
            spe = "?" if r["s_per_epoch"] is None else f"{r['s_per_epoch']:.1f}"
            lines.append((f"{r['table']} {r['cell']}", f"{r['todo']} (+{r['done']} done)", spe,
                          f"{r['epochs']:.0f} ({r['epochs_tag']})", f(r["cpu_h"]),
                          f(r["cpu_h_cap"]), r["cost_source"]))  # fmt: skip
        w = [max(len(h), *(len(x[i]) for x in lines)) if lines else len(h)
             for i, h in enumerate(head)]  # fmt: skip
        out.append("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
        out += ["  ".join(x[i].ljust(w[i]) for i in range(len(head))) for x in lines]
        out.append("")
        total_h = total_cap = 0.0
        for label, t in self.totals().items():
            unk = f", {t['unknown']} cell(s) without an estimate" if t["unknown"] else ""
            out.append(f"{label}: {t['todo']} jobs to run ({t['done']} done): "
                       f"{t['cpu_h']:.1f} CPU h expected, {t['cpu_h_cap']:.1f} at the epoch cap"
                       f"{unk}")  # fmt: skip
            total_h += t["cpu_h"]
            total_cap += t["cpu_h_cap"]
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


def plan(
    tables,
    profile: str = "cpu-converged",
    seeds=None,
    models=None,
    cells=None,
    results_dir=None,
    workers: int = 1,
    measure: bool = True,
) -> Plan:
    """The estimated cost of the jobs still to run of ``tables`` (a label or several) under
    ``profile`` (see the module doc). ``seeds``/``models``/``cells`` filter as in
    ``experiments.run``; ``measure``: time a model with no result on disk (a few seconds each)
    instead of leaving its row without an estimate."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    prof = ex.get_profile(profile)
    tables = [tables] if isinstance(tables, (str, ex.TableSpec)) else list(tables)
    measured = _measured(results_dir)
    timed: dict[tuple, float] = {}
    rows = []
    for table in tables:
        spec = ex.get_table(table)
        js = ex.jobs(spec, prof.name, seeds, models, cells, results_dir)
        mine = [r for r in ex.load_results(spec, prof.name, results_dir)
                if _nn.model_spec(r["model"]).trainable]  # fmt: skip
        by_cell: dict[str, list] = {}
        for j in js:
            by_cell.setdefault(j.cell.id, []).append(j)
        for cid, cjobs in by_cell.items():
            cell, job = cjobs[0].cell, cjobs[0]
            done = sum(j.result_path.exists() for j in cjobs)
            todo = len(cjobs) - done
            trainable = _nn.model_spec(cell.model).trainable
            cap = job.train_config().epochs if trainable else 0
            row = {
                "table": spec.label,
                "cell": cid,
                "model": cell.model,
                "sizes": list(job.sizes),
                "todo": todo,
                "done": done,
                "epoch_cap": cap,
            }
            if not trainable:
                rows.append({**row, "s_per_epoch": 0.0, "cost_source": "closed form",
                             "epochs": 0, "epochs_source": "closed form", "epochs_tag": "-",
                             "cpu_h": 0.0, "cpu_h_cap": 0.0})  # fmt: skip
                continue
            unit, source = _unit_cost(spec.label, cell, measured, timed, measure, prof.name)
            cfg = job.train_config()
            tag, scope, ran = _epochs_run(mine, cid, cell.model, spec.label)
            if ran:
                epochs = float(statistics.median(ran))
                eps_src = f"median of {len(ran)} {prof.name} result(s) of {scope}"
            else:
                prior = 4 * cfg.patience if cfg.patience else cap
                epochs = float(min(prior, cap))
                eps_src = (f"{spec.label}: prior min(4 x patience, cap) = {epochs:.0f} (no "
                           f"{prof.name} results yet)")  # fmt: skip
            spe = None if unit is None else unit * _units(job.sizes)
            rows.append({
                **row,
                "s_per_epoch": spe,
                "cost_source": source,
                "epochs": epochs,
                "epochs_source": eps_src,
                "epochs_tag": tag,
                "cpu_h": None if spe is None else todo * epochs * spe / 3600,
                "cpu_h_cap": None if spe is None else todo * cap * spe / 3600,
            })  # fmt: skip
    return Plan(prof.name, rows, workers)


def _epochs_run(mine: list[dict], cell_id: str, model: str, label: str):
    """(tag, scope, epochs of the finished runs) of the narrowest scope that has some: this
    cell, this model in the table, the table; ("prior", "", []) for none. Models stop at
    different epochs, so the narrowest scope is the best guess."""
    scopes = (
        ("cell", "this cell", [r for r in mine if r["cell"] == cell_id]),
        ("model", f"{model} in {label}", [r for r in mine if r["model"] == model]),
        ("table", label, mine),
    )
    for tag, scope, res in scopes:
        ran = [r["epochs_run"] for r in res if r.get("epochs_run")]
        if ran:
            return tag, scope, ran
    return "prior", "", []


def _unit_cost(label, cell, measured, timed, measure, profile=None):
    """(CPU seconds per set unit, where it comes from) for ``cell`` of table ``label``: the
    median over the results of this cell and of the same model on the same task (task options
    such as L or d change the cost little; pooling them evens out the drift of a shared CPU)."""
    key = _model_key(cell.model, cell.model_kwargs)
    like = [m for m in measured if (m["table"] == label and m["cell"] == cell.id)
            or (m["key"] == key and m["task"] == cell.task)]  # fmt: skip
    # results of the planned profile itself first: they ran its precision (bf16 or float32)
    # and its code; others only until it has some
    own_profile = [m for m in like if m["profile"] == profile]
    like = own_profile or like
    if like:
        own = sum(m["table"] == label and m["cell"] == cell.id for m in like)
        return statistics.median(m["unit_s"] for m in like), (
            f"median of {len(like)} {'/'.join(sorted({m['profile'] for m in like}))} result(s) "
            f"of {cell.model} on {cell.task}"
            + (f" ({own} of this cell)" if own else ""))  # fmt: skip
    if not measure:
        return None, "no result of this model on this task (measure=False)"
    # Time it beside a model that has results on this task, and scale that model's measured
    # cost: step timings miss the per-epoch overheads and see today's load, a ratio sees neither.
    refs = [m for m in measured if m["task"] == cell.task]
    if not refs:
        (unit,) = _timed([cell], timed)
        return unit, "timed now (5 training steps, 1 thread; no result on this task to scale)"
    ref_key = "st" if any(m["key"] == "st" for m in refs) else refs[0]["key"]
    ref = [m for m in refs if m["key"] == ref_key]
    ref_cell = ex.get_table(ref[0]["table"]).cell(ref[0]["cell"])
    mine, theirs = _timed([cell, ref_cell], timed)
    ratio = mine / theirs
    unit = statistics.median(m["unit_s"] for m in ref) * ratio
    return unit, f"timed now: {ratio:.1f} x {ref_key} on {cell.task} (5 steps each, interleaved)"


def _timed(cells, timed) -> list[float]:
    def key(c):
        opts = ex.check_task_options(c.task, c.options)
        return (_model_key(c.model, c.model_kwargs), c.task, tuple(sorted(opts.items())),
                c.batch_size)  # fmt: skip

    k = tuple(key(c) for c in cells)
    if k not in timed:
        timed[k] = _time_steps(cells)
    return timed[k]


__all__ = ["Plan", "plan"]
