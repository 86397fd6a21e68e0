"""How surprising a model's ranks across settings are if it has no advantage: ``null_test``,
the exact permutation null of a mean rank (chapter 10; ``mzlite.repro.transfer`` applies it to
the transfer matrix)."""

from __future__ import annotations

from fractions import Fraction

__all__ = ["null_test"]


def null_test(observed_ranks, n_models: int = 7) -> dict:
    """The no-advantage null: each rank uniform on ``1..n_models``, independent. Returns the mean
    rank, its expectation under the null, the exact one-sided probabilities of a mean rank at
    most (``p_advantage``) and at least (``p_disadvantage``) the observed one, and ``p_floor``,
    the smallest ``p_advantage`` any ranks of this many cells can give (rank 1 everywhere): with
    one cell it is 1/7, so one cell alone can never contradict the null at the 5 % level."""
    obs = [int(r) for r in observed_ranks]
    if not obs or any(not 1 <= r <= n_models for r in obs):
        raise ValueError(f"observed_ranks must be ranks in 1..{n_models}, got {observed_ranks!r}")
    dist = {0: Fraction(1)}  # the exact distribution of the sum of len(obs) uniform ranks
    for _ in obs:
        nxt: dict[int, Fraction] = {}
        for s, p in dist.items():
            for r in range(1, n_models + 1):
                nxt[s + r] = nxt.get(s + r, Fraction(0)) + p / n_models
        dist = nxt
    total = sum(obs)
    return {
        "n_cells": len(obs),
        "mean_rank": total / len(obs),
        "null_mean": (n_models + 1) / 2,
        "p_advantage": float(sum(p for s, p in dist.items() if s <= total)),
        "p_disadvantage": float(sum(p for s, p in dist.items() if s >= total)),
        "p_floor": float(Fraction(1, n_models) ** len(obs)),
    }
