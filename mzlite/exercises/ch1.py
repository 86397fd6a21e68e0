"""Chapter 1 exercises ("Zonotopes you can touch"): the checkers compute every reference answer
with :mod:`mzlite.zonotope`; only the exercise's inputs are typed here (the same ones the
notebook states in the question)."""

from __future__ import annotations

import math

import torch

from .checker import exercise
from ..zonotope import MatrixZonotope, Zonotope

# The 2-D zonotope of exercises ch1.area and ch1.inside: centre 0, generators e1, e2, e1 + e2.
EX_CENTER = [0.0, 0.0]
EX_GENERATORS = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
EX_POINT = [1.5, -1.0]
# Exercise ch1.generators: a matrix zonotope with L generators times a zonotope with h generators.
EX_L, EX_H = 2, 3


def _example() -> Zonotope:
    return Zonotope(
        torch.tensor(EX_CENTER, dtype=torch.float64),
        torch.tensor(EX_GENERATORS, dtype=torch.float64),
    )


def _as_number(answer) -> float:
    if isinstance(answer, torch.Tensor):
        if answer.numel() != 1:
            raise ValueError(f"expected one number, got a tensor of shape {tuple(answer.shape)}")
        answer = answer.item()
    if isinstance(answer, bool):
        raise TypeError("expected a number, got a bool")
    return float(answer)


@exercise("ch1.generators", hint="Count M_c g_k (h of them), M_l c (L) and M_l g_k (L times h).")
def _generators(answer):
    g = torch.Generator().manual_seed(0)
    mz = MatrixZonotope(torch.randn(2, 2, generator=g), torch.randn(EX_L, 2, 2, generator=g))
    z = Zonotope(torch.randn(2, generator=g), torch.randn(EX_H, 2, generator=g))
    ref = (mz @ z).num_generators
    ok = not isinstance(answer, bool) and int(answer) == answer == ref
    # A wrong answer gets the hint, not the reference value.
    return ok, f"MZ Z with L = {EX_L}, h = {EX_H} has h + L + L h = {ref} generators" if ok else (
        f"{answer!r} is not the generator count of MZ Z"
    )


@exercise("ch1.area", hint="Sum |det| over every pair of generators, times 2^2 = 4.")
def _area(answer):
    ref = _example().volume().item()
    ok = math.isclose(_as_number(answer), ref, rel_tol=1e-6, abs_tol=1e-9)
    return ok, f"the area is 4 * (sum of |det(g_i, g_j)| over pairs) = {ref:g}" if ok else (
        f"{answer!r} is not the area"
    )


@exercise(
    "ch1.inside", hint="Being inside the interval hull is necessary, not sufficient: draw it."
)
def _inside(answer):
    if isinstance(answer, torch.Tensor) and answer.dtype == torch.bool and answer.numel() == 1:
        answer = bool(answer.item())
    if type(answer).__name__ not in ("bool", "bool_"):
        return False, "answer with True or False"
    ref = bool(_example().contains(torch.tensor(EX_POINT, dtype=torch.float64)))
    where = "inside" if ref else "outside (though inside the interval hull)"
    ok = bool(answer) == ref
    return ok, f"the point {tuple(EX_POINT)} is {where}" if ok else "not quite"
