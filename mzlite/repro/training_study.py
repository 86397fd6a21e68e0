"""Chapter 4's study: the profiles a table runs under, the paper's cost ratios, and the
depth-separation test of tab:tdof-verify read from the result files, as data the chapter renders."""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from . import experiments as ex
from .experiments.narrate import paper_metric
from .experiments.protocols import CURRENT, PROTOCOL_STYLES
from .experiments.report import ReportRow, evidence_note, ours_text, report
from .experiments.stats import ALPHA, welch
from .paper import load_paper_table, paper_cell, paper_ref, paper_value
from .render import comparison_table, conclusion

LABEL = "tab:tdof-verify"
EXAMPLE_CELL = "L8-mz_1l"  # the cell the chapter trains and whose profiles it tabulates
# One colour per model (by its cells' suffix); one dash and marker per protocol (PROTOCOL_STYLES)
MODEL_COLOURS = {"mz_1l": "#1f77b4", "st_4l": "#d62728", ex.SET_STATS: "#7f7f7f"}
# Set by the book's executor (book/_scripts/execute_notebooks.py) for every chapter's kernel.
BOOK_EXECUTION_ENV = "MZLITE_BOOK_EXECUTION"


def run_by_papermill() -> bool:
    """Whether this kernel runs a chapter for the rendered book (``BOOK_EXECUTION_ENV`` set, or
    the parent's command line in ``/proc`` names papermill or the executor): a chapter shows
    progress bars only in a live kernel, so the book holds no frozen bar."""
    if os.environ.get(BOOK_EXECUTION_ENV) == "1":
        return True
    try:
        words = Path(f"/proc/{os.getppid()}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return "papermill" in words or "execute_notebooks" in words


def profile_rows(label=LABEL, cell: str = EXAMPLE_CELL) -> list[dict]:
    """One row per profile for ``cell`` of ``label``: its sizes, batch, steps per epoch (the
    last, smaller batch counts), epoch cap, warm-up, ``patience`` (None: no early stopping),
    lr, seeds and ``about`` (the profile's description)."""
    rows = []
    for name, prof in ex.PROFILES.items():
        job = ex.job(label, cell, name)  # seed 0 of that cell under the profile
        c = job.train_config()
        rows.append({
            "profile": name, "sizes": tuple(job.sizes), "batch": c.batch_size,
            "steps_per_epoch": math.ceil(job.sizes[0] / c.batch_size), "epochs": c.epochs,
            "warmup": c.warmup_epochs, "patience": c.patience, "lr": c.lr,
            "seeds": len(ex.jobs(label, name, cells=[cell])), "about": prof.description,
        })  # fmt: skip
    return rows


def paper_cost_ratios(size: str = "Small") -> dict:
    """The paper's cost ratios of MZAttn to the standard model (tab:cost) in the row starting
    with ``size``: ``{"row": its name, "ratios": {column: value}}``."""
    cost = load_paper_table("tab:cost")
    rows = [r["row"] for r in cost["rows"]]
    row = next((r for r in rows if r.startswith(size)), None)
    if row is None:
        raise ValueError(f"size must start one of tab:cost's rows {rows}, got {size!r}")
    return {"row": row, "ratios": {c: paper_value("tab:cost", row, c) for c in cost["columns"]}}


def paper_rows(label=LABEL) -> list[dict]:
    """The paper's table as printed, one dict per row: ``row`` and, per column, ``{"mean",
    "std", "unit"}`` (std None where the paper prints none, unit "" or its suffix)."""
    paper = load_paper_table(label)
    return [
        {"row": r["row"],
         **{c: {"mean": r["cells"][c]["mean"], "std": r["cells"][c].get("std"),
                "unit": r["cells"][c].get("unit", "")} for c in paper["columns"]}}
        for r in paper["rows"]
    ]  # fmt: skip


def report_rows(label, profile: str, results_dir=None) -> dict[str, ReportRow]:
    """``{cell id: ReportRow}`` of ``label``'s test R^2 under ``profile``."""
    prof = ex.get_profile(profile).name
    return {c: ReportRow(r, profile=prof) for c, r in
            report(label, prof, results_dir).by_cell(None, "r2").items()}  # fmt: skip


def sweep_series(profiles=CURRENT, results_dir=None, label=LABEL, colours=MODEL_COLOURS) -> dict:
    """``{line: (xs, values, style)}`` for ``mzlite.viz.plot_sweep``: test R^2 of each model of
    ``colours`` against the setting its main cells sweep (the number in "L8-", "d8-"), the
    paper's mean ± std and ours under each of ``profiles`` where a cell ran (std over seeds as
    error bars); one colour per model, one dash and marker per protocol (``PROTOCOL_STYLES``)."""
    spec, series = ex.get_table(label), {}
    swept = lambda c: int(re.match(r"\D+(\d+)-", c.id)[1])  # noqa: E731
    for model, colour in colours.items():
        cells = [c for c in spec.cells if c.part == "main" and c.id.endswith(f"-{model}")]
        cells.sort(key=swept)
        lines = {}  # line -> (its style in PROTOCOL_STYLES, means, spreads)
        if cells[0].paper:
            paper = [paper_cell(label, c.paper[0].row, c.paper[0].column) for c in cells]
            lines["paper"] = ("paper", [p["mean"] for p in paper], [p.get("std") for p in paper])
        for p in (ex.get_profile(p).name for p in profiles):
            rows = report_rows(label, p, results_dir)
            got = [r if r and r.ran else None for r in (rows.get(c.id) for c in cells)]
            line = (p, [r and r.ours_mean for r in got], [r and r.ours_std for r in got])
            # the same runs under a second profile (search --retire copies the runs two
            # campaigns share) are no second line: the first profile that reads them keeps them
            if any(got) and all(line[1:] != other[1:] for other in lines.values()):
                lines[f"ours ({p})"] = line
        for line, (style, means, errors) in lines.items():
            dash, symbol = PROTOCOL_STYLES.get(style, ("dot", "x"))
            style = {"dash": dash, "symbol": symbol, "color": colour, "error": errors}
            series[f"{cells[0].row}, {line}"] = ([swept(c) for c in cells], means, style)
    return series


@dataclass(frozen=True)
class Gap:
    """MZ-1L against ST-4L at one ``L``, one protocol: Welch's test over seeds (``diff`` = MZ −
    ST mean R², ``p``), and the paper's difference."""

    L: int
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


def main_gaps(profiles=CURRENT, results_dir=None) -> list[Gap]:
    """Per L, MZ-1L against ST-4L from the first of ``profiles`` with both main cells: the two
    rows of a gap share a protocol."""
    by_prof = {p: report_rows(LABEL, p, results_dir) for p in profiles}
    out = []
    for L in sorted({int(c.options["L"]) for c in ex.get_table(LABEL).cells if c.part == "main"}):
        for rows in by_prof.values():
            mz, st = rows.get(f"L{L}-mz_1l"), rows.get(f"L{L}-st_4l")
            if mz is None or st is None or not (mz.ran and st.ran):
                continue
            w = welch(mz.seed_values, st.seed_values)
            pm, ps = paper_metric(LABEL, f"L{L}-mz_1l"), paper_metric(LABEL, f"L{L}-st_4l")
            out.append(Gap(L, mz, st, w["diff"], w["p"], None if None in (pm, ps) else pm - ps))
            break
    return out


def _with_n(row: ReportRow) -> str:
    return f"{ours_text(row)} (n = {row.n_seeds})"


def gap_table(gaps: list[Gap]):
    """The Welch comparison of ``main_gaps`` as a page-width table (protocols as footnotes)."""
    if not gaps:
        return conclusion("No L has results of both models under one protocol yet.",
                          title="MZ-1L against ST-4L")  # fmt: skip
    rows = [{"L": str(g.L), "model": "MZAttn-1L", "mz": _with_n(g.mz), "st": _with_n(g.st),
             "diff": f"{g.diff:+.3f}", "p": "--" if g.p is None else f"{g.p:.2g}",
             "paper": "--" if g.paper_diff is None else f"{g.paper_diff:+.3f}",
             "reading": g.reading, "protocol": evidence_note(g.mz)}
            for g in gaps]  # fmt: skip
    return comparison_table(
        rows,
        [("L", "L", 6), ("model", "MZ model", 18), ("mz", "MZ R²", 17), ("st", "ST-4L R²", 17),
         ("diff", "MZ − ST", 10), ("p", "Welch p", 9), ("paper", "paper MZ − ST", 10),
         ("reading", "reading", 13)],
        caption=f"{paper_ref(LABEL)}: MZ-1L against ST-4L over seeds",
        footnote_key="protocol", footnote_title="Protocol behind the MZ number",
    )  # fmt: skip
