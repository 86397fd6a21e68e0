"""Reading results back: by table, by cell, and which tables have results on disk."""

from __future__ import annotations

import json
import pickle
import time
import warnings
from collections import Counter
from datetime import datetime, timezone
from functools import cache, partial
from pathlib import Path

from mzlite._io import atomic_write_json
from mzlite.nn import model_spec

from .jobs import Job, aliases, bare_job, jobs, result_path, shared
from .specs import PROFILES, results_root, task_options_diff, train_config_diff
from .tables import get_profile, get_table, table_registry


class UnreadableResultWarning(UserWarning):
    """A result file that is not a JSON object (truncated, a merge conflict) was left out."""


class OtherReadingWarning(UserWarning):
    """A result made from other task options than its cell now has (another task reading) was
    left out of the cell, as another experiment."""


class OtherTrainingWarning(UserWarning):
    """A result trained otherwise than its cell now trains under its profile (its rate or schedule
    changed since the run) was left out of the cell, as another experiment."""


# A file modified within the last seconds has no identity yet (as git treats a racily clean
# file): a rewrite within the file system's timestamp granularity could otherwise keep it.
_SETTLED_S = 2.0


def file_identity(path) -> tuple[int, int, int] | None:
    """``path``'s (inode, size, mtime) once it has settled, else None: a key for caching it."""
    st = Path(path).stat()
    if time.time() - st.st_mtime <= _SETTLED_S:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


def results_state(results_dir=None) -> tuple:
    """The identity of every JSON file under ``results_dir``: equal twice only while no result
    landed or changed (an unsettled file's identity equals nothing)."""
    root = results_root(results_dir)
    state = [(str(p), file_identity(p) or object()) for p in root.rglob("*.json")]
    return str(root.resolve()), tuple(sorted(state, key=lambda s: s[0]))


# Parsed result files as pickles, by path with their identity: a scorecard reads every result
# about twenty times, and parsing the JSON each time was half its time; unpickling a copy takes a
# third of a parse, and gives each caller its own objects (it may change them).
_PARSED: dict[str, tuple[tuple[int, int, int], bytes]] = {}


def _read_or_warn(path: Path) -> dict | None:
    """``path``'s JSON object (from ``_PARSED`` while unchanged), or None with a warning."""
    try:
        identity, key = file_identity(path), str(path)
        hit = _PARSED.get(key)
        if hit is not None and hit[0] == identity:
            return pickle.loads(hit[1])
        res = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:  # ValueError: JSON syntax, bad UTF-8
        reason = f"{type(e).__name__}: {e}"
    else:
        if isinstance(res, dict):
            if identity is not None:
                _PARSED[key] = (identity, pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL))
            return res
        reason = f"a JSON {type(res).__name__}, not an object"
    warnings.warn(f"{path}: unreadable result file left out of this table ({reason}); rerun its "
                  "job (`python -m mzlite run` recomputes it) or repair the file",
                  UnreadableResultWarning, stacklevel=3)  # fmt: skip
    return None


def load_results(table, profile: str = "smoke", results_dir=None) -> list[dict]:
    """Every result JSON of ``table`` under ``profile`` (sorted by cell and seed). A file whose
    ``profile`` or ``table`` disagrees with its directory raises ValueError (profiles never mix);
    an unreadable one is left out with an :class:`UnreadableResultWarning`."""
    spec, prof = get_table(table), get_profile(profile)
    d = results_root(results_dir) / prof.name / spec.dirname
    out = []
    for p in sorted(d.glob("*__seed*.json")):
        res = _read_or_warn(p)
        if res is None:
            continue
        if res.get("profile") != prof.name or res.get("table") != spec.label:
            raise ValueError(f"{p} says profile={res.get('profile')!r}, table={res.get('table')!r}"
                             f" but lies under {prof.name}/{spec.dirname}: refusing to mix "
                             "results")  # fmt: skip
        out.append(res)
    return out


def _other_experiment(res: dict, cell, train_today) -> tuple[type[UserWarning], str, dict] | None:
    """(warning, what differs in words, the differences) where result ``res`` of ``cell`` is
    another experiment than the cell today (``train_today()``: its ``train_config``), else None."""
    if res.get("train_config") and model_spec(cell.model).trainable:
        diff = train_config_diff(res["train_config"], train_today(), skip=("amp",))
        if diff:
            return OtherTrainingWarning, "trained otherwise than its cell trains today", diff
    if res.get("task") == cell.task and "task_options" in res:
        try:
            diff = task_options_diff(res, cell)
        except ValueError as e:  # an option the generator no longer has
            diff = {"task_options": str(e)}
        if diff:
            return OtherReadingWarning, "made from other task options than its cell's", diff
    return None


def has_result(job: Job) -> bool:
    """True when ``job``'s result file holds the experiment ``job`` is today, as ``results_by_cell``
    reads it (precision aside): what ``plan``, ``list`` and the transfer study count as done."""
    if not job.result_path.exists():
        return False
    res = _read_or_warn(job.result_path)
    if res is None:
        return False
    return _other_experiment(res, job.cell, lambda: job.train_config().to_dict()) is None


def _trains_as(res: dict, cell, profile) -> bool:
    """Whether trained ``res`` is ``cell``'s experiment under ``profile`` (precision aside)."""
    job = bare_job(res["table"], cell, profile)
    same = not train_config_diff(res["train_config"], job.train_config().to_dict(), skip=("amp",))
    return same and list(job.sizes) == list(res.get("sizes", ()))


def _moved(res: dict) -> dict:  # what a retired result says, apart from where it lies
    return {k: v for k, v in res.items() if k not in ("profile", "retired_from")}


def retire(profile: str, to: str, results_dir=None, dry_run: bool = False) -> list[tuple]:
    """Keep the campaign of ``profile`` at its old rates in the superseded profile ``to``, freeing
    ``profile`` for its new ones: each trained result of ``profile`` that is its cell's experiment
    under ``to`` is moved there where its cell under ``profile`` now trains otherwise, else copied
    (both profiles' experiment), as is every closed-form result; its ``profile`` becomes ``to``
    and ``retired_from`` says where it lay, when, and its ``action``. Returns (action, from, to)
    for each; ``dry_run`` changes nothing. Resumable: an interrupted move completes next time."""
    src, dst = get_profile(profile), get_profile(to)
    root = results_root(results_dir)
    out = []
    for spec in table_registry().values():
        cells = {c.id: c for c in spec.cells}
        for path in sorted((root / src.name / spec.dirname).glob("*__seed*.json")):
            res = _read_or_warn(path)
            cell = res and cells.get(res.get("cell"))
            if not cell:
                continue
            trained = model_spec(cell.model).trainable
            if trained and not (res.get("train_config") and _trains_as(res, cell, dst)):
                continue
            action = "move" if trained and not _trains_as(res, cell, src) else "copy"
            target = result_path(spec, cell.id, res["seed"], dst.name, results_dir)
            if target.exists():
                if _moved(json.loads(target.read_text())) != _moved(res):
                    raise ValueError(f"{target} holds another result than {path}: move it by hand")
                if action == "copy":  # copied before
                    continue
            out.append((action, path, target))
    if dry_run:
        return out
    when = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for action, path, target in out:
        if not target.exists():
            res = json.loads(path.read_text())
            res["profile"] = dst.name
            where = str(path.relative_to(root))
            res["retired_from"] = {"path": where, "utc": when, "action": action}
            atomic_write_json(target, res)
        if action == "move":
            path.unlink()
    return out


def results_by_cell(table, profile: str = "smoke", results_dir=None) -> dict[str, list[dict]]:
    """``load_results`` as ``{cell id: [result, ...]}``; a cell that is the same experiment as an
    earlier cell (``aliases``) or table's (``shared``) gets its results. A result of other task
    options (:class:`OtherReadingWarning`) or trained otherwise than its cell trains today
    (:class:`OtherTrainingWarning`; precision aside: ``protocol_key``) is left out."""
    out: dict[str, list[dict]] = {}
    spec, prof = get_table(table), get_profile(profile)
    cells = {c.id: c for c in spec.cells}

    @cache
    def train_today(cell_id: str) -> dict:  # a trainable cell's train_config under the profile
        return bare_job(spec.label, cells[cell_id], prof).train_config().to_dict()

    for r in load_results(table, profile, results_dir):
        cell = cells.get(r["cell"])
        other = cell and _other_experiment(r, cell, partial(train_today, cell.id))
        if other:
            kind, what, diff = other
            warnings.warn(f"{r['table']} {r['cell']} seed {r.get('seed')} ({profile}) was {what} "
                          f"({diff}): left out, as another experiment", kind,
                          stacklevel=2)  # fmt: skip
            continue
        out.setdefault(r["cell"], []).append(r)
    lender = cache(partial(results_by_cell, profile=profile, results_dir=results_dir))
    for cid, (label, other) in shared(table, profile).items():  # run under an earlier table
        if cid not in out and other in lender(label):
            out[cid] = lender(label)[other]
    for cid, same in aliases(table, profile).items():  # the same experiment, run once
        if cid not in out and same in out:
            out[cid] = out[same]
    return out


# the best evidence first: the paper's protocol, then the paper's sizes (newest campaign first;
# the censored search's is cpu-annealed's reading at the paper's sizes, so it outranks
# cpu-annealed), then the reduced protocols, newest first (cpu, the first reading: per-row
# generator LayerNorm, cosine over the cap)
PROFILE_ORDER = ("full", "paper-sizes", "paper-sizes-fg", "paper-sizes-censored", "cpu-annealed",
                 "cpu-converged", "cpu")  # fmt: skip
# the campaigns at the paper's sizes, the newest first (``caught_up``)
PAPER_SIZED = ("paper-sizes", "paper-sizes-fg", "paper-sizes-censored")


def caught_up(cells, profiles=PAPER_SIZED, results_dir=None) -> str:
    """The first of ``profiles`` (newest first) with as many results of each of ``cells`` ((table,
    cell id) pairs) as any later one: a comparison of cells reads one campaign whole, and a new
    campaign once it has caught up with the old cell by cell."""
    tables = dict.fromkeys(t for t, _ in cells)

    def done(profile: str) -> Counter:
        out: Counter = Counter()
        for t in tables:
            ids = [c for u, c in cells if u == t]
            for j in jobs(t, profile, cells=ids, results_dir=results_dir):
                out[j.table, j.cell.id] += has_result(j)
        return out

    n = [done(p) for p in profiles]
    return next(p for i, p in enumerate(profiles)
                if all(n[i][k] >= m[k] for m in n[i + 1 :] for k in m))  # fmt: skip


def best_profile(table, profiles=PROFILE_ORDER, results_dir=None) -> str | None:
    """The first of ``profiles`` with results of ``table`` on disk, or None (a table whose cells
    landed under different profiles is better read cell by cell: ``report.best_rows``)."""
    found = (get_profile(p).name for p in profiles if load_results(table, p, results_dir))
    return next(found, None)


def list_tables(results_dir=None) -> list[dict]:
    """One row per registered table: label, title, cells, models, and per profile its (cell,
    seed) jobs, results on disk and cells run as an earlier table's (``shared``)."""
    rows = []
    for label, spec in table_registry().items():
        ablation = sum(c.part == "ablation" for c in spec.cells)
        row = {"label": label, "title": spec.title, "cells": len(spec.cells),
               "ablation_cells": ablation, "models": spec.models}  # fmt: skip
        for p in PROFILES:
            js = jobs(label, p, results_dir=results_dir)
            row[f"{p}_jobs"] = len(js)
            row[f"{p}_results"] = sum(map(has_result, js))
            row[f"{p}_shared"] = len(shared(label, p))
        rows.append(row)
    return rows
