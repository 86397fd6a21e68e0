"""One experiment, one number; one protocol name, one profile (issue 50, item 4).

Every number of ours that the generated pages show (a report's mean over seeds, a scorecard
claim's value) is marked with the experiment it comes from (``render.number_html``); the pages
the chapters and the landing page build from the committed results must never show one
experiment's statistic with two different values. The profiles' reader-facing names
(``protocols.READER_NAMES``) are the glossary's, one per profile, and the Teaching page and the
chapters' parameters cells use no other name for a CPU protocol.
"""

from __future__ import annotations

import copy
import html
import json
import math
import pickle
import re
from pathlib import Path

import pytest

from mzlite.repro.experiments import TABLES, get_table, results_by_cell
from mzlite.repro.experiments.findings import once
from mzlite.repro.experiments.protocols import READER_NAMES, reader_name
from mzlite.repro.experiments.report import best_rows, ours_text, report
from mzlite.repro.experiments.results import PROFILE_ORDER
from mzlite.repro.experiments.scorecard import claims as scorecard_claims
from mzlite.repro.experiments.scorecard import scorecard
from mzlite.repro.experiments.specs import PROFILES
from mzlite.repro.render import (
    Number,
    comparison_table,
    marked_numbers,
    number_conflicts,
    number_html,
    report_html,
    scorecard_html,
)

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------------------------
# The marker and the check
# ---------------------------------------------------------------------------------------------


def _visible(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_number_html_shows_the_text_alone_and_marks_the_experiment():
    marked = number_html("0.549 ± 0.012", "tab:meb|d8-mz_full|paper-sizes", "mean_r2",
                         0.54912345, 0.0123)  # fmt: skip
    assert _visible(marked) == "0.549 ± 0.012"
    assert marked_numbers(marked) == [
        ("tab:meb|d8-mz_full|paper-sizes", "mean_r2", "0.549123", "0.0123")
    ]
    # a key with characters HTML escapes comes back as given; no value: no marker
    assert marked_numbers(number_html("<1", 'a"b|c', "s", 1.0))[0][:2] == ('a"b|c', "s")
    assert number_html("not run", "k", "s", None) == "not run"


def test_number_conflicts_catches_a_planted_conflict():
    key = "tab:meb|d8-mz_full|cpu-annealed"
    same = {"ch5": number_html("0.556", key, "mean_r2", 0.556),
            "ch9": number_html("0.556", key, "mean_r2", 0.556)}  # fmt: skip
    assert number_conflicts(same) == []
    # another statistic or another profile of the same cell is another number: no conflict
    full = key.replace("cpu-annealed", "full")
    other = {**same, "x": number_html("0.1", key, "std_r2", 0.1),
             "y": number_html("0.49", full, "mean_r2", 0.49)}  # fmt: skip
    assert number_conflicts(other) == []
    planted = {**same, "ch5 ablation": number_html("0.490", key, "mean_r2", 0.490)}
    (line,) = number_conflicts(planted)
    assert key in line and "mean_r2" in line
    assert "0.556 on ch5, ch9" in line and "0.49 on ch5 ablation" in line
    # the same mean with another spread is a conflict too
    spread = {"a": number_html("x", key, "mean_r2", 0.5, 0.01),
              "b": number_html("x", key, "mean_r2", 0.5, 0.02)}  # fmt: skip
    assert len(number_conflicts(spread)) == 1


def test_a_chapters_table_marks_the_numbers_ours_text_gives(tmp_path):
    """``report.ours_text`` of a ``best_rows`` row is a ``Number``: its text as before, and
    ``comparison_table`` marks it with the key the table's report marks the same cell with."""
    label = "tab:tdof-verify"
    rows = best_rows(label, ("cpu-annealed",), results_dir=tmp_path)  # nothing ran: not run
    assert all(r["table"] == label for r in rows.values())
    assert {ours_text(r) for r in rows.values()} == {"not run"}
    fake = {"table": label, "cells": ["L32-mz_1l"], "same_as": None, "seeds": [0, 1],
            "mixed": False, "ours_mean": 0.93612, "ours_std": 0.0101, "metric": "r2",
            "profile": "paper-sizes"}  # fmt: skip
    text = ours_text(fake)
    assert isinstance(text, Number) and text == "0.936 ± 0.010"
    assert (
        copy.deepcopy(text).experiment == text.experiment == "tab:tdof-verify|L32-mz_1l|paper-sizes"
    )
    assert pickle.loads(pickle.dumps(text)).value == 0.93612
    page = comparison_table([{"model": "MZ", "ours": text}], [("model", "Model", 50),
                                                              ("ours", "Ours", 50)])  # fmt: skip
    assert marked_numbers(page) == [(text.experiment, "mean_r2", "0.93612", "0.0101")]
    assert "0.936 ± 0.010" in _visible(page)
    # without a profile (a plain report row) it stays plain text
    assert type(ours_text({**fake, "profile": None})) is str


# ---------------------------------------------------------------------------------------------
# The generated pages: the scorecard (chapter 9, the landing page's source) and the report of
# every table under every profile with committed results (the results chapters' tables)
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pages() -> dict[str, tuple[str, object]]:
    out = {"scorecard": (scorecard_html(sc := once(scorecard)), sc)}
    for label in TABLES:
        spec = get_table(label)
        for profile in PROFILE_ORDER:
            if results_by_cell(spec, profile):
                rep = report(label, profile)
                out[f"report {label} {profile}"] = (report_html(rep), rep)
    return out


def test_every_shown_mean_is_marked(pages):
    """Each report row with a mean (one protocol, seeds run) is marked once with its cell and
    profile, and each scorecard claim with a value of ours: the check below sees them all."""
    for where, (page, obj) in pages.items():
        marks = marked_numbers(page)
        if where == "scorecard":
            shown = [r for r in obj.rows if r["verdict"] != "not run" and r["ours"] is not None]
            # a value read on other cells than the claim's own (the paper's pattern, read on
            # chapter 5's ablation cells) is a different experiment: its mark names that variant
            variant = {r["claim"]: getattr(r["value"], "variant", "") for r in shown}
            keys = {
                f"claim:{r['claim']}|{r['profile']}"
                + (f"|{v}" if (v := variant[r["claim"]]) else "")
                for r in shown
            }
            assert keys <= {e for e, *_ in marks}, where
            continue
        rows = [r for r in obj.rows if r["seeds"] and not r["mixed"] and r["ours_mean"] is not None]
        assert len(marks) == len(rows), where
        for r in rows:
            cell = r["same_as"] or "/".join(r["cells"])
            assert (f"{obj.label}|{cell}|{obj.profile}", f"mean_{r['metric']}",
                    f"{r['ours_mean']:.6g}") in {m[:3] for m in marks}, (where, cell)  # fmt: skip


def test_one_experiment_one_number(pages):
    assert sum(len(marked_numbers(p)) for p, _ in pages.values()) > 0
    conflicts = number_conflicts({where: page for where, (page, _) in pages.items()})
    assert conflicts == [], "\n".join(conflicts)


def _cell_conflicts(pages, verdicts) -> list[tuple]:
    """Each cell mean of ``verdicts`` (their own cells, read under their profile) that the report
    of its table under that profile shows otherwise: (claim, table, profile, cell, verdict's
    mean, report's mean). A cell the report shows with no row of the claim's metric is skipped
    (the report shows the paper's metrics only)."""
    claims = {c.id: c for c in scorecard_claims()}
    out = []
    for v in verdicts:
        if not v.profile or f"report {v.table} {v.profile}" not in pages:
            continue
        metric = getattr(claims[v.claim.split("@", 1)[0]], "metric", "r2")
        rep = pages[f"report {v.table} {v.profile}"][1]
        rows = {r["cells"][0]: r for r in rep.rows if r["part"] != "derived"
                and r["metric"] == metric}  # fmt: skip
        for c in v.cells:
            row = rows.get(c.read_as)
            if c.mean is None or c.mixed or row is None:
                continue
            if row["ours_mean"] is None or not math.isclose(row["ours_mean"], c.mean, rel_tol=1e-9):
                out.append((v.claim, v.table, v.profile, c.read_as, c.mean, row["ours_mean"]))
    return out


def _verdicts(v):
    """``v``, the verdicts beside it and its parts', all the way down."""
    yield v
    for w in (*v.beside, *v.parts):
        yield from _verdicts(w)


def test_verdicts_read_the_numbers_the_reports_show(pages):
    """The engine's cell means behind every verdict (and the verdicts beside it, and each part's)
    are the means the report of that table under that profile shows: the scorecard's reasons and
    the chapters' tables quote one number per cell and profile."""
    verdicts = [w for r in pages["scorecard"][1].rows for w in _verdicts(r["value"])]
    alone = [w for w in verdicts if not w.parts]
    assert sum(len(w.cells) for w in alone) > 0
    assert _cell_conflicts(pages, alone) == []


def test_a_claim_of_parts_reads_its_cells_under_its_profile(pages):
    combined = [r["value"] for r in pages["scorecard"][1].rows if r["value"].parts]
    assert combined
    assert _cell_conflicts(pages, combined) == []


# ---------------------------------------------------------------------------------------------
# The built book: every chapter's generated tables and text as the reader gets them
# ---------------------------------------------------------------------------------------------


def built_pages(root: Path = ROOT) -> tuple[str, dict[str, str]]:
    """(what was read, {page: HTML}) of the built book: the HTML pages under
    ``book/_build/html`` where ``make book`` built them, else every HTML output of the executed
    chapters under ``book/chapters`` (``make notebooks``); ("", {}) when neither is there."""
    html_root = root / "book" / "_build" / "html"
    pages = {
        str(p.relative_to(html_root)): p.read_text(encoding="utf-8")
        for p in sorted(html_root.rglob("*.html"))
        if not {"_static", "_sources"} & set(p.relative_to(html_root).parts)
    }
    if pages:
        return "the built HTML", pages
    for path in sorted((root / "book" / "chapters").glob("[0-9][0-9]_*.ipynb")):
        if path.name.endswith(".partial.ipynb"):  # a chapter still executing
            continue
        nb = json.loads(path.read_text(encoding="utf-8"))
        pages[path.stem] = "".join(
            "".join(out.get("data", {}).get("text/html", ""))
            for cell in nb["cells"]
            for out in cell.get("outputs", [])
        )
    return ("the executed chapters", pages) if pages else ("", {})


@pytest.fixture(scope="module")
def book():
    what, pages = built_pages()
    if not pages:
        pytest.skip("the book is not built here: no book/_build/html and no executed chapter in "
                    "book/chapters (`make book` builds both)")  # fmt: skip
    if not any(marked_numbers(p) for p in pages.values()):
        pytest.skip(f"{what} mark no number: built before numbers were marked "
                    "(render.number_html); `make book` rebuilds them")  # fmt: skip
    return what, pages


@pytest.mark.browser  # after the book build, in its lane: never a half-built book
def test_the_built_book_shows_one_number_per_experiment(book):
    """Every marked number on every page of the built book (the chapters' report tables, the
    scorecard, each chapter's own comparison tables): one experiment, one number."""
    what, pages = book
    conflicts = number_conflicts(pages)
    assert conflicts == [], f"{what}:\n" + "\n".join(conflicts)


@pytest.mark.browser  # after the book build, in its lane: never a half-built book
def test_the_book_check_catches_a_conflict_planted_in_its_pages(book):
    """The check over the built book fails when a page shows one of its experiments otherwise:
    a copy of a real marker with another value, planted on another page."""
    _, pages = book
    where, page = next((w, p) for w, p in pages.items() if marked_numbers(p))
    exp, stat, value, spread = marked_numbers(page)[0]
    other = next((w for w in pages if w != where), "a second page")
    wrong = float(value) + 0.123
    planted = {**pages, other: pages.get(other, "") + number_html("x", exp, stat, wrong)}
    (line,) = [c for c in number_conflicts(planted) if c.startswith(f"{exp} [{stat}]")]
    assert f"{wrong:.6g}" in line and other in line and where in line


def test_built_pages_read_the_html_book_first_then_the_executed_chapters(tmp_path):
    assert built_pages(tmp_path) == ("", {})
    chapters = tmp_path / "book" / "chapters"
    chapters.mkdir(parents=True)
    mark = number_html("0.5", "tab:meb|d8-st|full", "mean_r2", 0.5)
    nb = {"cells": [{"cell_type": "code", "outputs": [{"data": {"text/html": [mark]}},
                                                      {"text": "printed"}]}]}  # fmt: skip
    (chapters / "05_minimum_enclosing_ball.ipynb").write_text(json.dumps(nb))
    assert built_pages(tmp_path) == ("the executed chapters", {"05_minimum_enclosing_ball": mark})
    html_dir = tmp_path / "book" / "_build" / "html" / "chapters"
    html_dir.mkdir(parents=True)
    (html_dir / "05.html").write_text(mark)
    (tmp_path / "book" / "_build" / "html" / "_static").mkdir()
    (tmp_path / "book" / "_build" / "html" / "_static" / "x.html").write_text("theme")
    assert built_pages(tmp_path) == ("the built HTML", {"chapters/05.html": mark})


# ---------------------------------------------------------------------------------------------
# One protocol name, one profile
# ---------------------------------------------------------------------------------------------


def _glossary() -> dict[str, str]:
    """The glossary's {term: definition} (a term unindented, its definition indented below)."""
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    block = text[text.index("```{glossary}") : text.rindex("```")].splitlines()[1:]
    out: dict[str, str] = {}
    term = None
    for line in block:
        if line and not line.startswith(" "):
            term = line.strip()
            out[term] = ""
        elif term is not None:
            out[term] += " " + line.strip()
    return {t: d.strip() for t, d in out.items()}


def _base(name: str) -> str:
    return name.removesuffix(" (superseded)")


def test_reader_names_are_the_glossarys_one_per_profile():
    assert set(READER_NAMES) == set(PROFILES)
    assert len(set(READER_NAMES.values())) == len(READER_NAMES), "two profiles share a name"
    glossary = _glossary()
    defines = {}  # profile -> the term whose definition opens "Profile `x`"
    for term, definition in glossary.items():
        m = re.match(r"Profile `([\w-]+)`", definition)
        if m:
            assert m.group(1) not in defines, f"two glossary terms define {m.group(1)}"
            defines[m.group(1)] = term
    for profile, name in READER_NAMES.items():
        if profile in defines:
            # the name as a sentence uses it: "a pipeline check" for the term "pipeline check"
            assert name.removeprefix("a ") == defines[profile], (profile, name)
        else:  # a superseded profile: the glossary names it where it lists it, `x` (name: ...)
            assert any(f"`{profile}` ({_base(name).removeprefix('the ')}" in d
                       or f"`{profile}` ({_base(name)}" in d
                       for d in glossary.values()), (profile, name)  # fmt: skip
    with pytest.raises(ValueError, match="profile must be one of"):
        reader_name("cpu-anealed")


# a protocol named by a qualifier of a CPU protocol ("the reduced CPU protocol", "the converged
# CPU protocol", "reduced protocol"): the words a reader could take for another profile's name
_PROTOCOL_NAME = re.compile(
    r"\b((?:the )?(?:[\w-]+ )?(?:reduced|converged|annealed|30-epoch|first)"
    r"(?: [\w-]+)?(?: CPU)? protocol)\b"
)
_NAMES = {_base(n) for n in READER_NAMES.values()} | {
    _base(n).removeprefix("the ") for n in READER_NAMES.values()
}


def _protocol_names(text: str) -> list[str]:
    return [m for m in _PROTOCOL_NAME.findall(text) if m not in _NAMES]


def test_protocol_name_check_catches_a_name_of_its_own():
    assert _protocol_names("under the reduced CPU protocol and the paper's protocol") == []
    assert _protocol_names("A claim fails under the converged CPU protocol.") == [
        "the converged CPU protocol"
    ]
    assert _protocol_names('"cpu" (reduced protocol)') == ["reduced protocol"]


def test_teaching_page_names_protocols_as_the_glossary_does():
    text = (ROOT / "book" / "teaching.md").read_text(encoding="utf-8")
    assert _protocol_names(text) == []


def _parameters_cell(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    return "".join(cells[0]["source"]) if cells else ""


# parameters cells that name a protocol otherwise, each a strict xfail with its reason (it fails
# as soon as the cell is fixed); none today
_MISNAMED: dict[str, str] = {}


@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=_MISNAMED[p.stem]))
        if p.stem in _MISNAMED
        else p
        for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    ],
    ids=lambda p: p.stem,
)
def test_parameters_cells_name_protocols_as_the_glossary_does(path):
    """Its profiles are registered ones, and it calls a CPU protocol by the glossary's name."""
    source = _parameters_cell(path)
    for profile in re.findall(r'profile\s*=\s*"([\w-]+)"', source):
        assert profile in PROFILES, (path.name, profile)
    assert _protocol_names(source) == [], path.name
