"""The reproduction scorecard: one row per claim of the paper, the engine's verdict
(``engine.judge``, the row's ``value``) worded by ``present.row``, with what the claim's twin
cells say beside it (its named twins, MEB's per-set normalised cells)."""

from __future__ import annotations

from mzlite.analysis.verdicts import TIE, VERDICTS, Label
from mzlite.repro import experiments as ex
from mzlite.repro.experiments import engine, present
from mzlite.repro.experiments.claims import Claim, Kind, RankClaim, claims  # re-exported
from mzlite.repro.experiments.present import FIRST_READING, NORMALISED, NOT_RUN_REASON
from mzlite.repro.experiments.results import PROFILE_ORDER  # the best evidence first
from mzlite.repro.render import scorecard_html

__all__ = [
    "FIRST_READING", "NORMALISED", "NOT_RUN_REASON", "PROFILE_ORDER", "TIE", "VERDICTS", "Claim",
    "Kind", "RankClaim", "Scorecard", "claims", "evaluate", "normalised_twin",
    "per_set_normalised", "scorecard",
]  # fmt: skip


def evaluate(claim, profiles=None, results_dir=None, **how) -> dict:
    """``claim``'s scorecard row: ``present.row`` of ``engine.judge(..., **how)``."""
    return present.row(claim, engine.judge(claim, profiles, results_dir, **how))


class Scorecard:
    """Rows (``present.row`` dicts) and the profiles read; HTML in a notebook, text through
    ``present.scorecard_text``/``scorecard_markdown``."""

    def __init__(self, rows: list[dict], profiles: tuple[str, ...]):
        self.rows, self.profiles = rows, profiles

    def __len__(self) -> int:
        return len(self.rows)

    def counts(self) -> dict[str, int]:
        return {v: sum(r["verdict"] == v for r in self.rows) for v in VERDICTS}

    def _repr_html_(self) -> str:
        return scorecard_html(self)


def scorecard(tables=None, profiles=PROFILE_ORDER, results_dir=None) -> Scorecard:
    """The scorecard of ``tables`` (labels; default every registered table with claims)."""
    profiles = [profiles] if isinstance(profiles, str) else profiles
    profiles = tuple(ex.get_profile(p).name for p in profiles)  # unknown profile: ValueError
    if not profiles:
        raise ValueError("profiles must name at least one profile")
    tables = [tables] if isinstance(tables, str) else tables
    chosen = claims() if tables is None else [c for t in tables for c in claims(t)]
    rows = []
    for c, v in zip(chosen, engine.judge_all(chosen, profiles, results_dir), strict=True):
        twins = {what: evaluate(c, profiles, results_dir, twin=c.on(col))
                 for col, what in getattr(c, "twins", ())}  # fmt: skip
        if v.label != Label.REPRODUCED:  # a reproduced pattern reads the normalised cells already
            twins[NORMALISED] = per_set_normalised(c, profiles, results_dir)
        ran = {what: t for what, t in twins.items() if t and t["value"].label != Label.NOT_RUN}
        rows.append(present.row(c, v, ran))
    return Scorecard(rows, profiles)


def normalised_twin(cell_id: str, profile: str) -> str:
    """The d = 8 ablation cell of ``tab:meb`` that differs from main cell ``cell_id`` under
    ``profile`` only in its data (per-set normalised), its targets scaled as the profile scales
    them (``abl-d8-scale-ynorm-*`` standardised, ``abl-d8-scale-*`` raw)."""
    model = cell_id.split("-", 1)[1]
    standardised = ex.get_profile(profile).train.get("normalize_targets", False)
    variant = "scale-ynorm" if standardised and model != ex.SET_STATS else "scale"
    return f"abl-d8-{variant}-{model}"


def per_set_normalised(claim, profiles=None, results_dir=None) -> dict | None:
    """An MEB d = 8 claim's row on its ``normalised_twin`` cells (the data normalisation the MEB
    verdict turns on, chapter 5), "not run" where no profile ran them; None for other claims."""
    if claim.table != "tab:meb" or not all(c.startswith("d8-") for c in claim.cells):
        return None  # a rank claim's table is tab:transfer-matrix
    return evaluate(claim, profiles, results_dir, twin=normalised_twin)
