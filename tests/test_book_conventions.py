"""What a reader sees of the chapters, checked on the notebook sources (no build needed).

The rules are those of book/how_to_use.md ("What the pages show"); tests/test_browser.py checks
the rendered pages for the same things.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from mzlite.repro.paper import RAW_LABEL, paper_label

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PAGES = sorted((ROOT / "book").glob("*.md"))
# Inline code, code blocks and math may hold labels (a command, a LaTeX source line).
VERBATIM = re.compile(r"```.*?```|``.*?``|`[^`]*`|\$\$.*?\$\$|\$[^$]*\$", re.S)


def _markdown(path: Path) -> list[str]:
    if path.suffix == ".md":
        return [path.read_text(encoding="utf-8")]
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "markdown"]


def _code_cells(path: Path) -> list[dict]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [c for c in cells if c["cell_type"] == "code"]


def _glossary_terms() -> set[str]:
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    block = text[text.index("```{glossary}") : text.rindex("```")]
    return {line.strip().lower() for line in block.splitlines()[1:] if re.match(r"^\S", line)}


@pytest.mark.parametrize("path", NOTEBOOKS + PAGES, ids=lambda p: p.name)
def test_prose_names_the_papers_labels(path):
    for text in _markdown(path):
        for label in re.findall(r"\{paper(?:-title)?\}`([^`]+)`", text):
            paper_label(label)  # KeyError naming the labels of that kind
        prose = VERBATIM.sub("", text)
        raw = RAW_LABEL.findall(prose)
        assert not raw, f"raw paper labels in the prose of {path.name}: {raw} (use {{paper}}`...`)"


@pytest.mark.parametrize("path", NOTEBOOKS + PAGES, ids=lambda p: p.name)
def test_linked_terms_are_in_the_glossary(path):
    terms = _glossary_terms()
    for text in _markdown(path):
        for role in re.findall(r"\{term\}`([^`]+)`", text):
            target = re.search(r"<([^>]+)>$", role)
            name = (target.group(1) if target else role).strip().lower()
            assert name in terms, f"{path.name} links {name!r}, which the glossary does not define"


def test_glossary_defines_the_terms_the_issue_lists():
    wanted = {"zonotope", "generator", "ihw", "matrix zonotope", "gate", "tdof", "mab", "sab",
              "isab", "pma", "context-rigid"}  # fmt: skip
    assert wanted <= _glossary_terms()
    text = (ROOT / "book" / "glossary.md").read_text(encoding="utf-8")
    assert "Transformation Degrees of Freedom" in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_plumbing_is_hidden_and_run_logs_collapsed(path):
    for cell in _code_cells(path):
        src = "".join(cell["source"])
        tags = set(cell["metadata"].get("tags", []))
        if re.search(r"\bex\.run\(", src):
            assert "hide-output" in tags or "remove-output" in tags or "remove-cell" in tags, (
                f"{path.name}: a table run's progress log must be collapsed (hide-output):\n{src}"
            )
        lines = [ln for ln in src.splitlines() if ln.strip() and not ln.startswith("#")]
        imports = [ln for ln in lines if re.match(r"(from \S+ )?import ", ln)]
        if len(imports) >= 3 and len(imports) >= len(lines) / 2:
            assert tags & {"hide-input", "remove-input", "remove-cell"}, (
                f"{path.name}: an import cell is plumbing; tag it hide-input:\n{src[:200]}"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_markdown_table_is_built_in_code(path):
    """A Markdown table displayed from code renders as one paragraph of pipes in the book (myst-nb
    renders text/markdown outputs as CommonMark, which has no tables): results tables go
    through mzlite.repro.render.comparison_table."""
    for cell in _code_cells(path):
        src = "".join(cell["source"])
        assert not re.search(r"\|\s*:?-{3,}:?\s*\|", src), (
            f"{path.name}: a Markdown table built in code; use "
            "mzlite.repro.render.comparison_table:\n"
            f"{src[:200]}"
        )


# What fits a code cell without a sideways scrollbar at 800 and 1300 px (book.css: code at 12px)
CODE_COLUMNS = 95


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_visible_code_fits_the_page(path):
    """Code the reader sees (every cell but hidden-input ones; solutions included: readers open
    them) has lines of at most CODE_COLUMNS characters."""
    for cell in _code_cells(path):
        if set(cell["metadata"].get("tags", [])) & {"hide-input", "remove-input", "remove-cell"}:
            continue
        long = [ln for ln in "".join(cell["source"]).splitlines() if len(ln) > CODE_COLUMNS]
        assert not long, f"{path.name}: code lines over {CODE_COLUMNS} characters: {long[:3]}"


def test_no_page_expands_tdof_another_way():
    """TDOF is the paper's Transformation Degrees of Freedom, wherever a page spells it out
    ("task degrees of freedom (TDOF)" and "TDOF (total degrees of freedom)" were both written)."""
    expansion = re.compile(
        r"(\w+)\s+degrees\s+of\s+freedom\W{0,12}(?:\{term\}`)?TDOF"
        r"|TDOF\W{0,12}(\w+)\s+degrees\s+of\s+freedom",
        flags=re.I,
    )
    for path in NOTEBOOKS + PAGES:
        for text in _markdown(path):
            for m in expansion.finditer(text):
                word = (m.group(1) or m.group(2)).lower()
                assert word == "transformation", f"{path.name}: {m.group(0)!r}"


# Results chapters whose logic lives in tested modules (issue 35: "no results chapter defines a
# function in a hidden cell").
CALLING_CHAPTERS = ("04_training_on_gpu", "05_minimum_enclosing_ball", "06_relational_benchmarks",
                    "07_inside_a_trained_layer", "09_reproduction_scorecard",
                    "10_real_data_digits")  # fmt: skip


@pytest.mark.parametrize("name", CALLING_CHAPTERS)
def test_no_hidden_cell_of_a_results_chapter_defines_a_function(name):
    """A hidden cell calls tested code; only exercise solutions (``hide-cell``: the reader opens
    them as answers) may define the function the exercise asks for."""
    for cell in _code_cells(ROOT / "notebooks" / f"{name}.ipynb"):
        tags = set(cell["metadata"].get("tags", []))
        if "hide-cell" in tags or not tags & {"hide-input", "remove-input", "remove-cell"}:
            continue
        src = "".join(cell["source"])
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
        defs = [type(n).__name__ for n in ast.walk(ast.parse(src)) if isinstance(n, kinds)]
        assert not defs, (
            f"{name}: a hidden cell defines {defs}; move it to a tested module:\n{src[:300]}"
        )
