"""The fused CPU kernel (mzlite.nn.fused): residual + dropout + LayerNorm in one pass, checked
against the same computation in float64 PyTorch, gradients included, and inside the MZ blocks
against their eager path."""

import contextlib
import copy
import os
import warnings

import pytest
import torch

from mzlite.nn import MZSetTransformer, fused

SMALL_MZ = dict(d_in=3, d_out=2, d_model=16, n_heads=4, d_ff=32, n_inducing=4, n_g=3, L=2)

if os.environ.get("MZLITE_FUSED") == "0":
    pytest.skip("the fused kernel is turned off (MZLITE_FUSED=0)", allow_module_level=True)


def _norm(d, seed=0):
    torch.manual_seed(seed)
    ln = torch.nn.LayerNorm(d)
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    return ln


def test_the_kernel_builds_here():
    """CI must run the fused path, not silently fall back: a compiler is part of the set-up."""
    assert fused.available() and fused.loaded()


DTYPES = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("d", [64, 256, 48])  # AVX-512 kernels (d = 16 k), generic loops
@pytest.mark.parametrize("x_dtype", DTYPES)
@pytest.mark.parametrize("a_dtype", DTYPES)
@pytest.mark.parametrize("out_dtype", DTYPES)
def test_add_norm_equals_float64_reference(d, x_dtype, a_dtype, out_dtype):
    """Outputs and all four gradients against float64 PyTorch on the same (rounded) inputs and
    the kernel's mask. Stated tolerances: float32 rounding (1e-5 relative to the values' size)
    for float32 results, one bf16 rounding step (2^-8 relative) for bf16 ones; a wrong mask row,
    a missing 1/(1-p) or a wrong LayerNorm term is off by O(1)."""
    T, R, p, seed = 40, 5, 0.3, 12345
    ln = _norm(d)
    x = torch.randn(T, R, d).to(x_dtype).requires_grad_()
    a = torch.randn(T, R, d).to(a_dtype).requires_grad_()
    y = fused.add_norm(x, a, ln, p=p, seed=seed, rows_per_token=R, out_dtype=out_dtype)
    assert y.dtype == out_dtype and y.shape == x.shape
    g = torch.randn(T, R, d).to(out_dtype)
    y.backward(g)

    ln64 = copy.deepcopy(ln).double()
    x64 = x.detach().double().requires_grad_()
    a64 = a.detach().double().requires_grad_()
    keep = fused.keep_mask(T, d, p, seed).double()
    y64 = fused.reference_add_norm(x64, a64, ln64, keep, rows_per_token=R)
    y64.backward(g.double())

    def close(got, want, dtype):
        eps = 2**-8 if dtype == torch.bfloat16 else 1e-5
        scale = want.abs().max().item()
        torch.testing.assert_close(got.double(), want, rtol=0, atol=4 * eps * scale)

    close(y, y64, out_dtype)
    close(x.grad, x64.grad, x_dtype)
    close(a.grad, a64.grad, a_dtype)
    # the weight and bias gradients are float32 sums over 200 rows of (possibly bf16) terms
    torch.testing.assert_close(ln.weight.grad.double(), ln64.weight.grad, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(ln.bias.grad.double(), ln64.bias.grad, rtol=1e-4, atol=1e-3)


def test_without_dropout_it_is_layer_norm_of_the_sum():
    ln = _norm(64)
    x, a = torch.randn(7, 3, 64), torch.randn(7, 3, 64)
    torch.testing.assert_close(fused.add_norm(x, a, ln), ln(x + a), rtol=0, atol=1e-5)
    # any leading shape; float32 out unless both inputs are bf16 (eager autocast's rule)
    assert fused.add_norm(x.bfloat16(), a, ln).dtype == torch.float32
    assert fused.add_norm(x.bfloat16(), a.bfloat16(), ln).dtype == torch.bfloat16


def test_the_mask_is_one_row_per_token_and_drops_p():
    T, d, p = 4000, 64, 0.1
    keep = fused.keep_mask(T, d, p, seed=7)
    torch.testing.assert_close(keep.unique(), torch.tensor([0.0, 1 / (1 - p)]))
    dropped = (keep == 0).double().mean().item()
    # 256000 Bernoulli(0.1) draws: std 6e-4, so 5e-3 is eight standard deviations
    assert abs(dropped - p) < 5e-3
    # every feature is dropped at the rate p, not some more than others
    assert (keep == 0).double().mean(0).sub(p).abs().max() < 0.035  # 4000 draws: 7 std
    assert torch.equal(keep, fused.keep_mask(T, d, p, seed=7))
    assert not torch.equal(keep, fused.keep_mask(T, d, p, seed=8))
    assert torch.equal(fused.keep_mask(5, d, 0.0, seed=7), torch.ones(5, d))
    # a token's generator rows share its mask row: dropping a's rows where keep is 0 changes
    # nothing, for every row of the token
    ln = _norm(d)
    x, a = torch.randn(T, 3, d), torch.randn(T, 3, d)
    y = fused.add_norm(x, a, ln, p=p, seed=7, rows_per_token=3)
    a0 = a * (keep != 0)[:, None, :]
    torch.testing.assert_close(fused.add_norm(x, a0, ln, p=p, seed=7, rows_per_token=3), y)


def test_bad_arguments_are_named():
    ln = _norm(8)
    x = torch.randn(4, 8)
    with pytest.raises(ValueError, match="x and a must have one shape"):
        fused.add_norm(x, torch.randn(4, 9), ln)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
        fused.add_norm(x, x, ln, p=1.0)
    with pytest.raises(ValueError, match="whole number of tokens"):
        fused.add_norm(x, x, ln, rows_per_token=3)
    with pytest.raises(ValueError, match="out_dtype"):
        fused.add_norm(x, x, ln, out_dtype=torch.float16)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
        fused.keep_mask(3, 8, -0.1, 0)


def test_usable_only_for_cpu_float32_and_bfloat16():
    ln = _norm(8)
    assert fused.usable(ln, torch.zeros(2, 8), torch.zeros(2, 8, dtype=torch.bfloat16))
    assert not fused.usable(ln, torch.zeros(2, 8, dtype=torch.float64))
    assert not fused.usable(torch.nn.LayerNorm(8, elementwise_affine=False), torch.zeros(2, 8))
    assert not fused.usable(torch.nn.Identity(), torch.zeros(2, 8))  # a block with a norm removed
    assert not fused.usable(copy.deepcopy(ln).double(), torch.zeros(2, 8))
    with fused.disabled():
        assert not fused.usable(ln, torch.zeros(2, 8))
    assert fused.usable(ln, torch.zeros(2, 8))


def _ragged(B=5, n=7, d_in=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, n, d_in, generator=g)
    mask = torch.arange(n)[None] < torch.tensor([7, 3, 5, 1, 6])[:, None]
    return x, mask


@pytest.mark.parametrize("pack_sets", [True, False])
def test_mz_model_fused_equals_eager_in_eval(pack_sets):
    """The MZ blocks with the fused kernel (CPU default) and with the eager path give the same
    outputs and gradients in float32, the packed and the padded set layout (stated 1e-4: float32
    rounding of a deep model; the two differ only in summation order)."""
    torch.manual_seed(0)
    model = MZSetTransformer(**SMALL_MZ).eval()
    model.pack_sets = pack_sets
    twin = copy.deepcopy(model)
    x, mask = _ragged()
    y = model(x, mask)
    y.square().sum().backward()
    with fused.disabled():
        y_eager = twin(x, mask)
        y_eager.square().sum().backward()
    torch.testing.assert_close(y, y_eager, rtol=0, atol=1e-4)
    for (name, p), q in zip(model.named_parameters(), twin.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-3, atol=1e-4, msg=name)


def test_mz_training_mode_dropout_is_seeded_and_padding_blind():
    """Training mode: the fused dropout is reproducible under torch.manual_seed, differs between
    draws, and padding content still changes nothing (the mask depends on the token position,
    not on what is stored there)."""
    torch.manual_seed(0)
    model = MZSetTransformer(**SMALL_MZ, dropout=0.2).train()
    model.pack_sets = False  # padded layout: the padding is in the tensors the kernel reads
    x, mask = _ragged()
    torch.manual_seed(3)
    y1 = model(x, mask)
    junk = x.masked_fill(~mask[..., None], 1e3)
    torch.manual_seed(3)
    y2 = model(junk, mask)
    torch.manual_seed(3)
    torch.testing.assert_close(model(x, mask), y1, rtol=0, atol=0)
    torch.testing.assert_close(y2, y1, rtol=0, atol=1e-5)
    assert not torch.allclose(model(x, mask), y1)  # a new draw, a new mask


def test_a_failed_build_warns_once_and_falls_back(monkeypatch):
    from torch.utils import cpp_extension

    def no_compiler(**kwargs):
        raise RuntimeError("Error building extension\nc++: not found")

    monkeypatch.setattr(fused, "_state", {})
    monkeypatch.setattr(cpp_extension, "load", no_compiler)
    monkeypatch.delenv("MZLITE_FUSED", raising=False)
    with pytest.warns(RuntimeWarning, match="could not be built.*c\\+\\+: not found"):
        assert not fused.available()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not fused.available()  # tried once, warned once
    assert not fused.loaded()
    torch.manual_seed(0)
    model = MZSetTransformer(**SMALL_MZ).eval()
    x, mask = _ragged()
    assert torch.isfinite(model(x, mask)).all()  # the eager path
    with pytest.raises(RuntimeError, match="fused CPU kernel is off"):
        fused.add_norm(torch.zeros(2, 8), torch.zeros(2, 8), _norm(8))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_head_layout_kernels_equal_the_eager_copies(dtype):
    """``Packing.unpack_heads`` / ``pack_heads`` with the one-pass kernels against the eager
    copies: the same values exactly, and the same gradients (the spare rows of a packed batch
    copy its first element, so their gradients are added to it: exact up to the order of that
    sum, one rounding step)."""
    from mzlite.nn.attention import Packing

    torch.manual_seed(0)
    _, mask = _ragged()
    pk = Packing(mask, rows_multiple=8)
    assert len(pk.rows) > pk.N  # spare rows present
    H, ng, dk = 2, 3, 4
    x = torch.randn(len(pk.rows), ng, H * dk, dtype=torch.float64).to(dtype).requires_grad_()
    h = torch.randn(pk.B, H, pk.n, ng, dk, dtype=torch.float64).to(dtype).requires_grad_()
    results = []
    for use_kernel in (True, False):
        with contextlib.nullcontext() if use_kernel else fused.disabled():
            u, p = pk.unpack_heads(x, H), pk.pack_heads(h)
            torch.manual_seed(1)
            (u * torch.randn_like(u)).sum().backward()
            (p * torch.randn_like(p)).sum().backward()
        results.append((u, p, x.grad, h.grad))
        x.grad = h.grad = None
    (u, p, gx, gh), (u0, p0, gx0, gh0) = results
    assert u.shape == (pk.B, H, pk.n, ng, dk) and p.shape == (len(pk.rows), ng, H * dk)
    assert torch.equal(u, u0) and torch.equal(p, p0) and torch.equal(gx, gx0)
    assert u[~mask[:, None, :, None, None].expand_as(u)].abs().max() == 0  # zeros at padding
    tol = 2**-7 * gh0.abs().max().item() if dtype == torch.bfloat16 else 1e-12
    torch.testing.assert_close(gh, gh0, rtol=0, atol=tol)
