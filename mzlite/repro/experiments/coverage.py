"""Coverage: every labelled table of the paper (``data/paper/labels.json``, so a table the paper
adds shows up as "not described"), what it claims, whether it can run here, its price.

Prices: a registered table is priced by ``plan`` (``measure=False``: nothing timed), every job
still to run; an unregistered table that could run here as jobs each costing what ``plan``
expects of a like cell of a registered table (coverage.yaml's ``like``). No internet here: QM9,
ModelNet40, ScanObjectNN, CIFAR-100 and ImageNet-trained ResNet features cannot be downloaded.
"""

from __future__ import annotations

from mzlite.repro import experiments as ex
from mzlite.repro import paper
from mzlite.repro.experiments.findings import once
from mzlite.repro.experiments.formatting import cell_words, count_phrase
from mzlite.repro.experiments.plan import decide, plan
from mzlite.repro.experiments.scorecard import claims, scorecard
from mzlite.repro.experiments.specs import prose_data
from mzlite.repro.render import comparison_table, table_name

# One entry per table of the paper, in words: coverage.yaml's header says what each key holds
ENTRIES: dict[str, dict] = prose_data("coverage.yaml")


def paper_table_labels() -> list[str]:
    """Every table label of the paper in its order, from the committed ``data/paper/labels.json``
    (its entries of kind "Table"; ``tools/paper_tables.py --check`` holds it to the .tex)."""
    labels = paper.read_json(str(paper.LABELS_JSON))["labels"]
    return [k for k, v in labels.items() if v["kind"] == "Table"]


def _per_job(rows: dict, like: dict, cell: str) -> float | None:
    """CPU hours of one job priced like ``cell`` of ``like["table"]``, times ``like["scale"]``."""
    r = rows.get((like["table"], cell))
    if r is None or r["s_per_epoch"] is None:
        return None
    return r["s_per_epoch"] * r["epochs"] / 3600 * like.get("scale", 1)


_UNPRICED = {"runs_here": "", "price": None, "price_text": "--", "basis": "", "state": ""}


def coverage(profile: str = "cpu-annealed", results_dir=None) -> list:
    """One row per table label of the paper, in its order: ``label``, ``claim`` (in words),
    ``registered``, ``runs_here`` ("registered", "yes", "no: <why>"), ``price`` (expected CPU
    hours under ``profile`` of what is left to run), ``price_text``, ``basis`` (where the price
    comes from), ``state`` (the table's claim verdicts from the scorecard)."""
    prof = ex.get_profile(profile).name
    labels = paper_table_labels()
    registered = [label for label in labels if label in ex.TABLES]
    like_tables = {lk["table"] for e in ENTRIES.values() for lk in e.get("like", ())}
    priced = registered + sorted(like_tables - set(registered))
    p = once(plan, priced, prof, results_dir=results_dir, measure=False)  # every cell, done or not
    totals, by_cell = p.totals(), {(r["table"], r["cell"]): r for r in p.rows}
    scored = once(scorecard, results_dir=results_dir).rows
    out = []
    for label in labels:
        entry = ENTRIES.get(label)
        state = _state(label, scored)
        claim = entry["claim"] if entry else f"not described yet (caption: {_caption(label)[:120]})"
        row = {"label": label, "claim": claim, "registered": label in ex.TABLES, **_UNPRICED}
        if label in ex.TABLES:
            t = totals.get(label, {"cpu_h": 0.0, "todo": 0, "done": 0, "unknown": 0})
            lent = ex.shared(label, prof)  # run as cells of earlier tables: priced there
            there = [r for r in map(by_cell.get, lent.values()) if r is not None]
            shared_h = sum(r["cpu_h"] or 0.0 for r in there)
            price = t["cpu_h"] + shared_h
            unknown = t["unknown"] + sum(r["cpu_h"] is None and r["todo"] > 0 for r in there)
            lenders = " and ".join(dict.fromkeys(lender for lender, _ in lent.values()))
            basis = [
                f"`plan {label} --profile {prof} --no-measure`: {t['todo']} job(s) to run, "
                f"{t['done']} done",
                lent and f"{len(lent)} cell(s) are the same experiments as cells of {lenders} "
                f"under {prof} and run there ({sum(r['todo'] for r in there)} job(s) left, "
                f"{shared_h:.1f} CPU h, counted in both tables)",
                unknown and f"{unknown} cell(s) have no result of their model on their task to "
                f"price them by: `python -m mzlite plan {label} --profile {prof}` times them",
            ]  # fmt: skip
            row.update(runs_here="registered", price=price, basis="; ".join(filter(None, basis)),
                       price_text=f"{price:.1f}" + f" + {unknown} cell(s) unpriced" * bool(unknown),
                       state=state or "registered, no claim yet")  # fmt: skip
        elif entry is not None:
            runs, note = entry.get("runs", "yes"), entry.get("note", "")
            row.update(runs_here=runs, state="; ".join(filter(None, ("not registered", state))))
            likes = [(lk, cell) for lk in entry.get("like", ()) for cell in lk["cells"]]
            costs = [(lk, cell, _per_job(by_cell, lk, cell)) for lk, cell in likes]
            known = [lk["jobs"] * c for lk, _, c in costs if c is not None]
            unpriced = sum(c is None for *_, c in costs)
            if costs:
                row["price"] = sum(known) if known else None
                row["price_text"] = (f"~{sum(known):.1f}" if known else "?") + (
                    f" + {unpriced} unpriced" * bool(unpriced))  # fmt: skip
                parts = [
                    f"{lk['jobs']} job(s) like {paper.paper_ref(lk['table'])}'s "
                    f"{cell_words(lk['table'], cell)}"
                    + ("" if c is None else f" ({c:.2f} CPU h each)")
                    + (f", x {lk['scale']:g}" if lk.get("scale", 1) != 1 else "")
                    + (f" ({lk['why']})" if lk.get("why") else "")
                    for lk, cell, c in costs
                ]
                row["basis"] = (note + ": " if note else "") + "; ".join(parts)
            else:
                row["basis"] = note or ("cannot run here" if runs.startswith("no") else "")
        out.append(row)
    return out


def _state(label: str, scored: list[dict]) -> str:
    """The claims of table ``label`` among scorecard rows ``scored`` by verdict, in words ("3
    claims: 1 holds, 2 do not hold here"); a claim about another table's numbers counts for that
    table."""
    verdicts = [r["verdict"] for r in scored if (r.get("paper_table") or r["table"]) == label]
    if not verdicts:
        return ""
    counts = ", ".join(count_phrase(v, verdicts.count(v)) for v in dict.fromkeys(verdicts))
    return f"{len(verdicts)} claim(s): {counts}"


def _caption(label: str) -> str:
    try:
        return paper.load_paper_table(label)["caption"]
    except (OSError, KeyError, ValueError):  # a table data/paper does not hold
        return ""


def coverage_html(profile: str = "cpu-annealed", results_dir=None):
    """``coverage`` as the book's page-width table, with each price's basis as a footnote."""
    rows = coverage(profile, results_dir)
    n_reg = sum(r["registered"] for r in rows)
    n_run = sum(not r["registered"] and not r["runs_here"].startswith("no") for r in rows)
    cap = (
        f"Every labelled table of the paper ({len(rows)}): {n_reg} registered, {n_run} more that "
        f"could run here, {len(rows) - n_reg - n_run} that cannot. Prices: expected CPU hours "
        f"under {ex.get_profile(profile).name} of what is left to run."
    )
    cols = [("label", "Table", 12), ("claim", "What it claims", 40),
            ("runs_here", "Runs here?", 20), ("price_text", "CPU h", 10),
            ("state", "Verdicts", 18)]  # fmt: skip
    return comparison_table(rows, cols, caption=cap, footnote_key="basis",
                            footnote_title="Where each price comes from")  # fmt: skip


def next_steps_html(profile: str = "cpu-annealed", results_dir=None, tables=None):
    """The next step of every open claim under the sequential rule (``plan.decide`` over
    ``tables``, default every registered table with claims), cheapest first, as a page-width
    table: the claim, the runs of its next step and their price; each row's footnote is the
    command that runs the step."""
    prof = ex.get_profile(profile).name
    tables = [t for t in ex.TABLES if claims(t)] if tables is None else tables
    d = once(decide, tables, prof, results_dir=results_dir, measure=False)
    steps = d.next_steps()
    rows = [
        {"claim": r["text"], "table": table_name(r["table"]), "runs": str(r["todo"]),
         "step": r["cells_text"] + f" (step {r['step']} of {r['steps']})",
         "cpu_h": "?" if r["unknown"] else f"{r['cpu_h']:.1f}", "command": f"`{r['command']}`"}
        for r in steps
    ]  # fmt: skip
    t = d.totals()
    cap = (
        f"The next step of each of the {len(steps)} open claims under {prof}, cheapest first: "
        f"{t['next_jobs']} runs, {t['next_cpu_h']:.1f} CPU h expected in all (a step several "
        f"claims share counts once); every step of every open claim, should each survive: "
        f"{t['worst_cpu_h']:.1f} CPU h."
    )
    cols = [("claim", "Claim", 34), ("table", "Table", 18),
            ("step", "Its next step: the models", 30), ("runs", "Runs", 9),
            ("cpu_h", "CPU h", 9)]  # fmt: skip
    return comparison_table(rows, cols, caption=cap, footnote_key="command",
                            footnote_title="The command that runs each step")  # fmt: skip


__all__ = ["ENTRIES", "coverage", "coverage_html", "next_steps_html", "paper_table_labels"]
