"""The teaching material: every chapter opens with the same header block, and the teaching
page's tables are generated from the headers and the executor's recorded wall times."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from book_scripts import load

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


teaching = load("teaching")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_chapter_opens_with_objectives_prerequisites_and_time(path):
    """Every notebook in notebooks/ (new chapters included): the cell after the title."""
    info = teaching.chapter_info(path)  # ValueError names the expected block
    assert len(info["objectives"]) > 40 and len(info["prerequisites"]) > 10
    assert 5 <= info["reading_min"] <= 120 and info["exercise_min"] <= 120
    header = "".join(json.loads(path.read_text())["cells"][1]["source"])
    assert "[Teaching with this book](../teaching.md)" in header
    has_exercises = info["exercises"] + info["coding_exercises"] > 0
    assert has_exercises == (info["exercise_min"] > 0), "exercise minutes without exercises"


def test_a_missing_header_is_named(tmp_path):
    nb = json.loads(NOTEBOOKS[0].read_text())
    del nb["cells"][1]
    bad = tmp_path / NOTEBOOKS[0].name
    bad.write_text(json.dumps(nb))
    with pytest.raises(ValueError, match="header block"):
        teaching.chapter_info(bad)


def test_times_table_uses_recorded_wall_times_only(tmp_path):
    chapters = [teaching.chapter_info(p) for p in NOTEBOOKS[:2]]
    times = tmp_path / "execution_times.json"
    times.write_text(
        json.dumps(
            {
                NOTEBOOKS[0].stem: {
                    "wall_time_s": 61.0,
                    "parameters": {},
                    "executed_at": "2026-11-23T10:00:00+0000",
                    "cpu_count": 2,
                },
                NOTEBOOKS[1].stem: {"wall_time_s": 5.0, "parameters": {"profile": "full"}},
            }
        )
    )
    recorded = teaching.default_profile_times(times)
    assert list(recorded) == [NOTEBOOKS[0].stem]  # a full-profile run is not a laptop's time
    table = teaching.times_table(chapters, recorded)
    first, second = table.splitlines()[2:4]
    c = chapters[0]
    assert "| 2 min |" in first and f"{c['reading_min'] + c['exercise_min'] + 2} min" in first
    assert "not measured yet" in second
    assert "2 CPU cores" in table
    assert teaching.default_profile_times(tmp_path / "missing.json") == {}


def test_executor_records_wall_times(tmp_path, monkeypatch):
    ex = load("execute_notebooks")
    monkeypatch.setattr(ex, "TARGET", tmp_path)
    monkeypatch.setattr(ex, "TIMES", tmp_path / "execution_times.json")
    meta = {"wall_time_s": 12.5, "parameters": {}, "executed_at": "x", "inputs_hash": "h"}
    (tmp_path / "01_a.ipynb").write_text(json.dumps({"metadata": {"mzlite_execution": meta}}))
    (tmp_path / "02_b.ipynb").write_text(json.dumps({"metadata": {}}))  # never executed
    assert ex.record_times() == {"01_a": meta}
    assert json.loads((tmp_path / "execution_times.json").read_text()) == {"01_a": meta}


def test_teaching_page_is_in_the_book_and_includes_the_generated_tables():
    page = (ROOT / "book" / "teaching.md").read_text()
    for include in ("_generated/chapter_times.md", "_generated/chapter_objectives.md"):
        assert "{include} " + include in page
    assert "<_generated/mzattn-student-notebooks.zip>" in page
    assert "- file: teaching" in (ROOT / "book" / "_toc.yml").read_text()
    objectives = teaching.objectives_list([teaching.chapter_info(p) for p in NOTEBOOKS])
    assert objectives.count("*Prerequisites:*") == len(NOTEBOOKS)
