"""mzlite.repro.relational (chapter 6's results): its tables, yardstick settings, protocols and
overview points come from the table registry and the result files, checked on numbers and
labels."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mzlite.repro import experiments as ex
from mzlite.repro import relational
from mzlite.repro.experiments import narrate

RESULTS = Path(__file__).resolve().parents[1] / "data" / "results"


def test_chapter_tables_are_the_registry_tables_of_the_chapter_main_first():
    labels = relational.chapter_tables()
    assert labels[0] == relational.MAIN
    assert set(labels) == {t for t in ex.TABLES if ex.get_table(t).chapter == relational.CHAPTER}
    assert relational.chapter_tables("10_real_data_digits") == ["tab:transfer-matrix"]
    with pytest.raises(ValueError, match="chapter must be one of"):
        relational.chapter_tables("06_relational")


def test_yardstick_settings_are_distinct_set_statistics_cells_the_paper_compares():
    settings = relational.yardstick_settings()
    assert settings
    data = [(s["cell"].task, tuple(sorted(s["cell"].options.items()))) for s in settings]
    assert len(set(data)) == len(data)  # no data drawn twice
    for s in settings:
        spec = ex.get_table(s["table"])
        assert s["cell"] is spec.cell(f"{s['column']}-{ex.SET_STATS}")
        assert s["cell"].part == "main" and spec.chapter == relational.CHAPTER
        for m in ("st", "mz_full"):  # the paper has both numbers of the column
            assert narrate.paper_metric(s["table"], f"{s['column']}-{m}") is not None
    tables = [s["table"] for s in settings]
    assert tables.count(relational.MAIN) == 5  # Tasks A, B, D, F, G
    assert "tab:hull-normed" not in tables  # the same data as tab:hull
    per_target = [(s["table"], s["cell"].task, s["cell"].options.get("target")) for s in settings]
    assert len(set(per_target)) == len(per_target)  # one column per table and target
    assert [s["column"] for s in settings if s["table"] == "tab:hull"] == ["d3"]  # the smallest d


def test_relation_bands():
    assert relational.relation(0.9, 0.8) == "at or above"
    assert relational.relation(0.75, 0.8) == "within 0.1 of"
    assert relational.relation(0.5, 0.8) == "below"
    assert relational.relation(0.5, None) is None


def test_yardstick_rows_carry_the_ridge_and_the_papers_numbers():
    setting = next(s for s in relational.yardstick_settings() if s["column"] == "A")
    (row,) = relational.yardstick([setting], sizes=(60, 1, 40))
    assert row["setting"] == setting["setting"] and row["table"] == relational.MAIN
    assert -10 < row["basic"] <= 1 and -10 < row["all"] <= 1
    assert row["paper_st"] == narrate.paper_metric(relational.MAIN, "A-st")
    assert row["paper_best"] == max(row["paper_st"], row["paper_mz"])
    assert row["relation"] == relational.relation(row["all"], row["paper_best"])
    html = str(relational.yardstick_table([row, {**row, "paper_st": None, "relation": None}]))
    assert html.count("<tr>") == 3 and f"{row['all']:.3f}" in html  # a header and two rows
    assert html.count(">--<") == 2  # a missing paper number and relation show as --


def test_run_chapter_runs_nothing_under_a_read_only_profile():
    assert relational.run_chapter("cpu-annealed") == {}
    with pytest.raises(ValueError, match="cpu-annealed"):  # names the valid profiles
        relational.run_chapter("annealed")


def _copy(tmp_path, profile, label, cells):
    """Copy the committed results of ``cells`` of ``label`` under ``profile`` into tmp_path."""
    src = RESULTS / profile / label.replace(":", "-")
    dst = tmp_path / profile / label.replace(":", "-")
    dst.mkdir(parents=True, exist_ok=True)
    n = 0
    for cell in cells:
        for f in src.glob(f"{cell}__seed*.json"):
            shutil.copy(f, dst / f.name)
            n += 1
    if not n:
        pytest.skip(f"no committed {profile} results of {label} {cells}")
    return n


def test_every_current_protocol_is_read_and_the_superseded_ones_are_ablations(tmp_path):
    """The paper's sizes are a protocol the chapter reads (above the reduced one), not an
    ablation: only the superseded protocols are."""
    for profile in ("paper-sizes", "cpu-annealed", "cpu"):
        src = next((RESULTS / "cpu-annealed" / "tab-main-results").glob("A-st__seed*.json"))
        dst = tmp_path / profile / "tab-main-results" / src.name
        dst.parent.mkdir(parents=True)
        res = json.loads(src.read_text())
        # as if trained under this profile: another training is another experiment
        train = ex.job(relational.MAIN, "A-st", profile, res["seed"]).train_config()
        res |= {"profile": profile, "train_config": {**res["train_config"], **train.to_dict()}}
        dst.write_text(json.dumps(res))
    have = relational.protocols(relational.MAIN, results_dir=tmp_path)
    assert [(h["profile"], h["ablation"]) for h in have] == [
        ("paper-sizes", False), ("cpu-annealed", False), ("cpu", True)]  # fmt: skip
    assert have[0]["role"] == "the paper's sizes"


def test_protocols_and_overview_points_read_the_most_trusted_protocol(tmp_path):
    main = relational.MAIN
    _copy(tmp_path, "cpu-annealed", main, ["A-mz_full", "A-st"])
    _copy(tmp_path, "cpu", main, ["B-st"])
    have = relational.protocols(main, results_dir=tmp_path)
    assert [h["profile"] for h in have] == ["cpu-annealed", "cpu"]
    assert [h["ablation"] for h in have] == [False, True]
    assert relational.protocols("tab:hull", results_dir=tmp_path) == []
    # a table whose cells are another's experiment under a protocol reads that one's results
    _copy(tmp_path, "cpu-annealed", "tab:hull", ["d3-st"])
    assert ("tab:hull", "d3-st") in ex.shared("tab:hull-normed", "cpu-annealed").values()
    normed = relational.protocols("tab:hull-normed", results_dir=tmp_path)
    assert [h["profile"] for h in normed] == ["cpu-annealed"]
    hull = relational.overview_points(["tab:hull", "tab:hull-normed"], results_dir=tmp_path)
    assert [(p["table"], p["cell"]) for p in hull] == [("Table 22", "d3-st")]  # drawn once
    points = relational.overview_points([main], results_dir=tmp_path)
    by_cell = {p["cell"]: p for p in points}
    assert set(by_cell) == {"A-mz_full", "A-st", "B-st"}
    assert (
        by_cell["A-mz_full"]["group"] == "MZAttn" and by_cell["A-st"]["group"] == "Set Transformer"
    )
    assert by_cell["B-st"]["group"] == "Set Transformer (30 epochs)"
    assert by_cell["B-st"]["ours_std"] is None and by_cell["A-st"]["profile"] == "cpu-annealed"
    assert by_cell["A-mz_full"]["paper"] == pytest.approx(narrate.paper_metric(main, "A-mz_full"))
    files = (tmp_path / "cpu-annealed" / "tab-main-results").glob("A-st__*.json")
    mine = [json.loads(f.read_text())["metrics"]["test"]["r2"] for f in files]
    assert by_cell["A-st"]["ours"] == pytest.approx(sum(mine) / len(mine))


def test_results_toggle_is_closed_and_names_every_protocol(tmp_path):
    _copy(tmp_path, "cpu-annealed", relational.MAIN, ["A-st"])
    _copy(tmp_path, "cpu", relational.MAIN, ["A-st"])
    html = str(relational.results_toggle(relational.MAIN, results_dir=tmp_path))
    assert html.count("<details") == 1 and "<details open" not in html
    summary = html.split("<summary>")[1].split("</summary>")[0]
    assert summary.endswith("[cpu-annealed, cpu]")  # the ablation named inside, as superseded
    assert html.count('class="mz-conclusion"') == 2  # what ran, per protocol
    empty = str(relational.results_toggle("tab:hull", results_dir=tmp_path))
    assert "<details" not in empty and "no results" in empty
    assert "python -m mzlite run tab:hull --profile" in empty


def test_smoke_curves_are_the_validation_losses_by_cell(tmp_path):
    assert relational.smoke_curves(results_dir=tmp_path) == {}
    d = tmp_path / "smoke" / "tab-main-results"
    d.mkdir(parents=True)
    src = next(iter((RESULTS / "cpu-annealed" / "tab-main-results").glob("A-st__seed0.json")), None)
    if src is None:
        pytest.skip("no committed result to copy")
    res = json.loads(src.read_text())
    res["profile"] = "smoke"
    (d / src.name).write_text(json.dumps(res))
    (curve,) = relational.smoke_curves(results_dir=tmp_path).values()
    assert curve == res["history"]["val_loss"]


def test_plot_yardstick_draws_four_bars_per_setting_from_the_floor():
    rows = [
        {"setting": "s1", "basic": -3.0, "all": 0.5, "paper_st": None, "paper_mz": 0.9},
        {"setting": "s2", "basic": 0.1, "all": 0.2, "paper_st": 0.3, "paper_mz": 0.4},
    ]
    fig = relational.plot_yardstick(rows)
    assert [t.name for t in fig.data] == [name for _, name, _ in relational.BARS]
    basic = fig.data[0]
    assert list(basic.x) == ["s1", "s2"] and basic.y[0] == relational.FLOOR
    assert basic.hovertext[0] == "-3.000"  # the true value stays in the hover text
    assert fig.data[2].y[0] is None and fig.data[2].hovertext[0] == "--"
