"""Grade submitted student notebooks without trusting them.

    python -m mzlite.grading.grader SUBMISSIONS/ --roster class.csv --chapters 1,3
        [--assignment FILE] [--out GRADES/] [--points points.json] [--jobs 2] [--timeout 900]
        [--cell-timeout 300] [--trials 5] [--secret TEXT] [--isolation auto|jail|audit]
        [--memory GIB] [--processes N] [--file-size MIB]
    python -m mzlite grade SUBMISSIONS/ --chapters 1   # the same with the defaults (no roster)

The assignment is the instructor's (:func:`assigned_chapters`): ``--chapters``, an
``--assignment`` file, or a ``# chapters: 1,3`` line in the roster; never the chapters found
among the submissions. A notebook of a chapter not assigned is reported ("not assigned"),
never run, and counts in no total and no maximum.

Every notebook (``STUDENT/NN_chapter.ipynb``, or ``STUDENT.ipynb`` directly in SUBMISSIONS) is
read into memory before any student code runs, and the folder is hidden from every sandbox: no
run can read or rewrite a classmate's submission. Then, for each:

1. **Read, not run** (:mod:`mzlite.grading.submission`): its check calls against the chapter's
   answer cells, tampering (a redefined ``check``, a patched library function, ``exec``, reads of
   notebooks or installed files), and its seed against the roster's. What is found is reported.
2. **Run in a sandbox** (:mod:`mzlite.grading.sandbox`): a folder, home and environment of its
   own, the students' copy of mzlite (the library and the exercises' inputs; no checker,
   reference or verdict: :mod:`mzlite.grading.student_view`) and ``data/``, the roster's seed
   and ``grading = True`` written into its parameters cell (chapter 10 then trains at a size
   that only shows its cells run; no answer changes:
   :data:`mzlite.grading.submission.GRADING_PARAMETER`), and the cells the chapter tags as
   display only left out of the run where the submission has them as written
   (:data:`mzlite.grading.submission.GRADING_SKIP_TAG`: the instructor's copy decides, an
   edited one runs; the executed copy keeps their source, without outputs); in the jail, an
   empty root with only the interpreter and its environment (read-only) besides its folder, no
   capability, IPC, UTS, PID and network of its own; limits on memory, processes, file size and
   CPU time; every cell has a time limit and the whole run another. Its ``check`` calls only
   *record* the answers (no verdict, so trying answers in a loop learns nothing; reaching for a
   checker is a finding); whatever it writes, its own check log included, is ignored, and its
   folder is deleted before judging.
3. **Judged in a process of its own** (:mod:`mzlite.grading.judge`: a child forked for this
   submission from the run's one judge, which imported mzlite once), from a read-only copy of
   mzlite made when grading started, with a private home and caches and no compiled kernels:
   each recorded value for the roster's seed, each coding exercise's function (run in a
   sandboxed worker in a fresh box, each exercise in a process of its own, never beside a
   checker) on ``trials`` hidden inputs derived from a secret (``--secret``, or drawn for the
   run and written to ``OUT/grading-secret.txt``); partial credit is the fraction of hidden
   trials passed.

Every file the submission could have changed (the installed mzlite, the notebooks, the snapshot)
is hashed before and after; a change is reported. A notebook whose sandbox or judge dies (or
whose snapshot changed) is a row "could not be graded" with the reason; grading goes on, and the
reports are written whatever happens, with every student of the roster.

Written to ``OUT`` (default ``SUBMISSIONS-grades/``): ``gradebook.csv`` (one row per student of
the roster, absent ones included: points per exercise, total, percent, flags; what a
learning-management system imports), ``grades.csv`` (one row per student and exercise, with the
verdict's message), ``statistics.csv`` (per exercise: mean points, verdicts, the most common
mistake), ``summary.md`` (all of it for a reader, with every finding: a limit a run reached is
one) and the executed notebooks under ``executed/``.
"""

from __future__ import annotations

import argparse
import csv
import functools
import io
import itertools
import json
import os
import queue
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from mzlite.exercises.checker import CAPTURE_ENV, get, keys
from mzlite.repro import exercises as _on_the_scorecard  # noqa: F401  registers ch9.not_run

from .._io import atomic_write_text
from . import sandbox, student_view, submission
from .gradebook import write_reports
from .judge import hidden_seed
from .roster import read_roster

ROOT = Path(__file__).resolve().parents[2]
STATUSES = ("correct", "partial", "wrong", "unanswered", "missing")
MAX_NOTEBOOK = 50 * 2**20  # bytes: a larger file is not a notebook of this book
MAX_CAPTURE = 64 * 2**20
SECRET_ENV = "MZLITE_GRADING_SECRET"
MIN_SECRET = 16  # characters: long enough that nobody guesses it or tries every value
SECRET_FILE = "grading-secret.txt"


@dataclass
class NotebookGrade:
    """One graded submission."""

    student: str
    notebook: str
    chapter: str | None  # "ch3", or None when the name does not say
    seed: int | None  # the seed its answers were judged for (the roster's when there is one)
    claimed_seed: int | None  # the seed the notebook's parameters cell holds
    outcome: str  # "ran" | "cell errors" | "timed out" | "unreadable"
    detail: str
    seconds: float
    results: dict[str, dict] = field(default_factory=dict)  # key -> status, message, score
    expected: list[str] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)


# kept for callers of the earlier grader
Run = NotebookGrade


def find_submissions(root: Path) -> list[tuple[str, Path]]:
    """``(student, notebook)`` pairs under ``root`` (see the module docstring)."""
    root = Path(root)
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
    return submission.claimed_seed(nb)


def _read_limited(path: Path, limit: int) -> bytes | None:
    """A regular file's bytes (a link not followed, a FIFO not waited on), or None when absent,
    not a plain file or larger than ``limit``: how files a submission could have planted are
    read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = f.read(limit + 1)
    return None if len(data) > limit else data


def _errors(executed: bytes | None) -> str:
    """Every error a run's cells recorded, one ``ename: evalue`` a line."""
    try:
        nb = json.loads(executed) if executed else {}
    except ValueError:
        return ""
    cells = nb.get("cells", []) if isinstance(nb, dict) else []
    return "\n".join(
        f"{out.get('ename')}: {out.get('evalue')}"
        for cell in cells
        if isinstance(cell, dict)
        for out in cell.get("outputs", [])
        if isinstance(out, dict) and out.get("output_type") == "error"
    )


def _first_error(nb: dict) -> str:
    for i, cell in enumerate(nb.get("cells", [])):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                if out.get("ename") in ("KeyboardInterrupt", "CellTimeout"):
                    return f"cell {i} was interrupted at the cell's time limit"
                return f"cell {i} raised {out.get('ename')}: {out.get('evalue')}"[:300]
    return ""


def _worker_boot(snapshot: Path) -> str:
    """The sandboxed worker's program, read from the snapshot (never from the sandbox)."""
    parts = [sandbox.SITECUSTOMIZE]
    for part in (("exercises", "wire.py"), ("grading", "worker.py")):
        src = (snapshot / "mzlite" / part[0] / part[1]).read_text()
        parts.append(re.sub(r"(?m)^from __future__ import annotations$", "", src))
    return "\n".join(parts)


@dataclass
class _Context:
    out: Path
    base: Path
    snapshot: Path
    snapshot_digest: dict
    watched: list[Path]
    watched_digest: dict
    roster: dict[str, int] | None
    timeout: float
    cell_timeout: int
    trials: int
    secret: str
    isolation: str
    call_timeout: float
    submissions: Path | None = None
    limits: sandbox.Limits = field(default_factory=sandbox.Limits)
    value_reruns: int = 0
    templates: dict = field(default_factory=dict)
    view: Path | None = None  # the students' copy of mzlite and data/ (student_view)
    home: Path | None = None  # the home every box starts from (sandbox.make_home)
    judges: _Judges | None = None  # the run's judge, a child per submission
    exercises: tuple[str, ...] = ()  # the assignment's exercise keys, loaded by the judge at start

    def hidden(self) -> list[Path]:
        """What no sandbox may see: the reports, the snapshot, the judges' and the other boxes'
        folders, the submissions (read into memory before any of them ran)."""
        out = [self.out, self.snapshot] + [self.base / d for d in ("judges", "functions")]
        return out + ([self.submissions] if self.submissions is not None else [])

    @functools.cached_property
    def executor(self) -> str:
        """The text of the program that executes a notebook in its box, from the snapshot."""
        return (self.snapshot / "mzlite" / "grading" / "executor.py").read_text()

    def template(self, chapter: str):
        if chapter not in self.templates:
            self.templates[chapter] = submission.chapter_template(chapter)
        return self.templates[chapter]


NOT_GRADED = "could not be graded"


def _not_graded(ctx: _Context | None, student: str, path: Path, why: str) -> NotebookGrade:
    """The row of a notebook whose grading failed (a judge or sandbox that died): no marks for
    it, the reason where the instructor reads it, and every other notebook still graded."""
    chapter = chapter_of(path)
    seed = ctx.roster.get(student) if ctx is not None and ctx.roster is not None else None
    return NotebookGrade(
        student,
        path.name,
        chapter,
        seed,
        None,
        NOT_GRADED,
        why[:500],
        0.0,
        {},
        keys(chapter + ".") if chapter else [],
    )


@dataclass
class _Run:
    """One sandboxed run of a notebook: how it ended, its executed copy, the answers its check
    calls recorded (key -> entries), what it printed and raised (:func:`sandbox.limit_hits`)
    and the checkers, references or verdicts it reached for (:mod:`.student_view`)."""

    outcome: str
    detail: str
    seconds: float
    executed: bytes | None
    answers: dict[str, list]
    signs: str
    reached: list[str] = field(default_factory=list)  # the grader's names it reached for


def _run(ctx: _Context, name: str, nb: dict, notebook: str, seed: int, expected) -> _Run:
    """Run ``nb`` for ``seed`` in a fresh sandbox ``name`` (deleted afterwards)."""
    box = sandbox.make_sandbox(ctx.base / "students", name, ctx.view, ctx.home)
    src, dst = box / "work" / notebook, box / "work" / "executed.ipynb"
    seeded = submission.with_seed(nb, seed, grading=True)
    src.write_text(json.dumps(seeded))
    chapter = chapter_of(Path(notebook))
    # display-only cells the submission left as the instructor wrote them: not run while grading
    skip = submission.cells_to_skip(seeded, ctx.template(chapter) if chapter else None)
    capture = box / "capture.jsonl"
    env = sandbox.environment(box, ctx.hidden(), {CAPTURE_ENV: str(capture)})
    # the executor's text from the snapshot, run with -I: it imports no mzlite (the box's has no
    # grader), the kernel it starts imports the box's
    cmd = [sys.executable, "-I", "-c", ctx.executor]
    cmd += [str(src), str(dst), str(box / "work"), str(ctx.cell_timeout)]
    cmd += [",".join(map(str, skip))]
    cmd = sandbox.isolated_command(cmd, box, ctx.hidden(), ctx.isolation, ctx.limits)
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=box / "work",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=ctx.timeout)
        outcome, detail = "ran", ""
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        outcome, detail = "timed out", f"did not finish in {ctx.timeout:g} s"
    try:  # whatever the run left behind in its process group (a namespace kills the rest)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    seconds = time.perf_counter() - start

    executed = _read_limited(dst, MAX_NOTEBOOK)
    if outcome == "ran":
        try:
            error = _first_error(json.loads(executed)) if executed else ""
        except ValueError:
            error = ""
        if proc.returncode != 0:
            tail = output.decode(errors="replace").strip().splitlines()[-1:] or ["?"]
            outcome, detail = "cell errors", f"the run failed: {tail[0]}"[:300]
        elif error:
            outcome, detail = "cell errors", error

    answers: dict[str, list] = {k: [] for k in expected}
    reached: list[str] = []
    for line in (_read_limited(capture, MAX_CAPTURE) or b"").decode(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("reached"), str):
            if entry["reached"] not in reached:
                reached.append(entry["reached"][:200])
        elif isinstance(entry, dict) and entry.get("key") in answers:
            answers[entry["key"]].append(
                {k: entry[k] for k in ("answer", "unencodable", "function") if k in entry}
            )

    signs = output.decode(errors="replace")[-20000:] + "\n" + _errors(executed)
    if proc.returncode is not None and proc.returncode < 0:
        signs += "\n" + _ended(proc.returncode)
    shutil.rmtree(box, ignore_errors=True)  # nothing of it is judged: the judge gets fresh boxes
    return _Run(outcome, detail, seconds, executed, answers, signs, reached)


def grade_notebook(
    ctx: _Context, index: int, student: str, path: Path, raw: bytes | None = None
) -> NotebookGrade:
    """Grade one submission; ``raw`` is its content, read before any student code ran (read
    from ``path`` when not given)."""
    chapter = chapter_of(path)
    expected = keys(chapter + ".") if chapter else []
    if raw is None:
        raw = _read_limited(path, MAX_NOTEBOOK)
    try:
        if raw is None:
            raise ValueError("not a readable notebook file (or larger than 50 MB)")
        nb = json.loads(raw)
        if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
            raise ValueError("no cells")
    except ValueError as e:
        return NotebookGrade(
            student, path.name, chapter, None, None, "unreadable", str(e)[:300], 0.0, {}, expected
        )
    claimed = submission.claimed_seed(nb)
    seed = ctx.roster.get(student) if ctx.roster is not None else None
    roster_seed = seed
    if seed is None:
        seed = claimed if claimed is not None else 0
    tmpl = ctx.template(chapter) if chapter else None
    inspection = submission.inspect(nb, expected, tmpl, roster_seed)
    findings = [str(f) for f in inspection.findings]
    if ctx.roster is not None and student not in ctx.roster:
        findings.append(f"{student} is not on the roster: judged for the notebook's seed {seed}")

    run = _run(ctx, f"{index:04d}", nb, path.name, seed, expected)
    outcome, detail, seconds, answers = run.outcome, run.detail, run.seconds, run.answers
    if run.executed is not None:
        target = ctx.out / "executed" / student / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(run.executed)
    findings += [
        f"its run reached the sandbox's {h} limit"
        for h in sandbox.limit_hits(run.signs, ctx.limits)
    ]
    if run.reached:
        findings.append(
            "reached for the grader's checkers while graded (they are not in its sandbox): "
            + ", ".join(f"`{name}`" for name in run.reached[:5])
        )

    changed = sandbox.changed_files(ctx.watched_digest, sandbox.tree_digest(*ctx.watched))
    if changed:
        findings.append(
            "files outside its sandbox changed during its run (or one beside it): "
            + ", ".join(changed[:5])
        )
        ctx.watched_digest = sandbox.tree_digest(*ctx.watched)

    results = _judge(ctx, f"{index:04d}", seed, expected, answers, inspection)
    # statements that fail outside the notebook (imports of mzlite, names computed there) are
    # expected; a function that needed one fails its trials, which say why
    results.pop("__worker_errors__", None)
    for key, res in results.items():
        for hit in sandbox.limit_hits(res.get("message", ""), ctx.limits):
            findings.append(f"{key}: its function reached the sandbox's {hit} limit")
    for key, res in results.items():  # check calls of the graded run (not those made at home)
        res["attempts"] = len(answers.get(key, []))
    if ctx.value_reruns:
        seconds += _rerun_values(ctx, index, nb, path.name, seed, expected, inspection, results)
    return NotebookGrade(
        student,
        path.name,
        chapter,
        seed,
        claimed,
        outcome,
        detail,
        seconds,
        results,
        expected,
        findings,
    )


def _rerun_values(ctx, index, nb, notebook, seed, expected, inspection, results) -> float:
    """Run the notebook again for ``ctx.value_reruns`` hidden seeds and judge every per-seed
    value exercise it got right for its own seed there too: an answer typed in (checked at home
    with the hints) is right for one seed only, one the notebook computes is right for every
    seed. Its score becomes the fraction of runs it was right in. Returns the seconds spent."""
    keys_ = [
        k
        for k in expected
        if get(k).kind == "value"
        and get(k).per_seed
        and results.get(k, {}).get("status") == "correct"
    ]
    if not keys_:
        return 0.0
    spent, wrong = 0.0, {k: [] for k in keys_}
    for r in range(ctx.value_reruns):
        other = hidden_seed(ctx.secret, seed, "value-rerun", r)
        run = _run(ctx, f"{index:04d}-r{r}", nb, notebook, other, expected)
        spent += run.seconds
        verdicts = _judge(ctx, f"{index:04d}-r{r}", other, keys_, run.answers, inspection)
        for k in keys_:
            if verdicts.get(k, {}).get("status") != "correct":
                wrong[k].append(verdicts.get(k, {}).get("message", "not reached"))
    runs = 1 + ctx.value_reruns
    for k, messages in wrong.items():
        if messages:
            results[k] = {
                "status": "partial",
                "score": (runs - len(messages)) / runs,
                "message": f"right for the notebook's seed, but the same notebook run for "
                f"{len(messages)} of {ctx.value_reruns} other seed(s) gave a wrong answer "
                f"({messages[0].split(' Hint:')[0]}): an answer must be computed from the "
                "seed's inputs, not typed in",
                "attempts": results[k].get("attempts", ""),
                "reruns": ctx.value_reruns,
            }
        else:
            results[k]["reruns"] = ctx.value_reruns
    return spent


def judge_command(ctx: _Context) -> list[str]:
    """The judge's command line: a fresh interpreter (``-I``: no environment, no user site, no
    script folder on its path) that imports mzlite from the snapshot only and judges each
    request in a child forked for it (:func:`mzlite.grading.judge.serve`), after loading the
    assignment's exercises once."""
    judge = ctx.snapshot / "mzlite" / "grading" / "judge.py"
    return [sys.executable, "-I", str(judge), str(ctx.snapshot), "--serve", *ctx.exercises]


def judge_environment(jbox: Path) -> dict[str, str]:
    """A judge's environment: its home and caches in its own box, no compiled kernels."""
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG")}
    env.update(
        {
            "HOME": str(jbox / "home"),
            "TMPDIR": str(jbox / "tmp"),
            "XDG_CACHE_HOME": str(jbox / "home" / ".cache"),
            "TORCH_EXTENSIONS_DIR": str(jbox / "home" / ".cache" / "torch_extensions"),
            "MPLCONFIGDIR": str(jbox / "home" / ".config" / "matplotlib"),
            "MZLITE_FUSED": "0",  # the judge never loads a compiled kernel, from any cache
            "OMP_NUM_THREADS": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return env


class _Judges:
    """The grading run's judge (:func:`judge_command`), started at its first request and again
    after it died; :meth:`judge` sends it one submission's request and waits for the child that
    judges it. Thread-safe: the ``--jobs`` threads judge at once, each in a child of its own."""

    def __init__(self, ctx: _Context):
        self.ctx = ctx
        self.lock = threading.Lock()
        self.proc: subprocess.Popen | None = None
        self.waiting: dict[int, queue.Queue] = {}
        self.ids = itertools.count()

    def _start(self) -> None:
        box = sandbox.make_box(self.ctx.base / "judges", "server")
        with (box / "server.log").open("wb") as log:
            self.proc = subprocess.Popen(
                judge_command(self.ctx),
                env=judge_environment(box),
                cwd=box / "work",
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        ready = self.proc.stdout.readline()
        if not ready.startswith(b'{"ready"'):
            self.proc.kill()
            self.proc.wait()
            err = (box / "server.log").read_text(errors="replace")[-500:].strip()
            raise RuntimeError(f"the judge {_ended(self.proc.returncode)}: {err}")
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            reply = json.loads(line)
            with self.lock:
                waiting = self.waiting.pop(reply["id"], None)
            if waiting is not None:
                waiting.put(reply["returncode"])
        with self.lock:  # it died: whoever waits hears so, and the next request starts another
            left, self.waiting = self.waiting, {}
            if self.proc is proc:
                self.proc = None
        for waiting in left.values():
            waiting.put(None)

    def _send(self, msg: dict) -> None:
        self.proc.stdin.write((json.dumps(msg) + "\n").encode())
        self.proc.stdin.flush()

    def judge(self, job: dict, timeout: float) -> int | None:
        """Judge ``job`` (:func:`mzlite.grading.judge.serve`): its child's return code (negative:
        the signal; None: the judge itself died). Killed after ``timeout`` seconds."""
        done: queue.Queue = queue.Queue()
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            job_id = next(self.ids)
            self.waiting[job_id] = done
            self._send({"id": job_id, **job})
        try:
            return done.get(timeout=timeout)
        except queue.Empty:
            with self.lock:
                if self.proc is not None and job_id in self.waiting:
                    self._send({"kill": job_id})
            done.get(timeout=60)
            raise RuntimeError(f"the judge did not finish in {timeout:g} s") from None

    def close(self) -> None:
        with self.lock:
            proc, self.proc = self.proc, None
        if proc is not None:
            proc.stdin.close()  # its children are killed and it exits
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _judge(ctx, name, seed, expected, answers, inspection) -> dict:
    if not expected:
        return {}
    if sandbox.tree_digest(ctx.snapshot, bytecode=True) != ctx.snapshot_digest:
        raise RuntimeError(
            f"the grader's snapshot {ctx.snapshot} changed during grading: a verdict from it "
            "would not be trustworthy"
        )
    request = {
        "roster_seed": seed,
        "secret": ctx.secret,
        "trials": ctx.trials,
        "call_timeout": ctx.call_timeout,
        "definitions": inspection.definitions,
        "exercises": {
            k: (
                {"function": inspection.functions.get(k)}
                if get(k).kind == "coding"
                else {"answers": answers.get(k, [])}
            )
            for k in expected
        },
    }
    if any(get(k).kind == "coding" for k in expected):
        # the functions run in a fresh, empty box of their own, never in the folder the
        # notebook ran in (what the run left there, a copy of mzlite say, is not there); each
        # exercise in a child of the worker, in the box emptied again (mzlite.grading.worker)
        hidden = ctx.hidden() + [ctx.base / "students"]
        hidden += [Path(r) / "mzlite" for r in sandbox.installed_roots()]
        boot = [sys.executable, "-I", "-c", _worker_boot(ctx.snapshot)]
        fbox = sandbox.make_box(ctx.base / "functions", name, ctx.home)
        env = sandbox.environment(fbox, hidden)
        env.pop("PYTHONPATH")
        request["worker"] = {
            "cmd": sandbox.isolated_command(boot, fbox, hidden, ctx.isolation, ctx.limits),
            "env": env,
            "cwd": str(fbox / "work"),
            "jailed": ctx.isolation == "jail",
            "box": str(fbox),
        }
    # the judge's own folder: its home and caches, the request (holding the secret) and the
    # result, where no sandbox can see or write (``hidden``)
    jbox = sandbox.make_box(ctx.base / "judges", name)
    req, res, log = jbox / "request.json", jbox / "result.json", jbox / "judge.log"
    req.write_text(json.dumps(request))
    job = {"request": str(req), "result": str(res), "log": str(log), "cwd": str(jbox / "work")}
    job["env"] = judge_environment(jbox)
    limit = 300 + ctx.call_timeout * (ctx.trials * 3 + 2) * max(1, len(expected))
    try:
        returncode = ctx.judges.judge(job, limit)
    finally:
        req.unlink(missing_ok=True)
    if returncode != 0:
        err = log.read_text(errors="replace")[-500:].strip() if log.exists() else ""
        raise RuntimeError(f"the judge {_ended(returncode)}: {err}")
    return json.loads(res.read_text())


def resolve_secret(secret: str | None) -> tuple[str, bool]:
    """The secret the hidden trials derive from, and whether it was generated for this run.

    ``None`` takes ``$MZLITE_GRADING_SECRET`` and, where that is unset, a fresh random secret
    (which :func:`grade` records in the instructor's report folder, never in a student's box).
    An empty or short secret is refused: a shell's unset variable gives ``""``, and any secret a
    student can guess makes the hidden inputs public, so a lookup table would pass."""
    if secret is None:
        secret = os.environ.get(SECRET_ENV)
        if secret is None:
            return secrets.token_hex(16), True
        where = f"${SECRET_ENV}"
    else:
        where = "secret"
    if not isinstance(secret, str) or len(secret.strip()) < MIN_SECRET:
        shown = "empty" if not str(secret).strip() else f"{len(secret.strip())} characters long"
        raise ValueError(
            f"{where} is {shown}: give a secret of at least {MIN_SECRET} characters (an unset "
            "shell variable gives an empty one), or leave --secret out to have one generated "
            "for this run and recorded in the report folder"
        )
    return secret, False


def _ended(returncode: int | None) -> str:
    if returncode is None:
        return "died"
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


CHAPTERS_LINE = re.compile(r"(?im)^\s*#\s*chapters\s*:\s*(.*?)\s*$")
NOT_ASSIGNED = "not assigned"


def _chapter_list(values, where: str) -> list[str]:
    """``["ch1", "ch3"]`` from ``[1, "ch3", " 3"]``; ValueError naming ``where`` for anything
    that is not a chapter with exercises."""
    values = [v for v in values if str(v).strip()]
    try:
        chapters = [f"ch{int(str(c).strip().removeprefix('ch'))}" for c in values]
    except ValueError:
        raise ValueError(
            f"{where}: chapters must be numbers like 1 or ch3, got {values!r}"
        ) from None
    prefixes = {k.split(".")[0] for k in keys()}
    valid = sorted((c for c in prefixes if re.fullmatch(r"ch\d+", c)), key=lambda c: int(c[2:]))
    bad = [c for c in chapters if c not in valid]
    if bad:
        raise ValueError(f"{where}: chapters {bad} have no exercises; valid: {', '.join(valid)}")
    if not chapters:
        raise ValueError(f"{where}: no chapter given; valid: {', '.join(valid)}")
    return list(dict.fromkeys(chapters))


def read_assignment(path: Path) -> list[str]:
    """The chapters of an assignment file: chapter numbers separated by commas, spaces or lines
    (``#`` starts a comment), or JSON (a list, or ``{"chapters": [...]}``)."""
    path = Path(path)
    text = path.read_text()
    if path.suffix == ".json":
        data = json.loads(text)
        values = data.get("chapters") if isinstance(data, dict) else data
        if not isinstance(values, list):
            raise ValueError(f'{path}: expected a JSON list of chapters or {{"chapters": [...]}}')
    else:
        values = re.split(r"[\s,]+", re.sub(r"#.*", "", text))
    return _chapter_list(values, str(path))


def assigned_chapters(chapters=None, assignment=None, roster=None) -> list[str]:
    """The chapters being graded, the instructor's word only: ``chapters`` (``--chapters``),
    else the ``assignment`` file, else a ``# chapters: 1, 3`` line of the ``roster``. Never
    the chapters found among the submissions: one student handing in an extra chapter would
    add its points to every student's maximum. ValueError when none of them says."""
    if chapters is not None:
        return _chapter_list(list(chapters), "chapters")
    if assignment is not None:
        return read_assignment(Path(assignment))
    if roster is not None:
        found = CHAPTERS_LINE.search(Path(roster).read_text())
        if found:
            return _chapter_list(re.split(r"[\s,]+", found.group(1)), f"{roster} (# chapters:)")
    raise ValueError(
        "the assignment is the instructor's: give --chapters 1,3, --assignment FILE or a "
        "'# chapters: 1,3' line in the roster (the chapters handed in are not the assignment)"
    )


def _not_assigned(ctx: _Context, student: str, path: Path, chapters: list[str]) -> NotebookGrade:
    """The row of a notebook of no assigned chapter: reported, not run, counted nowhere."""
    chapter = chapter_of(path)
    seed = ctx.roster.get(student) if ctx.roster is not None else None
    what = f"chapter {chapter[2:]}" if chapter else "a notebook whose name gives no chapter"
    why = f"{what} is not in the assignment ({', '.join(chapters)}): not run, no points"
    return NotebookGrade(student, path.name, chapter, seed, None, NOT_ASSIGNED, why, 0.0)


def read_points(path: Path | None, exercise_keys: list[str]) -> dict[str, float]:
    """Points per exercise: the exercise modules' defaults, overridden by ``path`` (JSON
    ``{"ch1.area": 2}`` or CSV ``exercise,points``). Unknown exercises and non-positive points
    raise ValueError naming them."""
    points = {k: get(k).points for k in exercise_keys}
    if path is None:
        return points
    path = Path(path)
    text = path.read_text()
    if path.suffix == ".json":
        override = json.loads(text)
        if not isinstance(override, dict):
            raise ValueError(f"{path}: expected a JSON object {{exercise: points}}")
    else:
        rows = [r for r in csv.reader(io.StringIO(text)) if r and not r[0].startswith("#")]
        if rows and rows[0][0].strip() == "exercise":
            rows = rows[1:]
        override = {r[0].strip(): r[1].strip() if len(r) > 1 else "" for r in rows}
    for key, value in override.items():
        if key not in points:
            raise ValueError(
                f"{path}: {key!r} is not an exercise being graded; valid: {', '.join(points)}"
            )
        try:
            value = float(value)
        except (TypeError, ValueError):
            raise ValueError(f"{path}: points of {key} must be a number, got {value!r}") from None
        if not value >= 0:
            raise ValueError(f"{path}: points of {key} must be >= 0, got {value!r}")
        points[key] = value
    return points


def grade(
    submissions,
    out=None,
    timeout: float = 900,
    cwd=None,
    progress: bool = True,
    *,
    roster=None,
    chapters=None,
    assignment=None,
    points=None,
    cell_timeout: int = 300,
    jobs: int = 2,
    trials: int = 5,
    secret: str | None = None,
    isolation: str = "auto",
    call_timeout: float = 30.0,
    limits: sandbox.Limits | None = None,
    value_reruns: int = 0,
) -> list[NotebookGrade]:
    """Grade every notebook under ``submissions`` (module docstring); write the reports into
    ``out``. ``cwd`` is ignored (each run works in its own sandbox); kept for old callers.
    ``limits`` bound every sandboxed process (default :class:`sandbox.Limits`, with CPU time
    ``timeout`` plus a minute). ``value_reruns`` (default 0) runs each notebook again for that
    many hidden seeds and gives a per-seed value exercise full marks only where the notebook
    computes the right answer in every run (:func:`_rerun_values`)."""
    root = Path(submissions)
    if not timeout or timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if not cell_timeout or cell_timeout <= 0:
        raise ValueError(f"cell_timeout must be a positive number of seconds, got {cell_timeout!r}")
    if not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    if not isinstance(value_reruns, int) or value_reruns < 0:
        raise ValueError(f"value_reruns must be an integer >= 0, got {value_reruns!r}")
    if not isinstance(trials, int) or trials < 1:
        raise ValueError(f"trials must be a positive integer, got {trials!r}")
    mode = sandbox.choose_isolation(isolation)
    found = find_submissions(root)
    roster_list = read_roster(Path(roster)) if roster is not None else None
    out = Path(out) if out else root.with_name(root.resolve().name + "-grades")
    secret, generated = resolve_secret(secret)
    if limits is None:
        limits = sandbox.Limits(cpu=int(timeout) + 60)
    elif not isinstance(limits, sandbox.Limits):
        raise ValueError(f"limits must be a mzlite.grading.sandbox.Limits, got {limits!r}")
    chapters = assigned_chapters(chapters, assignment, roster)
    exercises = [k for c in chapters for k in keys(c + ".")]
    weights = read_points(points, exercises)

    out.mkdir(parents=True, exist_ok=True)
    if generated:  # the instructor's output only: no sandbox ever sees the report folder
        atomic_write_text(
            out / SECRET_FILE,
            f"{secret}\n# generated for the grading run of {time.strftime('%Y-%m-%d %H:%M')}: "
            "pass it as --secret to grade these submissions again with the same hidden trials\n",
        )
    # every submission is read before any student code runs: a sandbox that rewrites or reads a
    # classmate's file later finds nothing of it (the folder is hidden from every sandbox too)
    found = [(student, path, _read_limited(path, MAX_NOTEBOOK)) for student, path in found]
    graded: list[NotebookGrade | None] = [None] * len(found)
    try:
        # a box a student made hard to delete must not cost the class its reports
        with tempfile.TemporaryDirectory(prefix="mzlite-grade-", ignore_cleanup_errors=True) as tmp:
            base = Path(tmp)
            snapshot = sandbox.make_snapshot(base / "snapshot")
            # what every box gets: the library and the exercises' inputs, no checker (one copy,
            # made from the snapshot before any student code runs)
            view = student_view.make_student_view(snapshot, base / "view", keys())
            home = sandbox.make_home(base / "home")  # matplotlib's font list, built once
            watched = [ROOT / "mzlite", ROOT / "notebooks"]
            watched += [Path(r) / "mzlite" for r in sandbox.installed_roots()]
            ctx = _Context(
                out=out.resolve(),
                base=base,
                snapshot=snapshot,
                snapshot_digest=sandbox.tree_digest(snapshot, bytecode=True),
                watched=watched,
                watched_digest=sandbox.tree_digest(*watched),
                roster=dict(roster_list) if roster_list is not None else None,
                timeout=float(timeout),
                cell_timeout=int(cell_timeout),
                trials=trials,
                secret=secret,
                isolation=mode,
                call_timeout=float(call_timeout),
                submissions=root.resolve(),
                limits=limits,
                value_reruns=value_reruns,
                view=view,
                home=home,
                exercises=tuple(exercises),
            )

            def one(i: int) -> None:
                student, path, raw = found[i]
                try:
                    if chapter_of(path) not in chapters:  # never run, never counted
                        g = _not_assigned(ctx, student, path, chapters)
                    else:
                        g = grade_notebook(ctx, i, student, path, raw)
                except Exception as e:  # noqa: BLE001 - one notebook's failure is its own row
                    g = _not_graded(ctx, student, path, f"{type(e).__name__}: {e}")
                graded[i] = g
                if progress:
                    done = sum(r.get("score", 0.0) for r in g.results.values())
                    print(
                        f"{student} / {path.name}: {g.outcome} ({g.seconds:.0f} s), "
                        f"{done:g} of {len(g.expected)} exercises"
                        + (f", {len(g.findings)} findings" if g.findings else ""),
                        flush=True,
                    )

            ctx.judges = _Judges(ctx)
            pool = ThreadPoolExecutor(max_workers=jobs)
            try:
                list(pool.map(one, range(len(found))))
            finally:  # an interrupt stops what has not started instead of waiting for it
                pool.shutdown(wait=True, cancel_futures=True)
                ctx.judges.close()
    finally:  # interrupted or not, every student of the roster gets a row
        why = "grading was interrupted before this notebook was graded"
        graded = [
            g if g is not None else _not_graded(None, s, p, why)
            for g, (s, p, _) in zip(graded, found, strict=True)
        ]
        paths = write_reports(graded, out, exercises, weights, roster_list, mode)
        if progress:
            print("wrote " + ", ".join(str(p) for p in paths))
            if generated:
                print(f"the hidden trials' secret was generated for this run: {out / SECRET_FILE}")
    return graded


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m mzlite.grading.grader",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("submissions", help="a folder: STUDENT/NN_chapter.ipynb (or notebooks in it)")
    ap.add_argument("--out", default=None, help="report folder (default: SUBMISSIONS-grades)")
    ap.add_argument("--roster", default=None, help="one student a line: name[,seed]")
    ap.add_argument("--chapters", default=None, help="the assignment, e.g. 1,3")
    ap.add_argument(
        "--assignment",
        default=None,
        help="a file of the assignment's chapters (1,3 or JSON); else --chapters, else a "
        "'# chapters: 1,3' line in the roster",
    )
    ap.add_argument("--points", default=None, help="JSON or CSV of points per exercise")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per notebook (900)")
    ap.add_argument("--cell-timeout", type=int, default=300, help="seconds per cell (300)")
    ap.add_argument("--jobs", type=int, default=2, help="notebooks graded at once (2)")
    ap.add_argument("--trials", type=int, default=5, help="hidden trials per coding exercise")
    ap.add_argument(
        "--secret",
        default=None,
        help=f"seeds the hidden trials, at least {MIN_SECRET} characters (default: "
        f"${SECRET_ENV}, else a random one recorded in OUT/{SECRET_FILE})",
    )
    ap.add_argument("--isolation", default="auto", choices=sandbox.ISOLATIONS)
    ap.add_argument("--memory", type=float, default=4, help="GiB of address space per process (4)")
    ap.add_argument(
        "--processes", type=int, default=512, help="processes and threads per sandbox (512)"
    )
    ap.add_argument("--file-size", type=float, default=1024, help="MiB per written file (1024)")
    ap.add_argument(
        "--value-reruns",
        type=int,
        default=0,
        help="run each notebook again for N hidden seeds: a value answer scores only where it is "
        "computed, not typed in (0)",
    )
    return ap


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = _parser().parse_args(argv)
    try:
        grade(
            args.submissions,
            args.out,
            args.timeout,
            roster=args.roster,
            chapters=None if args.chapters is None else args.chapters.split(","),
            assignment=args.assignment,
            points=args.points,
            cell_timeout=args.cell_timeout,
            jobs=args.jobs,
            trials=args.trials,
            secret=args.secret,
            isolation=args.isolation,
            value_reruns=args.value_reruns,
            limits=sandbox.Limits(
                memory=int(args.memory * 2**30),
                processes=args.processes,
                file_size=int(args.file_size * 2**20),
                cpu=int(args.timeout) + 60,
            ),
        )
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
