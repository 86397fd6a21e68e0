"""The learning-rate search of a profile (issues 33 and 49): each model family's rate and schedule,
chosen on the validation split by runs judged so that a slow-starting schedule is not censored
(``rung_runs``). One Optuna study per (family, cell of ``SEARCH_CELLS``, seed) over ``LRS`` x
``SCHEDULES``, pruned by successive halving; ``choose`` decides per family and per table, and the
profile reads the file (``search_path``): a family's new choice trains once every family is
decided by the same method (``specs.search_in_effect``).

    python -m mzlite search paper-sizes --dry-run          # the trials and what they cost
    python -m mzlite search paper-sizes --families mz      # run them (resumes), write the choice"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import torch

from mzlite import nn as _nn
from mzlite._checks import resolve_device
from mzlite._io import atomic_write_json, json_safe
from mzlite.repro.render import HTML, comparison_table
from mzlite.train import TrainConfig, fit, lr_at
from mzlite.train.config import check_int_field

from . import plan as _plan
from . import reading
from .execute import build_cell_model, git_info, job_splits, provenance
from .jobs import Job, job
from .protocols import rate_text, reader_name
from .results import PAPER_SIZED, retire
from .runner import spawn_pool
from .specs import default_cache_dir, search_choice, search_in_effect, search_path
from .tables import get_profile

LRS = (1e-4, 3e-4, 1e-3, 3e-3)  # 1e-4 is the paper's
SCHEDULES = ("plateau", "cosine")  # cosine: to 0 over the profile's epoch cap (the paper's)
SEEDS = (0, 1)
MIN_EPOCHS = 20  # no trial is pruned before this many epochs
REDUCTION = 3  # successive halving keeps the best third at each rung
TIE = 0.02  # configurations within 2 % of the lowest mean relative loss are tied
# Task B joined after the choice made on F and G never trained MZ-Full there; the attention
# baselines study it on ST-Large, Task B's rival, which fell back at that choice (in-flight notes)
SEARCH_CELLS = {
    "mz": (("tab:main-results", "F-mz_full"), ("tab:main-results", "G-mz_full"),
           ("tab:main-results", "B-mz_full"), ("tab:tdof-verify", "L16-mz_1l")),
    "baseline": (("tab:main-results", "F-st"), ("tab:main-results", "G-st"),
                 ("tab:main-results", "B-st_large"), ("tab:tdof-verify", "L16-st_4l")),
    "deepsets": (("tab:main-results", "F-deepsets"), ("tab:main-results", "G-deepsets"),
                 ("tab:tdof-verify", "L16-st_4l")),
}  # fmt: skip
FORMAT = "mzlite.lr-search/2"
# How trials are compared at a rung: in the journals' path and each family's record, so that
# trials judged two ways never mix. CENSORED_METHOD: the search before issue 49 (format 1, 9473af9)
METHOD, CENSORED_METHOD = "rung-sized-cosine", "cosine-over-the-cap"
METHODS = {  # (the pages' name, the search file's account)
    METHOD: ("a cosine sized to its rung", "a cosine sized to its rung (judged at rung r after a "
             "cosine of length r), a plateau continued from rung to rung"),
    CENSORED_METHOD: ("the cap's cosine at the rungs", "every schedule over the 200-epoch cap, "
                      "judged at the rungs by its best validation loss so far: a cosine is judged "
                      "at 99 % of its peak rate (the search before issue 49; it censors cosine)"),
}  # fmt: skip
# each searched profile's superseded twins, the newest first (the campaigns at the paper's sizes
# after the current one): how it trained before Task B joined the search (its file as it was
# then, frozen) and with the censored search's choices
SUPERSEDED = {"paper-sizes": PAPER_SIZED[1:]}
FAMILY_MODEL = {"mz": None, "baseline": None, "deepsets": "deepsets"}  # a model to swap in
FAMILY_NAMES = {"mz": "MZAttn", "baseline": "attention baselines", "deepsets": "Deep Sets"}
PAPER_CONFIG = (1e-4, "cosine")  # app:impl: AdamW 1e-4, cosine to 0
ABLATION_LABEL = (
    "ablation: the family's best setting on this cell, chosen on this cell's validation split "
    "(not the verdict's protocol, which trains with the family's choice for the table)"
)


def _grid() -> list[tuple[float, str]]:
    return [(lr, s) for lr in LRS for s in SCHEDULES]


@dataclass(frozen=True)
class Study:
    family: str
    job: Job

    @property
    def name(self) -> str:
        j = self.job
        return f"{self.family}-{j.table.replace(':', '-')}-{j.cell.id}-seed{j.seed}"

    def record(self) -> dict:  # the search file's entry under "studies"
        return {"family": self.family, "table": self.job.table, "cell": self.job.cell.id,
                "seed": self.job.seed}  # fmt: skip


def plan_search(profile: str, families=None, seeds=SEEDS) -> list[Study]:
    prof = get_profile(profile)
    if not prof.searched or prof.name in {t for ts in SUPERSEDED.values() for t in ts}:
        raise ValueError(f"profile {prof.name} takes no searched rates (unsearched or superseded)")
    fams = list(SEARCH_CELLS) if families is None else list(families)
    if bad := sorted(set(fams) - set(SEARCH_CELLS)):
        raise ValueError(f"families must be among {sorted(SEARCH_CELLS)}, got {bad}")
    studies = []
    for fam in fams:
        swap = FAMILY_MODEL[fam]
        for table, cell_id in SEARCH_CELLS[fam]:
            for seed in seeds:
                j = job(table, cell_id, prof.name, seed)
                if swap and j.cell.model != swap:
                    cell = dataclasses.replace(j.cell, id=f"{j.cell.id}-as-{swap}", model=swap,
                                               model_kwargs={}, match_params=None)  # fmt: skip
                    j = dataclasses.replace(j, cell=cell)
                studies.append(Study(fam, j))
    return studies


def search_dir(profile: str, cache_dir=None) -> Path:
    """The studies' journals and the trials' checkpoints (never committed), by ``METHOD``."""
    return Path(cache_dir or default_cache_dir()) / "lr-search" / profile / METHOD


def rungs(cap: int) -> list[int]:
    """The successive-halving rungs below the epoch cap (20, 60, 180 under a 200-epoch cap)."""
    out, r = [], MIN_EPOCHS
    while r < cap:
        out.append(r)
        r *= REDUCTION
    return out


def rung_runs(schedule: str, cap: int) -> list[int]:
    """The epoch caps of a trial's runs, in order, each from the start. A plateau (it anneals when
    the loss stalls) runs once to ``cap``, judged at every rung; a cosine runs each rung's length,
    judged at its end, then ``cap``, but not for a rung whose next lies past the cap (the cap's
    cosine is nearly done there: at 180 of 200 epochs its rate is 2.4 % of its peak)."""
    if schedule != "cosine":
        return [cap]
    return [r for r in rungs(cap) if r * REDUCTION <= cap] + [cap]


def _report(trial, best: float, epoch: int) -> None:
    # Optuna refuses inf: a diverged run reports a loss no finite one exceeds
    trial.report(best if math.isfinite(best) else 1e30, epoch)


class _Reporter:
    """``fit`` callback of a run judged as it trains, past epoch ``after``: reports the best
    validation loss so far of each epoch not yet reported (a resumed run's too), asks the pruner."""

    def __init__(self, trial, after: int = 0):
        self.trial, self.reported = trial, after

    def catch_up(self, hist) -> None:
        losses = [v if math.isfinite(v) else math.inf for v in hist.val_loss]
        for e in range(self.reported + 1, len(losses) + 1):
            _report(self.trial, min(losses[:e]), e)
        self.reported = max(self.reported, len(losses))

    def __call__(self, epoch, hist, model) -> bool:
        self.catch_up(hist)
        return self.trial.should_prune()


def _optuna():
    try:
        import optuna
    except ImportError as e:
        msg = "the learning-rate search needs Optuna: pip install 'mzlite[search]' (or optuna)"
        raise ImportError(msg) from e
    return optuna


def _journal(study: Study, cache_dir=None) -> Path:
    return search_dir(study.job.profile.name, cache_dir) / f"{study.name}.journal"


def _storage(study: Study, cache_dir=None):
    storages, path = _optuna().storages, _journal(study, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    return storages.JournalStorage(storages.journal.JournalFileBackend(str(path)))


def _optuna_study(study: Study, cache_dir=None):
    optuna = _optuna()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruner = optuna.pruners.SuccessiveHalvingPruner(MIN_EPOCHS, reduction_factor=REDUCTION)
    storage = _storage(study, cache_dir)
    return optuna.create_study(study_name=study.name, storage=storage, direction="minimize",
                               pruner=pruner, load_if_exists=True)  # fmt: skip


def run_trial(study: Study, trial, lr: float, schedule: str, data, *, cache_dir=None) -> dict:
    """Train one trial's runs (``rung_runs``) on ``data`` (train, validation), judged at every
    rung; tell Optuna how it ended and return its record (from its last run's history)."""
    TrialState = _optuna().trial.TrialState
    j, (tr, va) = study.job, data
    base = j.train_config()
    cap = base.epochs
    lengths = rung_runs(schedule, cap)
    runs, ckpts = [], []
    for i, epochs in enumerate(lengths):
        # a sized run shorter than the warm-up warms up whole
        cfg = dataclasses.replace(base, lr=lr, schedule=schedule, epochs=epochs,
                                  warmup_epochs=min(base.warmup_epochs, epochs))  # fmt: skip
        sized = "" if epochs == cap else f"-{epochs}ep"
        ckpt = search_dir(j.profile.name, cache_dir) / study.name / f"lr{lr:g}-{schedule}{sized}.pt"
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        ckpts.append(ckpt)
        model = build_cell_model(j.cell, tr.d_in, tr.d_out, j.seed, resolve_device(j.device))
        # the cap's run is judged as it trains (at the rungs past the sized runs); a cosine
        # sized to its rung, once at its end
        reporter = _Reporter(trial, after=lengths[i - 1] if i else 0) if epochs == cap else None
        hist = fit(model, tr, va, cfg, checkpoint_path=ckpt, progress=False,
                   callbacks=[reporter] if reporter else ())  # fmt: skip
        if reporter:
            reporter.catch_up(hist)
            pruned = hist.stop_reason == "callback"
        else:
            _report(trial, hist.best_val_loss, epochs)
            pruned = trial.should_prune()
        best = hist.best_val_loss if hist.best_epoch else math.inf
        runs.append({"epochs": epochs, "epochs_run": hist.epochs_run, "best_val_loss": best})
        if pruned:
            break
    best = hist.best_epoch
    record = {
        "lr": lr, "schedule": schedule, "state": "pruned" if pruned else "complete",
        "stop_reason": hist.stop_reason, "epochs": hist.epochs_run, "best_epoch": best,
        "best_val_loss": hist.best_val_loss if best else math.inf,
        "val_r2_at_best": hist.val_metrics[best - 1].get("r2") if best else None,
        "wall_time_s": hist.wall_time_s, "runs": runs,
        "epochs_trained": sum(r["epochs_run"] for r in runs),
    }  # fmt: skip
    for k, v in record.items():
        trial.set_user_attr(k, v)
    value, state = (None, TrialState.PRUNED) if pruned else (record["best_val_loss"], None)
    trial.study.tell(trial, value, state=state)
    for ckpt in ckpts:
        ckpt.unlink(missing_ok=True)
    return record


def run_study(study: Study, *, cache_dir=None, say=print) -> list[dict]:
    """Run the configurations of ``study`` not finished yet; returns every trial's record. A
    trial a killed process left running is failed and asked again (its checkpoints resume it)."""
    TrialState = _optuna().trial.TrialState
    ost = _optuna_study(study, cache_dir)
    for t in ost.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        ost.tell(t.number, state=TrialState.FAIL)
    finished, data = _finished(ost), None
    for lr, schedule in [c for c in _grid() if c not in finished]:
        if data is None:
            data = job_splits(study.job)[:2]  # the test split is never looked at
        trial = _ask(ost, lr, schedule)
        t0 = time.perf_counter()
        record = run_trial(study, trial, lr, schedule, data, cache_dir=cache_dir)
        say(f"  {study.name:50s} lr {lr:<6g} {schedule:8s} {record['state']:9s} "
            f"{record['epochs']:3d} epochs, best val loss {record['best_val_loss']:.4f} "
            f"(epoch {record['best_epoch']}), {time.perf_counter() - t0:.0f} s")  # fmt: skip
    return trials(study, cache_dir)


def _ask(ost, lr: float, schedule: str):
    """A trial of exactly (lr, schedule), over the whole grid (Optuna keeps one per study)."""
    CategoricalDistribution = _optuna().distributions.CategoricalDistribution
    ost.enqueue_trial({"lr": lr, "schedule": schedule}, skip_if_exists=False)
    grid = {"lr": CategoricalDistribution(LRS), "schedule": CategoricalDistribution(SCHEDULES)}
    return ost.ask(fixed_distributions=grid)


def _finished(ost) -> dict:  # {(lr, schedule): its complete or pruned trial}
    done = (_optuna().trial.TrialState.COMPLETE, _optuna().trial.TrialState.PRUNED)
    return {(t.params["lr"], t.params["schedule"]): t
            for t in ost.get_trials(deepcopy=False, states=done)}  # fmt: skip


def trials(study: Study, cache_dir=None) -> list[dict]:
    """The finished trials of ``study`` (``run_trial``'s records), in grid order; loading, not
    creating, the study leaves its journal as it is."""
    if not _journal(study, cache_dir).exists():
        return []
    by_config = _finished(_optuna().load_study(study_name=study.name,
                                               storage=_storage(study, cache_dir)))  # fmt: skip
    return [dict(by_config[c].user_attrs) for c in _grid() if c in by_config]


def _config_key(config) -> str:  # as the search file keys it: "0.001 plateau"
    return f"{config[0]:g} {config[1]}"


def choose(records: dict[str, list[dict]]) -> dict | None:
    """The choice from ``{study name: its trial records}``: each configuration's best validation
    loss relative to its study's best (a pruned trial's best so far), averaged over studies; the
    smallest rate within ``TIE`` of the lowest mean. None unless every study tried the grid."""
    grid = _grid()
    if not records or any(len(r) < len(grid) for r in records.values()):
        return None
    excess = {c: [] for c in grid}
    for recs in records.values():
        best = min(r["best_val_loss"] for r in recs)
        for r in recs:
            excess[(r["lr"], r["schedule"])].append(r["best_val_loss"] / best - 1.0)
    mean = {c: sum(v) / len(v) for c, v in excess.items()}
    low = min(mean.values())
    lr, schedule = min((c for c in grid if mean[c] <= low + TIE), key=lambda c: (c[0], mean[c]))
    return {
        "train": {"lr": lr, "schedule": schedule},
        "mean_relative_excess": {_config_key(c): mean[c] for c in grid},
        "runner_up": min((c for c in grid if c != (lr, schedule)), key=mean.__getitem__),
    }


def search(profile: str, families=None, seeds=SEEDS, *, cache_dir=None, results_dir=None,
           workers: int = 1, threads: int = 1, say=print) -> dict:  # fmt: skip
    """Run (or resume) the search of ``profile`` for ``families`` in ``workers`` processes of
    ``threads`` threads, then write its file (``write_search``)."""
    for name, n in (("workers", workers), ("threads", threads)):
        check_int_field(name, n, 1)
    studies = plan_search(profile, families, seeds)
    say(f"search [{get_profile(profile).name}]: {len(studies)} studies x {len(_grid())} "
        f"configurations, pruning after {MIN_EPOCHS} epochs, {workers} worker(s)")  # fmt: skip
    if workers == 1:
        torch.set_num_threads(threads)
        for s in studies:
            run_study(s, cache_dir=cache_dir, say=say)
    else:
        with spawn_pool(workers, threads) as pool:
            say = functools.partial(print, flush=True)  # each worker prints its trials as they end
            for f in [pool.submit(run_study, s, cache_dir=cache_dir, say=say) for s in studies]:
                f.result()
    return write_search(profile, studies, cache_dir=cache_dir, results_dir=results_dir)


_KEYS = ("families", "methods", "studies", "choice", "choice_by_table", "pending", "replaced")


def read_search(profile: str, results_dir=None) -> dict:
    """The search file of ``profile`` (empty without one); a format-1 file (the search before
    issue 49) reads with its families' method ``CENSORED_METHOD`` and its commit."""
    path = search_path(profile, results_dir)
    out = json.loads(path.read_text()) if path.exists() else {}
    if path.exists() and out.get("format") != FORMAT:
        fams, commit = out.get("families", {}), out.get("provenance", {}).get("git_commit")
        out["methods"] = dict.fromkeys(fams, CENSORED_METHOD)
        out["commits"] = dict.fromkeys(fams, commit)
    return {key: {} for key in _KEYS} | out


def _study(out: dict, name: str) -> dict:
    """The ``table`` and ``seed`` of study ``name`` (``Study.record``), read from its name
    ("<family>-<table>-...-seed<k>") in a file written before studies were recorded (9473af9)."""
    if out["studies"].get(name):
        return out["studies"][name]
    table = "tab:main-results" if "-tab-main-results-" in name else "tab:tdof-verify"
    return {"table": table, "seed": int(name.rsplit("-seed", 1)[1])}


def _cell_name(name: str) -> str:  # a study's name less its seed: its (family, table, cell)
    return name.rsplit("-seed", 1)[0]


def write_search(profile: str, studies, *, cache_dir=None, results_dir=None) -> dict:
    """Write ``search_path(profile)`` from the studies' journals. A family decided by another
    method keeps its choice until this method's studies cover every cell of ``SEARCH_CELLS`` and
    choose (till then "pending", then the old ones are "replaced"): trials judged two ways never
    mix, and no profile loses a rate to a search half done."""
    old = read_search(profile, results_dir)
    families = {fam: dict(recs) for fam, recs in old["families"].items()}
    methods, commits = dict(old["methods"]), dict(old.get("commits", {}))
    choice, pending = dict(old["choice"]), dict(old["pending"])
    ran = [(s, recs) for s in studies if (recs := trials(s, cache_dir))]  # no journal: never ran
    # this method's trials of each family the run touched, merged per study: a run of some
    # seeds keeps the trials of the studies it did not run
    ours = {
        fam: dict(families.get(fam, {}) if methods.get(fam, METHOD) == METHOD
                  else pending.get(fam, {}).get("studies", {}))
        for fam in dict.fromkeys(s.family for s, _ in ran)
    }  # fmt: skip
    for s, recs in ran:
        ours[s.family][s.name] = recs
    out = {
        "format": FORMAT, "profile": profile,
        "grid": {"lr": list(LRS), "schedule": list(SCHEDULES)},
        "min_epochs": MIN_EPOCHS, "reduction_factor": REDUCTION, "tie": TIE, "methods": methods,
        # the commit of a family's search where it is not this file's (a format-1 family)
        "commits": commits, "families": families,
        # what each study trained, so that readers need not parse it back from its name
        "studies": {**old["studies"], **{s.name: s.record() for s, _ in ran}},
        "choice": choice, "choice_by_table": dict(old["choice_by_table"]), "pending": pending,
        "replaced": dict(old["replaced"]),
    }  # fmt: skip
    for fam, recs in ours.items():
        if methods.get(fam, METHOD) != METHOD:
            planned = {_cell_name(s.name) for s in plan_search(profile, [fam], (0,))}
            if not planned <= {_cell_name(n) for n in recs} or choose(recs) is None:
                pending[fam] = {"method": METHOD, "studies": recs}
                continue
            out["replaced"][fam] = {"method": methods[fam], "git_commit": commits.pop(fam, None),
                                    "studies": families[fam],
                                    "choice": choice.pop(fam, None)}  # fmt: skip
            pending.pop(fam, None)
        families[fam], methods[fam] = recs, METHOD
    # A choice moves once every study behind it, every family's, has tried the whole grid: while
    # a study added to a table (Task B's) is under way, no family's choice for it (or over all
    # tables) moves, so that the table never sets a family chosen with that task against one
    # chosen without it
    under_way = _tables_under_way(profile, out)
    for fam in [f for f in ours if f not in pending]:
        recs, kept = families[fam], out["choice_by_table"].get(fam, {})
        table = {name: _study(out, name)["table"] for name in recs}
        by_table = {t: {n: recs[n] for n in table if table[n] == t} for t in table.values()}
        new = {t: choose(st) for t, st in by_table.items() if t not in under_way}
        out["choice_by_table"][fam] = {t: c for t in by_table if (c := new.get(t) or kept.get(t))}
        if not under_way and (c := choose(recs)) is not None:
            choice[fam] = c
    out["printed"] = search_text(out)
    written = datetime.now(timezone.utc).isoformat(timespec="seconds")
    out["provenance"] = {**provenance(resolve_device("cpu"), git_info()), "written_utc": written}
    atomic_write_json(search_path(profile, results_dir), json_safe(out))
    return out


def _tables_under_way(profile: str, out: dict) -> set[str]:
    """The tables with a study of a family decided by this method, at a seed the family ran,
    that has not tried the whole grid (or not started)."""
    return {s.job.table for fam, recs in out["families"].items()
            if out["methods"].get(fam) == METHOD and fam in SEARCH_CELLS
            for s in plan_search(profile, [fam], _seeds(out, recs))
            if len(recs.get(s.name, ())) < len(_grid())}  # fmt: skip


def retire_superseded(profile: str, results_dir=None, dry_run: bool = False) -> list[tuple]:
    """``results.retire`` of ``profile``'s results into its newest ``SUPERSEDED`` twin, once every
    family trains with this method's choices and no table's are held (else ValueError: until
    then those results are ``profile``'s own experiments)."""
    if profile not in SUPERSEDED:
        raise ValueError(f"profile must be one of {sorted(SUPERSEDED)}, got {profile!r}")
    out = read_search(profile, results_dir)
    older = sorted(f for f, m in out["methods"].items() if m != METHOD)
    held = sorted(_tables_under_way(profile, out))
    if out["pending"] or older or held:
        raise ValueError(f"{profile}'s families do not all train with this search's choices yet "
                         f"(decided by an older search: {older}; held while a study of theirs "
                         f"is under way: {held}): nothing is another experiment")  # fmt: skip
    return retire(profile, SUPERSEDED[profile][0], results_dir, dry_run)


def _excess_text(c: dict) -> str:
    ranked = sorted(c["mean_relative_excess"].items(), key=lambda kv: kv[1])
    return (", ".join(f"{k}: {v:+.1%}" for k, v in ranked)
            + f" -> lr {c['train']['lr']:g}, {c['train']['schedule']}")  # fmt: skip


def _trial_lines(studies: dict[str, list[dict]]) -> list[str]:
    return [f"  {name:48s} lr {r['lr']:<6g} {r['schedule']:8s} {r['state']:8s} {r['epochs']:3d} "
            f"ep, best val loss {r['best_val_loss']:.4f} (epoch {r['best_epoch']})"
            + ("" if r["val_r2_at_best"] is None else f", val R^2 {r['val_r2_at_best']:.3f}")
            for name, recs in studies.items() for r in recs]  # fmt: skip


def search_text(out: dict) -> str:
    """The search as printed: every trial, each family's mean relative excess and choice (over
    all its studies and per table) and what it trains with while that choice waits
    (``specs.search_in_effect``), then the trials of a pending search."""
    lines = [f"search [{out['profile']}]: lr {out['grid']['lr']} x schedule "
             f"{out['grid']['schedule']}, pruned only after {out['min_epochs']} epochs "
             f"(successive halving, keep 1/{out['reduction_factor']})"]  # fmt: skip
    for fam, studies in out["families"].items():
        method = out["methods"].get(fam, CENSORED_METHOD)
        lines += [f"{fam} ({method}: {METHODS[method][1]})", *_trial_lines(studies)]
        if (c := out["choice"].get(fam)) is None:
            lines.append(f"{fam}: not decided (a study has configurations left to try)")
            continue
        lines.append(f"{fam}: mean relative excess val loss {_excess_text(c)}")
        for table, ct in out["choice_by_table"].get(fam, {}).items():
            lines.append(f"{fam} on {table}: {_excess_text(ct)}")
        if (now := search_in_effect(out)[fam]) is not c:
            lr, schedule = _train_config(now)
            lines.append(f"{fam} trains with lr {lr:g}, {schedule} (the search it replaced) "
                         f"until every family is decided by {method}")  # fmt: skip
    for fam, p in out["pending"].items():
        lines.append(f"{fam} pending ({p['method']}: {METHODS[p['method']][1]}; not decided yet, "
                     "the family trains with the choice above)")  # fmt: skip
        lines += _trial_lines(p["studies"])
    return "\n".join(lines)


def _words(config) -> str:  # a configuration, or a choice's, as the pages write it
    lr, schedule = _train_config(config) if isinstance(config, dict) else config
    return f"{rate_text(lr)}, {schedule}"


def _train_config(c: dict) -> tuple[float, str]:  # a choice's (rate, schedule)
    return c["train"]["lr"], c["train"]["schedule"]


def _records(studies: dict[str, list[dict]]) -> list[dict]:
    return [r for recs in studies.values() for r in recs]


def _per_schedule(records: list[dict]) -> dict[str, int]:
    return {s: sum(r["schedule"] == s for r in records) for s in SCHEDULES}


def _tally(studies: dict[str, list[dict]], planned: int | None = None, unit=" trials") -> str:
    """How many trials ``studies`` ran (of ``planned``) and how many of each schedule were
    pruned: the censoring a reader checks."""
    records = _records(studies)
    pruned = _per_schedule([r for r in records if r["state"] == "pruned"])
    per = ", ".join(f"{n} {s}" for s, n in pruned.items() if n)
    of = "" if planned is None else f" of {planned}"
    return f"{len(records)}{of}{unit} ({sum(pruned.values())} pruned{per and ': ' + per})"


def _seeds(out: dict, names) -> list[int]:
    return sorted({_study(out, name)["seed"] for name in names})


def _model_words(fam: str, cell) -> str:  # the paper's row name, a swapped-in model by its own
    return _nn.model_spec(cell.model).display if FAMILY_MODEL[fam] else cell.row


def choice_rows(profile: str, results_dir=None) -> list[dict]:
    """What the committed search of ``profile`` tried and chose, a dict per family in words:
    ``method``, ``trained`` (models, cells, seeds), ``trials``, ``choice``, ``runner_up`` and the
    paper's setting with their mean relative excess validation loss (None until decided),
    ``by_table``, the searches ``replaced`` and ``pending``, and ``waits``: what it trains with
    while another family is decided by another method (``specs.search_in_effect``), else None."""
    out = read_search(profile, results_dir)
    in_effect = search_in_effect(out)
    n_grid = len(_grid())
    rows = []
    for fam in SEARCH_CELLS:
        ran, method = out["families"].get(fam, {}), out["methods"].get(fam, METHOD)
        # its studies (planned ones before any ran); the method before issue 49 ran fewer cells
        seeds, cells = _seeds(out, ran) or list(SEEDS), {_cell_name(name) for name in ran}
        studies = [s for s in plan_search(profile, [fam], seeds)
                   if method == METHOD or _cell_name(s.name) in cells]  # fmt: skip
        trained = dict.fromkeys(f"{_model_words(fam, s.job.cell)} on {s.job.table} "
                                f"{s.job.cell.column}" for s in studies)  # fmt: skip
        old, p = out["replaced"].get(fam), out["pending"].get(fam)  # pages name no commit
        planned = p and len(plan_search(profile, [fam], _seeds(out, p["studies"]))) * n_grid
        row = {
            "family": FAMILY_NAMES[fam], "method": METHODS[method][0],
            "trained": "; ".join(trained) + f"; seeds {', '.join(map(str, seeds))}",
            "trials": _tally(ran, len(studies) * n_grid, ""),
            **dict.fromkeys(("choice", "excess", "runner_up", "runner_up_excess", "paper_excess")),
            "by_table": {t: _words(c) for t, c in out["choice_by_table"].get(fam, {}).items()},
            "replaced": old and f"{METHODS[old['method']][0]}: {_tally(old.get('studies', {}))}",
            "pending": p and f"{METHODS[p['method']][0]}: {_tally(p['studies'], planned)}",
            "waits": None,
        }  # fmt: skip
        if (c := out["choice"].get(fam)) is not None:
            ex, chosen, runner = c["mean_relative_excess"], _train_config(c), tuple(c["runner_up"])
            row.update(choice=_words(chosen), runner_up=_words(runner))
            row.update(excess=ex[_config_key(chosen)], runner_up_excess=ex[_config_key(runner)])
            row["paper_excess"] = ex.get(_config_key(PAPER_CONFIG))
            if in_effect[fam] is not c:
                row["waits"] = _words(in_effect[fam])
        rows.append(row)
    return rows


def choice_table(profile: str, results_dir=None) -> HTML:
    """``choice_rows`` as a page-width table (an excess of 0 % = the best of every study)."""
    rows = []
    for r in choice_rows(profile, results_dir):
        notes = [r["trained"], f"trials compared by {r['method']}"]
        notes += [f"replaced the search by {r['replaced']}"] if r["replaced"] else []
        notes += [f"the search by {r['pending']} is under way"] if r["pending"] else []
        if r["by_table"]:
            notes.append("chosen per table: " + "; ".join(map(": ".join, r["by_table"].items())))
        if r["waits"]:
            notes.append(f"until every family is decided by {r['method']}, it trains with "
                         f"{r['waits']} on every table (the choice of the search it "
                         "replaced)")  # fmt: skip
        rows.append({
            **r, "trained": "; ".join(notes),
            # a decided choice that waits for the other families'
            "choice": (r["choice"] or "not decided yet")
            + " (not in effect yet)" * (r["waits"] is not None),
            "excess": reading.num(r["excess"], "+.1%", "--"),
            "runner_up": "--" if r["runner_up"] is None
            else f"{r['runner_up']} ({reading.num(r['runner_up_excess'], '+.1%', '--')})",
            "paper": f"{_words(PAPER_CONFIG)} ({reading.num(r['paper_excess'], '+.1%', '--')})",
        })  # fmt: skip
    return comparison_table(
        rows,
        [("family", "family", 14), ("trials", "trials", 14), ("choice", "chosen", 16),
         ("excess", "its excess", 10), ("runner_up", "runner-up", 22),
         ("paper", "the paper's setting", 24)],
        caption=f"The learning-rate search of {reader_name(profile)} ({profile}): mean excess "
        "validation loss over the best configuration of each study (lower is better)",
        footnote_key="trained",
        footnote_title="What each family's studies train, how their trials were compared, and "
        "the choice per table",
    )  # fmt: skip


def _sources(out: dict, kinds=("pending", "replaced")) -> list[tuple[str, str, dict]]:
    """(family, method, {study name: records}) of each family's studies in search file ``out``:
    those that decided it, then those of ``kinds``."""
    decided = [(f, out["methods"].get(f, METHOD), st) for f, st in out["families"].items()]
    return decided + [(f, v["method"], v["studies"]) for k in kinds for f, v in out[k].items()]


def _cell_records(out: dict, fam: str) -> dict[str, tuple[str, dict]]:
    """``{cell name: (method, {study name: records})}`` of ``fam``'s complete studies in ``out``:
    per cell, this method's where it completed one, else the deciding method's; never both."""
    by_method: dict[str, dict[str, dict]] = {}
    for _, method, studies in [s for s in _sources(out, ("pending",)) if s[0] == fam]:
        for name, recs in studies.items():
            if len(recs) == len(_grid()):
                by_method.setdefault(_cell_name(name), {}).setdefault(method, {})[name] = recs
    return {cell: (METHOD, done[METHOD]) if METHOD in done else next(iter(done.items()))
            for cell, done in by_method.items()}  # fmt: skip


def best_setting_rows(profile: str, tables=("tab:main-results",), results_dir=None) -> list[dict]:
    """The labelled ablation of issue 49: each family's best configuration on each searched cell of
    ``tables`` beside the table's choice (what its verdicts train with), in words, with their mean
    validation R^2 at the best epoch (None until a cell's study is done); test is the verdict's."""
    out = read_search(profile, results_dir)
    rows = []
    for fam in SEARCH_CELLS:
        cells = _cell_records(out, fam)
        for study in [s for s in plan_search(profile, [fam], (0,)) if s.job.table in tables]:
            job, (method, records) = study.job, cells.get(_cell_name(study.name), (METHOD, {}))
            best, recs = choose(records), _records(records)
            row = {
                "label": ABLATION_LABEL, "family": FAMILY_NAMES[fam],
                "method": METHODS[method][0], "table": job.table, "cell": job.cell.id,
                "model": _model_words(fam, job.cell), "column": job.cell.column,
                "seeds": _seeds(out, records),
                **dict.fromkeys(("best", "best_val_r2", "chosen", "chosen_val_r2")),
            }  # fmt: skip
            trains = search_choice(profile, results_dir, table=job.table).get(fam)
            for key, c in (("best", best), ("chosen", trains and {"train": trains})):
                if c is not None:
                    # its validation R^2 at the best epoch, averaged over the complete studies
                    config = _train_config(c)
                    r2 = [r["val_r2_at_best"] for r in recs if (r["lr"], r["schedule"]) == config]
                    row[key] = _words(c)
                    row[f"{key}_val_r2"] = None if not r2 or None in r2 else sum(r2) / len(r2)
            rows.append(row)
    return rows


def best_setting_table(profile: str, tables=("tab:main-results",), results_dir=None) -> HTML:
    rows = [
        {**r, "who": f"{r['model']} ({r['family']})",
         "best": f"{r['best']} ({reading.num(r['best_val_r2'], missing='--')})" if r["best"]
         else "not searched yet",
         "chosen": f"{r['chosen']} ({reading.num(r['chosen_val_r2'], missing='--')})" if r["chosen"]
         else "--",
         "note": f"{r['label']}; trials compared by {r['method']}; seeds "
         f"{', '.join(map(str, r['seeds'])) or 'none yet'}"}
        for r in best_setting_rows(profile, tables, results_dir)
    ]  # fmt: skip
    return comparison_table(
        rows,
        [("who", "model (family)", 28), ("column", "cell", 24),
         ("best", "best setting (val R^2)", 24), ("chosen", "the table's choice (val R^2)", 24)],
        caption=f"Ablation, not a verdict: each family's best learning-rate setting per cell under "
        f"{reader_name(profile)} ({profile}), chosen and scored on the validation split",
        footnote_key="note",
        footnote_title="How each row was chosen",
    )  # fmt: skip


def expected_epochs(schedule: str, cap: int) -> float:
    """Epochs one configuration of ``schedule`` trains when each rung keeps ``1/REDUCTION`` of
    the trials reaching it and no run stops early (the pruner's upper bound)."""
    *sized, _ = rung_runs(schedule, cap)
    total = sum(length / REDUCTION**k for k, length in enumerate(sized))
    keep, last = 1 / REDUCTION ** len(sized), 0
    for r in rungs(cap)[len(sized) :]:
        total += keep * (r - last)
        keep, last = keep / REDUCTION, r
    return total + keep * (cap - last)


def price(profile: str, families=None, seeds=SEEDS, results_dir=None, cache_dir=None) -> str:
    """What the trials not finished in their study's journal would cost at ``plan``'s seconds per
    epoch of each study's cell: under successive halving (``expected_epochs``) and to the cap."""
    studies = plan_search(profile, families, seeds)
    grid, cap = _grid(), get_profile(profile).train["epochs"]
    measured, timed = _plan._measured(results_dir), {}
    lines, total_cap, total_sh, n_left = [], 0.0, 0.0, 0
    for s in studies:
        done = {(r["lr"], r["schedule"]) for r in trials(s, cache_dir)}
        left = [c for c in grid if c not in done]
        n_left += len(left)
        # measuring, plan prices every model: from results, else timed now
        unit, source = _plan._unit_cost(s.job.table, s.job.cell, measured, timed, True, profile)
        sec = unit * _plan._units(s.job.sizes)
        total_cap += len(left) * cap * sec / 3600
        total_sh += sum(expected_epochs(sched, cap) for _, sched in left) * sec / 3600
        lines.append(f"  {s.name:50s} {sec:6.1f} s/epoch ({source}), "
                     f"{len(left)} of {len(grid)} configurations left")  # fmt: skip
    lines.append(
        f"{len(studies)} studies, {n_left} of {len(studies) * len(grid)} configurations left: "
        f"{total_sh:.1f} CPU h with pruning at rungs {rungs(cap)} (upper bound; {METHOD}), "
        f"{total_cap:.1f} CPU h if every trial ran to the {cap}-epoch cap"
    )
    return "\n".join(lines)


def censoring(profile: str = "paper-sizes", results_dir=None) -> dict[str, dict]:
    """How each method of the committed search of ``profile`` treated the two schedules, from
    all its trials: ``{method: {"trials", "pruned", "pruned_at_first_rung": {schedule: n},
    "studies": n, "cosine_best": n (studies whose best trial is a cosine)}}``."""
    by_method: dict[str, dict[str, list]] = {}
    for _, method, studies in _sources(read_search(profile, results_dir)):
        by_method.setdefault(method, {}).update(studies)
    counts = {}
    for method, studies in by_method.items():
        recs = _records(studies)
        pruned = [r for r in recs if r["state"] == "pruned"]
        first = min((r["epochs"] for r in pruned), default=None)
        counts[method] = {
            "trials": _per_schedule(recs), "pruned": _per_schedule(pruned),
            "pruned_at_first_rung": _per_schedule([r for r in pruned if r["epochs"] == first]),
            "studies": len(studies),
            "cosine_best": sum(min(rs, key=lambda r: r["best_val_loss"])["schedule"] == "cosine"
                               for rs in studies.values() if rs),
        }  # fmt: skip
    return counts


def reading_entry(profile: str = "paper-sizes", results_dir=None) -> dict:
    """The reading page's entry (``reading.Choice``'s fields) on how the search of ``profile``
    compares schedules: ``reading.SEARCH_ENTRY`` filled from its grid, rungs, the cap's cosine at
    the first rung as a share of its peak (where the search before issue 49 judged a cosine), the
    price of every trial to the cap over successive halving's and that search's ``censoring``."""
    train = get_profile(profile).train
    cap = train["epochs"]
    first = rungs(cap)[0] if rungs(cap) else cap
    cosine = TrainConfig(lr=1.0, epochs=cap, warmup_epochs=train.get("warmup_epochs", 0))
    old, entry = censoring(profile, results_dir).get(CENSORED_METHOD), reading.SEARCH_ENTRY
    numbers = {
        "lr_low": rate_text(LRS[0]), "lr_high": rate_text(LRS[-1]), "n_lrs": len(LRS),
        "schedules": " or ".join(SCHEDULES), "seeds": ", ".join(map(str, SEEDS)),
        "reduction": REDUCTION, "rungs": ", ".join(map(str, rungs(cap))), "first_rung": first,
        "rate_at_first_rung": lr_at(first * 10 - 1, 10, cosine),
        "unpruned": len(_grid()) * cap / sum(expected_epochs(s, cap) for _, s in _grid()),
        "censored_counts": "" if old is None else entry["censored_counts"].format(**old),
    }  # fmt: skip
    return {f: entry[f].format(**numbers) for f in reading.Choice.__dataclass_fields__}
