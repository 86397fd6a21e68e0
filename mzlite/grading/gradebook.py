"""The grader's reports: points per student and exercise, the roster joined, statistics.

:func:`gradebook_rows` turns graded notebooks into one row per student: every student of the
roster (an absent student, or a missing notebook, is a row of zeros, not a gap), then anyone who
submitted without being on it. A notebook the grader could not grade (its sandbox or judge died)
gives its student the status "could not be graded", with the reason in the messages of its
exercises. Each exercise of the assignment earns ``points x score``, where ``score`` is 1 for a
correct value, the fraction of hidden trials passed for a coding exercise, and 0 otherwise.
:func:`write_reports` writes them (atomically) as CSV and Markdown.
"""

from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

from mzlite.exercises.checker import get

from .._io import atomic_write_text

STATUSES = ("correct", "partial", "wrong", "unanswered", "missing")
NOT_GRADED = "could not be graded"  # a notebook whose sandbox or judge died (grader.NOT_GRADED)


def _cell_results(graded, assignment):
    """``{(student, key): (result, notebook grade)}`` and the students' notebooks."""
    table, notebooks = {}, {}
    for g in graded:
        notebooks.setdefault(g.student, []).append(g)
        for key in assignment:
            if key in g.expected:
                res = g.results.get(key) or {
                    "status": "missing",
                    "message": f"{g.outcome}: {g.detail}"
                    if g.outcome == NOT_GRADED
                    else (f"not graded ({g.outcome}: {g.detail})" if g.detail else "missing"),
                }
                table[(g.student, key)] = (res, g)
    return table, notebooks


def gradebook_rows(graded, assignment, points, roster=None) -> list[dict]:
    """One dict per student (roster order, then the others by name)."""
    table, notebooks = _cell_results(graded, assignment)
    names = [n for n, _ in roster] if roster is not None else []
    names += sorted(set(notebooks) - set(names))
    seeds = dict(roster or [])
    total_max = sum(points[k] for k in assignment)
    rows = []
    for name in names:
        nbs = notebooks.get(name, [])
        row = {
            "student": name,
            "seed": seeds.get(name, next((g.seed for g in nbs if g.seed is not None), "")),
            "status": "absent"
            if not nbs
            else ("off roster" if roster and name not in seeds else ""),
            "notebooks": len(nbs),
            "findings": sum(len(g.findings) for g in nbs),
        }
        total = 0.0
        for key in assignment:
            res, _ = table.get((name, key), ({"status": "missing"}, None))
            earned = points[key] * float(res.get("score", 0.0) if res["status"] != "missing" else 0)
            row[key] = round(earned, 4)
            total += earned
        row["total"] = round(total, 4)
        row["max"] = total_max
        row["percent"] = round(100 * total / total_max, 2) if total_max else 0.0
        if not row["status"]:
            if any(g.outcome == NOT_GRADED for g in nbs):
                row["status"] = NOT_GRADED
            else:
                row["status"] = "flagged" if row["findings"] else "graded"
        rows.append(row)
    return rows


def long_rows(graded, assignment, points) -> list[dict]:
    table, _ = _cell_results(graded, assignment)
    rows = []
    for g in graded:
        for key in [k for k in assignment if k in g.expected]:
            res, _ = table[(g.student, key)]
            score = float(res.get("score", 0.0)) if res["status"] != "missing" else 0.0
            rows.append(
                {
                    "student": g.student,
                    "notebook": g.notebook,
                    "chapter": g.chapter or "",
                    "seed": "" if g.seed is None else g.seed,
                    "claimed_seed": "" if g.claimed_seed is None else g.claimed_seed,
                    "exercise": key,
                    "kind": get(key).kind,
                    "status": res["status"],
                    "points": round(points[key] * score, 4),
                    "max_points": points[key],
                    "trials": res.get("trials", ""),
                    "trials_passed": res.get("passed", ""),
                    "attempts": res.get("attempts", ""),
                    "message": res.get("message", ""),
                    "run": g.outcome,
                    "run_detail": g.detail,
                    "seconds": f"{g.seconds:.1f}",
                    "findings": " | ".join(g.findings),
                }
            )
    return rows


def statistics(graded, assignment, points, roster=None) -> list[dict]:
    """Per exercise: how the class did, over every student of the gradebook."""
    book = gradebook_rows(graded, assignment, points, roster)
    table, _ = _cell_results(graded, assignment)
    out = []
    for key in assignment:
        verdicts = Counter(
            table.get((r["student"], key), ({"status": "missing"}, None))[0]["status"] for r in book
        )
        wrong = Counter(
            res["message"].split(" Hint:")[0]
            for (s, k), (res, _) in table.items()
            if k == key and res["status"] in ("wrong", "partial")
        )
        n = len(book)
        out.append(
            {
                "exercise": key,
                "kind": get(key).kind,
                "max_points": points[key],
                "students": n,
                "mean_points": round(sum(r[key] for r in book) / n, 4) if n else 0.0,
                **{s: verdicts[s] for s in STATUSES},
                "most_common_mistake": wrong.most_common(1)[0][0] if wrong else "",
            }
        )
    return out


def _csv(rows: list[dict], columns: list[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


# What the summary says under the isolation that ran (the Teaching page quotes the audit note).
ISOLATION_NOTES = {
    "jail": "Each notebook, and each submission's judged functions, ran in a jail of its own "
    "(bubblewrap; each exercise's function in a fresh process and an emptied folder): an "
    "empty root holding only the interpreter and its environment (read-only) and its own "
    "folder, no capability over its mounts, its own IPC, UTS, PID and network namespaces (no "
    "network), and a copy of mzlite without checkers, references or verdicts.",
    "audit": "**Audit hook only: these marks are not protected against a program a notebook "
    "starts.** This machine could not make the jail (bubblewrap and user namespaces), so only "
    "Python's audit hook guarded the files. A program a notebook starts (a shell, any "
    "executable) is not seen by the hook: it can read what the grading user may read (the "
    "solutions, the classmates' submissions) and write where that user may write (the Python "
    "installation the grader imports included), and no finding records it. Grade on a Linux "
    "system where bubblewrap can make the jail for marks that count.",
}


def write_reports(graded, out: Path, assignment, points, roster=None, isolation="") -> list[Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    book = gradebook_rows(graded, assignment, points, roster)
    head = ["student", "seed", "status", "notebooks", "findings", "total", "max", "percent"]
    paths = [out / "gradebook.csv", out / "grades.csv", out / "statistics.csv", out / "summary.md"]
    atomic_write_text(paths[0], _csv(book, head + list(assignment)))
    longs = long_rows(graded, assignment, points)
    atomic_write_text(paths[1], _csv(longs, list(longs[0]) if longs else ["student"]))
    stats = statistics(graded, assignment, points, roster)
    atomic_write_text(paths[2], _csv(stats, list(stats[0]) if stats else ["exercise"]))

    lines = [
        "# Grades",
        "",
        f"{len(book)} students, {len(graded)} notebooks, {len(assignment)} exercises "
        f"({sum(points[k] for k in assignment):g} points). Isolation: {isolation or 'n/a'}.",
        "",
        *([ISOLATION_NOTES[isolation], ""] if isolation in ISOLATION_NOTES else []),
        "## Per student",
        "",
        "| student | seed | status | notebooks | points | percent | findings |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in book:
        lines.append(
            f"| {r['student']} | {r['seed']} | {r['status']} | {r['notebooks']} "
            f"| {r['total']:g}/{r['max']:g} | {r['percent']:g} | {r['findings']} |"
        )
    lines += [
        "",
        "## Per exercise",
        "",
        "| exercise | kind | points | mean | correct | partial | wrong | not answered | missing "
        "| most common mistake |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in stats:
        lines.append(
            f"| {s['exercise']} | {s['kind']} | {s['max_points']:g} | {s['mean_points']:g} "
            f"| {s['correct']} | {s['partial']} | {s['wrong']} | {s['unanswered']} "
            f"| {s['missing']} | {s['most_common_mistake']} |"
        )
    lines += ["", "## Findings", ""]
    flagged = [g for g in graded if g.findings]
    for g in flagged:
        lines.append(f"- **{g.student} / {g.notebook}**:")
        lines += [f"  - {f}" for f in g.findings]
    if not flagged:
        lines.append("None: no submission tampered with its checks, seed or files.")
    problems = [g for g in graded if g.outcome != "ran"]
    lines += ["", "## Problems", ""]
    lines += [f"- {g.student} / {g.notebook}: {g.outcome}: {g.detail}" for g in problems] or [
        "None: every notebook ran to its end."
    ]
    atomic_write_text(paths[3], "\n".join(lines) + "\n")
    return paths
