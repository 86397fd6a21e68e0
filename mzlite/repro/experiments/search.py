"""The learning-rate search of a profile: each model family's learning rate and schedule, chosen
on the validation split by runs that go far enough to be judged (issue 33). It replaces the
10-epoch probe (``benchmarks/lr_probe.py``), which favoured whatever learns fastest.

    python -m mzlite search paper-sizes --dry-run          # the trials and what they cost
    python -m mzlite search paper-sizes --families mz      # run them (resumes), write the choice

What runs (``plan_search``): for each family, the grid ``LRS`` x ``SCHEDULES`` on the family's
``SEARCH_CELLS`` (Task F and tab:tdof-verify L = 16) at the profile's sizes, seeds ``SEEDS``; one
Optuna study per (family, cell, seed) over the grid. Each trial is one ``fit`` under the
profile's protocol with the trial's rate and schedule, checkpointed every epoch (an interrupted
trial resumes), reporting its best validation loss so far (standardised units) after every
epoch. Optuna's successive halving prunes a configuration only at its rungs, the first after
``MIN_EPOCHS`` epochs (then 3x and 9x that), keeping the best third. The test split is never read.

The choice (``choose``): per family, each configuration's best validation loss relative to the
best of its study (a pruned trial counts with the best loss it had reached), averaged over the
family's studies; the smallest rate within ``TIE`` of the lowest mean wins, as the probe's rule
did. The trials and the choice are written, with provenance, to ``search_path(profile)``
(``data/results/lr-search/<profile>.json``), which the profile reads (``Profile.searched``)."""

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
from mzlite.train import fit

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
    "mz": (("tab:main-results", "F-mz_full"), ("tab:tdof-verify", "L16-mz_1l")),
    "baseline": (("tab:main-results", "F-st"), ("tab:tdof-verify", "L16-st_4l")),
    "deepsets": (("tab:main-results", "F-deepsets"), ("tab:tdof-verify", "L16-st_4l")),
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
    """The studies' journals and the trials' checkpoints (never committed)."""
    return Path(cache_dir or default_cache_dir()) / "lr-search" / profile


def _trial_config(study: Study, lr: float, schedule: str):
    cfg = study.job.train_config()
    return dataclasses.replace(cfg, lr=lr, schedule=schedule)


class _Reporter:
    """``fit`` callback: reports the best validation loss so far of every epoch not yet reported
    (a resumed trial first catches up on its checkpoint's epochs), then asks the pruner."""

    def __init__(self, trial):
        self.trial, self.reported = trial, 0

    def catch_up(self, hist) -> None:
        losses = hist.val_loss
        for e in range(self.reported + 1, len(losses) + 1):
            best = min((v for v in losses[:e] if math.isfinite(v)), default=math.inf)
            self.trial.report(best if math.isfinite(best) else 1e30, e)
        self.reported = len(losses)

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


def run_study(study: Study, *, cache_dir=None, say=print) -> list[dict]:
    """Run the configurations of ``study`` not finished yet, in grid order; returns every trial's
    record. A trial left running by an interrupted process is failed and asked again: its
    checkpoint makes it resume where it stopped."""
    TrialState = _optuna().trial.TrialState

    ost = _optuna_study(study, cache_dir)
    for t in ost.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        ost.tell(t.number, state=TrialState.FAIL)
    finished = {(t.params["lr"], t.params["schedule"])
                for t in ost.get_trials(deepcopy=False)
                if t.state in (TrialState.COMPLETE, TrialState.PRUNED)}  # fmt: skip
    tr = va = None
    for lr, schedule in study.configs():
        if (lr, schedule) in finished:
            continue
        if tr is None:
            tr, va, _ = job_splits(study.job)  # the test split is never looked at
        trial = _ask(ost, lr, schedule)
        cfg = _trial_config(study, lr, schedule)
        ckpt = (
            search_dir(study.job.profile.name, cache_dir) / study.name / f"lr{lr:g}-{schedule}.pt"
        )
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        j = study.job
        model = build_cell_model(j.cell, tr.d_in, tr.d_out, j.seed, resolve_device(j.device))
        reporter = _Reporter(trial)
        t0 = time.perf_counter()
        hist = fit(model, tr, va, cfg, checkpoint_path=ckpt, progress=False, callbacks=[reporter])
        reporter.catch_up(hist)
        record = _record(hist, lr, schedule)
        for k, v in record.items():
            trial.set_user_attr(k, v)
        if hist.stop_reason == "callback":
            ost.tell(trial, state=TrialState.PRUNED)
        else:
            ost.tell(trial, record["best_val_loss"])
        say(f"  {study.name:50s} lr {lr:<6g} {schedule:8s} {record['state']:9s} "
            f"{record['epochs']:3d} epochs, best val loss {record['best_val_loss']:.4f} "
            f"(epoch {record['best_epoch']}), {time.perf_counter() - t0:.0f} s")  # fmt: skip
        ckpt.unlink(missing_ok=True)
    return trials(study, cache_dir)


def _ask(ost, lr: float, schedule: str):
    """A trial of exactly (lr, schedule), its parameters over the whole grid (Optuna keeps one
    distribution per parameter across a study)."""
    CategoricalDistribution = _optuna().distributions.CategoricalDistribution

    ost.enqueue_trial({"lr": lr, "schedule": schedule}, skip_if_exists=False)
    grid = {"lr": CategoricalDistribution(LRS), "schedule": CategoricalDistribution(SCHEDULES)}
    return ost.ask(fixed_distributions=grid)


def _record(hist, lr, schedule) -> dict:
    best = hist.best_epoch
    r2 = hist.val_metrics[best - 1].get("r2") if best else None
    return {
        "lr": lr,
        "schedule": schedule,
        "state": "pruned" if hist.stop_reason == "callback" else "complete",
        "stop_reason": hist.stop_reason,
        "epochs": hist.epochs_run,
        "best_epoch": best,
        "best_val_loss": hist.best_val_loss if best else math.inf,
        "val_r2_at_best": r2,
        "wall_time_s": hist.wall_time_s,
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


def write_search(profile: str, studies, *, cache_dir=None, results_dir=None) -> dict:
    """Write ``search_path(profile)`` atomically from the studies' journals."""
    path = search_path(profile, results_dir)
    old = json.loads(path.read_text()) if path.exists() else {"families": {}, "choice": {}}
    # merged per study: a run of some seeds keeps the trials of the studies it did not run
    families = {fam: dict(recs) for fam, recs in old["families"].items()}
    touched = dict.fromkeys(s.family for s in studies)
    for s in studies:
        families.setdefault(s.family, {})[s.name] = trials(s, cache_dir)
    out = {
        "format": "mzlite.lr-search/1",
        "profile": profile,
        "grid": {"lr": list(LRS), "schedule": list(SCHEDULES)},
        "min_epochs": MIN_EPOCHS,
        "reduction_factor": REDUCTION,
        "tie": TIE,
        "families": families,
        # what each study trained, so that readers need not parse it back from its name
        "studies": {**old.get("studies", {}), **{s.name: s.record() for s in studies}},
        "choice": dict(old["choice"]),
    }
    for fam in touched:
        c = choose(families[fam])
        if c is not None:
            out["choice"][fam] = c
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


def search_text(out: dict) -> str:
    """The search as printed: every trial, then each family's mean relative excess and choice."""
    lines = [
        f"search [{out['profile']}]: lr {out['grid']['lr']} x schedule "
        f"{out['grid']['schedule']}, pruned only after {out['min_epochs']} epochs "
        f"(successive halving, keep 1/{out['reduction_factor']})"
    ]
    for fam, studies in out["families"].items():
        for name, recs in studies.items():
            for r in recs:
                r2 = "" if r["val_r2_at_best"] is None else f", val R^2 {r['val_r2_at_best']:.3f}"
                lines.append(
                    f"  {name:48s} lr {r['lr']:<6g} {r['schedule']:8s} {r['state']:8s} "
                    f"{r['epochs']:3d} ep, best val loss {r['best_val_loss']:.4f} "
                    f"(epoch {r['best_epoch']}){r2}"
                )
        c = out["choice"].get(fam)
        if c is None:
            lines.append(f"{fam}: not decided (a study has configurations left to try)")
            continue
        ranked = sorted(c["mean_relative_excess"].items(), key=lambda kv: kv[1])
        lines.append(
            f"{fam}: mean relative excess val loss "
            + ", ".join(f"{k}: {v:+.1%}" for k, v in ranked)
            + f" -> lr {c['train']['lr']:g}, {c['train']['schedule']}"
        )
    return "\n".join(lines)


FAMILY_NAMES = {"mz": "MZAttn", "baseline": "attention baselines", "deepsets": "Deep Sets"}
PAPER_CONFIG = (1e-4, "cosine")  # app:impl: AdamW 1e-4, cosine to 0


def _config_words(config: tuple[float, str]) -> str:
    return f"{rate_text(config[0])}, {config[1]}"


def choice_rows(profile: str, results_dir=None) -> list[dict]:
    """What the committed search of ``profile`` tried and chose, one dict per family:
    ``family`` (in words), ``trained`` (the models and cells its studies train), ``trials``
    (finished of planned, and how many were pruned), ``choice`` (the rate and schedule, None
    until every study tried the whole grid), ``excess`` (the choice's mean relative excess
    validation loss; ``choose``), ``runner_up`` and ``runner_up_excess``, ``paper_excess`` (the
    paper's 1e-4 with a cosine)."""
    path = search_path(profile, results_dir)
    out = json.loads(path.read_text()) if path.exists() else {"families": {}, "choice": {}}
    rows = []
    for fam in SEARCH_CELLS:
        ran = out["families"].get(fam, {})  # the seeds its studies ran; planned ones before
        seeds = sorted({_study_seed(out, name) for name in ran}) or SEEDS
        studies = plan_search(profile, [fam], seeds)
        trained = dict.fromkeys(  # the paper's row names; a swapped-in model by its own name
            f"{_nn.model_spec(s.job.cell.model).display if FAMILY_MODEL[fam] else s.job.cell.row}"
            f" on {s.job.table} {s.job.cell.column}"
            for s in studies
        )
        records = [r for recs in ran.values() for r in recs]
        row = {
            "family": FAMILY_NAMES[fam],
            "trained": "; ".join(trained) + f"; seeds {', '.join(map(str, seeds))}",
            "trials": f"{len(records)} of {len(studies) * len(LRS) * len(SCHEDULES)} "
            f"({sum(r['state'] == 'pruned' for r in records)} pruned)",
            "choice": None, "excess": None, "runner_up": None, "runner_up_excess": None,
            "paper_excess": None,
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
    of every study)."""

    def pct(v):
        return "--" if v is None else f"{v:+.1%}"

    rows = [
        {**r, "choice": r["choice"] or "not decided yet", "excess": pct(r["excess"]),
         "runner_up": "--" if r["runner_up"] is None
         else f"{r['runner_up']} ({pct(r['runner_up_excess'])})",
         "paper": f"{_config_words(PAPER_CONFIG)} ({pct(r['paper_excess'])})"}
        for r in choice_rows(profile, results_dir)
    ]  # fmt: skip
    return comparison_table(
        rows,
        [("family", "family", 14), ("trials", "trials", 14), ("choice", "chosen", 16),
         ("excess", "its excess", 10), ("runner_up", "runner-up", 22),
         ("paper", "the paper's setting", 24)],
        caption=f"The learning-rate search of {reader_name(profile)} ({profile}): mean excess "
        "validation loss over the best configuration of each study (lower is better)",
        footnote_key="trained",
        footnote_title="What each family's studies train",
    )  # fmt: skip


def price(profile: str, families=None, seeds=SEEDS, results_dir=None) -> str:
    """What the search would cost, from ``plan``'s seconds per epoch of each study's cell: at the
    cap (every trial to the epoch cap) and under successive halving if no trial stopped early
    (n trials x MIN_EPOCHS, a third of them 3x as long, a ninth 9x: the pruner's upper bound)."""
    studies = plan_search(profile, families, seeds)
    n = len(LRS) * len(SCHEDULES)
    cap = get_profile(profile).train["epochs"]
    rungs, epochs, keep, last = [], 0.0, float(n), 0
    r = MIN_EPOCHS
    while r < cap:
        rungs.append(r)
        epochs += keep * (r - last)
        keep, last, r = keep / REDUCTION, r, r * REDUCTION
    epochs += keep * (cap - last)
    measured, timed = _plan._measured(results_dir), {}
    lines, total_cap, total_sh = [], 0.0, 0.0
    for s in studies:
        unit, source = _plan._unit_cost(s.job.table, s.job.cell, measured, timed, True, profile)
        if unit is None:  # no result and no timing of this model: no price
            lines.append(f"  {s.name:50s}  no estimate ({source})")
            continue
        sec = unit * _plan._units(s.job.sizes)
        total_cap += n * cap * sec / 3600
        total_sh += epochs * sec / 3600
        lines.append(f"  {s.name:50s} {sec:6.1f} s/epoch ({source})")
    lines.append(
        f"{len(studies)} studies x {n} configurations: {total_sh:.1f} CPU h with pruning at rungs "
        f"{rungs} (upper bound), {total_cap:.1f} CPU h if every trial ran to the {cap}-epoch cap"
    )
    return "\n".join(lines)
