"""mzlite.repro.experiments.coverage: every labelled table of the paper gets exactly one line."""

from __future__ import annotations

import re

import pytest

from mzlite.repro import experiments as ex
from mzlite.repro.experiments.coverage import ENTRIES, coverage, coverage_html, paper_table_labels
from mzlite.repro.experiments.plan import plan
from mzlite.repro.paper import paper_ref, paper_tex_path, read_paper_tex

TEX_PATH = paper_tex_path()
needs_tex = pytest.mark.skipif(
    not TEX_PATH.exists(),
    reason=f"paper source {TEX_PATH} is absent (../shared/paper not checked out); the labels "
    "come from the committed data/paper/labels.json in the other tests",
)


@pytest.fixture(scope="module")
def rows():
    return coverage()  # the committed results price what has not run yet


@needs_tex
def test_every_table_label_of_the_paper_appears_exactly_once(rows):
    tex = read_paper_tex()
    in_tables = []  # an independent reading: every \label{tab:...} inside a table environment
    for m in re.finditer(r"\\label\{(tab:[^}]*)\}", tex):
        start = tex.rfind("\\begin{table", 0, m.start())
        if start >= 0 and tex.rfind("\\end{table", 0, m.start()) < start:
            in_tables.append(m.group(1))
    assert len(in_tables) == 33 and paper_table_labels() == in_tables
    labels = [r["label"] for r in rows]
    assert sorted(labels) == sorted(set(in_tables)) and len(labels) == len(set(labels))
    assert set(ENTRIES) == set(in_tables), "ENTRIES describes a table the paper lacks, or not all"
    assert all(not r["claim"].startswith("not described") for r in rows)


def test_registered_tables_are_priced_by_plan_and_the_rest_say_why(rows):
    by = {r["label"]: r for r in rows}
    for label in ex.TABLES:
        r = by[label]
        assert r["registered"] and r["runs_here"] == "registered"
        p = plan(label, "cpu-annealed", measure=False)
        t = p.totals().get(label, {"cpu_h": 0.0, "todo": 0})
        # cells that are another table's runs (experiments.shared) cost what is left there
        lent = ex.shared(label, "cpu-annealed")
        rows_there = {(x["table"], x["cell"]): x for lender in {t for t, _ in lent.values()}
                      for x in plan(lender, "cpu-annealed", measure=False).rows}  # fmt: skip
        there = sum(rows_there[k]["cpu_h"] or 0.0 for k in lent.values() if k in rows_there)
        assert r["price"] == pytest.approx(t["cpu_h"] + there), label
        assert f"{t['todo']} job(s) to run" in r["basis"]
        assert ("same experiments as cells of" in r["basis"]) == bool(lent)
    for r in rows:
        if r["registered"]:
            continue
        assert r["runs_here"].startswith(("yes", "no")), r["label"]
        if ENTRIES[r["label"]].get("like"):
            assert r["price"] is not None and r["price"] > 0, r["label"]
            assert "job(s) like" in r["basis"]
    for label in ("tab:qm9", "tab:resnet-features", "tab:resnet50-scaling"):
        assert "cannot be downloaded" in by[label]["runs_here"]


def test_the_coverage_page_names_every_table(tmp_path):
    html = coverage_html(results_dir=tmp_path)
    for label in paper_table_labels():
        assert paper_ref(label) in html  # "Table N", as the book names tables
    assert "Every labelled table of the paper (33)" in html


def test_without_the_latex_source_the_labels_come_from_labels_json(monkeypatch, tmp_path):
    expect = paper_table_labels()
    monkeypatch.setenv("MZLITE_PAPER_TEX", str(tmp_path / "absent.tex"))
    assert paper_table_labels() == expect


def test_a_tables_state_counts_its_claims_by_verdict():
    from mzlite.repro.experiments.coverage import _state

    assert _state("tab:a", []) == ""
    scored = [
        {"table": "tab:a", "verdict": "holds"},
        {"table": "tab:b", "verdict": "holds"},  # another table's
        {"table": "tab:a", "verdict": "does not hold here"},
        {"table": "tab:b", "paper_table": "tab:a", "verdict": "does not hold here"},  # on a's
    ]
    assert _state("tab:a", scored) == "3 claim(s): 1 holds, 2 do not hold here"
    assert _state("tab:b", scored) == "1 claim(s): 1 holds"
