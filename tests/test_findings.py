"""mzlite.repro.experiments.findings and narrate: the sentences the book prints, written from
results.

Results are constructed on disk (as the runner writes them), so each test knows what the
sentences must say; the statistics are checked against scipy."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from scipy import stats as sps
from test_scorecard import SETTINGS, _cell, _tdof, _tier1, _write

from mzlite.repro import experiments as ex
from mzlite.repro import meb_study, relational, training_study, transfer
from mzlite.repro.experiments import findings as fd
from mzlite.repro.experiments import formatting as fmt
from mzlite.repro.experiments import narrate, present
from mzlite.repro.experiments.results import PROFILE_ORDER
from mzlite.repro.experiments.scorecard import scorecard

ROOT = Path(__file__).resolve().parents[1]
HASH = re.compile(r"(?<![\w.+-])(?=[0-9a-f]*\d)(?=(?:[0-9]*[a-f]){2})[0-9a-f]{7,40}(?![\w.+-])")


def _all_cell_ids() -> set[str]:
    return {c.id for t in ex.TABLES for c in ex.get_table(t).cells}


def test_count_phrase_and_results_label():
    assert fmt.count_phrase("holds", 1) == "1 holds" and fmt.count_phrase("holds", 2) == "2 hold"
    assert fmt.count_phrase("not run", 30) == "30 were not run"
    assert fd.results_label("04_training_on_gpu") == "results-ch04"
    with pytest.raises(ValueError, match="verdict must be one of"):
        fmt.count_phrase("maybe", 1)
    with pytest.raises(ValueError, match="chapter must start with its number"):
        fd.results_label("intro")


def test_findings_say_what_the_scorecard_says(tmp_path):
    # MZ-1L fits at every L (0.95), ST-4L drops from 0.9 to 0.3: the three TDOF claims hold
    _tdof(tmp_path, mz=0.95, st4=0.9, st32=0.3, profile="cpu-converged")
    sc = scorecard(results_dir=tmp_path)
    f = fd.findings(sc, results_dir=tmp_path)
    counts = sc.counts()
    assert f.counts == counts and f.total == len(sc)
    assert counts["holds"] == 3 and counts["not run"] == len(sc) - 3  # what was constructed
    opening = next(s for s in f.sentences if not s.lead).text
    assert f"tests {len(sc)} claims" in opening
    assert "3 hold" in opening and f"{counts['not run']} were not run" in opening
    held = next(s for s in f.sentences if s.text.startswith("What held"))
    assert held.body == "3 hold; 3 of them are evidence for MZAttn."
    lines = [present.verdict_line(r) for r in sc.rows if r["verdict"] == "holds"]
    assert list(held.items) == lines and all(r["text"] in " ".join(lines) for r in sc.rows
                                             if r["verdict"] == "holds")  # fmt: skip
    assert held.links == (("04_training_on_gpu", "results-ch04", "chapter 4"),)
    # read below the paper's sizes: no list of paper-scale verdicts
    assert not any(s.lead.startswith("Read at the paper's sizes") for s in f.sentences)
    assert not any(s.lead == "Compute spent" for s in f.sentences)  # no wall time recorded
    sure = next(s for s in f.sentences if s.text.startswith("How sure"))
    assert "rests on 3 seeds per cell" in sure.text and "Welch t-tests" in sure.text
    not_run = next(s for s in f.sentences if s.text.startswith("What could not run"))
    assert f"{counts['not run']} claims of" in not_run.text
    from mzlite.repro.experiments.plan import decide

    nxt = decide(sorted({r["table"] for r in sc.rows if r["verdict"] == "not run"}),
                 "cpu-annealed", results_dir=tmp_path, measure=False).totals()  # fmt: skip
    assert f"their next steps are {nxt['next_jobs']:,} runs" in not_run.text
    assert not any(s.text.startswith("What did not hold") for s in f.sentences)  # none failed
    assert 4 <= len(f.sentences) <= 7
    for s in f.sentences:  # no plumbing in the text
        text = s.text + " ".join(s.items)
        assert "R^2" not in text and not HASH.search(text) and "data/" not in text
        assert not set(re.findall(r"[\w-]+", text)) & _all_cell_ids()


def test_compute_spent_sums_the_recorded_wall_time_per_device(tmp_path):
    walls = {("cpu-annealed", 0): 1800.0, ("cpu-annealed", 1): 5400.0, ("full", 0): 720.0}
    for (profile, seed), wall in walls.items():
        gpu = {"device": "cuda", "gpu_name": "NVIDIA H200"} if profile == "full" else None
        _write(tmp_path, "tab:tdof-verify", "L16-mz_1l", 0.5, profile, seed=seed,
               wall_time_s=wall, **({"provenance": gpu} if gpu else {}))  # fmt: skip
    _write(tmp_path, "tab:tdof-verify", "L16-st_4l", 0.5, "smoke", wall_time_s=9e9)  # not spent
    spent = fd.compute_spent(tmp_path)
    assert spent == {"2-core CPUs": (2, 2.0), "NVIDIA H200": (1, 0.2)}
    text = fd._compute_sentence(spent).text
    assert text.startswith("Compute spent: 2.0 hours on 2-core CPUs (2 runs); 0.2 hours on "
                           "NVIDIA H200 (1 run)")  # fmt: skip


def test_findings_name_what_did_not_hold_and_render_with_links(tmp_path):
    _tdof(tmp_path, mz=0.4, st4=0.9, st32=0.88, profile="cpu-converged")  # MZ fails everywhere
    sc = scorecard(results_dir=tmp_path)
    f = fd.findings(sc, results_dir=tmp_path, price=False)
    failed = next(s for s in f.sentences if s.text.startswith("What did not hold"))
    assert "A 1-layer MZ model fits the quadratic-TDOF target" in failed.text
    assert not any(s.text.startswith("What could not run") for s in f.sentences)  # price=False
    md = f.to_markdown()
    assert "{ref}`chapter 4 <results-ch04>`" in md
    for v, n in f.counts.items():
        if n:
            assert f'data-verdict="{v}" data-n="{n}"' in md
    html = str(f.to_html())
    assert 'href="04_training_on_gpu.html#results-ch04"' in html
    assert f'data-total="{len(sc)}"' in html


def test_the_paper_scale_verdicts_lead_and_name_their_readings(tmp_path):
    """Read under the paper's protocol, the finding's first two sentences say how the claims that
    MZAttn beats another model came out, where, and under which layer and task readings; each
    verdict read there is listed through the presenter."""
    _tdof(tmp_path, mz=0.4, st4=0.9, st32=0.88, profile="full")
    sc = scorecard(results_dir=tmp_path)
    f = fd.findings(sc, results_dir=tmp_path, price=False)
    beats = [r for r in sc.rows if r["mz_beats"] and r["verdict"] != "not run"]
    assert beats and all(r["profile"] == "full" for r in beats)
    first, second = re.split(r"(?<=\.) (?=[A-Z])", f.headline)[:2]
    assert first.startswith("At the paper's sizes (") and "as the paper claims in 0 of the" in first
    assert f"of the {len(beats)} comparison{'s' * (len(beats) > 1)} judged" in first
    assert second.startswith("It ran under the layer as Eq. (3) prints it")
    assert second.endswith("layer reading literal, on the tasks as mzlite first generated them "
                           "(task reading v1).")  # fmt: skip
    listed = next(s for s in f.sentences if s.lead.startswith("Read at the paper's sizes"))
    paper = [r for r in sc.rows if r["profile"] == "full" and r["verdict"] != "not run"]
    assert list(listed.items) == [present.verdict_line(r) for r in paper]
    for item, r in zip(listed.items, paper, strict=True):  # no MZ model: no layer reading
        mz = any(c.startswith(("L4-mz", "L32-mz")) for c in r["cells"])
        assert ("layer reading literal, task reading v1" if mz else
                "task reading v1 (no MZ layer among its models)") in item  # fmt: skip
    assert f.sentences[0] is listed  # the verdicts at the paper's sizes come first
    md = f.to_markdown()
    assert md.index("mz-headline") < md.index(listed.items[0])


def test_every_label_a_finding_links_to_is_on_its_page():
    """Each chapter a claim belongs to carries its "Results at a glance" label; chapter 9 the
    labels of its how-sure and not-run sections (else the landing page's links break)."""
    from mzlite.repro.experiments.scorecard import claims

    chapters = {ex.get_table(c.table).chapter for c in claims()}
    wanted = {(chapter, fd.results_label(chapter)) for chapter in chapters}
    wanted |= {
        (fd.SCORECARD_CHAPTER, lab)
        for lab in (fd.results_label(fd.SCORECARD_CHAPTER), fd.HOW_SURE_LABEL, fd.NOT_RUN_LABEL)
    }
    wanted.add((fd.LAYER_CHAPTER, fd.LAYER_LABEL))
    missing = []
    for chapter, label in sorted(wanted):
        nb = json.loads((ROOT / "notebooks" / f"{chapter}.ipynb").read_text())
        md = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        if f"({label})=" not in md:
            missing.append(f"{chapter}: ({label})=")
    assert not missing, missing


# ---------------------------------------------------------------------------------------------
# narrate
# ---------------------------------------------------------------------------------------------


def test_cell_words():
    assert fmt.cell_words("tab:meb", "d8-mz_full") == "d = 8, MZAttn-Full"
    assert fmt.cell_words("tab:transfer-matrix", "raw-hull-perceiver") == (
        "MNIST raw pixel / Hull, Perceiver"
    )
    with pytest.raises(ValueError):
        fmt.cell_words("tab:meb", "d8-nope")


def test_main_gaps_test_over_seeds_as_scipy_does(tmp_path):
    _tdof(tmp_path, mz=0.7, st4=0.9, st32=0.8, profile="cpu-converged")
    gaps = training_study.main_gaps(PROFILE_ORDER, tmp_path)
    assert [g.L for g in gaps] == [4, 8, 16, 24, 32]
    for g in gaps:
        t = sps.ttest_ind(g.mz.seed_values, g.st.seed_values, equal_var=False)
        assert g.p == pytest.approx(t.pvalue, rel=1e-6)
        assert g.diff == pytest.approx(0.7 - (0.9 if g.L < 24 else 0.8))
        assert g.reading == "ST-4L fits better" and g.mz.profile == "cpu-converged"
        assert g.paper_diff == pytest.approx(
            narrate.paper_metric("tab:tdof-verify", f"L{g.L}-mz_1l")
            - narrate.paper_metric("tab:tdof-verify", f"L{g.L}-st_4l")
        )
    html = str(training_study.gap_table(gaps))
    assert html.count("<tr>") == len(gaps) + 1 and "R²" in html and "R^2" not in html


def test_tdof_gap_needs_both_models_under_one_protocol(tmp_path):
    _cell(tmp_path, "tab:tdof-verify", "L4-mz_1l", 0.9, "cpu-converged")
    _cell(tmp_path, "tab:tdof-verify", "L4-st_4l", 0.8, "cpu")  # another protocol
    assert training_study.main_gaps(PROFILE_ORDER, tmp_path) == []


def test_what_ran_counts_runs_stopped_early_and_still_improving_at_the_cap(tmp_path):
    from mzlite.repro.experiments.report import what_ran

    def lr(cell):  # the cell's own rate under the profile: another one is another experiment
        return ex.job("tab:tdof-verify", cell, "cpu-converged").train_config().lr

    for s in range(3):
        _write(tmp_path, "tab:tdof-verify", "L4-mz_1l", 0.9 + s / 100, "cpu-converged", seed=s,
               stop_reason="early_stopping", epochs_run=40 + s,
               train_config={"epochs": 200, "lr": lr("L4-mz_1l")})  # fmt: skip
    _write(tmp_path, "tab:tdof-verify", "L4-st_4l", 0.8, "cpu-converged", stop_reason="completed",
           epochs_run=200, metrics={"test": {"r2": 0.8}, "best_epoch": 199},
           train_config={"epochs": 200, "lr": lr("L4-st_4l")})  # fmt: skip
    text = what_ran("tab:tdof-verify", "cpu-converged", tmp_path)
    assert "40-200 epochs run" in text and "(3 stopped by patience)" in text
    assert "1 still improving at the epoch cap" in text and "L4-mz_1l" not in text


def test_fit_ratio_is_the_lowest_training_loss_over_the_target_variance(tmp_path):
    for s, losses in enumerate(([1.0, 0.5, 0.7], [0.9, 0.3, 0.4])):
        cfg = {"normalize_targets": True}
        _write(tmp_path, "tab:meb", "d8-st", 0.1, "cpu-converged", seed=s,
               history={"train_loss": losses}, train_config=cfg)  # fmt: skip
    assert meb_study.fit_ratio("tab:meb", "d8-st", "cpu-converged", tmp_path) == pytest.approx(0.4)
    assert meb_study.fit_ratio("tab:meb", "d8-mz_full", "cpu-converged", tmp_path) is None


def test_pipeline_only_says_so():
    html = str(narrate.pipeline_only("the comparison", "smoke", (2000, 500, 500), 4))
    assert "No results yet" in html and "2,000/500/500" in html and "4 epochs" in html
    assert "not a reproduction" in html


def test_pipeline_only_says_no_results_only_when_there_are_none():
    """A chapter whose claims the scorecard already reads from committed runs does not open
    with "No results yet" (chapter 8's box sat above its own verdicts)."""
    from mzlite.repro.experiments.scorecard import Scorecard

    row = {"table": "tab:ece-nll", "chapter": "08_uncertainty", "verdict": "holds",
           "text": "IHW is cheapest.", "ours_text": "0.1", "paper_text": "0.2",
           "profile": "cpu-annealed"}  # fmt: skip
    ran = Scorecard([row], ("cpu-annealed",))
    html = str(narrate.pipeline_only("the comparison", "smoke", (2000, 500, 500), 4,
                                     chapter="08_uncertainty", sc=ran))  # fmt: skip
    assert "No results yet" not in html and "have not been made" not in html
    assert "1 of its claims have them" in html and "chapter 9" in html
    none = Scorecard([{**row, "verdict": "not run"}], ("cpu-annealed",))
    html = str(narrate.pipeline_only("the comparison", "smoke", (2000, 500, 500), 4,
                                     chapter="08_uncertainty", sc=none))  # fmt: skip
    assert "No results yet" in html


# ---------------------------------------------------------------------------------------------
# book/_ext/book_setup.py
# ---------------------------------------------------------------------------------------------


def _book_setup():
    spec = importlib.util.spec_from_file_location("book_setup", ROOT / "book/_ext/book_setup.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_repository_link_only_when_the_url_is_set():
    mod = _book_setup()
    for url, words, button in (("", "the repository", False),
                               ("https://example.org/r", "[the repository](https://example.org/r)",
                                True)):  # fmt: skip
        cfg = SimpleNamespace(
            html_theme_options={"repository_url": url}, myst_substitutions={}, html_context={}
        )
        mod._repository(None, cfg)
        assert cfg.myst_substitutions["repository"] == words
        assert cfg.html_theme_options["use_repository_button"] is button


@pytest.mark.slow  # ~28 s: the whole scorecard and the plan of what is left, twice
def test_findings_file_is_written_from_the_scorecard(tmp_path):
    path = _book_setup().write_findings(tmp_path)
    text = path.read_text()
    counts = scorecard().counts()
    for v, n in counts.items():
        assert (f'data-verdict="{v}" data-n="{n}"' in text) == bool(n)
    mtime = path.stat().st_mtime_ns
    _book_setup().write_findings(tmp_path)
    assert path.stat().st_mtime_ns == mtime  # unchanged: not rewritten


def test_a_mean_at_zero_reads_as_zero_not_as_noise():
    assert fmt.format_mean_std(-1.2e-06, 5.59e-05) == "0.000 ± 0.000"
    assert fmt.format_mean_std(-6.36e-05, 0.000664) == "0.000 ± 0.001"  # no "-0.000"
    assert fmt.format_mean_std(-0.0008, 0.002) == "-0.001 ± 0.002"
    assert fmt.format_mean_std(0.0008, 0.0001) == "0.0008 ± 0.0001"  # tiny but resolved
    assert fmt.format_mean_std(0.812, 0.01) == "0.812 ± 0.010"
    assert fmt.format_mean_std(0.5, None) == "0.500" and fmt.format_mean_std(None, 0.1) == "--"


def _collapsed_st(root, cell, lr, fitted=False):
    """A Standard cell on per-set normalised MEB sets, trained at ``lr``, three seeds."""
    loss = [1.2, 0.5] if fitted else [1.2, 1.0, 1.0]
    conv = {"converged": fitted, "stopped": True, "fitted": fitted, "rule": "t"}
    _cell(root, "tab:meb", cell, 0.6 if fitted else 0.0, "cpu-annealed",
          train_config={"normalize_targets": True, "lr": lr}, history={"train_loss": loss},
          convergence=conv)  # fmt: skip


def test_the_pma_collapse_on_normalised_sets_is_tried_at_lower_rates(tmp_path):
    # a lower rate without a run at the family's rate is listed alone
    _collapsed_st(tmp_path / "alone", "abl-d8-scale-ynorm-lr0.0003-st", 3e-4)
    assert [r["lr"] for r in meb_study.rate_retry("cpu-annealed", tmp_path / "alone")] == [3e-4]
    twin = meb_study.normalised_twin("d8-st", "cpu-annealed")
    _collapsed_st(tmp_path, twin, 1e-3)
    _collapsed_st(tmp_path, "abl-d8-scale-ynorm-lr0.0003-st", 3e-4)
    _collapsed_st(tmp_path, "abl-d8-scale-ynorm-lr0.0001-st", 1e-4)
    runs = meb_study.rate_retry("cpu-annealed", tmp_path)
    assert [r["lr"] for r in runs] == [1e-3, 3e-4, 1e-4] and all(r["fitted"] == 0 for r in runs)
    assert [r["cell"] for r in runs][0] == twin and all(r["runs"] == 3 for r in runs)
    # one lower rate that fits is counted as fitted
    _collapsed_st(tmp_path, "abl-d8-scale-ynorm-lr0.0003-st", 3e-4, fitted=True)
    fitted = {r["lr"]: r["fitted"] for r in meb_study.rate_retry("cpu-annealed", tmp_path)}
    assert fitted == {1e-3: 0, 3e-4: 3, 1e-4: 0}


def test_the_meb_conditions_name_their_cells_and_protocol(tmp_path):
    cfg = {"normalize_targets": True}
    _cell(tmp_path, "tab:meb", "d8-st", 0.0, "cpu-converged", train_config=cfg,
          history={"train_loss": [1.2, 1.0, 1.0]})  # fmt: skip
    _cell(tmp_path, "tab:meb", "d8-mz_full", 0.6, "cpu-converged", train_config=cfg,
          history={"train_loss": [1.0, 0.3]})  # fmt: skip
    assert meb_study.condition_profile("raw", results_dir=tmp_path) == "cpu-converged"
    assert meb_study.normalised_twin("d8-st", "cpu-converged") == "abl-d8-scale-ynorm-st"
    assert meb_study.normalised_twin("d8-set_stats", "cpu-converged") == "abl-d8-scale-set_stats"
    with pytest.raises(ValueError, match="condition must be one of"):
        meb_study.condition_cell("d8-st", "cooked", "cpu")


def test_transfer_summary_states_the_ranks_and_the_verdict(tmp_path):
    assert "No converged run" in transfer.transfer_summary(tmp_path)[0]
    ranks = dict(zip(SETTINGS, (2, 7, 7, 6, 6, 7), strict=True))
    _tier1(tmp_path, ranks, unconverged=("raw-hull-perceiver",))
    text = " ".join(transfer.transfer_summary(tmp_path))
    assert "raw pixel / MEB: 2 (paper 4)" in text and "raw pixel / Hull: 7" in text
    assert f"Mean rank over the 6 complete settings: {sum(ranks.values()) / 6:.2f}" in text
    assert "insufficient evidence" in text  # a run behind a rank did not converge
    assert "Perceiver" in text and "raw-hull-perceiver" not in text and "raw-hull" not in text
    assert transfer.model_words("st_large") == "ST-Large"


def test_glance_counts_and_links_to_the_verdicts_without_repeating_them(tmp_path):
    """Each result once: the box counts the verdicts and links each paper table to its group
    in chapter 9 (a table none of whose claims ran, to the list of claims not run)."""
    from mzlite.repro.experiments.scorecard import Scorecard

    rows = [
        {"table": "tab:main-results", "chapter": "06_relational_benchmarks", "verdict": v,
         "text": f"Task {t}: Set Regr.: MZAttn beats every other model of the column (R^2 gap "
                 "> 0.01; partly: a tie).", "ours_text": "+0.100", "paper_text": "+0.024",
         "profile": "cpu-converged"}
        for t, v in (("A", "holds"), ("B", "not run"))
    ] + [{"table": "tab:hull", "chapter": "06_relational_benchmarks", "verdict": "not run",
          "text": "d=3: MZAttn beats every other model of the column.", "ours_text": "--",
          "paper_text": "+0.3", "profile": None}]  # fmt: skip
    html = str(narrate.glance("06_relational_benchmarks", ["Our sentence."],
                              sc=Scorecard(rows, ("cpu",))))  # fmt: skip
    assert "3 claims of the paper tested here: 1 holds and 2 were not run." in html
    assert html.index("Our sentence.") < html.index("chapter 9")  # the results, then the link
    assert '<a href="09_reproduction_scorecard.html#verdicts-tab-main-results">Table 2</a>' in html
    assert '<a href="09_reproduction_scorecard.html#scorecard-not-run">Table 22</a>' in html
    assert "MZAttn beats" not in html  # the verdicts themselves are chapter 9's
    assert "What the results say" in html
    nothing = Scorecard([r for r in rows if r["verdict"] == "not run"], ("cpu",))
    html = str(narrate.glance("06_relational_benchmarks", sc=nothing))
    assert "What the results say" not in html and "The paper&#x27;s claims" in html


def test_main_results_glance_names_the_best_other_model(tmp_path):
    for m, v in (("mz_full", 0.6), ("st", 0.7), ("deepsets", 0.8)):
        _cell(tmp_path, "tab:main-results", f"A-{m}", v, "cpu-converged")
    # a model run under a more trusted protocol than MZ's is no comparison for it: not named
    _cell(tmp_path, "tab:main-results", "A-st_large", 0.9, "paper-sizes")
    lines = relational.main_results_glance(results_dir=tmp_path)
    paper = narrate.paper_metric("tab:main-results", "A-mz_full")
    assert lines[0] == (f"Task A: Set Regr. (the first converged CPU protocol (superseded)): "
                        f"MZAttn-Full 0.600 ± 0.010 (paper {paper:.3f}); best other model Deep "
                        "Sets 0.800 ± 0.010.")  # fmt: skip
    assert lines[1] == "Task B: Set Match.: MZAttn-Full not run yet."


def test_each_inline_script_is_kept_once():
    from sphinx.builders.html._assets import _JavaScript

    body = 'const THEBE_JS_URL = "x"'
    scripts = [_JavaScript(None, body=body), _JavaScript("a.js"), _JavaScript("", body=body),
               _JavaScript("a.js"), _JavaScript(None, body="let other = 1")]  # fmt: skip
    context = {"script_files": scripts}
    _book_setup()._scripts_once(None, "intro", "page.html", context, None)
    assert context["script_files"] is scripts  # the builder's own list, edited in place
    assert [(js.filename, js.attributes.get("body")) for js in scripts] == [
        (None, body),
        ("a.js", None),
        (None, "let other = 1"),
    ]


def test_the_hash_pattern_finds_hashes_not_numbers():
    assert HASH.search("trained at git 6dc48738ac") and HASH.search("code 917d63a, 3 seeds")
    assert not HASH.search("eps 4.440892098500626e-16, 1234567e")
    assert not HASH.search("seed 12345678") and not HASH.search("decade")


def test_a_table_whose_cells_run_elsewhere_is_priced_there(tmp_path):
    """Under cpu-annealed tab:hull-normed's cells are tab:hull's runs: what could not run
    still costs those runs, not nothing."""
    from mzlite.repro.experiments.plan import plan

    lent = ex.shared("tab:hull-normed", "cpu-annealed")
    assert lent and not ex.jobs("tab:hull-normed", "cpu-annealed", results_dir=tmp_path)
    there = plan("tab:hull", "cpu-annealed", cells=sorted(c for _, c in lent.values()),
                 results_dir=tmp_path, measure=False).totals()["tab:hull"]  # fmt: skip
    jobs, hours, _, _ = fd._price(["tab:hull-normed"], tmp_path)
    assert jobs == there["todo"] > 0 and hours == pytest.approx(there["cpu_h"])


def test_what_held_leads_with_full_verdicts_and_names_each_claims_table():
    from mzlite.repro.render import table_name

    def row(table, text, verdict, shows=None, paper_table=None):
        statement = f"{table_name(paper_table or table, title=False)}, {text}"
        return {"table": table, "paper_table": paper_table or table, "text": text,
                "statement": statement,
                "verdict": verdict, "ours": 0.01, "ours_text": "+0.01", "paper_text": "+0.08",
                "chapter": "06_relational_benchmarks", "regime": "", "readings": "",
                "why": "the claim's thresholds", "shows": shows}  # fmt: skip

    rows = [
        row("tab:hull", "d = 9: MZAttn beats every other model of the column.", "holds partly"),
        row(
            "tab:ece-nll",
            "IHW ranks the errors as well as MC-Dropout.",
            "holds",
            shows="says nothing",
            paper_table="tab:unc-comparison",
        ),  # fmt: skip
    ]
    held, partly = fd._held_sentence(rows), fd._partly_sentence(rows)
    # what held in full and what held partly are said apart, each claim led by its paper table
    assert held.body == "1 holds; 0 of them are evidence for MZAttn."
    assert held.items == ("Table 20, IHW ranks the errors as well as MC-Dropout. Holds: ours "
                          "+0.01, the paper's +0.08; the claim's thresholds.",)  # fmt: skip
    assert partly.text.startswith("What held partly") and "Table 22, d = 9: MZAttn" in partly.text
    assert "IHW" not in partly.text and "tab:" not in held.text + partly.text
    many = [row("tab:hull", f"d = {d}: MZAttn beats every other model.", "holds partly")
            for d in range(3, 12)]  # fmt: skip
    assert "more" not in fd._partly_sentence(many).text
    assert fd._held_sentence(many).text.startswith("What held in full: no claim")


def test_the_protocol_box_is_measured_from_the_results_and_the_registered_cells(tmp_path):
    from mzlite.repro.experiments import protocols as pr

    paper = pr.paper_row()  # the registered cells' sizes and TrainConfig's defaults
    assert paper["protocol"] == "the paper" and paper["training_sets"] == "5K-10K"
    assert paper["schedule"].startswith("AdamW 1e-4, 5 warm-up epochs, cosine to 0 over 200")
    cfg = {"lr": 1e-3, "batch_size": 128, "warmup_epochs": 3, "schedule": "plateau",
           "patience": 20}  # fmt: skip
    for seed, epochs in enumerate((10, 20, 30)):
        _write(tmp_path, "tab:tdof-verify", "L16-mz_1l", 0.5, "cpu-annealed", seed=seed,
               train_config=cfg, part="main", epochs_run=epochs,
               provenance={"device": "cuda", "gpu_name": "NVIDIA H200"} if seed else
               {"device": "cpu", "gpu_name": None})  # fmt: skip
    rows = pr.protocol_rows(["cpu-annealed", "cpu-converged"], tmp_path)
    assert [r["protocol"] for r in rows] == ["the paper", "the reduced CPU protocol"]
    ours = rows[1]
    # 2,000 training sets at batch 128: 16 steps an epoch, so 160, 320 and 480 steps
    assert ours["training_sets"] == "2K" and ours["optimiser_steps"] == "median 320 (160-480)"
    assert ours["schedule"].startswith("AdamW 1e-3, 3 warm-up epochs, halved after 5 epochs")
    assert ours["seeds"] == "3" and ours["hardware"] == "NVIDIA H200 (2 runs), 2-core CPUs (1 runs)"
    # the runs its verdicts read, where named: an ablation cell a verdict reads counts, the
    # main cell it does not read does not
    _write(tmp_path, "tab:tdof-verify", "L32-st_4l", 0.5, "cpu-annealed", seed=0,
           train_config=cfg, part="ablation", epochs_run=40, sizes=[10000, 2000, 2000],
           provenance={"device": "cpu", "gpu_name": None})  # fmt: skip
    read = pr.protocol_rows(["cpu-annealed"], tmp_path, {"cpu-annealed": {
        ("tab:tdof-verify", "L32-st_4l")}})[1]  # fmt: skip
    assert (read["training_sets"], read["runs"], read["seeds"]) == ("10K", 1, "1")
    with pytest.raises(ValueError, match="unknown profile 'gpu'; valid profiles"):
        pr.protocol_rows(["gpu"], tmp_path)
    assert pr.rate_text(3e-3) == "3e-3" and pr.reader_name("full") == "the paper's protocol"


def test_the_headline_counts_the_claims_that_mzattn_beats_another_model():
    from mzlite.analysis.verdicts import Label
    from mzlite.repro.experiments.engine import CellStats, Reason, Verdict

    def stats(cell, table="tab:main-results"):
        return CellStats(cell, cell, ((table, cell),), (0.5,) * 3, 0.5, 0.0, (0, 1, 2), 3, 3,
                         0, 0, 0.5, True, False)  # fmt: skip

    def row(verdict, beats=True, profile="cpu-annealed", cells=("F-mz_full", "F-st")):
        value = Verdict("c", "tab:main-results", Label(verdict), Reason.THRESHOLDS,
                        profile=profile, cells=tuple(stats(c) for c in cells),
                        layer_reading="literal", task_reading="v1")  # fmt: skip
        regime = {"full": "10K training sets, the paper's protocol",
                  "paper-sizes": "5K training sets, the paper's sizes",
                  "paper-sizes-censored": "5K training sets, the paper's sizes, censored search"
                  }.get(profile, "2K training sets, the reduced CPU protocol")  # fmt: skip
        return {"verdict": verdict, "mz_beats": beats, "regime": regime, "profile": profile,
                "value": value}  # fmt: skip

    rows = [row("does not hold here"), row("does not hold here"), row("not decided"),
            row("holds", beats=False), row("not run")]  # fmt: skip
    text = fd.headline_text(rows)
    assert text.startswith("No claim that MZAttn beats another model was judged at the paper's "
                           "sizes yet; below them it beats another model as the paper claims "
                           "in 0 of 3.")  # fmt: skip
    assert text.endswith("layer reading literal, on the tasks as mzlite first generated them "
                         "(task reading v1).")  # fmt: skip
    # two claims on the same runs at the paper's protocol: 2 claims, 3 experiments, not 4
    other = row("no model learns it", profile="full", cells=("F-mz_full", "F-st_large"))
    won = fd.headline_text([row("holds", profile="full"), other, *rows])
    assert won.startswith("At the paper's sizes (10K training sets, the paper's protocol), MZAttn "
                          "beats another model as the paper claims in 1 of the 2 comparisons "
                          "judged, on 3 "
                          "experiments: 1 holds and 1 is a tie where no model learns the target. "
                          "All of them ran under the layer as Eq. (")  # fmt: skip
    assert ("The other 3, read below the paper's sizes (most at 2K training sets, the reduced "
            "CPU protocol): 2 do not hold here and 1 is not decided.") in won  # fmt: skip
    assert fd.experiment_count(rows) == 2
    # the paper's pattern reproduced is no win: its scope is narrower than the claim's
    shown = fd.headline_text([row("reproduced", profile="full"), *rows])
    assert "beats another model as the paper claims in 0 of the 1 comparison judged" in shown
    assert "(a pattern reproduced on a narrower scope than its claim is no win). It ran" in shown
    assert "no win" not in won
    # the regimes named most faithful first, whatever the order of the claims; a superseded
    # campaign's regime only where no current one decides (its verdict lines name it)
    sized = [row("does not hold here", profile=p) for p in ("paper-sizes-censored", "paper-sizes")]
    assert fd.headline_text([*sized, row("holds", profile="full")]).startswith(
        "At the paper's sizes (10K training sets, the paper's protocol; 5K training sets, the "
        "paper's sizes), MZAttn"
    )
    assert fd.headline_text(sized[:1]).startswith(
        "At the paper's sizes (5K training sets, the paper's sizes, censored search), MZAttn"
    )


def test_once_evaluates_once_per_state_of_the_results(tmp_path):
    """Chapter 9 reads the scorecard in several cells and its exercise: one evaluation while the
    result files stay as they are, a new one as soon as a result lands or is rewritten."""
    calls = []

    def evaluate(tables, results_dir=None):
        calls.append((tuple(tables), results_dir))
        return len(calls)

    assert fd.once(evaluate, ["tab:meb"], results_dir=tmp_path) == 1
    assert fd.once(evaluate, ["tab:meb"], results_dir=tmp_path) == 1  # the same state: cached
    assert fd.once(evaluate, ["tab:hull"], results_dir=tmp_path) == 2  # other arguments
    path = _write(tmp_path, "tab:tdof-verify", "L16-mz_1l", 0.5, "cpu-annealed")
    assert fd.once(evaluate, ["tab:meb"], results_dir=tmp_path) == 3  # a result landed
    path.write_text(path.read_text().replace("0.5", "0.75"))  # rewritten: another size
    assert fd.once(evaluate, ["tab:meb"], results_dir=tmp_path) == 4
    assert calls[-1] == (("tab:meb",), tmp_path)


def test_the_layer_sentence_compares_the_two_readings_on_complete_cells_only():
    from mzlite.repro.experiments.reading import LAYER_ROWS, AblationRow

    def pair(cell, literal, centre_adaptive, st=(0.50, 0.51, 0.52)):
        return [AblationRow(cell, LAYER_ROWS[0], 3, 3, literal, st),
                AblationRow(cell, LAYER_ROWS[1], 3, 3, centre_adaptive, st)]  # fmt: skip

    behind, ahead = (0.30, 0.31, 0.29), (0.80, 0.81, 0.79)
    assert fd.layer_sentence(pair("F", behind, ())) is None  # nothing complete under both
    same = fd.layer_sentence(pair("F", behind, behind) + pair("G", behind, (0.3, 0.3)))
    assert same.body.startswith("on the 1 cell run under")  # G's two seeds are left out
    assert "Definition 2 (the paper's sizes), MZ against" in same.body  # the campaign, named
    assert same.body.endswith("MZ against the Set Transformer: ST better on 1 under both.")
    assert same.links == ((fd.LAYER_CHAPTER, fd.LAYER_LABEL, "chapter 3"),)
    flips = fd.layer_sentence(pair("F", behind, behind) + pair("G", behind, ahead))
    assert flips.body.endswith(
        ": ST better on 2 under Eq. (3); ST better on 1, MZ better on 1 under Definition 2."
    )
    # the same counts on each side, but each cell flipped: not "under both"
    crossed = fd.layer_sentence(pair("F", behind, ahead) + pair("G", ahead, behind))
    assert "under both" not in crossed.body


def test_how_sure_counts_the_stopped_runs_a_failure_pattern_rests_on_once(tmp_path):
    """MEB's reproduced pattern rests on a Set Transformer stopped at the mean: the how-sure
    sentence says so, once for its three runs though both d = 8 claims read them."""
    stopped = {"converged": False, "stopped": True, "fitted": False, "rule": "test"}
    _cell(tmp_path, "tab:meb", "abl-d8-scale-st", 0.0, "full", convergence=stopped)
    _cell(tmp_path, "tab:meb", "abl-d8-scale-mz_full", 0.30, "full")
    sc = scorecard(results_dir=tmp_path)
    assert sc.counts()["reproduced"] == 2
    sure = next(s for s in fd.findings(sc, results_dir=tmp_path).sentences
                if s.text.startswith("How sure"))  # fmt: skip
    assert "every run converged except 3 that stopped without fitting, of models the" in sure.text
