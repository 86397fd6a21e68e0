"""The sentences and small tables the results chapters print, written from result rows.

    from mzlite.repro.experiments import narrate
    narrate.gap_table(narrate.tdof_gaps())                         # Welch per L (chapter 4)
    narrate.describe_runs("tab:tdof-verify", "cpu-converged")      # what ran, in words
    narrate.fit_ratio("tab:meb", "d8-st", "cpu-converged")         # how far a run fitted

Every number comes from the result files, through ``report`` (typed ``ReportRow``s) and the
scorecard; nothing is typed. A chapter calls one function per paragraph or table and keeps the
code that teaches. Cells are named in words ("d = 8, MZAttn-Full"), never by id
(``cell_words``, ``scrub``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from mzlite import nn as _nn
from mzlite.repro import experiments as ex
from mzlite.repro import transfer
from mzlite.repro.experiments.formatting import count_phrase, headline, scrub, sentence_case, spaced
from mzlite.repro.experiments.report import (
    ReportRow,
    best_report_rows,
    epoch_range,
    evidence_note,
    ours_text,
    report,
)
from mzlite.repro.experiments.results import PROFILE_ORDER
from mzlite.repro.experiments.scorecard import claims, evaluate, scorecard
from mzlite.repro.experiments.stats import ALPHA, fit_check, welch
from mzlite.repro.paper import name_labels, paper_cell, paper_ref
from mzlite.repro.render import HTML, STYLE, comparison_table, conclusion, table_name
from mzlite.tasks import make_splits

__all__ = [
    "claim_lines", "glance", "verdict_anchor", "verdict_links", "pipeline_only", "paper_metric",
    "Gap", "tdof_gaps", "gap_table", "describe_runs", "train_variance",
    "fit_ratio", "CONDITIONS", "normalised_twin", "condition_cell", "condition_profile",
    "meb_pattern", "versus", "main_results_glance",
    "setting_words", "model_words", "transfer_summary",
]  # fmt: skip

TDOF = "tab:tdof-verify"


# ---------------------------------------------------------------------------------------------
# Words for ids
# ---------------------------------------------------------------------------------------------


def paper_metric(table, cell_id: str, metric: str = "r2") -> float | None:
    """The paper's mean ``metric`` for one cell (through its ``PaperRef``), None where the paper
    has no such number."""
    cell = ex.get_table(table).cell(ex.CellKey(table, cell_id).cell)
    for ref in cell.paper:
        if ref.metric == metric:
            v = paper_cell(ex.get_table(table).label, ref.row, ref.column).get("mean")
            if v is not None:
                return v * ref.scale
    return None


# ---------------------------------------------------------------------------------------------
# Results at a glance
# ---------------------------------------------------------------------------------------------


def _chapter_rows(chapter: str, sc=None) -> list[dict]:
    if sc is None:
        tables = [t for t in ex.TABLES if ex.get_table(t).chapter == chapter]
        sc = scorecard(tables=tables) if tables else None
    return [r for r in (sc.rows if sc is not None else []) if r["chapter"] == chapter]


def claim_lines(rows: list[dict], tables: bool = False) -> list[str]:
    """One sentence per scorecard row: the claim without its test, the verdict, ours beside the
    paper's and the protocol, in words; ``tables``: each led by its paper table ("Table 5")."""
    out = []
    for r in rows:
        text = headline(r["text"])
        if tables:
            text = f"{table_name(r['table'], title=False)}, {text}"
        text = f"{sentence_case(text)}: {r['verdict']}"
        if r["verdict"] != "not run":
            text += f" (ours {r['ours_text']}, the paper's {r['paper_text']}; {r['profile']})"
        out.append(name_labels(scrub(text + ".", r["table"])))  # a claim may cite another table
    return out


SCORECARD_PAGE = "09_reproduction_scorecard.html"


def verdict_anchor(table: str) -> str:
    """The id of ``table``'s group in chapter 9's scorecard ("verdicts-tab-meb"): where a
    results chapter links for its verdicts instead of repeating them."""
    return "verdicts-" + ex.get_table(table).label.replace(":", "-")


def verdict_links(rows: list[dict]) -> str:
    """HTML: each paper table of ``rows`` linked to its verdicts in chapter 9 (a table none of
    whose claims ran links to the list of claims not run)."""
    import html

    links = []
    for table in dict.fromkeys(r["table"] for r in rows):
        ran = any(r["verdict"] != "not run" for r in rows if r["table"] == table)
        anchor = verdict_anchor(table) if ran else "scorecard-not-run"
        links.append(f'<a href="{SCORECARD_PAGE}#{anchor}">'
                     f"{html.escape(table_name(table, title=False))}</a>")  # fmt: skip
    return ", ".join(links[:-1]) + (" and " if len(links) > 1 else "") + links[-1]


def glance(chapter: str, sentences=(), sc=None, title: str | None = None):
    """The box at the top of a results chapter: the verdict counts of its claims, the chapter's
    own summary ``sentences`` (its results, with their numbers), then a link to each of its
    paper tables in chapter 9, which holds the verdicts (each result is said once, there).
    ``title``: by default "What the results say", or, where nothing has run, what it is."""
    import html

    rows = _chapter_rows(chapter, sc)
    counts = Counter(r["verdict"] for r in rows)
    paras = [html.escape(s) for s in sentences if s]
    if rows:
        paras.insert(
            0,
            html.escape(
                f"{len(rows)} claim{'s' if len(rows) != 1 else ''} of the paper tested "
                "here: " + ", ".join(count_phrase(v, n) for v, n in counts.items()) + "."
            ),
        )
        paras.append(f"Each claim's verdict and its reason: {verdict_links(rows)} in chapter 9.")
    ran = [r for r in rows if r["verdict"] != "not run"]
    if title is None:
        title = ("What the results say" if ran or any(sentences)
                 else "The paper's claims about this chapter")  # fmt: skip
    body = "".join(f"<p>{p}</p>" for p in paras)
    return HTML(
        f'{STYLE}<div class="mz-conclusion mz-glance"><p class="mz-title">{html.escape(title)}'
        f"</p>{body}</div>"
    )


def pipeline_only(
    what: str, profile: str, sizes, epochs: int, seeds: int = 1, chapter=None, sc=None
):
    """The box that says what the numbers trained on a page are: a pipeline check, with the scale
    that ran, so that no number on the page reads like a result. ``chapter``: where the scorecard
    already reads committed runs of that chapter's tables, the box says so instead of "no
    results yet" (which is said only when there are none)."""

    sz = "/".join(f"{n:,}" for n in sizes)
    scale = (f"{sz} train/validation/test sets, {epochs} epochs, {seeds} "
             f"seed{'s' if seeds != 1 else ''} per model")  # fmt: skip
    ran = [r for r in (_chapter_rows(chapter, sc) if chapter else [])
           if r["verdict"] not in ("not run", "pipeline only")]  # fmt: skip
    if ran:
        return conclusion(
            [
                f"The models trained on this page itself ran under the {profile} profile "
                f"({scale}): their numbers check that {what} runs end to end, and no verdict is "
                "read from them.",
                f"The results of this chapter are the committed runs that the scorecard reads: "
                f"{len(ran)} of its claims have them, and chapter 9 gives their verdicts.",
            ],
            title="What this page's numbers are",
        )
    return conclusion(
        [
            f"No results yet. Everything on this page was trained in the page itself under the "
            f"{profile} profile: {scale}.",
            f"At that scale the numbers check that {what} runs end to end; they are not a "
            "reproduction of the paper and no verdict is read from them. Converged runs of this "
            "chapter have not been made yet.",
        ],
        title="What this page's numbers are",
    )


# ---------------------------------------------------------------------------------------------
# Chapter 4: the depth-separation test, MZ-1L against ST-4L per L
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gap:
    """MZ-1L (or its ablation ``variant``) against ST-4L at one ``L``, one protocol: Welch's
    test over seeds (``diff`` = MZ − ST mean R², ``p``), the paper's difference."""

    L: int
    variant: str
    mz: ReportRow
    st: ReportRow
    diff: float
    p: float | None
    paper_diff: float | None

    @property
    def reading(self) -> str:
        if self.p is None:
            return "too few seeds for a test"
        if self.p < ALPHA:
            return "MZ-1L fits better" if self.diff > 0 else "ST-4L fits better"
        return "no significant difference"


def tdof_gaps(profiles=PROFILE_ORDER, results_dir=None) -> list[Gap]:
    """For every L, MZ-1L against ST-4L from the most trusted profile that has both cells (the
    two rows of a gap always share it); then the learning-rate ablation cells (MZ-1L at 1e-3)
    against ST-4L of that profile, where they ran."""
    spec = ex.get_table(TDOF)
    ids = {c.id for c in spec.cells}
    Ls = sorted({int(c.options["L"]) for c in spec.cells if c.part == "main"})
    profiles = [ex.get_profile(p).name for p in profiles]
    by_prof = {
        p: {c: ReportRow.of(r, p) for c, r in
            report(TDOF, p, results_dir).by_cell(None, "r2").items()}
        for p in profiles
    }  # fmt: skip
    out = []
    for L in Ls:
        variants = [("MZAttn-1L", f"L{L}-mz_1l")]
        if f"abl-L{L}-lr0.001-mz_1l" in ids:
            variants.append(("MZAttn-1L, learning rate 1e-3", f"abl-L{L}-lr0.001-mz_1l"))
        for name, mz_id in variants:
            for p in profiles:
                mz, st = by_prof[p].get(mz_id), by_prof[p].get(f"L{L}-st_4l")
                if mz is None or st is None or not (mz.ran and st.ran):
                    continue
                if mz.same_as:  # the profile's own protocol: the main cell's runs again
                    continue
                w = welch(mz.values, st.values)
                pm, ps = paper_metric(TDOF, f"L{L}-mz_1l"), paper_metric(TDOF, f"L{L}-st_4l")
                paper = pm - ps if name == "MZAttn-1L" and None not in (pm, ps) else None
                if name != "MZAttn-1L":  # the rate it replaces, so no reader takes 1e-3 as new
                    main_lr = ex.job(TDOF, f"L{L}-mz_1l", p).train_config().lr
                    name = f"MZAttn-1L at lr 1e-3 ({p}'s own: {main_lr:g})"
                out.append(Gap(L, name, mz, st, w["diff"], w["p"], paper))
                break
    return out


def _with_n(row: ReportRow) -> str:
    return f"{ours_text(row)} (n = {row.n_seeds})"


def gap_table(gaps: list[Gap]):
    """The Welch comparison of ``tdof_gaps`` as a page-width table (protocols as footnotes)."""
    if not gaps:
        return conclusion("No L has results of both models under one protocol yet.",
                          title="MZ-1L against ST-4L")  # fmt: skip
    rows = [
        {
            "L": str(g.L), "model": g.variant, "mz": _with_n(g.mz), "st": _with_n(g.st),
            "diff": f"{g.diff:+.3f}", "p": "--" if g.p is None else f"{g.p:.2g}",
            "paper": "--" if g.paper_diff is None else f"{g.paper_diff:+.3f}",
            "reading": g.reading, "protocol": evidence_note(g.mz),
        }
        for g in gaps
    ]  # fmt: skip
    return comparison_table(
        rows,
        [("L", "L", 6), ("model", "MZ model", 18), ("mz", "MZ R²", 17), ("st", "ST-4L R²", 17),
         ("diff", "MZ − ST", 10), ("p", "Welch p", 9), ("paper", "paper MZ − ST", 10),
         ("reading", "reading", 13)],
        caption=f"{paper_ref(TDOF)}: MZ-1L against ST-4L over seeds",
        footnote_key="protocol",
        footnote_title="Protocol behind the MZ number",
    )  # fmt: skip


def describe_runs(table, profile: str, results_dir=None) -> list[str]:
    """What the trained results of ``table`` under ``profile`` are, in sentences: per model, our
    number per setting beside the paper's, with the epochs run, the best epochs and why the runs
    stopped; the derived ratios; the set-statistics yardstick; how many runs were still
    improving at the cap or stopped early; data sizes and seeds against the full protocol."""
    spec, prof = ex.get_table(table), ex.get_profile(profile)
    rows = [ReportRow.of(r, prof.name) for r in report(spec, prof.name, results_dir).rows]
    main = [r for r in rows if r.part == "main" and r.seeds]
    trained = [r for r in main if _nn.model_spec(r.model).trainable]
    stats = [r for r in main if not _nn.model_spec(r.model).trainable]
    if not trained:
        return [f"Profile {prof.name}: no trained results on disk yet."]
    by_cell = ex.results_by_cell(spec, prof.name, results_dir)
    runs = [x for r in trained for x in by_cell.get(r.cell, [])]
    about = prof.description  # usually "<name>: what it is"
    lines = [
        f"Profile {about}." if about.startswith(prof.name) else f"Profile {prof.name}: {about}."
    ]
    by_model: dict[str, list[ReportRow]] = {}
    for r in trained:
        by_model.setdefault(r.row, []).append(r)
    for name, rs in by_model.items():
        parts = []
        for r in rs:
            res = by_cell.get(r.cell, [])
            best = "/".join(str(x["metrics"].get("best_epoch")) for x in res)
            why = ", ".join(sorted({x.get("stop_reason", "?").replace("_", " ") for x in res}))
            paper = "" if r.paper_mean is None else f"paper {r.paper_mean:.3f}; "
            parts.append(f"{spaced(r.column)}: {ours_text(r)} ({paper}{epoch_range(res)} "
                         f"epochs, best {best}, {why})")  # fmt: skip
        lines.append(f"{name}: " + "; ".join(parts) + ".")
    ratios = [r for r in rows if r.part == "derived" and r.ours_mean is not None]
    if ratios:
        lines.append(f"{ratios[0].column} (above 1: MZ fits better): " + "; ".join(
            f"{spaced(spec.cell(r.cell).column)}: {r.ours_mean:.1f}x (paper "
            f"{r.paper_mean:g}x)" for r in ratios
        ) + ".")  # fmt: skip
    if stats:
        lines.append("Set statistics (ridge), no training: " + "; ".join(
            f"{spaced(r.column)}: {ours_text(r)}" for r in stats) + ".")  # fmt: skip
    capped = [
        x for x in runs
        if x.get("stop_reason") == "completed" and x["metrics"].get("best_epoch") is not None
        and x["metrics"]["best_epoch"] >= x["epochs_run"] - 2
    ]  # fmt: skip
    if capped:
        lines.append(
            f"{len(capped)} of {len(runs)} trained runs were still improving when the epoch cap "
            "stopped them (best epoch within the last 3): they are under-trained."
        )
    stopped = sum(x.get("stop_reason") == "early_stopping" for x in runs)
    if stopped:
        lines.append(
            f"{stopped} of {len(runs)} runs stopped early (validation loss flat for the "
            "profile's patience): more epochs alone would not have helped them."
        )
    first = runs[0]
    full = ex.job(spec, first["cell"], "full")
    if first["sizes"][0] < full.sizes[0]:
        lines.append(f"Each model saw {first['sizes'][0]:,} training sets, against "
                     f"{full.sizes[0]:,} in the full protocol.")  # fmt: skip
    n_seeds = min(r.n_seeds for r in trained)
    if n_seeds < full.cell.full_seeds:
        lines.append(
            f"{n_seeds} seed{'s' if n_seeds != 1 else ''} per cell against the paper's "
            f"{full.cell.full_seeds}"
            + (": no error bars on our side." if n_seeds == 1
               else "; the ± is the standard deviation over these seeds.")
        )  # fmt: skip
    return [scrub(x, spec.label) for x in lines]


# ---------------------------------------------------------------------------------------------
# Chapter 5: did a run fit its training set?
# ---------------------------------------------------------------------------------------------


def train_variance(table, cell_id: str, profile: str) -> float:
    """The variance of a cell's raw training targets under ``profile`` (the MSE of the mean
    predictor), from the runner's cached dataset."""
    job = ex.job(table, cell_id, profile)
    sp = make_splits(
        job.cell.task, *job.sizes, job.profile.data_seed, cache=True,
        cache_dir=ex.default_cache_dir() / "datasets", **job.cell.options,
    )  # fmt: skip
    return float(sp.train.y.double().var(unbiased=False))


def fit_ratio(table, cell_id: str, profile: str, results_dir=None) -> float | None:
    """A cell's lowest training loss over the variance of its training targets, in training
    units (1 = the mean predictor; ``stats.fit_check``), averaged over its seeds; None when no
    run of it has a history."""
    ratios = []
    for r in ex.results_by_cell(table, profile, results_dir).get(cell_id, []):
        hist = r.get("history")
        if not hist:
            continue
        hist = {"config": r["train_config"], **hist}  # the result's own record, where it has one
        if hist.get("train_target_var") is None and not r["train_config"].get("normalize_targets"):
            # trained before History recorded the variance (the cpu and cpu-converged results)
            hist = {**hist, "train_target_var": train_variance(table, cell_id, profile)}
        ratio = fit_check(hist)["fit_ratio"]
        if ratio is not None:
            ratios.append(ratio)
    return sum(ratios) / len(ratios) if ratios else None


# ---------------------------------------------------------------------------------------------
# Chapter 5: the MEB pattern on raw and on per-set normalised data
# ---------------------------------------------------------------------------------------------

MEB = "tab:meb"
CONDITIONS = ("raw", "per-set normalised")


def normalised_twin(cell_id: str, profile: str) -> str:
    """The d = 8 ablation cell of ``tab:meb`` that differs from main cell ``cell_id`` under
    ``profile`` only in its data (per-set normalised): targets scaled as the profile scales
    them (the set-statistics ridge does not depend on that)."""
    model = cell_id.split("-", 1)[1]
    standardised = ex.get_profile(profile).train.get("normalize_targets", False)
    variant = "scale-ynorm" if standardised and model != ex.SET_STATS else "scale"
    return f"abl-d8-{variant}-{model}"


def condition_cell(cell_id: str, condition: str, profile: str) -> str:
    """Main cell ``cell_id`` under data ``condition`` ("raw" or "per-set normalised")."""
    if condition not in CONDITIONS:
        raise ValueError(f"condition must be one of {CONDITIONS}, got {condition!r}")
    return cell_id if condition == "raw" else normalised_twin(cell_id, profile)


def _meb_rows(profiles, results_dir) -> dict[str, dict[str, ReportRow]]:
    return {p: {c: ReportRow.of(r, p) for c, r in
                report(MEB, p, results_dir).by_cell(None, "r2").items()}
            for p in profiles}  # fmt: skip


def condition_profile(condition: str, profiles=PROFILE_ORDER, results_dir=None,
                      _rows=None) -> str | None:  # fmt: skip
    """The most trusted profile with results of both the Standard and the MZAttn-Full d = 8
    cells under ``condition``: a comparison reads numbers of one protocol only."""
    profiles = [ex.get_profile(p).name for p in profiles]
    rows = _rows if _rows is not None else _meb_rows(profiles, results_dir)
    for p in profiles:
        cells = [condition_cell(f"d8-{m}", condition, p) for m in ("st", "mz_full")]
        if all(rows[p].get(c) is not None and rows[p][c].ran for c in cells):
            return p
    return None


def meb_pattern(profiles=PROFILE_ORDER, results_dir=None) -> dict[tuple[str, str], dict]:
    """The scorecard's d = 8 MEB claims judged under each data condition: ``{(condition, claim
    id): scorecard row}``, each from the most trusted profile with the claim's cells (the
    normalised condition reads the twin cells, ``normalised_twin``)."""
    out = {}
    for cl in claims(MEB):
        if not cl.id.startswith("meb-d8-"):
            continue
        for cond in CONDITIONS:
            row = None
            for p in profiles:
                rename = None if cond == "raw" else (lambda c, p=p: normalised_twin(c, p))
                row = evaluate(cl, profiles=(p,), results_dir=results_dir, rename=rename)
                if row["verdict"] != "not run":
                    break
            out[cond, cl.id] = row
    return out


def versus(a: ReportRow | dict, b: ReportRow | dict) -> str:
    """Row ``a`` against row ``b`` (of one protocol): the difference of means and Welch's p."""
    a, b = (r if isinstance(r, ReportRow) else ReportRow.of(r) for r in (a, b))
    w = welch(a.values, b.values)
    return f"difference {w['diff']:+.3f}, " + (
        "no test (needs 2 seeds a side)" if w["p"] is None else f"Welch p = {w['p']:.2g}"
    )


def rate_retry(profile: str, results_dir=None, _rows=None) -> list[dict]:
    """The Standard (PMA) model on per-set normalised d = 8 sets under ``profile`` at every
    learning rate it ran: its family's rate (``normalised_twin("d8-st")``) and the retry cells
    ``abl-d8-scale-ynorm-lr*-st`` (lower rates, down to the paper's 1e-4), highest rate first.
    Each: ``lr``, ``cell``, ``row`` (its ``ReportRow``), ``fit`` (``fit_ratio``), ``fitted``
    (its runs that fitted, by their recorded convergence) and ``runs``; cells without results
    are left out."""
    rows = _rows if _rows is not None else _meb_rows([profile], results_dir)[profile]
    spec = ex.get_table(MEB)
    twin = normalised_twin("d8-st", profile)
    retry = [c.id for c in spec.cells
             if c.id.startswith("abl-d8-scale-ynorm-lr") and c.model == "st"]  # fmt: skip
    by_cell = ex.results_by_cell(MEB, profile, results_dir)
    out = []
    for cid in (twin, *retry):
        row = rows.get(cid)
        if row is None or not row.ran:
            continue
        runs = by_cell.get(cid, [])
        lrs = {r["train_config"].get("lr") for r in runs}
        lr = lrs.pop() if len(lrs) == 1 else None
        fitted = sum((r.get("convergence") or {}).get("fitted") is True for r in runs)
        out.append({"lr": lr, "cell": cid, "row": row, "runs": len(runs), "fitted": fitted,
                    "fit": fit_ratio(MEB, cid, profile, results_dir)})  # fmt: skip
    out.sort(key=lambda r: -(r["lr"] or 0.0))
    return out


# ---------------------------------------------------------------------------------------------
# Chapter 6: the main results, task by task
# ---------------------------------------------------------------------------------------------


def main_results_glance(table: str = "tab:main-results", profiles=PROFILE_ORDER,
                        results_dir=None) -> list[str]:  # fmt: skip
    """One short sentence per column (task) of ``table``: MZAttn-Full's R² beside the paper's,
    the best other trained model and the set-statistics yardstick, each from its most trusted
    protocol (chapter 6's tables give every model)."""
    spec = ex.get_table(table)
    best = best_report_rows(spec.label, profiles, results_dir=results_dir)
    out = []
    for column in dict.fromkeys(c.column for c in spec.cells if c.part == "main"):
        rows = {spec.cell(c).model: r for c, r in best.items()
                if spec.cell(c).column == column and r.part == "main" and r.ran}  # fmt: skip
        mz = rows.get("mz_full")
        if mz is None:
            out.append(f"{spaced(column)}: MZAttn-Full not run yet.")
            continue
        others = {m: r for m, r in rows.items()
                  if _nn.model_spec(m).trainable and _nn.model_spec(m).family != "mz"}  # fmt: skip
        text = f"{spaced(column)}: MZAttn-Full {ours_text(mz)}"
        if mz.paper_mean is not None:
            text += f" (paper {mz.paper_mean:.3f})"
        if others:
            m, r = max(others.items(), key=lambda kv: kv[1].ours_mean)
            text += f"; best other model {r.row} {ours_text(r)}"
        stats = rows.get(ex.SET_STATS)
        if stats is not None:
            text += f"; set statistics {ours_text(stats)}"
        out.append(text + ".")
    return out


# ---------------------------------------------------------------------------------------------
# Chapter 10: MZAttn-Full's rank on real point clouds
# ---------------------------------------------------------------------------------------------

TRANSFER = "tab:transfer-matrix"


def setting_words(setting: str) -> str:
    """A setting of the transfer study in words: "raw-hull" -> "raw pixel / Hull"."""
    return ex.get_table(TRANSFER).cell(f"{setting}-mz_full").column.removeprefix("MNIST ")


def model_words(model: str) -> str:
    """A registered model by its display name ("st_large" -> "ST-Large")."""
    return _nn.model_spec(model).display


def transfer_summary(results_dir=None) -> list[str]:
    """The transfer study's result in sentences: MZAttn-Full's rank per setting beside the
    paper's (complete settings; provisional ranks marked), and the verdict on the paper's
    no-advantage prediction with its reason, cells in words."""

    prof = transfer.converged_profile(results_dir)
    if prof is None:
        return ["No converged run of the transfer study is on disk yet: nothing on this page "
                "ranks MZAttn-Full (the smoke run only checks the pipeline)."]  # fmt: skip
    rows = [r for r in transfer.ranks(prof, results_dir=results_dir) if r["rank"] is not None]
    if not rows:
        return [f"The {prof} run of the transfer study has no MZAttn-Full result yet."]
    ranks = "; ".join(
        f"{setting_words(r['setting'])}: {r['rank']}{'' if r['complete'] else '*'} "
        f"(paper {r['paper_rank']:.0f})"
        for r in rows
    )
    n = rows[0]["n_models"]
    out = [f"MZAttn-Full's rank among the {n} models by mean test R² over seeds ({prof}; 1 is "
           f"best; the paper's rank beside each): {ranks}."]  # fmt: skip
    if any(not r["complete"] for r in rows):
        out[0] += " A rank marked * is provisional: its setting is still running."
    complete = [r["rank"] for r in rows if r["complete"]]
    if complete:
        mean = sum(complete) / len(complete)
        out.append(f"Mean rank over the {len(complete)} complete settings: {mean:.2f}, where "
                   "no advantage would give 4.")  # fmt: skip
    pred = transfer.prediction(prof, results_dir)
    reason = scrub(pred["reason"], TRANSFER)
    for setting in {r["setting"] for r in transfer.ranks(prof, results_dir=results_dir)}:
        reason = reason.replace(setting, setting_words(setting))
    out.append(f"The paper's prediction that MZAttn-Full has no advantage here: {pred['verdict']} "
               f"({reason}).")  # fmt: skip
    return out
