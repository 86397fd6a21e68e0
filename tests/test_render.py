"""mzlite.repro.render: results tables made for the page (the browser test measures them at 800
px)."""

from __future__ import annotations

import re

from mzlite.repro import render
from mzlite.repro.experiments.report import Report
from mzlite.repro.experiments.scorecard import Scorecard
from mzlite.repro.paper import RAW_LABEL


def _row(table, text, verdict, protocol, ours="+0.055", why="the rule that decided it"):
    """A scorecard row as the presenter writes it (``present.row``): render shows its words."""
    return {
        "claim": "c", "table": table, "text": text, "chapter": "06_relational_benchmarks",
        "paper": 0.02, "paper_text": "+0.024", "ours": 0.05, "ours_text": ours,
        "profile": "cpu", "protocol": protocol + "; 3 of 7 cells run",
        "protocol_note": protocol, "verdict": verdict, "cells": [], "why": why,
    }  # fmt: skip


def _cells_of_rows(html: str) -> list[list[str]]:
    rows = re.findall(r"<tr>(.*?)</tr>", html, flags=re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", r, flags=re.S) for r in rows]
    return [c for c in cells if c]  # body rows (the header row has <th> only)


def test_scorecard_puts_each_verdict_and_its_rule_beside_its_claim():
    proto = "cpu: 1 seed(s), 30 epochs, 2,000/500/1,000 sets, cpu"
    sc = Scorecard(
        [
            _row(
                "tab:main-results",
                "Task A: MZAttn beats Table 3's best",
                "holds partly",
                proto,
                why="survived 3 of 6 models so far",
            ),  # fmt: skip
            _row(
                "tab:main-results",
                "Task F: <b>x</b>",
                "holds partly",
                proto,
                why="a tie: the gap is within 0.01 of zero",
            ),  # fmt: skip
            _row("tab:meb", "d = 8: fails", "does not hold here", proto, ours="0.944"),
            _row("tab:meb", "d = 16: fails", "not run", "--", ours="--"),
        ],
        ("full", "cpu"),
    )
    html = sc._repr_html_()
    rows = _cells_of_rows(html)
    # the claim not run is not a row: it is listed, collapsed, after the table
    assert len(rows) == 3 and all(len(r) == 4 for r in rows)  # claim | paper | ours | verdict
    # the presenter's reason, shown as written
    assert "holds partly" in rows[0][3] and "survived 3 of 6 models so far" in rows[0][3]
    assert "a tie: the gap is within 0.01 of zero" in rows[1][3]
    assert "Table 3&#x27;s best" in rows[0][0] and "&lt;b&gt;x" in rows[1][0]
    toggle = html[html.index('<details class="mz-not-run"') :]
    assert "1 claim not run yet, in 1 paper table " in toggle and "d = 16: fails" in toggle
    assert "</table>" not in toggle
    # one footnote for the protocol shared by the rows
    assert rows[0][2].endswith("<sup>[1]</sup>") and rows[2][2].endswith("<sup>[1]</sup>")
    assert html.count("<li>[1]") == 1 and "[2]" not in html
    # the counts in words, no Python repr of the profiles
    assert "4 claims: 2 hold partly, 1 does not hold here and 1 was not run." in html
    assert "(&#x27;full&#x27;" not in html and "('full'" not in html
    # groups named as the paper prints them, linked to their chapter; text escaped
    assert "Table 2 (Main results" in html and "Table 3 (MEB radius prediction)" in html
    assert 'href="06_relational_benchmarks.html"' in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html
    assert not RAW_LABEL.search(re.sub(r'href="[^"]*"', "", html))
    assert "table-layout:fixed" in html and "overflow-x" not in html


def test_report_groups_by_setting_with_protocol_footnotes():
    base = {"part": "main", "metric": "r2", "cells": ["x"], "ours_std": None, "ours_values": [],
            "epochs": "30", "device": "on a CPU", "paper_std": None,
            "paper_params": None}  # fmt: skip
    rows = [
        {
            **base,
            "row": "Standard",
            "column": "d=8",
            "ours_mean": 0.5,
            "seeds": [0],
            "params": 208_000,
            "paper_mean": 0.02,
            "paper_text": "0.025",
        },  # fmt: skip
        {
            **base,
            "row": "MZAttn-Full",
            "column": "d=8",
            "ours_mean": None,
            "seeds": [],
            "params": None,
            "paper_mean": 0.69,
            "paper_text": "0.691",
        },  # fmt: skip
        {
            **base,
            "row": "Standard",
            "column": "d=16",
            "ours_mean": 0.4,
            "seeds": [0, 1],
            "params": None,
            "paper_mean": 0.02,
            "paper_text": "0.020",
        },  # fmt: skip
    ]
    html = Report("tab:meb", "MEB", "cpu", rows, "see tab:hull")._repr_html_()
    assert html.count('class="mz-group"') == 2  # d=8, d=16
    assert "Table 3 (MEB radius prediction)" in html and "see Table 22" in html
    assert "208K params" in html and "not run" in html
    assert "<li>[1] cpu (the 30-epoch ablation): 1 seed, 30 epochs, on a CPU</li>" in html
    assert "<li>[2] cpu (the 30-epoch ablation): 2 seeds, 30 epochs, on a CPU</li>" in html
    # a spike is named
    rows[2] = {**rows[2], "n_runs": 2, "converged": 2, "n_trained": 2, "spiked": 1}
    html = Report("tab:meb", "MEB", "cpu", rows)._repr_html_()
    assert "converged 2/2, validation-loss spike (&gt; 2x the best before it) in 1/2" in html
    rows[2] = {**rows[2], "fell_back": 1}  # and a fall back to the mean predictor
    html = Report("tab:meb", "MEB", "cpu", rows)._repr_html_()
    assert "in 1/2, training fell back to the mean predictor in 1/2, on a CPU" in html


def test_comparison_table_and_conclusion():
    html = render.comparison_table(
        [
            {
                "q": "gates active (Figure fig:mz-analysis)",
                "paper": "78.6%",
                "ours": "71.0%",
                "verdict": "agrees",
                "rule": "within 10 points",
            }
        ],  # fmt: skip
        [
            ("q", "Quantity", 40),
            ("paper", "Paper", 15),
            ("ours", "Ours", 20),
            ("verdict", "Verdict", 25),
        ],  # fmt: skip
        verdict="verdict",
        footnote_key="rule",
        footnote_title="Rules",
    )
    assert "Figure 4" in html and "mz-verdict" in html and "<li>[1] within 10 points</li>" in html
    box = render.conclusion(["On tab:meb the pattern <appears>.", ""], title="Verdict")
    assert "Table 3" in box and "&lt;appears&gt;" in box and box.count("<p>") == 1
    assert box._repr_html_() == str(box)


def test_scorecard_shows_the_scorecards_own_reason_and_statistics():
    proto = "cpu: 1 seed(s), 30 epochs, 2,000/500/1,000 sets, cpu"
    row = _row("tab:meb", "d = 8: fails", "insufficient evidence", proto)
    row.update(why="2 of 2 cells have 1 seed(s) (needs >= 3); only 2 of the claim's 6 cells ran",
               statistics="n = 1 seed(s) per cell", regime="10K training sets, the paper's "
               "protocol", read_at="10K training sets, the paper's protocol; layer reading "
               "literal, task reading v1")  # fmt: skip
    html = Scorecard([row], ("cpu",))._repr_html_()
    verdict = _cells_of_rows(html)[0][3]
    assert "insufficient evidence" in verdict and "needs &gt;= 3" in verdict
    assert "only 2 of the claim&#x27;s 6 cells ran" in verdict and "n = 1 seed(s)" in verdict
    # where it was read and under which readings of the paper, beside the badge
    assert ("read at 10K training sets, the paper&#x27;s protocol; layer reading literal, task "
            "reading v1") in verdict  # fmt: skip


def test_report_names_the_cells_of_a_derived_row_in_words():
    from mzlite.repro.experiments.report import report

    html = str(render.report_html(report("tab:tdof-verify", "smoke", results_dir="/nonexistent")))
    assert "L4-st_4l" not in html and "mse(L = 4, ST-4L) / mse(L = 4, MZAttn-1L)" in html


def test_report_keeps_each_setting_and_metric_under_one_heading():
    base = {"part": "main", "column": "Task D", "ours_mean": 0.5, "ours_std": None,
            "ours_values": [0.5], "seeds": [0], "epochs": "30", "device": "on a CPU",
            "params": None,
            "paper_text": "--", "paper_params": None}  # fmt: skip
    rows = [
        {**base, "row": model, "metric": metric, "cells": [f"D-{model}"]}
        for model in ("Standard", "MZAttn")
        for metric in ("r2", "recall")
    ]  # a cell with two metrics: its rows alternate in the report
    html = str(render.report_html(Report("tab:main-results", "Main", "cpu", rows)))
    heads = re.findall(r'<tr class="mz-group"><th colspan="3">([^<]*)</th>', html)
    assert heads == ["Task D", "Task D, recall"]
    body = html.split("Task D, recall")
    assert body[0].count("<tr><td>") == 2 and body[1].count("<tr><td>") == 2


def test_conclusion_names_paper_labels_in_its_title_too():
    html = str(render.conclusion("see tab:meb", title="Table tab:meb (eq:quadratic-tdof)"))
    assert not RAW_LABEL.search(html)


def test_toggle_collapses_its_parts_under_one_line():
    html = str(render.toggle("The 30-epoch ablation (tab:meb)", render.conclusion("x"), "<p>y</p>"))
    assert html.count("<details") == 1 and "<details open" not in html
    assert "<summary>The 30-epoch ablation (Table 3)</summary>" in html
    assert html.index("</summary>") < html.index('<div class="mz-conclusion"') < html.index("<p>y")


def test_device_names_say_a_gpu_ran_a_cpu_protocol_in_words():
    """A run of a CPU profile that a GPU made says so in words, not "3 seeds, CPU" above
    "on NVIDIA H200"."""
    from mzlite.repro.experiments.engine import devices_of
    from mzlite.repro.experiments.present import devices_text

    def device_names(results):
        return devices_text(*devices_of(results))

    gpu = {"profile": "cpu-annealed", "provenance": {"device": "cuda", "gpu_name": "NVIDIA H200"}}
    cpu = {"profile": "cpu-annealed", "provenance": {"device": "cpu"}}
    assert device_names([cpu]) == "on a CPU"
    assert device_names([cpu, gpu]) == (
        "on a CPU and on an NVIDIA H200 GPU (a GPU, for speed, under the CPU protocol's settings)"
    )
    full = {**gpu, "profile": "full"}
    assert device_names([full]) == "on an NVIDIA H200 GPU"


def test_the_reading_table_is_the_books_table_without_raw_latex():
    """Chapter 3's "How we read the paper": the page-width table renderer (a fixed layout that
    fits its column), the paper's LaTeX as plain text, the labels as the paper prints them."""
    from mzlite.repro.experiments import reading
    from mzlite.repro.render import plain_math

    html = reading.choices_table()
    assert 'class="mz-results"' in html and "table-layout:fixed" in html
    text = re.sub(r"<style>.*?</style>|<[^>]+>", " ", html, flags=re.S)
    assert "$" not in text and "\\" not in text and "eq:" not in text
    assert "1/√(n_g d)" in text
    assert plain_math(r"LR warmup & $5$ epochs (linear $0\to10^{-4}$)") == (
        "LR warmup: 5 epochs (linear 0 → 10^-4)"
    )


def test_scorecard_gives_each_verdict_one_line_and_its_details_in_a_toggle():
    """Each claim once: the verdict, its reason in one line, the rest (the full rule, the
    statistics, the regime) in a <details> toggle; each paper table's group carries the anchor
    that the results chapters link to."""
    row = _row("tab:meb", "d = 8: fails", "does not hold here",
               "cpu-annealed: 3 seed(s), 40 epochs, 2,000/500/2,000 sets, on a CPU")  # fmt: skip
    row.update(
        why="refuted by ST-Large (p = 0.01); the rest of the column need not run",
        why_parts=("refuted by ST-Large (p = 0.01)", "the rest of the column need not run"),
        statistics="n = 3 seed(s) per cell",
        regime="2K training sets, cpu-annealed",
    )
    html = Scorecard([row], ("cpu-annealed",))._repr_html_()
    (cells,) = _cells_of_rows(html)
    visible = re.sub(r"<details.*?</details>", "", cells[3], flags=re.S)
    assert "refuted by ST-Large (p = 0.01)" in visible and "need not run" not in visible
    details = cells[3][cells[3].index("<details") :]
    assert "need not run" in details and "2K training sets, cpu-annealed" not in details
    assert "read at 2K training sets, cpu-annealed" in visible  # the regime is never hidden
    assert 'id="verdicts-tab-meb"' in html and "mz-scorecard" in html
