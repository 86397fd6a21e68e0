"""Running a table: every missing (cell, seed) job of it, in a local pool of worker processes or
through a launcher (``launchers``); one job's own work is ``execute``. The pool (``spawn_pool``,
also the learning-rate search's) spawns its processes (no fork of a process running torch
threads), which end when their driver dies: a killed ``run`` or ``search`` leaves nothing training
(an unfinished job resumes from its checkpoint on the next run)."""

from __future__ import annotations

import itertools
import json
import multiprocessing as mp
import os
import sys
import threading
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed

import torch

from mzlite._checks import resolve_device
from mzlite.nn import model_spec
from mzlite.train.config import check_int_field

from .execute import EPOCH_LINE_EVERY_S, git_info, is_done, job_splits, progress_line, run_jobs
from .jobs import Job, jobs, shared
from .launchers import get_launcher
from .specs import PROFILES, model_family, search_choice, search_path
from .tables import get_profile, get_table


def _worker(group: list[Job], git: dict, every: float | None, graph: bool) -> list[dict]:
    """Run one group of jobs (``run_jobs``, epoch lines ``every`` seconds); per job ``{"line": its
    progress line}`` (the result is on disk), or ``{"error", "trace"}``."""
    try:
        results = run_jobs(group, git, epoch_every_s=every, graph=graph)
        return [{"line": progress_line(j, r)} for j, r in zip(group, results, strict=True)]
    except Exception as e:  # reported by the parent for every job of the group; others go on
        err = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
        return [err] * len(group)


def run(table, profile: str = "smoke", seeds=None, device: str = "auto",
        workers: int | None = None, models=None, results_dir=None, progress: bool = True, *,
        cells=None, cache_dir=None, data_workers: int | None = None, threads: int | None = None,
        launcher="local", precision: str = "auto", stack: bool | None = None,
        graph: bool | None = None) -> dict:  # fmt: skip
    """Run every missing (cell, seed) of ``table`` under ``profile`` (the profiles are listed
    below). ``seeds``, ``models``, ``cells``, ``precision``: as in ``jobs``; ``device``: "auto"
    (CUDA when available), "cpu", "cuda".
    ``workers``: jobs trained in parallel processes (sharing the GPU when there is one); None: on
    a CPU one per core (at most one per job; 1 for smoke, whose jobs are shorter than a process
    start), the faster layout on a 2-core CPU (``benchmarks/fit_speed.py layout``), else 1.
    ``threads``: torch threads per job, default ``max(1, cores // workers)``, but 1 for smoke (on
    a shared CPU two oversubscribed threads made a smoke job 15x slower: 59 s vs 3.8 s). Datasets
    are generated first, once per (task, options, sizes), with ``data_workers`` processes
    (default: all cores; 1 for smoke).
    ``stack``: train each cell's seeds as one stacked model (``mzlite.train.fit_stacked``, each
    result what its own run would report); None: on CUDA only, where the small models leave the
    GPU idle. ``graph``: each stack's step as a CUDA graph; None: wherever seeds are stacked on
    CUDA. ``launcher``: "local" or "ray" / a ``launchers.RayLauncher`` (each job a Ray task).

    Returns ``{"done": [...], "skipped": [...], "failed": [...]}`` (result paths; failures as
    ``(path, error)``). A failed job does not stop the others; Ctrl-C loses at most the epochs
    in flight (the next run resumes from the checkpoints)."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):  # fmt: skip
        raise ValueError(f"workers must be an int >= 1 or None, got {workers!r}")
    if launcher != "local":  # the cluster's workers resolve the device and pack one job a core
        launcher = get_launcher(launcher)
        if workers not in (None, 1):
            raise ValueError("workers is the local launcher's; Ray runs as many jobs as fit")
        workers, threads = 1, 1 if threads is None else threads
    for name, value in (("stack", stack), ("graph", graph)):
        if value is not None and not isinstance(value, bool):
            raise ValueError(f"{name} must be True, False or None (auto), got {value!r}")
    if stack and launcher != "local":
        raise ValueError("stack=True needs launcher='local' (Ray runs one job a task)")
    # "cuda" without CUDA fails here, before any work
    on_cuda = launcher == "local" and resolve_device(device).type == "cuda"
    stack = on_cuda if stack is None else stack
    if graph and not (stack and on_cuda):
        raise ValueError(f"graph=True needs stacked training on a CUDA device, got stack={stack}, "
                         f"device={device!r}")  # fmt: skip
    graph = (stack and on_cuda) if graph is None else graph
    todo = jobs(table, profile, seeds, models, cells, results_dir, cache_dir, device, precision)
    say = print if progress else (lambda *a, **k: None)
    skipped = [j for j in todo if is_done(j)]
    todo = [j for j in todo if j not in skipped]
    _check_searched(todo)
    spec, name = get_table(table), get_profile(profile).name
    smoke, lent = name == "smoke", shared(spec, profile)
    lenders = " and ".join(dict.fromkeys(label for label, _ in lent.values()))
    say(f"{spec.label} [{name}]: {len(todo)} to run, {len(skipped)} done"
        + (f"; {len(lent)} cell(s) are the same experiments as cells of {lenders} and run "
           "there" if lent else ""))  # fmt: skip
    # data first, once per dataset: the workers then only load the cache
    data_workers = 1 if data_workers is None and smoke else data_workers
    datasets = {(j.cell.task, json.dumps(j.cell.options, sort_keys=True), j.sizes): j for j in todo}
    for j in datasets.values():
        t = time.perf_counter()
        job_splits(j, workers=data_workers)
        say(f"  data {j.cell.task} {j.cell.options} {j.sizes}: {time.perf_counter() - t:.1f} s")
    git = git_info()
    done, failed = [], []
    if workers is None:
        per_core = resolve_device(device).type == "cpu" and not smoke
        workers = max(1, min(os.cpu_count() or 1, len(todo))) if per_core else 1
    if threads is None:
        threads = 1 if smoke else max(1, (os.cpu_count() or 1) // workers)
    check_int_field("threads", threads, 1)
    old_threads = torch.get_num_threads()
    if workers == 1:
        torch.set_num_threads(threads)
    try:
        if launcher == "local":
            say(f"  {workers} worker process(es) x {threads} torch thread(s)")
            groups = _stack_groups(todo) if stack else [[j] for j in todo]
            every = EPOCH_LINE_EVERY_S if progress else None  # --quiet: no epoch lines either
            _run_groups(groups, git, workers, threads, done, failed, say, every, graph)
        else:
            launcher.run(todo, git, threads, done, failed, say)
    finally:
        torch.set_num_threads(old_threads)
    return {"done": done, "skipped": [str(j.result_path) for j in skipped], "failed": failed}


def _profiles_doc() -> str:
    lines = ["", "", "    Profiles (``mzlite.repro.experiments.PROFILES``):", ""]
    for name, prof in PROFILES.items():
        what = prof.description.removeprefix(name).lstrip(": ")
        seeds = "each cell's paper count" if prof.seeds is None else prof.seeds
        sep = " " if what.startswith("(") else ": "
        lines.append(f"    - ``{name}``{sep}{what} [seeds: {seeds}]")
    return "\n".join(lines)


if run.__doc__:  # None under python -OO
    run.__doc__ += _profiles_doc()


def _check_searched(todo) -> None:
    """A searched profile trains a family only once its search has chosen the family's rate."""
    searched = [j for j in todo if j.profile.searched and model_spec(j.cell.model).trainable]
    chosen = search_choice(todo[0].profile.name) if searched else {}
    missing = sorted({model_family(j.cell.model) for j in searched} - set(chosen))
    if missing:
        name = todo[0].profile.name
        raise ValueError(f"profile {name} takes each family's lr and schedule from its "
                         f"learning-rate search, which has not chosen them for {missing} "
                         f"({search_path(name)}): run `python -m mzlite search {name} --families "
                         f"{','.join(missing)}` first")  # fmt: skip


def _stack_groups(todo: list[Job]) -> list[list[Job]]:
    """The jobs to run, one group per cell (its seeds, in order); alone: closed-form models, and a
    job with a checkpoint of its own (an interrupted unstacked run resumes where it stopped)."""
    groups: dict = {}
    for j in todo:
        alone = not model_spec(j.cell.model).trainable or j.checkpoint_path.exists()
        groups.setdefault(id(j) if alone else (j.table, j.cell.id), []).append(j)
    return list(groups.values())


def _run_groups(groups, git, workers, threads, done, failed, say, every, graph):
    """Run each group (``_worker``) here when ``workers`` is 1, else in a pool of spawned processes;
    append result paths to ``done``, ``(path, error)`` to ``failed``, say each end."""
    n, ordinal = sum(len(g) for g in groups), itertools.count(1)

    def report(group, summaries):
        for j, s in zip(group, summaries, strict=True):
            if "error" in s:
                failed.append((str(j.result_path), s["error"]))
                print(s["trace"], file=sys.stderr)  # a failure is said even under --quiet
            else:
                done.append(str(j.result_path))
            line = s.get("line") or progress_line(j, error=s["error"])
            stacked = f" (stack of {len(group)})" if len(group) > 1 else ""
            say(f"  [{next(ordinal)}/{n}] {line}{stacked}")

    if workers == 1:
        for g in groups:
            report(g, _worker(g, git, every, graph))
        return
    ex = spawn_pool(workers, threads)
    try:
        futs = {ex.submit(_worker, g, git, every, graph): g for g in groups}
        for f in as_completed(futs):
            report(futs[f], f.result())
    except KeyboardInterrupt:
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        ex.shutdown(wait=True, cancel_futures=True)


PARENT_POLL_S = 1.0  # how soon a worker notices that its driver is gone


def spawn_pool(workers: int, threads: int) -> ProcessPoolExecutor:
    """``workers`` spawned processes with ``threads`` torch threads each, bound to this process."""
    ctx = mp.get_context("spawn")
    return ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(threads, os.getpid()))  # fmt: skip


def _init_worker(threads: int, driver: int) -> None:
    torch.set_num_threads(threads)
    threading.Thread(target=_exit_with, args=(driver,), name="mzlite-driver-watch",
                     daemon=True).start()  # fmt: skip


def _exit_with(driver: int) -> None:
    # A killed driver (SIGKILL, SIGTERM) cannot shut its pool down, and a spawned worker outlives
    # it: it would train on, unseen, for as long as its job lasts. Results and checkpoints are
    # written atomically, so ending here at once loses at most the current epoch.
    while os.getppid() == driver:
        time.sleep(PARENT_POLL_S)
    os._exit(1)
