"""Write the student copies of the chapters: no solutions, no outputs, exercises left to do.

    python book/_scripts/make_student.py                      # all chapters -> book/_build/student
    python book/_scripts/make_student.py --seed 17            # one class-wide variant of the inputs
    python book/_scripts/make_student.py --roster class.csv   # one folder per student, own seed
    python book/_scripts/make_student.py --execute            # CI: run the exercise cells (below)

A student copy is the chapter from notebooks/ with every solution cell removed (a code cell that
calls ``check(..., strict=True)``, or one tagged ``solution``), every output cleared, and the
answer cells kept with their ``...`` placeholders and ``check(...)`` calls. ``--roster`` reads one
student a line (``name`` or ``name,seed``; without a seed one is derived from the name) and writes
``OUT/<name>/`` with that seed in each chapter's ``parameters`` cell, so students get their own
exercise inputs; ``python -m mzlite grade`` later reads the seed back from each submission.
A zip of the default copies is written beside them for the book's download link.

``--execute`` runs what a student's copy adds to the chapter as the book already executes it:
for each chapter, the parameters and setup cells and every answer cell (with the markdown that
asks it), under papermill, in a fresh kernel. It fails unless every cell runs and every ``check``
reports "not answered yet". Together with the book's own run (every other kept cell, unchanged)
and tests/test_student.py (no kept cell reads a name that only a solution defined), that shows a
student's full copy runs top to bottom, at a small fraction of the cost of executing it again.
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import os
import re
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # this checkout's mzlite, whatever is installed

from mzlite.exercises.roster import read_roster, seed_for  # noqa: E402, F401 (seed_for: --roster)

TARGET = ROOT / "book" / "_build" / "student"
# The zip the book links to (book/teaching.md): inside the book's source tree, ignored by git.
ZIP = ROOT / "book" / "_generated" / "mzattn-student-notebooks.zip"
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
    return cell["cell_type"] == "code" and (
        "solution" in cell.get("metadata", {}).get("tags", [])
        or calls_strict_check("".join(cell["source"]))
    )


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


def student_copy(nb: dict, seed: int | None = None, source: str = "") -> dict:
    """The student version of notebook ``nb`` (a new dict; ``nb`` is left as it is)."""
    out = copy.deepcopy(nb)
    cells = []
    for cell in out["cells"]:
        if is_solution(cell):
            continue
        if cell["cell_type"] == "code":
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


def exercise_part(nb: dict) -> dict:
    """Parameters and setup cells, then every answer cell with the markdown cell that asks it."""
    cells = nb["cells"]
    code = [i for i, c in enumerate(cells) if c["cell_type"] == "code"]
    keep = set(code[:2])  # the parameters cell and the setup cell (imports, device, seed)
    for i, c in enumerate(cells):
        if is_answer(c):
            keep.add(i)
            if i > 0 and cells[i - 1]["cell_type"] == "markdown":
                keep.add(i - 1)
    part = copy.deepcopy(nb)
    part["cells"] = [c for i, c in enumerate(cells) if i in keep]
    return part


def write(path: Path, nb: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    tmp.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def make(chapters: list[Path], out: Path, seed: int | None) -> list[Path]:
    written = []
    for path in chapters:
        nb = json.loads(path.read_text())
        target = out / path.name
        write(target, student_copy(nb, seed, f"notebooks/{path.name}"))
        written.append(target)
    return written


def make_zip(files: list[Path], zip_path: Path) -> None:
    zip_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = zip_path.with_suffix(".partial")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for f in files:
            # a fixed date: the same notebooks give the same zip
            info = zipfile.ZipInfo(f"mzattn-student-notebooks/{f.name}", (2026, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, f.read_bytes())
    os.replace(tmp, zip_path)


def execute_exercise_parts(files: list[Path], timeout: int) -> list[str]:
    """Run each copy's exercise part; return the problems found (empty: all good)."""
    import papermill as pm

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from execute_notebooks import run_papermill

    problems = []
    for f in files:
        part = exercise_part(json.loads(f.read_text()))
        with tempfile.TemporaryDirectory() as tmp:
            src, dst, log = Path(tmp) / f.name, Path(tmp) / "out.ipynb", Path(tmp) / "checks.jsonl"
            src.write_text(json.dumps(part))
            os.environ["MZLITE_CHECK_LOG"] = str(log)
            start = time.perf_counter()
            try:
                run_papermill(src, dst, timeout)
            except pm.PapermillExecutionError as err:
                problems.append(f"{f.name}: cell {err.cell_index} raised {err.ename}: {err.evalue}")
                continue
            finally:
                os.environ.pop("MZLITE_CHECK_LOG", None)
            results = (
                [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
            )
            answers = sum(1 for c in part["cells"] if is_answer(c))
            answered = [r["key"] for r in results if r["status"] != "unanswered"]
            if len(results) < answers:
                problems.append(
                    f"{f.name}: {answers} answer cells but {len(results)} check results"
                )
            if answered:
                problems.append(f"{f.name}: placeholders not reported as unanswered: {answered}")
            print(
                f"{f.name}: {len(results)} exercises, all 'not answered yet' "
                f"({time.perf_counter() - start:.0f} s)",
                flush=True,
            )
    return problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("chapters", nargs="*", help="notebook names (without .ipynb); default: all")
    ap.add_argument("--out", type=Path, default=TARGET, help=f"default: {TARGET.relative_to(ROOT)}")
    ap.add_argument("--seed", type=int, default=None, help="write this seed into every copy")
    ap.add_argument("--roster", type=Path, default=None, help="one student a line: name[,seed]")
    ap.add_argument("--execute", action="store_true", help="run the exercise part of each copy")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per cell with --execute")
    args = ap.parse_args(argv)
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
        problems = execute_exercise_parts(files, args.timeout)
        for p in problems:
            print(f"FAILED {p}", file=sys.stderr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
