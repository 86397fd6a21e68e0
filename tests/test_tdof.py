"""mzlite.analysis.tdof against the closed forms of Prop. prop:tdof-natural and hand-made
operators."""

import pytest
import torch

from mzlite.analysis.tdof import (
    closed_form,
    jacobian_tdof,
    mahalanobis_operator,
    numerical_rank,
    pca_operator,
    random_sets,
    span_tdof,
    whitening_operator,
    zscore_operator,
)

DIMS = (2, 3, 4)


def _sets(d):
    return random_sets(3 * d * d, d + 3, d, seed=d)  # more differences than any expected rank


@pytest.mark.parametrize("d", DIMS)
def test_zscore_is_d(d):
    assert closed_form("zscore", d) == d
    assert span_tdof(zscore_operator, _sets(d)).rank == d
    assert jacobian_tdof(zscore_operator, _sets(d)[0]).rank == d


@pytest.mark.parametrize("d", DIMS)
@pytest.mark.parametrize("T", [mahalanobis_operator, whitening_operator])
def test_mahalanobis_and_whitening_are_d_d_plus_1_over_2(d, T):
    expected = d * (d + 1) // 2  # dim Sym_d, typed independently of closed_form
    assert closed_form("mahalanobis", d) == expected
    assert span_tdof(T, _sets(d)).rank == expected
    assert jacobian_tdof(T, _sets(d)[0]).rank == expected


@pytest.mark.parametrize("d, k", [(2, 1), (3, 1), (3, 2), (4, 1), (4, 2), (4, 3)])
def test_pca_basis_jacobian_is_stiefel_dimension(d, k):
    expected = k * d - k * (k + 1) // 2
    assert closed_form("pca", d, k) == expected

    def T(x, m):
        return pca_operator(x, m, k)

    assert jacobian_tdof(T, _sets(d)[0]).rank == expected


@pytest.mark.parametrize("d, k", [(3, 1), (4, 2)])
def test_pca_span_and_projector_counts(d, k):
    # The linear span of a curved family is larger than its tangent space: the k x d bases span
    # all of R^{k x d}; rank-k projectors (trace k) span the traceless symmetric matrices.
    x = _sets(d)
    assert span_tdof(lambda s, m: pca_operator(s, m, k), x).rank == k * d
    proj = lambda s, m: pca_operator(s, m, k, projector=True)  # noqa: E731
    assert span_tdof(proj, x).rank == d * (d + 1) // 2 - 1
    assert jacobian_tdof(proj, x[0]).rank == k * (d - k)  # Grassmannian


def test_constant_operator_has_tdof_zero_and_f_L_has_L():
    d, L = 4, 3
    g = torch.Generator().manual_seed(0)
    M0 = torch.randn(d, d, generator=g, dtype=torch.float64)
    Ms = torch.randn(L, d, d, generator=g, dtype=torch.float64)  # generic: independent

    def const(x, m):
        return M0.expand(x.shape[0], d, d)

    def f_L(x, m):  # T(S) = M_0 + sum_l tanh(mu_l) M_l (paper's F_L with sigma_l = tanh)
        mu = x.mean(1)  # (B, d)
        return M0 + torch.einsum("bl,lij->bij", torch.tanh(mu[:, :L]), Ms)

    x = random_sets(20, 6, d, seed=3)
    assert span_tdof(const, x).rank == 0
    assert jacobian_tdof(const, x[0]).rank == 0
    assert span_tdof(f_L, x).rank == L
    assert jacobian_tdof(f_L, x[0]).rank == L


def test_padding_is_ignored():
    x = random_sets(12, 5, 3, seed=1)
    padded = torch.cat([x, 100.0 * torch.ones(12, 2, 3, dtype=x.dtype)], dim=1)
    mask = torch.ones(12, 7, dtype=torch.bool)
    mask[:, 5:] = False
    for T in (zscore_operator, mahalanobis_operator):
        torch.testing.assert_close(T(padded, mask), T(x, None))
        assert span_tdof(T, padded, mask).rank == span_tdof(T, x).rank
        assert jacobian_tdof(T, padded[0], mask[0]).rank == jacobian_tdof(T, x[0]).rank


def test_numerical_rank_of_known_matrices():
    u = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    assert numerical_rank(u.T @ u).rank == 1
    assert numerical_rank(torch.eye(5)).rank == 5
    assert numerical_rank(torch.zeros(3, 4)).rank == 0


def test_bad_input_raises_naming_the_argument():
    with pytest.raises(ValueError, match="x must have shape"):
        span_tdof(zscore_operator, torch.randn(1, 4, 2))
    with pytest.raises(ValueError, match="x must be one set"):
        jacobian_tdof(zscore_operator, torch.randn(2, 4, 2))
    with pytest.raises(TypeError, match="T must be a callable"):
        span_tdof("zscore", torch.randn(3, 4, 2))
    with pytest.raises(ValueError, match="T\\(x, mask\\) must return"):
        span_tdof(lambda x, m: x.sum(), torch.randn(3, 4, 2))
    with pytest.raises(ValueError, match="rtol"):
        numerical_rank(torch.eye(2), rtol=2.0)
    with pytest.raises(ValueError, match="name must be one of"):
        closed_form("chamfer", 3)
    with pytest.raises(ValueError, match="k must be"):
        pca_operator(torch.randn(2, 5, 3), k=4)
    with pytest.raises(ValueError, match="x contains NaN"):
        span_tdof(zscore_operator, torch.full((3, 4, 2), float("nan")))
