"""The verdict engine returns values: labels, reason codes and numbers, decided by the strongest
evidence on disk. These tests assert codes and numbers; the presenter's own tests keep the few
sentences (tests/test_present.py)."""

from __future__ import annotations

import ast
import dataclasses
import itertools
from pathlib import Path

import pytest
from test_scorecard import SPREAD, _cell, _write

from mzlite.analysis.verdicts import ALPHA, Label, holm
from mzlite.repro import experiments as ex
from mzlite.repro.experiments import engine
from mzlite.repro.experiments.claims import claims
from mzlite.repro.experiments.engine import Reason, judge, judge_all
from mzlite.repro.experiments.specs import model_family, search_choice

ENGINE = Path(engine.__file__)
WORDING = ("formatting", "narrate", "render", "present", "findings", "report", "html", "textwrap")


def _claim(claim_id: str):
    (c,) = [c for c in claims() if c.id == claim_id]
    return c


def test_the_engine_imports_nothing_that_words_or_renders():
    tree = ast.parse(ENGINE.read_text(encoding="utf-8"))
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names += [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
    words = [n for n in names if any(part in WORDING for part in n.split("."))]
    assert names and not words


def test_a_complete_faithful_profile_decides_and_an_incomplete_one_is_shown_beside(tmp_path):
    sep = _claim("tdof-separation")  # L32-mz_1l beats L32-st_4l
    _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.95, "cpu-annealed")
    _cell(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.40, "cpu-annealed")
    _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.60, "full", seeds=1)
    _cell(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.98, "full", seeds=1)
    v = judge(sep, results_dir=tmp_path)
    assert (v.profile, v.label, v.reason) == ("cpu-annealed", Label.HOLDS, Reason.SIGNIFICANT)
    assert v.ours == pytest.approx(0.55) and v.p_max < ALPHA
    assert [(b.profile, b.label, b.problems) for b in v.beside] == [
        ("full", Label.INSUFFICIENT, (Reason.TOO_FEW_SEEDS,))
    ]
    # the paper's protocol completes: it decides, and the reduced protocol goes beside it
    _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.60, "full")
    _cell(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.98, "full")
    v = judge(sep, results_dir=tmp_path)
    assert (v.profile, v.label, v.reason) == ("full", Label.FAILS, Reason.REFUTED_BY_MODEL)
    assert v.refutation.cell == "L32-st_4l" and v.refutation.diff == pytest.approx(0.38)
    assert v.regime.train_sizes and v.complete and v.decisive
    assert [(b.profile, b.label) for b in v.beside] == [("cpu-annealed", Label.HOLDS)]
    assert v.experiments == {("tab:tdof-verify", "L32-mz_1l"), ("tab:tdof-verify", "L32-st_4l")}


def test_the_same_runs_under_two_campaigns_are_read_once(tmp_path):
    """search --retire copies the runs two campaigns at the paper's sizes share: under
    paper-sizes-censored they are the runs paper-sizes read, not a second reading beside it."""
    sep = _claim("tdof-separation")
    _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.60, "full")
    _cell(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.98, "full")
    for prof in ("paper-sizes", "paper-sizes-censored"):  # one campaign's runs, and their copies
        _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.62, prof)
        _cell(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.97, prof)
    v = judge(sep, results_dir=tmp_path)
    assert v.profile == "full" and [b.profile for b in v.beside] == ["paper-sizes"]
    _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.70, "paper-sizes-censored")  # other runs
    v = judge(sep, results_dir=tmp_path)
    assert [b.profile for b in v.beside] == ["paper-sizes", "paper-sizes-censored"]


def test_a_bound_refutes_a_drop_that_r2_at_most_one_leaves_no_room_for(tmp_path):
    """ "ST-4L degrades by >= 0.10 from L = 4 to L = 32" cannot hold where it scores 0.98 at
    L = 32: R^2 <= 1 at L = 4 bounds the drop by 0.02, whatever L = 4 gives."""
    drop = _claim("tdof-st-4l-drop")
    _cell(tmp_path, "tab:tdof-verify", "L4-st_4l", 0.90, "cpu-annealed")
    _cell(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.75, "cpu-annealed")  # a drop of 0.15
    assert judge(drop, results_dir=tmp_path).label == Label.PARTLY
    _cell(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.98, "full")
    v = judge(drop, results_dir=tmp_path)
    assert (v.profile, v.label, v.reason) == ("full", Label.FAILS, Reason.REFUTED_BY_BOUND)
    assert v.ours is None and v.refutation.value == pytest.approx(1 - 0.98)
    assert v.refutation.cells == ("L32-st_4l",)
    assert [(b.profile, b.label) for b in v.beside] == [("cpu-annealed", Label.PARTLY)]
    # a bound from too few seeds refutes nothing (and L = 4 did not run there)
    other = tmp_path / "one-seed"
    _cell(other, "tab:tdof-verify", "L32-st_4l", 0.98, "full", seeds=1)
    assert judge(drop, results_dir=other).label == Label.NOT_RUN


def test_an_at_most_claim_on_failing_models_takes_their_stopped_runs_as_evidence(tmp_path):
    """ "Every PMA-pooled attention baseline fails" (an at-most claim on R^2): runs that stopped
    at the mean predictor are its evidence, not an optimisation failure; one baseline that
    learns refutes it before the rest run (another can only raise the best)."""
    fails = _claim("meb-d8-pma-fail")
    assert fails.expects_failure and fails.monotone and fails.compare is None
    unfitted = {"converged": False, "stopped": True, "fitted": False, "rule": "test"}
    for cid in fails.cells:
        _cell(tmp_path, "tab:meb", cid, 0.0, "full", convergence=unfitted)
    v = judge(fails, results_dir=tmp_path)
    assert (v.profile, v.label, v.reason) == ("full", Label.HOLDS, Reason.THRESHOLDS)
    assert v.complete and v.ours == pytest.approx(0.0, abs=1e-12)  # the best mean over seeds
    one = tmp_path / "one"
    _cell(one, "tab:meb", fails.cells[0], 0.60, "full")
    v = judge(fails, results_dir=one)
    assert (v.label, v.reason) == (Label.FAILS, Reason.REFUTED_SO_FAR)
    assert v.refutation.cells == (fails.cells[0],) and v.ran == 1 < v.n_cells


def test_each_part_of_an_at_every_l_claim_is_read_at_its_strongest_evidence(tmp_path):
    fits = _claim("tdof-mz-1l")  # >= 0.90 at every L (partly: >= 0.70)
    for L in (4, 8, 16, 24):
        _cell(tmp_path, "tab:tdof-verify", f"L{L}-mz_1l", 0.95, "cpu-annealed")
    _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.50, "cpu-annealed")
    whole = judge(fits, results_dir=tmp_path)
    assert (whole.label, whole.ours, whole.parts) == (Label.FAILS, pytest.approx(0.50), ())
    _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.93, "full")  # the paper's protocol at 32
    v = judge(fits, results_dir=tmp_path)
    assert (v.label, v.reason) == (Label.HOLDS, Reason.PARTS)
    assert v.ours == pytest.approx(0.93)
    assert [(p.profile, p.label) for p in v.parts] == [("cpu-annealed", Label.HOLDS)] * 4 + [
        ("full", Label.HOLDS)
    ]
    assert v.parts[-1].beside[0].label == Label.FAILS  # the 2K reading, shown beside it
    # one part that fails at its strongest evidence refutes the claim
    _cell(tmp_path, "tab:tdof-verify", "L16-mz_1l", 0.60, "paper-sizes")
    v = judge(fits, results_dir=tmp_path)
    assert (v.label, v.reason, v.ours) == (Label.FAILS, Reason.PART_FAILS, pytest.approx(0.60))
    assert v.parts[2].profile == "paper-sizes"


def test_holm_matches_its_definition_and_turns_a_lone_significance_into_not_decided(tmp_path):
    ps = [0.01, 0.04, 0.03, 0.20]
    adjusted = holm(ps)
    # the definition: the i-th smallest p times (m - i), running maximum, capped at 1
    order = sorted(range(len(ps)), key=ps.__getitem__)
    expect, running = [0.0] * len(ps), 0.0
    for i, k in enumerate(order):
        running = max(running, min(1.0, (len(ps) - i) * ps[k]))
        expect[k] = running
    assert adjusted == pytest.approx(expect)
    assert adjusted == pytest.approx([0.04, 0.09, 0.09, 0.20])
    for m in range(1, 5):  # the family-wise guarantee's form: never below the raw p
        for combo in itertools.product([0.001, 0.02, 0.5], repeat=m):
            assert all(a >= p for a, p in zip(holm(combo), combo, strict=True))
    with pytest.raises(ValueError, match="p_values"):
        holm([1.5])
    # two ambiguity claims of one table, each significant alone (Welch p = 0.04)
    amb = [c for c in claims("tab:ambiguity")][:2]
    for c in amb:
        a, (b,) = c.compare
        for s, (x, y) in enumerate(((0.60, 0.54), (0.62, 0.56), (0.64, 0.59))):
            _write(tmp_path, c.table, a, x, "cpu-annealed", seed=s)
            _write(tmp_path, c.table, b, y, "cpu-annealed", seed=s)
    alone = [judge(c, results_dir=tmp_path) for c in amb]
    assert all(v.label == Label.HOLDS and v.p_max < ALPHA for v in alone)
    family = judge_all(amb, results_dir=tmp_path)
    assert [v.p_holm for v in family] == pytest.approx(holm([v.p_max for v in alone]))
    assert [v.p_holm for v in family] == pytest.approx([2 * alone[0].p_max] * 2)
    assert [(v.label, v.reason) for v in family] == [
        (Label.NOT_DECIDED, Reason.NOT_SIGNIFICANT)
    ] * 2


def test_a_verdict_carries_the_readings_its_results_recorded(tmp_path):
    sep = _claim("tdof-separation")
    _cell(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.95, "cpu-annealed")
    _cell(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.40, "cpu-annealed")
    v = judge(sep, results_dir=tmp_path)
    assert (v.layer_reading, v.task_reading) == (engine.LAYER_READING, engine.TASK_READING)
    for s in range(3):
        _write(tmp_path, "tab:tdof-verify", "L32-mz_1l", 0.95 + SPREAD[s], "cpu-annealed",
               seed=s, model_config={"layer_reading": "centre_adaptive"},
               task_reading="m0-zero")  # fmt: skip
    v = judge(sep, results_dir=tmp_path)
    assert v.layer_reading == "centre_adaptive"
    assert v.task_reading == "mixed"  # the Set Transformer's runs are still on v1


def test_not_run_is_a_value_with_the_papers_number():
    v = judge(_claim("tdof-separation"), results_dir=Path("/nonexistent-results"))
    assert (v.label, v.reason, v.ours, v.cells) == (Label.NOT_RUN, Reason.NOT_RUN, None, ())
    assert v.paper is not None and v.paper > 0


def test_a_reduced_refutation_does_not_overrule_a_faithful_reading_of_the_same_cells(tmp_path):
    """Task B, a claim of the paper's text: ST-Large refutes it at 2K training sets, but the
    paper's sizes read the same pair without refuting it; the stronger evidence stands."""
    task_b = _claim("main-results-B-mz-beats-matched")
    assert task_b.compare[0] == "B-mz_full" and "B-st_large" in task_b.compare[1]
    faithful = {"model_config": {"gen_norm": "zonotope"}, "train_config": {"schedule": "plateau"}}
    # its cells are read on its chosen task reading (Claim.read_on)
    mz, st_large = (f"{task_b.read_on}-{m}" for m in ("mz_full", "st_large"))
    _cell(tmp_path, "tab:main-results", mz, 0.50, "cpu-annealed", **faithful)
    _cell(tmp_path, "tab:main-results", st_large, 0.80, "cpu-annealed", **faithful)
    v = judge(task_b, results_dir=tmp_path)
    assert (v.profile, v.label, v.reason) == ("cpu-annealed", Label.FAILS, Reason.REFUTED_BY_MODEL)
    _cell(tmp_path, "tab:main-results", mz, 0.805, "paper-sizes")
    _cell(tmp_path, "tab:main-results", st_large, 0.81, "paper-sizes")
    v = judge(task_b, results_dir=tmp_path)
    assert (v.profile, v.label, v.reason) == ("paper-sizes", Label.PARTLY, Reason.TIE)
    assert v.ours == pytest.approx(-0.005) and v.ran == 2 and v.n_cells == 4
    assert [(b.profile, b.label) for b in v.beside] == [("cpu-annealed", Label.FAILS)]
    assert [c.read_as for c in v.cells] == [mz, st_large]


def test_a_claim_on_a_chosen_task_reading_reads_its_twins_and_checks_them_when_made(tmp_path):
    """Task B's claim is read on near-copy, the reading its calibration chose, at the families'
    overall rate; the cells of its first reading (v1) decide only when read on them
    (``Claim.on``), and a twin column that names no cell fails when the claim is made."""
    task_b = _claim("main-results-B-mz-beats-matched")
    assert (
        task_b.read_on == "B-near-copy-lr1e-3" and task_b.on("B")("B-mz_full", None) == "B-mz_full"
    )
    v1_r2 = {"mz_full": 0.5, "st_large": 0.8, "perceiver": 0.4, "hypernet": 0.4}
    for m, r in v1_r2.items():  # near-copy: MZ-Full and ST-Large swapped
        _cell(tmp_path, "tab:main-results", f"B-{m}", r, "paper-sizes")
        _cell(tmp_path, "tab:main-results", f"B-near-copy-lr1e-3-{m}", 1.3 - r if r > 0.4 else r,
              "paper-sizes")  # fmt: skip
    # the set-statistics yardstick of each reading's data: near-copy's is a calibration cell,
    # whatever rate the models trained at (a closed form)
    _cell(tmp_path, "tab:main-results", "B-set_stats", 0.2, "paper-sizes")
    _cell(tmp_path, "tab:main-results", "cal-B-near-copy-set_stats", 0.9, "paper-sizes")
    v = judge(task_b, results_dir=tmp_path)
    assert (v.label, v.ours, v.yardstick) == (Label.HOLDS, pytest.approx(0.30), pytest.approx(0.9))
    assert v.cells[0].read_as == "B-near-copy-lr1e-3-mz_full"
    v1 = judge(task_b, results_dir=tmp_path, twin=task_b.on("B"))
    assert (v1.label, v1.reason, v1.refutation.cell) == (
        Label.FAILS, Reason.REFUTED_BY_MODEL, "B-st_large")  # fmt: skip
    assert v1.yardstick == pytest.approx(0.2)
    with pytest.raises(ValueError, match="no cell 'B-far-copy-mz_full' in tab:main-results"):
        dataclasses.replace(task_b, twins=(("B-far-copy", "a reading not registered"),))


def test_a_reduced_profile_is_retired_by_the_cells_a_claim_is_read_on(tmp_path):
    """``cpu`` is retired for a claim where a better profile converged on the cells the claim is
    read on, not on its own column: Task B read on near-copy keeps ``cpu``'s v1 runs out of it."""
    task_b = _claim("main-results-B-mz-beats-matched")
    for m in ("mz_full", "st_large", "perceiver", "hypernet"):
        _cell(tmp_path, "tab:main-results", f"B-{m}", 0.5, "cpu")
        _cell(tmp_path, "tab:main-results", f"B-near-copy-lr1e-3-{m}", 0.5, "paper-sizes")
    assert judge(task_b, results_dir=tmp_path).retired == ()  # cpu never ran near-copy
    assert judge(task_b, results_dir=tmp_path, twin=task_b.on("B")).retired == ()  # nor v1 above
    _cell(tmp_path, "tab:main-results", "B-near-copy-lr1e-3-mz_full", 0.5, "cpu")
    assert judge(task_b, results_dir=tmp_path).retired == (("cpu", "paper-sizes"),)


def test_the_papers_protocol_reads_a_claims_standardised_twins_and_decides_first(tmp_path):
    """Task F under ``full`` reads its standardised-target twins (the paper's optimiser on the
    targets every other profile standardises), so a refutation there decides the claim, with
    ``paper-sizes`` beside it; a claim whose table registers no such twins keeps its own cells."""
    task_f = _claim("tab-main-results-F-mz_full-best")
    twin = engine.default_twin(task_f)
    assert (twin("F-mz_full", "full"), twin("F-perceiver", "full")) == (
        "std-F-mz_full",
        "F-perceiver",
    )
    assert twin("F-mz_full", "paper-sizes") == "F-mz_full"
    assert engine.default_twin(_claim("tdof-separation")) is None
    _cell(tmp_path, "tab:main-results", "F-mz_full", 0.455, "paper-sizes")
    _cell(tmp_path, "tab:main-results", "F-st", 0.45, "paper-sizes")
    v = judge(task_f, results_dir=tmp_path)
    assert (v.profile, v.label) == ("paper-sizes", Label.PARTLY)  # no full twin ran yet
    _cell(tmp_path, "tab:main-results", "std-F-mz_full", 0.33, "full")
    _cell(tmp_path, "tab:main-results", "std-F-st", 0.51, "full")
    v = judge(task_f, results_dir=tmp_path)
    assert (v.profile, v.label, v.reason) == ("full", Label.FAILS, Reason.REFUTED_BY_MODEL)
    assert [c.read_as for c in v.cells] == ["std-F-mz_full", "std-F-st"]
    assert v.refutation.cell == "F-st" and v.refutation.diff == pytest.approx(0.18)
    assert [(b.profile, b.label) for b in v.beside] == [("paper-sizes", Label.PARTLY)]


STOPPED = {"converged": False, "stopped": True, "fitted": False, "rule": "test"}  # at the mean


def test_the_papers_pattern_is_reproduced_only_on_complete_cells_under_its_protocol(tmp_path):
    """MEB d = 8 on per-set normalised sets, raw targets: the PMA Set Transformer stays at the
    mean while MZAttn-Full learns. One MZ seed is insufficient evidence so far (the claim's own
    reading decides); three make it "reproduced", with the claim's reading beside it."""
    fails = _claim("meb-d8-pma-fail")
    for cid in fails.cells:  # the claim's own cells, at 2K training sets: one PMA model learns
        _cell(tmp_path, "tab:meb", cid, 0.60 if cid == fails.cells[0] else 0.0, "cpu-annealed")
    _cell(tmp_path, "tab:meb", "abl-d8-scale-st", 0.0, "full", convergence=STOPPED)
    _cell(tmp_path, "tab:meb", "abl-d8-scale-mz_full", 0.30, "full", seeds=1)
    v = judge(fails, results_dir=tmp_path)
    assert (v.profile, v.label, v.removed_by) == ("cpu-annealed", Label.FAILS, ())
    assert (v.pattern.label, v.pattern.problems) == (Label.INSUFFICIENT, (Reason.TOO_FEW_SEEDS,))
    assert [c.read_as for c in v.pattern.cells] == ["abl-d8-scale-st", "abl-d8-scale-mz_full"]
    _cell(tmp_path, "tab:meb", "abl-d8-scale-mz_full", 0.30, "full")
    v = judge(fails, results_dir=tmp_path)
    assert (v.profile, v.label, v.reason, v.variant) == (
        "full",
        Label.REPRODUCED,
        Reason.PATTERN,
        "pattern",
    )
    assert v.ours == pytest.approx(0.0, abs=1e-12) and v.complete and v.pattern is None
    assert v.paper == judge(fails, profiles=("cpu-annealed",), results_dir=tmp_path).paper
    assert [(b.profile, b.label) for b in v.beside] == [("cpu-annealed", Label.FAILS)]
    assert v.removed_by == ()  # no ablation ran
    # the pattern is read under the paper's protocol only
    assert judge(fails, profiles=("cpu-annealed",), results_dir=tmp_path).label == Label.FAILS
    # a model that stays at the mean is no pattern where the model that should learn does not
    other = tmp_path / "mz-at-mean"
    _cell(other, "tab:meb", "abl-d8-scale-st", 0.0, "full", convergence=STOPPED)
    _cell(other, "tab:meb", "abl-d8-scale-mz_full", 0.02, "full")
    v = judge(fails, results_dir=other)
    assert v.label == Label.NOT_RUN and v.pattern.label == Label.NO_MODEL_LEARNS


def test_the_ablations_that_remove_a_pattern_are_named_from_their_results(tmp_path):
    fails, beats = _claim("meb-d8-pma-fail"), _claim("meb-d8-mz-beats-pma")
    _cell(tmp_path, "tab:meb", "abl-d8-scale-st", 0.0, "full", convergence=STOPPED)
    _cell(tmp_path, "tab:meb", "abl-d8-scale-mz_full", 0.30, "full")
    # standardised targets: the Set Transformer learns (one seed still stopped at the mean)
    learnt = {"converged": True, "rule": "test"}
    for s, r2 in enumerate((0.0, 0.58, 0.54)):
        _write(tmp_path, "tab:meb", "abl-d8-scale-ynorm-st", r2, "full", seed=s,
               convergence=STOPPED if r2 == 0.0 else learnt)  # fmt: skip
    _cell(tmp_path, "tab:meb", "abl-d8-scale-ynorm-mz_full", 0.49, "full")
    # mean pooling: it stays at the mean here too, so it removes nothing; then two seeds only
    _cell(tmp_path, "tab:meb", "abl-d8-scale-st_meanpool", 0.0, "full", convergence=STOPPED)
    v = judge(fails, results_dir=tmp_path)
    assert v.label == Label.REPRODUCED
    assert [(r.label, [c.read_as for c in r.cells]) for r in v.removed_by] == [
        (Label.FAILS, ["abl-d8-scale-ynorm-st"])
    ]
    assert v.removed_by[0].ours == pytest.approx((0.0 + 0.58 + 0.54) / 3)
    w = judge(beats, results_dir=tmp_path)
    assert (w.label, w.reason, w.profile) == (Label.REPRODUCED, Reason.PATTERN, "full")
    assert w.ours == pytest.approx(0.30) and w.p_max < ALPHA
    # MZ 0.49 against 0.37 with one seed at the mean: no Welch test backs it, so it is gone
    assert [(r.label, [c.read_as for c in r.cells]) for r in w.removed_by] == [
        (Label.NOT_DECIDED, ["abl-d8-scale-ynorm-mz_full", "abl-d8-scale-ynorm-st"])
    ]
    # mean pooling that learns removes it, from complete cells only
    other = tmp_path / "meanpool"
    _cell(other, "tab:meb", "abl-d8-scale-st", 0.0, "full", convergence=STOPPED)
    _cell(other, "tab:meb", "abl-d8-scale-mz_full", 0.30, "full")
    _cell(other, "tab:meb", "abl-d8-scale-st_meanpool", 0.70, "full", seeds=2)
    assert judge(fails, results_dir=other).removed_by == ()
    _cell(other, "tab:meb", "abl-d8-scale-st_meanpool", 0.70, "full")
    (gone,) = judge(fails, results_dir=other).removed_by
    assert [c.read_as for c in gone.cells] == ["abl-d8-scale-st_meanpool"]
    assert gone.label == Label.FAILS and gone.ours == pytest.approx(0.70)


def test_a_pattern_names_its_cells_once_and_in_the_claims_roles():
    beats = _claim("meb-d8-mz-beats-pma")
    with pytest.raises(ValueError, match="ablation"):
        dataclasses.replace(beats, pattern=dataclasses.replace(
            beats.pattern, ablations=(("abl-d8-scale-ynorm-mz_full",),)))  # fmt: skip
    with pytest.raises(ValueError, match="no-such-cell|unknown|cell"):
        dataclasses.replace(beats, pattern=dataclasses.replace(
            beats.pattern, learns=("no-such-cell",)))  # fmt: skip
    assert all(c.pattern is None for c in claims("tab:meb") if not c.id.startswith("meb-d8-"))


def test_the_cells_a_claim_is_read_on_train_at_each_familys_choice_over_all_its_studies():
    """Task B's claim is read on near-copy, where no rate study ran, so its cells train at each
    family's choice over all its studies under paper-sizes (claims.py): the rate those cells
    declare must be that choice, or a new search would leave them at a rate no study chose."""
    task_b, prof = _claim("main-results-B-mz-beats-matched"), ex.get_profile("paper-sizes")
    spec, overall = ex.get_table(task_b.table), search_choice("paper-sizes")
    for cell_id in (task_b.on(task_b.read_on)(c, None) for c in task_b.cells):
        job = ex.Job(spec.label, spec.cell(cell_id), 0, prof, *[Path()] * 3, "cpu")
        cfg = job.train_config()
        chosen = overall[model_family(job.cell.model)]
        assert (cfg.lr, cfg.schedule) == (chosen["lr"], chosen["schedule"]), cell_id


def test_an_uncertainty_methods_r2_is_its_own_predictions_not_its_first_networks():
    """MC-Dropout's and the ensemble's results record the runner's R² of their first network
    (the same run for both) and the MSE of their own mean (``unc_mse``): what a verdict shows
    of them is the latter's R², from the same test sets' variance; IHW's is the network's."""
    test = {"mse": 1000.0, "r2": 0.3, "unc_mse": 900.0}  # var(y) = 1000 / 0.7
    for passes, models in ((30, 1), (1, 5)):
        r = {"metrics": {"test": test}, "uncertainty": {"passes": passes, "models": models}}
        assert engine._own_r2(r) == pytest.approx(1 - 900 * 0.7 / 1000)
    ihw = {"metrics": {"test": test}, "uncertainty": {"passes": 1, "models": 1}}
    assert engine._own_r2(ihw) == 0.3 == engine._own_r2({"metrics": {"test": {"r2": 0.3}}})
