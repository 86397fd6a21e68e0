"""What a student installs and what JupyterLab then shows (issue 37, items 5 and 6): PyTorch from
its CPU index before anything that depends on it (the default index gives Linux the CUDA build,
about 6 GB), and jupyterlab-myst beside JupyterLab, so that the notes' MyST roles render instead of
showing as raw text. Both the Teaching page and the download's README say it."""

from __future__ import annotations

import json
import re
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
        m[1].split()
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
    assert {"jupyterlab", "jupyterlab-myst"} <= set(installs[wheel_at]), installs[wheel_at]
    # the test can fail: a plain install, or the wheel before torch
    assert not " ".join(pip_installs("pip install torch")[0]).endswith(CPU_INDEX)
    assert pip_installs("python -m pip install jupyterlab mzlite-1.whl  # x") == [
        ["jupyterlab", "mzlite-1.whl"]
    ]


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


def test_a_student_copy_holds_only_roles_jupyterlab_myst_renders(tmp_path):
    files = ms.make(NOTEBOOKS, tmp_path, seed=None)
    left = {
        f"{p.name}: {{{role}}}"
        for p in files
        for role, _ in _roles(_markdown(p))
        if role not in JUPYTERLAB_MYST_ROLES
    }
    assert not left, f"roles JupyterLab shows as raw text: {sorted(left)[:5]}"
