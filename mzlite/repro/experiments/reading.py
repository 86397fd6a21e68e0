"""How mzlite reads the paper: where the paper is silent or ambiguous, its words, our choice, the
alternatives and the config field that selects them (``CHOICES``, ``choices_table``; results
record every such field); the reading ablation of the choices that can change a verdict
(``ablation``); both readings of where the matrix zonotope acts (``layer_readings``). The
synthetic tasks have their own review: ``task_review``."""

from __future__ import annotations

import html
from dataclasses import dataclass

from mzlite.repro.paper import name_labels
from mzlite.repro.render import comparison_table, plain_math

from . import present
from .formatting import unsigned_zero
from .protocols import reader_name
from .reading_ablation import (  # the ablation as values; the page words and tabulates them
    DEFAULT_READING_ROW,
    DIAGNOSTIC_CELLS,
    AblationRow,
    Versus,
    ablation,
    ablation_row,
    dependence,
    results_per_cell,
)
from .results import caught_up
from .specs import prose_data
from .tables import get_table


@dataclass(frozen=True)
class Choice:
    """One reading: the paper's ``words`` at ``label`` (verbatim LaTeX, "" where silent), what
    mzlite does (``ours``), the ``switch`` (config field) selecting the ``alternatives``, where a
    result records it and the ablation that tests it (``tested``)."""

    topic: str
    label: str
    words: str
    ours: str
    alternatives: str
    switch: str
    recorded: str
    tested: str


_ENTRIES = prose_data("reading_choices.yaml")  # read once: the choices and the search's entry
CHOICES: tuple[Choice, ...] = tuple(Choice(**c) for c in _ENTRIES if "filled_from" not in c)
# how the search compares schedules: prose whose {placeholders} search.reading_entry fills
SEARCH_ENTRY = next(c for c in _ENTRIES if "filled_from" in c)


def missing_quotes(paper_tex: str, quotes=None) -> list[str]:
    """The ``quotes`` (default: the ``words`` of ``CHOICES``) that do not occur verbatim (up to
    white space) in the paper's LaTeX source; empty when every quote is the paper's."""
    source = " ".join(paper_tex.split())
    quotes = [c.words for c in CHOICES if c.words] if quotes is None else quotes
    return [q for q in quotes if " ".join(q.split()) not in source]


def choices_table(search_entry: dict | None = None) -> str:
    """``CHOICES`` as the book's page-width table, ``search_entry`` (``search.reading_entry()``)
    after "Schedule"; where a result records each choice and what tests it are footnotes."""
    choices = list(CHOICES)
    if search_entry is not None:
        at = next(i for i, c in enumerate(CHOICES) if c.topic == "Schedule") + 1
        choices.insert(at, Choice(**search_entry))
    rows = [{"topic": c.topic, "switch": c.switch,
             "paper": f"“{plain_math(c.words)}” ({c.label})" if c.words else "silent",
             "ours": f"{c.ours.rstrip('.')}. Alternatives: {c.alternatives}",
             "note": f"{c.topic}: recorded as {c.recorded}; tested by {c.tested}"}
            for c in choices]  # fmt: skip
    cols = [("topic", "Topic", 16), ("paper", "The paper says", 30),
            ("ours", "We read (and the alternatives)", 32), ("switch", "Switch", 22)]  # fmt: skip
    title = "Where a result records each choice, and what tests it"
    return str(comparison_table(rows, cols, footnote_key="note", footnote_title=title,
                                code=("switch",)))  # fmt: skip


def ablation_summary(rows: list[AblationRow] | None = None, results_dir=None) -> str:
    """The reading ablation in HTML sentences, a paragraph per diagnostic cell with results under
    the default reading: MZ against the Set Transformer, whether every run fitted (a gap is no
    optimisation failure), and which readings read it otherwise (``dependence``)."""
    rows = ablation(results_dir) if rows is None else rows
    paragraphs = []
    for *_, what in DIAGNOSTIC_CELLS:
        mine = [r for r in rows if r.cell == what]
        d = next(r for r in mine if r.reading == DEFAULT_READING_ROW)
        if not d.seeds:
            continue
        others = [r for r in mine if r.reading != DEFAULT_READING_ROW]
        (outcome, p), n_st = d.versus_st, d.st_failures
        st = "not run" if d.st_mean is None else f"{unsigned_zero(d.st_mean):.3f}"
        said = [
            f"<b>{html.escape(what)}</b>: under mzlite's reading MZ reaches R² "
            f"{r2_text(d.mean, d.std)} over {d.seeds} seeds against the Set Transformer's {st} "
            f"({outcome}" + ("" if p is None else f", p = {p:.2g}") + ").",
            ("Every MZ run fitted its training set." if n_st else "Every run fitted its training "
             "set, so a gap is not an optimisation failure.") if d.fitted == d.seeds
            else f"{d.optimisation_failures} of its runs stopped without fitting: an optimisation "
            "failure, from which nothing is read." if d.optimisation_failures else "",
            f"{n_st} of the Set Transformer's runs stopped without fitting their training sets: "
            "an optimisation failure of the baseline, from which nothing is read about MZ "
            "against it." if n_st else "",
        ]  # fmt: skip
        if otherwise := dependence(what, mine):
            words = (html.escape(present.dependence_text(d)) for d in otherwise)
            said.append("It reads otherwise under " + "; ".join(words) + ".")
        elif d.claim_verdict is not None:
            decided = [r for r in others if r.claim_verdict is not None]
            failed = [r for r in others if r.versus_st[0] == Versus.OPTIMISATION_FAILURE]
            running, n = len(others) - len(decided) - len(failed), len(decided)
            so_far = " so far" if running else ""
            notes = [f"{running} still run"] * bool(running) + [
                f"{len(failed)} more read nothing, a run of each never having fitted its training "
                "set: " + "; ".join(f"‘{html.escape(r.reading)}’" for r in failed)
            ] * bool(failed)  # fmt: skip
            said.append(
                ("No other reading is decided yet" if not n
                 else f"The one other reading decided{so_far} reads it the same way" if n == 1
                 else f"None of the {n} other readings decided{so_far} reads it otherwise")
                + (f" ({'; '.join(notes)})." if notes else ".")
            )  # fmt: skip
        paragraphs.append(f"<p>{' '.join(x for x in said if x)}</p>")
    none = "<p>No diagnostic cell has results under mzlite's reading yet.</p>"
    return "".join(paragraphs) or none


# Where the matrix zonotope acts: both readings at the paper's sizes

# (table, the literal MZ cell, its centre-adaptive twin, the Set Transformer cell beside them,
# what it is); tab:egnn-comparison's Set Transformer is ST-Large, as its MZ claim reads it
LAYER_CELLS = (
    ("tab:main-results", "F-mz_full", "ca-F-mz_full", "F-st", "Task F (rotation matching)"),
    ("tab:main-results", "G-mz_full", "ca-G-mz_full", "G-st", "Task G (MST weight)"),
    ("tab:tdof-verify", "L16-mz_1l", "ca-L16-mz_1l", "L16-st_4l",
     "Quadratic TDOF, L = 16, MZ-1L against ST-4L"),
    ("tab:tdof-verify", "L32-mz_1l", "ca-L32-mz_1l", "L32-st_4l",
     "Quadratic TDOF, L = 32, MZ-1L against ST-4L"),
    ("tab:egnn-comparison", "qt-L16-mz_full", "ca-qt-L16-mz_full", "qt-L16-st_large",
     "Quadratic TDOF, L = 16, MZ-Full against ST-Large"),
)  # fmt: skip
LAYER_ROWS = ("layer: literal (eq:mz-main)", "layer: centre-adaptive (def:relop)")


def _one_campaign(results: list[dict]) -> list[dict]:
    """One cell's seeds, refused when they ran at two commits (as ``engine.protocol_key``)."""
    if len(commits := {(r.get("provenance") or {}).get("git_commit") for r in results}) > 1:
        r = results[0]
        raise ValueError(f"{r.get('table')} {r.get('cell')}: seeds ran at {len(commits)} "
                         f"commits ({', '.join(sorted(map(str, commits)))}), not one")  # fmt: skip
    return results


def layer_campaign(results_dir=None) -> str:
    """The campaign at the paper's sizes the layer readings read whole, where the verdicts are
    read: the newest that has caught up with the older in their cells (``results.caught_up``)."""
    return caught_up([(t, c) for t, *ids, _ in LAYER_CELLS for c in ids], results_dir=results_dir)


def layer_table(results_dir=None) -> str:
    """``layer_readings`` as the page's table, captioned with the campaign it reads."""
    rows = layer_readings(results_dir)
    return ablation_table(rows, caption=campaign_caption(layer_campaign(results_dir)))


def layer_readings(results_dir=None) -> list[AblationRow]:
    """Both readings of where the matrix zonotope acts (``LAYER_ROWS``: Eq. eq:mz-main as printed,
    def:relop's centre-adaptive one) on each of ``LAYER_CELLS``, each beside its Set Transformer;
    a cell whose seeds ran at two commits raises. Read from the ``layer_campaign``."""
    for table, *ids, _ in LAYER_CELLS:
        if missing := set(ids) - {c.id for c in get_table(table).cells}:
            raise KeyError(f"{table} has no cell {sorted(missing)}: the layer readings name it")
    tables, profile = dict.fromkeys(t for t, *_ in LAYER_CELLS), layer_campaign(results_dir)
    by_table = {t: results_per_cell(t, profile, results_dir) for t in tables}
    return [ablation_row(what, reading, by_table[table], cid, st_cell, check=_one_campaign)
            for table, *mz_cells, st_cell, what in LAYER_CELLS  # the literal, then its twin
            for cid, reading in zip(mz_cells, LAYER_ROWS, strict=True)]  # fmt: skip


def num(v: float | None, spec: str = ".3f", missing: str = "–") -> str:
    return missing if v is None else format(v, spec)


def r2_text(mean: float | None, std: float | None, missing: str = "not run") -> str:
    return missing if mean is None else f"{mean:.3f}" + ("" if std is None else f" ± {std:.3f}")


def html_table(kind: str, heads, rows, caption: str = "") -> str:
    """A plain HTML table of class ``kind``: the ``caption`` (escaped) if any, the ``heads``, then
    ``rows`` of strings (escaped)."""
    head = "".join(f"<th>{h}</th>" for h in heads)
    body = "".join(f"<tr>{''.join(f'<td>{html.escape(x)}</td>' for x in row)}</tr>" for row in rows)
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return (f"<table class='{kind}'>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody>"
            "</table>")  # fmt: skip


def campaign_caption(profile: str) -> str:
    """The caption of a table read from one campaign: the glossary's name of ``profile``."""
    return f"Runs of {reader_name(profile)} (profile {profile})"


def ablation_table(rows: list[AblationRow] | None = None, caption: str = "") -> str:
    """The reading ablation as an HTML table, a row per ``AblationRow``; a run that stopped
    without fitting is counted as an optimisation failure."""
    body = []
    for r in ablation() if rows is None else rows:
        fit = f"{r.fitted} / {r.stopped}" if r.seeds else "–"
        if n := r.optimisation_failures:
            fit += f" ({n} optimisation failure{'s' * (n > 1)})"
        st = num(r.st_mean) + (f" ({r.st_failures} not fitted)" if r.st_failures else "")
        outcome, p = r.versus_st
        versus = outcome if p is None else f"{outcome} (p = {p:.2g})"
        reading = name_labels(r.reading)  # the layer rows name the paper's labels
        body.append((r.cell, reading, r2_text(r.mean, r.std), str(r.seeds), fit, st, versus))
    heads = ("Cell", "Reading", "MZ test R²", "Seeds", "Fitted / stopped", "Set Transformer R²",
             "MZ against ST")  # fmt: skip
    return html_table("mz-reading-ablation", heads, body, caption)
