"""What a student installs and what JupyterLab then shows (issues 37 and 52): PyTorch from its CPU
index before anything that depends on it (the default index gives Linux the CUDA build, about
6 GB), and jupyterlab-myst beside JupyterLab, the pair pyproject's `lab` extra pins, so that the
notes' MyST renders. Both the Teaching page and the download's README say it; the student copies
carry their glossary terms and citations as footnotes of the cell that uses them.
tests/test_student_lab.py runs these install lines in a fresh environment and opens a chapter."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from book_scripts import load

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
# MyST roles that jupyterlab-myst renders in a notebook: citations and glossary terms
JUPYTERLAB_MYST_ROLES = {"cite", "term"}
ms = load("make_student")


def pip_installs(text: str) -> list[list[str]]:
    """The arguments of every ``python -m pip install ...`` line of ``text``."""
    return [
        shlex.split(m[1])
        for m in re.finditer(r"(?m)^\s*(?:python\s+-m\s+)?pip\s+install\s+([^#\n]+)", text)
    ]


def _student_install_block() -> str:
    page = (ROOT / "book" / "teaching.md").read_text()
    part = page.split("**What students install.**", 1)[1]
    return part[part.index("```bash") : part.index("```", part.index("```bash") + 3)]


@pytest.mark.parametrize("where", ["teaching page", "download README"])
def test_students_install_cpu_torch_first_then_jupyterlab_myst_and_the_wheel(where):
    text = _student_install_block() if where == "teaching page" else ms.ZIP_README
    installs = pip_installs(text)
    torch_at = next(i for i, a in enumerate(installs) if "torch" in a)
    wheel_at = next(i for i, a in enumerate(installs) if any(x.endswith(".whl") for x in a))
    assert " ".join(installs[torch_at]).endswith("torch " + CPU_INDEX), installs[torch_at]
    assert torch_at < wheel_at, "torch must come first: the wheel would pull the CUDA build"
    pins = json.loads(re.search(r"(?m)^lab = (\[.*\])$", (ROOT / "pyproject.toml").read_text())[1])
    assert set(pins) <= set(installs[wheel_at]), (installs[wheel_at], pins)
    assert {re.split("[=<>]", r)[0] for r in pins} == {"jupyterlab", "jupyterlab-myst"}
    # the test can fail: a plain install, or the wheel before torch
    assert not " ".join(pip_installs("pip install torch")[0]).endswith(CPU_INDEX)
    assert pip_installs("python -m pip install jupyterlab mzlite-1.whl  # x") == [
        ["jupyterlab", "mzlite-1.whl"]
    ]


def test_the_teaching_page_and_the_download_give_the_same_install_lines():
    """tests/test_student_lab.py runs the download's lines; the Teaching page must say the same."""
    assert pip_installs(_student_install_block()) == pip_installs(ms.ZIP_README)


def _markdown(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def _roles(text: str) -> list[tuple[str, str]]:
    return re.findall(r"\{([\w-]+)\}`([^`]*)`", text)


def test_notes_use_myst_roles_jupyterlab_myst_renders_and_the_books_paper_role():
    """A note's roles are citations and glossary terms (jupyterlab-myst renders them; a cited key
    must exist) or the book's ``{paper}`` role (book/_ext/paper_refs.py), and nothing else."""
    bib = (ROOT / "book" / "references.bib").read_text()
    keys = set(re.findall(r"@\w+\{([^,\s]+),", bib))
    unknown, uncited = [], []
    for path in NOTEBOOKS:
        for role, body in _roles(_markdown(path)):
            if role not in JUPYTERLAB_MYST_ROLES | {"paper"}:
                unknown.append(f"{path.name}: {{{role}}}")
            if role == "cite":
                uncited += [
                    f"{path.name}: {k}" for k in re.split(r"[,;]\s*", body) if k not in keys
                ]
    assert not unknown, f"roles neither jupyterlab-myst nor the book knows: {unknown}"
    assert not uncited, f"cited keys missing from book/references.bib: {uncited}"


def test_a_student_copy_holds_no_role_and_every_footnote_is_defined_in_its_cell(tmp_path):
    """No {term} or {cite} is left for JupyterLab to show raw or as "Citation Not Found"; each
    footnote a cell uses is defined in that cell (jupyterlab-myst resolves nothing across
    cells), with the glossary's definition or the bibliography's reference."""
    st = load("student_terms")
    files = ms.make(NOTEBOOKS, tmp_path, seed=None)
    left, undefined, used = [], [], set()
    for p in files:
        cells = json.loads(p.read_text())["cells"]
        for cell in (c for c in cells if c["cell_type"] == "markdown"):
            text = "".join(cell["source"])
            left += [f"{p.name}: {{{role}}}" for role, _ in _roles(text)]
            defined = dict(re.findall(r"(?m)^\[\^([\w-]+)\]: (.+)$", text))
            refs = set(re.findall(r"\[\^([\w-]+)\](?!:)", text))
            undefined += [f"{p.name}: {r}" for r in refs - set(defined)]
            used |= {(r, defined[r]) for r in refs & set(defined)}
        assert "".join(cells[-1]["source"]).startswith(f"## {st.SECTION_TITLE}"), p.name
    assert not left, f"roles JupyterLab shows as raw text: {sorted(left)[:5]}"
    assert not undefined, f"footnotes without a definition in their cell: {undefined[:5]}"
    notes = dict(used)
    # the definitions are the glossary's and the references the bibliography's (independent read)
    assert notes["term-zonotope"].startswith("**zonotope**: A centrally symmetric convex set")
    assert notes["ref-mzattn2026"].startswith(
        "Zhen Zhang and Amr Alanwar (2026). *Matrix Zonotopic"
    )
    assert notes["ref-kuhn1998"].startswith("Wolfgang Kühn (1998)")


def test_roles_become_author_year_text_and_footnotes():
    st = load("student_terms")
    text = st.rewrite_roles(
        "As {cite}`lee2019set,Kuhn1998` say, {term}`MAB`s stack and {term}`gates <gate>` open."
    )
    body, notes = text.split("\n\n", 1)
    assert body == (
        "As Lee et al. (2019)[^ref-lee2019set]; Kühn (1998)[^ref-kuhn1998] say, "
        "MABs[^term-mab] stack and gates[^term-gate] open."
    )
    assert notes.splitlines()[0].startswith("[^term-mab]: **MAB**: Multihead Attention Block")
    assert "(Lee et al., 2019)" in notes  # the definition's own {cite:p}, as text
    with pytest.raises(KeyError, match="nosuchterm"):
        st.rewrite_roles("{term}`nosuchterm`")
    with pytest.raises(KeyError, match="nosuchkey"):
        st.rewrite_roles("{cite}`nosuchkey`")
