"""Chapter 11 exercises ("Where matrix zonotopes come from"): every reference is computed with
:mod:`mzlite.reachability`; only the exercises' inputs are typed here, the same ones the notebook
states in the questions."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..reachability import (
    cartesian_product,
    consistent_systems,
    noise_matrix_zonotope,
    sample_trajectories,
)
from ..zonotope import MatrixZonotope, Zonotope
from .checker import call, exercise, named_mistake

# ch11.generators: T transitions, a noise zonotope with Q generators in R^N_STATE
EX_T, EX_Q, EX_N = 50, 2, 2
# ch11.step: R_k with H_R generators, an input set with H_U, M_Sigma with L_SIGMA, noise with Q
EX_H_R, EX_H_U, EX_L_SIGMA = 20, 1, 100


def generator_inputs(seed: int = 0) -> tuple[int, int]:
    """``(T, q)`` of exercise ch11.generators for the notebook's ``seed`` ((50, 2) for seed 0)."""
    if seed == 0:
        return EX_T, EX_Q
    g = np.random.default_rng([11, 1, seed])
    return int(g.integers(10, 80)), int(g.integers(2, 5))


def step_sizes(seed: int = 0) -> tuple[int, int, int, int]:
    """``(h_R, h_U, L, q)`` of exercise ch11.step for the notebook's ``seed``: the generators of
    R_k, of the input set U, of M_Sigma and of the noise ((20, 1, 100, 2) for seed 0)."""
    if seed == 0:
        return EX_H_R, EX_H_U, EX_L_SIGMA, EX_Q
    g = np.random.default_rng([11, 2, seed])
    return (int(g.integers(5, 40)), int(g.integers(1, 4)), int(g.integers(20, 150)),
            int(g.integers(2, 5)))  # fmt: skip


def noise_factor(seed: int = 0) -> float:
    """The factor exercise ch11.noise_scale scales the noise bound by (2 for seed 0)."""
    return (
        2.0
        if seed == 0
        else float(np.random.default_rng([11, 3, seed]).choice([0.5, 1.5, 3.0, 4.0]))
    )


def _count(answer) -> int:
    if isinstance(answer, bool) or not isinstance(answer, int | float) or answer != int(answer):
        raise TypeError(f"expected a whole number, got {answer!r}")
    return int(answer)


def _noise(q: int, n: int) -> Zonotope:
    g = torch.Generator().manual_seed(0)
    return Zonotope(torch.zeros(n, dtype=torch.float64),
                    0.01 * torch.randn(q, n, generator=g, dtype=torch.float64))  # fmt: skip


@exercise(
    "ch11.generators",
    hint="M_w has one generator per (noise generator, sample) pair, and H^+ maps each of them.",
    per_seed=True,
)
def _generators(answer, seed):
    T, q = generator_inputs(seed)
    ref = noise_matrix_zonotope(_noise(q, EX_N), T).num_generators
    a = _count(answer)
    if a == ref:
        return True, f"q T = {q} x {T} = {ref}: M_w's generators, each mapped through H^+"
    known = {T: "that is T alone: each sample has q noise generators",
             q: "that is q alone: every sample brings its own copy of the noise",
             q * T * EX_N: "that counts entries, not generator matrices"}  # fmt: skip
    return False, known.get(a, f"{a} is not the generator count of M_Sigma")


@exercise(
    "ch11.step",
    hint="Count the generators of R_k x U first, then use h + L + L h, then + Z_w.",
    per_seed=True,
)
def _step(answer, seed):
    h_R, h_U, L, q = step_sizes(seed)
    g = torch.Generator().manual_seed(1)
    d = torch.float64
    R = Zonotope(torch.zeros(2, dtype=d), torch.randn(h_R, 2, generator=g, dtype=d))
    U = Zonotope(torch.zeros(1, dtype=d), torch.randn(h_U, 1, generator=g, dtype=d))
    M = MatrixZonotope(torch.randn(2, 3, generator=g, dtype=d),
                       torch.randn(L, 2, 3, generator=g, dtype=d))  # fmt: skip
    W = _noise(q, 2)
    ref = (M @ cartesian_product(R, U) + W).num_generators
    a = _count(answer)
    if a == ref:
        return True, f"h = {h_R} + {h_U} for R_k x U, then h + L + L h, plus q = {q}: {ref}"
    h = h_R + h_U
    known = {h + L + L * h: "you left out the noise zonotope's generators (+ Z_w)",
             h_R + L + L * h_R + q: "R_k x U has the input's generators too",
             h + L + q: "the product also has the L h cross generators M_l g_k"}  # fmt: skip
    return False, known.get(a, f"{a} is not the generator count of R_(k+1) before reduction")


@exercise(
    "ch11.least_squares",
    hint="Stack H = [X_-; U_-] and solve (H H^T) Z = H for Z; the answer is X_+ Z^T.",
    per_seed=True,
    kind="coding",
)
def _least_squares(answer, seed):
    if not callable(answer):
        return False, "answer with a function least_squares(X_minus, U_minus, X_plus)"
    d = torch.float64
    A = torch.tensor([[0.8, 0.2], [-0.1, 0.9]], dtype=d)
    B = torch.tensor([[1.0], [0.3]], dtype=d)
    box = lambda n: Zonotope(torch.zeros(n, dtype=d), torch.eye(n, dtype=d))  # noqa: E731
    noise = Zonotope(torch.zeros(2, dtype=d), 0.05 * torch.eye(2, dtype=d))
    for data_seed in (seed, seed + 1):  # the notebook's seed 0 checks on the seeds 0 and 1
        data = sample_trajectories(A, B, box(2), box(1), noise, 3, 6, seed=data_seed)
        ref = consistent_systems(data, noise).center  # (2, 3): noise centred at 0
        got = torch.as_tensor(call(answer, *data.matrices()), dtype=d)  # a body of ... waits
        if got.shape == ref.T.shape and torch.allclose(got.T, ref, atol=1e-8):
            return False, "your [A B] is transposed: it should be (n, n + m)"
        if got.shape != ref.shape:
            return False, f"[A B] has shape (n, n + m) = {tuple(ref.shape)}, got {tuple(got.shape)}"
        if not torch.allclose(got, ref, atol=1e-8):
            return False, "not the least-squares [A B] on random data (the centre of M_Sigma)"
    return True, "your function returns the centre of M_Sigma on random data"


@exercise(
    "ch11.noise_scale",
    hint="Every generator of M_Sigma is -g_i times a row of H^+.",
    per_seed=True,
)
def _noise_scale(answer, seed):
    d = torch.float64
    A = torch.tensor([[0.8, 0.2], [-0.1, 0.9]], dtype=d)
    B = torch.tensor([[1.0], [0.3]], dtype=d)
    box = lambda n, s=1.0: Zonotope(torch.zeros(n, dtype=d), s * torch.eye(n, dtype=d))  # noqa: E731
    data = sample_trajectories(A, B, box(2), box(1), box(2, 0.05), 3, 6, seed=0)
    widths = []
    for s in (0.05, 0.05 * noise_factor(seed)):
        lo, hi = consistent_systems(data, box(2, s)).interval_hull()
        widths.append(float((hi - lo).sum()))
    ref = widths[1] / widths[0]
    if math.isclose(float(answer), ref, rel_tol=1e-6):
        return True, f"M_Sigma is linear in the noise generators: the width grows by {ref:g}"
    return False, named_mistake(
        answer,
        [
            (ref**2, "the square: M_Sigma's generators are linear in the noise, not quadratic"),
            (1 / ref, "the inverse: the width grows with the noise bound, not against it"),
            (1.0, "no change: every generator of M_Sigma carries a noise generator"),
            (noise_factor(seed) ** 0.5, "the square root: the width is linear in the noise"),
        ],
        f"{answer!r} is not the factor",
    )
