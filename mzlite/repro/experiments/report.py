"""Our numbers beside the paper's, one table at a time: ``report("tab:meb", "smoke")`` is a
``Report`` of ``ReportRow``s (``to_markdown()``, ``to_text()``, HTML in a notebook).

Each row is one (paper row, paper column, metric) of the table: our mean +/- std over the seeds
on disk (sample std, ddof = 1; the paper does not say which it prints), how many seeds
*converged* (``stats.convergence``), epochs and device, beside the paper's printed mean +/- std
("--" where it has none). Derived numbers (tab:tdof-verify's "MSE ratio") are ratios of two
cells' means; ablation cells (no paper number) come in a section of their own. One profile per
report; within a cell, results of different protocols or code versions (``protocol_key``) are
never averaged: the row says "mixed protocols"."""

from __future__ import annotations

from mzlite import nn as _nn
from mzlite.analysis.verdicts import finite
from mzlite.repro import experiments as ex
from mzlite.repro.experiments import stats as _stats
from mzlite.repro.experiments.engine import devices_of, protocol_key
from mzlite.repro.experiments.formatting import cell_words, format_mean_std, markdown_table
from mzlite.repro.experiments.present import devices_text
from mzlite.repro.experiments.results import PROFILE_ORDER
from mzlite.repro.experiments.stats import mean_std
from mzlite.repro.paper import load_paper_table, paper_cell

# evidence_note: re-exported, the chapters read it here
from mzlite.repro.render import Number, evidence_note, experiment_key, report_html  # noqa: F401


def epoch_range(results: list[dict]) -> str:
    """The epochs the ``results`` ran, as "30" or "12-30" ("--" for none)."""
    eps = sorted(r.get("epochs_run", 0) for r in results)
    if not eps:
        return "--"
    return str(eps[0]) if eps[0] == eps[-1] else f"{eps[0]}-{eps[-1]}"


class Report:
    COLUMNS = ("row", "column", "metric", "ours", "paper", "seeds", "converged", "epochs",
               "params", "device")  # fmt: skip

    def __init__(self, label: str, title: str, profile: str, rows: list[dict], notes: str = ""):
        self.label, self.title, self.profile = label, title, profile
        self.rows, self.notes = rows, notes

    def __len__(self) -> int:
        return len(self.rows)

    def by_cell(self, part: str | None = "main", metric: str | None = None) -> dict[str, dict]:
        """The rows of ``part`` ("main", "ablation", or None for both; a "derived" row spans two
        cells) by their cell id. ``metric`` (e.g. "r2") keeps that metric's rows only: needed
        where a cell has a row for each of several metrics (ValueError naming them otherwise)."""
        if part not in ("main", "ablation", None):
            raise ValueError(f'part must be "main", "ablation" or None, got {part!r}')
        rows = [r for r in self.rows if r["part"] != "derived" and part in (None, r["part"])
                and metric in (None, r["metric"])]  # fmt: skip
        out: dict[str, dict] = {}
        for r in rows:
            cell = r["cells"][0]
            if cell in out:
                metrics = sorted({x["metric"] for x in rows if x["cells"][0] == cell})
                raise ValueError(f"cell {cell} has a row for each metric {metrics}: pass metric=")
            out[cell] = r
        return out

    def ours(self, r: dict) -> str:
        """A row's number (``ours_text``); an aliased cell names the cell whose runs it shows."""
        same = f" (= {cell_words(self.label, r['same_as'])})" if r.get("same_as") else ""
        return str(ours_text(r)) + same

    def _cells(self, r: dict) -> dict:
        params = "--" if r["params"] is None else f"{r['params'] / 1e3:.0f}K"
        if r.get("paper_params"):
            params += f" (paper {r['paper_params'] / 1e3:.0f}K)"
        return {
            **{c: r[c] for c in ("row", "column", "metric", "epochs", "device")},  # as they are
            "ours": self.ours(r), "paper": r["paper_text"], "seeds": str(len(r["seeds"])),
            "converged": f"{r['converged']}/{r['n_runs']}" if r.get("n_runs") else "--",
            "params": params,
        }  # fmt: skip

    def _render(self, markdown: bool) -> str:
        """Markdown (a pipe table per section) or plain text (columns padded to align)."""
        heading = f"{self.label}: {self.title} [profile: {self.profile}]"
        out = [f"**{heading}**", ""] if markdown else [heading]
        for part, name in (("main", None), ("derived", "Derived"), ("ablation", "Ablation")):
            rows = [self._cells(r) for r in self.rows if r["part"] == part]
            if not rows:
                continue
            if name:
                tail = " (no paper numbers)" if name == "Ablation" else ""
                out += ["", f"*{name}*{tail}", ""] if markdown else ["", name + tail]
            if markdown:
                out += markdown_table(self.COLUMNS, [[r[c] for c in self.COLUMNS] for r in rows])
            else:
                w = {c: max(len(c), *(len(r[c]) for r in rows)) for c in self.COLUMNS}
                out.append("  ".join(c.ljust(w[c]) for c in self.COLUMNS))
                out.append("  ".join("-" * w[c] for c in self.COLUMNS))
                out += ["  ".join(r[c].ljust(w[c]) for c in self.COLUMNS) for r in rows]
        return "\n".join(out + (["", self.notes] if self.notes else []))

    def to_markdown(self) -> str:
        return self._render(markdown=True)

    def to_text(self) -> str:
        return self._render(markdown=False)

    __str__ = to_text

    def _repr_html_(self) -> str:
        return report_html(self)


def report(table, profile: str = "smoke", results_dir=None, ran_only: bool = False) -> Report:
    """Our results for ``table`` under ``profile`` beside the paper's numbers (see module doc).
    Cells without results appear as "not run"; with ``ran_only`` they are left out and the
    notes say how many were."""
    spec, prof = ex.get_table(table), ex.get_profile(profile)
    by_cell = ex.results_by_cell(spec, prof.name, results_dir)
    same = ex.aliases(spec, prof.name)
    paper_params = "Params" in load_paper_table(spec.label)["columns"]
    rows = []
    for c in spec.cells:
        res = sorted(by_cell.get(c.id, []), key=lambda r: r["seed"])
        mixed = len({protocol_key(r) for r in res}) > 1
        gradient_trained = _nn.model_spec(c.model).trainable  # a closed form has no params
        params = [r["params"] for r in res if r.get("params")]
        for ref in c.paper or (ex.PaperRef(c.row, c.column, "r2"),):
            vals = [None if (v := r["metrics"]["test"].get(ref.metric)) is None else v * ref.scale
                    for r in res]  # fmt: skip
            pp = None
            if c.paper and gradient_trained and paper_params:
                pp = paper_cell(spec.label, ref.row, "Params").get("mean")
            rows.append(_row(
                res, (None, None) if mixed else mean_std(vals),
                paper_cell(spec.label, ref.row, ref.column) if c.paper else None,
                table=spec.label, part=c.part, row=c.row, column=c.column, cells=[c.id],
                metric=ref.metric + (f" x {ref.scale:g}" if ref.scale != 1.0 else ""),
                ours_values=vals, seeds=[r["seed"] for r in res], n_seeds=len(res),
                model=c.model, mixed=mixed, same_as=same.get(c.id),
                params=params[0] if params and gradient_trained else None, paper_params=pp,
            ))  # fmt: skip
    for d in spec.derived:
        num, den = by_cell.get(d.num, []), by_cell.get(d.den, [])
        mn, _ = mean_std([r["metrics"]["test"].get(d.metric) for r in num])
        md, _ = mean_std([r["metrics"]["test"].get(d.metric) for r in den])
        ratio = mn / md if mn is not None and md not in (None, 0.0) else None
        metric = (f"{d.metric}({cell_words(spec.label, d.num)}) / "
                  f"{d.metric}({cell_words(spec.label, d.den)})")  # fmt: skip
        seeds = sorted({r["seed"] for r in num} & {r["seed"] for r in den})
        rows.append(_row(num + den, (ratio, None), paper_cell(spec.label, d.row, d.column),
                         table=spec.label, part="derived", row=d.row, column=d.column,
                         metric=metric, cells=[d.num, d.den], ours_values=[ratio], seeds=seeds,
                         n_seeds=min(len(num), len(den))))  # fmt: skip
    notes = [spec.notes] if spec.notes else []
    if prof.name == "smoke":
        notes.append("Smoke profile: tiny data and 3 epochs; it checks the pipeline, its numbers "
                     "are not comparable to the paper's.")  # fmt: skip
    elif prof.name != "full":
        notes.append(f"Profile {prof.description}. A reduced protocol: compare its pattern with "
                     "the paper's, not its last digit.")  # fmt: skip
    if same:
        notes.append("Rows marked (= cell) are the same experiment as that cell under this "
                     "profile and show its results.")  # fmt: skip
    if ran_only:
        kept = [r for r in rows if r["seeds"]]
        if len(kept) < len(rows):
            notes.append(f"{len(rows) - len(kept)} of {len(rows)} rows not run under this "
                         "profile are not shown.")  # fmt: skip
        rows = kept
    return Report(spec.label, spec.title, prof.name, rows, " ".join(notes))


def _row(res, mean_std_, pc, **given) -> ReportRow:
    """One row of a ``Report``: the keys ``given`` (table, part, row, column, metric, cells,
    per-seed ``ours_values``, ``seeds``, ``n_seeds``; a cell's ``model``, ``mixed`` (several
    protocols: no mean) and ``same_as`` (the cell an aliased cell shows)), our (mean, std), the
    counts of the results ``res`` (run, converged, trained, spiked, fallen back to the mean
    predictor) and the paper's cell ``pc``."""
    trained = [r for r in res if r.get("history") is not None]
    pc = pc or {}
    return ReportRow(
        {"mixed": False, "same_as": None, "params": None, "paper_params": None, **given},
        ours_mean=mean_std_[0], ours_std=mean_std_[1], n_runs=len(res),
        converged=sum(_stats.result_convergence(r)["converged"] for r in res),
        n_trained=len(trained),
        spiked=sum(_stats.loss_spikes(r["history"])["spiked"] for r in trained),
        fell_back=sum(_stats.fell_back(r["history"]) for r in trained),
        epochs=epoch_range(res), device=devices_text(*devices_of(res)) if res else "--",
        paper_mean=pc.get("mean"), paper_std=pc.get("std"),
        paper_text=format_mean_std(pc.get("mean"), pc.get("std")),
    )  # fmt: skip


class ReportRow(dict):
    """One row of a ``Report`` (``_row``'s keys), also read by attribute: a key it lacks reads
    None (``profile``: not run under any profile asked; ``model`` on a derived row)."""

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return self.get(name)

    @property
    def ran(self) -> bool:
        """Whether it has a mean to show (results of one protocol)."""
        return bool(self["seeds"]) and not self["mixed"] and self["ours_mean"] is not None

    @property
    def seed_values(self) -> list[float]:
        """Our per-seed values that exist (for a test over seeds)."""
        return finite(self["ours_values"])


def best_rows(table, profiles=PROFILE_ORDER, results_dir=None) -> dict[str, ReportRow]:
    """Cell by cell, the most trusted evidence on disk: ``{cell id: row}``, the ``report`` row
    (R²) of the first of ``profiles`` with results there, ``"profile"`` added (None, and the
    first profile's empty row, where none has): no mean mixes profiles."""
    names = [ex.get_profile(p).name for p in profiles]
    by_profile = {p: report(table, p, results_dir).by_cell(None, "r2") for p in names}
    first = next(iter(by_profile.values()))  # every profile's report has the same cells, in order

    def best(cid: str) -> ReportRow:
        ran = (
            ReportRow(rows[cid], profile=p) for p, rows in by_profile.items() if rows[cid]["seeds"]
        )
        return next(ran, ReportRow(first[cid], profile=None))

    return {cid: best(cid) for cid in first}


def ours_text(row: dict | None) -> str:
    """A report row's number: "0.812 ± 0.010" (mean ± std over seeds; no std for one seed),
    "mixed protocols" or "not run"; a row of ``best_rows`` (its profile known) as a
    ``render.Number``, which a chapter's table marks with its experiment."""
    if not row or not row.get("seeds"):
        return "not run"
    if row.get("mixed"):
        return "mixed protocols"
    text = format_mean_std(row["ours_mean"], row["ours_std"])
    if not (row.get("table") and row.get("profile")):
        return text
    return Number(text, experiment_key(row["table"], row, row["profile"]),
                  f"mean_{row['metric']}", row["ours_mean"], row["ours_std"])  # fmt: skip


def what_ran(table, profile: str, results_dir=None, commit_ids: bool = True) -> str:
    """The results of ``table`` under ``profile`` on disk in a paragraph ("" for none): cells,
    seeds, sizes, epochs, convergence, runs improving at the epoch cap, learning rates, target
    scaling, precision, device and code (``commit_ids=False``: how many versions)."""
    spec, prof = ex.get_table(table), ex.get_profile(profile)
    same = ex.aliases(spec, prof.name)
    by_cell = {c: r for c, r in ex.results_by_cell(spec, prof.name, results_dir).items()
               if c not in same}  # fmt: skip
    if not by_cell:
        return ""
    n_cells = sum(c.id not in same for c in spec.cells)
    results = [r for res in by_cell.values() for r in res]
    trained = [r for r in results if _nn.model_spec(r["model"]).trainable]
    parts = [f"{prof.name}: {len(by_cell)} of {n_cells} cells have results"]
    if trained:
        per_cell = sorted({len(res) for res in by_cell.values()
                           if _nn.model_spec(res[0]["model"]).trainable})  # fmt: skip
        parts.append(f"{'/'.join(map(str, per_cell))} seed(s) per trained cell "
                     f"({len(trained)} runs)")  # fmt: skip
    sizes = sorted({tuple(r["sizes"]) for r in results})
    parts.append(", ".join("/".join(f"{n:,}" for n in s) for s in sizes)
                 + " train/val/test sets")  # fmt: skip
    if trained:
        cfgs = [r.get("train_config") or {} for r in trained]
        caps = sorted({c.get("epochs") for c in cfgs if c.get("epochs")})
        pats = sorted({c.get("patience") for c in cfgs if c.get("patience")})
        text = f"{epoch_range(trained)} epochs run (cap {'/'.join(map(str, caps))}"
        parts.append(text + (f", patience {'/'.join(map(str, pats))})" if pats else ")"))
        conv = sum(_stats.result_convergence(r)["converged"] for r in trained)
        stopped = sum(r.get("stop_reason") == "early_stopping" for r in trained)
        parts.append(f"{conv} of {len(trained)} runs converged ({stopped} stopped by patience)")
        capped = sum(r.get("stop_reason") == "completed"
                     and (b := r["metrics"].get("best_epoch")) is not None
                     and b >= r["epochs_run"] - 2 for r in trained)  # fmt: skip
        if capped:
            parts.append(f"{capped} still improving at the epoch cap (best epoch in the last 3)")
        lrs: dict[float, set] = {}
        for r, c in zip(trained, cfgs, strict=True):
            family = (r.get("protocol") or {}).get("family") or ex.model_family(r["model"])
            lrs.setdefault(c.get("lr"), set()).add(family)
        rates = [f"{lr:g} ({', '.join(sorted(fams))})" for lr, fams in sorted(lrs.items())]
        parts.append("lr " + ", ".join(rates))
        norm = {bool(c.get("normalize_targets")) for c in cfgs}
        parts.append("targets standardised on the training split" if norm == {True}
                     else "raw targets" if norm == {False}
                     else "raw and standardised targets (ablation cells)")  # fmt: skip
        amp = {ex.result_amp(r) for r in trained}
        parts.append(" and ".join(
            "bf16 autocast" if a else "float32" if a is False else "precision not recorded"
            for a in sorted(amp, key=str)))  # fmt: skip
    threads = sorted({(r.get("provenance") or {}).get("num_threads") for r in results} - {None})
    dev = devices_text(*devices_of(results))
    if threads:
        dev += f" ({'/'.join(map(str, threads))} thread(s) per run)"
    parts.append(dev)
    commits = sorted({(r.get("provenance") or {}).get("git_commit") or "?" for r in results})
    if commit_ids:
        parts.append("code " + ", ".join(c[:7] for c in commits))
    else:  # a book page: the commits stay in the result files
        n = len(commits)
        parts.append(f"{'one version' if n == 1 else f'{n} versions'} of the code (the commit "
                     "is recorded in each result file)")  # fmt: skip
    return "; ".join(parts) + "."
