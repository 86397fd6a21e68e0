"""The learning-rate search (mzlite.repro.experiments.search): its pruning rule, its choice, its
file, resuming, and the profile that reads it. Deep Sets on tiny Task F splits keeps it fast."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from mzlite.__main__ import main
from mzlite.repro import experiments as ex
from mzlite.repro.experiments import findings as fd
from mzlite.repro.experiments import reading
from mzlite.repro.experiments import search as se
from mzlite.repro.experiments.protocols import CPU
from mzlite.repro.experiments.results import caught_up
from mzlite.repro.experiments.specs import PROFILES, Profile
from mzlite.train.history import History

ROOT = Path(__file__).resolve().parents[1]

NAME = "test-searched"


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    """A searched profile of tiny splits, a 2 x 2 grid pruned after 2 epochs, one cell."""
    monkeypatch.setenv("MZLITE_RESULTS", str(tmp_path / "results"))
    monkeypatch.setenv("MZLITE_CACHE", str(tmp_path / "cache"))
    prof = Profile(
        NAME, (96, 48, 48), 1,
        {"epochs": 8, "warmup_epochs": 1, "patience": None, "normalize_targets": True,
         "amp": False},
        batch_size=32, searched=True,
    )  # fmt: skip
    monkeypatch.setitem(PROFILES, NAME, prof)
    monkeypatch.setattr(se, "LRS", (1e-3, 3e-2))
    monkeypatch.setattr(se, "SCHEDULES", ("plateau", "cosine"))
    monkeypatch.setattr(se, "MIN_EPOCHS", 2)
    monkeypatch.setattr(se, "REDUCTION", 2)
    monkeypatch.setattr(se, "SEARCH_CELLS", {"deepsets": (("tab:main-results", "F-deepsets"),)})
    return tmp_path


def _fake_fit(curves, trained):
    """A stand-in for ``fit`` with known curves: the validation loss at epoch e of a run whose
    epoch cap is T is ``curves[lr, schedule](e, T)``; ``trained`` collects (lr, schedule, T)
    of every run. It honours ``callbacks`` as ``fit`` does and trains nothing."""

    def fit(model, train, val, cfg, *, checkpoint_path=None, progress=True, callbacks=()):
        trained.append((cfg.lr, cfg.schedule, cfg.epochs))
        hist = History()
        for e in range(1, cfg.epochs + 1):
            v = curves[cfg.lr, cfg.schedule](e, cfg.epochs)
            for field, x in (("epoch", e), ("train_loss", v), ("val_loss", v), ("lr", cfg.lr),
                             ("epoch_time_s", 0.0), ("val_metrics", {"r2": 1.0 - v})):  # fmt: skip
                getattr(hist, field).append(x)
            if v < hist.best_val_loss:
                hist.best_val_loss, hist.best_epoch = v, e
            if any([cb(e, hist, model) for cb in callbacks]):
                hist.stop_reason = "callback"
                return hist
        hist.stop_reason = "completed"
        return hist

    return fit


def _cosine_done(e, T):
    """The share of a cosine's decay done after e of its T epochs (0 at the start, 1 at T)."""
    return (1.0 - math.cos(math.pi * e / T)) / 2.0


def test_a_slow_starting_schedule_that_ends_best_is_chosen_and_not_pruned(tiny, monkeypatch):
    """Known curves: at the first rung (epoch 2 of an 8-epoch cap) the cosine over the cap has
    barely decayed and trails the fast plateau, yet the cosine ends at 0.1 against the plateau's
    0.5. Judged at epoch 2 of the cap's cosine (the search before issue 49) it is pruned and the
    plateau chosen; sized to its rung it is promoted, trains to the cap and is chosen."""
    lo, hi = se.LRS
    curves = {
        (lo, "plateau"): lambda e, T: 0.5 + 0.5 * 0.5**e,  # fast, ends at 0.5
        (lo, "cosine"): lambda e, T: 1.0 - 0.9 * _cosine_done(e, T),  # slow, ends at 0.1
        (hi, "plateau"): lambda e, T: 0.9 + 0.1 * 0.5**e,  # bad
        (hi, "cosine"): lambda e, T: 0.95 - 0.2 * _cosine_done(e, T),  # ends at 0.75
    }
    trained = []
    monkeypatch.setattr(se, "fit", _fake_fit(curves, trained))
    split = SimpleNamespace(d_in=1, d_out=1)
    monkeypatch.setattr(se, "job_splits", lambda job: (split, split, None))
    monkeypatch.setattr(se, "build_cell_model", lambda *a, **k: None)
    out = se.search(NAME, ["deepsets"], seeds=(0,), say=lambda *a: None)
    assert out["choice"]["deepsets"]["train"] == {"lr": lo, "schedule": "cosine"}
    recs = {(r["lr"], r["schedule"]): r for r in
            out["families"]["deepsets"]["deepsets-tab-main-results-F-deepsets-seed0"]}  # fmt: skip
    slow = recs[lo, "cosine"]
    assert slow["state"] == "complete" and slow["best_val_loss"] == pytest.approx(0.1)
    # sized to each rung (2, then 4 = 2 x 2), then the cap's cosine, each from the start
    assert [r["epochs"] for r in slow["runs"]] == [2, 4, 8] and slow["epochs_trained"] == 14
    assert [(lr, T) for lr, s, T in trained if s == "cosine" and lr == lo] == [
        (lo, 2),
        (lo, 4),
        (lo, 8),
    ]
    # the pruner still prunes: the bad plateau and the cosine that ends worse stop at rung 2
    assert recs[hi, "plateau"]["state"] == "pruned" and recs[hi, "plateau"]["epochs"] == 2
    assert recs[hi, "cosine"]["state"] == "pruned" and recs[hi, "cosine"]["runs"] == [
        {"epochs": 2, "epochs_run": 2, "best_val_loss": pytest.approx(0.75)}
    ]
    # a plateau is continued across rungs: one run to the cap
    assert recs[lo, "plateau"]["runs"][0]["epochs"] == 8 and len(recs[lo, "plateau"]["runs"]) == 1
    assert out["methods"] == {"deepsets": se.METHOD}
    assert out["choice_by_table"]["deepsets"]["tab:main-results"] == out["choice"]["deepsets"]


def test_a_family_the_censored_search_decided_keeps_its_choice_until_this_search_decides(
    tiny, monkeypatch
):
    """A format-1 family (the search before issue 49) trains with its old choice while this
    search's studies of it are pending; once they cover every searched cell and choose, the old
    trials and choice move to "replaced". The two never mix, and another family is untouched."""
    lo, hi = se.LRS
    # the k-th of (lo, plateau), (hi, plateau), (lo, cosine), (hi, cosine) ends at 1 / (k + 1)
    curves = {c: (lambda e, T, k=k: 1.0 / (k + 1) + 1.0 / e)
              for k, c in enumerate((lr, s) for s in se.SCHEDULES for lr in se.LRS)}  # fmt: skip
    monkeypatch.setattr(se, "fit", _fake_fit(curves, []))
    split = SimpleNamespace(d_in=1, d_out=1)
    monkeypatch.setattr(se, "job_splits", lambda job: (split, split, None))
    monkeypatch.setattr(se, "build_cell_model", lambda *a, **k: None)
    monkeypatch.setitem(
        se.SEARCH_CELLS,
        "deepsets",
        (("tab:main-results", "F-deepsets"), ("tab:main-results", "G-deepsets")),
    )
    grid = [(lr, s) for lr in se.LRS for s in se.SCHEDULES]
    old_studies = {"deepsets-tab-main-results-F-deepsets-seed9": [
        {"lr": lr, "schedule": s, "best_val_loss": 1.0 if (lr, s) == (hi, "plateau") else 2.0,
         "val_r2_at_best": 0.1, "state": "complete", "epochs": 8, "best_epoch": 8}
        for lr, s in grid]}  # fmt: skip
    old_mz = {"mz-tab-main-results-F-mz_full-seed9": old_studies[next(iter(old_studies))]}
    old_choice = {"deepsets": se.choose(old_studies), "mz": se.choose(old_mz)}
    path = ex.specs.search_path(NAME)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "format": "mzlite.lr-search/1", "profile": NAME, "grid": {}, "min_epochs": 20,
        "reduction_factor": 3, "tie": 0.02, "families": {"deepsets": old_studies, "mz": old_mz},
        "choice": old_choice, "provenance": {"git_commit": "9473af9" + "0" * 33},
    }))  # fmt: skip
    f_study, g_study = se.plan_search(NAME, ["deepsets"], seeds=(0,))

    def ablation_f():
        (row,) = [r for r in se.best_setting_rows(NAME) if r["cell"] == "F-deepsets"]
        return row["method"], row["seeds"], row["best"]

    assert ablation_f() == ("the cap's cosine at the rungs", [9], "3e-2, plateau")
    se.run_study(f_study, say=lambda *a: None)
    # the CLI writes the file from the journals so far, the unrun G study left out
    assert main(["search", NAME, "--families", "deepsets", "--seeds", "0", "--write-only"]) == 0
    half = json.loads(path.read_text())
    assert half["methods"] == {"deepsets": se.CENSORED_METHOD, "mz": se.CENSORED_METHOD}
    assert half["choice"] == json.loads(json.dumps(old_choice))
    assert half["families"]["deepsets"] == old_studies
    assert list(half["pending"]["deepsets"]["studies"]) == [f_study.name]
    cfg = ex.job("tab:main-results", "F-deepsets", NAME, 0).train_config()
    assert (cfg.lr, cfg.schedule) == (hi, "plateau")  # the old choice still trains
    (row,) = se.choice_rows(NAME)
    assert row["method"] == "the cap's cosine at the rungs" and row["choice"] == "3e-2, plateau"
    assert row["pending"] == "a cosine sized to its rung: 4 of 8 trials (1 pruned: 1 plateau)"
    assert "deepsets pending (rung-sized-cosine" in half["printed"]
    # the price is of what is left: G's configurations, F's are done
    assert "2 studies, 4 of 8 configurations left" in se.price(NAME, ["deepsets"], (0,))
    # the ablation reads this search's complete study of F, never both searches' together
    assert ablation_f() == ("a cosine sized to its rung", [0], "3e-2, cosine")
    se.run_study(g_study, say=lambda *a: None)
    done = se.write_search(NAME, [g_study])
    assert done["methods"] == {"deepsets": se.METHOD, "mz": se.CENSORED_METHOD}
    assert sorted(done["families"]["deepsets"]) == sorted([f_study.name, g_study.name])
    assert done["pending"] == {}
    assert done["replaced"]["deepsets"]["studies"] == old_studies
    assert done["replaced"]["deepsets"]["git_commit"].startswith("9473af9")
    assert done["replaced"]["deepsets"]["choice"] == json.loads(json.dumps(old_choice["deepsets"]))
    new_choice = se.choose(done["families"]["deepsets"])
    assert (
        done["choice"]["deepsets"]["train"]
        == new_choice["train"]
        == {"lr": hi, "schedule": "cosine"}
    )
    assert done["choice"]["mz"] == json.loads(json.dumps(old_choice["mz"]))
    rows = {r["family"]: r for r in se.choice_rows(NAME)}
    assert rows["Deep Sets"]["replaced"].startswith("the cap's cosine at the rungs: ")
    # decided, but MZ is still decided by the censored search: Deep Sets trains with the choice
    # it replaced, so that no verdict compares families chosen by two methods
    cfg = ex.job("tab:main-results", "F-deepsets", NAME, 0).train_config()
    assert (cfg.lr, cfg.schedule) == (hi, "plateau")
    assert rows["Deep Sets"]["waits"] == "3e-2, plateau"
    (row,) = [r for r in se.best_setting_rows(NAME) if r["cell"] == "F-deepsets"]
    assert row["chosen"] == "3e-2, plateau"  # the table's choice is what its verdicts train with
    # once every family is decided by this search, each trains with its new choice
    done["methods"]["mz"] = se.METHOD
    path.write_text(json.dumps(done))
    cfg = ex.job("tab:main-results", "F-deepsets", NAME, 0).train_config()
    assert (cfg.lr, cfg.schedule) == (hi, "cosine")
    assert {r["family"]: r["waits"] for r in se.choice_rows(NAME)}["Deep Sets"] is None


def test_a_table_keeps_its_choices_while_a_study_added_to_it_is_under_way(tiny, monkeypatch):
    """A cell added to the families' studies of a table (Task B's) moves no family's choice for
    the table, nor any family's choice over all its studies, until every family's study of it
    has tried the whole grid: one family's complete study waits for the other's, and meanwhile
    no table falls back to a family's choice over other tables. Then the table's choices move."""
    lo, hi = se.LRS
    best = {"F": (hi, "plateau"), "G": (lo, "cosine"), "L16": (lo, "cosine")}  # by task
    fake = {task: _fake_fit({c: (lambda e, T, v=0.1 if c == b else 1.0: v + 1.0 / e)
                             for c in [(lr, s) for lr in se.LRS for s in se.SCHEDULES]}, [])
            for task, b in best.items()}  # fmt: skip

    def splits(job):  # F-deepsets -> its task, "F"
        split = SimpleNamespace(d_in=1, d_out=1, task=job.cell.id.split("-")[0])
        return split, split, None

    monkeypatch.setattr(se, "fit", lambda model, tr, *a, **k: fake[tr.task](model, tr, *a, **k))
    monkeypatch.setattr(se, "job_splits", splits)
    monkeypatch.setattr(se, "build_cell_model", lambda *a, **k: None)
    main_results = "tab:main-results"
    cells = {"deepsets": [(main_results, "F-deepsets"), ("tab:tdof-verify", "L16-st_4l")],
             "baseline": [(main_results, "F-st")]}  # fmt: skip
    monkeypatch.setattr(se, "SEARCH_CELLS", {f: tuple(c) for f, c in cells.items()})
    decided = se.search(NAME, seeds=(0,), say=lambda *a: None)

    def trains(cell):
        cfg = ex.job(main_results, cell, NAME, 0).train_config()
        return cfg.lr, cfg.schedule

    assert trains("G-deepsets") == trains("G-st") == (hi, "plateau")
    assert decided["choice"]["deepsets"]["train"] != {"lr": hi, "schedule": "plateau"}
    # Task G joins both families: Deep Sets' study of it completes, the baselines' has tried 3
    # of the 4 configurations
    cells["deepsets"].insert(1, (main_results, "G-deepsets"))
    cells["baseline"].append((main_results, "G-st"))
    monkeypatch.setattr(se, "SEARCH_CELLS", {f: tuple(c) for f, c in cells.items()})
    g_studies = [s for s in se.plan_search(NAME, seeds=(0,)) if s.job.cell.id[0] == "G"]
    for study in g_studies:
        se.run_study(study, say=lambda *a: None)
    full = {s.name: se.trials(s) for s in g_studies}

    def journals(study, cache_dir=None):  # the baselines' study of G stopped after 3 trials
        return full[study.name][: 3 if study.family == "baseline" else None]

    monkeypatch.setattr(se, "trials", journals)
    half, decided = (json.loads(json.dumps(o)) for o in (se.write_search(NAME, g_studies),
                                                          decided))  # fmt: skip
    assert half["choice_by_table"] == decided["choice_by_table"]
    assert half["choice"] == decided["choice"]
    assert trains("G-deepsets") == trains("G-st") == (hi, "plateau")
    # complete, G decides the table with F: their bests tie, the smaller rate is chosen
    monkeypatch.setattr(se, "trials", lambda s, cache_dir=None: full[s.name])
    done = se.write_search(NAME, g_studies)
    assert trains("F-deepsets") == trains("G-st") == (lo, "cosine")
    tdof = done["choice_by_table"]["deepsets"]["tab:tdof-verify"]
    assert tdof["train"] == decided["choice_by_table"]["deepsets"]["tab:tdof-verify"]["train"]


def test_rung_runs_and_the_price_of_sized_cosines():
    assert se.rungs(200) == [20, 60, 180]
    assert se.rung_runs("plateau", 200) == [200]
    # no run of 180: the cap's cosine judged there has nearly finished
    assert se.rung_runs("cosine", 200) == [20, 60, 200]
    assert se.rung_runs("cosine", 15) == [15]  # a cap below the first rung: no rung at all
    # each rung keeps a third: a plateau continues, a cosine starts again at each sized rung
    assert se.expected_epochs("plateau", 200) == pytest.approx(20 + 40 / 3 + 120 / 9 + 20 / 27)
    assert se.expected_epochs("cosine", 200) == pytest.approx(20 + 60 / 3 + 180 / 9 + 20 / 27)
    assert se.expected_epochs("cosine", 15) == pytest.approx(15)


def test_the_choice_is_the_smallest_rate_within_the_tie_of_the_best_mean():
    def recs(losses):
        return [{"lr": lr, "schedule": s, "best_val_loss": v}
                for (lr, s), v in zip([(lr, s) for lr in se.LRS for s in se.SCHEDULES], losses,
                                      strict=True)]  # fmt: skip

    n = len(se.LRS) * len(se.SCHEDULES)
    # study 1: the last configuration (largest rate, cosine) is best; 3e-4 plateau is 1 % worse
    a = [2.0] * n
    a[-1], a[2] = 1.0, 1.01
    b = [2.0] * n
    b[-1], b[2] = 1.0, 1.01
    c = se.choose({"s1": recs(a), "s2": recs(b)})
    assert c["train"] == {"lr": se.LRS[1], "schedule": se.SCHEDULES[0]}
    assert c["mean_relative_excess"][f"{se.LRS[1]:g} {se.SCHEDULES[0]}"] == pytest.approx(0.01)
    # 5 % worse is no tie: the best wins
    a[2] = b[2] = 1.05
    c = se.choose({"s1": recs(a), "s2": recs(b)})
    assert c["train"] == {"lr": se.LRS[-1], "schedule": se.SCHEDULES[-1]}
    # a study that has not tried every configuration decides nothing
    assert se.choose({"s1": recs(a), "s2": recs(b)[:-1]}) is None


def test_search_prunes_only_at_its_rungs_writes_its_choice_and_the_profile_reads_it(tiny):
    out = se.search(NAME, ["deepsets"], seeds=(0,), say=lambda *a: None)
    path = ex.specs.search_path(NAME)
    assert json.loads(path.read_text())["choice"] == json.loads(json.dumps(out["choice"]))
    recs = out["families"]["deepsets"]["deepsets-tab-main-results-F-deepsets-seed0"]
    assert {(r["lr"], r["schedule"]) for r in recs} == {
        (lr, s) for lr in se.LRS for s in se.SCHEDULES
    }
    for r in recs:
        assert r["epochs"] >= se.MIN_EPOCHS  # never pruned before the first rung
        if r["state"] == "pruned":
            assert r["epochs"] in (2, 4)  # the rungs: 2, then 2 x 2
        else:
            assert r["epochs"] == 8
        assert math.isfinite(r["best_val_loss"])
    assert any(r["state"] == "pruned" for r in recs)  # the pruner did prune (deterministic CPU)
    best = min(recs, key=lambda r: r["best_val_loss"])
    assert best["state"] == "complete"  # the best configuration is never the one pruned
    choice = out["choice"]["deepsets"]["train"]
    cfg = ex.job("tab:main-results", "F-deepsets", NAME, 0).train_config()
    assert (cfg.lr, cfg.schedule) == (choice["lr"], choice["schedule"])
    assert "deepsets: mean relative excess val loss" in out["printed"]
    # writing the file again reads the journals and leaves them as they are
    (study,) = se.plan_search(NAME, ["deepsets"], seeds=(0,))
    journal = se._journal(study).read_bytes()
    assert se.write_search(NAME, [study])["choice"] == out["choice"]
    assert se._journal(study).read_bytes() == journal
    (unrun,) = se.plan_search(NAME, ["deepsets"], seeds=(5,))
    assert se.trials(unrun) == [] and not se._journal(unrun).exists()
    # a second run finds every trial finished and trains nothing
    said = []
    again = se.search(NAME, ["deepsets"], seeds=(0,), say=said.append)
    assert len(said) == 1 and again["choice"] == out["choice"]  # the header line only
    # a run of another seed adds its study beside the first, and the choice reads both
    both = se.search(NAME, ["deepsets"], seeds=(1,), say=lambda *a: None)
    studies = both["families"]["deepsets"]
    assert sorted(studies) == [f"deepsets-tab-main-results-F-deepsets-seed{k}" for k in (0, 1)]
    assert studies["deepsets-tab-main-results-F-deepsets-seed0"] == recs
    assert both["choice"]["deepsets"] == se.choose(studies)
    assert [both["studies"][n]["seed"] for n in sorted(studies)] == [0, 1]
    assert both["studies"][sorted(studies)[0]] == {
        "family": "deepsets",
        "table": "tab:main-results",
        "cell": "F-deepsets",
        "seed": 0,
    }


def test_the_choice_table_says_what_each_family_tried_and_what_won(tmp_path):
    """The reading page's account of the search, from the committed file only: every family's
    trials, its choice beside the runner-up and the paper's 1e-4 with a cosine, by how much."""
    grid = [(lr, s) for lr in se.LRS for s in se.SCHEDULES]
    before = se.choice_rows("paper-sizes", results_dir=tmp_path)
    assert [r["family"] for r in before] == [se.FAMILY_NAMES[f] for f in se.SEARCH_CELLS]
    assert all(r["choice"] is None and r["trials"].startswith("0 of ") for r in before)
    # one family decided: 3e-3 plateau best in both studies, the paper's setting 50 % worse
    losses = {c: 1.2 for c in grid} | {(3e-3, "plateau"): 1.0, (1e-4, "cosine"): 1.5}
    recs = [{"lr": lr, "schedule": s, "best_val_loss": losses[lr, s],
             "state": "pruned" if losses[lr, s] > 1.2 else "complete"}
            for lr, s in grid]  # fmt: skip
    studies = {"deepsets-tab-main-results-F-deepsets-seed0": recs,
               "deepsets-tab-main-results-F-deepsets-seed5": recs}  # fmt: skip
    path = ex.specs.search_path("paper-sizes", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"format": se.FORMAT, "methods": {"deepsets": se.METHOD},
                                "families": {"deepsets": studies},
                                "choice": {"deepsets": se.choose(studies)}}))  # fmt: skip
    rows = {r["family"]: r for r in se.choice_rows("paper-sizes", results_dir=tmp_path)}
    ds = rows["Deep Sets"]
    assert ds["choice"] == "3e-3, plateau" and ds["excess"] == pytest.approx(0.0)
    assert ds["paper_excess"] == pytest.approx(0.5)
    assert ds["runner_up_excess"] == pytest.approx(0.2)
    planned = 2 * len(se.SEARCH_CELLS["deepsets"]) * len(grid)  # 2 seeds x the family's cells
    assert ds["trials"] == f"{2 * len(grid)} of {planned} (2 pruned: 2 cosine)"
    assert ds["method"] == "a cosine sized to its rung" and ds["replaced"] is None
    assert rows["MZAttn"]["choice"] is None
    # the seeds its studies ran, not the default's (0, 1), which the undecided family plans
    assert ds["trained"].endswith("seeds 0, 5") and rows["MZAttn"]["trained"].endswith("seeds 0, 1")
    # read from the studies' records where the file has them (written by write_search)
    record = {"family": "deepsets", "table": "tab:main-results", "cell": "F-deepsets"}
    data = json.loads(path.read_text())
    data["studies"] = {name: record | {"seed": k} for name, k in zip(studies, (2, 7), strict=True)}
    path.write_text(json.dumps(data))
    (ds,) = [r for r in se.choice_rows("paper-sizes", results_dir=tmp_path)
             if r["family"] == "Deep Sets"]  # fmt: skip
    assert ds["trained"].endswith("seeds 2, 7")
    html = str(se.choice_table("paper-sizes", results_dir=tmp_path))
    assert "not decided yet" in html and "+50.0%" in html and "3e-3, plateau" in html
    # a file of the search before issue 49 (format 1): its method named, its own cells planned
    data.pop("format"), data.pop("methods")
    path.write_text(json.dumps(data))
    (ds,) = [r for r in se.choice_rows("paper-sizes", results_dir=tmp_path)
             if r["family"] == "Deep Sets"]  # fmt: skip
    assert ds["method"] == "the cap's cosine at the rungs"
    assert ds["trials"] == f"{2 * len(grid)} of {2 * len(grid)} (2 pruned: 2 cosine)"


def test_the_choice_table_marks_a_choice_that_waits_for_the_other_families(tmp_path):
    """Deep Sets decided by this search while MZ is decided by the censored one: the table shows
    its new choice as not in effect yet and says what it trains with until then."""
    grid = [(lr, s) for lr in se.LRS for s in se.SCHEDULES]
    recs = [{"lr": lr, "schedule": s, "best_val_loss": 1.0 if (lr, s) == (3e-3, "cosine") else 2.0,
             "state": "complete"} for lr, s in grid]  # fmt: skip
    new = se.choose({"deepsets-tab-main-results-F-deepsets-seed0": recs})
    old = {"train": {"lr": 1e-3, "schedule": "plateau"}}
    path = ex.specs.search_path("paper-sizes", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "format": se.FORMAT, "methods": {"deepsets": se.METHOD, "mz": se.CENSORED_METHOD},
        "choice": {"deepsets": new, "mz": new},
        "replaced": {"deepsets": {"method": se.CENSORED_METHOD, "studies": {}, "choice": old}},
    }))  # fmt: skip
    rows = {r["family"]: r for r in se.choice_rows("paper-sizes", results_dir=tmp_path)}
    assert rows["Deep Sets"]["waits"] == "1e-3, plateau" and rows["MZAttn"]["waits"] is None
    assert ex.specs.search_choice("paper-sizes", tmp_path)["deepsets"] == old["train"]
    html = str(se.choice_table("paper-sizes", results_dir=tmp_path))
    assert "3e-3, cosine (not in effect yet)" in html
    assert "it trains with 1e-3, plateau on every table (the choice of the search it" in html


def test_a_searched_profile_trains_each_searched_table_with_its_own_choice(tiny):
    """A family's choice for a table where its search made one; elsewhere its shared choice."""
    shared = {"lr": 1e-3, "schedule": "plateau"}
    tdof = {"lr": 3e-4, "schedule": "cosine"}
    path = ex.specs.search_path(NAME)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "format": se.FORMAT, "choice": {"baseline": {"train": shared}},
        "choice_by_table": {"baseline": {"tab:tdof-verify": {"train": tdof}}},
    }))  # fmt: skip
    for table, cell, want in (("tab:tdof-verify", "L16-st_4l", tdof),
                              ("tab:main-results", "F-st", shared),
                              ("tab:meb", "d8-st", shared)):  # fmt: skip
        cfg = ex.job(table, cell, NAME, 0).train_config()
        assert {"lr": cfg.lr, "schedule": cfg.schedule} == want, (table, cell)
    assert ex.specs.search_choice(NAME) == {"baseline": shared}


def test_best_setting_rows_are_each_familys_best_configuration_per_cell(tmp_path):
    """The labelled ablation: per searched cell of tab:main-results, the best configuration over the
    cell's complete studies and its mean validation R^2, beside the table's choice."""
    grid = [(lr, s) for lr in se.LRS for s in se.SCHEDULES]

    def recs(best, r2_best, r2_rest=0.5):
        return [{"lr": lr, "schedule": s, "best_val_loss": 1.0 if (lr, s) == best else 2.0,
                 "val_r2_at_best": r2_best if (lr, s) == best else r2_rest, "state": "complete"}
                for lr, s in grid]  # fmt: skip

    f_best, g_best = (3e-3, "cosine"), (1e-4, "plateau")
    fam = {
        "deepsets-tab-main-results-F-deepsets-seed0": recs(f_best, 0.7),
        "deepsets-tab-main-results-F-deepsets-seed1": recs(f_best, 0.8),
        "deepsets-tab-main-results-G-deepsets-seed0": recs(g_best, 0.6),
        "deepsets-tab-main-results-G-deepsets-seed1": recs(g_best, 0.9)[:-1],  # unfinished
    }
    table_choice = se.choose({k: v for k, v in fam.items() if "-F-" in k})
    path = ex.specs.search_path("paper-sizes", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "format": se.FORMAT, "methods": {"deepsets": se.METHOD, "mz": se.METHOD},
        "families": {"deepsets": fam}, "choice": {"deepsets": table_choice, "mz": table_choice},
        "choice_by_table": {"deepsets": {"tab:main-results": table_choice}},
    }))  # fmt: skip
    rows = {r["cell"]: r for r in se.best_setting_rows("paper-sizes", results_dir=tmp_path)}
    # every family's F and G cells; a family that has not run them has no setting yet
    assert sorted(rows) == sorted(c for f in se.SEARCH_CELLS.values() for t, c in f
                                  if t == "tab:main-results")  # fmt: skip
    assert rows["F-mz_full"]["best"] is None and rows["F-mz_full"]["seeds"] == []
    # a cell no study has run still trains at its family's choice, with no R^2 of its own
    assert (rows["F-mz_full"]["chosen"], rows["F-mz_full"]["chosen_val_r2"]) == ("3e-3, cosine",
                                                                                None)  # fmt: skip
    f = rows["F-deepsets"]
    assert f["label"] == se.ABLATION_LABEL and f["family"] == "Deep Sets"
    assert f["best"] == "3e-3, cosine" and f["best_val_r2"] == pytest.approx(0.75)
    assert f["chosen"] == "3e-3, cosine" and f["chosen_val_r2"] == pytest.approx(0.75)
    assert f["seeds"] == [0, 1] and f["column"].startswith("Task F")
    # G: the seed whose study is complete, the unfinished one left out; the table's choice there
    g = rows["G-deepsets"]
    assert g["seeds"] == [0] and g["best"] == "1e-4, plateau"
    assert g["best_val_r2"] == pytest.approx(0.6) and g["chosen_val_r2"] == pytest.approx(0.5)
    html = str(se.best_setting_table("paper-sizes", results_dir=tmp_path))
    assert "Ablation, not a verdict" in html and "3e-3, cosine (0.750)" in html
    assert "1e-4, plateau (0.600)" in html and "not searched yet" in html
    assert "3e-3, cosine (--)" in html  # F-mz_full's choice
    # another table on request: no study ran there
    tdof = se.best_setting_rows("paper-sizes", ("tab:tdof-verify",), tmp_path)
    assert {r["table"] for r in tdof} == {"tab:tdof-verify"} and all(
        r["best"] is None for r in tdof
    )


def test_a_trial_left_running_by_a_killed_process_is_run_again(tiny):
    (study,) = se.plan_search(NAME, ["deepsets"], seeds=(0,))
    ost = se._optuna_study(study)
    se._ask(ost, se.LRS[0], se.SCHEDULES[0])  # what a killed process leaves: a RUNNING trial
    recs = se.run_study(study, say=lambda *a: None)
    assert len(recs) == len(se.LRS) * len(se.SCHEDULES)
    states = [t.state.name for t in se._optuna_study(study).get_trials()]
    assert states.count("FAIL") == 1 and "RUNNING" not in states


def test_a_searched_profile_refuses_to_train_before_its_search_chose(tiny):
    with pytest.raises(ValueError, match=r"python -m mzlite search test-searched"):
        ex.run("tab:main-results", profile=NAME, cells=["F-deepsets"], seeds=[0], progress=False)


def test_plan_search_names_valid_families():
    with pytest.raises(ValueError, match="families must be among"):
        se.plan_search("paper-sizes", ["transformers"])
    with pytest.raises(ValueError, match="takes no searched rates"):
        se.plan_search("cpu-annealed")


def test_censoring_counts_each_methods_pruned_trials_and_the_reading_entry_reads_them(tmp_path):
    """The reading page's counts come from the file: per method, how many trials of each
    schedule were pruned (and at the first rung) and in how many studies a cosine was best."""

    def rec(lr, s, state, epochs, loss):
        return {"lr": lr, "schedule": s, "state": state, "epochs": epochs, "best_val_loss": loss}

    old = {
        "mz-x-seed0": [
            rec(1e-4, "cosine", "pruned", 20, 0.9),
            rec(1e-3, "cosine", "pruned", 60, 0.8),
            rec(1e-4, "plateau", "complete", 90, 0.5),
        ],
        "mz-x-seed1": [
            rec(1e-4, "cosine", "complete", 150, 0.3),
            rec(1e-4, "plateau", "pruned", 20, 0.7),
        ],
    }
    new = {"deepsets-y-seed0": [rec(1e-4, "cosine", "complete", 200, 0.2),
                                rec(1e-4, "plateau", "pruned", 20, 0.6)]}  # fmt: skip
    path = ex.specs.search_path("paper-sizes", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "format": se.FORMAT, "families": {"mz": old, "deepsets": new},
        "methods": {"mz": se.CENSORED_METHOD, "deepsets": se.METHOD}, "choice": {},
    }))  # fmt: skip
    counts = se.censoring("paper-sizes", tmp_path)
    assert counts[se.CENSORED_METHOD] == {
        "trials": {"plateau": 2, "cosine": 3}, "pruned": {"plateau": 1, "cosine": 2},
        "pruned_at_first_rung": {"plateau": 1, "cosine": 1}, "studies": 2, "cosine_best": 1,
    }  # fmt: skip
    assert counts[se.METHOD]["pruned"] == {"plateau": 1, "cosine": 0}
    entry = se.reading_entry("paper-sizes", tmp_path)
    assert (
        "it pruned 2 of 3 cosine trials (1 at the first rung) against 1 of 2 plateau"
        in (entry["alternatives"])
    )
    assert "best trial of 1 of its 2 studies" in entry["alternatives"]
    assert reading.Choice(**entry).topic == "Learning-rate search: comparing schedules"


def test_the_journals_in_flight_still_read_as_the_committed_search(monkeypatch, tmp_path):
    """The journals in data/in-flight, written by the pinned tree the searches run from, read
    (trial keys and records) as the committed file's trials: a refactor of this module must not
    stop those journals from resuming. Read from a copy: loading leaves no file beside them."""
    monkeypatch.delenv("MZLITE_RESULTS", raising=False)
    in_flight = tmp_path / "in-flight"
    shutil.copytree(Path(__file__).parents[1] / "data" / "in-flight", in_flight,
                    ignore=shutil.ignore_patterns("*.pt"))  # fmt: skip
    out = se.read_search("paper-sizes")
    # every study of this method's searches, decided or pending, as the file was written from it
    searched = {**{f: st for f, st in out["families"].items() if out["methods"][f] == se.METHOD},
                **{f: p["studies"] for f, p in out["pending"].items()}}  # fmt: skip
    assert "deepsets" in searched and "baseline" in searched
    for fam, committed in searched.items():
        for study in se.plan_search("paper-sizes", [fam]):
            read = json.loads(json.dumps(se.trials(study, in_flight)))
            assert read == committed.get(study.name, []), study.name


def _old_and_new_rates(monkeypatch) -> tuple[Profile, Profile]:
    """Two tiny profiles that differ in the Set Transformer's rate alone: (new, old)."""
    train = {"epochs": 8, "patience": None, "amp": False}
    now = Profile("test-now", (96, 48, 48), 1, train, lr_by_family={"baseline": 3e-3, "mz": 1e-3})
    old = Profile("test-old", (96, 48, 48), 1, train, lr_by_family={"baseline": 1e-3, "mz": 1e-3})
    for p in (now, old):
        monkeypatch.setitem(PROFILES, p.name, p)
    return now, old


def _result(table: str, cell: str, trained_as: Profile, under: Profile, root: Path) -> Path:
    """A result of ``cell``, seed 0, trained as ``trained_as`` trains it, filed under ``under``."""
    job = ex.job(table, cell, trained_as.name)
    path = ex.result_path(table, cell, 0, under.name, root)
    path.parent.mkdir(parents=True, exist_ok=True)
    res = {"format": ex.RESULT_FORMAT, "table": table, "cell": cell, "seed": 0,
           "profile": under.name, "task": job.cell.task, "model": job.cell.model,
           "sizes": list(job.sizes), "metrics": {"test": {"r2": 0.5}}}  # fmt: skip
    if job.cell.model != ex.SET_STATS:
        res["train_config"] = job.train_config().to_dict()
    path.write_text(json.dumps(res))
    return path


def test_retire_keeps_the_old_rates_campaign_in_the_superseded_profile(monkeypatch, tmp_path):
    """When a family's new rate trains, its results at the old rate move to the superseded
    profile; results whose cells train as before, and closed-form ones, are copied there, so
    that it holds the whole old campaign. Nothing else moves, and a second call changes nothing."""
    now, old = _old_and_new_rates(monkeypatch)
    table = "tab:tdof-verify"

    def result(cell: str, trained_as: Profile) -> Path:
        return _result(table, cell, trained_as, now, tmp_path)

    st, mz, stats = result("L4-st_4l", old), result("L4-mz_1l", now), result("L4-set_stats", now)
    (st_job,) = ex.jobs(table, now.name, [0], cells=["L4-st_4l"], results_dir=tmp_path)
    assert st_job.result_path == st and not ex.has_result(st_job)  # trained at the old rate
    planned = ex.results.retire(now.name, old.name, tmp_path, dry_run=True)
    assert [(a, p.name) for a, p, _ in planned] == [
        ("copy", "L4-mz_1l__seed0.json"), ("copy", "L4-set_stats__seed0.json"),
        ("move", "L4-st_4l__seed0.json")]  # fmt: skip
    assert st.exists()
    ex.results.retire(now.name, old.name, tmp_path)
    assert not st.exists() and mz.exists() and stats.exists()
    kept = ex.results_by_cell(table, old.name, tmp_path)
    assert sorted(kept) == ["L4-mz_1l", "L4-set_stats", "L4-st_4l"]
    moved = kept["L4-st_4l"][0]
    assert moved["profile"] == old.name and moved["retired_from"]["action"] == "move"
    assert moved["retired_from"]["path"] == f"{now.name}/tab-tdof-verify/L4-st_4l__seed0.json"
    assert sorted(ex.results_by_cell(table, now.name, tmp_path)) == ["L4-mz_1l", "L4-set_stats"]
    assert ex.results.retire(now.name, old.name, tmp_path) == []
    # the landing page's compute counts each run once, not its copy as well
    for path in (st, mz, stats):
        for p in (path, ex.result_path(table, path.name.split("__")[0], 0, old.name, tmp_path)):
            if p.exists():
                p.write_text(json.dumps({**json.loads(p.read_text()), "wall_time_s": 3600.0}))
    assert fd.compute_spent(tmp_path) == {CPU: (3, 3.0)}


def test_a_comparison_reads_one_campaign_whole(monkeypatch, tmp_path):
    """``caught_up``: the cells of one comparison come from one campaign, the newest that has as
    many results of each cell as an older one: while the new campaign lags in a cell, the old;
    with no result anywhere, the newest."""
    now, old = _old_and_new_rates(monkeypatch)
    table, order = "tab:tdof-verify", (now.name, old.name)
    cells = [(table, "L4-st_4l"), (table, "L4-mz_1l")]
    assert caught_up(cells, order, tmp_path) == now.name
    _result(table, "L4-st_4l", old, old, tmp_path)
    assert caught_up(cells, order, tmp_path) == old.name  # the old has a result the new lacks
    _result(table, "L4-mz_1l", old, old, tmp_path)
    _result(table, "L4-st_4l", old, now, tmp_path)  # at the old rate: no result of the new
    _result(table, "L4-mz_1l", now, now, tmp_path)
    assert caught_up(cells, order, tmp_path) == old.name
    _result(table, "L4-st_4l", now, now, tmp_path)
    assert caught_up(cells, order, tmp_path) == now.name


def test_the_censored_profile_trains_each_family_as_the_censored_search_chose(tmp_path):
    """paper-sizes-censored's rates are the choices of the search before issue 49, as the
    committed search file records them (its 'replaced' entries, or a family's own 'choice' while
    no newer search has decided it), every one of them a plateau; nothing retires while a
    family is still decided by that search."""
    out = se.read_search("paper-sizes")
    censored = {fam: (out["replaced"][fam]["choice"] if out["methods"][fam] == se.METHOD
                      else out["choice"][fam])["train"] for fam in out["choice"]}  # fmt: skip
    prof = PROFILES[se.SUPERSEDED["paper-sizes"][-1]]
    assert {f: {"lr": lr, "schedule": prof.train["schedule"]}
            for f, lr in prof.lr_by_family.items()} == censored  # fmt: skip
    path = se.search_path("paper-sizes", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({**out, "methods": {**out["methods"], "mz": se.CENSORED_METHOD}}))
    with pytest.raises(ValueError, match=r"decided by an older search: \['mz'\]"):
        se.retire_superseded("paper-sizes", tmp_path, dry_run=True)
    with pytest.raises(ValueError, match="profile must be one of"):
        se.retire_superseded("cpu-annealed")


def test_the_profile_searched_without_task_b_is_frozen_and_takes_its_campaign_once_nothing_is_held(
    tmp_path,
):
    """paper-sizes-fg reads its own search file, a frozen copy, and no search writes over it;
    ``--retire`` moves paper-sizes' campaign there only once no table's choices are held by a
    study with configurations left (before, those results are paper-sizes' own experiments)."""
    fg = se.SUPERSEDED["paper-sizes"][0]
    assert PROFILES[fg].searched and se.search_path(fg).exists()
    with pytest.raises(ValueError, match="superseded"):
        se.plan_search(fg)
    out = se.read_search("paper-sizes")
    (study,) = [s for s in se.plan_search("paper-sizes", ["baseline"], [0])
                if s.job.cell.id == "B-st_large"]  # fmt: skip
    out["families"]["baseline"][study.name] = out["families"]["baseline"][study.name][:-1]
    path = se.search_path("paper-sizes", tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(out))
    with pytest.raises(ValueError, match=r"under way: \['tab:main-results'\]\): nothing"):
        se.retire_superseded("paper-sizes", tmp_path, dry_run=True)


PAPER_SIZED_RESULTS = sorted(
    p for prof in ex.results.PAPER_SIZED for p in (ROOT / "data/results" / prof).rglob("*.json")
)


@pytest.mark.parametrize("path", PAPER_SIZED_RESULTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_run_at_the_papers_sizes_is_its_cells_experiment_in_its_profile(path):
    """A search's choices that move make the runs at the old ones another experiment: they are
    retired into the superseded profile (``search --retire``) in the commit that lands the move,
    and a frozen search file trains exactly the runs retired into its profile."""
    res = json.loads(path.read_text())
    cell = ex.get_table(res["table"]).cell(res["cell"])
    if res.get("train_config"):
        assert ex.results._trains_as(res, cell, ex.get_profile(res["profile"]))


def test_every_study_trains_a_model_of_its_family():
    """``SEARCH_CELLS`` and ``FAMILY_MODEL`` are typed by hand: a cell of another family would
    search that family's rate under this one's name."""
    studies = se.plan_search("paper-sizes")
    assert {s.family for s in studies} == set(se.SEARCH_CELLS)
    for s in studies:
        assert ex.model_family(s.job.cell.model) == s.family, s.name
