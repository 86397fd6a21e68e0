"""Chapter 5's study of the minimum-enclosing-ball table (tab:meb), read from the result files:
ours beside the paper's at d = 8 and across d; the normalisation ablation at d = 8 (raw or
per-set normalised data, raw or standardised targets) with Welch's test over seeds; how far
each model fitted its training sets; the scorecard's d = 8 claims under each data condition.
Functions return data (dicts, ``ReportRow``s, series for ``mzlite.viz``); the chapter renders.
Main numbers come from the ``CURRENT`` protocols only (cpu-converged and the 30-epoch ``cpu``
profile are ablations, shown in toggles)."""

from __future__ import annotations

from mzlite.analysis.verdicts import Label
from mzlite.tasks import make_splits

from . import experiments as ex
from .experiments.protocols import CURRENT
from .experiments.report import best_rows
from .experiments.scorecard import claims, evaluate, normalised_twin
from .experiments.stats import fit_check, welch
from .paper import paper_ref, paper_value
from .training_study import report_rows, sweep_series

LABEL = "tab:meb"
AXES = {  # (data, targets) -> the ablation variant of tab:meb's d = 8 cells
    ("raw", "raw"): "raw",
    ("raw", "standardised"): "ynorm",
    ("per-set normalised", "raw"): "scale",
    ("per-set normalised", "standardised"): "scale-ynorm",
}
CONDITIONS = ("raw", "per-set normalised")
# The d = 8 models the ablation and the fit table compare, with the names the chapter uses
MODELS = {"st": "Standard (PMA)", "st_meanpool": "mean-pool head", "mz_full": "MZAttn-Full",
          ex.SET_STATS: "set statistics (ridge)"}  # fmt: skip
COLOURS = {"st": "#1f77b4", "st_meanpool": "#2ca02c", "mz_full": "#d62728",
           ex.SET_STATS: "#7f7f7f"}  # fmt: skip
SWITCHES = (  # (what changes, from (data, targets), to (data, targets))
    ("targets standardised, raw data", ("raw", "raw"), ("raw", "standardised")),
    ("targets standardised, per-set normalised data",
     ("per-set normalised", "raw"), ("per-set normalised", "standardised")),
    ("each set normalised, standardised targets",
     ("raw", "standardised"), ("per-set normalised", "standardised")),
)  # fmt: skip


def _check(name: str, value, valid) -> None:
    if value not in valid:
        raise ValueError(f"{name} must be one of {list(valid)}, got {value!r}")


def ablation_cell(model: str, data: str, targets: str) -> str:
    """The id of ``model``'s d = 8 cell under (``data``, ``targets``); the ridge ignores the
    targets' scaling: one cell per data condition (the main cell on raw data)."""
    _check("model", model, MODELS)
    _check("(data, targets)", (data, targets), AXES)
    if model == ex.SET_STATS:
        cid = "d8-set_stats" if data == "raw" else "abl-d8-scale-set_stats"
    else:
        cid = f"abl-d8-{AXES[data, targets]}-{model}"
    return ex.CellKey(LABEL, cid).cell


def ablation_grid(profiles=CURRENT, results_dir=None) -> list[dict]:
    """One dict per (model, data, targets) of the d = 8 ablation, its ``row`` from the first of
    ``profiles`` with results (``row.profile`` None where none has)."""
    best = best_rows(LABEL, profiles, results_dir=results_dir)
    return [
        {"model": m, "name": name, "data": d, "targets": t, "cell": ablation_cell(m, d, t),
         "row": best[ablation_cell(m, d, t)]}
        for m, name in MODELS.items() for d, t in AXES
    ]  # fmt: skip


def axes_with_results(grid: list[dict]) -> list[tuple[str, str]]:
    """The (data, targets) of ``AXES`` where a trained model of ``grid`` has results."""
    ran = {(g["data"], g["targets"]) for g in grid if g["row"].ran and g["model"] != ex.SET_STATS}
    return [a for a in AXES if a in ran]


def switches(profiles=CURRENT, results_dir=None) -> list[dict]:
    """Per trained model and switch: the rows ``before`` and ``after``, ``comparable`` (both ran
    under one protocol, ``profile``), and there ``diff`` (after − before mean R²) and Welch's
    ``p`` (None with fewer than two seeds a side)."""
    grid = {(g["model"], g["data"], g["targets"]): g["row"] for g in
            ablation_grid(profiles, results_dir)}  # fmt: skip
    out = []
    for m, name in MODELS.items():
        if m == ex.SET_STATS:
            continue
        for what, a, b in SWITCHES:
            before, after = grid[(m, *a)], grid[(m, *b)]
            comparable = before.ran and after.ran and before.profile == after.profile
            w = welch(after.seed_values, before.seed_values) if comparable else {}
            out.append({"model": m, "name": name, "switch": what, "before": before, "after": after,
                        "profile": before.profile if comparable else None, "comparable": comparable,
                        "diff": w.get("diff"), "p": w.get("p")})  # fmt: skip
    return out


def fit_rows(profiles=CURRENT, results_dir=None) -> list[dict]:
    """Per data condition (under ``condition_profile``), each model's test R² ``row`` and
    ``fit_ratio`` (None for the ridge or without histories); on normalised data the PMA model's
    retries at lower rates follow (``lr``, else None)."""
    out = []
    for cond in CONDITIONS:
        if (prof := condition_profile(cond, profiles, results_dir)) is None:
            continue
        rows = report_rows(LABEL, prof, results_dir)
        for m, name in MODELS.items():
            cell = condition_cell(f"d8-{m}", cond, prof)
            if m == ex.SET_STATS and not (rows.get(cell) and rows[cell].ran):
                continue  # the ridge was not fitted on this profile's sets: no row to say so
            fit = None if m == ex.SET_STATS else fit_ratio(LABEL, cell, prof, results_dir)
            out.append({"condition": cond, "profile": prof, "model": m, "name": name,
                        "lr": None, "row": rows.get(cell), "fit": fit})  # fmt: skip
        if cond == "per-set normalised":  # the PMA model again at lower learning rates
            out += [{"condition": cond, "profile": prof, "model": "st", "name": MODELS["st"],
                     "lr": r["lr"], "row": r["row"], "fit": r["fit"]}
                    for r in rate_retry(prof, results_dir)[1:]]  # fmt: skip
    return out


def money_rows(profiles=CURRENT, results_dir=None) -> list[dict]:
    """The d = 8 main cells for fig:money: our ``row`` (the first of ``profiles`` with results)
    beside the ``paper``'s R² (None where it has none)."""
    best = best_rows(LABEL, profiles, results_dir=results_dir)
    return [{"cell": c.id, "model": c.row, "row": best[c.id],
             "paper": paper_value(LABEL, c.row, "d=8 R^2") if c.paper else None}
            for c in ex.get_table(LABEL).cells
            if c.part == "main" and c.column == "d=8"]  # fmt: skip


def bar_series(profiles=CURRENT, results_dir=None) -> tuple[list[str], dict]:
    """``(models, series)`` for ``mzlite.viz.plot_grouped_bars`` at d = 8: the paper's R², ours
    on raw data (``money_rows``) and, under that protocol, on per-set normalised data (the
    twins); error bars the std over seeds."""
    money = money_rows(profiles, results_dir)
    series = {f"paper ({paper_ref(LABEL)})": [r["paper"] for r in money]}
    by_profile = {ex.get_profile(p).name: report_rows(LABEL, p, results_dir) for p in profiles}
    for data, normalised in (("raw data", False), ("per-set normalised", True)):
        means, errors = [], []
        for r in money:
            row = r["row"]
            if normalised and row.profile is not None:
                row = by_profile[row.profile].get(normalised_twin(r["cell"], row.profile))
            ran = row is not None and row.ran
            means.append(row.ours_mean if ran else None)
            errors.append(row.ours_std if ran else None)
        if any(v is not None for v in means):
            series[f"ours, {data}"] = (means, {"error": errors})
    return [r["model"] for r in money], series


def dimension_series(profiles=CURRENT, results_dir=None) -> dict:
    """R² against d of the models of ``COLOURS`` (``training_study.sweep_series``)."""
    return sweep_series(profiles, results_dir, LABEL, COLOURS)


def learning_curves(condition: str, profiles=CURRENT, results_dir=None) -> dict | None:
    """The losses per epoch of the first seed of the d = 8 Standard, mean-pool and MZAttn-Full
    cells under data ``condition`` (``condition_profile``), and ``mean_mse``, the mean
    predictor's loss in training units. None where nothing ran."""
    _check("condition", condition, CONDITIONS)
    if (prof := condition_profile(condition, profiles, results_dir)) is None:
        return None
    by_cell = ex.results_by_cell(LABEL, prof, results_dir)
    curves = {}
    for m in ("st", "st_meanpool", "mz_full"):
        res = by_cell.get(condition_cell(f"d8-{m}", condition, prof))
        if res and res[0].get("history"):
            h, name = res[0]["history"], MODELS[m].replace(" (PMA)", "")
            curves[f"{name} train"] = (h["epoch"], h["train_loss"])
            curves[f"{name} val"] = (h["epoch"], h["val_loss"])
    if not curves:
        return None
    st_cell = condition_cell("d8-st", condition, prof)
    first = by_cell[st_cell][0]
    raw = not first["train_config"]["normalize_targets"]
    mean_mse = _raw_target_var(first, LABEL, st_cell, prof) if raw else 1.0
    return {"profile": prof, "curves": curves, "mean_mse": mean_mse}


# What a verdict shows: a claim that holds only because the models it names fail is no
# evidence that MZAttn wins (issue 34), whatever its label.
SHOWS_MZ = "evidence for MZAttn-Full"
SHOWS_FAILURE = "the models it names fail; no evidence for MZAttn-Full"


def what_it_shows(verdict: str, mz_beats: bool) -> str:
    """What a holding verdict shows: ``SHOWS_MZ`` for a claim that an MZ model beats the others
    (``mz_beats``), else ``SHOWS_FAILURE``; "" for a verdict that does not hold."""
    if verdict not in (Label.HOLDS, Label.PARTLY):
        return ""
    return SHOWS_MZ if mz_beats else SHOWS_FAILURE


# chapter 9's verdict, then the claim's own test on each condition (raw: its cells, no pattern)
READS = (("chapter 9", None), ("raw", lambda c, _p: c), ("per-set normalised", normalised_twin))


def condition_verdicts(profiles=CURRENT, results_dir=None) -> list[dict]:
    """The scorecard's d = 8 MEB claims, each as chapter 9 reads it (its condition named from the
    cells it read: the paper's pattern decides on per-set normalised sets), then its own test
    under each data condition (raw: its own cells, no pattern; normalised: the twin cells), each
    from the most trusted of ``profiles`` with its cells, and what it ``shows``."""
    out = []
    for cl in (c for c in claims(LABEL) if c.id.startswith("meb-d8-")):
        for cond, twin in READS:
            r = evaluate(cl, profiles, results_dir, twin=twin)
            if twin is None and r["value"].cells:  # the data chapter 9 read; a pattern says so
                cond += " (the paper's pattern)" * (r["value"].label == Label.REPRODUCED)
                cond += f": {CONDITIONS[r['value'].cells[0].read_as.startswith('abl-d8-scale')]}"
            shows = what_it_shows(r["verdict"], bool(r.get("mz_beats")))
            out.append({"condition": cond, "claim": cl.id, "headline": r["text"],
                        "verdict": r["verdict"], "profile": r["profile"],
                        "ours_text": r["ours_text"], "shows": shows})  # fmt: skip
    return out


def _raw_target_var(result: dict, table, cell_id: str, profile: str) -> float:
    """The variance of a result's raw training targets (the mean predictor's MSE): its history's
    record, else recomputed from the runner's cached dataset (a minute of MEB solves: the cpu and
    cpu-converged results predate the record)."""
    if (recorded := (result.get("history") or {}).get("train_target_var")) is not None:
        return recorded
    job = ex.job(table, cell_id, profile)
    sp = make_splits(job.cell.task, *job.sizes, job.profile.data_seed, cache=True,
                     cache_dir=ex.default_cache_dir() / "datasets", **job.cell.options)  # fmt: skip
    return float(sp.train.y.double().var(unbiased=False))


def fit_ratio(table, cell_id: str, profile: str, results_dir=None) -> float | None:
    """A cell's lowest training loss over its training targets' variance (1 = the mean
    predictor; ``stats.fit_check``), averaged over its seeds; None without a history."""
    ratios = []
    for r in ex.results_by_cell(table, profile, results_dir).get(cell_id, []):
        if not r.get("history"):
            continue
        hist = {"config": r["train_config"], **r["history"]}
        if not r["train_config"].get("normalize_targets"):
            hist["train_target_var"] = _raw_target_var(r, table, cell_id, profile)
        if (ratio := fit_check(hist)["fit_ratio"]) is not None:
            ratios.append(ratio)
    return sum(ratios) / len(ratios) if ratios else None


def condition_cell(cell_id: str, condition: str, profile: str) -> str:
    """Main cell ``cell_id`` under data ``condition`` ("raw" or "per-set normalised")."""
    _check("condition", condition, CONDITIONS)
    return cell_id if condition == "raw" else normalised_twin(cell_id, profile)


def condition_profile(condition: str, profiles=ex.PROFILE_ORDER, results_dir=None) -> str | None:
    """The most trusted profile with results of both the Standard and the MZAttn-Full d = 8
    cells under ``condition``: a comparison reads numbers of one protocol only."""
    for p in [ex.get_profile(p).name for p in profiles]:
        rows = report_rows(LABEL, p, results_dir)
        cells = [condition_cell(f"d8-{m}", condition, p) for m in ("st", "mz_full")]
        if all(rows.get(c) is not None and rows[c].ran for c in cells):
            return p
    return None


def rate_retry(profile: str, results_dir=None) -> list[dict]:
    """The Standard (PMA) model on per-set normalised d = 8 sets under ``profile`` at every rate
    it ran, highest first: its family's (``normalised_twin("d8-st")``) and the retries
    ``abl-d8-scale-ynorm-lr*-st`` (down to the paper's 1e-4), with ``fit`` (``fit_ratio``) and
    how many of its ``runs`` ``fitted`` (their recorded convergence)."""
    rows = report_rows(LABEL, profile, results_dir)
    by_cell = ex.results_by_cell(LABEL, profile, results_dir)
    # the retries train on standardised targets: a retry only where the family's twin does too
    twin = normalised_twin("d8-st", profile)
    retry = [c.id for c in ex.get_table(LABEL).cells if twin.startswith("abl-d8-scale-ynorm")
             and c.id.startswith("abl-d8-scale-ynorm-lr") and c.model == "st"]  # fmt: skip
    out = []
    for cid in (twin, *retry):
        if (row := rows.get(cid)) is None or not row.ran:
            continue
        runs = by_cell.get(cid, [])
        lrs = {r["train_config"].get("lr") for r in runs}
        fitted = sum((r.get("convergence") or {}).get("fitted") is True for r in runs)
        out.append({"lr": lrs.pop() if len(lrs) == 1 else None, "cell": cid, "row": row,
                    "runs": len(runs), "fitted": fitted,
                    "fit": fit_ratio(LABEL, cid, profile, results_dir)})  # fmt: skip
    out.sort(key=lambda r: -(r["lr"] or 0.0))
    return out
