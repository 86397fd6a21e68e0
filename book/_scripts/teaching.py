"""Generate the tables of the teaching page (book/teaching.md includes them) from their sources:

- each chapter's header block (objectives, prerequisites, minutes of reading and exercises),
  the cell right after its title in notebooks/;
- its exercises (the ``check("key", ...)`` calls of its answer cells; a function passed is a
  coding exercise);
- the wall time the executor recorded when it last ran the chapter in the default profile
  (book/chapters/execution_times.json, written by execute_notebooks.py).

    python book/_scripts/teaching.py    # -> book/_generated/chapter_times.md, chapter_objectives.md

Nothing here is typed by hand: a chapter that has not been executed yet says so.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "notebooks"
TIMES = ROOT / "book" / "chapters" / "execution_times.json"
OUT = ROOT / "book" / "_generated"
# The header block of every chapter: tests/test_teaching.py holds each notebook to it.
HEADER = re.compile(
    r"^> \*\*Objectives\.\*\* After this chapter you can (?P<objectives>.+?)\n>\n"
    r"> \*\*Prerequisites\.\*\* (?P<prerequisites>.+?)\n>\n"
    r"> \*\*Time\.\*\* About (?P<reading>\d+) min reading"
    r"(?: and (?P<exercises>\d+) min exercises| \(no exercises\))\."
    r"(?P<rest>.*)$",
    re.S,
)


def _unquote(text: str) -> str:
    return " ".join(line.removeprefix(">").strip() for line in text.splitlines()).strip()


def chapter_info(path: Path) -> dict:
    """Title, header block and exercises of one chapter; ValueError when the header is missing."""
    nb = json.loads(path.read_text())
    cells = nb["cells"]
    title = "".join(cells[0]["source"]).split("\n", 1)[0].removeprefix("# ").strip()
    header = "".join(cells[1]["source"]) if len(cells) > 1 else ""
    m = HEADER.match(header) if cells[1]["cell_type"] == "markdown" else None
    if not m:
        raise ValueError(
            f"{path.name}: the cell after the title must be the chapter's header block "
            "('> **Objectives.** After this chapter you can ...', '> **Prerequisites.** ...', "
            "'> **Time.** About N min reading and M min exercises. ...' or '... reading (no "
            "exercises). ...')"
        )
    value, code = set(), set()
    for cell in cells:
        src = "".join(cell["source"])
        if cell["cell_type"] != "code" or "strict=True" in src:
            continue
        for key, arg in re.findall(r'check\("([\w.]+)",\s*(\w+|\.\.\.)', src):
            (value if arg in ("answer", "...") else code).add(key)
    return {
        "stem": path.stem,
        "number": int(path.stem[:2]),
        "title": title,
        "objectives": _unquote(m["objectives"]),
        "prerequisites": _unquote(m["prerequisites"]),
        "reading_min": int(m["reading"]),
        "exercise_min": int(m["exercises"] or 0),
        "exercises": len(value),
        "coding_exercises": len(code),
    }


def default_profile_times(path: Path = TIMES) -> dict:
    """Recorded wall times (s) of chapters executed with their default parameters."""
    try:
        times = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return {
        stem: meta
        for stem, meta in times.items()
        if not meta.get("parameters") or meta["parameters"].get("profile", "smoke") == "smoke"
    }


def times_table(chapters: list[dict], times: dict) -> str:
    rows = [
        "| chapter | reading | exercises | executing (CPU, measured) | total |",
        "|---|---:|---:|---:|---:|",
    ]
    machines = set()
    for c in chapters:
        meta = times.get(c["stem"])
        n = f"{c['exercises']}" + (
            f" + {c['coding_exercises']} coding" if c["coding_exercises"] else ""
        )
        if meta:
            run_min = max(1, math.ceil(meta["wall_time_s"] / 60))
            run = f"{run_min} min"
            total = f"{c['reading_min'] + c['exercise_min'] + run_min} min"
            machines.add((meta.get("cpu_count"), meta.get("executed_at", "")[:10]))
        else:
            run, total = "not measured yet", f"{c['reading_min'] + c['exercise_min']} min + run"
        link = f"[{c['number']}. {c['title']}](chapters/{c['stem']}.ipynb)"
        work = f"{c['exercise_min']} min ({n})" if c["exercise_min"] else "none"
        rows.append(f"| {link} | {c['reading_min']} min | {work} | {run} | {total} |")
    cores = sorted({str(m[0]) for m in machines if m[0]})
    dates = sorted({m[1] for m in machines if m[1]})
    note = (
        "Executing: the wall time recorded by `book/_scripts/execute_notebooks.py` when it last "
        "ran the chapter in the default `smoke` profile for this build"
        + (f", on a machine with {' or '.join(cores)} CPU cores" if cores else "")
        + (f" ({dates[0]}" + (f" to {dates[-1]}" if len(dates) > 1 else "") + ")" if dates else "")
        + ", rounded up to whole minutes. Reading and exercise minutes are the estimates in each "
        "chapter's header block; exercises counts the value exercises and the coding exercises."
    )
    return "\n".join(rows) + "\n\n" + note + "\n"


def objectives_list(chapters: list[dict]) -> str:
    out = []
    for c in chapters:
        out += [
            f"**{c['number']}. [{c['title']}](chapters/{c['stem']}.ipynb).** "
            f"After it a learner can {c['objectives']}",
            "",
            f"*Prerequisites:* {c['prerequisites']}",
            "",
        ]
    return "\n".join(out)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    tmp.write_text(text)
    os.replace(tmp, path)


def main() -> int:
    try:
        chapters = [chapter_info(p) for p in sorted(SOURCE.glob("[0-9][0-9]_*.ipynb"))]
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    write(OUT / "chapter_times.md", times_table(chapters, default_profile_times()))
    write(OUT / "chapter_objectives.md", objectives_list(chapters))
    print(f"teaching tables for {len(chapters)} chapters in {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
