"""The lowest layer of the results' words, importing none of theirs: how a number with its
spread, a cell, a count of verdicts and a Markdown table read, and how a verdict's badge looks."""

from __future__ import annotations

import math
from collections import Counter

from mzlite.analysis.verdicts import VERDICTS, Label
from mzlite.repro.paper import spaced

from .tables import CellKey, get_table


def _value(v) -> str:
    """3 decimals; 3 significant digits when tiny or huge, 1 from 100 up; "--" for no number."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "--"
    a = abs(v)
    if a != 0 and (a >= 1e4 or a < 1e-3):
        return f"{v:.3g}"
    return f"{v:.1f}" if a >= 100 else f"{v:.3f}"


def unsigned_zero(v: float) -> float:
    """0.0 for a value that prints as zero to three decimals: never "-0.000"."""
    return 0.0 if round(v, 3) == 0 else v


def format_mean_std(mean, std) -> str:
    """ "mean ± std", "mean" when there is no std, "--" when there is no mean. A mean that is zero
    to three decimals, or below 0.001 and within one std of zero, prints "0.000 ± 0.001", not
    "-6.36e-05 ± 0.000664" (on the mean predictor the digits past the third are noise)."""
    if mean is None or std is None:
        return _value(mean)
    if std < 1e-2 and (abs(mean) < 5e-4 or (abs(mean) < 1e-3 and abs(mean) <= std)):
        return f"{unsigned_zero(mean):.3f} ± {std:.3f}"
    return f"{_value(mean)} ± {_value(std)}"


def cell_words(table, cell_id: str) -> str:
    """A cell as a reader knows it, "d = 8, MZAttn-Full"; an unknown id raises (``CellKey``)."""
    key = CellKey(table, cell_id)
    cell = get_table(key.table).cell(key.cell)
    return f"{spaced(cell.column)}, {spaced(cell.row)}"


# Each verdict: its badge's background and text colours, and how a count of it reads (one, several)
VERDICT_LOOK = {
    Label.HOLDS: ("#d4edda", "#155724", "holds", "hold"),
    Label.REPRODUCED: ("#d1f2eb", "#0b5345", "reproduces the paper's pattern",
                       "reproduce the paper's pattern"),
    Label.PARTLY: ("#fff3cd", "#6b5200", "holds partly", "hold partly"),
    Label.FAILS: ("#f8d7da", "#721c24", "does not hold here", "do not hold here"),
    Label.NOT_DECIDED: ("#dbe9ff", "#1b3a6b", "is not decided", "are not decided"),
    Label.NO_MODEL_LEARNS: ("#d6d6d6", "#1f1f1f", "is a tie where no model learns the target",
                            "are ties where no model learns the target"),
    Label.MEMORISED: ("#fde2f3", "#7a1f5c", "rests on a model that memorised",
                      "rest on models that memorised"),
    Label.NOT_RUN: ("#f8f9fa", "#6c757d", "was not run", "were not run"),
    Label.PIPELINE_ONLY: ("#d9f1f5", "#0c5460", "is a pipeline check only",
                          "are pipeline checks only"),
    Label.INSUFFICIENT: ("#e7dcf7", "#432874", "lacks the evidence for a verdict",
                         "lack the evidence for a verdict"),
    Label.OPTIMISATION_FAILURE: ("#ffe5d0", "#7a3a00", "ended in an optimisation failure",
                                 "ended in optimisation failures"),
}  # fmt: skip


def count_phrase(verdict: str, n: int) -> str:
    """ "1 holds partly", "6 do not hold here" (``n`` claims with ``verdict``)."""
    if verdict not in VERDICT_LOOK:
        raise ValueError(f"verdict must be one of {', '.join(VERDICT_LOOK)}, got {verdict!r}")
    _, _, one, several = VERDICT_LOOK[verdict]
    return f"{n} {one if n == 1 else several}"


def and_join(items) -> str:
    """ "a, b and c"."""
    *rest, last = list(items) or [""]
    return ", ".join(rest) + (" and " if rest else "") + last


def markdown_table(head, rows) -> list[str]:
    """The lines of a Markdown pipe table of ``head`` and ``rows``, a "|" in a cell as "/"."""
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return out + ["| " + " | ".join(c.replace("|", "/") for c in r) + " |" for r in rows]


def counts_text(rows) -> str:
    """``rows``' verdicts counted, in ``VERDICTS``' order: "3 hold and 2 were not run"."""
    c = Counter(r["verdict"] for r in rows)
    return and_join(count_phrase(v, c[v]) for v in VERDICTS if c[v])


def scorecard_summary(sc) -> str:
    """A scorecard's counts in words, and the profiles it read, best evidence first."""
    text = f"{len(sc.rows)} claims: {counts_text(sc.rows)}"
    if sc.profiles:
        text += f". Profiles read, best evidence first: {', '.join(sc.profiles)}"
    return text + "."
