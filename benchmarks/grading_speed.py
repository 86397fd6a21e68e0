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

``--base`` is a checkout of the older code (``git worktree add --detach DIR COMMIT``), ``--new``
of the newer (default: this checkout). Both run with this interpreter, each with ``PYTHONPATH``
at its own root.
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
    1: "01_zonotopes",
    3: "03_mzattn_from_scratch",
    10: "10_real_data_digits",
    11: "11_data_driven_reachability",
}


def build_class(dest: Path, chapters: list[int]) -> tuple[Path, Path]:
    """SUBMISSIONS and a roster: per chapter two honest students, and for chapter 1 one with
    a wrong ``half_widths`` (the L2 norm) as well."""
    from test_grading_honest import honest_copy

    subs, roster, seed = dest / "submissions", [], 100
    for chapter in chapters:
        name = CHAPTER_FILES[chapter]
        nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
        students = {f"honest{chapter}a": None, f"honest{chapter}b": None}
        if chapter == 1:
            students[f"slip{chapter}"] = "return G.norm(dim=-2)"
        for student, slip in students.items():
            seed += 1
            copy = honest_copy(nb, seed)
            if slip:
                for cell in copy["cells"]:
                    src = "".join(cell["source"])
                    if 'check("ch1.half_widths"' in src:
                        cell["source"] = src.replace("return G.abs().sum(dim=-2)", slip)
            (subs / student).mkdir(parents=True)
            (subs / student / f"{name}.ipynb").write_text(json.dumps(copy))
            roster.append(f"{student},{seed}")
    (dest / "class.csv").write_text("\n".join(roster) + "\n")
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="/work/runs-gradebase", help="checkout of the older code")
    ap.add_argument("--new", default=str(ROOT), help="checkout of the newer code (this one)")
    ap.add_argument(
        "--rounds", type=int, default=1, help="base/new pairs, interleaved (0: --stages only)"
    )
    ap.add_argument("--chapters", default="1,3,10,11", help=f"of {sorted(CHAPTER_FILES)}")
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
    args.chapters = [int(c) for c in args.chapters.split(",")]
    bad = [c for c in args.chapters if c not in CHAPTER_FILES]
    if bad or args.rounds < 0 or (args.rounds == 0 and not args.stages):
        ap.error(
            f"--chapters must be among {sorted(CHAPTER_FILES)}, --rounds >= 1 (or 0 with --stages)"
        )
    base, new = Path(args.base).resolve(), Path(args.new).resolve()
    for where in (base, new):
        if not (where / "mzlite" / "grading" / "grader.py").is_file():
            ap.error(f"{where} is not a checkout of mzlite")
    cpu_model = next(
        (line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
         if line.startswith("model name")),
        platform.processor(),
    )  # fmt: skip
    print(f"machine: {cpu_model}, {os.cpu_count()} cores; load {os.getloadavg()}")
    staged = stages(base, new, args.isolation) if args.stages else None
    if not args.rounds:
        return 0
    runs = {"base": [], "new": []}
    with tempfile.TemporaryDirectory(prefix="mzlite-grading-bench-") as tmp:
        subs, roster = build_class(Path(tmp), args.chapters)
        n = sum(1 for _ in subs.rglob("*.ipynb"))
        print(f"class: {n} notebooks of chapters {args.chapters}, graded with --jobs 2")
        for r in range(args.rounds):
            for side, checkout in (("base", base), ("new", new)):
                res = grade_once(checkout, subs, roster, Path(tmp) / f"{side}-{r}", args)
                runs[side].append(res)
                print(
                    f"round {r} {side:4s}: wall {res['wall_s']:7.1f} s, CPU "
                    f"{res['cpu_s'] if res['cpu_s'] is not None else '?'} s "
                    f"(load {res['load_before']} before)",
                    flush=True,
                )
    summary = {}
    for what in ("wall_s", "cpu_s"):
        b = [x[what] for x in runs["base"] if x[what] is not None]
        w = [x[what] for x in runs["new"] if x[what] is not None]
        if b and w:
            summary[what] = {
                "base": statistics.median(b),
                "new": statistics.median(w),
                "ratio": round(statistics.median(b) / statistics.median(w), 2),
            }
    same = all(x["marks"] == runs["base"][0]["marks"] for x in runs["base"] + runs["new"])
    for what, s in summary.items():
        print(f"{what}: base {s['base']} / new {s['new']} = {s['ratio']}x")
    print(f"same marks for every student on both sides: {same}")
    print("percent per student:", runs["new"][0]["percent"])
    if args.out:
        sys.path.insert(0, str(ROOT))
        from mzlite._io import atomic_write_json

        atomic_write_json(
            Path(args.out),
            {
                "machine": f"{cpu_model}, {os.cpu_count()} cores",
                "class": {"notebooks": n, "chapters": args.chapters},
                "base": str(base),
                "new": str(new),
                "runs": runs,
                "summary": summary,
                "same_marks": same,
                "one_notebook_stages": staged,
            },
        )
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
