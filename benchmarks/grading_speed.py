"""Grading a class: one checkout's grader against another's, side by side, on the same class.

    python benchmarks/grading_speed.py [--base /work/runs-gradebase] [--rounds 1]
        [--chapters 1,3,10,11] [--isolation auto] [--out benchmarks/grading_speed.json]

Builds a class of honest and wrong submissions (the student copies with their answer cells
filled in: the honest ones as the instructor's solution answers them, tests/test_grading_honest.py;
one chapter-1 student with the L2 slip in ``half_widths``) and grades it with ``python -m
mzlite.grading.grader`` from each checkout in turn (base, new, base, new, ... interleaved, so a
change of the machine's load falls on both), with the same roster, secret, trials and limits.
Per run it prints the wall time and the CPU time of every process the grading started (the run
is placed in a cgroup of its own where the machine allows it: a jailed process is counted too),
and at the end the ratios base / new and whether both gave every student the same marks.

``--stages`` first grades one honest chapter-1 notebook per checkout, one notebook at a time, and
prints the wall and CPU seconds of running it (sandbox, jail, kernel, cells) and of judging it
(the judge and the sandboxed functions).

``--base`` is a checkout of the older code (``git worktree add --detach DIR COMMIT``; given
twice or more, each is graded and compared with ``--new``), ``--new`` of the newer (default:
this checkout). All run with this interpreter, each with ``PYTHONPATH`` at its own root.
``--issue-class`` grades issue 52's class size instead (19 students, 30 notebooks).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the honest copy and the student copy builders
SECRET = "a-benchmark-secret-of-32-chars!!"
CGROUP_ROOT = Path("/sys/fs/cgroup/unified")
CHAPTER_FILES = {
    int(nb.name[:2]): nb.stem for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
}
# Issue 52's held-out class: 19 students handing in 30 notebooks between them.
ISSUE_CLASS = {"students": 19, "notebooks": 30}


def _hand_in(subs: Path, student: str, chapter: int, seed: int, slip: str | None) -> None:
    """``student``'s honest copy of ``chapter`` for ``seed``; with ``slip``, chapter 1's
    ``half_widths`` answered by it instead."""
    from test_grading_honest import honest_copy

    name = CHAPTER_FILES[chapter]
    copy = honest_copy(json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text()), seed)
    if slip:
        for cell in copy["cells"]:
            src = "".join(cell["source"])
            if 'check("ch1.half_widths"' in src:
                cell["source"] = src.replace("return G.abs().sum(dim=-2)", slip)
    (subs / student).mkdir(parents=True, exist_ok=True)
    (subs / student / f"{name}.ipynb").write_text(json.dumps(copy))


SLIP = "return G.norm(dim=-2)"  # the L2 norm for the L1 one


def build_class(dest: Path, chapters: list[int]) -> tuple[Path, Path]:
    """SUBMISSIONS and a roster: per chapter two honest students, and for chapter 1 one with
    a wrong ``half_widths`` (the L2 norm) as well."""
    subs, roster, seed = dest / "submissions", [], 100
    for chapter in chapters:
        students = {f"honest{chapter}a": None, f"honest{chapter}b": None}
        if chapter == 1:
            students[f"slip{chapter}"] = SLIP
        for student, slip in students.items():
            seed += 1
            _hand_in(subs, student, chapter, seed, slip)
            roster.append(f"{student},{seed}")
    (dest / "class.csv").write_text("\n".join(roster) + "\n")
    return subs, dest / "class.csv"


def build_issue_class(dest: Path, chapters: list[int]) -> tuple[Path, Path]:
    """Issue 52's class size: notebook k (of 30) is chapter ``chapters[k % len]`` handed in by
    student ``k % 19`` (no student hands a chapter in twice while 30 < 19 * len(chapters)); the
    first chapter-1 notebook carries the L2 slip."""
    students, notebooks = ISSUE_CLASS["students"], ISSUE_CLASS["notebooks"]
    if notebooks > students * len(chapters):
        raise ValueError(f"chapters: {notebooks} notebooks need at least "
                         f"{-(-notebooks // students)} chapters, got {chapters}")  # fmt: skip
    subs, slipped = dest / "submissions", False
    seeds = {f"student{i:02d}": 200 + i for i in range(students)}
    for k in range(notebooks):
        chapter, student = chapters[k % len(chapters)], f"student{k % students:02d}"
        slip = SLIP if chapter == 1 and not slipped else None
        slipped = slipped or slip is not None
        _hand_in(subs, student, chapter, seeds[student], slip)
    roster = "".join(f"{s},{seed}\n" for s, seed in seeds.items())
    (dest / "class.csv").write_text(roster)
    return subs, dest / "class.csv"


def _cpu_seconds(group: Path) -> float | None:
    try:
        for line in (group / "cpu.stat").read_text().splitlines():
            if line.startswith("usage_usec"):
                return int(line.split()[1]) / 1e6
    except OSError:
        pass
    return None


def grade_once(checkout: Path, subs: Path, roster: Path, out: Path, args) -> dict:
    """One grading of the class by ``checkout``'s grader: wall and CPU seconds, the marks."""
    cmd = [sys.executable, "-m", "mzlite.grading.grader", str(subs), "--roster", str(roster)]
    cmd += ["--chapters", ",".join(map(str, args.chapters)), "--out", str(out)]
    cmd += ["--secret", SECRET, "--jobs", "2", "--trials", "3", "--cell-timeout", "300"]
    cmd += ["--timeout", "1200", "--isolation", args.isolation]
    group = CGROUP_ROOT / f"mzlite-grading-bench-{os.getpid()}-{out.name}"
    try:
        group.mkdir()
        cmd = ["sh", "-c", f'echo $$ > {group}/cgroup.procs && exec "$@"', "sh", *cmd]
    except OSError:
        group = None
    env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1"}
    env.pop("MZLITE_GRADING_SECRET", None)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    cpu = _cpu_seconds(group) if group is not None else None
    if group is not None:
        try:
            group.rmdir()
        except OSError:
            pass
    if done.returncode != 0:
        raise RuntimeError(f"{checkout}: the grader failed: {done.stderr[-2000:]}")
    rows = list(csv.DictReader((out / "gradebook.csv").open()))
    return {
        "wall_s": round(wall, 1),
        "cpu_s": None if cpu is None else round(cpu, 1),
        "load_before": round(load, 1),
        "marks": {r["student"]: r["total"] for r in rows},
        "percent": {r["student"]: r["percent"] for r in rows},
    }


class _Clock:
    """CPU seconds of this process and every process it starts (its own cgroup where the
    machine allows it, else this process and the children it waited for)."""

    def __init__(self, name: str):
        self.group = CGROUP_ROOT / name
        try:
            self.group.mkdir()
            (self.group / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:
            self.group = None

    def cpu(self) -> float:
        if self.group is not None:
            return _cpu_seconds(self.group)
        import resource

        own, kids = (
            resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        )
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def stages_child(subs: Path, roster: Path, out: Path, isolation: str) -> None:
    """In a process whose ``PYTHONPATH`` is one checkout: grade ``subs`` one notebook at a time
    and print, as JSON, the wall and CPU seconds spent running each notebook (jail, kernel,
    cells) and judging it (judge and functions)."""
    from mzlite.grading import grader

    clock = _Clock(os.environ.get("MZLITE_BENCH_CGROUP", f"mzlite-grading-stages-{os.getpid()}"))
    spent = {"run_wall": 0.0, "run_cpu": 0.0, "judge_wall": 0.0, "judge_cpu": 0.0}

    def timed(stage, function):
        def wrapper(*a, **k):
            wall, cpu = time.perf_counter(), clock.cpu()
            try:
                return function(*a, **k)
            finally:
                spent[f"{stage}_wall"] += time.perf_counter() - wall
                spent[f"{stage}_cpu"] += clock.cpu() - cpu

        return wrapper

    grader._run = timed("run", grader._run)
    grader._judge = timed("judge", grader._judge)
    wall, cpu = time.perf_counter(), clock.cpu()
    grader.grade(subs, out, roster=roster, chapters=[1], secret=SECRET, trials=3, jobs=1,
                 cell_timeout=300, timeout=1200, isolation=isolation, progress=False)  # fmt: skip
    spent.update(total_wall=time.perf_counter() - wall, total_cpu=clock.cpu() - cpu)
    print(json.dumps({k: round(v, 1) for k, v in spent.items()}))


def stages(base: Path, new: Path, isolation: str) -> dict:
    """Where the time of one honest chapter-1 notebook goes, per checkout (one at a time)."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="mzlite-grading-stages-") as tmp:
        subs, roster = build_class(Path(tmp), [1])
        for student in ("honest1b", "slip1"):  # one notebook: honest1a
            shutil.rmtree(subs / student)
        for side, checkout in (("base", base), ("new", new)):
            cmd = [sys.executable, __file__, "--stages-child", str(subs), str(roster)]
            cmd += [str(Path(tmp) / f"out-{side}"), isolation]
            group = f"mzlite-grading-stages-{os.getpid()}-{side}"
            env = {**os.environ, "PYTHONPATH": str(checkout), "OMP_NUM_THREADS": "1"}
            env["MZLITE_BENCH_CGROUP"] = group
            done = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True)
            try:
                (CGROUP_ROOT / group).rmdir()
            except OSError:
                pass
            if done.returncode != 0:
                raise RuntimeError(f"{checkout}: {done.stderr[-2000:]}")
            out[side] = json.loads(done.stdout.strip().splitlines()[-1])
            print(f"one notebook, {side:4s}: {out[side]}", flush=True)
    return out


def _sides(bases: list[Path], new: Path) -> dict[str, Path]:
    """{label: checkout}, the bases first and "new" last: "base" for one base, else "base
    <commit>" for each (its ``git rev-parse --short HEAD``)."""
    if len(bases) == 1:
        return {"base": bases[0], "new": new}
    out = {}
    for b in bases:
        commit = subprocess.run(["git", "-C", str(b), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()  # fmt: skip
        out[f"base {commit or b.name}"] = b
    return {**out, "new": new}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--base",
        action="append",
        help="checkout of the older code (repeatable; default: /work/runs-gradebase)",
    )
    ap.add_argument("--new", default=str(ROOT), help="checkout of the newer code (this one)")
    ap.add_argument(
        "--rounds", type=int, default=1, help="base/new pairs, interleaved (0: --stages only)"
    )
    ap.add_argument("--chapters", default="1,3,10,11", help=f"of {sorted(CHAPTER_FILES)}, or all")
    ap.add_argument(
        "--issue-class",
        action="store_true",
        help=f"issue 52's class size ({ISSUE_CLASS['students']} students, "
        f"{ISSUE_CLASS['notebooks']} notebooks over --chapters) instead of two students a chapter",
    )
    ap.add_argument("--isolation", default="auto", choices=("auto", "jail", "audit"))
    ap.add_argument("--out", default=None, help="JSON of the results (default: print only)")
    ap.add_argument(
        "--stages",
        action="store_true",
        help="first, per checkout, the wall and CPU time of running and of judging one notebook",
    )
    ap.add_argument("--stages-child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.stages_child:
        subs, roster, out, isolation = args.stages_child
        stages_child(Path(subs), Path(roster), Path(out), isolation)
        return 0
    if args.chapters == "all":
        args.chapters = ",".join(map(str, sorted(CHAPTER_FILES)))
    args.chapters = [int(c) for c in args.chapters.split(",")]
    bad = [c for c in args.chapters if c not in CHAPTER_FILES]
    if bad or args.rounds < 0 or (args.rounds == 0 and not args.stages):
        ap.error(
            f"--chapters must be among {sorted(CHAPTER_FILES)}, --rounds >= 1 (or 0 with --stages)"
        )
    bases = [Path(b).resolve() for b in args.base or ["/work/runs-gradebase"]]
    new = Path(args.new).resolve()
    sides = _sides(bases, new)
    for where in sides.values():
        if not (where / "mzlite" / "grading" / "grader.py").is_file():
            ap.error(f"{where} is not a checkout of mzlite")
    cpu_model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    print(f"machine: {cpu_model}, {os.cpu_count()} cores; load {os.getloadavg()}")
    staged = stages(bases[0], new, args.isolation) if args.stages else None
    if not args.rounds:
        return 0
    runs = {side: [] for side in sides}
    with tempfile.TemporaryDirectory(prefix="mzlite-grading-bench-") as tmp:
        builder = build_issue_class if args.issue_class else build_class
        subs, roster = builder(Path(tmp), args.chapters)
        n, n_students = sum(1 for _ in subs.rglob("*.ipynb")), len(roster.read_text().split())
        print(f"class: {n_students} students, {n} notebooks of chapters {args.chapters}, "
              "graded with --jobs 2")  # fmt: skip
        for r in range(args.rounds):
            for side, checkout in sides.items():
                out = Path(tmp) / f"{side.replace(' ', '-')}-{r}"
                res = grade_once(checkout, subs, roster, out, args)
                runs[side].append(res)
                print(
                    f"round {r} {side:14s}: wall {res['wall_s']:7.1f} s, CPU "
                    f"{res['cpu_s'] if res['cpu_s'] is not None else '?'} s "
                    f"(load {res['load_before']} before)",
                    flush=True,
                )
    summary = {}
    for side in (s for s in sides if s != "new"):
        for what in ("wall_s", "cpu_s"):
            b = [x[what] for x in runs[side] if x[what] is not None]
            w = [x[what] for x in runs["new"] if x[what] is not None]
            if b and w:
                key = what if len(sides) == 2 else f"{what} {side}"
                summary[key] = {
                    "base": statistics.median(b),
                    "new": statistics.median(w),
                    "ratio": round(statistics.median(b) / statistics.median(w), 2),
                }
    marks = {side: [x["marks"] for x in runs[side]] for side in sides}
    same = all(m == marks["new"][0] for ms in marks.values() for m in ms)
    for what, s in summary.items():
        print(f"{what}: base {s['base']} / new {s['new']} = {s['ratio']}x")
    print(f"same marks for every student on every side: {same}")
    for side, ms in marks.items():
        differ = sorted(k for m in ms for k in m if m[k] != marks["new"][0].get(k))
        if differ:
            print(f"  {side} marks otherwise: {', '.join(dict.fromkeys(differ))}")
    print("percent per student:", runs["new"][0]["percent"])
    if args.out:
        sys.path.insert(0, str(ROOT))
        from mzlite._io import atomic_write_json

        atomic_write_json(
            Path(args.out),
            {
                "machine": f"{cpu_model}, {os.cpu_count()} cores",
                "class": {"notebooks": n, "students": n_students, "chapters": args.chapters},
                "checkouts": {side: str(where) for side, where in sides.items()},
                "runs": runs,
                "summary": summary,
                "same_marks": same,
                "one_notebook_stages": staged,
            },
        )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
