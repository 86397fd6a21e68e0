"""The learning-rate search of a profile: each model family's learning rate and schedule, chosen
on the validation split by runs that go far enough to be judged (issue 33), and judged so that a
schedule that starts slowly is not censored (issue 49). It replaces the 10-epoch probe
(``benchmarks/lr_probe.py``), which favoured whatever learns fastest.

    python -m mzlite search paper-sizes --dry-run          # the trials and what they cost
    python -m mzlite search paper-sizes --families mz      # run them (resumes), write the choice

What runs (``plan_search``): for each family, the grid ``LRS`` x ``SCHEDULES`` on the family's
``SEARCH_CELLS`` (Tasks F and G of tab:main-results, tab:tdof-verify L = 16) at the profile's
sizes, seeds ``SEEDS``; one Optuna study per (family, cell, seed) over the grid. Each trial is
``fit`` under the profile's protocol with the trial's rate and schedule, checkpointed every epoch
(an interrupted trial resumes). Optuna's successive halving prunes a configuration only at its
rungs, the first after ``MIN_EPOCHS`` epochs (then 3x and 9x that), keeping the best third. The
test split is never read.

How trials are compared at a rung (``METHOD``, ``rung_runs``): every trial is judged by what its
schedule reaches within the rung's epochs. A plateau schedule has no length: it anneals whenever
the validation loss stalls, so its run is continued from rung to rung and judged by its best
validation loss so far. A cosine is sized to its rung: judged at rung r, the trial has just
finished a cosine of length r, so its value at r is a finished value; promoted, it trains a
cosine of the next length from the start, and past the last sized rung it runs the profile's own
cosine over the epoch cap, the configuration a chosen cosine trains with. The search before
issue 49 judged a cosine over the 200-epoch cap at epoch 20, where its rate is still about its
peak, against a plateau that had annealed, and pruned most cosine trials at the first rung
(``censoring`` counts them). ``reading_entry`` is the reading page's account: why this comparison
and not another, and why the choice is made per table.

The choice (``choose``): each configuration's best validation loss relative to the best of its
study (a pruned trial counts with the best loss it had reached), averaged over studies; the
smallest rate within ``TIE`` of the lowest mean wins, as the probe's rule did. It is made per
family and table (``choice_by_table``, what a searched profile trains each searched table with)
and per family over every study (``choice``, what it trains the tables no study ran on with).
A family decided by the search before issue 49 keeps that choice, labelled with its method,
until this search has decided it (its studies wait under ``"pending"``; ``write_search``).
``best_setting_rows`` is the labelled ablation: each family's best configuration on each
searched cell. The trials and the choices are written, with provenance, to
``search_path(profile)`` (``data/results/lr-search/<profile>.json``), which the profile reads
(``Profile.searched``); ``--write-only`` writes it from the journals of an interrupted search."""

from __future__ import annotations

import dataclasses
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

from . import plan as _plan
from .execute import build_cell_model, git_info, job_splits, provenance
from .jobs import Job, job
from .pool import spawn_pool
from .protocols import rate_text, reader_name
from .specs import default_cache_dir, model_family, search_path
from .tables import get_profile

LRS = (1e-4, 3e-4, 1e-3, 3e-3)  # 1e-4 is the paper's
SCHEDULES = ("plateau", "cosine")  # cosine: to 0 over the profile's epoch cap (the paper's)
SEEDS = (0, 1)
MIN_EPOCHS = 20  # no trial is pruned before this many epochs
REDUCTION = 3  # successive halving keeps the best third at each rung
TIE = 0.02  # configurations within 2 % of the lowest mean relative loss are tied
# (table, cell) of each family; None as cell id: the family's model on the cell named after it
SEARCH_CELLS = {
    "mz": (("tab:main-results", "F-mz_full"), ("tab:main-results", "G-mz_full"),
           ("tab:tdof-verify", "L16-mz_1l")),
    "baseline": (("tab:main-results", "F-st"), ("tab:main-results", "G-st"),
                 ("tab:tdof-verify", "L16-st_4l")),
    "deepsets": (("tab:main-results", "F-deepsets"), ("tab:main-results", "G-deepsets"),
                 ("tab:tdof-verify", "L16-st_4l")),
}  # fmt: skip
FORMAT = "mzlite.lr-search/2"
# How a study's trials are compared at a rung; part of the journals' path and of every family's
# record in the search file, so that trials judged one way never mix with trials judged another.
METHOD = "rung-sized-cosine"
# The search before issue 49 (format 1, written at 9473af9): every trial ran its schedule over
# the epoch cap and was judged at the rungs by its best validation loss so far.
CENSORED_METHOD = "cosine-over-the-cap"
METHODS = {
    METHOD: "a cosine sized to its rung (judged at rung r after a cosine of length r), a plateau "
    "continued from rung to rung",
    CENSORED_METHOD: "every schedule over the 200-epoch cap, judged at the rungs by its best "
    "validation loss so far: a cosine is judged at 99 % of its peak rate (the search before "
    "issue 49; it censors cosine)",
}
FAMILY_MODEL = {"mz": None, "baseline": None, "deepsets": "deepsets"}  # a model to swap in


@dataclass(frozen=True)
class Study:
    """One (family, cell, seed): its trials are the grid's configurations on this job."""

    family: str
    job: Job

    @property
    def name(self) -> str:
        c = self.job.cell
        return f"{self.family}-{self.job.table.replace(':', '-')}-{c.id}-seed{self.job.seed}"

    def record(self) -> dict:
        """What the study trained, as the search file records it under ``"studies"``."""
        j = self.job
        return {"family": self.family, "table": j.table, "cell": j.cell.id, "seed": j.seed}

    def configs(self) -> list[tuple[float, str]]:
        return [(lr, s) for lr in LRS for s in SCHEDULES]


def plan_search(profile: str, families=None, seeds=SEEDS) -> list[Study]:
    """The studies of ``profile``'s search for ``families`` (default: every family)."""
    prof = get_profile(profile)
    if not prof.searched:
        raise ValueError(f"profile {prof.name} takes no searched rates (Profile.searched is False)")
    fams = list(SEARCH_CELLS) if families is None else list(families)
    bad = sorted(set(fams) - set(SEARCH_CELLS))
    if bad:
        raise ValueError(f"families must be among {sorted(SEARCH_CELLS)}, got {bad}")
    studies = []
    for fam in fams:
        for table, cell_id in SEARCH_CELLS[fam]:
            for seed in seeds:
                j = job(table, cell_id, prof.name, seed)
                if FAMILY_MODEL[fam] and j.cell.model != FAMILY_MODEL[fam]:
                    cell = dataclasses.replace(
                        j.cell, id=f"{j.cell.id}-as-{FAMILY_MODEL[fam]}",
                        model=FAMILY_MODEL[fam], model_kwargs={}, match_params=None,
                    )  # fmt: skip
                    j = dataclasses.replace(j, cell=cell)
                if model_family(j.cell.model) != fam:
                    raise ValueError(f"{table} {cell_id} is not a {fam} model")
                studies.append(Study(fam, j))
    return studies


def search_dir(profile: str, cache_dir=None) -> Path:
    """The studies' journals and the trials' checkpoints (never committed), by ``METHOD``: a
    journal of trials judged another way is never resumed as if it were this search's."""
    return Path(cache_dir or default_cache_dir()) / "lr-search" / profile / METHOD


def rungs(cap: int) -> list[int]:
    """The successive-halving rungs below the epoch cap ``cap``: ``MIN_EPOCHS``, then each
    ``REDUCTION`` times the last (20, 60, 180 under a 200-epoch cap)."""
    out, r = [], MIN_EPOCHS
    while r < cap:
        out.append(r)
        r *= REDUCTION
    return out


def rung_runs(schedule: str, cap: int) -> list[int]:
    """The epoch caps of the runs a trial of ``schedule`` trains, in order, each from the start.

    A plateau: one run to ``cap``, judged at every rung on the way; its rate depends on the
    validation curve, not on a length, so the epochs it has run are all a longer run would have
    run. A cosine: a run the length of each rung, judged at its end, where the cosine has
    finished, then the run over ``cap`` (the profile's cosine, which a chosen cosine trains
    with). A rung whose next rung lies past the cap gets no run of its own: the cap's cosine is
    judged there, nearly finished (at 180 of 200 epochs its rate is 2.4 % of its peak), so that
    the trial does not train twice for almost the same length."""
    if schedule != "cosine":
        return [cap]
    return [r for r in rungs(cap) if r * REDUCTION <= cap] + [cap]


def _trial_config(study: Study, lr: float, schedule: str, epochs: int):
    cfg = study.job.train_config()
    warmup = min(cfg.warmup_epochs, epochs)  # a sized run shorter than the warm-up warms up whole
    return dataclasses.replace(cfg, lr=lr, schedule=schedule, epochs=epochs, warmup_epochs=warmup)


def _report_value(best: float) -> float:
    # Optuna refuses inf: a diverged run reports a loss no finite one exceeds
    return best if math.isfinite(best) else 1e30


class _Reporter:
    """``fit`` callback of a run that is judged as it trains (a plateau's, or the cap's cosine
    past its sized rungs): reports the best validation loss so far of every epoch after
    ``after`` not yet reported (a resumed run first catches up on its checkpoint's epochs), then
    asks the pruner. Epochs up to ``after`` were judged on the trial's sized runs."""

    def __init__(self, trial, after: int = 0):
        self.trial, self.reported = trial, after

    def catch_up(self, hist) -> None:
        losses = hist.val_loss
        for e in range(self.reported + 1, len(losses) + 1):
            best = min((v for v in losses[:e] if math.isfinite(v)), default=math.inf)
            self.trial.report(_report_value(best), e)
        self.reported = max(self.reported, len(losses))

    def __call__(self, epoch, hist, model) -> bool:
        self.catch_up(hist)
        return self.trial.should_prune()


def _optuna():
    try:
        import optuna
    except ImportError as e:
        raise ImportError(
            "the learning-rate search needs Optuna: pip install 'mzlite[search]' (or optuna)"
        ) from e
    return optuna


def _journal(study: Study, cache_dir=None) -> Path:
    return search_dir(study.job.profile.name, cache_dir) / f"{study.name}.journal"


def _storage(study: Study, cache_dir=None):
    optuna = _optuna()

    path = _journal(study, cache_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    backend = optuna.storages.journal.JournalFileBackend(str(path))
    return optuna.storages.JournalStorage(backend)


def _optuna_study(study: Study, cache_dir=None):
    optuna = _optuna()

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    pruner = optuna.pruners.SuccessiveHalvingPruner(
        min_resource=MIN_EPOCHS, reduction_factor=REDUCTION
    )
    return optuna.create_study(
        study_name=study.name, storage=_storage(study, cache_dir), direction="minimize",
        pruner=pruner, load_if_exists=True,
    )  # fmt: skip


def _checkpoint(study: Study, lr: float, schedule: str, epochs: int, cap: int, cache_dir):
    """Where one run of a trial checkpoints: the cap's run as ``lr<lr>-<schedule>.pt``, a sized
    run with its length, so that a resumed trial finds each of its runs."""
    sized = "" if epochs == cap else f"-{epochs}ep"
    return (
        search_dir(study.job.profile.name, cache_dir)
        / study.name
        / (f"lr{lr:g}-{schedule}{sized}.pt")
    )


def run_trial(study: Study, trial, lr: float, schedule: str, data, *, cache_dir=None) -> dict:
    """Train one trial's runs (``rung_runs``), judging it at every rung, and tell Optuna how it
    ended; returns its record (``_record``). ``data``: the study's (train, validation) splits."""
    TrialState = _optuna().trial.TrialState

    j, (tr, va) = study.job, data
    cap = j.train_config().epochs
    lengths = rung_runs(schedule, cap)
    runs, ckpts, pruned, hist = [], [], False, None
    for i, epochs in enumerate(lengths):
        cfg = _trial_config(study, lr, schedule, epochs)
        ckpt = _checkpoint(study, lr, schedule, epochs, cap, cache_dir)
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        ckpts.append(ckpt)
        model = build_cell_model(j.cell, tr.d_in, tr.d_out, j.seed, resolve_device(j.device))
        if epochs == cap:  # judged as it trains, at the rungs past the sized runs
            reporter = _Reporter(trial, after=lengths[i - 1] if i else 0)
            hist = fit(model, tr, va, cfg, checkpoint_path=ckpt, progress=False,
                       callbacks=[reporter])  # fmt: skip
            reporter.catch_up(hist)
            pruned = hist.stop_reason == "callback"
        else:  # a cosine sized to its rung: judged once, at its end
            hist = fit(model, tr, va, cfg, checkpoint_path=ckpt, progress=False)
            trial.report(_report_value(hist.best_val_loss), epochs)
            pruned = trial.should_prune()
        best = hist.best_val_loss if hist.best_epoch else math.inf
        runs.append({"epochs": epochs, "epochs_run": hist.epochs_run, "best_val_loss": best})
        if pruned:
            break
    record = _record(hist, lr, schedule, pruned, runs)
    for k, v in record.items():
        trial.set_user_attr(k, v)
    if pruned:
        trial.study.tell(trial, state=TrialState.PRUNED)
    else:
        trial.study.tell(trial, record["best_val_loss"])
    for ckpt in ckpts:
        ckpt.unlink(missing_ok=True)
    return record


def run_study(study: Study, *, cache_dir=None, say=print) -> list[dict]:
    """Run the configurations of ``study`` not finished yet, in grid order; returns every trial's
    record. A trial left running by an interrupted process is failed and asked again: its runs'
    checkpoints make it resume where it stopped."""
    TrialState = _optuna().trial.TrialState

    ost = _optuna_study(study, cache_dir)
    for t in ost.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        ost.tell(t.number, state=TrialState.FAIL)
    finished = {(t.params["lr"], t.params["schedule"])
                for t in ost.get_trials(deepcopy=False)
                if t.state in (TrialState.COMPLETE, TrialState.PRUNED)}  # fmt: skip
    data = None
    for lr, schedule in study.configs():
        if (lr, schedule) in finished:
            continue
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
    """A trial of exactly (lr, schedule), its parameters over the whole grid (Optuna keeps one
    distribution per parameter across a study)."""
    CategoricalDistribution = _optuna().distributions.CategoricalDistribution

    ost.enqueue_trial({"lr": lr, "schedule": schedule}, skip_if_exists=False)
    grid = {"lr": CategoricalDistribution(LRS), "schedule": CategoricalDistribution(SCHEDULES)}
    return ost.ask(fixed_distributions=grid)


def _record(hist, lr, schedule, pruned: bool, runs: list[dict]) -> dict:
    """A trial as the search file records it, from the history of its last run: ``runs``, every
    run it trained (``rung_runs``: its length, the epochs it ran, its best validation loss)."""
    best = hist.best_epoch
    r2 = hist.val_metrics[best - 1].get("r2") if best else None
    return {
        "lr": lr,
        "schedule": schedule,
        "state": "pruned" if pruned else "complete",
        "stop_reason": hist.stop_reason,
        "epochs": hist.epochs_run,
        "best_epoch": best,
        "best_val_loss": hist.best_val_loss if best else math.inf,
        "val_r2_at_best": r2,
        "wall_time_s": hist.wall_time_s,
        "runs": runs,
        "epochs_trained": sum(r["epochs_run"] for r in runs),
    }


def trials(study: Study, cache_dir=None) -> list[dict]:
    """The finished trials of ``study`` as records (``_record``), in grid order. Reading leaves
    the journal as it is (creating the study would append to it); no journal: no trials."""
    optuna = _optuna()
    TrialState = optuna.trial.TrialState

    if not _journal(study, cache_dir).exists():
        return []
    ost = optuna.load_study(study_name=study.name, storage=_storage(study, cache_dir))
    by_config = {}
    for t in ost.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)):
        by_config[(t.params["lr"], t.params["schedule"])] = dict(t.user_attrs)
    return [by_config[c] for c in study.configs() if c in by_config]


def _config_key(config: tuple[float, str]) -> str:
    """A configuration as the search file keys it: ``"0.001 plateau"``."""
    return f"{config[0]:g} {config[1]}"


def choose(records: dict[str, list[dict]]) -> dict | None:
    """The choice for one family from ``{study name: its trial records}``: each configuration's
    best validation loss relative to the best of its study, averaged over the studies; the
    smallest rate within ``TIE`` of the lowest mean. None unless every study tried every
    configuration of the grid."""
    grid = [(lr, s) for lr in LRS for s in SCHEDULES]
    if not records or any(len(r) < len(grid) for r in records.values()):
        return None
    excess = {c: [] for c in grid}
    for recs in records.values():
        best = min(r["best_val_loss"] for r in recs)
        for r in recs:
            excess[(r["lr"], r["schedule"])].append(r["best_val_loss"] / best - 1.0)
    mean = {c: sum(v) / len(v) for c, v in excess.items()}
    low = min(mean.values())
    tied = [c for c in grid if mean[c] <= low + TIE]
    lr, schedule = min(tied, key=lambda c: (c[0], mean[c]))
    return {
        "train": {"lr": lr, "schedule": schedule},
        "mean_relative_excess": {_config_key(c): mean[c] for c in grid},
        "runner_up": min((c for c in grid if c != (lr, schedule)), key=mean.__getitem__),
    }


def search(profile: str, families=None, seeds=SEEDS, *, cache_dir=None, results_dir=None,
           workers: int = 1, threads: int = 1, say=print) -> dict:  # fmt: skip
    """Run (or resume) the search of ``profile`` for ``families`` and write its file: every
    family's trials so far and the choice of each family whose studies are complete (the
    families already decided in the file are kept). ``workers`` processes run studies side by
    side, each with ``threads`` torch threads; the file is written once they are all done."""
    for name, v in (("workers", workers), ("threads", threads)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    studies = plan_search(profile, families, seeds)
    prof = get_profile(profile)
    say(f"search [{prof.name}]: {len(studies)} studies x {len(LRS) * len(SCHEDULES)} "
        f"configurations, pruning after {MIN_EPOCHS} epochs, {workers} worker(s)")  # fmt: skip
    if workers == 1:
        torch.set_num_threads(threads)
        for s in studies:
            run_study(s, cache_dir=cache_dir, say=say)
    else:
        with spawn_pool(workers, threads) as pool:
            futures = [pool.submit(_run_in_worker, s, cache_dir) for s in studies]
            for f in futures:
                f.result()  # each worker prints its trials as they finish
    return write_search(profile, studies, cache_dir=cache_dir, results_dir=results_dir)


def _run_in_worker(study: Study, cache_dir) -> None:
    run_study(study, cache_dir=cache_dir, say=lambda line: print(line, flush=True))


def read_search(profile: str, results_dir=None) -> dict:
    """The search file of ``profile`` in this module's format (``FORMAT``), an empty search when
    there is none. A file of the search before issue 49 (format 1) reads with each of its
    families' ``method`` set to ``CENSORED_METHOD`` and no choice per table."""
    path = search_path(profile, results_dir)
    if not path.exists():
        return {"families": {}, "methods": {}, "studies": {}, "choice": {},
                "choice_by_table": {}, "pending": {}, "replaced": {}}  # fmt: skip
    out = json.loads(path.read_text())
    if out.get("format") != FORMAT:
        out["methods"] = dict.fromkeys(out.get("families", {}), CENSORED_METHOD)
        out["commits"] = dict.fromkeys(
            out.get("families", {}), out.get("provenance", {}).get("git_commit")
        )
    for key in ("families", "methods", "studies", "choice", "choice_by_table", "pending",
                "replaced"):  # fmt: skip
        out.setdefault(key, {})
    return out


def _study_table(out: dict, name: str) -> str:
    """The table study ``name`` of a search file trained on (``Study.record``)."""
    record = out["studies"].get(name)
    if record:
        return record["table"]
    return next(t for t in ("tab:main-results", "tab:tdof-verify")
                if name.split("-", 1)[1].startswith(t.replace(":", "-")))  # fmt: skip


def choose_by_table(out: dict, family: str) -> dict[str, dict]:
    """``choose`` over the studies of each table of ``family`` in search file ``out``: the
    tables whose studies have all tried the whole grid."""
    by_table: dict[str, dict] = {}
    for name, recs in out["families"].get(family, {}).items():
        by_table.setdefault(_study_table(out, name), {})[name] = recs
    chosen = {t: choose(studies) for t, studies in by_table.items()}
    return {t: c for t, c in chosen.items() if c is not None}


def _cell_name(name: str) -> str:
    """A study's name less its seed: the (family, table, cell) it trains."""
    return name.rsplit("-seed", 1)[0]


def write_search(profile: str, studies, *, cache_dir=None, results_dir=None) -> dict:
    """Write ``search_path(profile)`` atomically from the studies' journals.

    A family decided by another method before (``read_search``'s ``methods``: the search before
    issue 49) keeps that choice until this method's studies of it cover every cell of
    ``SEARCH_CELLS`` and choose; until then they are kept under ``"pending"``, then the old
    trials and choice move to ``"replaced"``. So trials judged two ways never mix in one
    choice, and a profile never loses a family's rate to a search half done."""
    path = search_path(profile, results_dir)
    old = read_search(profile, results_dir)
    families = {fam: dict(recs) for fam, recs in old["families"].items()}
    methods, commits = dict(old["methods"]), dict(old.get("commits", {}))
    choice, by_table = dict(old["choice"]), dict(old["choice_by_table"])
    replaced, pending = dict(old["replaced"]), dict(old.get("pending", {}))
    ran = [(s, trials(s, cache_dir)) for s in studies]
    ran = [(s, recs) for s, recs in ran if recs]  # a study with no journal never ran
    recorded = {**old["studies"], **{s.name: s.record() for s, _ in ran}}
    # this method's trials of each family the run touched, merged per study: a run of some
    # seeds keeps the trials of the studies it did not run
    ours = {
        fam: dict(families.get(fam, {}) if methods.get(fam, METHOD) == METHOD
                  else pending.get(fam, {}).get("studies", {}))
        for fam in dict.fromkeys(s.family for s, _ in ran)
    }  # fmt: skip
    for s, recs in ran:
        ours[s.family][s.name] = recs
    decided = []
    for fam, recs in ours.items():
        if methods.get(fam, METHOD) != METHOD:
            planned = {_cell_name(s.name) for s in plan_search(profile, [fam], (0,))}
            if not planned <= {_cell_name(n) for n in recs} or choose(recs) is None:
                pending[fam] = {"method": METHOD, "studies": recs}
                continue
            replaced[fam] = {
                "method": methods[fam],
                "git_commit": commits.pop(fam, None),
                "studies": families[fam],
                "choice": choice.pop(fam, None),
            }
            pending.pop(fam, None)
        families[fam], methods[fam] = recs, METHOD
        decided.append(fam)
    out = {
        "format": FORMAT,
        "profile": profile,
        "grid": {"lr": list(LRS), "schedule": list(SCHEDULES)},
        "min_epochs": MIN_EPOCHS,
        "reduction_factor": REDUCTION,
        "tie": TIE,
        "methods": methods,
        # the commit of a family's search where it is not this file's (a format-1 family)
        "commits": commits,
        "families": families,
        # what each study trained, so that readers need not parse it back from its name
        "studies": recorded,
        "choice": choice,
        "choice_by_table": by_table,
        "pending": pending,
        "replaced": replaced,
    }
    for fam in decided:
        c = choose(families[fam])
        if c is not None:
            out["choice"][fam] = c
        out["choice_by_table"][fam] = choose_by_table(out, fam)
    out["printed"] = search_text(out)
    out["provenance"] = {
        **provenance(resolve_device("cpu"), git_info()),
        "written_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    atomic_write_json(path, json_safe(out))
    return out


def _study_seed(out: dict, name: str) -> int:
    """The seed study ``name`` of a search file ran: its record (``write_search``); a file
    written before studies were recorded (the paper-sizes search's, at 9473af9) only has the
    name, ``Study.name``'s "...-seed<k>"."""
    record = out.get("studies", {}).get(name)
    return record["seed"] if record else int(name.rsplit("-seed", 1)[1])


def _excess_text(c: dict) -> str:
    ranked = sorted(c["mean_relative_excess"].items(), key=lambda kv: kv[1])
    return (", ".join(f"{k}: {v:+.1%}" for k, v in ranked)
            + f" -> lr {c['train']['lr']:g}, {c['train']['schedule']}")  # fmt: skip


def _trial_lines(studies: dict[str, list[dict]]) -> list[str]:
    lines = []
    for name, recs in studies.items():
        for r in recs:
            r2 = "" if r["val_r2_at_best"] is None else f", val R^2 {r['val_r2_at_best']:.3f}"
            lines.append(
                f"  {name:48s} lr {r['lr']:<6g} {r['schedule']:8s} {r['state']:8s} "
                f"{r['epochs']:3d} ep, best val loss {r['best_val_loss']:.4f} "
                f"(epoch {r['best_epoch']}){r2}"
            )
    return lines


def search_text(out: dict) -> str:
    """The search as printed: every trial, then each family's mean relative excess and choice,
    over all its studies and per table; then the trials of a search pending for a family."""
    lines = [
        f"search [{out['profile']}]: lr {out['grid']['lr']} x schedule "
        f"{out['grid']['schedule']}, pruned only after {out['min_epochs']} epochs "
        f"(successive halving, keep 1/{out['reduction_factor']})"
    ]
    for fam, studies in out["families"].items():
        method = out.get("methods", {}).get(fam, CENSORED_METHOD)
        lines.append(f"{fam} ({method}: {METHODS[method]})")
        lines += _trial_lines(studies)
        c = out["choice"].get(fam)
        if c is None:
            lines.append(f"{fam}: not decided (a study has configurations left to try)")
            continue
        lines.append(f"{fam}: mean relative excess val loss {_excess_text(c)}")
        for table, ct in out.get("choice_by_table", {}).get(fam, {}).items():
            lines.append(f"{fam} on {table}: {_excess_text(ct)}")
    for fam, p in out.get("pending", {}).items():
        lines.append(f"{fam} pending ({p['method']}: {METHODS[p['method']]}; not decided yet, "
                     "the family trains with the choice above)")  # fmt: skip
        lines += _trial_lines(p["studies"])
    return "\n".join(lines)


FAMILY_NAMES = {"mz": "MZAttn", "baseline": "attention baselines", "deepsets": "Deep Sets"}
METHOD_NAMES = {
    METHOD: "a cosine sized to its rung",
    CENSORED_METHOD: "the cap's cosine at the rungs",
}
PAPER_CONFIG = (1e-4, "cosine")  # app:impl: AdamW 1e-4, cosine to 0


def _config_words(config: tuple[float, str]) -> str:
    return f"{rate_text(config[0])}, {config[1]}"


def _pruned_text(records: list[dict]) -> str:
    """How many of ``records`` were pruned, and of which schedule: the censoring a reader checks."""
    pruned = [r["schedule"] for r in records if r["state"] == "pruned"]
    per = ", ".join(f"{pruned.count(s)} {s}" for s in SCHEDULES if s in pruned)
    return f"{len(pruned)} pruned" + (f": {per}" if per else "")


def _trained_text(fam: str, studies: list[Study], seeds) -> str:
    """The models and cells ``studies`` train, in the paper's row names (a swapped-in model by
    its own name), and their seeds."""
    trained = dict.fromkeys(
        f"{_nn.model_spec(s.job.cell.model).display if FAMILY_MODEL[fam] else s.job.cell.row}"
        f" on {s.job.table} {s.job.cell.column}"
        for s in studies
    )
    return "; ".join(trained) + f"; seeds {', '.join(map(str, seeds))}"


def _family_studies(out: dict, profile: str, fam: str) -> tuple[list[Study], list[int]]:
    """The studies of ``fam`` in search file ``out`` (planned ones before any ran) and their
    seeds. A family searched by the method before issue 49 ran the cells it had then."""
    ran = out["families"].get(fam, {})
    seeds = sorted({_study_seed(out, name) for name in ran}) or list(SEEDS)
    studies = plan_search(profile, [fam], seeds)
    if out["methods"].get(fam, METHOD) != METHOD:  # its cells: the names less their seeds
        cells = {name.rsplit("-seed", 1)[0] for name in ran}
        studies = [s for s in studies if s.name.rsplit("-seed", 1)[0] in cells]
    return studies, seeds


def _pending_text(out: dict, profile: str, fam: str) -> str | None:
    """The progress of this method's search of ``fam`` where another method's choice still
    stands, in words; None where none is pending."""
    p = out["pending"].get(fam)
    if p is None:
        return None
    seeds = sorted({_study_seed(out, name) for name in p["studies"]})
    planned = len(plan_search(profile, [fam], seeds)) * len(LRS) * len(SCHEDULES)
    records = [r for recs in p["studies"].values() for r in recs]
    return (f"{METHOD_NAMES[p['method']]}: {len(records)} of {planned} trials "
            f"({_pruned_text(records)})")  # fmt: skip


def choice_rows(profile: str, results_dir=None) -> list[dict]:
    """What the committed search of ``profile`` tried and chose, one dict per family:
    ``family`` (in words), ``method`` (how its trials were compared at the rungs, in words:
    ``METHOD_NAMES``), ``trained`` (the models and cells its studies train), ``trials``
    (finished of planned, and how many of each schedule were pruned), ``choice`` (the rate and
    schedule over all its studies, None until every study tried the whole grid), ``excess``
    (the choice's mean relative excess validation loss; ``choose``), ``runner_up`` and
    ``runner_up_excess``, ``paper_excess`` (the paper's 1e-4 with a cosine), ``by_table``
    (``{table: rate and schedule}``, what a searched profile trains each searched table with)
    ``replaced`` (the trials of the family's search before issue 49 where this one replaced
    it, in words; None otherwise) and ``pending`` (this search's progress where the old
    choice still stands, in words; None otherwise)."""
    out = read_search(profile, results_dir)
    rows = []
    for fam in SEARCH_CELLS:
        studies, seeds = _family_studies(out, profile, fam)
        records = [r for recs in out["families"].get(fam, {}).values() for r in recs]
        old = out["replaced"].get(fam)
        old_records = [r for recs in (old or {}).get("studies", {}).values() for r in recs]
        row = {
            "family": FAMILY_NAMES[fam],
            "method": METHOD_NAMES[out["methods"].get(fam, METHOD)],
            "trained": _trained_text(fam, studies, seeds),
            "trials": f"{len(records)} of {len(studies) * len(LRS) * len(SCHEDULES)} "
            f"({_pruned_text(records)})",
            "choice": None, "excess": None, "runner_up": None, "runner_up_excess": None,
            "paper_excess": None,
            "by_table": {t: _config_words((c["train"]["lr"], c["train"]["schedule"]))
                         for t, c in out["choice_by_table"].get(fam, {}).items()},
            "replaced": None if old is None else
            f"{METHOD_NAMES[old['method']]} (at {str(old['git_commit'])[:7]}): "
            f"{len(old_records)} trials ({_pruned_text(old_records)})",
            "pending": _pending_text(out, profile, fam),
        }  # fmt: skip
        c = out["choice"].get(fam)
        if c is not None:
            excess = c["mean_relative_excess"]
            chosen = (c["train"]["lr"], c["train"]["schedule"])
            runner = tuple(c["runner_up"])
            row.update(
                choice=_config_words(chosen),
                excess=excess[_config_key(chosen)],
                runner_up=_config_words(runner),
                runner_up_excess=excess[_config_key(runner)],
                paper_excess=excess.get(_config_key(PAPER_CONFIG)),
            )
        rows.append(row)
    return rows


def choice_table(profile: str, results_dir=None) -> HTML:
    """``choice_rows`` as a page-width table: each family's choice beside its runner-up and the
    paper's setting, their mean relative excess validation loss (0 % = the best configuration
    of every study), and its choice per searched table."""

    def pct(v):
        return "--" if v is None else f"{v:+.1%}"

    rows = []
    for r in choice_rows(profile, results_dir):
        trained = f"{r['trained']}; trials compared by {r['method']}"
        if r["replaced"]:
            trained += f"; replaced the search by {r['replaced']}"
        if r["pending"]:
            trained += f"; the search by {r['pending']} is under way"
        if r["by_table"]:
            trained += "; chosen per table: " + "; ".join(
                f"{t}: {c}" for t, c in r["by_table"].items()
            )
        rows.append({
            **r, "trained": trained,
            "choice": r["choice"] or "not decided yet", "excess": pct(r["excess"]),
            "runner_up": "--" if r["runner_up"] is None
            else f"{r['runner_up']} ({pct(r['runner_up_excess'])})",
            "paper": f"{_config_words(PAPER_CONFIG)} ({pct(r['paper_excess'])})",
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


ABLATION_LABEL = (
    "ablation: the family's best setting on this cell, chosen on this cell's validation split "
    "(not the verdict's protocol, which trains with the family's choice for the table)"
)


def _cell_records(out: dict, fam: str) -> dict[str, tuple[str, dict]]:
    """``{cell name (``_cell_name``): (method, {study name: records})}`` of ``fam``'s complete
    studies in search file ``out``: per cell, this method's where it has completed one (decided
    or pending), else those of the method that decided the family; never both."""
    grid = len(LRS) * len(SCHEDULES)
    sources = [(out["methods"].get(fam, METHOD), out["families"].get(fam, {}))]
    if fam in out["pending"]:
        sources.append((out["pending"][fam]["method"], out["pending"][fam]["studies"]))
    by_method: dict[str, dict[str, dict]] = {}
    for method, studies in sources:
        for name, recs in studies.items():
            if len(recs) == grid:
                by_method.setdefault(_cell_name(name), {}).setdefault(method, {})[name] = recs
    return {cell: (METHOD, done[METHOD]) if METHOD in done else next(iter(done.items()))
            for cell, done in by_method.items()}  # fmt: skip


def best_setting_rows(profile: str, tables=("tab:main-results",), results_dir=None) -> list[dict]:
    """The labelled ablation of issue 49: each family's best configuration on each searched cell
    of ``tables`` (Tasks F and G by default), beside the configuration the profile trains that
    table with. One dict per (family, cell): ``label`` (``ABLATION_LABEL``), ``family`` and
    ``method`` (in words: how the trials it reads were compared), ``table``, ``cell`` (the cell
    id), ``model`` and ``column`` (the paper's row and column; a swapped-in model by its name),
    ``seeds`` (the complete studies it reads), ``best`` (rate and schedule in words: ``choose``
    over those studies), ``best_val_r2`` (its validation R^2 at the best epoch, mean over the
    seeds), ``chosen`` and ``chosen_val_r2`` (the same for the table's choice); None until a
    study of the cell is complete. Validation scores only: the test split is the verdict's."""
    out = read_search(profile, results_dir)
    rows = []
    for fam in SEARCH_CELLS:
        cells = _cell_records(out, fam)
        chosen = out["choice_by_table"].get(fam, {})
        for study in plan_search(profile, [fam], (0,)):
            job = study.job
            if job.table not in tables:
                continue
            method, records = cells.get(_cell_name(study.name), (METHOD, {}))
            best = choose(records)
            table_choice = chosen.get(job.table) or out["choice"].get(fam)
            row = {
                "label": ABLATION_LABEL,
                "family": FAMILY_NAMES[fam],
                "method": METHOD_NAMES[method],
                "table": job.table,
                "cell": job.cell.id,
                "model": _nn.model_spec(job.cell.model).display if FAMILY_MODEL[fam]
                else job.cell.row,
                "column": job.cell.column,
                "seeds": sorted(_study_seed(out, name) for name in records),
                "best": None, "best_val_r2": None, "chosen": None, "chosen_val_r2": None,
            }  # fmt: skip
            for key, c in (("best", best), ("chosen", table_choice)):
                if c is None or best is None:
                    continue
                config = (c["train"]["lr"], c["train"]["schedule"])
                row[key] = _config_words(config)
                row[f"{key}_val_r2"] = _mean_val_r2(records, config)
            rows.append(row)
    return rows


def best_setting_table(profile: str, tables=("tab:main-results",), results_dir=None) -> HTML:
    """``best_setting_rows`` as a page-width table, labelled as the ablation it is: per family
    and cell, its best setting and the table's choice, each with its mean validation R^2."""

    def r2(v):
        return "--" if v is None else f"{v:.3f}"

    rows = [
        {**r, "who": f"{r['model']} ({r['family']})",
         "best": f"{r['best']} ({r2(r['best_val_r2'])})" if r["best"] else "not searched yet",
         "chosen": f"{r['chosen']} ({r2(r['chosen_val_r2'])})" if r["chosen"] else "--",
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


def _mean_val_r2(records: dict[str, list[dict]], config: tuple[float, str]) -> float | None:
    """The validation R^2 at the best epoch of ``config``, averaged over the studies."""
    r2 = [r["val_r2_at_best"] for recs in records.values() for r in recs
          if (r["lr"], r["schedule"]) == config]  # fmt: skip
    if not r2 or any(v is None for v in r2):
        return None
    return sum(r2) / len(r2)


def expected_epochs(schedule: str, cap: int) -> float:
    """Epochs one configuration of ``schedule`` trains under successive halving when each rung
    keeps a ``1/REDUCTION`` share of the trials reaching it and no run stops early (the pruner's
    upper bound): its sized runs (``rung_runs``), then its run over ``cap`` judged at the rest."""
    *sized, _ = rung_runs(schedule, cap)
    total = sum(length / REDUCTION**k for k, length in enumerate(sized))
    keep, last = 1 / REDUCTION ** len(sized), 0
    for r in rungs(cap)[len(sized) :]:
        total += keep * (r - last)
        keep, last = keep / REDUCTION, r
    return total + keep * (cap - last)


def price(profile: str, families=None, seeds=SEEDS, results_dir=None, cache_dir=None) -> str:
    """What the search would cost, from ``plan``'s seconds per epoch of each study's cell: under
    successive halving if no trial stopped early (``expected_epochs``: the pruner's upper bound,
    a cosine's sized runs included) and at the cap (every trial to the epoch cap). A trial its
    study's journal has finished (under ``cache_dir``) costs nothing: the price of what is left."""
    studies = plan_search(profile, families, seeds)
    configs = [(lr, s) for lr in LRS for s in SCHEDULES]
    cap = get_profile(profile).train["epochs"]
    measured, timed = _plan._measured(results_dir), {}
    lines, total_cap, total_sh, n_left = [], 0.0, 0.0, 0
    for s in studies:
        done = {(r["lr"], r["schedule"]) for r in trials(s, cache_dir)}
        left = [c for c in configs if c not in done]
        n_left += len(left)
        unit, source = _plan._unit_cost(s.job.table, s.job.cell, measured, timed, True, profile)
        if unit is None:  # no result and no timing of this model: no price
            lines.append(f"  {s.name:50s}  no estimate ({source})")
            continue
        sec = unit * _plan._units(s.job.sizes)
        total_cap += len(left) * cap * sec / 3600
        total_sh += sum(expected_epochs(sched, cap) for _, sched in left) * sec / 3600
        lines.append(f"  {s.name:50s} {sec:6.1f} s/epoch ({source}), "
                     f"{len(left)} of {len(configs)} configurations left")  # fmt: skip
    lines.append(
        f"{len(studies)} studies, {n_left} of {len(studies) * len(configs)} configurations left: "
        f"{total_sh:.1f} CPU h with pruning at rungs {rungs(cap)} (upper bound; {METHOD}), "
        f"{total_cap:.1f} CPU h if every trial ran to the {cap}-epoch cap"
    )
    return "\n".join(lines)


def censoring(profile: str = "paper-sizes", results_dir=None) -> dict[str, dict]:
    """How each method of the committed search of ``profile`` treated the two schedules, from
    its trials (those of the families it decides, pending and replaced alike): ``{method:
    {"trials": {schedule: n}, "pruned": {schedule: n}, "pruned_at_first_rung": {schedule: n},
    "studies": n, "cosine_best": n (studies whose best trial is a cosine)}}``."""
    out = read_search(profile, results_dir)
    by_method: dict[str, dict[str, list]] = {}
    sources = [(out["methods"].get(f, METHOD), studies) for f, studies in out["families"].items()]
    sources += [(v["method"], v["studies"]) for v in out["pending"].values()]
    sources += [(v["method"], v["studies"]) for v in out["replaced"].values()]
    for method, studies in sources:
        by_method.setdefault(method, {}).update(studies)
    counts = {}
    for method, studies in by_method.items():
        recs = [r for rs in studies.values() for r in rs]
        first = min((r["epochs"] for r in recs if r["state"] == "pruned"), default=None)

        def per(keep, recs=recs):
            return {s: sum(1 for r in recs if r["schedule"] == s and keep(r)) for s in SCHEDULES}

        counts[method] = {
            "trials": per(lambda r: True),
            "pruned": per(lambda r: r["state"] == "pruned"),
            "pruned_at_first_rung": per(
                lambda r, first=first: r["state"] == "pruned" and r["epochs"] == first
            ),
            "studies": len(studies),
            "cosine_best": sum(
                min(rs, key=lambda r: r["best_val_loss"])["schedule"] == "cosine"
                for rs in studies.values() if rs
            ),
        }  # fmt: skip
    return counts


def reading_entry(profile: str = "paper-sizes", results_dir=None) -> dict:
    """The reading page's entry for how the search compares schedules, in the fields of
    ``reading.Choice`` (``reading.Choice(**search.reading_entry())``), its counts read from the
    committed search of ``profile`` (``censoring``). Owned here because it states what this
    module does."""
    old = censoring(profile, results_dir).get(CENSORED_METHOD)
    cap = get_profile(profile).train["epochs"]
    configs = [(lr, s) for lr in LRS for s in SCHEDULES]
    unpruned = len(configs) * cap / sum(expected_epochs(s, cap) for _, s in configs)
    first = rungs(cap)[0] if rungs(cap) else cap
    warmup = get_profile(profile).train.get("warmup_epochs", 0)
    rate_at_first = lr_at(first * 10 - 1, 10, TrainConfig(lr=1.0, epochs=cap, warmup_epochs=warmup))
    censored = (
        "the cap's cosine judged at the rungs (the search before issue 49): at epoch "
        f"{first} that cosine runs at {rate_at_first:.0%} of its peak rate against a plateau "
        "that has annealed"
    )
    if old is not None:
        censored += (
            f"; it pruned {old['pruned']['cosine']} of {old['trials']['cosine']} cosine trials "
            f"({old['pruned_at_first_rung']['cosine']} at the first rung) against "
            f"{old['pruned']['plateau']} of {old['trials']['plateau']} plateau ones, yet a "
            f"cosine was the best trial of {old['cosine_best']} of its {old['studies']} studies"
        )
    return {
        "topic": "Learning-rate search: comparing schedules",
        "label": "app:impl",
        "words": "LR schedule & cosine to $0$",
        "ours": (
            "the paper runs no search; at the paper's sizes each family's rate and schedule "
            f"come from one ({' to '.join(rate_text(x) for x in (LRS[0], LRS[-1]))} x "
            f"{' or '.join(SCHEDULES)}, on Tasks F and G and tab:tdof-verify L = 16, seeds "
            f"{', '.join(map(str, SEEDS))}, successive halving keeping 1/{REDUCTION} at epochs "
            f"{', '.join(map(str, rungs(cap)))}). Every trial is judged by what its schedule "
            "reaches within a rung's epochs: a cosine is sized to its rung (judged at rung r "
            "after a cosine of length r; promoted, it trains a cosine of the next length from "
            "the start, and past the sized rungs the profile's cosine over the epoch cap, which "
            "a chosen cosine trains with); a plateau, which has no length (it anneals when the "
            "validation loss stalls), runs on from rung to rung. Both are judged at equal epochs "
            "of training, each by a finished schedule: the premise of successive halving, that "
            "the order at a small budget predicts the order at a larger one, is then about the "
            "schedules and not about how far a cosine has decayed. A family's rate and schedule "
            "are chosen per table where its studies ran (tab:main-results from F and G, "
            "tab:tdof-verify from L = 16), and over all its studies for the other tables, on "
            "which no study ran. A family keeps the old search's choice until the new one has "
            "decided it"
        ),
        "alternatives": (
            f"{censored}; pruning each schedule only against itself (a cosine is still judged "
            "near its peak rate, so the rates are compared under a nearly constant rate, and "
            f"each rung has {len(LRS)} trials to halve); no pruning (every trial to the cap: "
            f"{unpruned:.1f}x the price); one rate and schedule per family everywhere (what "
            "the paper does, with 1e-4 and a cosine for every model)"
        ),
        "switch": "search.METHOD (the journals' folder; each family's entry under 'methods')",
        "recorded": (
            "the search's file (python -m mzlite search): methods, choice, choice_by_table, "
            "pending, replaced; train_config.lr and schedule of every result"
        ),
        "tested": (
            "tests/test_search.py: a cosine that starts slowly and ends best is chosen, not "
            "pruned (known curves; the search before issue 49 prunes it and chooses the "
            "plateau); the labelled ablation search.best_setting_rows: each family's best "
            "setting per cell of Tasks F and G"
        ),
    }
