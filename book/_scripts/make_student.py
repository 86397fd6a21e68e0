"""Write the student copies of the chapters, the student edition of the book and the instructor
pack: no solution reaches a student.

    python book/_scripts/make_student.py                      # all chapters -> book/_build/student
    python book/_scripts/make_student.py --seed 17            # one class-wide variant of the inputs
    python book/_scripts/make_student.py --roster class.csv   # one folder per student, own seed
    python book/_scripts/make_student.py --execute            # run every copy from the zip
    python book/_scripts/make_student.py --execute --out DIR  # the same, the copies in DIR (CI)
    python book/_scripts/make_student.py --book-source DIR    # the student edition's book source
    python book/_scripts/make_student.py --instructor DIR     # the instructor pack (a zip)

A student copy is the chapter from notebooks/ with every solution cell removed (a code cell that
calls ``check(..., strict=True)``, or one tagged ``solution`` or ``sample-answer``), every output
cleared, and the answer cells kept with their ``...`` placeholders and ``check(...)`` calls (and
the written-answer cells, tagged ``answer-text``, of predict-then-run and discussion questions).
``--roster`` reads one student a line (``name`` or ``name,seed``; without a seed one is derived
from the name) and writes ``OUT/<name>/`` with that seed in each chapter's ``parameters`` cell, so
students get their own exercise inputs; the grader judges each answer for the roster's seed.

The default copies are zipped for the book's download link together with what they read from
disk (``data/checkpoints``: chapters 7 and 11 load ``mz_tdof8_L8.pt``), so an unzipped copy runs
top to bottom outside the repository, from the unzipped folder. ``--execute`` proves it: it
unzips the download into a fresh folder and runs every copy there, whole, under papermill; it
fails unless every cell runs and every ``check`` reports "not answered yet".

``--book-source DIR`` writes the source of the *student edition* of the book: the book's pages
with every executed chapter of ``book/chapters/`` stripped of its solution cells (and their
outputs) and of its answer cells' outputs (``make book STUDENT=1`` builds it). ``--instructor
DIR`` writes ``DIR/mzattn-instructor-pack.zip``: the chapters with their solutions, the sample
answers of the discussion and predict-then-run questions (``book/instructor/``), and how to grade.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's mzlite, whatever is installed

from mzlite.grading.roster import read_roster, seed_for  # noqa: E402, F401 (seed_for: --roster)
from mzlite.repro.paper import paper_label  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from student_terms import with_terms_and_references  # noqa: E402

TARGET = ROOT / "book" / "_build" / "student"
# The zip the book links to (book/teaching.md): inside the book's source tree, ignored by git.
ZIP = ROOT / "book" / "_generated" / "mzattn-student-notebooks.zip"
# What an unzipped copy reads from disk, shipped in the zip (relative to the repository root):
# the checkpoints (chapters 7, 11), the paper's numbers and the committed results (chapters 4-10).
# An installed mzlite finds them as data/ of the folder the zip unzips to (mzlite._paths).
SHIPPED_DATA = ["data/checkpoints", "data/paper", "data/results"]
INSTRUCTOR = ROOT / "book" / "instructor"  # sample answers: the instructor pack only
# Variables that point mzlite at this checkout's files; a student's machine has none of them.
_PATH_VARS = ("MZLITE_DATA", "MZLITE_RESULTS", "MZLITE_CACHE", "MZLITE_PAPER_TEX")
# Sentences of the reading version that are not true of a student copy (any line breaks).
READER_ONLY = [re.compile(r"\s*The hidden cell\s+below\s+it\s+holds\s+a\s+solution\.")]


def calls_strict_check(src: str) -> bool:
    """Whether the code calls ``check(..., strict=True)``: the mark of a solution cell."""
    try:
        tree = ast.parse("\n".join("" if ln.lstrip()[:1] in "%!" else ln for ln in src.split("\n")))
    except SyntaxError:  # not Python: then the text decides
        return bool(re.search(r"check\(.*strict\s*=\s*True", src, re.S))
    return any(
        isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", None)) == "check"
        and any(
            k.arg == "strict" and getattr(k.value, "value", None) is True for k in node.keywords
        )
        for node in ast.walk(tree)
    )


def is_solution(cell: dict) -> bool:
    tags = cell.get("metadata", {}).get("tags", [])
    return "sample-answer" in tags or (
        cell["cell_type"] == "code"
        and ("solution" in tags or calls_strict_check("".join(cell["source"])))
    )


def is_book_twin(cell: dict) -> bool:
    """A cell the book drops (``remove-cell``): in the chapters, a kernel-drawn twin of the figure
    the next cell draws in a form any page shows (plotly). A student copy keeps the book's form:
    JupyterLab would show both, the same figure twice."""
    return "remove-cell" in cell.get("metadata", {}).get("tags", [])


def is_left_out(cell: dict) -> bool:
    """Whether a student copy leaves ``cell`` out: a solution, or the twin of a figure."""
    return is_solution(cell) or is_book_twin(cell)


def is_answer(cell: dict) -> bool:
    return (
        cell["cell_type"] == "code"
        and "check(" in "".join(cell["source"])
        and not is_solution(cell)
    )


def set_seed(cell: dict, seed: int) -> None:
    src = "".join(cell["source"])
    new, n = re.subn(r"(?m)^seed = \S+", f"seed = {seed}", src)
    if n != 1:
        raise ValueError("the parameters cell has no line 'seed = ...'")
    cell["source"] = new.splitlines(keepends=True)


def student_copy(
    nb: dict, seed: int | None = None, source: str = "", keep_outputs: bool = False
) -> dict:
    """The student version of notebook ``nb`` (a new dict; ``nb`` is left as it is).
    ``keep_outputs`` keeps the outputs of the chapter's own cells (the student edition of the
    book), never those of an answer cell."""
    out = copy.deepcopy(nb)
    cells = []
    for cell in out["cells"]:
        if is_left_out(cell):
            continue
        if cell["cell_type"] == "code" and (not keep_outputs or is_answer(cell)):
            cell["outputs"], cell["execution_count"] = [], None
            if seed is not None and "parameters" in cell.get("metadata", {}).get("tags", []):
                set_seed(cell, seed)
        else:
            text = "".join(cell["source"])
            for sentence in READER_ONLY:
                text = sentence.sub("", text)
            cell["source"] = text.splitlines(keepends=True)
        cells.append(cell)
    out["cells"] = cells
    out["metadata"]["mzlite_student"] = {"source": source, "seed": seed}
    return out


def write(path: Path, nb: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    tmp.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


# A chapter links the Teaching page as ../teaching.md, a page of the built book; a copy opened in
# JupyterLab has no such file beside it, so it names the page instead of holding a dead link.
TEACHING_LINK = "[Teaching with this book](../teaching.md)"
TEACHING_TEXT = '"Teaching with this book", a page of the book'


# The book's own roles ({paper}`thm:tdof-depth` -> Theorem 2; book/_ext/paper_refs.py), which
# JupyterLab (jupyterlab-myst included) would show as raw text.
PAPER_ROLE = re.compile(r"\{paper(-title)?\}`([^`]+)`")


def _paper_name(match: re.Match) -> str:
    entry = paper_label(match.group(2).strip())  # an unknown label fails here, as in the book
    if match.group(1) and entry["title"]:
        return f"{entry['text']} ({entry['title']})"
    return entry["text"]


# A file of the repository that the download does not hold (a benchmark, a test, a script of the
# book), named in code: a student copy says where it is rather than send the student looking for
# it in the unzipped folder.
REPO_ONLY = re.compile(
    r"`((?:tests|benchmarks|book|notebooks)/[^`\s]+)`(?! of the mzlite repository)"
)


def _outside_the_book(text: str) -> str:
    text = REPO_ONLY.sub(r"`\1` of the mzlite repository", text)
    return PAPER_ROLE.sub(_paper_name, text.replace(TEACHING_LINK, TEACHING_TEXT))


def without_book_links(nb: dict) -> dict:
    """``nb`` for a copy opened outside the book: the link to the Teaching page (a page of the
    built book) replaced by its name, the book's paper roles by the paper's name for the label,
    a file of the repository named as one (``REPO_ONLY``),
    its glossary terms and citations by links to a last cell that defines and references them
    (student_terms.py: the book's glossary and bibliography are not in the download)."""
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        src = cell.get("source", "")
        if isinstance(src, list):
            src = "".join(src)
            cell["source"] = _outside_the_book(src).splitlines(keepends=True)
        else:
            cell["source"] = _outside_the_book(src)
    return with_terms_and_references(nb)


def make(chapters: list[Path], out: Path, seed: int | None) -> list[Path]:
    written = []
    for path in chapters:
        nb = json.loads(path.read_text())
        target = out / path.name
        write(target, without_book_links(student_copy(nb, seed, f"notebooks/{path.name}")))
        written.append(target)
    return written


ZIP_README = """Student copies of the chapters of "Matrix Zonotopic Attention, hands on".

Install mzlite as your instructor says (PyTorch's CPU build first, then JupyterLab with
jupyterlab-myst, a pair known to work together, and the package:
  python -m pip install torch --index-url https://download.pytorch.org/whl/cpu
  python -m pip install "jupyterlab>=4.5,<4.6" "jupyterlab-myst==2.7.0" mzlite-*.whl
see the book's "Teaching with this book"), then start Jupyter from THIS folder
(jupyter lab) and open a chapter: the chapters read data/ from here (the checkpoints, the
paper's numbers and the book's results; set MZLITE_DATA to use another copy). Each
answer cell has a ... placeholder: replace it, run the cell, and check() says whether you are
right. Keep the seed in the parameters cell as your instructor gave it. The last cell of each
chapter defines the terms it uses and lists the works it cites; the links lead there.
"""


def _zip_entry(z: zipfile.ZipFile, name: str, data: bytes) -> None:
    info = zipfile.ZipInfo(name, (2026, 1, 1, 0, 0, 0))  # a fixed date: same input, same zip
    info.compress_type = zipfile.ZIP_DEFLATED
    z.writestr(info, data)


def _shipped_files() -> list[Path]:
    """The files of ``SHIPPED_DATA``: those git tracks when this is a git checkout (never a
    half-written or local result), else every file."""
    tracked = None
    if (ROOT / ".git").exists():
        out = subprocess.run(
            ["git", "ls-files", "-z", "--", *SHIPPED_DATA],
            cwd=ROOT, capture_output=True, check=True,
        ).stdout  # fmt: skip
        tracked = {ROOT / name for name in out.decode().split("\0") if name}
    return sorted(
        f
        for d in SHIPPED_DATA
        for f in (ROOT / d).rglob("*")
        if f.is_file()
        and "cache" not in f.parts
        and not f.name.endswith(".partial")
        and (tracked is None or f in tracked)
    )


def make_zip(files: list[Path], zip_path: Path) -> None:
    """The download: ``mzattn-student-notebooks/`` with the copies, the data they read
    (``SHIPPED_DATA``) and a README, written atomically."""
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = zip_path.with_suffix(".partial")
    top = "mzattn-student-notebooks"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for f in files:
            _zip_entry(z, f"{top}/{f.name}", f.read_bytes())
        for f in _shipped_files():
            _zip_entry(z, f"{top}/{f.relative_to(ROOT).as_posix()}", f.read_bytes())
        _zip_entry(z, f"{top}/README.txt", ZIP_README.encode())
    os.replace(tmp, zip_path)


def execute_download(zip_path: Path, timeout: int, names: list[str] | None = None) -> list[str]:
    """Unzip the download into a fresh folder and run every copy in it (or those ``names``),
    top to bottom, with the unzipped folder as working directory and mzlite imported from a copy
    of the package outside any checkout (as a student's install is: it finds ``data/`` in the
    unzipped folder, not in this repository); return the problems found."""
    import papermill as pm

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from execute_notebooks import ipc_kernel_manager, poll_channels_in_slices

    poll_channels_in_slices()
    problems = []
    saved = {k: os.environ.get(k) for k in (*_PATH_VARS, "PYTHONPATH", "OMP_NUM_THREADS")}
    # One intra-op thread, as the book's own execution (execute_notebooks.py): `make test` runs
    # these copies beside that execution, one kernel each on a 2-core machine.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with tempfile.TemporaryDirectory() as tmp:
        with zipfile.ZipFile(zip_path) as z:
            z.extractall(tmp)
        folder = Path(tmp) / "mzattn-student-notebooks"
        try:
            install_outside_checkout(Path(tmp) / "site", Path(tmp) / "cache")
            problems += _run_copies(pm, folder, names, Path(tmp), timeout, ipc_kernel_manager)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return problems


def install_outside_checkout(site: Path, cache: Path) -> None:
    """Make kernels started from now on import mzlite from a copy of the package in ``site``
    (first on ``PYTHONPATH``, ahead of this checkout's editable install) with no checkout around
    it, and a dataset cache of their own; raise if the copy still sees a checkout."""
    shutil.copytree(
        ROOT / "mzlite", site / "mzlite", ignore=shutil.ignore_patterns("__pycache__", "*.so")
    )
    for k in _PATH_VARS:
        os.environ.pop(k, None)
    os.environ["MZLITE_CACHE"] = str(cache)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    probe = "import mzlite, mzlite._paths as p; print(mzlite.__file__, p.in_checkout())"
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=site.parent, capture_output=True, text=True, check=True
    ).stdout.split()
    if out != [str(site / "mzlite" / "__init__.py"), "False"]:
        raise RuntimeError(f"the student's mzlite is not the copy outside the checkout: {out}")


def _run_copies(pm, folder: Path, names, tmp: Path, timeout: int, kernel_manager) -> list[str]:
    """Run each copy in ``folder`` (or those ``names``) whole under papermill; the problems."""
    problems = []
    copies = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    if names:
        copies = [c for c in copies if c.stem in names]
    for f in copies:
        log, dst = tmp / f"{f.stem}.checks.jsonl", tmp / f"{f.stem}.out.ipynb"
        os.environ["MZLITE_CHECK_LOG"] = str(log)
        start = time.perf_counter()
        try:
            pm.execute_notebook(
                str(f),
                str(dst),
                kernel_name="python3",
                cwd=str(folder),
                execution_timeout=timeout,
                progress_bar=False,
                kernel_manager_class=kernel_manager(),
            )
        except pm.PapermillExecutionError as err:
            problems.append(f"{f.name}: cell {err.cell_index} raised {err.ename}: {err.evalue}")
            continue
        finally:
            os.environ.pop("MZLITE_CHECK_LOG", None)
        results = (
            [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
        )
        answers = sum(1 for c in json.loads(f.read_text())["cells"] if is_answer(c))
        answered = [r["key"] for r in results if r["status"] != "unanswered"]
        if len(results) < answers:
            problems.append(f"{f.name}: {answers} answer cells but {len(results)} check results")
        if answered:
            problems.append(f"{f.name}: placeholders not reported as unanswered: {answered}")
        print(
            f"{f.name}: ran whole from the unzipped download, {len(results)} exercises all "
            f"'not answered yet' ({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    return problems


def make_book_source(out: Path, chapters_dir: Path = ROOT / "book" / "chapters") -> Path:
    """The student edition's book source in ``out``: the book's pages as they are, and every
    executed chapter of ``chapters_dir`` as a student copy that keeps its own outputs."""
    book = ROOT / "book"
    if out.exists():
        shutil.rmtree(out)
    skip = shutil.ignore_patterns("_build", "chapters", "instructor", "*.partial")
    shutil.copytree(book, out, ignore=skip)
    executed = sorted(chapters_dir.glob("[0-9][0-9]_*.ipynb"))
    if not executed:
        raise FileNotFoundError(f"no executed chapters in {chapters_dir}: run `make notebooks`")
    for path in executed:
        nb = student_copy(json.loads(path.read_text()), source=f"book/chapters/{path.name}",
                          keep_outputs=True)  # fmt: skip
        write(out / "chapters" / path.name, nb)
    for extra in chapters_dir.glob("*.json"):  # e.g. execution_times.json
        shutil.copy2(extra, out / "chapters" / extra.name)
    return out


def make_instructor_pack(out: Path) -> Path:
    """``out/mzattn-instructor-pack.zip``: the chapters with solutions, the sample answers
    (``book/instructor/``) and the README on grading; never part of the student download."""
    target = out / "mzattn-instructor-pack.zip"
    out.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(".partial")
    top = "mzattn-instructor-pack"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
            _zip_entry(z, f"{top}/notebooks-with-solutions/{f.name}", f.read_bytes())
        for f in sorted(INSTRUCTOR.glob("*.md")):
            _zip_entry(z, f"{top}/{f.name}", f.read_bytes())
        _zip_entry(z, f"{top}/teaching.md", (ROOT / "book" / "teaching.md").read_bytes())
    os.replace(tmp, target)
    return target


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("chapters", nargs="*", help="notebook names (without .ipynb); default: all")
    ap.add_argument("--out", type=Path, default=TARGET, help=f"default: {TARGET.relative_to(ROOT)}")
    ap.add_argument("--seed", type=int, default=None, help="write this seed into every copy")
    ap.add_argument("--roster", type=Path, default=None, help="one student a line: name[,seed]")
    ap.add_argument("--execute", action="store_true", help="run every copy from the unzipped zip")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell with --execute")
    ap.add_argument("--book-source", type=Path, default=None, help="write the student edition")
    ap.add_argument("--instructor", type=Path, default=None, help="write the instructor pack")
    args = ap.parse_args(argv)
    if args.book_source:
        try:
            print(f"student edition source in {make_book_source(args.book_source)}")
        except FileNotFoundError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    if args.instructor:
        print(f"instructor pack: {make_instructor_pack(args.instructor)}")
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from execute_notebooks import chapters

    chosen = chapters(args.chapters)
    if chosen is None:
        return 2
    if args.roster:
        try:
            students = read_roster(args.roster)
        except (OSError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        for name, seed in students:
            make(chosen, args.out / name, seed)
        print(f"student copies for {len(students)} students in {args.out}")
        return 0
    files = make(chosen, args.out, args.seed)
    print(f"{len(files)} student notebooks in {args.out}")
    if args.out == TARGET and not args.chapters and args.seed is None:
        make_zip(files, ZIP)
        print(f"zipped into {ZIP.relative_to(ROOT)}")
    if args.execute:
        with tempfile.TemporaryDirectory() as tmp:  # a download of exactly these copies
            download = Path(tmp) / "download.zip"
            make_zip(files, download)
            problems = execute_download(download, args.timeout)
        for p in problems:
            print(f"FAILED {p}", file=sys.stderr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
