"""Grade submitted student notebooks: ``python -m mzlite grade SUBMISSIONS/``.

Each submission is executed top to bottom in a fresh kernel, in a child process with a time limit,
and every ``check`` it runs is recorded (through ``MZLITE_CHECK_LOG``, see
:mod:`mzlite.exercises.checker`). A cell that raises does not stop the run (later exercises still
count); a notebook that does not finish in time is killed and reported with the checks it reached.
Nothing a submission does can stop the grading of the others.

Layout of ``SUBMISSIONS/``: one folder per student holding that student's notebooks
(``ada/03_mzattn_from_scratch.ipynb``), or notebooks directly in it, named after the student.
The chapter of a notebook is read from its name (``03_...``), and the exercises expected of it are
those that chapter registers, so an exercise whose cell was deleted counts as missing.

Written to ``OUT`` (default ``SUBMISSIONS-grades/``): ``grades.csv`` (one row per student,
notebook and exercise), ``summary.md`` (per student, per exercise, and the problems) and the
executed notebooks under ``executed/`` for a closer look.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from .checker import LOG_ENV, keys

ROOT = Path(__file__).resolve().parents[2]
STATUSES = ("correct", "wrong", "unanswered", "missing")


@dataclass
class Run:
    """One executed submission."""

    student: str
    notebook: str
    chapter: str | None  # "ch3", or None when the name does not say
    seed: int | None
    outcome: str  # "ran" | "cell errors" | "timed out" | "unreadable"
    detail: str
    seconds: float
    results: dict[str, dict] = field(default_factory=dict)  # exercise key -> last check result
    expected: list[str] = field(default_factory=list)


def find_submissions(root: Path) -> list[tuple[str, Path]]:
    """``(student, notebook)`` pairs under ``root`` (see the module docstring)."""
    if not root.is_dir():
        raise ValueError(f"SUBMISSIONS must be a folder of notebooks, got {str(root)!r}")
    found = []
    for path in sorted(root.iterdir()):
        if path.is_dir() and not path.name.startswith((".", "_")):
            found += [(path.name, nb) for nb in sorted(path.glob("*.ipynb"))]
        elif path.suffix == ".ipynb":
            found.append((path.stem, path))
    found = [(s, p) for s, p in found if ".ipynb_checkpoints" not in p.parts]
    if not found:
        raise ValueError(f"no .ipynb files in {root} (expected STUDENT/NN_chapter.ipynb)")
    return found


def chapter_of(path: Path) -> str | None:
    m = re.match(r"(\d\d)_", path.name) or re.search(r"(?:^|[_-])(\d\d)_", path.name)
    return f"ch{int(m.group(1))}" if m else None


def seed_of(nb: dict) -> int | None:
    for cell in nb.get("cells", []):
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            m = re.search(r"(?m)^seed\s*=\s*(\d+)", "".join(cell.get("source", [])))
            return int(m.group(1)) if m else None
    return None


def _first_error(nb: dict) -> str:
    for i, cell in enumerate(nb.get("cells", [])):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"cell {i} raised {out.get('ename')}: {out.get('evalue')}"[:300]
    return ""


def execute_one(src: Path, dst: Path, cwd: Path, cell_timeout: int | None) -> None:
    """Run in the child process: execute ``src`` into ``dst``, errors recorded, not raised."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(src, as_version=4)
    client = NotebookClient(
        nb,
        timeout=cell_timeout,
        kernel_name="python3",
        allow_errors=True,
        resources={"metadata": {"path": str(cwd)}},
    )
    try:
        client.execute()
    finally:
        nbformat.write(nb, dst)


def run_submission(student: str, path: Path, out: Path, timeout: float, cwd: Path) -> Run:
    chapter = chapter_of(path)
    expected = keys(chapter + ".") if chapter else []
    try:
        nb = json.loads(path.read_text())
        if not isinstance(nb.get("cells"), list):
            raise ValueError("no cells")
    except (OSError, ValueError) as e:
        return Run(student, path.name, chapter, None, "unreadable", str(e)[:300], 0.0, {}, expected)
    executed = out / "executed" / student / path.name
    executed.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "checks.jsonl"
        env = {**os.environ, LOG_ENV: str(log), "PYTHONUNBUFFERED": "1"}
        env.setdefault("OMP_NUM_THREADS", "1")
        cmd = [sys.executable, "-m", "mzlite.exercises.grading", str(path), str(executed), str(cwd)]
        start = time.perf_counter()
        # A session of its own: on a timeout the whole group (the kernel included) is killed.
        proc = subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            output, _ = proc.communicate(timeout=timeout)
            outcome, detail = "ran", ""
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            outcome, detail = "timed out", f"did not finish in {timeout:g} s"
        seconds = time.perf_counter() - start
        results = {}
        if log.exists():
            for line in log.read_text().splitlines():
                try:
                    r = json.loads(line)
                    results[r["key"]] = r  # the last check of an exercise counts
                except (ValueError, KeyError):
                    continue
    if outcome == "ran":
        try:
            error = _first_error(json.loads(executed.read_text()))
        except (OSError, ValueError):
            error = ""
        if proc.returncode != 0:
            tail = output.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            outcome, detail = "cell errors", f"the run failed: {tail[0]}"[:300]
        elif error:
            outcome, detail = "cell errors", error
    return Run(
        student, path.name, chapter, seed_of(nb), outcome, detail, seconds, results, expected
    )


def _rows(runs: list[Run]):
    for r in runs:
        for key in sorted(set(r.expected) | set(r.results)):
            res = r.results.get(key)
            status = res["status"] if res else "missing"
            message = (
                res["message"]
                if res
                else (
                    "never checked: the cell was removed or not reached"
                    if r.outcome == "ran"
                    else f"not reached ({r.outcome})"
                )
            )
            yield r, key, status, message
        if not r.expected and not r.results:
            yield r, "", "", r.detail or "no exercise was checked"


def write_reports(runs: list[Run], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    csv_path, md_path = out / "grades.csv", out / "summary.md"
    tmp = csv_path.with_suffix(".partial")
    with tmp.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            [
                "student",
                "notebook",
                "chapter",
                "seed",
                "exercise",
                "status",
                "message",
                "run",
                "run_detail",
                "seconds",
            ]
        )
        for r, key, status, message in _rows(runs):
            w.writerow(
                [
                    r.student,
                    r.notebook,
                    r.chapter or "",
                    "" if r.seed is None else r.seed,
                    key,
                    status,
                    message,
                    r.outcome,
                    r.detail,
                    f"{r.seconds:.1f}",
                ]
            )
    os.replace(tmp, csv_path)

    per_student: dict[str, Counter] = defaultdict(Counter)
    per_exercise: dict[str, Counter] = defaultdict(Counter)
    for r, key, status, _ in _rows(runs):
        if key:
            per_student[r.student][status] += 1
            per_exercise[key][status] += 1
    lines = [
        "# Grades",
        "",
        f"{len({r.student for r in runs})} students, {len(runs)} notebooks.",
        "",
        "## Per student",
        "",
        "| student | notebooks | correct | wrong | not answered | missing | score | problems |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for student in sorted({r.student for r in runs}):
        c = per_student[student]
        total = sum(c[s] for s in STATUSES)
        problems = (
            "; ".join(
                f"{r.notebook}: {r.outcome}"
                for r in runs
                if r.student == student and r.outcome != "ran"
            )
            or ""
        )
        score = f"{c['correct']}/{total}" if total else "-"
        n_nb = sum(r.student == student for r in runs)
        lines.append(
            f"| {student} | {n_nb} | {c['correct']} | {c['wrong']} | {c['unanswered']} "
            f"| {c['missing']} | {score} | {problems} |"
        )
    lines += [
        "",
        "## Per exercise",
        "",
        "| exercise | correct | wrong | not answered | missing |",
        "|---|---|---|---|---|",
    ]
    for key in sorted(per_exercise):
        c = per_exercise[key]
        lines.append(
            f"| {key} | {c['correct']} | {c['wrong']} | {c['unanswered']} | {c['missing']} |"
        )
    problems = [r for r in runs if r.outcome != "ran"]
    lines += ["", "## Problems", ""]
    lines += [f"- {r.student} / {r.notebook}: {r.outcome}: {r.detail}" for r in problems] or [
        "None: every notebook ran to its end."
    ]
    tmp = md_path.with_suffix(".partial")
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, md_path)
    return csv_path, md_path


def grade(
    submissions, out=None, timeout: float = 600, cwd=None, progress: bool = True
) -> list[Run]:
    """Execute and grade every notebook under ``submissions``; write the reports into ``out``."""
    root = Path(submissions)
    if not timeout or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    found = find_submissions(root)
    out = Path(out) if out else root.with_name(root.resolve().name + "-grades")
    if cwd is None:
        cwd = ROOT / "notebooks" if (ROOT / "notebooks").is_dir() else root
    runs = []
    for student, path in found:
        run = run_submission(student, path, out, timeout, Path(cwd))
        runs.append(run)
        if progress:
            done = sum(r["status"] == "correct" for r in run.results.values())
            print(
                f"{student} / {path.name}: {run.outcome} ({run.seconds:.0f} s), "
                f"{done} of {len(set(run.expected) | set(run.results))} correct",
                flush=True,
            )
    csv_path, md_path = write_reports(runs, out)
    if progress:
        print(f"wrote {csv_path} and {md_path}")
    return runs


if __name__ == "__main__":  # the child process of run_submission
    src, dst, cwd = sys.argv[1:4]
    execute_one(Path(src), Path(dst), Path(cwd), cell_timeout=None)
