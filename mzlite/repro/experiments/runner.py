"""Running a table: every missing (cell, seed) job of it, in a local pool of worker processes or
through a launcher (``mzlite.repro.experiments.launchers``); one job's own work is
``mzlite.repro.experiments.execute``."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from concurrent.futures import as_completed

import torch

from mzlite._checks import resolve_device
from mzlite.nn import model_spec

from .execute import (
    EPOCH_LINE_EVERY_S,
    git_info,
    is_done,
    job_splits,
    progress_line,
    result_summary,
    run_job,
    run_stacked_jobs,
)
from .jobs import Job, jobs, shared
from .launchers import get_launcher
from .pool import spawn_pool
from .specs import PROFILES, model_family, search_choice, search_path
from .tables import get_profile, get_table


def _worker(
    group: list[Job], git: dict, every: float | None = EPOCH_LINE_EVERY_S, graph: bool = False
) -> list[dict]:
    """Run one group of jobs (a job alone, or a cell's seeds as one stacked model) and return each
    job's summary (the results themselves are on disk); ``every``: seconds between epoch lines;
    ``graph``: a stack's step as a CUDA graph."""
    try:
        # A job alone (closed form, or resuming its own unstacked checkpoint) runs as itself; a
        # lone seed on the graph path is a stack of one, since the graph lives in fit_stacked.
        j = group[0]
        own = not model_spec(j.cell.model).trainable or j.checkpoint_path.exists()
        if len(group) == 1 and (not graph or own):
            return [result_summary(run_job(group[0], git, epoch_every_s=every))]
        return [
            result_summary(r)
            for r in run_stacked_jobs(group, git, epoch_every_s=every, graph=graph)
        ]
    except Exception as e:  # reported by the parent for every job of the group; others go on
        err = {"error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()}
        return [err] * len(group)


def run(
    table,
    profile: str = "smoke",
    seeds=None,
    device: str = "auto",
    workers: int | None = None,
    models=None,
    results_dir=None,
    progress: bool = True,
    *,
    cells=None,
    cache_dir=None,
    data_workers: int | None = None,
    threads: int | None = None,
    launcher="local",
    precision: str = "auto",
    stack: bool | None = None,
    graph: bool | None = None,
) -> dict:
    """Run every missing (cell, seed) of ``table`` under ``profile``, a name of ``PROFILES``
    (listed at the end of this docstring, which is generated from them).

    ``seeds``: None (the profile's seed count, listed below), "0-4", "0,2,5" or ints.
    ``device``: "auto" (CUDA when available), "cpu", "cuda". ``workers``: jobs trained in parallel
    processes, each with ``torch.set_num_threads(max(1, cores // workers))``
    (they share the GPU when there is one); None: on CPU one 1-thread process per core (at most
    one per job; 1 for smoke, whose jobs are shorter than a process start), the faster layout on
    a 2-core CPU (``benchmarks/fit_speed.py layout``), else 1. ``models``: model names or ids to
    keep (the set-statistics rows always stay); ``cells``: cell-id glob patterns. Datasets are
    generated first, in this process, with ``data_workers`` processes (default: all cores; 1 for
    smoke), and cached.
    ``threads``: torch CPU threads per job; default ``max(1, cores // workers)``, but 1 for the
    smoke profile (its batches of 32 gain nothing from threads, and on a shared CPU two
    oversubscribed threads made a smoke job 15x slower: 59 s vs 3.8 s, measured).

    ``precision``: "auto" (the machine's: bf16 autocast on a CPU with native bf16, float32 else,
    on CUDA too), "bf16" or "float32" (``jobs.PRECISIONS``): results count precision as part of
    the experiment, so a GPU run beside bf16 CPU runs asks for "bf16".

    ``stack``: train the seeds of each cell as one stacked model (``mzlite.train.fit_stacked``:
    one vectorised run of K models, each result what its own run would report, recording
    ``trained_stacked: K`` in its ``protocol``); None (default): on CUDA only, where the small
    models leave the GPU idle and stacking pays (on a CPU it does not: local launcher only).
    ``graph``: capture each stack's training step as a CUDA graph (``fit_stacked(graph=True)``:
    the same arithmetic with one launch a step; results record ``cuda_graph: true``); None
    (default): wherever seeds are stacked on CUDA. It needs stacking on CUDA.

    ``launcher``: "local" (this machine: ``workers`` processes) or "ray" / a
    ``mzlite.repro.experiments.launchers.RayLauncher`` (each job a Ray task; results written here
    all the same).

    Returns ``{"done": [...], "skipped": [...], "failed": [...]}`` (result paths; failures as
    ``(path, error)``). A failed job does not stop the others; Ctrl-C stops the run and loses at
    most the epochs in flight (the next run resumes from the checkpoints)."""
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int)
                                or workers < 1):  # fmt: skip
        raise ValueError(f"workers must be an int >= 1 or None, got {workers!r}")
    if launcher == "local":
        resolve_device(device)  # "cuda" without CUDA fails here, before any work
    else:  # the cluster's workers resolve the device; concurrency follows its resources
        launcher = get_launcher(launcher)
        if workers not in (None, 1):
            raise ValueError("workers is the local launcher's; Ray runs as many jobs as fit")
        workers = 1
        if threads is None:  # one CPU per task: Ray packs tasks onto the cluster's cores
            threads = 1
    if stack is not None and not isinstance(stack, bool):
        raise ValueError(f"stack must be True, False or None (auto: on CUDA), got {stack!r}")
    if stack and launcher != "local":
        raise ValueError("stack=True needs launcher='local' (Ray runs one job a task)")
    on_cuda = launcher == "local" and resolve_device(device).type == "cuda"
    if stack is None:
        stack = on_cuda
    if graph is not None and not isinstance(graph, bool):
        raise ValueError(
            f"graph must be True, False or None (auto: stacked on CUDA), got {graph!r}"
        )
    if graph and not (stack and on_cuda):
        raise ValueError(
            f"graph=True needs stacked training on a CUDA device, got stack={stack}, "
            f"device={device!r}"
        )
    if graph is None:
        graph = stack and on_cuda
    todo = jobs(table, profile, seeds, models, cells, results_dir, cache_dir, device, precision)
    say = print if progress else (lambda *a, **k: None)
    skipped = [j for j in todo if is_done(j)]
    todo = [j for j in todo if j not in skipped]
    _check_searched(todo)
    spec = get_table(table)
    lent = shared(spec, profile)
    lenders = " and ".join(dict.fromkeys(label for label, _ in lent.values()))
    say(f"{spec.label} [{get_profile(profile).name}]: {len(todo)} to run, {len(skipped)} done"
        + (f"; {len(lent)} cell(s) are the same experiments as cells of {lenders} and run "
           "there" if lent else ""))  # fmt: skip
    # Data first, once per (task, options, sizes): workers then only load the cache.
    if data_workers is None:  # a process pool costs more than it saves on tiny data
        data_workers = 1 if get_profile(profile).name == "smoke" else None
    seen = set()
    for j in todo:
        key = (j.cell.task, json.dumps(j.cell.options, sort_keys=True), j.sizes)
        if key not in seen:
            seen.add(key)
            t = time.perf_counter()
            job_splits(j, workers=data_workers)
            say(f"  data {j.cell.task} {j.cell.options} {j.sizes}: {time.perf_counter() - t:.1f} s")
    git = git_info()
    done, failed = [], []
    if workers is None:
        per_core = resolve_device(device).type == "cpu" and get_profile(profile).name != "smoke"
        workers = max(1, min(os.cpu_count() or 1, len(todo))) if per_core else 1
    if threads is None:
        smoke = get_profile(profile).name == "smoke"
        threads = 1 if smoke else max(1, (os.cpu_count() or 1) // workers)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise ValueError(f"threads must be an int >= 1, got {threads!r}")
    if launcher == "local":
        say(f"  {workers} worker process(es) x {threads} torch thread(s)")
    old_threads = torch.get_num_threads()
    if workers == 1:
        torch.set_num_threads(threads)
    try:
        if launcher == "local":
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
        raise ValueError(
            f"profile {name} takes each family's lr and schedule from its learning-rate search, "
            f"which has not chosen them for {missing} ({search_path(name)}): run "
            f"`python -m mzlite search {name} --families {','.join(missing)}` first"
        )


def _stack_groups(todo: list[Job]) -> list[list[Job]]:
    """The jobs to run, one group per cell (its seeds, in order); alone: closed-form models, and
    a job with a checkpoint of its own (an interrupted unstacked run resumes where it stopped)."""
    groups: dict = {}
    for j in todo:
        alone = not model_spec(j.cell.model).trainable or j.checkpoint_path.exists()
        key = id(j) if alone else (j.table, j.cell.id)
        groups.setdefault(key, []).append(j)
    return list(groups.values())


def _run_groups(
    groups, git, workers, threads, done, failed, say, every=EPOCH_LINE_EVERY_S, graph=False
):
    """Run each group of jobs (``_worker``): in this process when ``workers`` is 1, else in a pool
    of ``workers`` spawned processes with ``threads`` torch threads each; append finished result
    paths to ``done`` and ``(path, error)`` to ``failed``, and say one line per job as it ends."""
    n, i = sum(len(g) for g in groups), 0

    def report(group, summaries):
        nonlocal i
        for j, s in zip(group, summaries, strict=True):
            i += 1
            if "error" in s:
                failed.append((str(j.result_path), s["error"]))
                print(s["trace"], file=sys.stderr)  # a failure is said even under --quiet
            else:
                done.append(str(j.result_path))
            stacked = f" (stack of {len(group)})" if len(group) > 1 else ""
            say(f"  [{i}/{n}] {progress_line(j, s)}{stacked}")

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
