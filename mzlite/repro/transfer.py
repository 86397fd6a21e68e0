"""Chapter 10, the real-data transfer study (tab:transfer-matrix, Tier 1): the ranks of
``transfer_ranks`` in words, tables and plots, and the paper's prediction put to a test: no
advantage on low-rank 2-D point clouds ("MZAttn-Full ranks 3rd-5th"), an expected rank of 4 under
the null of ``null_test`` (each cell's rank uniform on 1..7, cells independent)."""

from __future__ import annotations

import statistics

from mzlite import nn as _nn
from mzlite.analysis.ranks import null_test  # noqa: F401 (chapter 10 reads it here)

from . import experiments as ex
from .experiments import present
from .experiments.reading import num
from .experiments.transfer_ranks import (  # the ranks as values; chapter 10 reads them here
    LABEL,
    MZ_MODELS,
    RANKED,
    SETTINGS,
    cell_id,
    converged_profile,
    longer_cap,  # noqa: F401
    r2_of,
    rank_test,
    ranks,
    seed_r2,
    setting_of,
)
from .paper import paper_ref
from .render import comparison_table

WORDS = present.TRANSFER_WORDS  # parsed once, where the rank reasons are read
READS = WORDS["reads"]  # what the ranks of each converged profile are, on the chapter's page
OUTCOME_WORDS = WORDS["outcomes"]  # what each outcome of ``rate_ablation`` means


def per_seed(profile: str, results_dir=None) -> list[dict]:
    """One row per result of the ranked models, by (setting, model, seed): what a mean over
    seeds hides (a seed that stopped early at a poor optimum)."""
    by_cell = ex.results_by_cell(LABEL, profile, results_dir)
    return [
        {"setting": setting, "model": m, "name": r.get("row", m), "seed": r["seed"], "r2": r2_of(r),
         "best_epoch": r["metrics"].get("best_epoch"), "epochs_run": r.get("epochs_run"),
         "stop_reason": r.get("stop_reason")}
        for setting in SETTINGS for m in RANKED for r in by_cell.get(cell_id(setting, m), [])
    ]  # fmt: skip


def ablations(profile: str, results_dir=None) -> list[dict]:
    """The ablation cells with results: ``change`` (the training overrides), test R^2 by seed
    of the ``main`` cell and of the ``ablated`` one (same data and initialisation per seed), and
    the model's rank by mean R^2 with each (``rank``, ``rank_ablated``), the others as they are."""
    by_cell = ex.results_by_cell(LABEL, profile, results_dir)
    same = ex.aliases(LABEL, profile)  # ablations that this profile's protocol already is
    rows = []
    for cell in ex.get_table(LABEL).cells:
        if cell.part != "ablation" or cell.id in same or not by_cell.get(cell.id):
            continue
        setting, model = setting_of(cell), cell.model
        r2 = seed_r2(by_cell, setting)
        others = [statistics.fmean(v) for m, v in r2.items() if m != model]
        ablated = {r["seed"]: r2_of(r) for r in by_cell[cell.id]}
        means = (statistics.fmean(r2[model]) if model in r2 else None,
                 statistics.fmean(ablated.values()))  # fmt: skip
        rank = [None if v is None else 1 + sum(o > v for o in others) for v in means]
        rows.append({
            "cell": cell.id, "setting": setting, "model": model, "change": dict(cell.train),
            "main": {r["seed"]: r2_of(r) for r in by_cell.get(cell_id(setting, model), [])},
            "ablated": ablated, "rank": rank[0], "rank_ablated": rank[1],
        })  # fmt: skip
    return rows


def prediction(profile: str, results_dir=None, substitute: dict | None = None) -> dict:
    """``rank_test``'s fields as a dict, with its ``verdict`` and ``reason`` worded as the
    scorecard words them (``present.rank_reason``): what chapter 10 shows."""
    test = rank_test(profile, results_dir, substitute)
    return vars(test) | {"verdict": test.label.value, "reason": present.rank_reason(test, profile)}


def progress(rows: list[dict]) -> dict:
    """The complete and incomplete settings of ``ranks``' ``rows`` and the jobs still to run."""
    return {
        "complete": [r["setting"] for r in rows if r["complete"]],
        "incomplete": [r["setting"] for r in rows if not r["complete"]],
        "missing_jobs": sum(r["missing_jobs"] for r in rows if not r["complete"]),
    }


def _spread(values) -> float:
    return max(values) - min(values)


def seed_spreads(profile: str, results_dir=None) -> list[dict]:
    """Per complete setting of ``profile``, the seeds behind MZAttn-Full's rank: its (test R^2,
    best epoch) per seed, their ``spread`` (best minus worst) against the widest of the models
    that are not MZAttn models (``others``), and its rank by mean and by median seed."""
    model = "mz_full"
    by_median = {r["setting"]: r["rank"] for r in ranks(profile, model, results_dir, "median")}
    by_cell = ex.results_by_cell(LABEL, profile, results_dir)
    out = []
    for r in ranks(profile, model, results_dir):
        if not r["complete"]:
            continue
        r2 = seed_r2(by_cell, r["setting"])
        own = sorted((r2_of(s), s["metrics"].get("best_epoch"))
                     for s in by_cell[cell_id(r["setting"], model)])  # fmt: skip
        spread = _spread(r2[model])
        others = max(_spread(v) for m, v in r2.items() if m not in MZ_MODELS)
        out.append({"setting": r["setting"], "row": r["row"], "column": r["column"],
                    "seeds": own, "spread": spread, "others": others, "wider": spread > others,
                    "rank": r["rank"], "rank_median": by_median[r["setting"]]})  # fmt: skip
    return out


def rate_ablation(profile: str, results_dir=None) -> list[dict]:
    """What each learning-rate ablation (``ablations`` that set ``lr``) shows: mean, rank and
    spread of the seeds at the profile's rate and at the ablation's, beside the widest spread and
    worst seed of the non-MZAttn models, and the ``outcome``: "not the rate" (the rank does not
    improve), "the rate" (it improves and the seeds train as reliably as the others') or "part of
    it" (it improves, but a seed is still the worst)."""
    by_cell = ex.results_by_cell(LABEL, profile, results_dir)
    out = []
    for a in ablations(profile, results_dir):
        if "lr" not in a["change"]:
            continue
        main, new = list(a["main"].values()), list(a["ablated"].values())
        rest = [v for m, v in seed_r2(by_cell, a["setting"]).items() if m not in MZ_MODELS]
        widest = max(map(_spread, rest), default=None)
        lowest = min(map(min, rest), default=None)
        if a["rank_ablated"] >= a["rank"]:
            outcome = "not the rate"
        elif lowest is not None and min(new) >= lowest and _spread(new) <= widest:
            outcome = "the rate"
        else:
            outcome = "part of it"
        out.append({"setting": a["setting"], "model": a["model"], "change": a["change"],
                    "mean": statistics.fmean(main) if main else None, "rank": a["rank"],
                    "mean_ablated": statistics.fmean(new), "rank_ablated": a["rank_ablated"],
                    "spread": _spread(main) if main else None, "spread_ablated": _spread(new),
                    "widest_other": widest, "lowest_other": lowest, "worst_ablated": min(new),
                    "outcome": outcome})  # fmt: skip
    return out


def rate_ablation_words(profile: str, results_dir=None) -> list[str]:
    """``rate_ablation`` in two sentences per cell: what the rate changes, then
    ``OUTCOME_WORDS``; [] before it ran."""
    n, n_others = len(RANKED), len(RANKED) - len(MZ_MODELS)
    words = []
    for a in rate_ablation(profile, results_dir):
        what = ", ".join(f"{k} = {v:g}" for k, v in a["change"].items())
        fields = {**a, "what": what, "setting": setting_words(a["setting"]), "n": n}
        words += [WORDS["rate"].format(**fields, n_others=n_others), OUTCOME_WORDS[a["outcome"]]]
    return words


def cap_outcome(table: dict, rerun: dict) -> str:
    """What the epoch-cap reruns say, from ``prediction`` of the table's own runs and with the
    reruns substituted: "same verdict", "same ranks" (only the rule on capped runs differs) or
    "depends" (the verdict and the ranks depend on how long those runs train)."""
    if rerun["verdict"] == table["verdict"]:
        return "same verdict"
    return "same ranks" if rerun["observed"] == table["observed"] else "depends"


def plot_seeds(profile: str, results_dir=None):
    """Every seed's test R^2 per setting (the MZAttn models in colour, the others grey) and the
    set-statistics yardstick as a bar: a matplotlib Figure."""
    import matplotlib.pyplot as plt

    rows, seeds = ranks(profile, results_dir=results_dir), per_seed(profile, results_dir)
    colours = {"mz_full": "C0", "mz_large": "C3"}
    width = 0.8 / len(RANKED)
    fig, ax = plt.subplots(figsize=(10, 4))
    for j, m in enumerate(RANKED):
        mine = [s for s in seeds if s["model"] == m]
        if mine:
            xs = [SETTINGS.index(s["setting"]) - 0.4 + (j + 0.5) * width for s in mine]
            ax.plot(xs, [s["r2"] for s in mine], "o", ms=5, color=colours.get(m, "0.6"),
                    label=mine[0]["name"] if m in colours else None)  # fmt: skip
    for i, r in enumerate(rows):
        if r["set_stats"] is not None:
            ax.hlines(r["set_stats"], i - 0.42, i + 0.42, color="0.3", lw=1.5,
                      label="set statistics" if i == 0 else None)  # fmt: skip
    ax.plot([], [], "o", ms=5, color="0.6", label=f"the other {len(RANKED) - len(colours)} models")
    labels = [f"{r['row'].replace('MNIST ', '')}\n{r['column']}" for r in rows]
    ax.set_xticks(range(len(rows)), labels, fontsize=8)
    ax.set(ylabel="test $R^2$ of one seed", title=f"every seed, profile {profile}")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.tight_layout()
    return fig


def rank_table(rows: list[dict], profile: str):
    """``ranks``' ``rows`` as the chapter's table (* marks a provisional rank)."""
    out = []
    for r in rows:
        (best, best_r2), (mean, std) = r["best_other"], r["r2"]
        star = "" if r["complete"] else "*"
        out.append({
            "setting": f"{r['row'].removeprefix('MNIST ')} / {r['column']}"
                       + ("" if r["complete"] else f" ({r['missing_jobs']} jobs still to run)"),
            "ours": "--" if r["rank"] is None else f"{r['rank']}{star} of {r['n_models']}",
            "paper": f"{r['paper_rank']:.0f}",
            "mz": "--" if mean is None else f"{mean:.3f} ± {std or 0:.3f} ({r['seeds']})",
            "best": "--" if best is None else f"{model_words(best)} {num(best_r2, missing='--')}",
            "stats": num(r["set_stats"], missing="--"),
        })  # fmt: skip
    return comparison_table(
        out,
        [("setting", "Setting", 26), ("ours", "MZ rank, ours", 12),
         ("paper", "MZ rank, paper", 12), ("mz", "MZAttn-Full R² (seeds)", 18),
         ("best", "Best other R²", 18), ("stats", "Set statistics R²", 14)],
        caption=f"{paper_ref(LABEL)}, profile {profile}: MZAttn-Full's rank among the models "
                "per setting (* = provisional: the setting is incomplete)",
    )  # fmt: skip


def setting_words(setting: str) -> str:
    """A setting of the transfer study in words: "raw-hull" -> "raw pixel / Hull"."""
    return ex.get_table(LABEL).cell(f"{setting}-mz_full").column.removeprefix("MNIST ")


def model_words(model: str) -> str:
    """A registered model by its display name ("st_large" -> "ST-Large")."""
    return _nn.model_spec(model).display


def transfer_summary(results_dir=None) -> list[str]:
    """MZAttn-Full's rank per setting beside the paper's, and the verdict on the paper's
    no-advantage prediction, in sentences."""
    said, prof = WORDS["summary"], converged_profile(results_dir)
    if prof is None:
        return [said["none"]]
    rows = [r for r in ranks(prof, results_dir=results_dir) if r["rank"] is not None]
    if not rows:
        return [said["no mz"].format(profile=prof)]
    rank_words = "; ".join(
        f"{setting_words(r['setting'])}: {r['rank']}{'' if r['complete'] else '*'} "
        f"(paper {r['paper_rank']:.0f})"
        for r in rows
    )
    out = [said["ranks"].format(n_models=rows[0]["n_models"], profile=prof, ranks=rank_words)]
    if any(not r["complete"] for r in rows):
        out[0] += said["provisional"]
    if complete := [r["rank"] for r in rows if r["complete"]]:
        out.append(said["mean"].format(n=len(complete), mean=sum(complete) / len(complete)))
    return [*out, said["verdict"].format(**prediction(prof, results_dir))]
