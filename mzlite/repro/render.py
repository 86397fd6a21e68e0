"""Results as HTML that reads on a book page: every results table of the book (``Scorecard``,
``Report``, ``comparison_table``) has one design, made for a text column of about 700 px: a fixed
layout of at most five columns that wrap instead of scrolling; the verdict beside the claim it
judges; long repeated text (the protocol behind a number) as a footnote; paper labels as the
paper prints them ("Table 3", not "tab:meb"). The HTML carries its own stylesheet (scoped to
``.mz-results``). Nothing here computes a result: the words are the presenter's."""

from __future__ import annotations

import html
import re
from collections import Counter

from mzlite import nn as _nn
from mzlite.analysis.verdicts import VERDICTS, Label
from mzlite.repro.experiments.formatting import VERDICT_LOOK, and_join, scorecard_summary
from mzlite.repro.experiments.stats import SPIKE_FACTOR as _SPIKE_FACTOR
from mzlite.repro.paper import latex_to_text, name_labels, paper_ref, spaced
from mzlite.viz.page import fit_page

VERDICT_COLOURS = {v: look[:2] for v, look in VERDICT_LOOK.items()}
VERDICT_COLOURS |= {"agrees": ("#d4edda", "#155724"), "differs": ("#f8d7da", "#721c24")}
# table-layout is !important: the book theme's `.bd-content div.output table {table-layout: auto}`
# is more specific than one class, and under auto layout a long number widens its column and
# squeezes the claim column of the whole table to a few characters. Numbers wrap at spaces only
# (never inside a number), so a long one takes two lines of its own column instead
STYLE = """<style>
.mz-results{width:100%;max-width:100%;table-layout:fixed !important;border-collapse:collapse;
  font-size:0.88em;line-height:1.35;margin:0.4em 0 0.2em 0}
.mz-results th,.mz-results td{padding:0.3em 0.45em;vertical-align:top;text-align:left;
  white-space:normal;overflow-wrap:anywhere;word-break:normal;border-bottom:1px solid #dee2e6}
.mz-results thead th{border-bottom:2px solid #adb5bd;font-weight:600}
.mz-results tr.mz-group th{background:#f1f3f5;font-weight:600;padding-top:0.45em}
.mz-results td.mz-num{font-variant-numeric:tabular-nums;overflow-wrap:normal}
.mz-results .mz-verdict{display:inline-block;padding:0.05em 0.45em;border-radius:0.6em;
  font-weight:600}
.mz-results .mz-why,.mz-results .mz-sub{display:block;font-size:0.85em;color:#555}
.mz-results sup{font-size:0.75em}
.mz-legend{font-size:0.8em;color:#444;margin:0.2em 0 0.8em 0;padding-left:0;list-style:none}
.mz-legend li{margin:0.1em 0}
.mz-caption{font-weight:600;margin:0.6em 0 0.1em 0}
.mz-conclusion{border-left:4px solid #0d6efd;background:#f3f7ff;padding:0.5em 0.9em;
  margin:0.6em 0;border-radius:0.2em}
.mz-conclusion .mz-title{font-weight:600;margin:0 0 0.25em 0}
.mz-conclusion p{margin:0.25em 0}
details.mz-toggle{margin:0.5em 0}
details.mz-toggle>summary{cursor:pointer;font-weight:600;color:#0d6efd}
.mz-results details.mz-more{margin:0.1em 0 0 0}
.mz-results details.mz-more>summary{cursor:pointer;font-size:0.85em;color:#0d6efd}
</style>"""


class HTML(str):
    """An HTML string that notebooks display as HTML and ``print`` shows raw."""

    def _repr_html_(self) -> str:
        return str(self)


def _e(text) -> str:
    return html.escape("" if text is None else str(text))


def number_html(text: str, experiment: str, stat: str, value, spread=None) -> str:
    """``text`` (escaped) marked, invisibly, with its ``experiment`` (``experiment_key``),
    ``stat`` ("mean_r2"), ``value`` and ``spread``: ``number_conflicts`` reads the marks."""
    if value is None:
        return _e(text)
    attrs = f'data-experiment="{_e(experiment)}" data-stat="{_e(stat)}" data-value="{value:.6g}"'
    if spread is not None:
        attrs += f' data-spread="{spread:.6g}"'
    return f'<span class="mz-number" {attrs}>{_e(text)}</span>'


class Number(str):
    """A result number as a ``str`` that remembers what it is (``comparison_table`` marks it)."""

    def __new__(cls, text: str, experiment: str, stat: str, value, spread=None):
        out = super().__new__(cls, text)
        out.experiment, out.stat, out.value, out.spread = experiment, stat, value, spread
        return out

    def __reduce__(self):  # copied and pickled with what it is (dataclasses.asdict copies)
        return Number, (str(self), self.experiment, self.stat, self.value, self.spread)

    def html(self) -> str:
        return number_html(str(self), self.experiment, self.stat, self.value, self.spread)


def experiment_key(table: str, row: dict, profile: str) -> str:
    """The experiment a report row's number comes from: "tab:meb|d8-mz_full|paper-sizes" (an
    aliased cell by the cell whose runs it shows; a derived row by its two cells)."""
    return f"{table}|{row.get('same_as') or '/'.join(row['cells'])}|{profile}"


_MARKED = re.compile(r'<span class="mz-number" data-experiment="([^"]*)" data-stat="([^"]*)" '
                     r'data-value="([^"]*)"(?: data-spread="([^"]*)")?>')  # fmt: skip


def marked_numbers(page: str) -> list[tuple[str, str, str, str | None]]:
    """Every number ``number_html`` marked in ``page``: (experiment, stat, value, spread)."""
    found = _MARKED.findall(page)
    return [(html.unescape(e), html.unescape(s), v, d or None) for e, s, v, d in found]


def number_conflicts(pages: dict[str, str]) -> list[str]:
    """A line per (experiment, statistic) that ``pages`` ({where: HTML}) show with two numbers."""
    seen: dict[tuple[str, str], dict[tuple[str, str | None], list[str]]] = {}
    for where, page in pages.items():
        for exp, stat, value, spread in marked_numbers(page):
            seen.setdefault((exp, stat), {}).setdefault((value, spread), []).append(where)
    return [
        f"{exp} [{stat}]: " + "; ".join(
            f"{v}" + (f" +- {d}" if d is not None else "") + f" on {', '.join(sorted(set(w)))}"
            for (v, d), w in shown.items()
        )
        for (exp, stat), shown in seen.items() if len(shown) > 1
    ]  # fmt: skip


def verdict_badge(verdict: str) -> str:
    bg, fg = VERDICT_COLOURS.get(verdict, ("#e9ecef", "#212529"))
    return f'<span class="mz-verdict" style="background:{bg};color:{fg}">{_e(verdict)}</span>'


def table_name(label: str, title: bool = True) -> str:
    """The name of ``label`` as the paper prints it: "Table 3 (MEB radius prediction)"."""
    return paper_ref(label, title)


def tables_words(labels: list[str]) -> str:
    """ "Tables 4, 6 and 17", in order (every table label of the paper prints "Table <n>")."""
    nums = [table_name(t, title=False).removeprefix("Table ") for t in labels]
    return f"Table{'s' * (len(nums) > 1)} {and_join(sorted(nums, key=int))}"


class _Footnotes:
    """Distinct long texts (protocols) numbered in order of first use, shown as a legend."""

    def __init__(self, what: str):
        self.what, self.texts = what, []

    def mark(self, text: str) -> str:
        if not text or text == "--":
            return ""
        if text not in self.texts:
            self.texts.append(text)
        return f"<sup>[{self.texts.index(text) + 1}]</sup>"

    def legend(self) -> str:
        """The texts as a list: `backticked` spans as code, the rest with paper labels named."""
        if not self.texts:
            return ""
        items = "".join(
            f"<li>[{i}] " + "".join(f"<code>{_e(p)}</code>" if j % 2 else _e(name_labels(p))
                                    for j, p in enumerate(t.split("`"))) + "</li>"
            for i, t in enumerate(self.texts, start=1)
        )  # fmt: skip
        return f'<ul class="mz-legend"><li><b>{_e(self.what)}</b></li>{items}</ul>'


def plain_math(text: str) -> str:
    r"""A LaTeX snippet of the paper as plain text for a table cell: ``$1/\sqrt{n_g d}$`` as
    "1/√(n_g d)", a table row's ``&`` as a colon, the rest as ``paper.latex_to_text`` writes it."""
    out = re.sub(r"\\sqrt\{([^{}]*)\}", r"√(\1)", text)
    out = re.sub(r"\\hat\{([^{}]*)\}", r"\1", out)
    out = out.replace(r"\to", " → ").replace(" & ", ": ").replace(r"\|", "‖")
    return latex_to_text(out).replace("( ", "(")


def _table(colgroup: list[tuple[str, int]], body: str, kind: str = "") -> str:
    """The book's one table: (heading, width in %) columns; ``kind``: an extra class
    (``mz-scorecard``: book.css gives that table the page's width)."""
    cols = "".join(f'<col style="width:{w}%">' for _, w in colgroup)
    head = "".join(f"<th>{_e(name)}</th>" for name, _ in colgroup)
    return (f'<table class="mz-results{" " + kind if kind else ""}"><colgroup>{cols}</colgroup>'
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")  # fmt: skip


# The scorecard
def scorecard_html(sc) -> HTML:
    """The scorecard as one table grouped by paper table (linked to its chapter): claim | paper |
    ours | verdict, protocols as footnotes; the claims not run after it, collapsed."""
    notes = _Footnotes("Protocol that produced our number")
    body, table = [], None
    for r in (r for r in sc.rows if r["verdict"] != Label.NOT_RUN):
        if r["table"] != table:  # a heading row per paper table (its id: ``verdict_anchor``)
            table, num = r["table"], r["chapter"].split("_", 1)[0].lstrip("0")
            link = f'<a href="{_e(r["chapter"])}.html">chapter&nbsp;{_e(num)}</a>'
            body.append(f'<tr class="mz-group" id="{_e(verdict_anchor(table))}"><th colspan="4">'
                        f"{_e(table_name(table))} &middot; {link}</th></tr>")  # fmt: skip
        ours = _claim_number(r) + notes.mark(r.get("protocol_note") or r.get("protocol") or "")
        body.append(f"<tr><td>{_e(r['text'])}</td><td class=\"mz-num\">{_e(r['paper_text'])}</td>"
                    f'<td class="mz-num">{ours}</td><td>{_verdict_cell(r)}</td></tr>')  # fmt: skip
    # the verdict cell (badge, regime, reason, details) is what sets a row's height: it gets the
    # most room, the claim wraps to a line more (chapter 9 at 800 px: 16.2K -> 14.6K px)
    cols = [("Claim (its test)", 34), ("Paper", 10), ("Ours", 12), ("Verdict", 44)]
    summary = f'<p class="mz-caption">{_e(scorecard_summary(sc))}</p>'
    table = _table(cols, "".join(body), kind="mz-scorecard") if body else ""
    legend = notes.legend()
    if legend:  # one footnote per protocol: long, and read on request
        legend = (f'<details class="mz-toggle mz-protocols"><summary>The protocols behind our '
                  f"numbers, [1] to [{len(notes.texts)}]</summary>{legend}</details>")  # fmt: skip
    not_run = _not_run_toggle([r for r in sc.rows if r["verdict"] == Label.NOT_RUN])
    return HTML(STYLE + summary + table + legend + not_run)


def _verdict_cell(r: dict) -> str:
    """A scorecard row's verdict: the badge, its reason in one line, the rest in a toggle."""
    parts = r.get("why_parts") or (r.get("why") or r["verdict"],)  # the presenter's clauses
    line, rest = parts[0], "; ".join(parts[1:])  # the line is shown once, above the toggle
    more = [_e(rest)] if rest else []  # HTML, escaped
    if r.get("reason") not in (None, "", r["verdict"]):
        more.append(f"<strong>{_e(r['reason'])}</strong>")
    if r.get("statistics") not in (None, "", "--"):
        more.append(_e(r["statistics"]))
    spans = "".join(f'<span class="mz-why">{m}</span>' for m in more)
    details = spans and f'<details class="mz-more"><summary>details</summary>{spans}</details>'
    where = r.get("read_at", r.get("regime"))  # the presenter's: readings at the paper's sizes
    regime = f'<span class="mz-regime">read at {_e(where)}</span>' if where else ""
    return f'{verdict_badge(r["verdict"])}{regime}<span class="mz-why">{_e(line)}</span>{details}'


def _claim_number(r: dict) -> str:
    """A row's claim value, marked as that claim under its profile (and its verdict's variant)."""
    variant = getattr(r.get("value"), "variant", "")
    key = f"claim:{r['claim']}|{r.get('profile')}" + (f"|{variant}" if variant else "")
    return number_html(r["ours_text"], key, "claim_value", r.get("ours"))


def _step_price(row: dict) -> str:
    if not (step := row.get("next_step")):
        return ""
    price = "not priced yet" if step["unknown"] else f"{step['cpu_h']:.1f} CPU h"
    return f" [{step['todo']} runs, {price}]"


def verdict_anchor(table: str) -> str:
    """The id of ``table``'s group in chapter 9's scorecard ("verdicts-tab-meb")."""
    return "verdicts-" + table.replace(":", "-")


def _not_run_toggle(rows: list[dict]) -> str:
    """The claims without results, collapsed: one line per paper table, its claims below."""
    if not rows:
        return ""
    by_table: dict[str, list[dict]] = {}
    for r in rows:
        by_table.setdefault(r["table"], []).append(r)
    items = "".join(
        f"<li><b>{_e(table_name(t))}</b> ({len(rs)}): "
        + "; ".join(_e(r["text"] + _step_price(r)) for r in rs) + "</li>"
        for t, rs in by_table.items()
    )  # fmt: skip
    n, k = len(rows), len(by_table)
    reasons = {r.get("reason") for r in rows if not r.get("next_step")} - {None, ""}
    why = reasons.pop() if len(reasons) == 1 else ""
    if any(r.get("next_step") for r in rows):  # plan.priced: each claim's own next step
        why = ("in brackets, a claim's next step under the sequential rule (MZAttn, the yardstick "
               "and the strongest baselines first): its runs and their expected CPU hours"
               + (f"; the others: {why[:1].lower() + why[1:]}" if why else ""))  # fmt: skip
    why = f'<p class="mz-caption">{_e(why[:1].upper() + why[1:])}.</p>' if why else ""
    return (f'<details class="mz-not-run"><summary>{n} claim{"s" * (n != 1)} not run yet, in '
            f"{k} paper table{'s' * (k != 1)} (click to list them)</summary>"
            f'<ul class="mz-legend">{items}</ul>{why}</details>')  # fmt: skip


# A table's report (ours beside the paper's)
def evidence_note(row, profile: str | None = None) -> str:
    """A footnote on a report row's number under ``profile`` (default the row's own): protocol,
    seeds, epochs, convergence, loss spikes, falls back to the mean predictor, device."""
    row = row or {}
    prof = profile or row.get("profile")
    if prof is None or not row.get("seeds"):
        return "not run under any profile yet"
    spec = _nn.model_spec(row["model"]) if row.get("model") else None
    if spec is not None and not spec.trainable:
        return f"{prof}: {spec.display} (closed form, no training), the {prof} data sizes"
    n = len(row["seeds"])
    text = (f"{'cpu (the 30-epoch ablation)' if prof == 'cpu' else prof}: {n} "
            f"seed{'s' * (n != 1)}, {row['epochs']} epochs")  # fmt: skip
    if row.get("n_runs"):
        text += f", converged {row['converged']}/{row['n_runs']}"
    if row.get("spiked"):
        text += (f", validation-loss spike (> {_SPIKE_FACTOR:g}x the best before it) in "
                 f"{row['spiked']}/{row['n_trained']}")  # fmt: skip
    if row.get("fell_back"):
        text += (f", training fell back to the mean predictor in "
                 f"{row['fell_back']}/{row['n_trained']}")  # fmt: skip
    return text + f", {row['device']}"


def report_html(rep) -> HTML:
    """A ``Report``, a heading per setting, model (params) | ours (what ran: a footnote) | paper."""
    notes = _Footnotes("What ran behind our numbers")
    caption = (f'<p class="mz-caption">{_e(table_name(rep.label))}: ours beside the paper '
               f"(profile <code>{_e(rep.profile)}</code>)</p>")  # fmt: skip
    sections = (("main", ""), ("derived", "derived: "), ("ablation", "ablation, no paper number: "))
    body = []
    for part, prefix in sections:
        # one heading per (setting, metric), its rows together in table order: a cell with two
        # metrics (R² and a second one) would otherwise alternate between two headings
        groups: dict[str, list[dict]] = {}
        for r in (r for r in rep.rows if r["part"] == part):
            this = r["column"] if r["metric"] in ("r2", "") else f"{r['column']}, {r['metric']}"
            groups.setdefault(spaced(this), []).append(r)
        for this, rows in groups.items():
            body.append(f'<tr class="mz-group"><th colspan="3">{_e(prefix + this)}</th></tr>')
            body += [_report_row(r, rep, notes) for r in rows]
    table = _table([("Model", 44), ("Ours", 28), ("Paper", 28)], "".join(body))
    tail = f'<p class="mz-legend">{_e(name_labels(rep.notes))}</p>' if rep.notes else ""
    return HTML(STYLE + caption + table + notes.legend() + tail)


def _report_row(r: dict, rep, notes: _Footnotes) -> str:
    params = ""
    if r.get("params"):
        params = f"{r['params'] / 1e3:.0f}K params"
        if r.get("paper_params"):
            params += f" (paper {r['paper_params'] / 1e3:.0f}K)"
        params = f'<span class="mz-sub">{_e(params)}</span>'
    if r["seeds"]:
        # marked with its experiment: the cell whose runs it shows (an alias's twin), the profile
        # (a row of mixed protocols has no mean: number_html leaves it unmarked)
        key = experiment_key(rep.label, r, rep.profile)
        ours = number_html(rep.ours(r), key, f"mean_{r['metric']}", r["ours_mean"], r["ours_std"])
        ours += notes.mark(evidence_note(r, rep.profile))
    else:
        ours = '<span class="mz-sub">not run</span>'
    return (f"<tr><td>{_e(r['row'])}{params}</td><td class=\"mz-num\">{ours}</td>"
            f'<td class="mz-num">{_e(r["paper_text"])}</td></tr>')  # fmt: skip


# Any comparison, and conclusions: a cell that reads as a number is set as one
_NUMERIC = re.compile(r"[-+]?[\d.,]+(?:e[-+]?\d+)?\s*(?:±\s*[\d.,]+)?%?x?")


def comparison_table(rows: list[dict], columns: list[tuple[str, str, int]], *,
                     verdict: str | None = None, caption: str | None = None,
                     footnote_key: str | None = None, footnote_title: str = "Notes",
                     code: tuple[str, ...] = ()) -> HTML:  # fmt: skip
    """A table of ``rows`` (dicts). ``columns``: (key, heading, width in %); ``verdict``: the key
    shown as a badge; ``footnote_key``: a key whose text becomes a numbered footnote on the first
    column; ``code``: keys shown as code; every other value with paper labels named."""
    notes = _Footnotes(footnote_title)
    body = []
    for r in rows:
        tds = []
        for i, (key, _, _) in enumerate(columns):
            value = r.get(key, "")
            if key == verdict:
                cell = verdict_badge(str(value))
            elif isinstance(value, Number):
                cell = value.html()
            elif key in code:
                cell = f"<code>{_e(value)}</code>"
            else:
                cell = _e(name_labels(str(value)))
            if i == 0 and footnote_key:
                cell += notes.mark(str(r.get(footnote_key, "")))
            numeric = isinstance(value, (int, float)) or _NUMERIC.fullmatch(str(value))
            tds.append(f'<td class="mz-num">{cell}</td>' if numeric else f"<td>{cell}</td>")
        body.append("<tr>" + "".join(tds) + "</tr>")
    cap = f'<p class="mz-caption">{_e(name_labels(caption))}</p>' if caption else ""
    cols = [(heading, width) for _, heading, width in columns]
    return HTML(STYLE + cap + _table(cols, "".join(body)) + notes.legend())


def conclusion(text: str | list[str], title: str = "What the numbers say", kind: str = "") -> HTML:
    """Conclusions boxed, one ``<p>`` per string (``HTML`` as it is); ``kind``: an extra class."""
    paras = [text] if isinstance(text, str) else list(text)
    body = "".join(f"<p>{p if isinstance(p, HTML) else _e(name_labels(p))}</p>" for p in paras if p)
    return HTML(f'{STYLE}<div class="{" ".join(("mz-conclusion", kind)).strip()}"><p '
                f'class="mz-title">{_e(name_labels(title))}</p>{body}</div>')  # fmt: skip


def toggle(summary: str, *parts) -> HTML:
    """``parts`` (anything with ``_repr_html_``, or HTML strings) collapsed under ``summary``."""
    inner = "".join(p._repr_html_() if hasattr(p, "_repr_html_") else str(p) for p in parts)
    summary = _e(name_labels(summary))
    return HTML(f'{STYLE}<details class="mz-toggle"><summary>{summary}</summary>{inner}</details>')


def plot_verdicts(sc):
    """The scorecard's verdicts per paper table, stacked bars in ``VERDICT_COLOURS``."""
    import plotly.graph_objects as go

    tables = list(dict.fromkeys(r["table"] for r in sc.rows))
    counts = Counter((r["table"], r["verdict"]) for r in sc.rows)
    fig = go.Figure([
        go.Bar(name=v, y=[table_name(t, title=False) for t in tables],
               x=[counts[t, v] for t in tables], orientation="h",
               marker_color=VERDICT_COLOURS[v][0],
               marker_line={"color": VERDICT_COLOURS[v][1], "width": 1})
        for v in VERDICTS if any(counts[t, v] for t in tables)
    ])  # fmt: skip
    fig.update_layout(barmode="stack", title="Verdicts per paper table", xaxis_title="claims",
                      yaxis={"autorange": "reversed"}, height=60 + 30 * len(tables))  # fmt: skip
    return fit_page(fig)
