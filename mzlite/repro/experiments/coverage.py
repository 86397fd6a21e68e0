"""Coverage: every labelled table of the paper, what it claims, whether it can run here, its price.

    from mzlite.repro.experiments.coverage import coverage, coverage_html
    rows = coverage()              # one dict per table label of the paper, in the paper's order
    coverage_html()                # the book's page-width table (chapter 9, "Coverage")

The labels come from the paper's LaTeX (``data/paper/labels.json`` when the source is absent),
so a table the paper adds shows up as "not described" and the test that every label has exactly
one entry fails. Each row: ``label``, ``claim`` (one line, in words), ``runs_here`` ("yes",
"registered", or "no: <why>"), ``registered`` (in ``experiments.TABLES``), ``price`` (expected
CPU hours under ``profile`` of what is left to run), ``price_text``, ``basis`` (where the price
comes from) and ``state`` (a registered table's claim verdicts from the scorecard).

Prices: a registered table is priced by ``plan`` (``measure=False``: nothing timed), every job
still to run; an unregistered table that could run here as a number of jobs each costing what
``plan`` expects of a like cell of a registered table (same task and model where one exists,
scaled where the sets are larger). No internet here: QM9, ModelNet40, ScanObjectNN, CIFAR-100 and
ImageNet-trained ResNet features cannot be downloaded, so their tables cannot run; a table that
needs a model or a runner feature mzlite lacks says which.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from mzlite.repro import experiments as ex
from mzlite.repro import paper
from mzlite.repro.experiments.findings import once
from mzlite.repro.experiments.formatting import count_phrase
from mzlite.repro.experiments.plan import decide, plan
from mzlite.repro.experiments.scorecard import claims, scorecard
from mzlite.repro.paper import load_paper_table
from mzlite.repro.render import comparison_table, table_name

OFFLINE = "no: its data cannot be downloaded here (no internet)"
RUNS_IN_ECE_NLL = "yes: its numbers come from tab:ece-nll's runs (registered), priced there"


@dataclass(frozen=True)
class Like:
    """``jobs`` (cell, seed) jobs each priced like cell ``cell`` of registered table ``table``,
    times ``scale`` (``why`` says what the scale is for)."""

    table: str
    cell: str
    jobs: int
    scale: float = 1.0
    why: str = ""


@dataclass(frozen=True)
class Entry:
    """One table of the paper: what it ``claim``s, ``runs`` ("yes" or "no: why"), and for an
    unregistered table that can run, the ``like`` cells that price it and a ``note``."""

    claim: str
    runs: str = "yes"
    like: tuple[Like, ...] = ()
    note: str = ""


def _like(table: str, cells: list[str], seeds: int = 3, scale: float = 1.0, why: str = ""):
    return tuple(Like(table, c, seeds, scale, why) for c in cells)


# One line per table of the paper (in words: the paper's numbers stay in data/paper).
ENTRIES: dict[str, Entry] = {
    "tab:tdof-verify": Entry(
        "Depth separation: a 1-layer MZAttn fits the quadratic-TDOF target at every L while a "
        "4-layer Set Transformer degrades as L grows."
    ),
    "tab:main-results": Entry(
        "MZAttn is best or near-best on seven benchmarks (Tasks A-G); Tasks C (ModelNet40) and "
        "E (ScanObjectNN) cannot be downloaded here, the other five are registered."
    ),
    "tab:meb": Entry(
        "Every PMA-pooled attention baseline collapses on the minimum-enclosing-ball radius; "
        "MZAttn-Full escapes at every d."
    ),
    "tab:rotmatch-scale": Entry(
        "On rotation matching, context-rigid baselines collapse to large negative R^2 as d grows "
        "while MZAttn stays near the mean predictor."
    ),
    "tab:hypernet-rank-ext": Entry(
        "Raising HyperNet's low-rank update to r = 16, 32, 64 on the collapse tasks (hull, MEB, "
        "MST) leaves it far below MZAttn-Full: the advantage is not a capacity argument.",
        like=(
            *_like("tab:hull", ["d3-hypernet", "d6-hypernet", "d9-hypernet"], 9),
            *_like("tab:meb", ["d8-hypernet_r64", "d16-hypernet_r64", "d32-hypernet_r64"], 9),
            *_like("tab:mst-scale", ["d64-hypernet", "d128-hypernet", "d256-hypernet"], 9),
        ),
        note="3 ranks x 3 seeds per row; the MZAttn-Full column is the registered tables' own",
    ),
    "tab:mz-efficient": Entry(
        "MZ-Slim / Med / Full keep MZ's advantage over the Set Transformer: structure, not "
        "parameter count."
    ),
    "tab:egnn-comparison": Entry(
        "EGNN wins the rotation/translation-invariant targets; MZAttn wins the fixed-frame "
        "quadratic-TDOF target where invariance is the wrong prior."
    ),
    "tab:gen-ablation": Entry(
        "The matrix-generator budget n_mz: even n_mz = 1 fits the quadratic-TDOF target; more "
        "generators than the TDOF add nothing."
    ),
    "tab:ablation": Entry(
        "The zonotope generator budget n_g on set matching peaks at n_g = 4; larger budgets "
        "overfit (the paper: one seed)."
    ),
    "tab:genqk": Entry(
        "Feeding generator information (interval hull widths) into the Q/K scores helps Task A "
        "and hurts Task B: centres-only scoring is a reasonable default."
    ),
    "tab:hypernet-rank": Entry(
        "Raising HyperNet's rank from 8 to 32 does not close its gap to MZAttn on Tasks A and B; "
        "on Task B it degrades.",
        like=_like("tab:main-results", ["A-hypernet", "B-hypernet"], 9),
        note="r = 8, 16, 32 x 3 seeds on Tasks A and B; MZAttn's row is tab:main-results'",
    ),
    "tab:depth": Entry(
        "A 1-layer MZAttn beats Set Transformers of every depth from 1 to 6 encoder blocks (up "
        "to twice its parameters)."
    ),
    "tab:seq-mz": Entry(
        "MZ attention inside a sequence Transformer with positional encoding beats the standard "
        "one at every L.",
        runs="no: needs a sequence Transformer with positional encoding and its task, which "
        "mzlite does not have",
        like=_like("tab:tdof-verify", ["L16-mz_1l", "L16-st_4l"], 15),
        note="the price once both exist: 5 L x 2 models x 3 seeds, each like a 1-layer MZ or "
        "4-layer ST on the quadratic-TDOF target (a rough analogue)",
    ),
    "tab:tdof-sensitivity": Entry(
        "The correlation between each task's TDOF and MZAttn's MSE reduction survives +/-50% "
        "perturbations of every TDOF estimate.",
        runs="no (as the paper ran it): the paper does not print its 18 (task, TDOF, MSE "
        "reduction) triples; on ours it is seconds of computation once the tables it reads "
        "have converged results",
        note="no training of its own: its price is that of the 18 settings it reads",
    ),
    "tab:ambiguity": Entry(
        "MZAttn's MSE advantage over the Set Transformer on set matching holds at every "
        "correspondence-noise level sigma."
    ),
    "tab:sizegen": Entry(
        "Trained on sets of 10-30 elements, MZAttn keeps its advantage on larger test sets.",
        runs="no: the runner tests on the training distribution; a test-time set-size shift "
        "(a test split of other n) is not a cell option yet",
        like=_like("tab:main-results", ["B-st", "B-mz_full"], 3),
        note="one training per model and seed, four test splits each",
    ),
    "tab:mst-normed": Entry(
        "Under standardised targets the baselines' MST collapse disappears and MZAttn's lead "
        "shrinks to a few hundredths of R^2."
    ),
    "tab:hull-normed": Entry(
        "Under standardised targets the hull gap is non-monotonic in d: MZAttn wins at d = 6, "
        "ties at d = 9."
    ),
    "tab:uncertainty": Entry(
        "Binned by MZAttn's interval-hull width, the mean absolute error grows from the lowest "
        "to the highest bin (IHW flags errors).",
        runs=RUNS_IN_ECE_NLL,
        note="no runs of its own: tab:ece-nll's models give its numbers",
    ),
    "tab:unc-comparison": Entry(
        "IHW ranks errors about as well as MC-Dropout and a deep ensemble, in one forward pass.",
        runs=RUNS_IN_ECE_NLL,
        note="no runs of its own: tab:ece-nll's models give its numbers",
    ),
    "tab:ece-nll": Entry(
        "IHW's calibration (ECE) is on par with a 5-model deep ensemble and its NLL lower; "
        "MC-Dropout is best at 30x the inference cost."
    ),
    "tab:hull": Entry(
        "Convex-hull volume with raw targets: MZAttn beats every baseline, most at d = 3."
    ),
    "tab:mst-scale": Entry(
        "MST weight with raw targets: past d = 32 every non-MZ baseline collapses to strongly "
        "negative R^2."
    ),
    "tab:sgsp": Entry(
        "Sparse geometric set predicates: MZAttn-Full wins every d = 8 target and most others."
    ),
    "tab:scaling": Entry(
        "MZAttn's advantage on Max / Sum / Range grows with d and set size (up to n = 1000).",
        like=_like(
            "tab:main-results",
            ["A-st", "A-st_large", "A-perceiver", "A-mz_full"],
            18,
            7.8,
            "sets of ~430 elements on average against Task A's ~55 (attention "
            "through inducing points is linear in n)",
        ),  # fmt: skip
        note="6 settings x 4 models x 3 seeds of the set_stat task",
    ),
    "tab:patience-sweep": Entry(
        "On ResNet-50 k-center features every model converges whatever the patience: the "
        "ranking is not an early-stopping artefact.",
        runs=OFFLINE + " (CIFAR-100 ResNet-50 features)",
    ),
    "tab:meta-reg": Entry(
        "Few-shot meta-regression at the highest TDOF (L = 32): MZAttn beats the parameter-fair "
        "baselines at shallow depth.",
        like=(
            *_like("tab:main-results", ["A-st", "A-st_large", "A-hypernet", "A-perceiver"], 6),
            *_like("tab:main-results", ["A-st"], 6, why="LA-ST priced as the Set Transformer"),
            *_like("tab:main-results", ["A-mz_full"], 12, why="MZAttn-Full and -Large"),
        ),
        note="2 depths x 7 models x 3 seeds of the meta_regression task, priced like Task A",
    ),
    "tab:qm9": Entry(
        "QM9 molecular properties (12 targets): MZAttn is competitive with the best baselines.",
        runs=OFFLINE + " (QM9)",
    ),
    "tab:slot-baseline": Entry(
        "Slot Attention is no substitute: MZAttn beats it, Deep Sets and the Set Transformer on "
        "Max, Sum, Median and Range.",
        like=(
            *_like("tab:main-results", ["A-deepsets", "A-st", "A-mz_full"], 12),
            *_like("tab:main-results", ["A-st"], 12, why="Slot Attention priced as the ST"),
        ),
        note="4 statistics x 4 models x 3 seeds of the set_stat task, priced like Task A",
    ),
    "tab:cost": Entry(
        "MZAttn costs a small constant factor over the Set Transformer in parameters, time and "
        "memory.",
        runs="yes, as a timing (no training): minutes on this CPU; the paper's ratios are an "
        "RTX 5090's",
        note="forward and backward passes timed at three sizes; a few CPU minutes",
    ),
    "tab:transfer-matrix": Entry(
        "Transfer to real data: MZAttn-Full's rank among 7 models tracks the per-sample TDOF "
        "tier; Tier 1 runs here on scikit-learn's 8x8 digits, MNIST and CIFAR tiers cannot be "
        "downloaded."
    ),
    "tab:resnet-features": Entry(
        "Real-world SGSP on CIFAR-100 ResNet-18 features: MZAttn-Full competitive or best.",
        runs=OFFLINE + " (CIFAR-100 ResNet-18 features)",
    ),
    "tab:resnet50-scaling": Entry(
        "On k-center furthest, moving from ResNet-18 (d = 256) to ResNet-50 (d = 1024) features "
        "keeps MZAttn's ranking.",
        runs=OFFLINE + " (CIFAR-100 ResNet features)",
    ),
}


def paper_table_labels() -> list[str]:
    """Every table label of the paper in its order: parsed from the LaTeX source when it is
    there, else from the committed ``data/paper/labels.json`` (its entries of kind "Table")."""
    try:
        return paper.table_labels(paper.read_paper_tex())
    except FileNotFoundError:
        labels = json.loads(paper.LABELS_JSON.read_text(encoding="utf-8"))["labels"]
        return [k for k, v in labels.items() if v.get("kind") == "Table"]


def _per_job(rows: dict, like: Like) -> float | None:
    r = rows.get((like.table, like.cell))
    if r is None or r["s_per_epoch"] is None:
        return None
    return r["s_per_epoch"] * r["epochs"] / 3600 * like.scale


def coverage(profile: str = "cpu-annealed", results_dir=None) -> list:
    """One row per table label of the paper (see the module doc), priced under ``profile``,
    with each registered table's claim verdicts from the scorecard."""
    prof = ex.get_profile(profile).name
    labels = paper_table_labels()
    registered = [label for label in labels if label in ex.TABLES]
    like_tables = {lk.table for e in ENTRIES.values() for lk in e.like}
    priced = registered + sorted(like_tables - set(registered))
    p = once(plan, priced, prof, results_dir=results_dir, measure=False)  # every cell, done or not
    totals, by_cell = p.totals(), {(r["table"], r["cell"]): r for r in p.rows}
    verdicts = {}  # a claim about another table's numbers counts for that table
    for r in once(scorecard, results_dir=results_dir).rows:
        verdicts.setdefault(r.get("paper_table") or r["table"], []).append(r["verdict"])
    out = []
    for label in labels:
        entry = ENTRIES.get(label)
        state = _state(verdicts.get(label, []))
        row = {
            "label": label,
            "claim": entry.claim
            if entry
            else f"not described yet (caption: {_caption(label)[:120]})",
            "registered": label in ex.TABLES,
            "runs_here": "",
            "price": None,
            "price_text": "--",
            "basis": "",
            "state": "",
        }
        if label in ex.TABLES:
            t = totals.get(label, {"cpu_h": 0.0, "todo": 0, "done": 0, "unknown": 0})
            lent = ex.shared(label, prof)  # run as cells of earlier tables: priced there
            there = [r for r in map(by_cell.get, lent.values()) if r is not None]
            shared_h = sum(r["cpu_h"] or 0.0 for r in there)
            price = t["cpu_h"] + shared_h
            unknown = t["unknown"] + sum(r["cpu_h"] is None and r["todo"] > 0 for r in there)
            basis = (
                f"`plan {label} --profile {prof} --no-measure`: {t['todo']} job(s) to run, "
                f"{t['done']} done"
            )
            if lent:
                lenders = " and ".join(dict.fromkeys(lender for lender, _ in lent.values()))
                basis += (
                    f"; {len(lent)} cell(s) are the same experiments as cells of {lenders} under "
                    f"{prof} and run there ({sum(r['todo'] for r in there)} job(s) left, "
                    f"{shared_h:.1f} CPU h, counted in both tables)"
                )
            if unknown:
                basis += (
                    f"; {unknown} cell(s) have no result of their model on their task to price "
                    f"them by: `python -m mzlite plan {label} --profile {prof}` times them"
                )
            row.update(
                runs_here="registered",
                price=price,
                price_text=f"{price:.1f}" + (f" + {unknown} cell(s) unpriced" if unknown else ""),
                basis=basis,
                state=state or "registered, no claim yet",
            )
        elif entry is not None:
            row.update(
                runs_here=entry.runs,
                state=f"not registered; {state}" if state else "not registered",
            )
            costs = [(lk, _per_job(by_cell, lk)) for lk in entry.like]
            known = [lk.jobs * c for lk, c in costs if c is not None]
            unpriced = sum(c is None for _, c in costs)
            if entry.like:
                row["price"] = sum(known) if known else None
                row["price_text"] = (f"~{sum(known):.1f}" if known else "?") + (
                    f" + {unpriced} unpriced" if unpriced else ""
                )
                parts = [
                    f"{lk.jobs} job(s) like `{lk.table} {lk.cell}`"
                    + ("" if c is None else f" ({c:.2f} CPU h each)")
                    + (f", x {lk.scale:g}" if lk.scale != 1 else "")
                    + (f" ({lk.why})" if lk.why else "")
                    for lk, c in costs
                ]
                row["basis"] = (entry.note + ": " if entry.note else "") + "; ".join(parts)
            else:
                row["basis"] = entry.note or (
                    "cannot run here" if entry.runs.startswith("no") else ""
                )
        out.append(row)
    return out


def _state(verdicts: list[str]) -> str:
    """A table's claims by verdict, in words ("3 claims: 1 holds, 2 do not hold here")."""
    if not verdicts:
        return ""
    counts = {v: verdicts.count(v) for v in dict.fromkeys(verdicts)}
    return f"{len(verdicts)} claim(s): " + ", ".join(count_phrase(v, n) for v, n in counts.items())


def _caption(label: str) -> str:
    try:
        return load_paper_table(label)["caption"]
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
    cols = [
        ("label", "Table", 12),
        ("claim", "What it claims", 40),
        ("runs_here", "Runs here?", 20),
        ("price_text", "CPU h", 10),
        ("state", "Verdicts", 18),
    ]
    return comparison_table(rows, cols, caption=cap, footnote_key="basis",
                            footnote_title="Where each price comes from")  # fmt: skip


def next_steps_html(profile: str = "cpu-annealed", results_dir=None, tables=None):
    """The next step of every open claim under the sequential rule (``plan.decide`` over
    ``tables``, default every registered table with claims), cheapest first, as a page-width
    table: the claim, the runs of its next step and their price; each row's footnote is the
    command that runs the step."""
    prof = ex.get_profile(profile).name
    if tables is None:
        tables = [t for t in ex.TABLES if claims(t)]
    d = once(decide, tables, prof, results_dir=results_dir, measure=False)
    steps = d.next_steps()
    rows = [
        {
            "claim": r["text"],  # the presenter's words (present.claim_text)
            "table": table_name(r["table"]),
            "step": r["cells_text"] + f" (step {r['step']} of {r['steps']})",
            "runs": str(r["todo"]),
            "cpu_h": "?" if r["unknown"] else f"{r['cpu_h']:.1f}",
            "command": f"`{r['command']}`",
        }
        for r in steps
    ]
    t = d.totals()
    cap = (
        f"The next step of each of the {len(steps)} open claims under {prof}, cheapest first: "
        f"{t['next_jobs']} runs, {t['next_cpu_h']:.1f} CPU h expected in all (a step several "
        f"claims share counts once); every step of every open claim, should each survive: "
        f"{t['worst_cpu_h']:.1f} CPU h."
    )
    cols = [
        ("claim", "Claim", 34),
        ("table", "Table", 18),
        ("step", "Its next step: the models", 30),
        ("runs", "Runs", 9),
        ("cpu_h", "CPU h", 9),
    ]
    return comparison_table(rows, cols, caption=cap, footnote_key="command",
                            footnote_title="The command that runs each step")  # fmt: skip


__all__ = [
    "ENTRIES", "Entry", "Like", "coverage", "coverage_html", "next_steps_html",
    "paper_table_labels",
]  # fmt: skip
