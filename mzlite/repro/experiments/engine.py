"""The verdict engine: ``judge(claim)`` is a ``Verdict``, a value holding what decided it and
nothing worded (``present`` words it): a ``Label``, a ``Reason`` code, the numbers per cell over
seeds, the Welch tests (Holm-corrected within the claim's table), the ``Regime``, the readings
its runs were trained under and the (table, cell) experiments it rests on.

The strongest evidence decides (``_decide``); a claim of parts ("at every L") is judged part by
part; a pattern the paper reports (``Claim.pattern``) that holds on complete cells under
``PAPER_PROTOCOL`` is "reproduced". One profile's results never mix with another's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from mzlite import nn as _nn
from mzlite.analysis.verdicts import ALPHA, TIE, Label, Reason, holm, rule
from mzlite.repro import experiments as ex
from mzlite.repro.experiments import reading_ablation as _reading
from mzlite.repro.experiments import stats as _stats
from mzlite.repro.experiments import transfer_ranks as _ranks
from mzlite.repro.experiments.claims import LOWER_IS_BETTER, Claim, MissingCell, RankClaim, or_none
from mzlite.repro.experiments.execute import result_amp
from mzlite.repro.experiments.results import PROFILE_ORDER
from mzlite.repro.experiments.specs import WHERE_TRAINED
from mzlite.tasks.readings import DEFAULT_READING

__all__ = [
    "LAYER_READING", "LOWER_IS_BETTER", "PAPER_PROTOCOL", "TASK_READING", "CellStats", "Label",
    "Reason", "Refutation", "Regime", "Shows", "Test", "Verdict", "devices_of", "judge",
    "judge_all", "judge_under", "protocol_key", "readings",
]  # fmt: skip

# a result without model_config["layer_reading"] ran Eq. eq:mz-main as printed (mzlite.nn choice 9)
LAYER_READING = "literal"
TASK_READING = DEFAULT_READING  # a result without task_reading ran the generators as first read
READINGS = ("reading", "layer_reading", "task_reading")  # a verdict's: generators, layer, task
PAPER_PROTOCOL = "full"  # the profile under which a claim's pattern (Claim.pattern) is read
# The one-seed, 30-epoch ``cpu`` protocol leaves a claim once a better profile has a converged
# cell of it: its results stay as a labelled ablation
RETIRED_ONCE_CONVERGED = ("cpu",)
REFUTATIONS = (Reason.REFUTED_BY_MODEL, Reason.REFUTED_SO_FAR, Reason.REFUTED_BY_BOUND)
_POLARITY = {Label.HOLDS: "holds", Label.PARTLY: "holds", Label.FAILS: "fails"}
DECIDED = (Label.HOLDS, Label.PARTLY, Label.FAILS)
# what an ablation's complete reading says where the pattern is gone: the claim's test fails,
# ties, is not backed by Welch's test, or no model learns (the failing model's peers included)
_REMOVES = (Label.FAILS, Label.PARTLY, Label.NOT_DECIDED, Label.NO_MODEL_LEARNS)
# the reasons of verdicts decided by Welch's test: Holm's correction applies to them
_WELCH = (Reason.SIGNIFICANT, Reason.TIE, Reason.INCOMPLETE, Reason.NOT_SIGNIFICANT, Reason.PATTERN)


@dataclass(frozen=True)
class CellStats:
    """One cell of a claim under one profile: its metric over seeds and where it ran."""

    cell: str  # the claim's cell id (before any rename)
    read_as: str  # the cell whose results were read (a twin's id under a rename)
    experiments: tuple[tuple[str, str], ...]  # the (table, cell) that ran its results
    values: tuple[float, ...]
    mean: float | None
    std: float | None
    seeds: tuple[int, ...]
    runs: int
    converged: int
    failed: int  # runs that stopped without fitting the training set
    memorised: int  # runs whose kept weights predict no better than the mean
    r2: float | None  # mean test R^2 (what a claim on another metric says nothing without)
    solid: bool  # MIN_SEEDS seeds, every run converged, one protocol
    mixed: bool  # its runs were trained under more than one protocol (never averaged)

    n = property(lambda self: len(self.values))
    # runs stopped at the mean that a claim of failure counted as converged (``cell_stats``)
    stopped = property(lambda self: max(0, self.converged + self.failed - self.runs))


@dataclass(frozen=True)
class Test:
    """Welch's test of cell ``a`` against cell ``b`` (``diff`` = mean a - mean b)."""

    a: str
    b: str
    diff: float | None
    p: float | None


@dataclass(frozen=True)
class Refutation:
    """What refuted a claim before its column completed (``reason``): a significantly better
    ``cell`` (``diff`` above the focal cell, ``p``), or ``cells`` whose ``value`` fails even the
    weaker test (the cells run so far, or a bound: the most the claim's number can reach)."""

    reason: Reason
    cells: tuple[str, ...]
    value: float | None = None
    cell: str | None = None
    diff: float | None = None
    p: float | None = None


@dataclass(frozen=True)
class Regime:
    """Where a verdict's numbers come from: the profile, the training-set sizes and epochs of
    its trained runs, and the devices they ran on (``None`` for unrecorded)."""

    profile: str
    train_sizes: tuple[int, ...]
    sizes: tuple[tuple[int, ...], ...]
    epochs: tuple[int, int] | None
    devices: tuple[str, ...]
    seeds: tuple[int, ...] = ()  # the seeds of its trained runs
    gpu_for_cpu_profile: bool = False


@dataclass(frozen=True)
class Shows:
    """What a claim that holds shows where that is no evidence for MZAttn: ``kind`` "against"
    (a no-gain claim whose change loses R^2: ``gain``, ``best`` cell of each column and its R^2)
    or "says nothing" (a claim on another metric than R^2 about an MZ model that predicts worse
    than a model beside it: ``model``, its ``r2``, ``beside`` {cell: R^2})."""

    kind: str
    model: str | None = None
    r2: float | None = None
    gain: float | None = None
    change: str = ""
    best: tuple[tuple[str, float], ...] = ()  # (cell, mean R^2), the best of each column
    one_row: str | None = None  # the paper row that is best in every column, if one is
    beside: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class RankEvidence:
    """What a ``RankClaim``'s verdict rests on: the claim's ``kind``, the paper's ranks, the
    ranks' test under the verdict's profile (None: not run) and, where runs behind it hit the
    epoch cap, the test with their longer-cap reruns in place (None unless those converged)."""

    kind: str
    paper: tuple[float, ...]
    test: _ranks.RankTest | None = None
    longer_cap: _ranks.RankTest | None = None

    @property
    def observed(self) -> tuple[int, ...]:  # our ranks in the complete settings
        return () if self.test is None else self.test.observed


@dataclass(frozen=True)
class Verdict:
    """A claim judged: see the module doc. ``cells`` are the cells the verdict rests on (under
    ``profile``; for a claim of parts, every part's), ``n_cells`` how many the claim names."""

    claim: str
    table: str
    label: Label
    reason: Reason
    paper: float | None = None
    ours: float | None = None
    profile: str | None = None
    regime: Regime | None = None
    cells: tuple[CellStats, ...] = ()
    n_cells: int = 0
    problems: tuple[Reason, ...] = ()  # every evidence problem (too few seeds, unconverged, ...)
    tests: tuple[Test, ...] = ()
    p_max: float | None = None  # the largest Welch p of the focal cell against the others
    p_holm: float | None = None  # p_max after Holm's correction within the claim's table
    better: tuple[str, ...] = ()  # compared cells significantly better than the focal one
    refutation: Refutation | None = None
    yardstick: float | None = None  # the set-statistics ridge's R^2 in the focal column
    shows: Shows | None = None
    reading: str = ""  # generator normalisation of its MZ runs ("zonotope", "layernorm", "mixed")
    layer_reading: str = ""
    task_reading: str = ""
    parts: tuple[Verdict, ...] = ()  # a claim of parts: each part's own verdict
    beside: tuple[Verdict, ...] = ()  # the same claim under the other profiles that ran it
    retired: tuple[tuple[str, str], ...] = ()  # (profile, the better profile that retired it)
    reading_conflict: Verdict | None = None  # a profile of another reading that reads otherwise
    # the reading ablation's (reading, MZ against ST, p) that read the comparison otherwise
    depends_on: tuple[tuple[str, str, float | None], ...] = ()
    rank: RankEvidence | None = None  # a RankClaim's ranks and null test
    variant: str = ""  # "" for the claim's cells; "pattern" for its pattern's (Claim.pattern)
    pattern: Verdict | None = None  # the claim's test on its pattern's cells (Claim.pattern)
    removed_by: tuple[Verdict, ...] = ()  # the pattern's ablations under which it does not show

    ran = property(lambda self: len(self.cells))

    @property
    def complete(self) -> bool:
        """Every cell ran with solid evidence (a claim of parts: every part complete)."""
        if self.parts:
            return all(p.complete for p in self.parts)
        return self.n_cells > 0 and self.ran == self.n_cells and all(c.solid for c in self.cells)

    @property
    def decisive(self) -> bool:
        """Decides whatever weaker profiles say: complete, or refuted by solid cells."""
        judged = self.label not in (Label.NOT_RUN, Label.INSUFFICIENT)
        return judged and (self.complete or self.reason in REFUTATIONS)

    @property
    def profile_rank(self) -> int:
        """Its profile's place in ``PROFILE_ORDER``: 0 the most faithful, an unknown one last."""
        known = self.profile in PROFILE_ORDER
        return PROFILE_ORDER.index(self.profile) if known else len(PROFILE_ORDER)

    @property
    def experiments(self) -> frozenset[tuple[str, str]]:
        """The (table, cell) experiments whose runs the verdict rests on."""
        return frozenset(e for c in self.cells for e in c.experiments)

    def read_as(self, cell_id: str) -> str:
        """The cell whose results were read for the claim's ``cell_id`` (a twin's, or its own)."""
        return next((c.read_as for c in self.cells if c.cell == cell_id), cell_id)


def protocol_key(result: dict) -> str:
    """What a result computed, apart from where and how fast it ran (``WHERE_TRAINED``; precision
    as the run resolved it): training, data, model configuration and code (git commit). Results of
    a cell with different keys are never averaged: a campaign runs a cell's seeds at one commit."""
    cfg = {k: v for k, v in (result.get("train_config") or {}).items() if k not in WHERE_TRAINED}
    cfg["amp"] = result_amp(result)
    key = {"train": cfg, "data": result.get("dataset_keys"), "sizes": result.get("sizes"),
           "data_code": result.get("data_code_version"), "model": result.get("model_config"),
           "code": (result.get("provenance") or {}).get("git_commit")}  # fmt: skip
    return json.dumps(key, sort_keys=True, default=str)


def _values(results: list[dict], metric: str) -> list[float]:
    return [r["metrics"]["test"].get(metric) for r in results]


def _mean(results: list[dict], metric: str) -> float | None:
    return _stats.mean_std(_values(results, metric))[0]


def cell_stats(
    cell: str, read_as: str, results: list[dict], metric: str, expects_failure: bool = False
) -> CellStats:
    """``CellStats`` of one cell's ``results`` on ``metric``; ``expects_failure``: a run stopped
    at the mean predictor counts as converged."""
    summ = _stats.summarise(_values(results, metric))
    conv = [_stats.result_convergence(r) for r in results]
    converged = sum(v["converged"] or (expects_failure and bool(v.get("stopped"))) for v in conv)
    mixed = len({protocol_key(r) for r in results}) > 1
    solid = summ["n"] >= _stats.MIN_SEEDS and converged == len(results) and not mixed
    return CellStats(
        cell=cell, read_as=read_as, values=tuple(summ["values"]), mean=summ["mean"],
        experiments=tuple(dict.fromkeys((r["table"], r["cell"]) for r in results)),
        std=summ["std"], seeds=tuple(r["seed"] for r in results), runs=len(results),
        converged=converged, failed=sum(_stats.optimisation_failure(v) for v in conv),
        memorised=sum(bool(_stats.memorised(r.get("history"))) for r in results),
        r2=_mean(results, "r2"), solid=solid, mixed=mixed,
    )  # fmt: skip


def readings(results: list[dict]) -> dict[str, str]:
    """The ``READINGS`` of a verdict on ``results`` (``_one`` of each): the MZ runs' generator
    normalisation and layer reading, every run's task reading (unrecorded: the first one)."""
    mz = [r for r in results if _nn.model_spec(r["model"]).family == "mz"]
    gen = _one(_reading.recorded_reading(r)[0] for r in mz)
    layer = _one((r.get("model_config") or {}).get("layer_reading", LAYER_READING) for r in mz)
    task = _one(r.get("task_reading", TASK_READING) for r in results)
    return dict(zip(READINGS, (gen, layer, task), strict=True))


def _one(values) -> str:
    """The one value of ``values``: "" for none, "mixed" where they differ."""
    found = set(values)
    return "" if not found else found.pop() if len(found) == 1 else "mixed"


def devices_of(results: list[dict]) -> tuple[tuple[str, ...], bool]:
    """The devices ``results`` ran on, as recorded ("cpu" first, then GPU names), and whether a
    GPU ran a CPU profile (faster, under the CPU protocol's settings)."""
    gpus, cpu, gpu_cpu = set(), False, False
    for r in results:
        p = r.get("provenance") or {}
        if p.get("gpu_name") or p.get("device") == "cuda":
            gpus.add(p.get("gpu_name") or "GPU")
            gpu_cpu |= str(r.get("profile") or "").startswith("cpu")
        elif p.get("device"):
            cpu = True
    return ("cpu",) * cpu + tuple(sorted(gpus)), gpu_cpu


def regime_of(results: list[dict], profile: str) -> Regime:
    """The ``Regime`` of ``results`` under ``profile`` (sizes and epochs of the trained runs)."""
    trained = [r for r in results if _nn.model_spec(r["model"]).trainable] or results
    devices, gpu_cpu = devices_of(results)
    eps = sorted(r.get("epochs_run", 0) for r in trained)
    return Regime(profile=profile, train_sizes=tuple(sorted({r["sizes"][0] for r in trained})),
                  sizes=tuple(sorted({tuple(r["sizes"]) for r in results})), devices=devices,
                  epochs=(eps[0], eps[-1]) if eps else None, gpu_for_cpu_profile=gpu_cpu,
                  seeds=tuple(sorted({r["seed"] for r in trained})))  # fmt: skip


def mean_getter(by_cell: dict[str, list[dict]], metric: str, rename):
    """``get(cell_id)``: the mean test ``metric`` over the seeds of cell ``rename(cell_id)`` in
    ``by_cell``, MissingCell when it has none."""

    def get(cell_id: str) -> float:
        if (mean := _mean(by_cell.get(rename(cell_id), []), metric)) is None:
            raise MissingCell(rename(cell_id))
        return mean

    return get


def _base(claim: Claim) -> dict:
    """The fields of every verdict on ``claim``."""
    return dict(claim=claim.id, table=claim.table, paper=claim.paper_value(),
                n_cells=len(claim.cells))  # fmt: skip


def _refutation(claim: Claim, by_cell: dict, ren, ours, tests, better) -> Refutation | None:
    """The sequential rule's early stop under one profile, from solid cells only: a bound that
    fails even the weaker test; a compared cell significantly ``better`` than the focal one (by
    ``tests``); or the cells run so far whose value ``ours`` fails the weaker test already."""
    solid = lambda c: cell_stats(c, c, by_cell.get(ren(c), []), "r2").solid  # noqa: E731
    if claim.bound_cells:
        top = or_none(claim.bound, mean_getter(by_cell, claim.metric, ren))
        ok = all(solid(c) for c in claim.bound_cells if by_cell.get(ren(c)))
        if top is not None and not claim.partly(top) and ok:
            return Refutation(Reason.REFUTED_BY_BOUND, tuple(claim.bound_cells), value=top)
    if claim.metric != "r2" or not (claim.monotone or claim.compare):
        return None
    pool = claim.cells  # the cells whose value so far can refute: the compared ones, else all
    if claim.compare:  # never monotone
        a, pool = claim.compare
        if not solid(a):
            return None
        if found := [t for t in tests if t.b in better and solid(t.b)]:
            t = min(found, key=lambda t: t.p)  # the most significant, the first of equals
            return Refutation(Reason.REFUTED_BY_MODEL, (a, t.b), cell=t.b, diff=-t.diff, p=t.p)
    ran = [c for c in pool if by_cell.get(ren(c))]
    if not ran or len(ran) == len(pool) or not all(solid(c) for c in ran):
        return None
    if ours is None or claim.partly(ours):
        return None
    return Refutation(Reason.REFUTED_SO_FAR, tuple(ran), value=ours)


def _own_r2(result: dict) -> float | None:
    """A result's test R² of its method's own prediction: the mean of an uncertainty method of
    several passes or networks (MC-Dropout, the ensemble: ``unc_mse``), since the runner's
    ``r2`` is its first network's alone; var(y) = mse / (1 - r2) on the same test sets."""
    t, u = result["metrics"]["test"], result.get("uncertainty") or {}
    if u.get("passes", 1) * u.get("models", 1) == 1 or None in (t.get("unc_mse"), t.get("r2")):
        return t.get("r2")
    return 1 - t["unc_mse"] * (1 - t["r2"]) / t["mse"]


def _shows(claim: Claim, label: Label, ours, by_cell: dict, ren, spec) -> Shows | None:
    """What a claim that holds shows where that is no evidence for MZAttn (``Shows``)."""
    if label not in (Label.HOLDS, Label.PARTLY) or ours is None:
        return None
    r2 = lambda cid: _stats.mean_std([_own_r2(r) for r in by_cell.get(cid, [])])[0]  # noqa: E731
    if claim.change and ours < -TIE:
        best = []
        for column in dict.fromkeys(spec.cell(c).column for c in claim.cells):
            means = {c.id: m for c in spec.cells if _nn.model_spec(c.model).trainable
                     and c.column == column and (m := r2(c.id)) is not None}  # fmt: skip
            if means:
                best.append(max(means.items(), key=lambda kv: kv[1]))
        rows = {spec.cell(c).row for c, _ in best}
        return Shows("against", gain=ours, change=claim.change, best=tuple(best),
                     one_row=rows.pop() if len(rows) == 1 else None)  # fmt: skip
    if claim.metric == "r2":
        return None
    for c in claim.cells:
        cell = spec.cell(c)
        mz = r2(ren(c))
        if _nn.model_spec(cell.model).family != "mz" or mz is None:
            continue
        others = [ren(o) for o in claim.cells
                  if _nn.model_spec(spec.cell(o).model).family != "mz"]  # fmt: skip
        others += [y.id for y in spec.cells if y.model == ex.SET_STATS and y.column == cell.column]
        if beside := {o: v for o in dict.fromkeys(others) if (v := r2(o)) is not None and v > mz}:
            return Shows("says nothing", model=ren(c), r2=mz, beside=tuple(beside.items()))
    return None


def _problems(cells, mixed: bool = True) -> tuple[Reason, ...]:
    """The evidence problems of ``cells`` (``mixed``: protocols mixed within a cell counted)."""
    checks = {Reason.TOO_FEW_SEEDS: any(c.n < _stats.MIN_SEEDS for c in cells),
              Reason.UNCONVERGED: any(c.converged < c.runs for c in cells),
              Reason.MIXED_PROTOCOLS: mixed and any(c.mixed for c in cells)}  # fmt: skip
    return tuple(reason for reason, bad in checks.items() if bad)


def judge_under(claim: Claim, profile: str, by_cell: dict, twin=None) -> Verdict:
    """``claim`` judged on one profile's results ``by_cell`` alone ({cell id: [result, ...]}),
    read on its cells' ``twin(cell, profile)`` where given (``judge``): what the evidence says
    (smoke, failures, problems, a refutation) before the numbers do."""
    ren = (lambda c: c) if twin is None else (lambda c: twin(c, profile))
    spec = ex.get_table(claim.table)
    base = dict(_base(claim), profile=profile)
    cells = tuple(cell_stats(c, ren(c), by_cell[ren(c)], claim.metric, claim.expects_failure)
                  for c in claim.cells if by_cell.get(ren(c)))  # fmt: skip
    used = [r for c in claim.cells for r in by_cell.get(ren(c), [])]
    ours = or_none(claim.expr, mean_getter(by_cell, claim.metric, ren))
    tests, p_max, better, yard = (), None, (), None
    compared = claim.compare is not None
    stats = {c.cell: c for c in cells}
    if compared and claim.compare[0] in stats:
        a, bs = claim.compare
        tests = tuple(Test(a, b, w["diff"], w["p"]) for b in bs if b in stats
                      for w in [_stats.welch(stats[a].values, stats[b].values)])  # fmt: skip
        ps = [t.p for t in tests]
        p_max = max(ps) if ps and None not in ps else None
        sign, tie = (1.0, 0.0) if claim.metric in LOWER_IS_BETTER else (-1.0, TIE)
        better = tuple(t.b for t in tests
                       if t.p is not None and sign * t.diff > tie and t.p < ALPHA)  # fmt: skip
    refuted = _refutation(claim, by_cell, ren, ours, tests, better) if profile != "smoke" else None
    if ours is None and refuted is None:
        return Verdict(label=Label.NOT_RUN, reason=Reason.NOT_RUN, **{**base, "profile": None})
    base.update(ours=ours, regime=regime_of(used, profile), cells=cells, **readings(used))
    if profile == "smoke":
        return Verdict(label=Label.PIPELINE_ONLY, reason=Reason.PIPELINE_ONLY, **base)
    if refuted is not None and refuted.reason == Reason.REFUTED_BY_BOUND:
        return Verdict(label=Label.FAILS, reason=refuted.reason, refutation=refuted, **base)
    problems = _problems(cells)
    if compared:
        yard = next((_mean(by_cell[y], "r2") for y in spec.yardsticks(ren(claim.compare[0]))
                     if by_cell.get(y)), None)  # fmt: skip
    base.update(problems=problems, tests=tests, p_max=p_max, better=better, yardstick=yard)
    none_learns = bool(cells) and all(c.mean is not None and c.mean <= _stats.LEARNS for c in cells)
    early, why = None, None  # a label that the evidence gives, and its reason: unfitted runs
    # (unless failing is the claim), problems, no model learning, a memorised focal model
    if any(c.failed for c in cells) and not claim.expects_failure:
        early, why = Label.OPTIMISATION_FAILURE, Reason.OPTIMISATION_FAILURE
    elif problems:
        early, why = Label.INSUFFICIENT, problems[0]
    elif compared and claim.metric == "r2" and none_learns:
        early, why = Label.NO_MODEL_LEARNS, Reason.NO_MODEL_LEARNS
    elif compared and any(c.cell == claim.compare[0] and 2 * c.memorised > c.runs for c in cells):
        early, why = Label.MEMORISED, Reason.MEMORISED
    if refuted is not None and early not in (Label.NO_MODEL_LEARNS, Label.MEMORISED):
        # a refutation by solid cells stands whatever the cells that are not solid say; where
        # the models run so far leave no room for the claim but none is significantly better,
        # it cannot hold ("does not hold" needs a significant model)
        if refuted.reason == Reason.REFUTED_SO_FAR and claim.compare:
            return Verdict(label=Label.NOT_DECIDED, reason=Reason.CANNOT_HOLD,
                           refutation=refuted, **base)  # fmt: skip
        return Verdict(label=Label.FAILS, reason=refuted.reason, refutation=refuted, **base)
    if early is not None:
        return Verdict(label=early, reason=why, **base)
    label = claim.label(ours, len(cells) == len(claim.cells), p_max, better)
    reason = {
        Label.HOLDS: Reason.SIGNIFICANT if compared else Reason.THRESHOLDS,
        Label.PARTLY: Reason.INCOMPLETE if claim.holds(ours) else Reason.TIE,
        Label.NOT_DECIDED: Reason.NOT_SIGNIFICANT,
    }.get(label, Reason.THRESHOLDS)
    shows = _shows(claim, label, ours, by_cell, ren, spec)
    return Verdict(label=label, reason=reason, shows=shows, **base)


# The strongest evidence decides: the profiles' verdicts combined
def _retired(claim: Claim, by_profile: dict, twin=None) -> tuple[tuple[str, str], ...]:
    """(profile, retired by) for each of ``RETIRED_ONCE_CONVERGED`` that ran ``claim`` and a
    converged cell of it under a better profile of ``by_profile`` retires (the cells the claim
    is read on, ``twin(cell, profile)`` where given, as ``judge_under`` reads them)."""
    read = lambda prof: [twin(c, prof) if twin else c for c in claim.cells]  # noqa: E731
    better = next((prof for prof, res in by_profile.items()
                   if prof not in RETIRED_ONCE_CONVERGED and prof != "smoke"
                   and any(_stats.result_convergence(r)["converged"]
                           for c in read(prof) for r in res.get(c, []))), None)  # fmt: skip
    return tuple((old, better) for old in RETIRED_ONCE_CONVERGED
                 if better is not None and by_profile.get(old)
                 and any(by_profile[old].get(c) for c in read(old)))  # fmt: skip


def _decide(tried: list[Verdict]) -> int:
    """The index of the verdict that decides among ``tried`` (most faithful profile first): the
    first decisive one not overruled (a refutation whose cells a more faithful profile read with
    solid evidence without refuting the claim), else the first with all its seeds and a verdict
    other than insufficient evidence, else the first with such a verdict, else the first."""

    def overruled(i: int) -> bool:
        ref = tried[i].refutation
        solid = ({c.cell for c in v.cells if c.solid} for v in tried[:i])
        return ref is not None and not tried[i].complete and any(s >= set(ref.cells) for s in solid)

    sure = lambda v: v.label != Label.INSUFFICIENT  # noqa: E731
    tests = (lambda i, v: v.decisive and not overruled(i),
             lambda i, v: sure(v) and all(c.n >= _stats.MIN_SEEDS for c in v.cells),
             lambda i, v: sure(v))  # fmt: skip
    return next((i for test in tests for i, v in enumerate(tried) if test(i, v)), 0)


def _combine(claim: Claim, parts: list[Verdict]) -> Verdict:
    """A claim of parts from its parts' verdicts (each by its own strongest evidence)."""
    ran = [p for p in parts if p.label != Label.NOT_RUN]  # two or more: judge calls it so
    values = [p.ours for p in ran if p.ours is not None]
    weakest = max(ran, key=lambda p: p.profile_rank)
    # the claim's profile is its weakest part's; its own cells are those read under that profile
    # (each part keeps its own, under its own profile): one cell, one number under one profile
    read = {k: _one(getattr(p, k) for p in ran if getattr(p, k)) for k in READINGS}
    base = dict(_base(claim), parts=tuple(parts), profile=weakest.profile, regime=weakest.regime,
                cells=tuple(c for p in ran if p.profile == weakest.profile for c in p.cells),
                ours=claim.worst(values) if values else None, **read)  # fmt: skip
    if any(p.label == Label.FAILS for p in ran):
        return Verdict(label=Label.FAILS, reason=Reason.PART_FAILS, **base)
    labels = {p.label for p in parts}
    if labels == {Label.HOLDS}:
        return Verdict(label=Label.HOLDS, reason=Reason.PARTS, **base)
    if labels <= {Label.HOLDS, Label.PARTLY, Label.NOT_RUN}:
        reason = Reason.INCOMPLETE if Label.NOT_RUN in labels else Reason.PARTS
        return Verdict(label=Label.PARTLY, reason=reason, **base)
    other = next(p for p in parts if p.label not in (Label.HOLDS, Label.PARTLY))
    return Verdict(label=other.label, reason=other.reason, problems=other.problems, **base)


def default_twin(claim: Claim):
    """The cells ``claim`` is read on unless told: its chosen reading's (``Claim.read_on``) and,
    under ``PAPER_PROTOCOL``, a cell's standardised-target twin where its table registers one
    (``cells.standardised_twin_cells``: the paper's optimiser on the targets that every other
    profile standardises, so more faithful than they are); None: its own cells throughout."""
    std = {c.id for c in ex.get_table(claim.table).cells if c.id.startswith("std-")}
    on = claim.on(claim.read_on) if claim.read_on else None
    if not std & {f"std-{c}" for c in claim.cells}:
        return on
    own = on or (lambda c, _p: c)
    return lambda c, p: f"std-{c}" if p == PAPER_PROTOCOL and f"std-{c}" in std else own(c, p)


def judge(claim, profiles=None, results_dir=None, twin=None, *, loaded=None) -> Verdict:
    """The verdict on ``claim`` (a ``Claim`` or ``RankClaim``) from the results of ``profiles``
    (default ``PROFILE_ORDER``, most faithful first): see the module doc. ``twin(cell, profile)``
    reads the claim on other cells (its twins under each profile; by default those its claim
    names, ``Claim.read_on``); ``loaded``: ``{profile: results_by_cell(...)}`` read already."""
    order = [ex.get_profile(p).name for p in (PROFILE_ORDER if profiles is None else profiles)]
    if isinstance(claim, RankClaim):
        if twin is not None:
            raise ValueError("twin applies to cell claims, not to a RankClaim")
        return _judge_ranks(claim, order, results_dir)
    twin = twin or default_twin(claim)  # the cells it names, or the paper's protocol's twins
    loaded = dict(loaded or {})
    loaded.update({p: ex.results_by_cell(claim.table, p, results_dir) for p in order
                   if p not in loaded})  # fmt: skip
    if claim.parts:
        parts = [judge(p, order, results_dir, twin, loaded=loaded) for p in claim.parts]
        at = {p.profile for p in parts if p.label != Label.NOT_RUN}
        if len(at) > 1:  # the strongest evidence differs between parts: each part decides
            return _combine(claim, parts)
        # one profile for every part that ran: the claim is judged whole, as any other
    retired = _retired(claim, {p: loaded[p] for p in order}, twin)
    gone = {old for old, _ in retired}
    tried = [judge_under(claim, p, loaded[p], twin) for p in order if p not in gone]
    tried = [v for v in tried if v.label != Label.NOT_RUN]
    # the same runs under a second profile (search --retire copies the runs two campaigns share)
    # are no second reading: the first profile that reads them keeps them
    tried = [v for i, v in enumerate(tried) if all(v.cells != w.cells for w in tried[:i])]
    if not tried:
        main = Verdict(label=Label.NOT_RUN, reason=Reason.NOT_RUN, retired=retired, **_base(claim))
    else:  # the deciding verdict, the others beside it, with the readings that read it otherwise
        i = _decide(tried)
        chosen, polarity = tried[i], _POLARITY.get(tried[i].label)
        beside = tuple(tried[:i] + tried[i + 1 :])
        conflict = next((v for v in beside if v.reading and chosen.reading
                         and v.reading != chosen.reading and polarity
                         and _POLARITY.get(v.label) not in (None, polarity)), None)  # fmt: skip
        depends = ()
        if chosen.profile == _reading.PROFILE and claim.compare and polarity:
            for table, _, focal, _, what in _reading.DIAGNOSTIC_CELLS:
                if claim.table == table and claim.compare[0] == focal:
                    depends = tuple(_reading.dependence(what, results_dir=results_dir))
        main = replace(chosen, beside=beside, retired=retired, reading_conflict=conflict,
                       depends_on=depends)  # fmt: skip
    if claim.pattern is None or PAPER_PROTOCOL not in order or twin is not None:
        return main  # a pattern is read under the paper's protocol, on its own cells
    return _with_pattern(claim, main, loaded[PAPER_PROTOCOL])


def _with_pattern(claim: Claim, main: Verdict, by_cell: dict) -> Verdict:
    """``main`` (the claim on its own cells) with its pattern read on the paper's protocol's
    ``by_cell``: see the module doc."""
    shown, *ablations = claim.pattern_claims
    seen = replace(judge_under(shown, PAPER_PROTOCOL, by_cell), variant="pattern")
    if seen.label == Label.NOT_RUN:
        return main
    learners = tuple(cell_stats(c, c, by_cell[c], "r2", True)
                     for c in claim.pattern.learns if by_cell.get(c))  # fmt: skip
    seen = replace(seen, cells=seen.cells + learners,
                   n_cells=seen.n_cells + len(claim.pattern.learns))  # fmt: skip
    if seen.label == Label.HOLDS and not seen.complete:  # a learner with too few seeds, or none
        problems = _problems(learners, mixed=False)
        seen = replace(seen, label=Label.INSUFFICIENT, reason=(*problems, Reason.NOT_RUN)[0],
                       problems=problems)  # fmt: skip
    elif seen.label == Label.HOLDS and any((c.mean or 0.0) <= _stats.LEARNS for c in learners):
        seen = replace(seen, label=Label.NO_MODEL_LEARNS, reason=Reason.NO_MODEL_LEARNS)
    if not (seen.label == Label.HOLDS and seen.complete):
        return replace(main, pattern=seen)
    removed = tuple(v for a in ablations for v in [judge_under(a, PAPER_PROTOCOL, by_cell)]
                    if v.decisive and v.label in _REMOVES)  # fmt: skip
    beside = (() if main.label == Label.NOT_RUN else (replace(main, beside=()),)) + main.beside
    return replace(seen, claim=claim.id, paper=main.paper, label=Label.REPRODUCED,
                   reason=Reason.PATTERN, removed_by=removed, beside=beside,
                   retired=main.retired)  # fmt: skip


def _judge_ranks(claim: RankClaim, order: list[str], results_dir=None) -> Verdict:
    """A ``RankClaim`` from the first profile with results of its table
    (``transfer_ranks.rank_test``); ``rank`` holds the ranks, the null test and the settings."""
    paper_ranks = _ranks.paper_ranks()
    base = dict(claim=claim.id, table=claim.table, paper=_rank_value(claim.kind, paper_ranks),
                n_cells=len(claim.cells))  # fmt: skip
    for prof in order:
        by_cell = ex.results_by_cell(claim.table, prof, results_dir)
        if not by_cell:
            continue
        pred = _ranks.rank_test(prof, results_dir)
        label = pred.label
        if claim.kind == "mid-field" and pred.outcome not in _ranks.PROBLEMS:
            n, k = len(pred.observed), pred.mid_field  # holds: every setting; partly: half
            label = rule(k == n, 2 * k >= n, complete=n == pred.n_settings)
        cap = _ranks.longer_cap(prof, results_dir) if pred.unconverged else None
        sens = _ranks.rank_test(prof, results_dir, substitute=cap) if cap else None
        if sens is not None and (sens.unconverged or sens.outcome in _ranks.PROBLEMS):
            sens = None
        used = list(pred.results) or [r for rs in by_cell.values() for r in rs]
        rank = RankEvidence(claim.kind, tuple(paper_ranks), pred, longer_cap=sens)
        reason = _ranks.OUTCOMES[pred.outcome][1]
        return Verdict(label=label, reason=reason, profile=prof, regime=regime_of(used, prof),
                       ours=_rank_value(claim.kind, pred.observed) if pred.observed else None,
                       rank=rank, **readings(used), **base)  # fmt: skip
    return Verdict(label=Label.NOT_RUN, reason=Reason.NOT_RUN,
                   rank=RankEvidence(claim.kind, tuple(paper_ranks)), **base)  # fmt: skip


def _rank_value(kind: str, ranks) -> float:
    """A RankClaim's number: the mean rank, or the share of ranks in the mid-field."""
    if kind == "no-advantage":
        return sum(ranks) / len(ranks)
    lo, hi = _ranks.MID_FIELD
    return sum(lo <= r <= hi for r in ranks) / len(ranks)


def family_holm(verdicts: list[Verdict]) -> list[Verdict]:
    """``verdicts`` with Holm's correction within each table's family of claims decided by
    Welch's test (``p_holm``): one that held (or reproduced) on its raw p only is not decided."""
    out = list(verdicts)
    by_table: dict[str, list[int]] = {}
    for i, v in enumerate(out):
        if v.p_max is not None and v.tests and v.reason in _WELCH:
            by_table.setdefault(v.table, []).append(i)
    for idx in by_table.values():
        for i, p in zip(idx, holm([out[j].p_max for j in idx]), strict=True):
            v = replace(out[i], p_holm=p)
            if v.reason in (Reason.SIGNIFICANT, Reason.PATTERN) and p >= ALPHA:
                v = replace(v, label=Label.NOT_DECIDED, reason=Reason.NOT_SIGNIFICANT)
            out[i] = v
    return out


def judge_all(claims, profiles=None, results_dir=None) -> list[Verdict]:
    """Every claim of ``claims`` judged (``judge``), with Holm's correction per table."""
    return family_holm([judge(c, profiles, results_dir) for c in claims])
