"""Transformation degrees of freedom (TDOF), estimated numerically (paper Sec. sec:theory).

A permutation-invariant target ``f(S) = T(S) mu(S)`` needs its *operator* ``T(S)`` to change
with the set. How many independent directions it changes in is its TDOF. The paper gives two
readings of that number, and this module estimates both:

- ``span_tdof``: Definition def:tdof, ``dim span{T(S) - T(S')}``: the numerical rank of the
  differences ``vec T(S_b) - vec T(S_0)`` over sampled sets ``S_b``. It is the number of matrix
  generators ``M_l`` that a *linear* combination ``M_0 + sum_l sigma_l(S) M_l`` needs to hit
  every ``T(S)`` exactly.
- ``jacobian_tdof``: the local (first-order) count of Prop. prop:taylor-fl: the rank of the
  Jacobian of ``vec T`` with respect to the set's elements at one set, i.e. the dimension of the
  manifold that ``T(S)`` sweeps near that set. It is what ``L`` generators must capture around
  one operating point.

The two agree when the operators fill a linear space (z-score: ``d``; Mahalanobis and whitening:
``d(d+1)/2``; Prop. prop:tdof-natural (a), (b), (d)). They differ for curved families: the top-k
PCA basis ``V_k(S)^T`` sweeps the Stiefel manifold, whose dimension ``kd - k(k+1)/2`` is the
paper's value (c) and the Jacobian rank, while the linear span of its differences is all of
``R^{k x d}`` (``kd``). For the projector ``V_k V_k^T`` the Jacobian rank is the Grassmannian's
``k(d - k)`` (equal to the paper's value only for ``k = 1``) and the span is the traceless
symmetric matrices, ``d(d+1)/2 - 1``. ``closed_form`` returns the paper's numbers.

Conventions: operators are callables ``T(x (B, n, d), mask (B, n) | None) -> (B, p, q)`` on
padded sets (``mask`` True = real element). Everything is computed in float64, where the
singular-value gap between real directions and round-off is ~10 orders of magnitude.
Choice (the paper leaves it open): a singular value counts when it exceeds ``rtol`` times the
largest one (default ``1e-8``) and the absolute floor ``atol`` (default ``1e-10``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from .._checks import as_float_tensor, check_finite, check_mask

__all__ = [
    "TDOF",
    "numerical_rank",
    "span_tdof",
    "jacobian_tdof",
    "random_sets",
    "zscore_operator",
    "mahalanobis_operator",
    "whitening_operator",
    "pca_operator",
    "closed_form",
]

Operator = Callable[[torch.Tensor, "torch.Tensor | None"], torch.Tensor]


class TDOF(NamedTuple):
    """An estimate: ``rank`` and the singular values it was read from (descending)."""

    rank: int
    singular_values: torch.Tensor


def numerical_rank(matrix, rtol: float = 1e-8, atol: float = 1e-10) -> TDOF:
    """Rank of a 2-D ``matrix``: singular values above ``max(rtol * s_max, atol)``. The absolute
    floor ``atol`` keeps pure round-off (e.g. the differences of a constant operator) at rank 0."""
    M = as_float_tensor("matrix", matrix).double()
    if M.ndim != 2:
        raise ValueError(f"matrix must have shape (rows, cols), got {tuple(M.shape)}")
    check_finite("matrix", M)
    if not (isinstance(rtol, (int, float)) and 0.0 < rtol < 1.0):
        raise ValueError(f"rtol must be a float in (0, 1), got {rtol!r}")
    s = torch.linalg.svdvals(M)  # (min(rows, cols),) descending
    if s.numel() == 0:
        return TDOF(0, s)
    return TDOF(int((s > max(rtol * float(s[0]), atol)).sum()), s)


def _check_sets(x, mask, min_sets: int):
    x = as_float_tensor("x", x).double()
    if x.ndim != 3 or x.shape[0] < min_sets or x.shape[1] < 1:
        raise ValueError(
            f"x must have shape (n_sets, n, d) with n_sets >= {min_sets}, got {tuple(x.shape)}"
        )
    check_finite("x", x)
    return x, check_mask(mask, x.shape[0], x.shape[1], x.device)


def _apply(T: Operator, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    if not callable(T):
        raise TypeError(f"T must be a callable T(x, mask) -> (B, p, q), got {type(T).__name__}")
    out = T(x, mask)
    if not isinstance(out, torch.Tensor) or out.ndim != 3 or out.shape[0] != x.shape[0]:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(
            f"T(x, mask) must return a tensor (B, p, q) with B = {x.shape[0]}, got {got}"
        )
    return out


def span_tdof(T: Operator, x, mask=None, rtol: float = 1e-8, atol: float = 1e-10) -> TDOF:
    """Definition def:tdof: numerical rank of ``{vec T(S_b) - vec T(S_0)}`` over the sets of ``x``.

    ``x`` (n_sets, n, d) padded sets, ``mask`` (n_sets, n). Use more sets than the rank you expect
    (``random_sets`` draws generic ones); too few sets can only under-count."""
    x, mask = _check_sets(x, mask, 2)
    ops = _apply(T, x, mask).flatten(1)  # (n_sets, p q)
    return numerical_rank(ops[1:] - ops[:1], rtol, atol)  # differences to the first set


def jacobian_tdof(T: Operator, x, mask=None, rtol: float = 1e-8, atol: float = 1e-10) -> TDOF:
    """Prop. prop:taylor-fl: rank of ``d vec T(S) / d S`` at one set ``S``, over its real elements.

    ``x`` (n, d) or (1, n, d), ``mask`` (n,) or (1, n). Since ``T`` is taken as a function of all
    the elements, this covers operators that factor through any statistic (the mean, the
    covariance): for ``T(mu(S))`` it equals the rank of ``d vec T / d mu``."""
    x = as_float_tensor("x", x).double()
    if x.ndim == 2:
        x = x.unsqueeze(0)
        mask = mask.unsqueeze(0) if isinstance(mask, torch.Tensor) else mask
    if x.ndim != 3 or x.shape[0] != 1:
        raise ValueError(f"x must be one set of shape (n, d) or (1, n, d), got {tuple(x.shape)}")
    x, mask = _check_sets(x, mask, 1)
    real = x[0, mask[0]]  # (n_real, d): padding is not a degree of freedom

    def vec_T(r: torch.Tensor) -> torch.Tensor:
        return _apply(T, r.unsqueeze(0), None).flatten()  # (p q,)

    J = torch.autograd.functional.jacobian(vec_T, real)  # (p q, n_real, d)
    return numerical_rank(J.reshape(J.shape[0], -1), rtol, atol)


def random_sets(n_sets: int, n: int, d: int, seed: int = 0) -> torch.Tensor:
    """Generic sets ``(n_sets, n, d)`` float64: each a Gaussian cloud under its own random linear
    map and shift, so that means, scales and covariances all vary from set to set."""
    for name, v in (("n_sets", n_sets), ("n", n), ("d", d)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n_sets, n, d, generator=g, dtype=torch.float64)
    A = torch.randn(n_sets, d, d, generator=g, dtype=torch.float64)  # (n_sets, d, d)
    shift = 2.0 * torch.randn(n_sets, 1, d, generator=g, dtype=torch.float64)
    return z @ A + shift


# ---------------------------------------------------------------------------- natural operators


def _mean_cov(x, mask):
    """Masked mean (B, d) and biased covariance (B, d, d) of padded sets."""
    m = (mask if mask is not None else torch.ones(x.shape[:2], dtype=torch.bool)).to(x.dtype)
    m = m.unsqueeze(-1)  # (B, n, 1)
    count = m.sum(1)  # (B, 1)
    mu = (x * m).sum(1) / count  # (B, d)
    xc = (x - mu.unsqueeze(1)) * m  # (B, n, d), padding zeroed
    return mu, xc.transpose(1, 2) @ xc / count.unsqueeze(-1)  # (B, d, d)


def zscore_operator(x, mask=None, lam: float = 1e-3) -> torch.Tensor:
    """Prop. prop:tdof-natural (d): ``T(S) = diag(1 / sigma_j)``, ``sigma_j^2`` the (biased)
    variance of coordinate ``j`` plus ``lam``. (B, d, d). TDOF ``d``."""
    _, cov = _mean_cov(x, mask)
    return torch.diag_embed((cov.diagonal(dim1=-2, dim2=-1) + lam).rsqrt())


def mahalanobis_operator(x, mask=None, lam: float = 1e-1) -> torch.Tensor:
    """Prop. prop:tdof-natural (a): ``T(S) = (Sigma(S) + lam I)^{-1}``. (B, d, d). TDOF
    ``d(d+1)/2``."""
    _, cov = _mean_cov(x, mask)
    eye = torch.eye(x.shape[-1], dtype=x.dtype, device=x.device)
    return torch.linalg.inv(cov + lam * eye)


def whitening_operator(x, mask=None, lam: float = 1e-1) -> torch.Tensor:
    """Prop. prop:tdof-natural (b): ``T(S) = (Sigma(S) + lam I)^{-1/2}`` (symmetric root).
    (B, d, d). TDOF ``d(d+1)/2``."""
    _, cov = _mean_cov(x, mask)
    evals, evecs = torch.linalg.eigh(cov + lam * torch.eye(x.shape[-1], dtype=x.dtype))
    return evecs @ torch.diag_embed(evals.rsqrt()) @ evecs.transpose(-2, -1)


def pca_operator(x, mask=None, k: int = 1, projector: bool = False) -> torch.Tensor:
    """Prop. prop:tdof-natural (c): the top-``k`` principal directions of the set.

    ``projector=False``: ``T(S) = V_k(S)^T`` (k, d), the map to PCA coordinates; each direction's
    sign is chosen so that its coordinates sum to a positive number (a choice: any locally smooth
    sign rule gives the same TDOF). Jacobian TDOF ``kd - k(k+1)/2`` (the paper's value).
    ``projector=True``: ``T(S) = V_k V_k^T`` (d, d), sign-free; Jacobian TDOF ``k(d - k)``.
    Needs distinct top eigenvalues (generic sets have them)."""
    d = x.shape[-1]
    if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= d:
        raise ValueError(f"k must be an int in [1, d] = [1, {d}], got {k!r}")
    _, cov = _mean_cov(x, mask)
    _, evecs = torch.linalg.eigh(cov)  # ascending eigenvalues
    V = evecs[..., -k:].flip(-1)  # (B, d, k), largest first
    if projector:
        return V @ V.transpose(-2, -1)  # (B, d, d)
    sign = torch.where(V.sum(-2, keepdim=True) >= 0, 1.0, -1.0).to(V.dtype)  # (B, 1, k)
    return (V * sign).transpose(-2, -1)  # (B, k, d)


def closed_form(name: str, d: int, k: int = 1) -> int:
    """The paper's TDOF (Prop. prop:tdof-natural) for ``name`` in ``"zscore"``,
    ``"mahalanobis"``, ``"whitening"``, ``"pca"`` (top-``k``)."""
    if not isinstance(d, int) or d < 1:
        raise ValueError(f"d must be an int >= 1, got {d!r}")
    forms = {
        "zscore": d,
        "mahalanobis": d * (d + 1) // 2,
        "whitening": d * (d + 1) // 2,
        "pca": k * d - k * (k + 1) // 2,
    }
    if name not in forms:
        raise ValueError(f"name must be one of {sorted(forms)}, got {name!r}")
    if name == "pca" and not (isinstance(k, int) and 1 <= k <= d):
        raise ValueError(f"k must be an int in [1, d] = [1, {d}], got {k!r}")
    return forms[name]
