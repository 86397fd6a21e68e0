"""The boxes every results chapter prints (``glance``, ``pipeline_only``), written from result
rows; what one chapter alone reads lives in its module (``training_study``, ``meb_study``,
``relational``, ``transfer``). Every number comes from the result files; a verdict is worded by
``present`` and linked to, never repeated."""

from __future__ import annotations

import html

from mzlite.analysis.verdicts import Label
from mzlite.repro import experiments as ex
from mzlite.repro.experiments.claims import cell_paper_value, or_none
from mzlite.repro.experiments.findings import NOT_RUN_LABEL, SCORECARD_CHAPTER
from mzlite.repro.experiments.formatting import and_join, counts_text
from mzlite.repro.experiments.scorecard import scorecard
from mzlite.repro.render import HTML, conclusion, table_name, verdict_anchor


def paper_metric(table, cell_id: str) -> float | None:
    """The paper's mean R² of one cell (``claims.cell_paper_value``), None where it has none."""
    return or_none(cell_paper_value, table, cell_id, "r2")


def _chapter_rows(chapter: str, sc=None) -> list[dict]:
    if sc is None:
        tables = [t for t in ex.TABLES if ex.get_table(t).chapter == chapter]
        sc = scorecard(tables=tables) if tables else None
    return [r for r in (sc.rows if sc is not None else []) if r["chapter"] == chapter]


def glance(chapter: str, sentences=(), sc=None):
    """The box at the top of a results chapter: the verdict counts of its claims, its own
    ``sentences``, then a link to each of its paper tables' verdicts in chapter 9."""
    rows = _chapter_rows(chapter, sc)
    ran = {r["table"] for r in rows if r["verdict"] != Label.NOT_RUN}  # the tables with verdicts
    paras = list(sentences)
    if rows:
        counts, n = counts_text(rows), len(rows)
        paras.insert(0, f"{n} claim{'s' * (n != 1)} of the paper tested here: {counts}.")
        # each paper table to its verdicts in chapter 9 (or to the claims not run)
        links = [f'<a href="{SCORECARD_CHAPTER}.html#'
                 f'{verdict_anchor(table) if table in ran else NOT_RUN_LABEL}">'
                 f"{html.escape(table_name(table, title=False))}</a>"
                 for table in dict.fromkeys(r["table"] for r in rows)]  # fmt: skip
        paras.append(HTML(f"Each claim's verdict and its reason: {and_join(links)} in chapter 9."))
    said = ran or any(sentences)  # a verdict, or the chapter's own words on its results
    title = "What the results say" if said else "The paper's claims about this chapter"
    return conclusion(paras, title, kind="mz-glance")


def pipeline_only(what: str, profile: str, sizes, epochs: int, chapter=None, sc=None):
    """The box that says the numbers trained on a page are a pipeline check, at the scale that
    ran; ``chapter``: where the scorecard reads committed runs of it, the box says so."""
    scale = (f"{'/'.join(f'{n:,}' for n in sizes)} train/validation/test sets, {epochs} epochs, "
             "1 seed per model")  # fmt: skip
    ran = [r for r in (_chapter_rows(chapter, sc) if chapter else [])
           if r["verdict"] not in (Label.NOT_RUN, Label.PIPELINE_ONLY)]  # fmt: skip
    words = [
        f"The models trained on this page itself ran under the {profile} profile ({scale}): "
        f"their numbers check that {what} runs end to end, and no verdict is read from them.",
        f"The results of this chapter are the committed runs that the scorecard reads: "
        f"{len(ran)} of its claims have them, and chapter 9 gives their verdicts.",
    ] if ran else [
        f"No results yet. Everything on this page was trained in the page itself under the "
        f"{profile} profile: {scale}.",
        f"At that scale the numbers check that {what} runs end to end; they are not a "
        "reproduction of the paper and no verdict is read from them. Converged runs of this "
        "chapter have not been made yet.",
    ]  # fmt: skip
    return conclusion(words, title="What this page's numbers are")
