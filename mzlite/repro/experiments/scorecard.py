"""The reproduction scorecard: one row per claim of the paper, our number beside it, a verdict.

    from mzlite.repro.experiments.scorecard import scorecard
    sc = scorecard()                          # every claim, best profile on disk per claim
    sc = scorecard(tables=["tab:meb"])        # the claims of one table
    print(sc.to_markdown())                   # in a notebook it renders as an HTML table

Nothing here is typed by hand: a claim is a *computation* (``Claim.expr``) over per-cell metric
values, applied twice, once to the paper's numbers (``data/paper``, through each cell's
``PaperRef``) and once to the mean of our seeds (``data/results/<profile>``). The verdict compares
our value with the claim's thresholds, which are stated in the claim's text.

Which results: for each claim the first profile of ``profiles`` (default ``PROFILE_ORDER``:
``("full", "cpu-annealed", "cpu-converged", "cpu")``) that has the cells the claim needs (a
"best baseline" needs at least one of its baselines; the row then says how many of the claim's
cells ran); the row names that profile, the seeds, the epochs, the data sizes and the device.
Smoke results
never give a verdict (their numbers mean nothing): with ``profiles=("smoke",)`` each row says
"pipeline only".

Verdicts: "holds" (our value passes the claim's test), "holds partly" (it passes the weaker test),
"does not hold here" (neither), "insufficient evidence" (see below), "not run" (no profile has
the results). A claim that passes with only some of its cells run (e.g. MZ beats the 3 of 6
baselines that ran) is "holds partly". "Here" is meant: a reduced protocol can fail a claim that
the full protocol would pass; the protocol column says what ran.

Readings and reasons: every row names the reading of the paper its MZ results were trained
under (``reading``, from the results' recorded configs: ``mzlite.repro.experiments.reading``) and a
``reason``: "holds under our reading", "does not hold under our reading", "optimisation
failure" (a run of the claim's cells stopped without fitting its training set: it never left the
mean predictor, which says nothing about the architecture, so no "does not hold" is read from
it), "depends on a reading choice" (where results of both readings exist and their verdicts
differ: both are named), or "not run". A verdict read from mzlite's first reading only (the
per-row generator LayerNorm that breaks the paper's initialisation claims) says so.

Statistics (``experiments.stats``): our value is computed from the mean over seeds of each cell, and
the row prints mean +/- std, the number of seeds and how many runs converged for the cells it
used. No verdict comes from too little: a claim whose cells have fewer than ``MIN_SEEDS`` (3)
seeds, any run that did not converge, or results of mixed protocols is "insufficient evidence",
and the row says why. Claims that one model *beats* another ("MZAttn beats the best PMA
baseline", "ST-4L at L=4 beats itself at L=32") are decided by Welch's two-sided t-test over
seeds, as the paper uses: "holds" needs the gap beyond its threshold *and* p < ``ALPHA`` (0.05)
against every compared cell that ran (the largest p is printed); a gap that passes its
threshold without significance only "holds partly".

The sequential decision rule (``refutation``; ``plan --decide`` orders the runs by it): a claim
that one cell beats every other of its column is refuted ("does not hold here") by a single
compared cell better by more than the tie with Welch's p < ALPHA, both cells with MIN_SEEDS
converged seeds of one protocol, whatever the rest of the column says or whether it ran, or,
before the column is complete, by the models run so far when the gap to the best of them fails
even the claim's weaker test without one of them being significant (another model can only
lower the gap); a claim about the best of several baselines (``Claim.monotone``) once the cells
run fail even its weaker test. Every row says which rule decided it (``decided_by``, also the
verdict's ``why``):
"refuted by ST-Large (..., Welch p = ...)", "survived N of M models ...", "the claim's
thresholds". Retirement: the one-seed ``cpu`` results leave a claim's verdict once a converged
cell of the claim exists under another profile (``row["retired"]`` says so); asked for alone
(``profiles=("cpu",)``) they still read, as the labelled ablation they are.

Choices: a tie is an R^2 gap within 0.01 ("holds partly"). "MZ beats the best" claims are
generated for every column where the paper's own numbers put MZ first, so the paper's side of
every such row is a positive gap by construction.
"""

from __future__ import annotations

import textwrap

from mzlite import nn as _nn
from mzlite.analysis.verdicts import TIE, VERDICTS, rule  # the verdict rule on numbers
from mzlite.repro import experiments as ex
from mzlite.repro import transfer
from mzlite.repro.experiments import reading as _reading
from mzlite.repro.experiments import stats as _stats
from mzlite.repro.experiments.claims import (  # re-exported: the scorecard's claims
    Claim,
    MissingCell,
    RankClaim,
    cell_paper_value,
    claims,
)
from mzlite.repro.experiments.engine import protocol_key
from mzlite.repro.experiments.formatting import agreement
from mzlite.repro.experiments.protocols import reader_name
from mzlite.repro.experiments.report import device_names, epoch_range
from mzlite.repro.experiments.results import PROFILE_ORDER  # the best evidence first
from mzlite.repro.experiments.specs import set_count_text
from mzlite.repro.experiments.stats import mean_std
from mzlite.repro.paper import name_labels
from mzlite.repro.render import scorecard_html

# What ``reading_of`` tells apart is the generator normalisation; the schedule is the protocol's
# (the regime line names it), and the reading ablation crosses the two
FIRST_READING = "mzlite's first reading (a LayerNorm on every generator row)"
DEFAULT_READING = "mzlite's reading (generators mapped as their centre)"
LOWER_IS_BETTER = ("mse", "mae", "nll", "ece", "ce")  # metrics of which less is better
# What a claim without results says: not a refusal to try, a price (coverage.py, plan --decide)
NOT_RUN_REASON = "no result yet: the coverage page (chapter 9) prices its table and its turn"


# ---------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------


def mean_getter(by_cell: dict[str, list[dict]], metric: str = "r2", rename=None):
    """``get(cell_id)``: the mean test ``metric`` over the seeds of that cell in ``by_cell``
    (``experiments.results_by_cell``), MissingCell when it has none. ``rename`` maps the claim's
    cell ids to others (chapter 5 reads its normalised-data ablation cells this way)."""

    def get(cell_id: str) -> float:
        cid = cell_id if rename is None else rename(cell_id)
        mean, _ = mean_std([r["metrics"]["test"].get(metric) for r in by_cell.get(cid, [])])
        if mean is None:
            raise MissingCell(cid)
        return mean

    return get


def _protocol(results: list[dict], profile: str) -> str:
    trained = [r for r in results if _nn.model_spec(r["model"]).trainable]
    seeds = {r["seed"] for r in trained}
    sizes = sorted({tuple(r["sizes"]) for r in results})
    sz = ", ".join("/".join(f"{n:,}" for n in s) for s in sizes)
    return (
        f"{profile}: {len(seeds)} seed(s), {epoch_range(trained)} epochs, {sz} sets, "
        f"{device_names(results)}"
    )


def regime(results: list[dict], profile: str) -> str:
    """The regime a verdict was read in, in words: the training-set size(s) of ``results`` and
    the protocol by its glossary name (``protocols.READER_NAMES``): "2K training sets, the
    reduced CPU protocol"; "5K training sets, the paper's protocol"."""
    trained = [r for r in results if _nn.model_spec(r["model"]).trainable] or results
    sizes = sorted({r["sizes"][0] for r in trained})
    words = "/".join(set_count_text(n) for n in sizes)
    return f"{words} training sets, {reader_name(profile)}"


def _no_model_learns(claim: Claim, by_cell: dict, ren) -> str:
    """Why a comparison is "no model learns it": every model's mean R^2, and the yardstick's
    (the set-statistics ridge of the same column, where it ran) beside them."""
    a, bs = claim.compare
    means = [m for m in (mean_std(_values(by_cell.get(ren(c), []), "r2"))[0] for c in (a, *bs))
             if m is not None]  # fmt: skip
    text = (f"every model of the comparison has R^2 <= {_stats.LEARNS:g} "
            f"({min(means):.2f} to {max(means):.2f})")  # fmt: skip
    spec = ex.get_table(claim.table)
    column = spec.cell(a).column
    for c in spec.cells:
        if c.model == ex.SET_STATS and c.column == column:
            y, _ = mean_std(_values(by_cell.get(ren(c.id), []), "r2"))
            if y is not None:
                text += f"; the yardstick ({ex.SET_STATS_LABEL}) reaches {y:.2f}"
    return text


def _values(results: list[dict], metric: str) -> list[float]:
    return [r["metrics"]["test"].get(metric) for r in results]


def _mean_r2(by_cell: dict, cell_id: str) -> float | None:
    return mean_std(_values(by_cell.get(cell_id, []), "r2"))[0]


def what_it_shows(claim: Claim, verdict: str, ours, by_cell: dict, rename=None) -> dict | None:
    """What a claim that holds (or holds partly) shows where that is no evidence for MZAttn,
    from the results (``{cell id: [result, ...]}``); None where it is, or where the claim does not
    hold. ``kind``:

    - ``"against"``: a ``Claim.no_gain`` claim whose gain ``ours`` is below ``-TIE``: the change
      loses R^2, so the claim holds as evidence against it; ``best``: the best trained cell of
      each column the claim reads, by mean test R^2 (``{column: cell id}``), ``r2`` their means.
    - ``"says nothing"``: a claim on a metric other than R^2 (calibration, ranking the errors)
      that reads an MZ model whose mean test R^2 is below that of another model it reads or of
      the set-statistics yardstick of its column: ``model``, ``r2``, ``beside`` (``{cell id:
      mean test R^2}`` of those).

    ``text`` says it in one clause, the line the scorecard shows under the verdict."""
    if verdict not in ("holds", "holds partly") or ours is None:
        return None
    ren = (lambda c: c) if rename is None else rename
    spec = ex.get_table(claim.table)
    if claim.no_gain and ours < -TIE:
        best, r2 = {}, {}
        for column in dict.fromkeys(spec.cell(c).column for c in claim.cells):
            means = {c.id: _mean_r2(by_cell, c.id) for c in spec.cells
                     if c.column == column and _nn.model_spec(c.model).trainable}  # fmt: skip
            means = {k: v for k, v in means.items() if v is not None}
            if means:
                best[column] = max(means, key=means.get)
                r2[best[column]] = means[best[column]]
        rows = {spec.cell(c).row for c in best.values()}
        text = (f"as evidence against {claim.no_gain}: they lose R^2 (a gain of {claim.fmt(ours)}"
                f" at best, beyond the tie of {TIE:g})")  # fmt: skip
        if len(rows) == 1 and best:
            text += f", and row {rows.pop()} is the best of every column (" + ", ".join(
                f"{c} {v:.3f}" for c, v in r2.items()
            ) + ")"  # fmt: skip
        return {"kind": "against", "change": claim.no_gain, "gain": ours, "best": best,
                "r2": r2, "text": text}  # fmt: skip
    if claim.metric == "r2":
        return None
    for c in claim.cells:
        cell = spec.cell(c)
        mz = _mean_r2(by_cell, ren(c))
        if _nn.model_spec(cell.model).family != "mz" or mz is None:
            continue
        others = [ren(o) for o in claim.cells
                  if _nn.model_spec(spec.cell(o).model).family != "mz"]  # fmt: skip
        others += [y.id for y in spec.cells if y.model == ex.SET_STATS and y.column == cell.column]
        beside = {o: _mean_r2(by_cell, o) for o in dict.fromkeys(others)}
        beside = {o: v for o, v in beside.items() if v is not None and v > mz}
        if beside:
            text = (f"says nothing for MZAttn: the MZ model it reads ({ren(c)}) predicts worse "
                    f"than the others beside it (test R^2 {mz:.3f}, against "
                    + ", ".join(f"{o} {v:.3f}" for o, v in beside.items()) + ")")  # fmt: skip
            return {"kind": "says nothing", "model": ren(c), "r2": mz, "beside": beside,
                    "text": text}  # fmt: skip
    return None


def evidence(claim: Claim, by_cell: dict[str, list[dict]], rename=None) -> dict:
    """What our value rests on: per cell of ``claim`` that ran, its seeds' summary
    (``stats.summarise``) and how many runs converged; ``problems`` (why no verdict may be
    given: too few seeds, unconverged runs, mixed protocols; empty when there are none);
    for a ``compare`` claim the Welch tests and their largest p (``p_max``); ``text``, one line
    for the row."""
    ren = (lambda c: c) if rename is None else rename
    cells, few, unconverged, mixed, failed, memorised = {}, [], [], [], [], []
    for c in claim.cells:
        res = by_cell.get(ren(c), [])
        if not res:
            continue
        summ = _stats.summarise(_values(res, claim.metric))
        verdicts = [_stats.result_convergence(r) for r in res]
        # a claim that its models fail counts a run stopped at the mean predictor as converged
        conv = sum(v["converged"] or (claim.expects_failure and bool(v.get("stopped")))
                   for v in verdicts)  # fmt: skip
        n_failed = sum(_stats.optimisation_failure(v) for v in verdicts)
        if n_failed:
            failed.append((c, n_failed, len(res)))
        kept = [_stats.kept_weights(r.get("history")) for r in res]
        mem = [k for k in kept if k["memorised"]]
        if 2 * len(mem) > len(res):  # most of its seeds
            memorised.append((c, len(mem), len(res), mem))
        cells[c] = {**summ, "converged": conv, "runs": len(res)}
        if summ["n"] < _stats.MIN_SEEDS:
            few.append((c, summ["n"]))
        if conv < len(res):
            unconverged.append((c, len(res) - conv, len(res)))
        if len({protocol_key(r) for r in res}) > 1:
            mixed.append(c)
    problems = []
    if few:
        ns = sorted({n for _, n in few})
        problems.append(
            f"{len(few)} of {len(cells)} cells have {'/'.join(map(str, ns))} seed(s) "
            f"(needs >= {_stats.MIN_SEEDS})"
        )
    if unconverged:
        bad = sum(k for _, k, _ in unconverged)
        total = sum(v["runs"] for v in cells.values())
        problems.append(f"{bad} of {total} runs did not converge")
    failures = [
        f"{c}: {k} of {n} runs stopped without fitting the training set" for c, k, n in failed
    ]
    if claim.expects_failure:  # the claim is that these models fail: their failure is evidence
        failures = []
    if mixed:
        problems.append(f"mixed protocols in {', '.join(mixed)}")
    tests, p_max, better, learns = [], None, [], None
    if claim.compare is not None:
        a, bs = claim.compare
        if a in cells:
            for b in bs:
                if b in cells:
                    w = _stats.welch(cells[a]["values"], cells[b]["values"])
                    tests.append({**w, "a": a, "b": b})
        ps = [t["p"] for t in tests]
        p_max = max(ps) if ps and None not in ps else None
        # the models of the comparison significantly better than a (lower is better for losses
        # and errors; an R^2 gap must also exceed the tie)
        sign, tie = (1.0, 0.0) if claim.metric in LOWER_IS_BETTER else (-1.0, TIE)
        better = [
            t["b"]
            for t in tests
            if t["p"] is not None and sign * t["diff"] > tie and t["p"] < _stats.ALPHA
        ]
        if claim.metric == "r2" and cells:
            learns = any(v["mean"] is not None and v["mean"] > _stats.LEARNS
                         for v in cells.values())  # fmt: skip
    focal = claim.compare[0] if claim.compare else None
    memorised_text = [
        f"{c}: {k} of {n} runs memorised (" + "; ".join(m["text"] for m in mem[:1]) + ")"
        for c, k, n, mem in memorised
        if focal is None or c == focal
    ]
    n_runs = sum(v["runs"] for v in cells.values())
    n_conv = sum(v["converged"] for v in cells.values())
    ns = sorted({v["n"] for v in cells.values()})
    text = f"n = {'/'.join(map(str, ns))} seed(s) per cell, {n_conv}/{n_runs} runs converged"
    if tests and p_max is None:
        text += "; no Welch test (needs >= 2 seeds a side)"
    elif tests:
        worst = max(tests, key=lambda t: t["p"])
        text += (
            f"; Welch p = {worst['p']:.2g} ({worst['a']} vs {worst['b']}"
            + (f", largest of {len(tests)}" if len(tests) > 1 else "")
            + ")"
        )
    return {
        "cells": cells,
        "problems": problems,
        "failures": failures,
        "memorised": memorised_text,
        "tests": tests,
        "p_max": p_max,
        "better": better,
        "learns": learns,
        "text": text,
    }


def judge(
    claim: Claim, value: float, profile: str, complete: bool = True, evidence: dict | None = None
) -> str:
    """The verdict on ``claim`` for our ``value`` computed from results of ``profile`` (the one
    place that labels a claim, see ``VERDICTS``): smoke results never give one ("pipeline
    only"); runs that never fitted decide nothing ("optimisation failure", unless failing is
    the claim: ``Claim.expects_failure``); without ``evidence`` (``scorecard.evidence``), or
    with problems in it (too few seeds, unconverged runs), "insufficient evidence". A
    ``compare`` claim in which no model learns the target is "no model learns it"; one whose
    focal model memorised is "memorised"; it "holds" only with p < ALPHA against every model
    of the comparison ("not decided" without), "holds partly" on a tie (or while some cells
    did not run, ``complete=False``), and "does not hold here" only where a model of the
    comparison is significantly better ("not decided" otherwise). A claim on thresholds of
    the mean (no ``compare``) holds, holds partly or does not hold by them."""
    if ex.get_profile(profile).name == "smoke":
        return "pipeline only"
    if evidence is not None and evidence.get("failures"):
        return "optimisation failure"
    if evidence is None or evidence["problems"]:
        return "insufficient evidence"
    if claim.compare is None:  # thresholds on the mean decide
        return rule(claim.holds(value), claim.partly(value), True, complete)
    if evidence.get("learns") is False:
        return "no model learns it"
    if evidence.get("memorised"):
        return "memorised"
    significant = evidence["p_max"] is not None and evidence["p_max"] < _stats.ALPHA
    better = bool(evidence.get("better")) or claim.size_of_gap
    return rule(claim.holds(value), claim.partly(value), significant, complete, better)


def evaluate(claim: Claim, profiles=None, results_dir=None, rename=None, *, loaded=None) -> dict:
    """The scorecard row of ``claim``: the paper's value, ours from the first profile of
    ``profiles`` whose results let the claim be computed, the protocol, the statistics
    (``evidence``) and the verdict. ``rename`` maps the claim's cell ids to others (chapter 5
    asks the MEB claims of its normalised-data ablation cells this way); a ``RankClaim`` is
    judged by ``transfer.prediction`` and takes no ``rename``. ``loaded``: results the caller
    has read already, ``{profile: ex.results_by_cell(claim.table, profile, results_dir)}``."""
    if isinstance(claim, RankClaim):
        if rename is not None:
            raise ValueError("rename applies to cell claims, not to a RankClaim")
        return _evaluate_ranks(claim, profiles, results_dir)
    if claim.paper_expr is not None:
        paper = claim.paper_expr()
    else:
        paper = claim.expr(lambda cid: cell_paper_value(claim.table, cid, claim.metric))
    row = {
        "claim": claim.id,
        "table": claim.table,
        "text": claim.text,
        "chapter": claim.chapter,
        "paper": paper,
        "paper_text": claim.fmt(paper),
        "ours": None,
        "ours_text": "--",
        "profile": None,
        "protocol": "--",
        "statistics": "--",
        "evidence": None,
        "why": "",
        "verdict": "not run",
        "reading": "",
        "reason": NOT_RUN_REASON,
        "cells": list(claim.cells),
        "decided_by": "",
        "refuted_by": None,
        "paper_table": claim.paper_table or claim.table,
        "mz_beats": _mz_beats(claim),
        "shows": None,
    }
    ren = (lambda c: c) if rename is None else rename
    order = [ex.get_profile(p).name for p in (PROFILE_ORDER if profiles is None else profiles)]
    loaded = loaded or {}
    by_profile = {
        prof: loaded[prof] if prof in loaded else ex.results_by_cell(claim.table, prof, results_dir)
        for prof in order
    }
    retired = _retired(claim, by_profile, ren)
    tried = []  # every profile with the claim's cells, best evidence first
    for prof in order:
        if prof in retired:
            continue
        res = by_profile[prof]
        try:
            ours = claim.expr(mean_getter(res, claim.metric, rename))
        except MissingCell:
            continue
        used = [r for c in claim.cells for r in res.get(ren(c), [])]
        ran = sum(bool(res.get(ren(c))) for c in claim.cells)
        ev = evidence(claim, res, rename)
        verdict = judge(claim, ours, prof, complete=ran == len(claim.cells), evidence=ev)
        refuted = refutation(claim, res, rename) if prof != "smoke" else None
        if refuted is not None and verdict not in ("no model learns it", "memorised"):
            # a significantly better model settles it; a gap that no test backs does not
            verdict = "does not hold here" if refuted["p"] is not None or claim.monotone \
                else "not decided"  # fmt: skip
        tried.append(dict(prof=prof, res=res, ours=ours, used=used, ran=ran, ev=ev,
                          verdict=verdict, refuted=refuted))  # fmt: skip
    # The verdict is read where the evidence suffices: a more trusted profile whose runs are
    # still too few (the paper's protocol, under way) is said beside it, not read instead.
    i = next((i for i, t in enumerate(tried) if t["verdict"] != "insufficient evidence"), 0)
    if tried:
        row.update(_verdict_fields(claim, tried[i], rename))
        if i:
            row["insufficient_above"] = [
                {"profile": t["prof"], "regime": regime(t["used"], t["prof"]),
                 "problems": "; ".join(t["ev"]["problems"])} for t in tried[:i]
            ]  # fmt: skip
    # the verdict's profile first; the others only say whether another reading reads otherwise
    read = tried[i : i + 1] + tried[:i] + tried[i + 1 :]
    judged = [(t["prof"], reading_of(t["used"]), t["verdict"]) for t in read]
    if retired:
        row["retired"] = retired
    if judged:
        row["reading"] = judged[0][1]
        row["reason"] = _reason(judged, claim, results_dir) + _shared_note(claim, judged[0][0], ren)
        for t in row.get("insufficient_above", []):
            row["reason"] += (
                f"; read in {t['regime']}: insufficient evidence so far ({t['problems']})"
            )
    elif retired:
        row["why"] = "; ".join(retired.values())
    return row


def _verdict_fields(claim: Claim, t: dict, rename) -> dict:
    """The row fields of ``claim`` read under one profile's results (``evaluate``'s ``tried``
    entry ``t``): ours, the regime, protocol, statistics, the verdict and why."""
    ren = (lambda c: c) if rename is None else rename
    res, verdict, ev, refuted, ran = t["res"], t["verdict"], t["ev"], t["refuted"], t["ran"]
    cover = "" if ran == len(claim.cells) else f"; {ran} of {len(claim.cells)} cells run"
    decided = refuted["text"] if refuted is not None else _decided_by(claim, verdict, ev, ran)
    if verdict == "insufficient evidence":
        why = "; ".join(ev["problems"])
    elif verdict == "optimisation failure":
        why = "; ".join(ev["failures"])
    elif verdict == "memorised":
        why = "; ".join(ev["memorised"])
    elif verdict == "no model learns it":
        why = _no_model_learns(claim, res, ren)
    else:
        why = decided
    shows = what_it_shows(claim, verdict, t["ours"], res, rename)
    if shows is not None:  # what a "holds" that is no evidence for MZAttn shows, said first
        why = f"{shows['text']}; {why}"
    return dict(
        shows=shows,
        ours=t["ours"],
        ours_text=claim.fmt(t["ours"]),
        profile=t["prof"],
        regime=regime(t["used"], t["prof"]),
        protocol=_protocol(t["used"], t["prof"]) + cover,
        statistics=ev["text"],
        evidence=ev,
        why=why,
        verdict=verdict,
        decided_by=decided,
        refuted_by=refuted,
    )


def _mz_beats(claim: Claim) -> bool:
    """A claim that an MZAttn model beats the other models of its comparison."""
    if claim.compare is None or claim.size_of_gap:
        return False
    cell = ex.get_table(claim.table).cell(claim.compare[0])
    return _nn.model_spec(cell.model).family == "mz"


def _solid(results: list[dict]) -> bool:
    """Enough for the sequential rule to lean on one cell: at least ``MIN_SEEDS`` seeds, every
    run converged, one protocol."""
    if len(results) < _stats.MIN_SEEDS:
        return False
    conv = [_stats.result_convergence(r) for r in results]
    return all(v["converged"] for v in conv) and len({protocol_key(r) for r in results}) == 1


def refutation(claim: Claim, by_cell: dict[str, list[dict]], rename=None) -> dict | None:
    """The sequential decision rule's early stop (``plan.decide`` runs a claim's column in this
    order): a claim that cell ``a`` beats every ``b`` (``compare``, on R^2) is refuted by one
    ``b`` that is better than ``a`` by more than ``TIE`` with Welch's p < ``ALPHA``, both cells
    with ``MIN_SEEDS`` converged seeds of one protocol, whatever the other cells of the column
    say or whether they ran; without one, before the column is complete, by the ``b`` run so far
    when the gap to their best already fails even the weaker test (``_gap_refutation``: another
    ``b`` can only lower it). Returns the most significant such ``b`` as ``{"cell", "model",
    "diff", "p", "text"}`` ("refuted by ST-Large (d3-st_large: R^2 +0.21 above, Welch p =
    0.003)"), or None (no such cell, or not a compare claim on R^2)."""
    ren = (lambda c: c) if rename is None else rename
    if claim.monotone:
        return _monotone_refutation(claim, by_cell, ren)
    if claim.compare is None or claim.metric != "r2":
        return None
    a, bs = claim.compare
    res_a = by_cell.get(ren(a), [])
    if not _solid(res_a):
        return None
    best = None
    for b in bs:
        res_b = by_cell.get(ren(b), [])
        if not _solid(res_b):
            continue
        w = _stats.welch(_values(res_b, claim.metric), _values(res_a, claim.metric))
        if w["diff"] is None or w["p"] is None or not (w["diff"] > TIE and w["p"] < _stats.ALPHA):
            continue
        if best is None or w["p"] < best["p"]:
            best = {"cell": b, "diff": w["diff"], "p": w["p"]}
    if best is None:
        return _gap_refutation(claim, by_cell, ren)
    best["model"] = ex.get_table(claim.table).cell(best["cell"]).row
    best["text"] = (
        f"refuted by {best['model']} ({best['cell']}: R^2 {best['diff']:+.3f} above {a}, "
        f"Welch p = {best['p']:.2g}); the rest of the column need not run"
    )
    return best


def _fails_before_complete(claim: Claim, by_cell: dict, ren, cells) -> tuple | None:
    """``(ran, value)``: the ``cells`` run so far (some, not all, each with solid evidence,
    ``_solid``) and the claim's value on them, when that value already fails even the claim's
    weaker test; None otherwise (a complete set of cells is judged as usual)."""
    ran = [c for c in cells if by_cell.get(ren(c))]
    if not ran or len(ran) == len(cells) or not all(_solid(by_cell[ren(c)]) for c in ran):
        return None
    value = claim.expr(mean_getter(by_cell, claim.metric, ren))
    return None if claim.partly(value) else (ran, value)


def _refuted_by_cells(text: str) -> dict:
    """A refutation by the cells run together, not by one cell (``refutation``'s shape)."""
    return {"cell": None, "model": None, "diff": None, "p": None, "text": text}


def _gap_refutation(claim: Claim, by_cell: dict, ren) -> dict | None:
    """A claim that ``a`` beats every ``b`` (``a`` with solid evidence: ``refutation`` checked)
    whose gap to the ``b`` run so far already fails even its weaker test, every one of them
    with solid evidence, before the rest of its column ran: the gap is ``a`` minus the best
    ``b``, so another ``b`` can only lower it. None otherwise (then the verdict comes from the
    claim's thresholds once the column is complete)."""
    bs = claim.compare[1]
    found = _fails_before_complete(claim, by_cell, ren, bs)
    if found is None:
        return None
    ran, value = found
    spec = ex.get_table(claim.table)
    return _refuted_by_cells(
        f"refuted by the {len(ran)} of {len(bs)} models of the comparison run "
        f"({', '.join(spec.cell(b).row for b in ran)}): the gap {claim.fmt(value)} fails "
        "even the weaker test, no one of them significantly, and another model can only "
        "lower it; the rest of the column need not run"
    )


def _monotone_refutation(claim: Claim, by_cell: dict, ren) -> dict | None:
    """A ``monotone`` claim that the cells run so far already fail (not even its weaker test),
    each of them with solid evidence (``_solid``): no further cell can rescue it."""
    found = _fails_before_complete(claim, by_cell, ren, claim.cells)
    if found is None:
        return None
    ran, value = found
    spec = ex.get_table(claim.table)
    return _refuted_by_cells(
        f"refuted by the {len(ran)} of {len(claim.cells)} cells run "
        f"({', '.join(spec.cell(c).row for c in ran)}): {claim.fmt(value)} fails even the "
        "weaker test, and no further cell can lower it"
    )


def _decided_by(claim: Claim, verdict: str, ev: dict, ran: int) -> str:
    """Which rule decided a verdict that no refutation decided (see ``refutation``)."""
    if verdict not in _DECIDED:
        return ""
    if claim.compare is None:
        return "the claim's thresholds, on the mean over seeds"
    n_b = len(claim.compare[1])
    tested = len(ev.get("tests") or [])
    p = "" if ev.get("p_max") is None else f" (largest Welch p = {ev['p_max']:.2g})"
    if verdict == "holds":
        return f"survived all {n_b} models of the comparison, each significantly{p}"
    if verdict == "holds partly" and ran < len(claim.cells):
        return (
            f"survived {tested} of {n_b} models so far, none significantly better{p}; "
            f"{n_b - tested} still to run (plan --decide)"
        )
    if verdict == "holds partly":
        return (
            f"survived all {n_b} models, none significantly better; the gap passes only the "
            f"claim's weaker test, or not significantly{p}"
        )
    return f"the claim's thresholds: no single model significantly better{p}"


# A profile whose results leave a claim's verdict once a better profile has a converged cell of
# the claim (the one-seed, 30-epoch ``cpu`` protocol: its results stay as a labelled ablation).
RETIRED_ONCE_CONVERGED = ("cpu",)


def _retired(claim: Claim, by_profile: dict, ren) -> dict[str, str]:
    """``{profile: why}`` for each of ``RETIRED_ONCE_CONVERGED`` among ``by_profile`` that a
    converged cell of ``claim`` under another profile of ``by_profile`` retires."""
    better = {}
    for prof, res in by_profile.items():
        if prof in RETIRED_ONCE_CONVERGED or prof == "smoke":
            continue
        n = sum(
            any(_stats.result_convergence(r)["converged"] for r in res.get(ren(c), []))
            for c in claim.cells
        )
        if n:
            better[prof] = n
    if not better:
        return {}
    prof, n = next(iter(better.items()))
    return {
        old: f"{old} results retired from this verdict ({n} converged cell(s) of the claim "
        f"under {prof}; they stay as an ablation)"
        for old in RETIRED_ONCE_CONVERGED
        if by_profile.get(old) and any(by_profile[old].get(ren(c)) for c in claim.cells)
    }


def reading_of(results: list[dict]) -> str:
    """Which of mzlite's readings of the paper the MZ results among ``results`` were trained
    under: ``DEFAULT_READING``, ``FIRST_READING``, "mixed readings", or "" (no MZ model)."""
    mz = [r for r in results if str(r.get("model", "")).startswith("mz")]
    kinds = {_reading.recorded_reading(r)[0] == "layernorm" for r in mz}
    if not kinds:
        return ""
    if len(kinds) > 1:
        return "mixed readings"
    return FIRST_READING if kinds.pop() else DEFAULT_READING


_DECIDED = {"holds": "holds", "holds partly": "holds", "does not hold here": "does not hold"}


def _reason(judged: list[tuple[str, str, str]], claim=None, results_dir=None) -> str:
    """The reason a row states, from the verdicts of every profile that has the claim's cells,
    best evidence first: under which reading it was decided, and whether another reading's
    results read otherwise: another profile's, or (for a claim on a diagnostic cell of the
    reading ablation, decided under its profile) a reading of the ablation under which MZ
    against the Set Transformer comes out otherwise (``reading.dependence``)."""
    profile, reading, verdict = judged[0]
    if verdict == "optimisation failure":
        return "optimisation failure: says nothing about the architecture"
    if verdict == "memorised":
        return "memorised: the kept weights predict no better than the mean; more data decides"
    if verdict == "no model learns it":
        return "no model learns it: a tie at the mean predictor says nothing about the claim"
    if verdict == "not decided":
        return "not decided: the gap is not significant"
    if verdict not in _DECIDED:
        return verdict
    if not reading:
        return f"{_DECIDED[verdict]} (no MZ model among its cells: no reading involved)"
    which = "our reading" if reading != FIRST_READING else "mzlite's first reading only"
    reason = f"{_DECIDED[verdict]} under {which}"
    for other_profile, other_reading, other in judged[1:]:
        if other_reading != reading and other in _DECIDED and _DECIDED[other] != _DECIDED[verdict]:
            return (
                f"depends on a reading choice: {_DECIDED[verdict]} under {reading or profile} "
                f"({profile}), {_DECIDED[other]} under {other_reading} ({other_profile})"
            )
    others = _ablation_dependence(claim, profile, results_dir) if claim is not None else []
    if others:
        return (
            f"depends on a reading choice: {reason}; MZ against the Set Transformer comes out "
            f"otherwise under " + "; ".join(others) + " (reading ablation, chapter 3)"
        )
    return reason


def _shared_note(claim, profile: str, ren) -> str:
    """Where a claim's cells are another table's runs (``experiments.shared``), which."""
    lent = ex.shared(claim.table, profile)
    lenders = list(dict.fromkeys(lent[ren(c)][0] for c in claim.cells if ren(c) in lent))
    if not lenders:
        return ""

    n = sum(ren(c) in lent for c in claim.cells)
    note = (f"; {n} of its {len(claim.cells)} cells are the same experiments as cells of "
            f"{' and '.join(lenders)} under {profile}, whose runs they read")  # fmt: skip
    return name_labels(note)


def _ablation_dependence(claim, profile: str, results_dir=None) -> list[str]:
    """``reading.dependence`` of the diagnostic cell whose MZ cell ``claim`` compares, when the
    claim was decided under the ablation's profile; empty otherwise."""
    if profile != _reading.PROFILE or not claim.compare:
        return []
    for table, _, main, _, what in _reading.DIAGNOSTIC_CELLS:
        if claim.table == table and claim.compare[0] == main:
            return _reading.dependence(what, results_dir=results_dir)
    return []


def _rank_values(kind: str, ranks: list) -> tuple[float, str]:
    """A RankClaim's number for these ranks and its (short: a table column) text: the mean
    rank, or the share of ranks in the mid-field."""

    if kind == "no-advantage":
        mean = sum(ranks) / len(ranks)
        return mean, f"{mean:.2f}"
    lo, hi = transfer.MID_FIELD
    k = sum(lo <= r <= hi for r in ranks)
    return k / len(ranks), f"{k} of {len(ranks)}"


def _evaluate_ranks(claim: RankClaim, profiles=None, results_dir=None) -> dict:
    """``evaluate`` for a ``RankClaim``: the paper's ranks of the table's settings, ours from
    the first profile of ``profiles`` with results of the table (``transfer.prediction``)."""

    paper_ranks = transfer.paper_ranks()
    paper, paper_text = _rank_values(claim.kind, paper_ranks)
    row = {
        "claim": claim.id, "table": claim.table, "text": claim.text, "chapter": claim.chapter,
        "paper": paper, "paper_text": paper_text, "ours": None, "ours_text": "--",
        "profile": None, "protocol": "--", "statistics": "--", "evidence": None, "why": "",
        "verdict": "not run", "cells": list(claim.cells), "reading": "", "reason": NOT_RUN_REASON,
        "decided_by": "", "refuted_by": None,
    }  # fmt: skip
    for profile in PROFILE_ORDER if profiles is None else profiles:
        prof = ex.get_profile(profile).name
        by_cell = ex.results_by_cell(claim.table, prof, results_dir)
        if not by_cell:
            continue
        pred = transfer.prediction(prof, results_dir)
        verdict, why = pred["verdict"], pred["reason"]
        if pred["unconverged"]:
            why += _longer_cap_note(claim, prof, results_dir)
        if pred["observed"]:
            ours, ours_text = _rank_values(claim.kind, pred["observed"])
            row.update(ours=ours, ours_text=ours_text)
        if claim.kind == "mid-field" and pred["problem"] is None:
            n, k, whole = len(pred["observed"]), pred["mid_field"], pred["n_settings"]
            lo, hi = transfer.MID_FIELD
            verdict = (
                ("holds" if n == whole else "holds partly") if k == n
                else "holds partly" if 2 * k >= n else "does not hold here"
            )  # fmt: skip
            why = f"{k} of {n} complete settings rank {lo}-{hi}" + (
                "" if n == whole else f" ({whole - n} of {whole} settings still incomplete)"
            )
        t, listed = pred["test"], ", ".join(f"{r:g}" for r in pred["observed"])
        stats_text = (
            f"MZAttn-Full's ranks by mean R^2 over seeds in the {len(pred['observed'])} complete "
            f"settings: {listed or '--'} (paper, all {pred['n_settings']}: "
            + ", ".join(f"{r:g}" for r in paper_ranks)
            + ")"
        )
        if t is not None and claim.kind == "no-advantage":
            stats_text += (
                f"; exact null: P(mean <= it) = {t['p_advantage']:.3f}, "
                f"P(mean >= it) = {t['p_disadvantage']:.3f}, smallest possible "
                f"{t['p_floor']:.2g}"
            )
        used = pred["results"] or [r for rs in by_cell.values() for r in rs]
        row.update(
            profile=prof,
            protocol=_protocol(used, prof)
            + f"; {len(pred['settings'])} of {pred['n_settings']} settings complete",
            statistics=stats_text,
            why=why,
            verdict=verdict,
        )
        reading = reading_of(used)
        row.update(reading=reading, reason=_reason([(prof, reading, verdict)]))
        if verdict in _DECIDED:
            row["decided_by"] = f"the rank test of transfer.prediction: {why}"
        break
    return row


def _longer_cap_note(claim: RankClaim, profile: str, results_dir=None) -> str:
    """What the ranks say with the capped runs' pairs rerun at a longer epoch cap (the table's
    sensitivity analysis, ``transfer.longer_cap``), when that leaves no unconverged run; the
    verdict itself stays the protocol's. Empty otherwise."""

    cap = transfer.longer_cap(profile, results_dir)
    sens = transfer.prediction(profile, results_dir, substitute=cap) if cap else None
    if sens is None or sens["unconverged"] or sens["problem"] is not None:
        return ""
    listed = ", ".join(f"{r:g}" for r in sens["observed"])
    if claim.kind == "mid-field":
        lo, hi = transfer.MID_FIELD
        read = f"{sens['mid_field']} of {len(sens['observed'])} settings rank {lo}-{hi}"
    else:
        read = f'the null test reads "{sens["verdict"]}" ({sens["reason"]})'
    return (f". With those {len(sens['substituted'])} (setting, model) pair(s) rerun at a "
            f"longer epoch cap, every run converged: ranks {listed}; {read}")  # fmt: skip


class Scorecard:
    """Rows (plain dicts, see ``evaluate``) with ``to_markdown()``, ``counts()`` and an HTML
    repr in notebooks; chapter names link to the chapter pages of the book."""

    COLUMNS = (
        "table", "claim", "paper", "ours", "protocol", "statistics", "verdict", "reason",
        "chapter",
    )  # fmt: skip

    def __init__(self, rows: list[dict], profiles: tuple[str, ...]):
        self.rows, self.profiles = rows, profiles

    def __len__(self) -> int:
        return len(self.rows)

    def counts(self) -> dict[str, int]:
        return {v: sum(r["verdict"] == v for r in self.rows) for v in VERDICTS}

    def _cells(self, r: dict) -> dict:
        return {
            "table": r["table"],
            "claim": r["text"],
            "paper": r["paper_text"],
            "ours": r["ours_text"],
            "protocol": r["protocol"],
            "statistics": r.get("statistics", "--"),
            "verdict": r["verdict"]
            + (f" ({r['why']})" if r.get("why") else "")
            + (f"; read in {r['regime']}" if r.get("regime") else "")
            + _paper_protocol_words(r),
            "reason": r.get("reason", ""),
            "chapter": r["chapter"],
        }

    def summary(self) -> str:
        c = self.counts()
        parts = [f"{n} {v}" for v, n in c.items() if n]
        return f"{len(self.rows)} claims ({', '.join(parts)}); profiles tried: {self.profiles}"

    def to_markdown(self) -> str:
        out = [self.summary(), "", "| " + " | ".join(self.COLUMNS) + " |"]
        out.append("|" + "---|" * len(self.COLUMNS))
        for r in self.rows:
            cells = self._cells(r)
            cells["chapter"] = f"[{r['chapter']}]({r['chapter']}.html)"
            out.append("| " + " | ".join(cells[c].replace("|", "/") for c in self.COLUMNS) + " |")
        return "\n".join(out)

    def to_text(self, width: int = 100) -> str:
        """One block per claim, for a terminal: the claim, paper and ours with the protocol,
        the statistics, and the verdict with its reason; blocks grouped by table."""
        out, table = [self.summary()], None
        for r in self.rows:
            c = self._cells(r)
            if r["table"] != table:
                table = r["table"]
                out += ["", f"== {table} (chapter {r['chapter']})"]
            out.append(textwrap.fill(f"- {c['claim']}", width, subsequent_indent="  "))
            for line in (
                f"paper {c['paper']}; ours {c['ours']} [{c['protocol']}]",
                f"statistics: {c['statistics']}",
                f"verdict: {c['verdict']}; {c['reason']}",
            ):
                out.append(textwrap.fill(line, width, initial_indent="    ",
                                         subsequent_indent="      "))  # fmt: skip
        return "\n".join(out)

    __str__ = to_markdown

    def _repr_html_(self) -> str:
        return scorecard_html(self)


def _paper_protocol_words(r: dict) -> str:
    """The row's verdict under the paper's protocol, for the text and markdown forms (the HTML
    row shows it as its own line); "" where it did not run."""
    pp = r.get("paper_protocol")
    if not pp:
        return ""
    return (f"; under the paper's protocol ({pp['regime']}, {pp['cells_run']} models run): "
            f"{pp['verdict']} (ours {pp['ours_text']}), "
            f"which {agreement(pp['agrees'])}")  # fmt: skip


def scorecard(tables=None, profiles=PROFILE_ORDER, results_dir=None) -> Scorecard:
    """The scorecard of ``tables`` (labels; default every registered table with claims)."""
    if isinstance(profiles, str):
        profiles = (profiles,)
    profiles = tuple(ex.get_profile(p).name for p in profiles)  # unknown profile: ValueError
    if not profiles:
        raise ValueError("profiles must name at least one profile")
    if tables is None:
        chosen = claims()
    else:
        tables = [tables] if isinstance(tables, str) else list(tables)
        chosen = [c for t in tables for c in claims(t)]
    rows = []
    for c in chosen:
        row = evaluate(c, profiles, results_dir)
        beside = per_set_normalised(c, profiles, results_dir)
        if beside is not None:
            row["normalised"] = beside
            row["reason"] += (
                f"; on per-set normalised sets (chapter 5's ablation cells, read in "
                f"{beside['regime']}): {beside['verdict']} (ours {beside['ours_text']}; "
                f"{beside['reason']})"
            )
        paper = under_paper_protocol(c, results_dir)
        if paper is not None and c.table != "tab:meb":
            # decided once here; the text, markdown and HTML forms only word it (agreement)
            paper["agrees"] = paper["verdict"] == row["verdict"]
            row["paper_protocol"] = paper
        rows.append(row)
    return Scorecard(rows, profiles)


def _twin(cell_id: str) -> str:
    """The standardised-target twin a cell trains as under the paper's protocol (``std-<id>``,
    ``cells.standardised_twin_cells``), where its table has one; the cell itself otherwise."""
    return f"std-{cell_id}"


def under_paper_protocol(claim, results_dir=None) -> dict | None:
    """``claim`` judged on its cells' standardised-target twins under the paper's protocol
    (profile full), where any of them ran: the verdict that licenses (or not) the cheaper
    protocol beside it. The row also says how many of the claim's models ran (``cells_run``)."""
    if isinstance(claim, RankClaim):
        return None
    ids = {c.id for c in ex.get_table(claim.table).cells}
    if not any(_twin(c) in ids for c in claim.cells):
        return None
    full = ex.results_by_cell(claim.table, "full", results_dir)
    row = evaluate(claim, ("full",), results_dir, loaded={"full": full},
                   rename=lambda c: _twin(c) if _twin(c) in ids else c)  # fmt: skip
    if row["verdict"] == "not run":
        return None
    row["cells_run"] = sum(bool(full.get(_twin(c))) for c in claim.cells)
    return row


def normalised_twin(cell_id: str, profile: str) -> str:
    """The d = 8 ablation cell of ``tab:meb`` that differs from main cell ``cell_id`` under
    ``profile`` only in its data (per-set normalised): targets scaled as the profile scales
    them (standardised, ``abl-d8-scale-ynorm-*``, or raw as the paper's protocol trains them,
    ``abl-d8-scale-*``; the set-statistics ridge does not depend on that)."""
    model = cell_id.split("-", 1)[1]
    standardised = ex.get_profile(profile).train.get("normalize_targets", False)
    variant = "scale-ynorm" if standardised and model != ex.SET_STATS else "scale"
    return f"abl-d8-{variant}-{model}"


def first_reading(claim, profiles=None, results_dir=None, twin=None) -> dict | None:
    """``claim`` judged under the first of ``profiles`` (default ``PROFILE_ORDER``) that ran its
    cells, or their twins ``twin(cell_id, profile)``, each profile alone (a reading never mixes
    profiles); the last profile's "not run" row where none ran, None for no profiles."""
    row = None
    for p in PROFILE_ORDER if profiles is None else profiles:
        rename = None if twin is None else (lambda c, p=p: twin(c, p))
        row = evaluate(claim, (p,), results_dir, rename=rename)
        if row["verdict"] != "not run":
            break
    return row


def per_set_normalised(claim, profiles=None, results_dir=None) -> dict | None:
    """An MEB d = 8 claim judged again on the per-set normalised ablation cells (the data
    normalisation the MEB verdict turns on, chapter 5), from the most trusted of ``profiles``
    that ran the claim's twins (``normalised_twin``: each profile's own target scaling); None
    for other claims or where no profile ran them."""
    if (
        isinstance(claim, RankClaim)
        or claim.table != "tab:meb"
        or not all(c.startswith("d8-") for c in claim.cells)
    ):
        return None
    row = first_reading(claim, profiles, results_dir, twin=normalised_twin)
    return None if row is None or row["verdict"] == "not run" else row
    for p in PROFILE_ORDER if profiles is None else profiles:
        row = evaluate(claim, (p,), results_dir, rename=lambda c, p=p: normalised_twin(c, p))
        if row["verdict"] != "not run":
            return row
    return None
