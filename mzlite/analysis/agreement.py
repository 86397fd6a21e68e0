"""What we measure inside a trained MZ layer beside what the paper reports (fig:mz-analysis):
one rule per quantity, stated with it, and whether our number meets it.

``layer_agreement`` takes our measurements and the paper's numbers as two dicts (the keys are
listed in its docstring) and returns one ``Agreement`` per quantity; chapter 7 shows them as a
table. A rule is a plain comparison: the paper's value inside our 5th-95th percentiles, within a
factor of two, within ten percentage points, below a bound, or ranges that overlap.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["VERDICT", "Agreement", "within_factor", "inside", "layer_agreement"]

VERDICT = {True: "agrees", False: "differs", None: "not run"}
FACTOR = 2.0  # "within a factor 2"
POINTS = 10.0  # "within 10 points" (percentage points)


def within_factor(ours: float, paper: float, k: float = FACTOR) -> bool:
    """Whether ``ours`` lies in [paper / k, paper * k] (``paper`` > 0, ``k`` >= 1)."""
    if paper <= 0:
        raise ValueError(f"paper must be > 0 for a factor rule, got {paper!r}")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    return paper / k <= ours <= paper * k


def inside(value: float, lo: float, hi: float) -> bool:
    """Whether ``value`` lies in [lo, hi]."""
    return lo <= value <= hi


@dataclass(frozen=True)
class Agreement:
    """One quantity: the ``paper``'s value and ``ours`` (as shown), whether ours ``agrees``
    under ``rule`` (None: not measured here)."""

    quantity: str
    paper: str
    ours: str
    agrees: bool | None
    rule: str

    @property
    def verdict(self) -> str:
        return VERDICT[self.agrees]

    def row(self) -> dict:
        """The table row: ``quantity``, ``paper``, ``ours``, ``verdict``, ``rule``."""
        return {"quantity": self.quantity, "paper": self.paper, "ours": self.ours,
                "verdict": self.verdict, "rule": self.rule}  # fmt: skip


_OURS = ("rel", "flips", "L", "cos", "cos_random", "norms", "cv", "ratio", "active", "gate_mean",
         "p95", "saturates", "sublinear")  # fmt: skip
_PAPER = ("rel", "flips", "n_gates", "cos_bound", "norms", "cv", "ratio", "threshold", "active",
          "gate_mean", "p95")  # fmt: skip


def layer_agreement(ours: dict, paper: dict) -> list[Agreement]:
    """Our trained layer against fig:mz-analysis, one ``Agreement`` per quantity.

    ``ours``: ``rel`` and ``flips`` ((p5, median, p95) over pairs of sets of the relative
    operator change ||dM||_F / ||M_c||_F, as a fraction, and of the gate sign flips), ``L`` (the
    layer's generators), ``cos`` (mean |cos| between generators) and ``cos_random`` (the same
    for random matrices), ``norms`` ((min, max) of ||M_l||_F), ``cv`` (their coefficient of
    variation, a fraction), ``ratio`` (||M_c||_F / mean ||M_l||_F), ``active`` (the fraction of
    gates above the threshold), ``gate_mean`` and ``p95`` (of |gamma|), ``saturates`` ({L:
    energy rank == L} for L <= TDOF) and ``sublinear`` (erank / L falls above TDOF; None: not
    tested).

    ``paper``: ``rel`` (percent, one pair), ``flips`` of ``n_gates``, ``cos_bound``, ``norms``
    (min, max), ``cv`` (percent), ``ratio``, ``threshold``, ``active`` (percent), ``gate_mean``
    and ``p95``."""
    for name, got, want in (("ours", ours, _OURS), ("paper", paper, _PAPER)):
        missing = [k for k in want if k not in got]
        if missing:
            raise ValueError(f"{name} lacks {missing}; it needs {list(want)}")
    rel, flips, norms, pnorms = ours["rel"], ours["flips"], ours["norms"], paper["norms"]
    sat, sub = ours["saturates"], ours["sublinear"]
    return [
        Agreement("relative change ||dM||_F/||M_c||_F", f"{paper['rel']:.1f}% (one pair)",
                  f"median {rel[1]:.1%} [p5 {rel[0]:.1%}, p95 {rel[2]:.1%}]",
                  inside(paper["rel"] / 100, rel[0], rel[2]), "paper value inside our p5-p95"),
        Agreement("gate sign flips between two sets", f"{paper['flips']} of {paper['n_gates']}",
                  f"median {flips[1]:.0f} of {ours['L']} [p5 {flips[0]:.0f}, p95 {flips[2]:.0f}]",
                  inside(paper["flips"], flips[0], flips[2]), "paper value inside our p5-p95"),
        Agreement("mean |cos| between generators", f"< {paper['cos_bound']:g}",
                  f"{ours['cos']:.3f} (random: {ours['cos_random']:.3f})",
                  ours["cos"] < paper["cos_bound"], "below the paper's bound"),
        Agreement("generator norms ||M_l||_F", f"[{pnorms[0]:.3f}, {pnorms[1]:.3f}]",
                  f"[{norms[0]:.3f}, {norms[1]:.3f}]",
                  norms[0] <= pnorms[1] and pnorms[0] <= norms[1], "ranges overlap"),
        Agreement("CV of generator norms", f"{paper['cv']:g}%", f"{ours['cv']:.1%}",
                  within_factor(100 * ours["cv"], paper["cv"]), f"within a factor {FACTOR:g}"),
        Agreement("||M_c||_F / ||M_l||_F", f"~{paper['ratio']:g}", f"{ours['ratio']:.1f}",
                  within_factor(ours["ratio"], paper["ratio"]), f"within a factor {FACTOR:g}"),
        Agreement(f"gates active (|gamma| > {paper['threshold']:g})", f"{paper['active']:g}%",
                  f"{ours['active']:.1%}", abs(100 * ours["active"] - paper["active"]) <= POINTS,
                  f"within {POINTS:g} points"),
        Agreement("mean |gamma|", f"{paper['gate_mean']:g}", f"{ours['gate_mean']:.3f}",
                  within_factor(ours["gate_mean"], paper["gate_mean"]),
                  f"within a factor {FACTOR:g}"),
        Agreement("p95 |gamma|", f"{paper['p95']:g}", f"{ours['p95']:.3f}",
                  within_factor(ours["p95"], paper["p95"]), f"within a factor {FACTOR:g}"),
        Agreement("effective rank saturates for L <= TDOF", "yes",
                  ", ".join(f"L = {k}: {'yes' if s else 'no'}" for k, s in sat.items()),
                  all(sat.values()) if sat else None, "energy rank == L"),
        Agreement("effective rank sublinear for L > TDOF", "yes",
                  "not tested" if sub is None else "yes" if sub else "no", sub,
                  "erank/L below its value at L = TDOF"),
    ]  # fmt: skip
