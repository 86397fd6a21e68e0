"""Chapter 6's results (the relational benchmarks): its tables, the set-statistics yardstick per
setting, each table's results under every protocol on disk and its overview figure's points,
read from the table registry (``TableSpec.chapter``), never from hand lists. The verdicts on
the paper's claims are chapter 9's: the chapter links there.
"""

from __future__ import annotations

from mzlite import nn as _nn
from mzlite.tasks import baseline_r2, make_splits
from mzlite.train import History
from mzlite.viz.page import fit_page

from . import experiments as ex
from .experiments import narrate
from .experiments.formatting import cell_words
from .experiments.protocols import CURRENT, reader_name
from .experiments.report import best_rows, evidence_note, ours_text, report, what_ran
from .paper import paper_ref, spaced
from .render import HTML, comparison_table, conclusion, toggle

CHAPTER = "06_relational_benchmarks"
MAIN = "tab:main-results"
SMOKE_SIZES = (1000, 1, 500)  # the yardstick's (train, val, test) sets outside the full profile
NEAR = 0.1  # "within NEAR of" the paper's better model


def chapter_tables(chapter: str = CHAPTER) -> list[str]:
    """The labels of the registered tables of ``chapter``, in the registry's order."""
    labels = [label for label in ex.TABLES if ex.get_table(label).chapter == chapter]
    if not labels:
        chapters = sorted({ex.get_table(label).chapter for label in ex.TABLES})
        raise ValueError(f"chapter must be one of {chapters}, got {chapter!r}")
    return labels


def yardstick_settings() -> list[dict]:
    """One setting per (table, task, target) of chapter 6 where the paper reports both the ST
    and MZAttn-Full: the first such column (a sweep's smallest d); a table whose set-statistics
    data all belong to earlier tables (``-normed``) adds none. Each: ``setting`` (words),
    ``table``, ``column`` (the cell-id prefix) and ``cell`` (its set-statistics ``Cell``)."""
    out, seen = [], set()
    for label in chapter_tables():
        spec = ex.get_table(label)
        ids = {c.id for c in spec.cells}
        stats = [c for c in spec.cells if c.model == ex.SET_STATS and c.part == "main"]
        data = {(c.task, tuple(sorted(c.options.items()))) for c in stats}
        if data <= seen:
            continue
        seen |= data
        title = spec.title.split(" (")[0].split(":")[0].strip()  # "Convex-hull volume"
        groups = set()
        for cell in stats:
            col = cell.id.removesuffix(f"-{ex.SET_STATS}")
            group = (cell.task, cell.options.get("target"))
            paper = [f"{col}-{m}" for m in ("st", "mz_full")]
            if group in groups or not all(i in ids and narrate.paper_metric(label, i) is not None
                                          for i in paper):  # fmt: skip
                continue
            groups.add(group)
            words = cell.column if label == MAIN else f"{title}, {cell.column}"
            out.append({"setting": words, "table": label, "column": col, "cell": cell})
    return out


def relation(ours: float, paper: float | None) -> str | None:
    """``ours`` against ``paper``: "at or above", "within 0.1 of" (``NEAR``), "below" or None."""
    if paper is None:
        return None
    gap = ours - paper
    return "at or above" if gap >= 0 else f"within {NEAR:g} of" if gap >= -NEAR else "below"


def yardstick(settings: list[dict], sizes: tuple[int, int, int] | None = SMOKE_SIZES) -> list[dict]:
    """The set-statistics ridge (``mzlite.tasks.baseline_r2``) on each of ``settings`` trained on
    ``sizes`` sets (None: each cell's own): per setting, test R^2 with the ``basic`` and ``all``
    features, the paper's ``paper_st``, ``paper_mz`` and ``paper_best``, and ``relation``."""
    rows = []
    for s in settings:
        cell = s["cell"]
        n_tr, n_val, n_te = cell.sizes if sizes is None else sizes
        sp = make_splits(cell.task, n_tr, n_val, n_te, seed=0, cache=True, **cell.options)
        paper = {
            m: narrate.paper_metric(s["table"], f"{s['column']}-{m}") for m in ("st", "mz_full")
        }
        best = max((v for v in paper.values() if v is not None), default=None)
        r2 = {f: baseline_r2(sp.train, sp.test, features=f)["r2"] for f in ("basic", "all")}
        rows.append({"setting": s["setting"], "table": s["table"], **r2,
                     "paper_st": paper["st"], "paper_mz": paper["mz_full"], "paper_best": best,
                     "relation": relation(r2["all"], best)})  # fmt: skip
    return rows


def run_chapter(profile: str, device: str = "auto", workers: int = 1) -> dict[str, dict]:
    """What the chapter runs under ``profile``: ``smoke``, ST, MZAttn-Full and Deep Sets on Tasks
    A, F and G of the main table (a pipeline check); ``full``, every table of the chapter; any
    other nothing. ``{label: {"done": n, "skipped": n, "failed": [(path, error), ...]}}``."""
    prof = ex.get_profile(profile).name  # an unknown profile fails here, naming the valid ones
    if prof == "smoke":
        runs = {MAIN: dict(models=["st", "mz_full", "deepsets"], cells=["A-*", "F-*", "G-*"],
                           threads=1, data_workers=1)}  # fmt: skip
    elif prof == "full":
        runs = {label: {"workers": workers} for label in chapter_tables()}
    else:
        return {}
    out = {}
    for label, kwargs in runs.items():
        res = ex.run(label, prof, device=device, **kwargs)
        out[label] = {"done": len(res["done"]), "skipped": len(res["skipped"]),
                      "failed": list(res["failed"])}  # fmt: skip
    return out


def protocols(label: str, results_dir=None) -> list[dict]:
    """The protocols with results of ``label`` on disk, own or shared: ``profile``, ``role``
    (the glossary's name) and ``ablation`` (not one of the ``CURRENT`` protocols)."""
    return [{"profile": p, "role": reader_name(p), "ablation": p not in CURRENT}
            for p in ex.PROFILE_ORDER  # shared cells count: they are read
            if ex.results_by_cell(label, p, results_dir)]  # fmt: skip


def results_toggle(label: str, results_dir=None) -> HTML:
    """``label``'s results under every protocol on disk, closed under one line; inside, per
    protocol, its report and what ran. Without results: one line with the command that runs it."""
    have = protocols(label, results_dir)
    if not have:  # a line, not a toggle: nothing to open (the command unrenamed, in code)
        run = f"python -m mzlite run {label} --profile cpu-annealed"
        return HTML(f"<p>{paper_ref(label)}: no results under any protocol yet "
                    f"(<code>{run}</code> runs it).</p>")  # fmt: skip
    parts = []
    for h in have:
        parts.append(report(label, h["profile"], results_dir, ran_only=True))
        ran = what_ran(label, h["profile"], results_dir, commit_ids=False)
        parts.append(conclusion(ran, title=f"What ran ({h['profile']}: {h['role']})"))
    names = ", ".join(h["profile"] for h in have)  # inside, each names its role (superseded)
    return toggle(f"{paper_ref(label)}: {ex.get_table(label).title} [{names}]", *parts)


def overview_points(labels=None, results_dir=None) -> list[dict]:
    """The points of ``mzlite.viz.plot_ours_vs_paper``: per main cell of ``labels`` (default:
    chapter 6's) of MZAttn-Full and the table's ST (``st``, else ``st_large``) with a paper R^2
    and a result, from the most trusted protocol that has it; the 30-epoch ablation without
    ``ours_std``. Runs that several tables share (``ex.shared``) are drawn once."""
    points, drawn = [], set()
    for label in chapter_tables() if labels is None else labels:
        spec = ex.get_table(label)
        st = "st" if "st" in spec.models else "st_large"
        groups = {"mz_full": "MZAttn", st: "Set Transformer"}
        for cid, r in best_rows(label, results_dir=results_dir).items():
            model = spec.cell(cid).model
            if model not in groups or r["profile"] is None or r["part"] != "main":
                continue
            if r["ours_mean"] is None or r["paper_mean"] is None:
                continue
            run = (r["profile"], *ex.shared(label, r["profile"]).get(cid, (label, cid)))
            if run in drawn:  # the runs of a cell an earlier table has drawn: each once
                continue
            drawn.add(run)
            converged = r["profile"] != "cpu"
            points.append({
                "ours": r["ours_mean"], "ours_std": r["ours_std"] if converged else None,
                "paper": r["paper_mean"],
                "group": groups[model] + ("" if converged else " (30 epochs)"),
                "table": paper_ref(label),
                "label": f"{paper_ref(label)}: {r['row']}, {r['column']}<br>{evidence_note(r)}",
                "profile": r["profile"], "cell": cid,
            })  # fmt: skip
    return points


def smoke_curves(label: str = MAIN, results_dir=None) -> dict[str, list[float]]:
    """The validation loss per epoch of every ``smoke`` run of ``label``, by cell in words."""
    return {
        cell_words(label, r["cell"]): History.from_dict(r["history"]).val_loss
        for r in ex.load_results(label, "smoke", results_dir)
        if r.get("history")
    }


def yardstick_table(rows: list[dict], caption: str = "") -> HTML:
    """``yardstick``'s rows as a table."""
    cols = ("basic", "all", "paper_st", "paper_mz")
    shown = [{"setting": r["setting"], "relation": r["relation"] or "--",
              **{k: "--" if r[k] is None else f"{r[k]:.3f}" for k in cols}}
             for r in rows]  # fmt: skip
    return comparison_table(
        shown,
        [("setting", "Setting", 34), ("basic", "Statistics, basic", 12),
         ("all", "Statistics, all", 12), ("paper_st", "Paper ST", 10),
         ("paper_mz", "Paper MZ", 10), ("relation", "All, vs the paper's better", 22)],
        caption=caption,
    )  # fmt: skip


# The yardstick chart's bars: (row key, legend name, colour)
BARS = (
    ("basic", "set statistics (basic)", "#9ecae1"),
    ("all", "set statistics (all)", "#3182bd"),
    ("paper_st", "paper ST", "#fdae6b"),
    ("paper_mz", "paper MZ", "#e6550d"),
)
FLOOR = -0.2  # bars are drawn from here; the hover text keeps the true value


def plot_yardstick(rows: list[dict]):
    """``yardstick``'s rows as grouped bars per setting (``BARS``), R^2 drawn from ``FLOOR``."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for key, name, colour in BARS:
        values = [r[key] for r in rows]
        fig.add_bar(name=name, x=[r["setting"] for r in rows], marker_color=colour,
                    y=[None if v is None else max(v, FLOOR) for v in values],
                    hovertext=["--" if v is None else f"{v:.3f}" for v in values])  # fmt: skip
    fig.update_layout(
        barmode="group", title="How much of each target do simple set statistics explain?",
        yaxis={"title": f"test R^2 (drawn from {FLOOR:g})", "range": [FLOOR, 1.02]})  # fmt: skip
    return fit_page(fig, height=480)


def main_results_glance(results_dir=None) -> list[str]:
    """One sentence per task of the main table under one protocol, named: the most trusted that
    ran MZAttn-Full there. MZAttn-Full's R² beside the paper's, then the best other trained
    model and the set-statistics yardstick under that protocol (no sentence mixes protocols)."""
    spec, by_profile = ex.get_table(MAIN), {}
    best = best_rows(MAIN, results_dir=results_dir)
    out = []
    for column in dict.fromkeys(c.column for c in spec.cells if c.part == "main"):
        cells = [c for c in spec.cells if c.column == column and c.part == "main"]
        mz = next((best[c.id] for c in cells if c.model == "mz_full" and best[c.id].ran), None)
        if mz is None:
            out.append(f"{spaced(column)}: MZAttn-Full not run yet.")
            continue
        if mz.profile not in by_profile:
            by_profile[mz.profile] = best_rows(MAIN, (mz.profile,), results_dir)
        rows = {c.model: r for c in cells if (r := by_profile[mz.profile][c.id]).ran}
        others = {m: r for m, r in rows.items()
                  if _nn.model_spec(m).trainable and _nn.model_spec(m).family != "mz"}  # fmt: skip
        text = f"{spaced(column)} ({reader_name(mz.profile)}): MZAttn-Full {ours_text(mz)}"
        if mz.paper_mean is not None:
            text += f" (paper {mz.paper_mean:.3f})"
        if others:
            r = max(others.values(), key=lambda r: r.ours_mean)
            text += f"; best other model {r.row} {ours_text(r)}"
        if (stats := rows.get(ex.SET_STATS)) is not None:
            text += f"; set statistics {ours_text(stats)}"
        out.append(text + ".")
    return out
