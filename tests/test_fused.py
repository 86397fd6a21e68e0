"""The fused CPU kernels (mzlite.nn.fused) and where they are chosen.

- The kernels: residual + dropout + LayerNorm against the same computation in float64 PyTorch,
  gradients included; the zonotope LayerNorm (the default reading) against its eager function
  in float64 and in the stream's own dtypes, at every width (vector code, AVX-512 or AVX2, and
  generic loops) and every float32 / bfloat16 mix it takes; the head-layout copies against the
  eager copies.
- The models: an MZ-Set Transformer on the kernels (whatever this CPU's build has) against its
  eager path, d = 32, 64, 128, both readings with kernels, forward and backward.
- The choice (``fused.fast_path``): the policy, the measured choice (kept per kernel and dtype,
  stored and keyed, re-measured when the key changes, overridden by ``MZLITE_FUSED``; a fake
  clock favouring either side picks that side), the width rule, ``disabled()``, built and
  measured in the constructor and never in a forward pass, ninja's folder handed to the build's
  child process only (this process's PATH untouched).
- No CPU premise: nothing asks for AVX-512 or AVX2 (a build without them runs every test here:
  ``MZLITE_FUSED_MARCH=x86-64``), ``has_avx512`` forced False changes no choice.
- Dropout: the kernel's hashed masks and eager's ``bernoulli_`` masks have one distribution.
- No compiler: simulated by a build that fails; the kernel tests skip, the models run eager.

Tests that need the kernels ask for the ``kernels`` (or ``forced``) fixture, which skips them
where the kernels cannot be built (no C++ compiler)."""

import copy
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from scipy import stats

from mzlite.nn import MZSetTransformer, fused
from mzlite.nn.attention import (
    Packing,
    add_dropped,
    add_norm_rows,
    add_zonotope_norm,
    zonotope_layer_norm,
)

ROOT = Path(__file__).resolve().parents[1]
SMALL_MZ = dict(d_in=3, d_out=2, d_model=16, n_heads=4, d_ff=32, n_inducing=4, n_g=3, L=2)

if os.environ.get("MZLITE_FUSED") == "0":
    pytest.skip("the fused kernels are turned off (MZLITE_FUSED=0)", allow_module_level=True)


def require_kernels() -> None:
    """Skip the calling test where the kernels cannot be built here (no C++ compiler)."""
    if not fused.build():
        pytest.skip(f"the fused CPU kernels cannot be built here: {fused.build_error()}")


@pytest.fixture
def kernels():
    require_kernels()


@pytest.fixture
def forced(kernels, monkeypatch):
    """The kernels selected wherever they run (``MZLITE_FUSED=1``), whatever this CPU's build
    has (AVX-512, AVX2 or generic loops) and whatever the measurement chose."""
    monkeypatch.setenv("MZLITE_FUSED", "1")


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A process state with the loaded kernels but no choice yet, its store under tmp_path."""
    require_kernels()
    monkeypatch.setattr(fused, "_state", {"ext": fused._state["ext"]})
    monkeypatch.setattr(fused, "_build_dir", lambda name: tmp_path / name)
    monkeypatch.delenv("MZLITE_FUSED", raising=False)


@pytest.fixture
def no_compiler(monkeypatch):
    """A process in which the build fails as it does without a C++ compiler (fresh state)."""

    def fail(name, build_dir):
        raise RuntimeError("Error building extension: c++: not found")

    monkeypatch.setattr(fused, "_state", {})
    monkeypatch.setattr(fused, "_compile", fail)
    monkeypatch.setattr(fused, "_build_dir", lambda name: Path("/nonexistent") / name)
    monkeypatch.delenv("MZLITE_FUSED", raising=False)


def _norm(d, seed=0):
    torch.manual_seed(seed)
    ln = torch.nn.LayerNorm(d)
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
    return ln


def _ragged(B=5, n=7, d_in=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, n, d_in, generator=g)
    mask = torch.arange(n)[None] < torch.tensor([7, 3, 5, 1, 6])[:, None]
    return x, mask


# ----------------------------------------------------------------------------- the kernels

DTYPES = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("d", [64, 256, 48, 80])  # vector code (AVX-512, AVX2), generic loops
@pytest.mark.parametrize("x_dtype", DTYPES)
@pytest.mark.parametrize("a_dtype", DTYPES)
@pytest.mark.parametrize("out_dtype", DTYPES)
def test_add_norm_equals_float64_reference(kernels, d, x_dtype, a_dtype, out_dtype):
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


ZONO_WIDTHS = [32, 64, 128, 256, 48, 80]  # vector code (AVX-512: the first 4, AVX2: 5), generic


def _zonotope_inputs(d, c_dtype, G_dtype, a_dtype, T=40, ng=5, seed=0):
    """``(c, G, a_c, a_G)``: residual streams of ``c_dtype`` / ``G_dtype``, branches of
    ``a_dtype`` (as autocast hands them over: bf16 branch outputs on a float32 or bf16 residual);
    generators ~0.1 as in a model (small perturbations of the centre)."""
    g = torch.Generator().manual_seed(seed)
    c, a_c = torch.randn(T, d, generator=g), torch.randn(T, d, generator=g)
    G, a_G = 0.1 * torch.randn(T, ng, d, generator=g), 0.1 * torch.randn(T, ng, d, generator=g)
    xs = (c.to(c_dtype), G.to(G_dtype), a_c.to(a_dtype), a_G.to(a_dtype))
    return tuple(x.requires_grad_() for x in xs)


def _close(got, want, dtype, what):
    """Within one rounding step of ``dtype`` (bf16 2^-8, float32 1e-5), relative to the largest
    value: a wrong mask row, a missing 1/(1-p) or a missing term of the gradient is off by
    O(1)."""
    eps = 2**-8 if dtype == torch.bfloat16 else 1e-5
    scale = want.abs().max().item()
    torch.testing.assert_close(got.double(), want.double(), rtol=0, atol=4 * eps * scale, msg=what)


@pytest.mark.parametrize("d", ZONO_WIDTHS)
@pytest.mark.parametrize("c_dtype", DTYPES)
@pytest.mark.parametrize("G_dtype", DTYPES)
@pytest.mark.parametrize("a_dtype", DTYPES)
def test_zonotope_norm_equals_float64_eager(kernels, d, c_dtype, G_dtype, a_dtype):
    """The fused zonotope LayerNorm (residual, the kernel's dropout, the centre's LayerNorm and
    its affine map on the generators) against the eager ``zonotope_layer_norm`` in float64 on
    the same rounded inputs and mask: both outputs and all six gradients (centre, generators,
    both branches, LayerNorm weight and bias), every width and dtype mix the kernel takes. The
    generators' pull on the centre's sigma is in the centre's gradient: it is checked too."""
    p, seed = 0.3, 4321
    ln = _norm(d)
    c, G, a_c, a_G = xs = _zonotope_inputs(d, c_dtype, G_dtype, a_dtype)
    y_c, y_G = fused.zonotope_norm(c, G, a_c, a_G, ln, p=p, seed=seed)
    # each stream in the dtype eager ``c + a_c`` gives it
    assert y_c.dtype == torch.promote_types(c_dtype, a_dtype) and y_c.shape == c.shape
    assert y_G.dtype == torch.promote_types(G_dtype, a_dtype) and y_G.shape == G.shape
    g = torch.Generator().manual_seed(1)
    gy_c = torch.randn(y_c.shape, generator=g).to(y_c.dtype)
    gy_G = torch.randn(y_G.shape, generator=g).to(y_G.dtype)
    torch.autograd.backward((y_c, y_G), (gy_c, gy_G))

    ln64 = copy.deepcopy(ln).double()
    x64 = [x.detach().double().requires_grad_() for x in xs]
    keep = fused.keep_mask(len(c), d, p, seed).double()
    hc, hG = x64[0] + x64[2] * keep, x64[1] + x64[3] * keep[:, None]
    r_c, r_G = zonotope_layer_norm(hc, hG, ln64)
    torch.autograd.backward((r_c, r_G), (gy_c.double(), gy_G.double()))

    _close(y_c, r_c, y_c.dtype, "centre")
    _close(y_G, r_G, y_G.dtype, "generators")
    for name, x, x_ref in zip(("c", "G", "a_c", "a_G"), xs, x64, strict=True):
        _close(x.grad, x_ref.grad, x.dtype, f"gradient of {name}")
    # float32 sums over 40 tokens x 6 rows of (possibly bf16) terms
    torch.testing.assert_close(ln.weight.grad.double(), ln64.weight.grad, rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(ln.bias.grad.double(), ln64.bias.grad, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("d", ZONO_WIDTHS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_zonotope_norm_equals_the_eager_function_in_its_dtype(kernels, d, dtype):
    """What the model runs: ``add_zonotope_norm``'s kernel against its eager function on the same
    float32 or bf16 tensors, without dropout, leading axes (sets, elements) kept: values and
    gradients agree to the eager path's own rounding (eager rounds the bf16 residual sum once
    before normalising; the kernel sums in float32: one bf16 step apart at most)."""
    ln = _norm(d)
    xs = _zonotope_inputs(d, dtype, dtype, dtype, T=24)
    xs = tuple(x.detach().view(4, 6, *x.shape[1:]).requires_grad_() for x in xs)
    twin = tuple(x.detach().clone().requires_grad_() for x in xs)
    ln_twin = copy.deepcopy(ln)
    got = add_zonotope_norm.kernel.run(*xs, ln, 0.0)
    want = add_zonotope_norm.eager(*twin, ln_twin, 0.0)
    g = torch.Generator().manual_seed(2)
    grads = tuple(torch.randn(y.shape, generator=g).to(y.dtype) for y in want)
    torch.autograd.backward(got, grads)
    torch.autograd.backward(want, grads)
    for y, y0, what in zip(got, want, ("centre", "generators"), strict=True):
        assert y.dtype == y0.dtype and y.shape == y0.shape
        _close(y, y0, dtype, what)
    for name, x, x0 in zip(("c", "G", "a_c", "a_G"), xs, twin, strict=True):
        _close(x.grad, x0.grad, dtype, f"gradient of {name}")
    _close(ln.weight.grad, ln_twin.weight.grad, torch.float32 if dtype == torch.float32 else dtype,
           "weight gradient")  # fmt: skip
    _close(ln.bias.grad, ln_twin.bias.grad, torch.float32, "bias gradient")


def test_the_models_stand_in_returns_the_branches_dtype(kernels):
    """Under bf16 autocast the branches are bf16 and a residual may be float32 (learned tokens,
    centres after a LayerNorm): the stand-in returns both streams in bf16 (as the ``"layernorm"``
    reading does), the eager function in float32; values one bf16 rounding apart. With float32
    branches, float32, as eager."""
    ln = _norm(64)
    xs = _zonotope_inputs(64, torch.float32, torch.float32, torch.bfloat16, T=12)
    got = add_zonotope_norm.kernel.run(*xs, ln, 0.0)
    want = add_zonotope_norm.eager(*xs, ln, 0.0)
    assert [y.dtype for y in got] == [torch.bfloat16] * 2
    assert [y.dtype for y in want] == [torch.float32] * 2
    for y, y0, what in zip(got, want, ("centre", "generators"), strict=True):
        _close(y, y0, torch.bfloat16, what)
    xs = _zonotope_inputs(64, torch.bfloat16, torch.float32, torch.float32, T=12)
    assert [y.dtype for y in add_zonotope_norm.kernel.run(*xs, ln, 0.0)] == [torch.float32] * 2
    with pytest.raises(ValueError, match="out_dtype must be None, torch.float32 or"):
        fused.zonotope_norm(*xs, ln, out_dtype=torch.float16)


def test_zonotope_norm_falls_back_or_names_what_it_does_not_take(kernels):
    """Arguments the kernel does not take run the eager function (``fast_path``: float64, a
    LayerNorm without weight and bias, broadcast residuals), and calling ``zonotope_norm``
    itself with them raises an error naming the arguments."""
    ln = _norm(32)  # an AVX-512 width: only the property under test can turn the kernel down
    c, G, a_c, a_G = _zonotope_inputs(32, torch.float32, torch.float32, torch.float32, T=3, ng=2)
    accepts = add_zonotope_norm.kernel.accepts
    assert accepts(c, G, a_c, a_G, ln, 0.0)
    c64, G64 = c.detach().double(), G.detach().double()
    assert not accepts(c64, G64, c64, G64, copy.deepcopy(ln).double(), 0.0)
    plain = torch.nn.LayerNorm(32, elementwise_affine=False)
    assert not accepts(c, G, a_c, a_G, plain, 0.0)
    assert not accepts(c, G, a_c[:1].expand_as(c), a_G[:, :1], ln, 0.0)  # broadcast branch
    before = fused.calls.copy()
    with torch.no_grad():  # float64 through the dispatcher: the eager function, exactly
        out = add_zonotope_norm(c64, G64, c64, G64, copy.deepcopy(ln).double(), 0.0)
        ref = zonotope_layer_norm(2 * c64, 2 * G64, copy.deepcopy(ln).double())
    assert fused.calls == before
    torch.testing.assert_close(out, ref, rtol=0, atol=0)
    with pytest.raises(ValueError, match="c and a_c, G and a_G must have one shape each"):
        fused.zonotope_norm(c, G, a_c[:2], a_G, ln)
    with pytest.raises(ValueError, match=r"G must be \(\.\.\., n_g, d\) for c"):
        fused.zonotope_norm(c, G[:2], a_c, a_G[:2], ln)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\)"):
        fused.zonotope_norm(c, G, a_c, a_G, ln, p=1.0)
    with pytest.raises(RuntimeError, match="must be float32 or bfloat16"):
        fused.zonotope_norm(c, G64, a_c, G64, ln)


def test_without_dropout_it_is_layer_norm_of_the_sum(kernels):
    ln = _norm(64)
    x, a = torch.randn(7, 3, 64), torch.randn(7, 3, 64)
    torch.testing.assert_close(fused.add_norm(x, a, ln), ln(x + a), rtol=0, atol=1e-5)
    # any leading shape; float32 out unless both inputs are bf16 (eager autocast's rule)
    assert fused.add_norm(x.bfloat16(), a, ln).dtype == torch.float32
    assert fused.add_norm(x.bfloat16(), a.bfloat16(), ln).dtype == torch.bfloat16


def test_bad_arguments_are_named(kernels, monkeypatch):
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
    monkeypatch.setenv("MZLITE_FUSED", "yes")
    with pytest.raises(ValueError, match=r"MZLITE_FUSED must be one of \('auto', '1', '0'\)"):
        fused.policy()


def test_usable_only_for_cpu_float32_and_bfloat16():
    ln = _norm(8)
    assert fused.usable(ln, torch.zeros(2, 8), torch.zeros(2, 8, dtype=torch.bfloat16))
    assert not fused.usable(ln, torch.zeros(2, 8, dtype=torch.float64))
    assert not fused.usable(torch.nn.LayerNorm(8, elementwise_affine=False), torch.zeros(2, 8))
    assert not fused.usable(torch.nn.Identity(), torch.zeros(2, 8))  # a block with a norm removed
    assert not fused.usable(copy.deepcopy(ln).double(), torch.zeros(2, 8))


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_head_layout_kernels_equal_the_eager_copies(kernels, dtype):
    """``Packing.unpack_heads`` / ``pack_heads`` with the one-pass kernels against the eager
    copies: the same values exactly, and the same gradients (the spare rows of a packed batch
    copy its first element, so their gradients are added to it: exact up to the order of that
    sum, one rounding step)."""
    torch.manual_seed(0)
    _, mask = _ragged()
    pk = Packing(mask, rows_multiple=8)
    assert len(pk.rows) > pk.N  # spare rows present
    H, ng, dk = 2, 3, 4
    x = torch.randn(len(pk.rows), ng, H * dk, dtype=torch.float64).to(dtype).requires_grad_()
    h = torch.randn(pk.B, H, pk.n, ng, dk, dtype=torch.float64).to(dtype).requires_grad_()
    results = []
    for kernel in (Packing.unpack_heads.kernel, Packing.pack_heads.kernel), None:
        u = kernel[0].run(pk, x, H) if kernel else Packing.unpack_heads.eager(pk, x, H)
        p = kernel[1].run(pk, h) if kernel else Packing.pack_heads.eager(pk, h)
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


# ----------------------------------------------------------------------------- the models


def _grads_and_output(model, x, mask):
    y = model(x, mask)
    y.square().sum().backward()
    return y.detach(), {n: p.grad for n, p in model.named_parameters()}


@pytest.mark.parametrize("d", [32, 64, 128])
@pytest.mark.parametrize("pack_sets", [True, False])
@pytest.mark.parametrize("gen_norm", ["zonotope", "layernorm"])
def test_mz_model_on_the_kernels_equals_eager(forced, d, pack_sets, gen_norm):
    """An MZ-Set Transformer whose every kernel runs (residual + LayerNorm of its reading, the
    default ``"zonotope"`` or ``"layernorm"``, and the head layouts) against the same model on
    the eager path, at d = 32, 64 and 128 (vector code), the packed and the padded set layout:
    the same outputs and gradients in float32 (stated 1e-4: float32 rounding of a deep model;
    the two differ in summation order only)."""
    torch.manual_seed(0)
    cfg = dict(SMALL_MZ, d_model=d, d_ff=2 * d, gen_norm=gen_norm)
    model = MZSetTransformer(**cfg).eval()
    model.pack_sets = pack_sets
    twin = copy.deepcopy(model)
    x, mask = _ragged()
    before = fused.calls.copy()
    y, grads = _grads_and_output(model, x, mask)
    ran = fused.calls - before
    kernel = "add_zonotope_norm" if gen_norm == "zonotope" else "add_norm_rows"
    assert ran[kernel] > 0, f"the model did not run the {kernel} kernel"
    assert ran["unpack_heads" if pack_sets else "heads_first"] > 0
    with fused.disabled():
        y_eager, grads_eager = _grads_and_output(twin, x, mask)
    assert fused.calls - before == ran  # nothing ran on the kernels inside disabled()
    torch.testing.assert_close(y, y_eager, rtol=0, atol=1e-4)
    for name, g in grads.items():
        torch.testing.assert_close(g, grads_eager[name], rtol=1e-3, atol=1e-4, msg=name)


def test_the_default_reading_runs_the_zonotope_kernel(forced):
    """``gen_norm="zonotope"`` (the default) runs its residual + zonotope LayerNorm on the fused
    kernel at d = 64 (with the head layouts), never the ``"layernorm"`` reading's kernel, and
    ``fused.disabled()`` runs none."""
    torch.manual_seed(0)
    model = MZSetTransformer(**dict(SMALL_MZ, d_model=64, d_ff=128)).eval()
    x, mask = _ragged()
    before = fused.calls.copy()
    model(x, mask)
    ran = fused.calls - before
    assert ran["add_zonotope_norm"] > 0 and ran["unpack_heads"] > 0
    assert ran["add_norm_rows"] == 0
    with fused.disabled():
        model(x, mask)
    assert fused.calls - before == ran


def test_mz_training_mode_dropout_is_seeded_and_padding_blind(forced):
    """Training mode on the kernels: the hashed dropout is reproducible under torch.manual_seed,
    differs between draws, and padding content still changes nothing (the mask depends on the
    token position, not on what is stored there)."""
    torch.manual_seed(0)
    model = MZSetTransformer(**SMALL_MZ, dropout=0.2, gen_norm="layernorm").train()
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


# ----------------------------------------------------------------------------- the choice


def _kernels_run(x, mask, **cfg):
    """The kernels a forward pass of a small MZ-Set Transformer runs (through fast_path)."""
    torch.manual_seed(0)
    cfg = dict(SMALL_MZ, d_model=32, d_ff=64, gen_norm="layernorm") | cfg
    model = MZSetTransformer(**cfg).eval()
    before = fused.calls.copy()
    model(x, mask)
    return set(fused.calls - before)


def test_the_policy_runs_what_was_measured_faster(fresh, monkeypatch):
    """Under ``auto`` a kernel runs where the measured choice has it faster, per kernel and
    dtype (bf16 under autocast); add_norm only at the widths with vector code; ``1`` runs them
    wherever they can run, ``0`` never; a build without AVX-512 changes nothing."""
    x, mask = _ragged()
    names = ("add_norm_rows", "add_zonotope_norm", "unpack_heads", "pack_heads", "heads_first",
             "heads_last")  # fmt: skip
    every = {f"{n}:{dt}": True for n in names for dt in ("float32", "bfloat16")}
    monkeypatch.setitem(fused._state, "choice", dict(every))
    assert fused.loaded()
    layouts = {"unpack_heads", "pack_heads", "heads_first", "heads_last"}
    # d = 32: add_norm has vector code there, unless this build has none (MZLITE_FUSED_MARCH)
    norm = {"add_norm_rows"} if 32 in fused.simd_widths() else set()
    assert _kernels_run(x, mask) == norm | layouts
    assert "add_zonotope_norm" in _kernels_run(x, mask, gen_norm="zonotope")
    fused._state["choice"] |= {"unpack_heads:float32": False, "add_norm_rows:float32": False}
    assert _kernels_run(x, mask) == layouts - {"unpack_heads"}
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the bf16 choice: all kernels
        assert _kernels_run(x, mask) == norm | layouts
    # add_norm's generic loops only when forced; the zonotope kernel at every width
    generic = min(set(range(8, 200, 4)) - fused.simd_widths())
    wide = dict(d_model=generic, d_ff=2 * generic)
    assert "add_norm_rows" not in _kernels_run(x, mask, **wide)
    assert "add_zonotope_norm" in _kernels_run(x, mask, gen_norm="zonotope", **wide)
    monkeypatch.setattr(fused, "has_avx512", lambda: False)  # forced "no AVX-512": no change
    assert "add_zonotope_norm" in _kernels_run(x, mask, gen_norm="zonotope")
    monkeypatch.setitem(fused._state, "choice", {k: False for k in every})  # eager measured faster
    assert not fused.loaded() and _kernels_run(x, mask, gen_norm="zonotope") == set()
    monkeypatch.setenv("MZLITE_FUSED", "1")
    assert fused.loaded() and "add_norm_rows" in _kernels_run(x, mask, **wide)
    monkeypatch.setitem(fused._state, "choice", dict(every))
    monkeypatch.setenv("MZLITE_FUSED", "0")
    assert not fused.loaded() and _kernels_run(x, mask) == set()


class _FakeClock:
    """``fused._clock`` for the tests: time advances only when a fake step runs, by the step's
    cost, so a measurement's verdict is known in advance (no real timing)."""

    def __init__(self):
        self.now, self.ran = 0.0, []

    def __call__(self):
        return self.now

    def step(self, name, side, cost):
        def run():
            self.ran.append((name, side))
            self.now += cost

        return run


def _fake_cases(clock, kernel_cost):
    """Two kernels, two dtypes; ``kernel_cost(name)``: its kernel's cost (eager costs 1)."""
    for name in ("add_zonotope_norm", "unpack_heads"):
        for dtype in (torch.float32, torch.bfloat16):
            yield (name, dtype, clock.step(name, "kernel", kernel_cost(name)),
                   clock.step(name, "eager", 1.0))  # fmt: skip


@pytest.mark.parametrize("kernel_cost", [0.5, 2.0])
def test_a_fake_clock_favouring_either_side_picks_that_side(fresh, monkeypatch, kernel_cost):
    """The verdict follows the timings: kernels timed at half eager's cost are chosen, at twice
    it they are not; both sides run interleaved, in alternating order, the same number of
    times (one warm-up pair, then ``MEASURE_REPEATS``)."""
    clock = _FakeClock()
    monkeypatch.setattr(fused, "_clock", clock)
    monkeypatch.setattr(fused, "_cases", lambda: _fake_cases(clock, lambda name: kernel_cost))
    chosen = fused.choose()
    assert chosen == {f"{n}:{dt}": kernel_cost < 1 for n in ("add_zonotope_norm", "unpack_heads")
                      for dt in ("float32", "bfloat16")}  # fmt: skip
    assert fused.choice() == chosen and fused.loaded() is (kernel_cost < 1)
    first = [side for name, side in clock.ran[: 2 * (fused.MEASURE_REPEATS + 1)]]
    assert first[:4] == ["kernel", "eager", "eager", "kernel"]  # alternating order
    assert first.count("kernel") == first.count("eager") == fused.MEASURE_REPEATS + 1
    # a mixed verdict, per kernel
    clock.ran.clear()
    costs = {"add_zonotope_norm": 0.5, "unpack_heads": 3.0}
    monkeypatch.setattr(fused, "_cases", lambda: _fake_cases(clock, costs.get))
    mixed = fused.choose(remeasure=True)
    assert mixed["add_zonotope_norm:float32"] and not mixed["unpack_heads:bfloat16"]


def test_the_choice_is_stored_keyed_and_measured_again_when_the_key_changes(fresh, monkeypatch):
    """Measured once, then read back (no measurement) while ``choice_key()`` is the same; a
    changed key (another torch, CPU, source, ...) measures again; the record names what was
    timed. The environment overrides it: ``1`` and ``0`` never measure."""
    clock = _FakeClock()
    monkeypatch.setattr(fused, "_clock", clock)
    monkeypatch.setattr(fused, "_cases", lambda: _fake_cases(clock, lambda name: 0.5))
    key = fused.choice_key()
    assert {"machine", "cpu", "torch", "sources"} <= set(key)
    fused.prepare()  # auto: builds (loaded already) and measures
    measured = len(clock.ran)
    assert measured and all(fused.choice().values())
    (stored,) = Path(fused._choice_path(key)).parent.glob("choice-*.json")
    record = json.loads(stored.read_text())
    assert record["key"] == key and record["measured"]["unpack_heads:float32"]["eager_s"] == 1.0
    # another process on the same machine: read back, not measured
    monkeypatch.setattr(fused, "_state", {"ext": fused._state["ext"]})
    fused.prepare()
    assert len(clock.ran) == measured and all(fused.choice().values())
    # a changed key (here: another torch version) measures again, now finding eager faster
    monkeypatch.setattr(fused, "_state", {"ext": fused._state["ext"]})
    monkeypatch.setattr(fused, "choice_key", lambda: {**key, "torch": "9.9"})
    monkeypatch.setattr(fused, "_cases", lambda: _fake_cases(clock, lambda name: 2.0))
    fused.prepare()
    assert len(clock.ran) == 2 * measured and not any(fused.choice().values())
    # forced either way: nothing is measured, the environment wins over the stored choice
    for forced_to, runs in (("1", True), ("0", False)):
        monkeypatch.setattr(fused, "_state", {"ext": fused._state["ext"]})
        monkeypatch.setenv("MZLITE_FUSED", forced_to)
        fused.prepare()
        assert len(clock.ran) == 2 * measured and fused.loaded() is runs


def test_the_measurement_runs_every_kernel_on_fits_shapes(kernels):
    """The real cases (no timing asserted): every kernel of the fast path, both dtypes, each
    step runs forward and backward on MZ-Full's batch shapes, on the kernel and on eager."""
    cases = list(fused._cases())
    assert {(name, dt) for name, dt, *_ in cases} == {
        (k.name, dt) for k in (fused.ADD_ZONOTOPE_NORM, fused.ADD_NORM_ROWS, fused.UNPACK_HEADS,
                               fused.PACK_HEADS, fused.HEADS_FIRST, fused.HEADS_LAST)
        for dt in (torch.float32, torch.bfloat16)
    }  # fmt: skip
    before = fused.calls.copy()
    for _, _, kernel_step, eager_step in cases:
        kernel_step()
        eager_step()
    assert fused.calls == before  # run directly, not through fast_path


def test_the_measurement_leaves_the_rng_and_the_callers_context_alone(kernels):
    """Measured inside ``no_grad`` and bf16 autocast (a model built there), it still times
    forward and backward in the dtypes it names, and torch's global RNG (both sides draw
    dropout masks from it) is as it was: a process that measures trains as one that reads the
    stored choice."""
    torch.manual_seed(5)
    state = torch.get_rng_state()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = fused.measure(repeats=1)
    assert torch.equal(torch.get_rng_state(), state)
    assert len(out) == 12 and all(v["kernel_s"] > 0 and v["eager_s"] > 0 for v in out.values())


def test_a_failed_measurement_warns_and_runs_eager(fresh, monkeypatch):
    def broken():
        raise RuntimeError("simulated")
        yield

    monkeypatch.setattr(fused, "_cases", broken)
    with pytest.warns(RuntimeWarning, match="could not time.*simulated"):
        assert fused.choose() == {}
    assert not fused.loaded()


def test_the_build_comes_before_the_first_forward(monkeypatch):
    """The MZ blocks' constructors build the kernels (and under ``auto`` measure them); a
    forward pass never builds nor measures, and without them it runs eager."""
    built = []
    monkeypatch.setattr(fused, "_state", {})
    monkeypatch.setattr(fused, "build", lambda: built.append(1) or False)
    monkeypatch.setenv("MZLITE_FUSED", "1")
    torch.manual_seed(0)
    model = MZSetTransformer(**SMALL_MZ)
    assert built  # tried at construction
    monkeypatch.setattr(fused, "build", lambda: pytest.fail("a forward pass built the kernels"))
    fused._state["error"] = "simulated"  # as after a failed try: prepare() tries once only
    before = fused.calls.copy()
    model(*_ragged())
    assert fused.calls == before
    # explicitly turned off: the constructor does not try
    monkeypatch.setattr(fused, "_state", {})
    monkeypatch.setenv("MZLITE_FUSED", "0")
    tries = len(built)
    MZSetTransformer(**SMALL_MZ)
    assert len(built) == tries
    # auto: built and measured in the first constructor, once per process
    chose = []
    monkeypatch.setenv("MZLITE_FUSED", "auto")
    monkeypatch.setattr(fused, "build", lambda: built.append(1) or True)
    monkeypatch.setattr(fused, "choose", lambda: chose.append(1) or fused._state.update(choice={}))
    MZSetTransformer(**SMALL_MZ)
    MZSetTransformer(**SMALL_MZ)
    assert len(built) == tries + 1 and chose == [1]
    monkeypatch.setattr(fused, "choose", lambda: pytest.fail("a forward pass measured"))
    model(*_ragged())


def test_ninja_is_handed_to_the_build_process_not_put_on_this_path(monkeypatch, tmp_path):
    """torch.utils.cpp_extension runs ninja from PATH; the build runs in a child process whose
    environment gets ninja's folder (a venv's ninja is on PATH only when the venv is active),
    and this process's PATH stays as it was."""
    seen = {}

    def run(cmd, env, **kw):
        seen["env"] = env
        return subprocess.CompletedProcess(cmd, 0, "", "")

    path = os.environ.get("PATH", "")
    monkeypatch.setattr(fused, "_ninja", lambda: "/opt/somewhere/bin/ninja")
    monkeypatch.setattr(fused.subprocess, "run", run)
    fused._compile("mzlite_fused_cpu_test", tmp_path)
    assert seen["env"]["PATH"].split(os.pathsep)[0] == "/opt/somewhere/bin"
    assert os.environ.get("PATH", "") == path
    assert (tmp_path / "mzlite_fused_cpu_test.built").exists()  # marked complete last
    monkeypatch.setattr(fused, "_ninja", lambda: None)
    with pytest.raises(RuntimeError, match="ninja not found.*pip install ninja"):
        fused._compile("mzlite_fused_cpu_test", tmp_path)


# ----------------------------------------------------------------------------- dropout


def _eager_mask(T, d, p, rows=3):
    """The eager path's mask, read off ``add_dropped`` (zero residual, unit branch): the
    centre's row per token, after checking that the token's generator rows share it."""
    c, a_c = torch.zeros(T, d), torch.ones(T, d)
    G, a_G = torch.zeros(T, rows, d), torch.ones(T, rows, d)
    keep_c, keep_G = add_dropped(c, G, a_c, a_G, p)
    assert torch.equal(keep_G, keep_c[:, None, :].expand_as(keep_G))  # one row per token
    return keep_c


def _check_iid_bernoulli(keep, p, what):
    """``keep`` (T, d) is i.i.d.: 0 with probability p, 1/(1-p) otherwise. Checked: the values,
    the rate overall and per feature, the number of drops per token against Binomial(d, p)
    (chi-square), and no correlation between neighbouring features or tokens."""
    T, d = keep.shape
    torch.testing.assert_close(keep.unique(), torch.tensor([0.0, 1 / (1 - p)]))
    dropped = (keep == 0).double()
    # T d draws: std sqrt(p (1-p) / (T d)); 6 std
    assert abs(dropped.mean().item() - p) < 6 * (p * (1 - p) / (T * d)) ** 0.5, what
    assert (dropped.mean(0) - p).abs().max() < 6 * (p * (1 - p) / T) ** 0.5, what
    counts = torch.bincount(dropped.sum(1).long(), minlength=d + 1).numpy()
    expected = stats.binom.pmf(range(d + 1), d, p) * T
    big = expected >= 5  # pool the sparse tail into one bin
    obs = list(counts[big]) + [counts[~big].sum()]
    exp = list(expected[big]) + [expected[~big].sum()]
    assert stats.chisquare(obs, exp, ddof=0).pvalue > 1e-4, what
    z = (dropped - p) / (p * (1 - p)) ** 0.5
    for lagged in (z[:, 1:] * z[:, :-1], z[1:] * z[:-1]):  # features, tokens
        assert abs(lagged.mean().item()) < 6 / lagged.numel() ** 0.5, what


@pytest.mark.parametrize("p", [0.1, 0.3])
def test_both_paths_draw_dropout_masks_of_one_distribution(kernels, p):
    """The kernel hashes its masks from a seed, eager draws ``bernoulli_``: other numbers, one
    distribution (which path ran is in the result's provenance, ``fused.loaded()``). The
    kernel's use of its mask is exact (``test_add_norm_equals_float64_reference``)."""
    T, d = 4000, 32
    torch.manual_seed(0)
    _check_iid_bernoulli(_eager_mask(T, d, p), p, "eager")
    _check_iid_bernoulli(fused.keep_mask(T, d, p, fused.draw_seed()), p, "kernel")
    assert torch.equal(fused.keep_mask(5, d, 0.0, seed=7), torch.ones(5, d))
    assert torch.equal(fused.keep_mask(T, d, p, 7), fused.keep_mask(T, d, p, 7))
    assert not torch.equal(fused.keep_mask(T, d, p, 7), fused.keep_mask(T, d, p, 8))


def test_both_paths_give_one_output_distribution(forced):
    """The block function itself, on the kernel and on the eager path, over many draws: the
    same mean and spread of every output element (6 standard errors; a mask shared wrongly,
    another rate or a missing 1/(1-p) moves them by many)."""
    T, R, d, p, draws = 6, 2, 32, 0.3, 400
    torch.manual_seed(0)
    ln_c, ln_G = _norm(d, 1), _norm(d, 2)
    c, G = torch.randn(T, d), torch.randn(T, R, d)
    a_c, a_G = torch.randn(T, d), torch.randn(T, R, d)
    args = (c, G, a_c, a_G, ln_c, ln_G, p)
    assert add_norm_rows.kernel.accepts(*args)
    with torch.no_grad():
        runs = {
            path: [torch.cat([o.flatten() for o in f(*args)]) for _ in range(draws)]
            for path, f in (("kernel", add_norm_rows.kernel.run), ("eager", add_norm_rows.eager))
        }
    k, e = (torch.stack(v).double() for v in runs.values())
    se = ((k.var(0) + e.var(0)) / draws).sqrt()
    assert ((k.mean(0) - e.mean(0)).abs() <= 6 * se + 1e-6).all()
    assert ((k.std(0) - e.std(0)).abs() <= 0.25 * e.std(0) + 1e-6).all()


# ----------------------------------------------------------------------------- no compiler


def test_without_a_compiler_it_warns_once_and_runs_eager(no_compiler):
    with pytest.warns(RuntimeWarning, match="could not be built.*c\\+\\+: not found"):
        assert not fused.build()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not fused.build()  # tried once, warned once
        MZSetTransformer(**SMALL_MZ)  # the constructor does not try again
    assert not fused.loaded() and "c++: not found" in fused.build_error()
    with pytest.raises(pytest.skip.Exception, match="cannot be built here.*c\\+\\+: not found"):
        require_kernels()  # what the kernel tests do: skip
    torch.manual_seed(0)
    model = MZSetTransformer(**SMALL_MZ, gen_norm="layernorm").eval()
    before = fused.calls.copy()
    assert torch.isfinite(model(*_ragged())).all()
    assert fused.calls == before  # the eager path
    with pytest.raises(RuntimeError, match=r"not loaded .*c\+\+: not found.*fused.build\(\)"):
        fused.add_norm(torch.zeros(2, 8), torch.zeros(2, 8), _norm(8))


@pytest.mark.slow
def test_this_file_skips_cleanly_on_a_machine_without_a_compiler(tmp_path):
    """The real thing in a fresh interpreter: no compiler (``CXX`` names none), an empty
    extension cache; every test of this file passes or skips, none fails."""
    if os.environ.get("MZLITE_TEST_NO_COMPILER"):
        pytest.skip("already inside the no-compiler run")
    env = dict(
        os.environ,
        CXX=str(tmp_path / "no-such-compiler"),
        TORCH_EXTENSIONS_DIR=str(tmp_path / "cache"),
        MZLITE_TEST_NO_COMPILER="1",
        PYTHONPATH=str(ROOT),
    )
    env.pop("MZLITE_FUSED", None)
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-rs"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    summary = out.stdout.strip().splitlines()[-1]
    assert "failed" not in summary and "error" not in summary and "skipped" in summary, summary
    assert "cannot be built here" in out.stdout, out.stdout[-3000:]
