"""mzlite.repro.paper: the paper's numbers in data/paper/*.json match its LaTeX source; and the
parser that writes them, tools/paper_tables.py (a script outside the package).

Cells are checked against the .tex with regexes written here, independently of the parser, so a
parser bug or a hand edit of the JSON fails. The checks that need the .tex skip (with a message)
when ../shared/paper is absent; the JSON structure checks always run.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from mzlite.repro import paper
from mzlite.repro.paper import DATA_DIR, SYNTHETIC_LABELS, load_paper_table, paper_cell, paper_value

_spec = importlib.util.spec_from_file_location(
    "paper_tables", Path(__file__).resolve().parents[1] / "tools" / "paper_tables.py"
)
paper_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(paper_tables)
parse_cell, parse_table = paper_tables.parse_cell, paper_tables.parse_table

TEX_PATH = paper.paper_tex_path()
needs_tex = pytest.mark.skipif(
    not TEX_PATH.exists(),
    reason=f"paper source {TEX_PATH} is absent (../shared/paper not checked out); "
    "only the committed-JSON checks run",
)


@pytest.fixture(scope="module")
def tex() -> str:
    return TEX_PATH.read_text(encoding="utf-8")


def table_block(tex: str, label: str) -> str:
    """The raw LaTeX from a table's label to the end of its tabular."""
    start = tex.index(f"\\label{{{label}}}")
    return tex[start : tex.index("\\end{tabular}", start)]


def num(s: str) -> float:
    return float(s.replace("$-$", "-"))


# ---------------------------------------------------------------------------------------------
# Committed JSON (no .tex needed)
# ---------------------------------------------------------------------------------------------


def test_every_synthetic_table_is_committed_and_well_formed():
    files = sorted(DATA_DIR.glob("tab-*.json"))
    labels = set()
    for f in files:
        t = json.loads(f.read_text(encoding="utf-8"))
        assert f.name == t["label"].replace(":", "-") + ".json"
        assert t["caption"] and t["columns"] and t["rows"], f.name
        for r in t["rows"]:
            assert r["row"] and set(r["cells"]) == set(t["columns"]), (f.name, r["row"])
            for c in r["cells"].values():
                assert {"text", "mean", "std"} <= c.keys()
        names = [r["row"] for r in t["rows"]]
        assert len(set(names)) == len(names), f"duplicate row names in {f.name}"
        labels.add(t["label"])
    missing = set(SYNTHETIC_LABELS) - labels
    assert not missing, f"tables missing from data/paper: {sorted(missing)}"


def test_lookup_helpers():
    assert paper_value("tab:tdof-verify", "8", "MZAttn-1L R^2") == 0.988
    assert paper_cell("tab:tdof-verify", "8", "mzattn-1l r^2")["std"] == 0.001  # loose names
    assert paper_value("tab:sgsp", "diameter / 8", "MZAttn-Full") == 0.876
    assert paper_value("tab:main-results", "Deep Sets", "Task A: Set Regr. / MSE") is None  # "--"
    with pytest.raises(KeyError, match="rows are"):
        paper_value("tab:meb", "No Such Model", "d=8 R^2")
    with pytest.raises(KeyError, match="available"):
        load_paper_table("tab:not-a-table")
    t = load_paper_table("tab:meb")
    t["rows"].clear()  # a copy: the next reader is unaffected
    assert load_paper_table("tab:meb")["rows"]


# ---------------------------------------------------------------------------------------------
# Parser on hand-made LaTeX (no .tex needed)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, mean, std, extra",
    [
        (r"0.018{\tiny$\pm$0.001}", 0.018, 0.001, {}),
        (r"$-$0.006{\tiny$\pm$0.011}", -0.006, 0.011, {}),
        (r"\textbf{0.691}{\tiny$\pm$0.012}", 0.691, 0.012, {"bold": True}),
        (r"$\mathbf{0.978 \pm 0.004}$", 0.978, 0.004, {"bold": True}),
        (r"40.6{\tiny$\pm$1.0}\%", 40.6, 1.0, {"unit": "%"}),
        (r"0.995{\tiny$\pm{<}0.001$}", 0.995, 0.001, {"std_upper_bound": True}),
        (r"$6.6\times$", 6.6, None, {"unit": "x"}),
        (r"1.3M", 1.3e6, None, {}),
        (r"208K", 208e3, None, {}),
        (r"\textbf{0.10s}", 0.10, None, {"unit": "s", "bold": True}),
        (r"$\geq 95\%$", 95.0, None, {"bound": ">=", "unit": "%"}),
        (r"$\underline{0.36}$", 0.36, None, {"underline": True}),
        (r"$0.542$ (unstable)", 0.542, None, {}),
        (r"0.003{\tiny$\pm$.006}$^{\ddagger}$", 0.003, 0.006, {}),
        (r"--", None, None, {}),
        (r"(unstable)", None, None, {}),
        (r"83K / 44K", None, None, {}),
    ],
)
def test_parse_cell(text, mean, std, extra):
    c = parse_cell(text)
    assert c["text"] == text
    assert c["mean"] == (pytest.approx(mean) if mean is not None else None)
    assert c["std"] == (pytest.approx(std) if std is not None else None)
    for k, v in extra.items():
        assert c[k] == v


MINI = r"""
\begin{table}[h]
 \caption{A toy table with $R^2$ and \methodname{}.}
 \label{tab:toy}
 \begin{tabular}{@{}ll|ccc@{}}
 \toprule
 & & \multicolumn{2}{c}{\textbf{Group A}} & \textbf{B} \\
 \cmidrule(lr){3-4}
 Task & $d$ & MSE $\downarrow$ & $R^2$ $\uparrow$ & Params \\
 \midrule
 \multicolumn{5}{@{}l@{}}{\textit{First block}} \\
 \multirow{2}{*}{sum} & 8 & 1.5{\tiny$\pm$0.1} & \textbf{0.9} & 10K \\
 & 16 & $-$2.25 & -- & 1.2M \\ % a comment & with an ampersand
 \bottomrule
 \end{tabular}
\end{table}
"""


def test_parse_table_structure():
    t = parse_table(MINI, "tab:toy")
    assert t["label"] == "tab:toy"
    assert t["caption"] == "A toy table with R^2 and MZAttn."
    assert t["label_columns"] == ["Task", "d"]
    assert t["columns"] == ["Group A / MSE", "Group A / R^2", "B / Params"]
    assert [r["row"] for r in t["rows"]] == ["sum / 8", "sum / 16"]
    assert all(r["group"] == "First block" for r in t["rows"])
    first, second = (r["cells"] for r in t["rows"])
    assert (first["Group A / MSE"]["mean"], first["Group A / MSE"]["std"]) == (1.5, 0.1)
    assert first["Group A / R^2"]["bold"] and first["B / Params"]["mean"] == 10e3
    assert second["Group A / MSE"]["mean"] == -2.25 and second["Group A / R^2"]["mean"] is None
    assert second["B / Params"]["mean"] == 1.2e6
    with pytest.raises(KeyError, match="tab:nope"):
        parse_table(MINI, "tab:nope")


# ---------------------------------------------------------------------------------------------
# Against the paper's LaTeX, with independent regexes
# ---------------------------------------------------------------------------------------------


@needs_tex
def test_tdof_verify_cell_against_tex(tex):
    rows = re.findall(
        r"^\s*\$8\$\s*&\s*\$(\d\.\d+)\s*\\pm\s*(\d\.\d+)\$\s*&\s*\$(\d\.\d+)\s*\\pm\s*(\d\.\d+)\$",
        table_block(tex, "tab:tdof-verify"),
        flags=re.M,
    )
    assert len(rows) == 1
    mz_mean, mz_std, st_mean, st_std = map(float, rows[0])
    assert (mz_mean, mz_std) == (0.988, 0.001)  # the value quoted in the project brief
    for table in (parse_table(tex, "tab:tdof-verify"), load_paper_table("tab:tdof-verify")):
        row = next(r for r in table["rows"] if r["row"] == "8")["cells"]
        assert (row["MZAttn-1L R^2"]["mean"], row["MZAttn-1L R^2"]["std"]) == (mz_mean, mz_std)
        assert (row["ST-4L R^2"]["mean"], row["ST-4L R^2"]["std"]) == (st_mean, st_std)


@needs_tex
def test_meb_row_against_tex(tex):
    pm = r"((?:\$-\$)?\d*\.\d+)\{\\tiny\$\\pm\$(\d*\.\d+)\}"
    m = re.search(
        rf"^\s*ST-Large & (\d+)K & {pm} & {pm} & {pm} \\\\", table_block(tex, "tab:meb"), re.M
    )
    assert m is not None
    g = m.groups()
    cells = next(r for r in load_paper_table("tab:meb")["rows"] if r["row"] == "ST-Large")["cells"]
    assert cells["Params"]["mean"] == float(g[0]) * 1e3
    for k, col in enumerate(["d=8 R^2", "d=16 R^2", "d=32 R^2"]):
        assert cells[col]["mean"] == num(g[1 + 2 * k])
        assert cells[col]["std"] == num(g[2 + 2 * k])
    assert cells["d=32 R^2"]["mean"] == -0.006  # the minus sign survives


@needs_tex
def test_main_results_mzattn_row_against_tex(tex):
    line = next(
        ln for ln in table_block(tex, "tab:main-results").splitlines()
        if ln.strip().startswith(r"\methodname{} (ours)")
    )  # fmt: skip
    pairs = re.findall(r"(?:\\textbf\{)?(\d+\.\d+)\}?\{\\tiny\$\\pm\$(\d+\.\d+)\}", line)
    assert len(pairs) == 12
    table = load_paper_table("tab:main-results")
    cells = next(r for r in table["rows"] if r["row"] == "MZAttn (ours)")["cells"]
    value_cols = [c for c in table["columns"] if c != "Params"]
    assert len(value_cols) == 12
    for col, (mean, std) in zip(value_cols, pairs, strict=True):
        assert (cells[col]["mean"], cells[col]["std"]) == (float(mean), float(std)), col
    assert (
        cells["Task A: Set Regr. / MSE"]["mean"] == 2.92
        and cells["Task A: Set Regr. / MSE"]["bold"]
    )
    assert cells["Task C / MN40"]["unit"] == "%"
    assert cells["Params"]["mean"] == float(re.search(r"(\d+)K \\\\", line).group(1)) * 1e3


def first_number(text: str) -> float | None:
    """The first printed number of a cell, read with a regex independent of parse_cell."""
    t = text.replace("$-$", "-")
    t = re.sub(r"\\textsuperscript\{[^}]*\}|\^\{[^}]*\}", "", t)
    m = re.search(r"-?(?:\d+\.?\d*|\.\d+)", t)
    if m is None:
        return None
    value = float(m.group(0))
    after = t[m.end() : m.end() + 1]
    return value * {"K": 1e3, "M": 1e6}.get(after, 1.0)


@needs_tex
def test_every_committed_cell_matches_its_latex(tex):
    """All tables: the cell text occurs in that table's LaTeX, its first number is the mean,
    and no printed number was dropped (mean None only for '--', remarks or 'a / b' cells)."""
    n_checked = 0
    for f in sorted(DATA_DIR.glob("tab-*.json")):
        t = json.loads(f.read_text(encoding="utf-8"))
        block = re.sub(r"\s+", " ", table_block(tex, t["label"]))
        for r in t["rows"]:
            for col, c in r["cells"].items():
                where = f"{t['label']} / {r['row']} / {col}"
                if c["text"]:
                    assert c["text"] in block, where
                if c["mean"] is None:
                    assert first_number(c["text"]) is None or re.search(r"\(|/", c["text"]), where
                    continue
                assert c["mean"] == pytest.approx(first_number(c["text"]), rel=1e-12), where
                n_checked += 1
    assert n_checked > 700


@needs_tex
def test_committed_json_in_sync_with_tex():
    stale = paper_tables.check_paper_tables()
    assert not stale, f"run `python tools/paper_tables.py` to refresh: {stale}"


@needs_tex
def test_regenerate_into_tmp(tmp_path):
    paths = paper_tables.write_paper_tables(out_dir=tmp_path, labels=["tab:meb", "tab:sgsp"])
    assert [p.name for p in paths] == ["tab-meb.json", "tab-sgsp.json"]
    assert paper_value("tab:sgsp", "furthest-first / 32", "Standard", data_dir=tmp_path) == 0.315
    assert paper_tables.main(["--check"]) == 0


# ---------------------------------------------------------------------------------------------
# data/paper/figures.json: the paper's numbers outside its tables (figure captions, text)
# ---------------------------------------------------------------------------------------------

_WORDS = {
    w: i for i, w in enumerate("zero one two three four five six seven eight nine ten".split())
}


def _parse_printed(printed: str) -> float:
    """A number as the .tex prints it: "8.0", "1{,}000", "10^{-4}", "five" (independent of
    mzlite.repro.paper, like the table checks above)."""
    if printed in _WORDS:
        return float(_WORDS[printed])
    m = re.fullmatch(r"10\^\{(-?\d+)\}", printed)
    if m:
        return 10.0 ** int(m.group(1))
    return float(printed.replace("{,}", ""))


def test_figures_json_well_formed():
    figures = paper.load_paper_figures()
    assert len(figures) >= 15
    for fid, e in figures.items():
        assert e["id"] == fid and re.fullmatch(r"[a-z0-9-]+\.[A-Za-z0-9-]+", fid), fid
        assert {"label", "value", "unit", "quote", "printed"} <= set(e), fid
        assert isinstance(e["value"], int | float) and not isinstance(e["value"], bool), fid
        assert paper.paper_figure_value(fid) == e["value"]
    with pytest.raises(KeyError, match="no paper number"):
        paper.paper_figure_value("fig:nope")


@needs_tex
def test_figures_json_quotes_are_verbatim_and_parse_to_value():
    tex = paper.read_paper_tex()
    for fid, e in paper.load_paper_figures().items():
        assert e["quote"] in tex, f"{fid}: quote not in the .tex: {e['quote']!r}"
        assert f"\\label{{{e['label']}}}" in tex, f"{fid}: no label {e['label']!r}"
        # the printed token is a whole number token of the quote (not part of "0.146" etc.)
        token = rf"(?<![\w.{{]){re.escape(e['printed'])}(?![\w}}]|\.\d)"
        assert re.search(token, e["quote"]), f"{fid}: {e['printed']!r} not a token of the quote"
        assert _parse_printed(e["printed"]) == pytest.approx(e["value"], rel=1e-12), fid
        if "line" in e:  # a hint: the quote starts within a few lines of it
            line = tex[: tex.index(e["quote"])].count("\n") + 1
            assert abs(line - e["line"]) <= 20, f"{fid}: quote on line {line}, hint {e['line']}"


def test_table_tools_leave_figures_json_alone(tmp_path):
    (tmp_path / "figures.json").write_text(paper.FIGURES_JSON.read_text(encoding="utf-8"))
    if TEX_PATH.exists():
        paper_tables.write_paper_tables(out_dir=tmp_path, labels=["tab:meb"])
    assert (tmp_path / "figures.json").read_text(encoding="utf-8") == paper.FIGURES_JSON.read_text(
        encoding="utf-8"
    )
    assert not any("figures" in lab for lab in paper.SYNTHETIC_LABELS)


# ---------------------------------------------------------------------------------------------
# The paper's numbering (labels.json): "Theorem 2", "Table 3", "Eq. (4)"
# ---------------------------------------------------------------------------------------------


def _count_before(tex: str, label: str, pattern: str) -> int:
    """How many matches of ``pattern`` precede ``\\label{label}`` in the body (comments dropped)."""
    body = re.sub(r"(?<!\\)%.*", "", tex)
    return len(re.findall(pattern, body[: body.index(f"\\label{{{label}}}")]))


@needs_tex
def test_labels_are_numbered_as_latex_counts_them(tex):
    labels = paper_tables.parse_labels(tex)
    theorem_like = r"\\begin\{(?:theorem|corollary|proposition|lemma)\}"
    for label, entry in labels.items():
        if entry["kind"] in ("Theorem", "Corollary", "Proposition", "Lemma"):
            assert entry["number"] == str(_count_before(tex, label, theorem_like)), label
        elif entry["kind"] == "Definition":
            assert entry["number"] == str(_count_before(tex, label, r"\\begin\{definition\}"))
        elif entry["kind"] == "Eq.":
            n = _count_before(tex, label, r"\\begin\{equation\}")
            assert entry["number"] == f"({n})", label
    # tables: captions of table environments before the label (an uncaptioned table has no number)
    body = re.sub(r"(?<!\\)%.*", "", tex)
    starts = [m.start() for m in re.finditer(r"\\begin\{table\}", body)]
    captioned = [s for s in starts if "\\caption" in body[s : body.index("\\end{table}", s)]]
    for label, entry in labels.items():
        if entry["kind"] == "Table":
            pos = body.index(f"\\label{{{label}}}")
            assert entry["number"] == str(sum(s < pos for s in captioned)), label


def test_paper_refs_name_labels_as_the_paper_prints_them():
    assert paper.paper_ref("thm:tdof-depth") == "Theorem 2"
    assert paper.paper_ref("thm:tdof-depth", title=True).startswith("Theorem 2 (Depth separation")
    assert paper.paper_ref("tab:meb") == "Table 3"
    assert paper.paper_ref("eq:mz-main") == "Eq. (3)"
    assert paper.paper_ref("thm:separation") == "Theorem 8"  # shares the theorem counter
    assert paper.paper_ref("app:impl") == "Appendix A.1"
    text = "see Table tab:meb, Eq. eq:mz-main and thm:bottleneck; http://x.org/tab:meb stays"
    assert paper.name_labels(text) == (
        "see Table 3, Eq. (3) and Theorem 1; http://x.org/tab:meb stays"
    )
    with pytest.raises(KeyError, match="thm:nope"):
        paper.paper_ref("thm:nope")


def test_labels_json_in_sync_with_tex_is_part_of_check(tmp_path):
    labels = json.loads((DATA_DIR / "labels.json").read_text(encoding="utf-8"))["labels"]
    assert labels["tab:meb"]["text"] == "Table 3"
    if TEX_PATH.exists():
        stale_dir = tmp_path / "paper"
        stale_dir.mkdir()
        for f in DATA_DIR.glob("*.json"):
            (stale_dir / f.name).write_text(f.read_text(encoding="utf-8"), encoding="utf-8")
        doc = json.loads((stale_dir / "labels.json").read_text(encoding="utf-8"))
        doc["labels"]["tab:meb"]["number"] = "99"
        (stale_dir / "labels.json").write_text(json.dumps(doc), encoding="utf-8")
        assert "labels.json" in paper_tables.check_paper_tables(data_dir=stale_dir)
