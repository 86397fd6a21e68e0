"""The one place that words a verdict (``engine.Verdict``): every page, the command line and the
landing page say one through here (``row(claim, engine.judge(claim))``, ``scorecard_text(sc)``).
Sentences are written once from the verdict's numbers and codes, cells named in words ("L = 32,
ST-4L", never an id), profiles by the glossary's names; nothing downstream parses them.
"""

from __future__ import annotations

import textwrap

from mzlite import nn as _nn
from mzlite.analysis.verdicts import ALPHA, TIE, Label
from mzlite.repro.experiments import stats as _stats
from mzlite.repro.experiments.claims import Claim, Kind, RankClaim
from mzlite.repro.experiments.engine import DECIDED, Reason, Regime, Verdict
from mzlite.repro.experiments.formatting import cell_words, markdown_table, scorecard_summary
from mzlite.repro.experiments.protocols import reader_name
from mzlite.repro.experiments.results import PAPER_SIZED
from mzlite.repro.experiments.specs import prose_data, set_count_text
from mzlite.repro.experiments.tables import get_table
from mzlite.repro.experiments.transfer_ranks import LABEL as TRANSFER
from mzlite.repro.experiments.transfer_ranks import PROBLEMS, RankTest
from mzlite.repro.paper import name_labels, paper_ref, spaced
from mzlite.tasks.readings import DEFAULT_READING as _TASK_DEFAULT

PAPER_SCALE = ("full", *PAPER_SIZED)  # the profiles at the paper's sizes
# what the generator-normalisation reading of a verdict's MZ runs is called
FIRST_READING = "mzlite's first reading (a LayerNorm on every generator row)"
DEFAULT_READING = "mzlite's reading (generators mapped as their centre)"
# What a claim without results says: not a refusal to try, a price (coverage.py, plan --decide)
NOT_RUN_REASON = "no result yet: the coverage page (chapter 9) prices its table and its turn"
# What MEB's per-set normalised twins change, worded beside a claim's verdict (scorecard)
NORMALISED = "per-set normalised sets, chapter 5's ablation cells"
# reasons whose words already say how many of the claim's cells ran
_SAYS_RAN = (Reason.INCOMPLETE, Reason.REFUTED_SO_FAR, Reason.CANNOT_HOLD, Reason.NOT_RUN)
TRANSFER_WORDS = prose_data("transfer_words.yaml")  # chapter 10's words (mzlite.repro.transfer)
RANK_REASONS = TRANSFER_WORDS["reasons"]  # per outcome (transfer_ranks.OUTCOMES)
_POLARITY = {Label.HOLDS: "holds", Label.PARTLY: "holds", Label.FAILS: "does not hold"}
# the labels no reading decides: what each says, whatever the claim
_LABEL_REASONS = {
    Label.NOT_RUN: NOT_RUN_REASON,
    Label.OPTIMISATION_FAILURE: "optimisation failure: says nothing about the architecture",
    Label.MEMORISED: "memorised: the kept weights predict no better than the mean; more data "
    "decides",
    Label.NO_MODEL_LEARNS: "no model learns it: a tie at the mean predictor says nothing about "
    "the claim",
    Label.NOT_DECIDED: "not decided: no significant difference either way",
}
# what each reading of the paper's layer does, in words (mzlite.nn.LAYER_READINGS)
LAYER_WORDS = {
    "literal": "the layer as Eq. eq:mz-main prints it (its matrix zonotope on the generator "
    "stream only)",
    "centre_adaptive": "the layer as def:relop describes it (its matrix zonotope acting on the "
    "values)",
}
# how a claim's sentence names the metric it reads
METRIC_NAMES = {
    "r2": "R²", "nll": "NLL", "ece": "ECE", "unc_spearman": "Spearman correlation with |error|",
    "bin_err_ratio": "ratio of mean |error| (highest fifth of IHW to lowest)",
}  # fmt: skip


def _row_name(table: str, cell_id: str) -> str:  # the cell's row, in words
    return spaced(get_table(table).cell(cell_id).row)


def _named(table: str, cell_ids, sep: str = ", ") -> tuple[str, str]:
    """(the cells' names joined by ``sep``, " at <column>" when they share one, else "")."""
    columns = {get_table(table).cell(c).column for c in cell_ids}
    if len(columns) != 1:
        return sep.join(cell_words(table, c) for c in cell_ids), ""
    return sep.join(_row_name(table, c) for c in cell_ids), f" at {spaced(columns.pop())}"


def _p(p) -> str:
    return "--" if p is None else f"{p:.2g}"


def value_text(claim, value, ranks=None) -> str:
    """The claim's number as its table prints it ("+0.12", "2.31x"; a rank claim's "3 of 5")."""
    if value is None:
        return "--"
    if not isinstance(claim, RankClaim):
        return claim.fmt(value)
    no_advantage = claim.kind == "no-advantage"  # a mean rank; else how many in the mid-field
    return f"{value:.2f}" if no_advantage else f"{round(value * len(ranks))} of {len(ranks)}"


def reading_words(gen_norm: str) -> str:
    """The generator-normalisation reading of a verdict's MZ runs, in words."""
    words = {"layernorm": FIRST_READING, "mixed": "mixed readings", "": ""}
    return words.get(gen_norm, DEFAULT_READING)


def regime_text(regime: Regime | None) -> str:
    """The regime a verdict was read in: "2K training sets, the reduced CPU protocol"."""
    if regime is None:
        return ""
    words = "/".join(set_count_text(n) for n in regime.train_sizes)
    return f"{words} training sets, {reader_name(regime.profile)}"


def devices_text(devices, gpu_for_cpu_profile: bool = False) -> str:
    """Where runs ran (``engine.devices_of``): "on a CPU and on an NVIDIA H200 GPU"; a GPU that
    ran a CPU profile says so (the settings stayed the CPU protocol's)."""
    names = ["on a CPU" if d == "cpu" else f"on an {d} GPU" if d[:1].upper() in "AEIOU"
             or d.startswith("NVIDIA") else f"on a {d} GPU" for d in devices]  # fmt: skip
    text = " and ".join(names) or "on an unrecorded device"
    return text + " (a GPU, for speed, under the CPU protocol's settings)" * gpu_for_cpu_profile


def protocol_text(v: Verdict, cells: bool = True) -> str:
    """What ran: "cpu-annealed: 3 seed(s), 46-82 epochs, 2,000/500/2,000 sets, on a CPU", and
    (``cells``: not in a footnote shared by rows) how many of the claim's cells ran."""
    r = v.regime
    if r is None:
        return "--"
    if v.parts:  # each part read under its own profile
        by = {}
        for p in (p for p in v.parts if p.profile):
            by.setdefault(p.profile, []).append(p.claim.split("@", 1)[1])
        return "per part: " + "; ".join(f"{', '.join(w)} under {p}" for p, w in by.items())
    lo, hi = r.epochs or (0, 0)
    epochs = "--" if r.epochs is None else str(lo) if lo == hi else f"{lo}-{hi}"
    sizes = ", ".join("/".join(f"{n:,}" for n in s) for s in r.sizes)
    text = f"{r.profile}: {len(r.seeds)} seed(s), {epochs} epochs, {sizes} sets, "
    text += devices_text(r.devices, r.gpu_for_cpu_profile)
    if v.rank is not None and v.rank.test is not None:
        text += f"; {len(v.rank.test.settings)} of {v.rank.test.n_settings} settings complete"
    elif cells and v.ran < v.n_cells:
        text += f"; {v.ran} of {v.n_cells} cells run"
    return text


def statistics_text(claim, v: Verdict) -> str:
    """Seeds per cell, converged runs, the largest Welch p (with Holm's, when it ran) and, for
    R², the yardstick on the same data; a rank claim's ranks and its exact null test."""
    if isinstance(claim, RankClaim) and v.rank is not None and v.rank.test is not None:
        rk, t = v.rank, v.rank.test.test
        listed = ", ".join(f"{r:g}" for r in rk.observed)
        text = (f"MZAttn-Full's ranks by mean R² over seeds in the {len(rk.observed)} complete "
                f"settings: {listed or '--'} (paper, all {rk.test.n_settings}: "
                + ", ".join(f"{r:g}" for r in rk.paper) + ")")  # fmt: skip
        if t is not None and rk.kind == "no-advantage":
            text += (f"; exact null: P(mean <= it) = {t['p_advantage']:.3f}, "
                     f"P(mean >= it) = {t['p_disadvantage']:.3f}, smallest possible "
                     f"{t['p_floor']:.2g}")  # fmt: skip
        return text
    if isinstance(claim, RankClaim) or not v.cells:
        return "--"
    ns = sorted({c.n for c in v.cells})
    stopped = sum(c.stopped for c in v.cells)  # counted as converged by a claim of failure
    conv, runs = sum(c.converged for c in v.cells) - stopped, sum(c.runs for c in v.cells)
    text = f"n = {'/'.join(map(str, ns))} seed(s) per cell, {conv}/{runs} runs converged"
    text += f", {stopped} stopped without fitting (the failure the paper reports)" * bool(stopped)
    if v.tests and v.p_max is None:
        text += "; no Welch test (needs >= 2 seeds a side)"
    elif v.tests:
        worst = max(v.tests, key=lambda t: t.p)
        pair, at = _named(v.table, (v.read_as(worst.a), v.read_as(worst.b)), " vs ")
        text += (f"; Welch p = {_p(worst.p)} ({pair}{at}"
                 + (f", largest of {len(v.tests)}" if len(v.tests) > 1 else "") + ")")  # fmt: skip
        if v.p_holm is not None:
            text += f"; after Holm's correction within its table, p = {_p(v.p_holm)}"
    if v.yardstick is not None and claim.metric == "r2" and v.reason != Reason.NO_MODEL_LEARNS:
        above = all(c.mean is not None and v.yardstick > c.mean for c in v.cells)
        text += f"; the yardstick (set statistics) on the same data reaches R² {v.yardstick:.2f}"
        text += ", above every model compared" if above else ""
    return text


def _problems(v: Verdict) -> list[str]:
    cells, few = v.cells, [c for c in v.cells if c.n < _stats.MIN_SEEDS]
    ns = "/".join(map(str, sorted({c.n for c in few})))
    words = {
        Reason.TOO_FEW_SEEDS: f"{len(few)} of {len(cells)} cells have {ns} seed(s) (needs >= "
        f"{_stats.MIN_SEEDS})",
        Reason.UNCONVERGED: f"{sum(c.runs - c.converged for c in cells)} of "
        f"{sum(c.runs for c in cells)} runs did not converge",
        Reason.MIXED_PROTOCOLS: "mixed protocols in "
        + ", ".join(cell_words(v.table, c.read_as) for c in cells if c.mixed),
    }  # fmt: skip
    return [words[r] for r in v.problems]


def _refutation_text(claim: Claim, v: Verdict) -> str | list[str]:
    ref, table = v.refutation, v.table
    if ref.reason == Reason.REFUTED_BY_MODEL:  # the two cells share a column: named once
        column = spaced(get_table(table).cell(v.read_as(ref.cell)).column)  # a twin's
        return [f"refuted by {_row_name(table, ref.cell)} ({column}): R² {ref.diff:+.3f} above "
                f"{_row_name(table, claim.compare[0])}, Welch p = {_p(ref.p)}",
                "the rest of the column need not run"]  # fmt: skip
    if ref.reason == Reason.REFUTED_BY_BOUND:
        held = "; ".join(f"{cell_words(table, c.read_as)} scores {c.mean:.3f}"
                         for c in v.cells if c.cell in ref.cells)  # fmt: skip
        return (f"refuted by a bound: {held}, so with R² <= 1 the claim's number is at most "
                f"{claim.fmt(ref.value)}, which fails even its weaker test, whatever the cells "
                "not yet run at this regime give")  # fmt: skip
    names = ", ".join(_row_name(table, c) for c in ref.cells)
    if v.reason == Reason.CANNOT_HOLD:  # a refutation so far that no significant model backs
        return (f"cannot hold: against the {len(ref.cells)} of {len(claim.compare[1])} models of "
                f"the comparison run so far ({names}) the gap is {claim.fmt(ref.value)}, which "
                "fails even the weaker test, and another model can only lower it; none of them "
                "is significantly better, so it is not refuted")  # fmt: skip
    return (f"refuted by the {len(ref.cells)} of {len(claim.cells)} cells run ({names}): "
            f"{claim.fmt(ref.value)} fails even the weaker test, and no further cell can "
            "lower it")  # fmt: skip


def why_parts(claim, v: Verdict) -> tuple[str, ...]:
    """The rule that decided ``v``, clause by clause (what a holding verdict shows where it is no
    evidence for MZAttn first): a page shows the first under the badge, the others in details."""
    parts = _why(claim, v)
    parts = [parts] if isinstance(parts, str) else list(parts)
    if not (v.parts or v.rank) and 0 < v.ran < v.n_cells and v.reason not in _SAYS_RAN:
        parts.append(f"only {v.ran} of the claim's {v.n_cells} cells ran")
    if v.shows is not None:
        parts.insert(0, _shows_text(v))
    return tuple(p for p in parts if p)


def _why(claim, v: Verdict) -> str | list[str]:
    r = v.reason
    if isinstance(claim, RankClaim):
        return _rank_why(v)
    if r == Reason.NOT_RUN:
        return [f"{old} results retired from this verdict (a converged cell of the claim under "
                f"{by}; they stay as an ablation)" for old, by in v.retired]  # fmt: skip
    if r == Reason.PIPELINE_ONLY:
        return "a smoke run: it checks the code, it never gives a verdict"
    if v.parts:
        parts = [f"{spaced(p.claim.split('@', 1)[1])}: {p.label.value}"
                 + (f" ({value_text(claim, p.ours)}, {regime_text(p.regime)})" if p.regime else "")
                 for p in v.parts]  # fmt: skip
        if r == Reason.PART_FAILS:
            parts[-1] += (". One part that does not hold refutes the claim, each part read at "
                          "its strongest evidence")  # fmt: skip
        return parts
    if v.refutation is not None:
        return _refutation_text(claim, v)
    if r == Reason.PATTERN:  # "reproduced": the claim's test on the pattern's cells held
        gone = "; ".join(" and ".join(cell_words(v.table, c.read_as) for c in b.cells)
                         + f" ({b.label.value}, {value_text(claim, b.ours)})"
                         for b in v.removed_by)  # fmt: skip
        return (f"the paper's pattern, read under its protocol ({claim.pattern.where}), every "
                "cell with its seeds" + (f"; removed by {gone}" if gone else ""))  # fmt: skip
    if r == Reason.OPTIMISATION_FAILURE:  # the cells with one count in one clause
        counts = dict.fromkeys((c.failed, c.runs) for c in v.cells if c.failed)
        return [f"{names}{at}: {f} of {n} runs{' each' * (len(ids) > 1)} stopped without fitting "
                "the training set" for f, n in counts
                for ids in [[c.read_as for c in v.cells if (c.failed, c.runs) == (f, n)]]
                for names, at in [_named(v.table, ids)]]  # fmt: skip
    if v.label == Label.INSUFFICIENT:
        return _problems(v)
    if r == Reason.MEMORISED:
        return [f"{cell_words(v.table, c.read_as)}: {c.memorised} of {c.runs} runs memorised"
                for c in v.cells if c.memorised]  # fmt: skip
    if r == Reason.NO_MODEL_LEARNS:
        means = [c.mean for c in v.cells if c.mean is not None]
        text = [f"every model of the comparison has R² <= {_stats.LEARNS:g} "
                f"({min(means):.2f} to {max(means):.2f})"]  # fmt: skip
        if v.yardstick is not None:
            text.append(f"the yardstick (set statistics) reaches {v.yardstick:.2f}")
        return text
    if claim.compare is None or claim.size_of_gap:
        return "the claim's thresholds, on the mean over seeds"
    n_b = len(claim.compare[1])
    p = "" if v.p_max is None else f" (largest Welch p = {_p(v.p_max)})"
    if r == Reason.SIGNIFICANT:
        return f"survived all {n_b} models of the comparison, each significantly{p}"
    if r == Reason.INCOMPLETE:
        tested = len(v.tests)
        return [f"survived {tested} of {n_b} models so far, none significantly better{p}",
                f"{n_b - tested} still to run (plan --decide)"]  # fmt: skip
    if r == Reason.TIE:
        w = _n(-claim.partly_at)  # the weaker test: a tie about 0 (R^2's), else a margin
        return (f"a tie: the gap is within {w} of zero" if _tied(claim)
                else f"the gap is at most {w} behind, the weaker test") + p  # fmt: skip
    if r == Reason.NOT_SIGNIFICANT:
        if v.p_holm is not None and v.p_max is not None and v.p_max < ALPHA <= v.p_holm:
            return (f"the gap passes the test, significantly alone (p = {_p(v.p_max)}) but not "
                    f"after Holm's correction within its table (p = {_p(v.p_holm)})")  # fmt: skip
        beyond = "a tie" if _tied(claim) else f"the claim's threshold of {_n(claim.holds_at)}"
        return f"the gap is beyond {beyond}, but no Welch test backs it either way{p}"
    # left: "does not hold", which a compared claim gets only with a model significantly better
    names, at = _named(v.table, v.better)
    return f"fails even the weaker test, and {names}{at} is significantly better{p}"


def rank_reason(test: RankTest, profile: str) -> str:
    """Why the ranks of ``transfer_ranks.rank_test`` under ``profile`` read as they do, by its
    ``outcome``: the null test's numbers, or what keeps them from a verdict (runs in words)."""
    runs = ", ".join(f"{cell_words(TRANSFER, c)} seed {s}" for c, s in test.unconverged)
    return RANK_REASONS[test.outcome].format(
        **(test.test or {}), profile=profile, label=TRANSFER, runs=runs,
        seeds=test.seeds, n_unconverged=len(test.unconverged), n_behind=test.n_behind,
        n_settings=test.n_settings, min_seeds=_stats.MIN_SEEDS, alpha=_stats.ALPHA,
    )  # fmt: skip


def _rank_why(v: Verdict) -> str:
    if v.rank is None or (test := v.rank.test) is None:
        return ""
    sens, note, mid = v.rank.longer_cap, "", v.rank.kind == "mid-field"
    if sens is not None:
        listed = ", ".join(f"{r:g}" for r in sens.observed)
        read = (f"{sens.mid_field} of {len(sens.observed)} settings rank 3-5" if mid
                else f'the null test reads "{sens.label.value}"')  # fmt: skip
        note = (f". With those {len(sens.substituted)} (setting, model) pair(s) rerun at a "
                f"longer epoch cap, every run converged: ranks {listed}; {read}")  # fmt: skip
    if not mid or test.outcome in PROBLEMS:
        return rank_reason(test, v.profile) + note
    n, whole = len(test.observed), test.n_settings
    return f"{test.mid_field} of {n} complete settings rank 3-5" + (
        f" ({whole - n} of {whole} settings still incomplete)" * (n != whole)) + note  # fmt: skip


def _shows_text(v: Verdict) -> str:
    s = v.shows
    if s.kind == "against":
        text = (f"as evidence against {s.change}: they lose R² (a gain of {s.gain:+.3f} at "
                f"best, beyond the tie of {TIE:g})")  # fmt: skip
        best = "; ".join(f"{cell_words(v.table, c)}: {r:.3f}" for c, r in s.best)
        return text + (f", and row {s.one_row} is the best of every column ({best})"
                       if s.one_row is not None else "")  # fmt: skip
    _, at = _named(v.table, (s.model, *(o for o, _ in s.beside)))
    name = (lambda c: _row_name(v.table, c)) if at else (lambda c: cell_words(v.table, c))
    return (f"says nothing for MZAttn: the MZ model it reads{at} ({name(s.model)}) predicts "
            f"worse than the others beside it (test R² {s.r2:.3f}, against "
            + "; ".join(f"{name(o)}: {r:.3f}" for o, r in s.beside) + ")")  # fmt: skip


def dependence_text(depends: tuple[str, str, float | None]) -> str:
    """A reading under which MZ against the Set Transformer reads otherwise
    (``reading_ablation.dependence``): "signed readout: MZ better (p = 0.012)"."""
    reading, outcome, p = depends
    return f"{reading}: {outcome} (p = {_p(p)})"


def reason_text(v: Verdict, twins: dict | None = None) -> str:
    """Under which reading the verdict was decided, and whether another reading's results read
    otherwise; the weaker evidence beside it; its verdict on its ``twins`` ({what: row})."""
    label = v.label
    if label in _LABEL_REASONS:
        text = _LABEL_REASONS[label]
    elif label not in DECIDED:
        text = label.value
    elif not v.reading:
        text = f"{_POLARITY[label]} (no MZ model among its cells: no reading involved)"
    else:
        which = "our reading" if v.reading != "layernorm" else "mzlite's first reading only"
        text = f"{_POLARITY[label]} under {which}"
        other = v.reading_conflict
        if other is not None:
            text = (f"depends on a reading choice: {_POLARITY[label]} under "
                    f"{reading_words(v.reading)} ({v.profile}), {_POLARITY[other.label]} under "
                    f"{reading_words(other.reading)} ({other.profile})")  # fmt: skip
        elif v.depends_on:
            text = (f"depends on a reading choice: {text}; MZ against the Set Transformer comes "
                    "out otherwise under " + "; ".join(map(dependence_text, v.depends_on))
                    + " (reading ablation, chapter 3)")  # fmt: skip
    shared = sorted({t for t, _ in v.experiments if t != v.table})
    if shared:
        n = sum(any(t != v.table for t, _ in c.experiments) for c in v.cells)
        text += (f"; {n} of its {v.n_cells} cells are the same experiments as cells of "
                 f"{' and '.join(map(paper_ref, shared))} under {v.profile}, whose runs they "
                 "read")  # fmt: skip
    for b in v.beside:
        if b.label == Label.INSUFFICIENT and b.profile_rank < v.profile_rank:
            text += f"; read in {regime_text(b.regime)}: insufficient evidence so far"
    if v.pattern is not None:  # the paper's pattern (Claim.pattern), not yet reproduced
        text += f"; the paper's pattern, under its protocol: {v.pattern.label.value} so far"
    for what, t in (twins or {}).items():  # its reason where it says more than its label
        why = "" if t["reason"].startswith(t["verdict"]) else f"; {t['reason']}"
        text += f"; on {what} (read in {t['regime']}): {t['verdict']} (ours {t['ours_text']}{why})"
    return text


def readings_words(layer: str, tasks: dict[str, int]) -> str:
    """The readings of the paper that runs were trained under, in words a referee can check: the
    layer once, then how many verdicts ran on each task reading (``tasks``, {reading: count})."""
    what = name_labels(LAYER_WORDS.get(layer, f"the layer reading {layer}"))  # data: labels
    many = len(tasks) > 1  # then how many on each
    return f"{what}, layer reading {layer}{':' if many else ','} " + ", ".join(
        f"{f'{n} ' * many}on " + ("the tasks as mzlite first generated them"
                                  if task == _TASK_DEFAULT else "the reading chosen for its task")
        + f" (task reading {task})" for task, n in tasks.items())  # fmt: skip


def readings_text(v: Verdict) -> str:
    """The layer and task readings of the runs behind ``v`` ("layer reading v1, task reading
    literal"), as each result recorded them; "" where nothing ran."""
    if not (v.layer_reading or v.task_reading):
        return ""
    if not v.layer_reading:  # no MZ model among its cells: no layer was read
        return f"task reading {v.task_reading} (no MZ layer among its models)"
    return f"layer reading {v.layer_reading}, task reading {v.task_reading or '--'}"


def _n(x: float) -> str:
    """A threshold as a claim's test prints it: 0.90, 0.01, 2, 0."""
    return f"{x:g}" if x == int(x) else f"{x:.2f}"


def _tied(claim) -> bool:  # a beats claim's weaker test is a tie about 0, as R^2's are
    return claim.holds_at == -claim.partly_at


def claim_text(claim) -> str:
    """The claim as every page states it: the paper's words (``says``), then its test worded from
    its kind and thresholds (typed once, in the claim); a rank claim's as registered."""
    if isinstance(claim, RankClaim):
        return claim.text
    m, h, p = METRIC_NAMES.get(claim.metric, claim.metric), claim.holds_at, claim.partly_at
    lowest = "lowest " * bool(claim.every)
    weaker = f"a tie within {_n(-p)})." if _tied(claim) else f"at most {_n(-p)} behind)."
    test = {
        Kind.BEATS: f" ({m} gap > {_n(h)}, significantly; partly: {weaker}",
        Kind.AT_LEAST: f": its {lowest}{m} is >= {_n(h)} (partly: >= {_n(p)}).",
        Kind.AT_MOST: f": the best of them has {m} <= {_n(h)} (partly: <= {_n(p)}).",
        Kind.DROP: f" by >= {_n(h)} (partly: by >= {_n(p)}).",
        Kind.NO_GAIN: f" by at most {_n(h)} (partly: {_n(p)}).",
        Kind.ON_PAR: f": they differ by at most {_n(h)} (partly: {_n(p)}).",
        Kind.NEAR_BEST: f": its {m} is at most {_n(-h)} below the best of theirs (partly: "
        f"{_n(-p)}).",
    }
    return claim.says + test[claim.kind]


def statement(claim) -> str:
    """The claim led by its paper table ("Table 3, d = 8: ..."), unless it names one itself."""
    if getattr(claim, "paper_table", None):
        return claim_text(claim)
    return f"{paper_ref(claim.table)}, {claim_text(claim)}"


def verdict_line(r: dict) -> str:
    """One verdict in two sentences, from its scorecard row: the claim, then the verdict with
    ours beside the paper's, where and under which readings, and the rule that decided it."""
    head = r["statement"]
    text = f"{head}{'' if head.endswith('.') else '.'} {r['verdict'].capitalize()}"
    if r["verdict"] == Label.NOT_RUN.value:
        return text + "."
    where = "; ".join(x for x in (r["regime"], r["readings"]) if x)
    ours = f"ours {r['ours_text']}, " * (r.get("ours") is not None)  # none: the reason says why
    text += f": {ours}the paper's {r['paper_text']}" + (
        f" (read at {where})" if where else "")  # fmt: skip
    return text + (f"; {r['why']}." if r["why"] else ".")


def row(claim, v: Verdict, twins: dict | None = None) -> dict:
    """The scorecard row of ``claim`` judged as ``v``: every field a page reads, and ``value``,
    the verdict. ``twins``: {what they change: the claim's row on them} (MEB's per-set
    normalised cells, ``Claim.twins``)."""
    parts, ref, regime = why_parts(claim, v), v.refutation, regime_text(v.regime)
    if v.parts:  # each part's regime (the claim's own is its weakest part's)
        regime = "; ".join(dict.fromkeys(regime_text(p.regime) for p in v.parts if p.regime))
    beside = [{"regime": regime_text(b.regime), "verdict": b.label.value,
               "ours_text": value_text(claim, b.ours, b.rank and b.rank.observed)}
              for b in v.beside]  # fmt: skip
    beats = not (isinstance(claim, RankClaim) or claim.compare is None or claim.size_of_gap)
    if beats:  # a claim that an MZAttn model beats the other models of its comparison
        beats = _nn.model_spec(get_table(claim.table).cell(claim.compare[0]).model).family == "mz"
    # where it was read, as its row says it: at the paper's sizes, with the readings too
    read_at = (regime, readings_text(v) if v.profile in PAPER_SCALE else "")
    return {
        "claim": claim.id, "table": claim.table,
        "text": claim_text(claim),  # the claim as registered (its test included)
        "statement": statement(claim), "chapter": get_table(claim.table).chapter,
        "paper": v.paper, "paper_text": value_text(claim, v.paper, v.rank and v.rank.paper),
        "ours": v.ours, "ours_text": value_text(claim, v.ours, v.rank and v.rank.observed),
        "profile": v.profile, "regime": regime, "read_at": "; ".join(x for x in read_at if x),
        "protocol": protocol_text(v), "protocol_note": protocol_text(v, cells=False),
        "statistics": statistics_text(claim, v), "why": "; ".join(parts), "why_parts": parts,
        "verdict": v.label.value, "reason_code": v.reason.value,
        "reading": reading_words(v.reading), "reason": reason_text(v, twins),
        **({"twins": twins} if twins else {}), "readings": readings_text(v),
        "cells": list(claim.cells),
        "refuted_by": None if ref is None else {"cell": ref.cell, "diff": ref.diff, "p": ref.p},
        "paper_table": getattr(claim, "paper_table", None) or claim.table, "mz_beats": beats,
        "shows": v.shows,
        "beside": beside,  # the other regimes that ran the claim, beside the deciding one
        "value": v,
    }  # fmt: skip


def _verdict_words(r: dict) -> str:
    """A scorecard row's verdict with its rule, regime and readings."""
    return (r["verdict"] + (f" ({r['why']})" if r.get("why") else "")
            + (f"; read in {r['regime']}" if r.get("regime") else "")
            + (f" ({r['readings']})" if r.get("readings") else ""))  # fmt: skip


def scorecard_markdown(sc) -> str:
    """The scorecard as one Markdown table (``python -m mzlite scorecard``)."""
    cols = ("table", "claim", "paper", "ours", "protocol", "statistics", "verdict", "reason",
            "chapter")  # fmt: skip
    rows = [(r["table"], r["text"], r["paper_text"], r["ours_text"], r["protocol"],
             r.get("statistics", "--"), _verdict_words(r), r.get("reason", ""),
             f"[{r['chapter']}]({r['chapter']}.html)") for r in sc.rows]  # fmt: skip
    return "\n".join([scorecard_summary(sc), "", *markdown_table(cols, rows)])


def scorecard_text(sc, width: int = 100) -> str:
    """One block per claim, for a terminal, grouped by table: the claim, paper and ours with
    the protocol, the statistics, the verdict with its reason, the regimes beside it."""
    out, table = [scorecard_summary(sc)], None
    for r in sc.rows:
        if r["table"] != table:
            table = r["table"]
            out += ["", f"== {table} (chapter {r['chapter']})"]
        out.append(textwrap.fill(f"- {r['text']}", width, subsequent_indent="  "))
        lines = [f"paper {r['paper_text']}; ours {r['ours_text']} [{r['protocol']}]",
                 f"statistics: {r.get('statistics', '--')}",
                 f"verdict: {_verdict_words(r)}; {r.get('reason', '')}",
                 *(f"beside, {b['regime']}: {b['verdict']} (ours {b['ours_text']})"
                   for b in r.get("beside", []))]  # fmt: skip
        out += [textwrap.fill(line, width, initial_indent="    ", subsequent_indent="      ")
                for line in lines]  # fmt: skip
    return "\n".join(out)
