"""mzlite.analysis against hand computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mzlite import analysis as A
from mzlite.nn import build_model


def test_relative_frobenius_change_by_hand():
    M_a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    M_b = torch.tensor([[1.0, 0.3], [0.4, 1.0]])
    # ||M_a - M_b||_F = 0.5, ||I||_F = sqrt(2)
    assert float(A.relative_frobenius_change(M_a, M_b, M_a)) == pytest.approx(0.5 / math.sqrt(2))
    batch = A.relative_frobenius_change(torch.stack([M_a, M_b]), torch.stack([M_b, M_b]), M_a)
    assert batch.tolist() == pytest.approx([0.5 / math.sqrt(2), 0.0])
    with pytest.raises(ValueError, match="zero Frobenius"):
        A.relative_frobenius_change(M_a, M_b, torch.zeros(2, 2))
    with pytest.raises(ValueError, match="one shape"):
        A.relative_frobenius_change(M_a, torch.zeros(3, 3))


def test_cosine_matrix_and_norms_by_hand():
    mats = torch.tensor(
        [[[1.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 2.0]]]
    )
    C = A.cosine_matrix(mats)
    ref = torch.tensor([[1, 1 / math.sqrt(2), 0], [1 / math.sqrt(2), 1, 0], [0, 0, 1.0]])
    assert torch.allclose(C, ref)
    assert A.frobenius_norms(mats).tolist() == pytest.approx([1.0, math.sqrt(2), 2.0])
    with pytest.raises(ValueError, match="zero"):
        A.cosine_matrix(torch.zeros(2, 2, 2))


def test_effective_rank_by_hand():
    rng = np.random.default_rng(0)
    # samples spanning exactly r orthonormal directions with equal spread: soft rank r
    Q, _ = np.linalg.qr(rng.normal(size=(16, 16)))
    coeffs = np.kron(np.eye(3), [[1.0], [-1.0]])  # (6, 3): +-e_k, zero mean, equal energy
    X = torch.tensor(coeffs @ Q[:3])  # (6, 16)
    assert A.effective_rank(X) == pytest.approx(3.0)
    assert A.effective_rank(X, "energy") == 3
    # unequal singular values (3, 1): entropy of p = (3/4, 1/4); 99 % energy needs both, 90 % one
    Y = torch.tensor([[3.0, 0.0], [-3.0, 0.0], [0.0, 1.0], [0.0, -1.0]])
    s = np.array([3.0, 1.0]) * math.sqrt(2)
    p = s / s.sum()
    assert A.effective_rank(Y) == pytest.approx(math.exp(-(p * np.log(p)).sum()))
    assert A.effective_rank(Y, "energy") == 2
    assert A.effective_rank(Y, "energy", energy=0.9) == 1
    # centring: a constant offset adds no rank
    assert A.effective_rank(X + 5.0) == pytest.approx(3.0)
    assert A.effective_rank(torch.ones(4, 3)) == 0.0
    with pytest.raises(ValueError, match="method"):
        A.effective_rank(X, "nuclear")


def test_sign_flips():
    assert int(A.sign_flips([0.5, -0.2, 0.1, 0.0], [-0.5, -0.1, 0.3, 0.2])) == 2


def test_probe_matches_the_operator_formula_and_checkpoint_roundtrip(tmp_path):
    model = build_model(
        "mz_med", 4, device="cpu", seed=0, d_model=8, n_heads=2, d_ff=8, n_inducing=2, n_enc=1
    )
    with torch.no_grad():
        for att in A.mz_heads(model).values():
            att.M_l.normal_(0, 0.5)
    torch.manual_seed(1)
    x = torch.randn(5, 6, 4)
    mask = torch.ones(5, 6, dtype=torch.bool)
    mask[1, 4:] = False
    heads = A.mz_heads(model)
    assert list(heads) == ["enc0.inducing", "enc0.elements", "pool", "dec0"]
    out = A.probe(model, x, mask, batch_size=2)
    att = heads["enc0.inducing"]
    # by hand: gates from the masked mean of the embedded centres, M = M_c + sum_l gamma_l M_l
    c, _ = model.embed(x)
    cbar = torch.stack([c[i][mask[i]].mean(0) for i in range(5)])
    gamma = torch.tanh(att.gate(cbar)).view(5, att.n_heads, att.L)
    M = att.M_c + torch.einsum("bhl,hlij->bhij", gamma, att.M_l)
    assert torch.allclose(out.gates, gamma.double(), atol=1e-6)
    assert torch.allclose(out.operators, M.double(), atol=1e-6)
    with pytest.raises(ValueError, match="layer must be one of"):
        A.probe(model, x, mask, layer="nope")
    path = A.save_model_checkpoint(tmp_path / "m.pt", model, {"note": "test"})
    loaded, info = A.load_model_checkpoint(path)
    assert info == {"note": "test"}
    assert torch.equal(loaded(x, mask), model.eval()(x, mask))


def test_model_checkpoint_keeps_the_target_scaling(tmp_path):
    from mzlite.train import set_target_scaling, target_scaling

    model = build_model("mz_slim", 3, 2, device="cpu", seed=0, d_model=8, n_heads=2, d_ff=16)
    set_target_scaling(model, [10.0, -2.0], [3.0, 0.5])
    x = torch.randn(4, 5, 3)
    path = A.save_model_checkpoint(tmp_path / "m.pt", model)
    loaded, _ = A.load_model_checkpoint(path)
    assert target_scaling(loaded).std.tolist() == [3.0, 0.5]
    assert torch.equal(loaded(x), model.eval()(x))


def test_layer_words_names_the_blocks_for_a_reader():
    from mzlite.analysis import layer_words

    assert layer_words("enc0.inducing") == "encoder block 1, inducing points"
    assert layer_words("enc1.elements") == "encoder block 2, elements"
    assert layer_words("pool") == "pooling" and layer_words("dec0") == "decoder block 1"
    assert layer_words("something") == "something"
