"""Guarantees of mzlite.nn, each checked against an independent computation (paper Prop.
prop:perm, Thm. thm:bottleneck (a), Thm. thm:separation (a), App. app:impl parameter counts)."""

import copy
import math
import os

import pytest
import torch

from mzlite.nn import (
    LAYER_READINGS,
    MODEL_NAMES,
    MZISAB,
    MZSAB,
    AttentionDetails,
    MultiheadAttention,
    MZAttention,
    MZSetTransformer,
    MZSetTransformerConfig,
    SetModelDetails,
    SetTransformer,
    SetTransformerConfig,
    build_model,
    config_dict,
    count_parameters,
    mz_attention_reference,
    param_table,
    theorem3_layer,
)
from mzlite.nn.attention import Packing, zero_pad

SMALL = dict(d_in=3, d_out=2, d_model=16, n_heads=4, d_ff=32, n_inducing=4)
SMALL_MZ = dict(SMALL, n_g=3, L=2)


def _models(seed=0):
    torch.manual_seed(seed)
    genqk = MZSetTransformer(**SMALL_MZ, gen_qk=True).eval()
    for mod in genqk.modules():  # W^gen is zero at init: make the scores read the generators
        if isinstance(mod, MZAttention):
            with torch.no_grad():
                mod.W_q_gen.normal_(0, 1.0), mod.W_k_gen.normal_(0, 1.0)
    return [SetTransformer(**SMALL).eval(), MZSetTransformer(**SMALL_MZ).eval(), genqk]


def _randomise_mz(attn: MZAttention, scale=0.3):
    with torch.no_grad():
        attn.M_c.add_(scale * torch.randn_like(attn.M_c))
        attn.M_l.normal_(0, scale)
        attn.W_mix.normal_(0, 1.0)
        attn.gate.bias.normal_(0, 1.0)
        if attn.gen_qk:
            attn.W_q_gen.normal_(0, 1.0), attn.W_k_gen.normal_(0, 1.0)


def _batch(B=3, n=6, d=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, n, d, generator=g)
    mask = torch.ones(B, n, dtype=torch.bool)
    mask[0, n - 2 :] = False
    mask[1, 1] = False  # padding need not be at the end
    return x, mask


# ----------------------------------------------------------------------------- attention references


def _torch_mha(d, H, q, k, v, o_weight, o_bias):
    """nn.MultiheadAttention carrying the given projection weights (independent code path)."""
    mha = torch.nn.MultiheadAttention(d, H, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([q.weight, k.weight, v.weight]))
        mha.in_proj_bias.copy_(torch.cat([q.bias, k.bias, v.bias]))
        mha.out_proj.weight.copy_(o_weight)
        mha.out_proj.bias.copy_(o_bias)
    return mha.eval()


def test_standard_attention_equals_torch_mha():
    torch.manual_seed(0)
    d, H = 16, 4
    att = MultiheadAttention(d, n_heads=H)
    xq, mask = _batch(3, 5, d)
    xkv, _ = _batch(3, 6, d, seed=2)
    mask = torch.ones(3, 6, dtype=torch.bool)
    mask[0, 3:] = False
    out, w = att(xq, xkv, mask)
    ref = _torch_mha(d, H, att.q, att.k, att.v, att.o.weight, att.o.bias)
    r_out, r_w = ref(xq, xkv, xkv, key_padding_mask=~mask, average_attn_weights=False)
    torch.testing.assert_close(out, r_out, atol=1e-6, rtol=0)
    torch.testing.assert_close(w, r_w, atol=1e-6, rtol=0)
    assert w[0, :, :, 3:].abs().max() == 0  # masked keys get exactly zero weight


@pytest.mark.parametrize("random_Mc", [False, True])
def test_mz_centre_stream_is_standard_attention(random_Mc):
    """Prop. prop:perm: with M_l = 0, W_mix = 0 (and M_c = I at init) the centre stream is
    standard masked MHA; a general M_c folds into the output weight W_o blockdiag(M_c)."""
    torch.manual_seed(0)
    d, H, n_g = 16, 4, 3
    att = MZAttention(d, n_heads=H, n_g=n_g, L=2)
    with torch.no_grad():
        att.M_l.zero_()
        att.W_mix.zero_()
        if random_Mc:
            att.M_c.add_(0.5 * torch.randn_like(att.M_c))
    cq, _ = _batch(2, 5, d)
    ckv, mask = _batch(2, 6, d, seed=3)
    Gkv = torch.randn(2, 6, n_g, d)
    o_c, o_G, _ = att(cq, ckv, Gkv, mask)
    W_o = att.o.weight @ torch.block_diag(*att.M_c.detach())
    ref = _torch_mha(d, H, att.q, att.k, att.v, W_o, att.o.bias)
    r_out, _ = ref(cq, ckv, ckv, key_padding_mask=~mask)
    torch.testing.assert_close(o_c, r_out, atol=1e-6, rtol=0)
    # generators, one slot at a time, with M_l = W_mix = 0: standard attention whose values are
    # that generator slot, with the bias-free generator weights
    zero = torch.zeros(d)
    for g in range(n_g):
        vg = torch.nn.Linear(d, d)
        with torch.no_grad():
            vg.weight.copy_(att.v_g.weight)
            vg.bias.zero_()
        ref_g = _torch_mha(
            d, H, att.q, att.k, vg, att.o_g.weight @ torch.block_diag(*att.M_c.detach()), zero
        )
        r_g, _ = ref_g(cq, ckv, Gkv[:, :, g], key_padding_mask=~mask)
        torch.testing.assert_close(o_G[:, :, g], r_g, atol=1e-6, rtol=0)


@pytest.mark.parametrize("layer_reading", LAYER_READINGS)
def test_the_reference_form_matches_loops(layer_reading):
    """Eq. eq:mz-main written out with loops over heads and generators, float64 (under the
    centre-adaptive reading with def:relop's o_c = M(mu) c_hat): the package's reference form
    (``mz_attention_reference``) and ``forward`` compute it, and ``forward``'s details are its
    weights, gates and operators."""
    torch.manual_seed(0)
    d, H, n_g, L = 8, 2, 3, 2
    dk = d // H
    att = MZAttention(d, n_heads=H, n_g=n_g, L=L, layer_reading=layer_reading).double()
    _randomise_mz(att)
    B, nq, nkv = 2, 3, 5
    cq = torch.randn(B, nq, d, dtype=torch.float64)
    ckv = torch.randn(B, nkv, d, dtype=torch.float64)
    Gkv = torch.randn(B, nkv, n_g, d, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1]], dtype=torch.bool)
    f_c, f_G, info = att(cq, ckv, Gkv, mask, need_details=True)
    o_c, o_G = mz_attention_reference(att, cq, ckv, Gkv, mask)
    with torch.no_grad():
        for b in range(B):
            real = mask[b].nonzero().flatten()
            cbar = ckv[b, real].mean(0)
            gam = torch.tanh(att.gate.weight @ cbar + att.gate.bias).view(H, L)
            oc = torch.zeros(nq, d, dtype=torch.float64)
            oG = torch.zeros(nq, n_g, d, dtype=torch.float64)
            for h in range(H):
                sl = slice(h * dk, (h + 1) * dk)
                op = att.M_c[h] + sum(gam[h, ll] * att.M_l[h, ll] for ll in range(L))
                on_centres = att.M_c[h] if layer_reading == "literal" else op
                for i in range(nq):
                    qi = (att.q.weight @ cq[b, i] + att.q.bias)[sl]
                    ks = [(att.k.weight @ ckv[b, j] + att.k.bias)[sl] for j in real]
                    s = torch.stack([qi @ kj for kj in ks]) / math.sqrt(dk)
                    a = torch.exp(s - s.max())
                    a = a / a.sum()
                    assert torch.allclose(info.attention[b, h, i, real], a)
                    c_hat = sum(
                        a[t] * (att.v.weight @ ckv[b, j] + att.v.bias)[sl]
                        for t, j in enumerate(real)
                    )
                    oc[i, sl] = on_centres @ c_hat
                    stack = [gam[h, ll] * att.M_l[h, ll] @ c_hat for ll in range(L)]
                    for g in range(n_g):
                        G_hat = sum(
                            a[t] * (att.v_g.weight @ Gkv[b, j, g])[sl] for t, j in enumerate(real)
                        )
                        oG[i, g, sl] = att.M_c[h] @ G_hat + sum(
                            att.W_mix[h, g, ll] * stack[ll] for ll in range(L)
                        )
                    torch.testing.assert_close(info.operators[b, h], op)
                    torch.testing.assert_close(info.gates[b, h], gam[h])
            for out_c, out_G in ((o_c, o_G), (f_c, f_G)):
                torch.testing.assert_close(out_c[b], att.o(oc), atol=1e-12, rtol=0)
                torch.testing.assert_close(out_G[b], oG @ att.o_g.weight.T, atol=1e-12, rtol=0)


# (B, nq, nkv, d, H, n_g, L, gen_own_weights, gen_qk): heads, generators, matrix generators,
# no gates (L = 0), shared value weights and GenQK
SHAPES = [
    (2, 3, 5, 8, 2, 3, 2, True, False),
    (3, 1, 7, 12, 3, 1, 1, True, False),
    (2, 4, 4, 8, 1, 4, 0, True, False),
    (2, 3, 6, 8, 4, 2, 3, False, False),
    (2, 2, 5, 8, 2, 3, 2, True, True),
]


def _reference_case(shape, dtype, masked, seed=0, layer_reading="literal"):
    B, nq, nkv, d, H, n_g, L, own, gen_qk = shape
    torch.manual_seed(seed)
    att = MZAttention(d, n_heads=H, n_g=n_g, L=L, gen_own_weights=own, gen_qk=gen_qk,
                      layer_reading=layer_reading)  # fmt: skip
    with torch.no_grad():
        att.M_c.add_(0.3 * torch.randn_like(att.M_c))
        att.M_l.normal_(0, 0.3), att.W_mix.normal_(0, 1.0)
        if gen_qk:
            att.W_q_gen.normal_(0, 0.3), att.W_k_gen.normal_(0, 0.3)
    att = att.to(dtype)
    cq, ckv = torch.randn(B, nq, d, dtype=dtype), torch.randn(B, nkv, d, dtype=dtype)
    Gq, Gkv = torch.randn(B, nq, n_g, d, dtype=dtype), torch.randn(B, nkv, n_g, d, dtype=dtype)
    mask = None
    if masked:  # a random number of real keys per set, at least one, in random places
        keep = torch.randint(1, nkv + 1, (B, 1))
        mask = torch.rand(B, nkv).argsort(-1) < keep
    return att, (cq, ckv, Gkv, mask), Gq


@pytest.mark.parametrize("layer_reading", LAYER_READINGS)
@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(map(str, s)))
def test_mz_attention_forward_is_the_reference_form(shape, masked, dtype, tol, layer_reading):
    att, args, Gq = _reference_case(shape, dtype, masked, layer_reading=layer_reading)
    with torch.no_grad():
        o_c, o_G, _ = att(*args, Gq=Gq)
        r_c, r_G = mz_attention_reference(att, *args, Gq=Gq)
    torch.testing.assert_close(o_c, r_c, atol=tol, rtol=tol)
    torch.testing.assert_close(o_G, r_G, atol=tol, rtol=tol)


@pytest.mark.parametrize("layer_reading", LAYER_READINGS)
@pytest.mark.parametrize("shape", SHAPES[:2] + SHAPES[-1:], ids=lambda s: "-".join(map(str, s)))
def test_packed_and_bfloat16_forward_agree_with_the_reference_form(shape, layer_reading):
    """The set's ``Packing`` as the mask, as the blocks pass it: the keys packed (the inducing
    points and seeds read the set), the queries packed (the set reads the inducing points), both
    (self-attention); packed outputs are the reference's real rows."""
    att, (cq, ckv, Gkv, mask), Gq = _reference_case(
        shape, torch.float64, masked=True, layer_reading=layer_reading
    )
    with torch.no_grad():
        r_c, r_G = mz_attention_reference(att, cq, ckv, Gkv, mask, Gq=Gq)
        kvp = Packing(mask, rows_multiple=4)
        p_c, p_G, _ = att(cq, kvp.pack(ckv), kvp.pack(Gkv), kvp, Gq=Gq)
        torch.testing.assert_close(p_c, r_c, atol=1e-12, rtol=1e-12)
        torch.testing.assert_close(p_G, r_G, atol=1e-12, rtol=1e-12)
        qmask = torch.arange(cq.shape[1]) < torch.arange(cq.shape[0])[:, None] % cq.shape[1] + 1
        qp = Packing(qmask, rows_multiple=4)
        u_c, u_G = mz_attention_reference(att, cq, ckv, Gkv, None, Gq=Gq)  # every key real
        p_c, p_G, _ = att(qp.pack(cq), ckv, Gkv, qp, Gq=qp.pack(Gq))
        torch.testing.assert_close(qp.unpack(p_c), zero_pad(u_c, qmask), atol=1e-12, rtol=1e-12)
        torch.testing.assert_close(qp.unpack(p_G), zero_pad(u_G, qmask), atol=1e-12, rtol=1e-12)
        s_c, s_G = mz_attention_reference(att, ckv, ckv, Gkv, mask, Gq=Gkv)  # self-attention
        p_c, p_G, _ = att(kvp.pack(ckv), kvp.pack(ckv), kvp.pack(Gkv), kvp, Gq=kvp.pack(Gkv))
        torch.testing.assert_close(p_c[: kvp.N], s_c[mask], atol=1e-12, rtol=1e-12)
        torch.testing.assert_close(p_G[: kvp.N], s_G[mask], atol=1e-12, rtol=1e-12)
        with pytest.raises(ValueError, match="packed queries or keys"):
            att(cq, ckv, Gkv, kvp, Gq=Gq)
        # bfloat16 weights and inputs: the same numbers to bf16's ~3 significant digits
        half = copy.deepcopy(att).to(torch.bfloat16)
        b_c, b_G, _ = half(*(t.to(torch.bfloat16) for t in (cq, ckv, Gkv)), mask,
                           Gq=Gq.to(torch.bfloat16))  # fmt: skip
        scale = float(r_G.abs().max())
        torch.testing.assert_close(b_c.double(), r_c, atol=0.05 * scale, rtol=0.05)
        torch.testing.assert_close(b_G.double(), r_G, atol=0.05 * scale, rtol=0.05)


# ----------------------------------------------------------------------------- symmetry, padding


def test_block_permutation_equivariance():
    torch.manual_seed(0)
    d, n_g = 16, 3
    mab = dict(n_heads=4, d_ff=32, dropout=0.1, n_g=n_g, L=2)
    blocks = [MZSAB(d, **mab), MZISAB(d, **mab, m=4)]
    for blk in blocks:
        blk.eval()
        for a in (blk.mab.attn,) if isinstance(blk, MZSAB) else (blk.mab0.attn, blk.mab1.attn):
            _randomise_mz(a)
    c, mask = _batch(3, 7, d)
    G = torch.randn(3, 7, n_g, d)
    g = torch.Generator().manual_seed(5)
    for blk in blocks:
        oc, oG = blk(c, G, mask)
        for _ in range(10):
            p = torch.randperm(7, generator=g)
            pc, pG = blk(c[:, p], G[:, p], mask[:, p])
            torch.testing.assert_close(pc, oc[:, p], atol=1e-5, rtol=0)
            torch.testing.assert_close(pG, oG[:, p], atol=1e-5, rtol=0)


def test_model_permutation_invariance():
    x, mask = _batch(4, 9)
    g = torch.Generator().manual_seed(7)
    for model in _models():
        y = model(x, mask)
        for _ in range(10):
            p = torch.randperm(9, generator=g)
            torch.testing.assert_close(model(x[:, p], mask[:, p]), y, atol=1e-5, rtol=0)


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-5)])
def test_padding_invariance_and_variable_sizes(dtype, tol):
    """Exact in float64 (1e-10); float32 differs only by rounding (different reduction lengths)."""
    x, mask = _batch(3, 6)
    x = x.to(dtype)
    for model in _models():
        model.to(dtype)
        y = model(x, mask)
        # append padded rows holding large junk: nothing changes
        junk = 1e3 * torch.randn(3, 4, 3, dtype=dtype)
        x2 = torch.cat([x, junk], 1)
        m2 = torch.cat([mask, torch.zeros(3, 4, dtype=torch.bool)], 1)
        torch.testing.assert_close(model(x2, m2), y, atol=tol, rtol=0)
        # changing what sits in padded rows changes nothing either
        x3 = x.masked_fill(~mask[..., None], -7.0)
        torch.testing.assert_close(model(x3, mask), y, atol=tol, rtol=0)
        # one set at a time, each without padding
        for b in range(3):
            yb = model(x[b : b + 1, mask[b]])
            torch.testing.assert_close(yb, y[b : b + 1], atol=tol, rtol=0)
        assert torch.equal(model(x), model(x, torch.ones(3, 6, dtype=torch.bool)))


def _bf16_autocast(device="cpu"):
    return torch.autocast(device, dtype=torch.bfloat16)


# the bf16 guarantees on CPU (fit's default there) and on CUDA (amp=True) where a GPU is present
DEVICES = [
    "cpu",
    pytest.param(
        "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
    ),
]


@pytest.mark.parametrize("device", DEVICES)
def test_padding_invariance_under_bf16_autocast(device):
    """fit's CPU default (TrainConfig(amp=None) on a bf16 CPU), CUDA's amp=True: padding still
    changes nothing. Stated tolerance 1e-2 (a few bf16 rounding steps at outputs of size ~1-5;
    measured: 0 on CPU); junk of size 1e3 in padded rows leaking anywhere would exceed it by
    orders of magnitude."""
    x, mask = (t.to(device) for t in _batch(3, 6))
    for model in _models():
        model.to(device)
        with _bf16_autocast(device):
            y = model(x, mask)
            assert y.dtype == torch.bfloat16  # the mode under test is really on
            junk = 1e3 * torch.randn(3, 4, 3, device=device)
            x2 = torch.cat([x, junk], 1)
            m2 = torch.cat([mask, torch.zeros(3, 4, dtype=torch.bool, device=device)], 1)
            torch.testing.assert_close(model(x2, m2), y, atol=1e-2, rtol=0)
            x3 = x.masked_fill(~mask[..., None], -7.0)
            torch.testing.assert_close(model(x3, mask), y, atol=1e-2, rtol=0)
            for b in range(3):
                torch.testing.assert_close(model(x[b : b + 1, mask[b]]), y[b : b + 1], atol=1e-2,
                                           rtol=0)  # fmt: skip


@pytest.mark.parametrize("device", DEVICES)
def test_mz_centre_stream_is_standard_attention_under_bf16_autocast(device):
    """Prop. prop:perm at init (M_c = I) under bf16 autocast: equal to mzlite's standard attention
    in the same mode to one bf16 rounding step (measured on CPU: identical), and to float32
    ``torch.nn.MultiheadAttention`` within 1e-2 (bf16 has 8 mantissa bits; measured 2.5e-3)."""
    torch.manual_seed(0)
    d, H, n_g = 16, 4, 3
    att = MZAttention(d, n_heads=H, n_g=n_g, L=2)
    with torch.no_grad():
        att.M_l.zero_()
        att.W_mix.zero_()
    std = MultiheadAttention(d, n_heads=H)
    shared = ("q", "k", "v", "o")
    std.load_state_dict({k: v for k, v in att.state_dict().items() if k.split(".")[0] in shared})
    att.to(device), std.to(device)
    cq, _ = (t.to(device) for t in _batch(2, 5, d))
    ckv, mask = (t.to(device) for t in _batch(2, 6, d, seed=3))
    Gkv = torch.randn(2, 6, n_g, d, device=device)
    with _bf16_autocast(device):
        o_c, _, _ = att(cq, ckv, Gkv, mask)
        s, _ = std(cq, ckv, mask)
    assert o_c.dtype == torch.bfloat16
    torch.testing.assert_close(o_c, s, atol=1e-3, rtol=2**-8)
    ref = _torch_mha(d, H, att.q, att.k, att.v, att.o.weight, att.o.bias).to(device)
    r_out, _ = ref(cq, ckv, ckv, key_padding_mask=~mask)  # float32, outside autocast
    torch.testing.assert_close(o_c.float(), r_out, atol=1e-2, rtol=0)


def test_padded_positions_are_zero_and_unused():
    _, mz, _ = _models()
    x, mask = _batch(3, 6)
    det = mz.inspect(x, mask)
    for layer in det.layers:
        if layer.name.endswith("inducing") or layer.name == "pool":
            # keys are the set: padded keys get zero weight
            assert (
                layer.attention[~mask[:, None, None, :].expand_as(layer.attention)].abs().max() == 0
            )
    tok = det.input_tokens
    c, G = (tok.center, tok.generators) if hasattr(tok, "center") else tok
    assert c[~mask].abs().max() == 0 and G[~mask].abs().max() == 0


# ----------------------------------------------------------------------------- theorems


def _f_A(x, mask, A):
    """(I + tanh(mu_1) A) mu with mu the mean of the real elements (float64, by hand)."""
    out = []
    for b in range(x.shape[0]):
        mu = x[b, mask[b]].mean(0)
        out.append((torch.eye(len(mu), dtype=x.dtype) + torch.tanh(mu[0]) * A) @ mu)
    return torch.stack(out)


@pytest.mark.parametrize("n_g", [1, 3])
def test_theorem3_construction_is_exact(n_g):
    torch.manual_seed(0)
    d = 5
    A = torch.randn(d, d, dtype=torch.float64)
    net = theorem3_layer(A, n_g=n_g)
    x = 2 * torch.randn(4, 7, d, dtype=torch.float64)
    mask = torch.ones(4, 7, dtype=torch.bool)
    mask[1, 3:] = False
    mask[2, 0] = False
    torch.testing.assert_close(net(x, mask), _f_A(x, mask, A), atol=1e-6, rtol=0)
    # float32 too
    net32 = theorem3_layer(A.float(), n_g=n_g)
    torch.testing.assert_close(
        net32(x.float(), mask), _f_A(x, mask, A).float(), atol=1e-5, rtol=1e-5
    )


def test_theorem3_padding_content_never_matters_nan_included():
    A = torch.randn(3, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    net = theorem3_layer(A)
    x = torch.randn(2, 5, 3, dtype=torch.float64)
    mask = torch.tensor([[True] * 5, [True, True, False, True, False]])
    want = net(x, mask)
    torch.testing.assert_close(net(x.masked_fill(~mask[..., None], float("nan")), mask), want)
    x[1, 3, 2] = float("inf")
    with pytest.raises(ValueError, match="x contains NaN or inf .* set 1, element 3"):
        net(x, mask)


def test_theorem1a_standard_attention_is_rigid_on_constant_sets():
    """Thm. thm:bottleneck (a): without FFN, standard attention on S_t = {t x, ..., t x} gives
    o = t W_o W_v x + (W_o b_v + b_o) whatever W_Q, W_K, n and the query: one fixed operator."""
    torch.manual_seed(0)
    d, H = 8, 2
    att = MultiheadAttention(d, n_heads=H).double()
    seed = torch.randn(1, 1, d, dtype=torch.float64)
    T = att.o.weight @ att.v.weight  # sum_h W_o^(h) W_V^(h)
    off = att.o.weight @ att.v.bias + att.o.bias
    for n in (1, 3, 10):
        for _ in range(3):
            x = torch.randn(d, dtype=torch.float64)
            for t in (-2.0, -0.3, 0.0, 0.7, 3.0):
                S = (t * x).expand(1, n, d)
                o, _ = att(seed, S)
                torch.testing.assert_close(o[0, 0], t * T @ x + off, atol=1e-12, rtol=0)
    # MZ attention is not: its generator output is non-affine in t (second difference != 0)
    mz = MZAttention(d, n_heads=H, n_g=2, L=2).double()
    _randomise_mz(mz)
    x = torch.randn(d, dtype=torch.float64)
    outs = []
    for t in (0.0, 1.0, 2.0):
        S = (t * x).expand(1, 4, d)
        outs.append(mz(seed, S, torch.zeros(1, 4, 2, d, dtype=torch.float64))[1])
    assert (outs[2] - 2 * outs[1] + outs[0]).abs().max() > 1e-3


# ---------------------------------------------------------------------------- introspection, counts


def test_details_shapes_and_readouts():
    torch.manual_seed(0)
    for readout in ("ihw", "signed"):
        mz = MZSetTransformer(**SMALL_MZ, readout=readout)
        x, mask = _batch(3, 6)
        mz.train()
        det = mz.inspect(x, mask)
        assert mz.training  # inspect restores the mode
        names = [layer.name for layer in det.layers]
        assert names == [
            "enc0.inducing",
            "enc0.elements",
            "enc1.inducing",
            "enc1.elements",
            "pool",
            "dec0",
        ]
        layer = det.layers[0]
        assert layer.operators.shape == (3, 4, 4, 4)
        assert layer.gates.shape == (3, 4, 2)
        assert layer.attention.shape == (3, 4, 4, 6)
        assert det.layers[1].attention.shape == (3, 4, 6, 4)
        pooled = det.pooled
        c, G = (pooled.center, pooled.generators) if hasattr(pooled, "center") else pooled
        assert c.shape == (3, 1, 16) and G.shape == (3, 1, 3, 16)
        spread = G.abs().sum(-2) if readout == "ihw" else G.sum(-2)
        torch.testing.assert_close(det.features, torch.cat([c[:, 0], spread[:, 0]], -1))
    st = SetTransformer(**SMALL)
    det = st.inspect(*_batch(3, 6))
    assert det.layers[-2].attention.shape == (3, 4, 1, 6)


def test_details_are_dataclasses_with_named_layers():
    """``inspect`` returns a ``SetModelDetails`` of ``AttentionDetails``, the same for both models;
    ``layer(name)`` finds a block by name and lists the valid names otherwise."""
    x, mask = _batch(3, 6)
    for model in _models():
        det = model.inspect(x, mask)
        assert isinstance(det, SetModelDetails)
        assert all(isinstance(layer, AttentionDetails) for layer in det.layers)
        assert det.names[-2:] == ["pool", "dec0"]
        assert det.layer("pool") is det.layers[-2]
        with pytest.raises(ValueError, match=r"layer must be one of \['enc0.inducing'"):
            det.layer("nope")
        y = model(x, mask)
        torch.testing.assert_close(model.head(det.features), y)  # the head's input
    st_pool, mz_pool = (m.inspect(x, mask).layer("pool") for m in _models()[:2])
    assert st_pool.gates is None and st_pool.operators is None
    assert st_pool.output.shape == (3, 1, 16)  # (B, k, d)
    assert mz_pool.gates.shape == (3, 4, 2) and mz_pool.output.generators.shape == (3, 1, 3, 16)


def test_block_constructors_take_keywords_after_d():
    """Only the width is positional: a misplaced positional (n_heads for n_g ...) is an error."""
    for make in (
        lambda: MultiheadAttention(16, 4),
        lambda: MZAttention(16, 4, 2, 2),
        lambda: MZSAB(16, 4, 32, 0.1, 2, 2),
        lambda: MZISAB(16, 4, 32, 0.1, 2, 2, 4),
    ):
        with pytest.raises(TypeError, match="positional"):
            make()


def test_operators_are_context_adaptive():
    """M(mu) changes with the set for MZ (gates read the set mean); it is M_c at gamma = 0."""
    torch.manual_seed(0)
    mz = MZSetTransformer(**SMALL_MZ)
    x, mask = _batch(3, 6)
    ops = mz.inspect(x, mask).layers[0].operators
    assert (ops[0] - ops[1]).abs().max() > 1e-4
    with torch.no_grad():
        for m in mz.modules():
            if isinstance(m, MZAttention):
                m.M_l.zero_()
    ops = mz.inspect(x, mask).layers[0].operators
    torch.testing.assert_close(ops, torch.eye(4).expand_as(ops))


def test_parameter_counts_match_paper():
    rows = {r["model"]: r["params"] for r in param_table(d_in=8)}
    assert rows["st"] == 207_745  # paper ~208K
    # paper ~372K: 370,273 with the default generator normalisation ("zonotope", no parameters
    # of its own); the per-row LayerNorm reading adds 2 LayerNorms of 2 d per block: 371,809
    assert rows["mz_full"] == 370_273
    shared = build_model("mz_full", 8, device="meta", gen_own_weights=False)
    assert count_parameters(shared) == 322_657 - 6 * 2 * 2 * 64
    # the MZ-Full count by hand from the documented choices (d=64, H=4, d_k=16, d_ff=128)
    d, H, dk, ff, ng, L, m, din = 64, 4, 16, 128, 8, 4, 16, 8
    lin = lambda i, o, b=True: i * o + (o if b else 0)  # noqa: E731
    mab = (
        4 * lin(d, d)
        + 2 * lin(d, d, False)
        + H * (1 + L) * dk * dk
        + H * ng * L
        + lin(d, H * L)
        + lin(d, ff)
        + lin(ff, d)
        + lin(d, ff // 2)
        + lin(ff // 2, d)
        + 2 * 2 * d  # the centre stream's two LayerNorms
    )
    total = (
        lin(din, d)
        + 2 * d
        + lin(din, ng * d)
        + 6 * mab
        + 2 * m * (d + ng * d)
        + (d + ng * d)
        + lin(2 * d, d)
        + lin(d, 1)
    )
    assert total == 370_273
    assert count_parameters(build_model("mz_full", 8, device="cpu")) == total
    per_row_ln = build_model("mz_full", 8, device="cpu", gen_norm="layernorm")
    assert count_parameters(per_row_ln) == total + 6 * 2 * 2 * d == 371_809


# ----------------------------------------------------------------------------- errors


def test_bad_input_errors():
    st, mz, _ = _models()
    x, mask = _batch(2, 5)
    for model in (st, mz):
        with pytest.raises(ValueError, match="x must have shape"):
            model(x[0])
        with pytest.raises(ValueError, match="x must have shape"):
            model(torch.randn(2, 5, 4))
        with pytest.raises(ValueError, match="mask must have shape"):
            model(x, mask[:, :4])
        with pytest.raises(TypeError, match="mask must be a bool"):
            model(x, mask.long())
        bad = mask.clone()
        bad[1] = False
        with pytest.raises(ValueError, match="mask has rows with no real element"):
            model(x, bad)
        for v in (float("nan"), float("inf")):
            xb = x.clone()
            xb[0, 0, 0] = v
            with pytest.raises(ValueError, match="x contains NaN or inf"):
                model(xb, mask)
        with pytest.raises(TypeError, match="x has dtype"):
            model(x.double(), mask)
        with pytest.raises(TypeError, match="x must be a floating-point"):
            model(x.long(), mask)
    with pytest.raises(ValueError, match="A must be a square"):
        theorem3_layer(torch.randn(3, 4))


@pytest.mark.parametrize(
    "field,value,cls",
    [
        ("n_heads", 3, SetTransformerConfig),  # 64 not divisible by 3
        ("d_model", 0, SetTransformerConfig),
        ("d_in", -1, SetTransformerConfig),
        ("n_inducing", 0, SetTransformerConfig),
        ("n_enc", -1, SetTransformerConfig),
        ("dropout", 1.0, SetTransformerConfig),
        ("dropout", -0.1, MZSetTransformerConfig),
        ("n_g", 0, MZSetTransformerConfig),
        ("L", -1, MZSetTransformerConfig),
        ("readout", "max", MZSetTransformerConfig),
        ("layer_reading", "relop", MZSetTransformerConfig),
        ("d_ff", 2.5, MZSetTransformerConfig),
    ],
)
def test_invalid_config(field, value, cls):
    with pytest.raises(ValueError, match=field):
        cls(**{field: value})


def test_variants_and_factory():
    assert MZSetTransformerConfig.variant("slim").n_g == 2
    assert MZSetTransformerConfig.variant("med").L == 2
    assert MZSetTransformerConfig.variant("large", d_in=3).n_g == 16
    assert SetTransformerConfig.variant("st_large").d_model == 80
    with pytest.raises(ValueError, match="name"):
        MZSetTransformerConfig.variant("huge")
    with pytest.raises(ValueError, match="name"):
        build_model("mz_huge", 3)
    assert set(MODEL_NAMES) >= {"st", "st_large", "mz_slim", "mz_med", "mz_full", "mz_large"}
    # L = 0 is allowed: no matrix generators, the generator stream is the aggregated generators
    y = MZSetTransformer(**dict(SMALL_MZ, L=0))(*_batch())
    assert y.shape == (3, 2)


# ----------------------------------------------------------------------------- training


def _train_reduces_loss(model, device, steps=25):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(32, 8, 3, generator=g)
    mask = torch.rand(32, 8, generator=g) > 0.3
    mask[:, 0] = True
    mu = (x * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
    y = torch.stack([mu.norm(dim=-1), mu[:, 0] * mu[:, 1]], -1)
    x, mask, y = x.to(device), mask.to(device), y.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    losses = []
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(model(x, mask), y)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:3]) / 3


@pytest.mark.parametrize("name", ["standard", "mz_slim"])
def test_training_reduces_loss_cpu(name):
    model = build_model(
        name, d_in=3, d_out=2, device="cpu", seed=0, d_model=16, n_heads=2, d_ff=32, n_inducing=4
    )
    _train_reduces_loss(model, torch.device("cpu"))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", ["standard", "mz_full"])
def test_training_reduces_loss_auto_device_cuda(name):
    model = build_model(name, d_in=3, d_out=2, device="auto", seed=0)
    assert next(model.parameters()).device.type == "cuda"
    _train_reduces_loss(model, torch.device("cuda"))


def test_attention_math_written_once_matches_torch():
    """split_heads / attend / merge_heads against torch's scaled_dot_product_attention (its own
    kernel, boolean attn_mask True = attend), masked_mean / masked_sum / zero_pad against loops."""
    from mzlite.nn import attend, masked_mean, masked_sum
    from mzlite.nn.attention import merge_heads, split_heads, zero_pad

    g = torch.Generator().manual_seed(0)
    B, nq, nkv, H, dk = 3, 4, 6, 2, 5
    xq = torch.randn(B, nq, H * dk, generator=g, dtype=torch.float64)
    xkv = torch.randn(B, nkv, H * dk, generator=g, dtype=torch.float64)
    _, mask = _batch(B, nkv)
    q, k = split_heads(xq, H), split_heads(xkv, H)
    assert q.shape == (B, H, nq, dk) and torch.equal(q[:, 1, 2], xq[:, 2, dk:])
    assert torch.equal(merge_heads(q), xq)
    out, w = attend(q, k, k, mask)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask[:, None, None])
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)
    assert w[~mask[:, None, None, :].expand_as(w)].abs().max() == 0
    torch.testing.assert_close(w.sum(-1), torch.ones(B, H, nq, dtype=torch.float64))
    for b in range(B):
        real = xkv[b, mask[b]]
        torch.testing.assert_close(masked_mean(xkv, mask)[b], real.mean(0))
        torch.testing.assert_close(masked_sum(xkv, mask)[b], real.sum(0))
        assert torch.equal(zero_pad(xkv, mask)[b, ~mask[b]], torch.zeros_like(xkv[b, ~mask[b]]))
    assert torch.equal(masked_mean(xkv, None), xkv.mean(1))


# ----------------------------------------------------------------------------- packed set stream


def _ragged_batch(B=5, n=7, d=3, seed=2, dtype=torch.float64):
    """Sets of 1..n real elements, padding at the end and in the middle, NaN in the padding."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, n, d, generator=g, dtype=dtype)
    mask = torch.arange(n)[None] < torch.randint(1, n + 1, (B,), generator=g)[:, None]
    mask[0] = True  # one full set
    mask[1, :3] = torch.tensor([True, False, True])  # a hole
    return x.masked_fill(~mask[..., None], float("nan")), mask


def test_packing_round_trip():
    from mzlite.nn.attention import Packing

    x, mask = _ragged_batch()
    N = int(mask.sum())
    for multiple in (1, 8, 64):
        pk = Packing(mask, rows_multiple=multiple)
        packed = pk.pack(x)
        R = -(-N // multiple) * multiple
        assert pk.N == N and packed.shape == (R, 3)
        assert not packed.isnan().any()  # only real elements
        torch.testing.assert_close(packed[:N], x[mask], rtol=0, atol=0)
        assert (packed[N:] == packed[0]).all()  # spare rows repeat the first real element
        back = pk.unpack(packed)
        assert torch.equal(back[mask], x[mask]) and (back[~mask] == 0).all()
        G = torch.randn(R, 3, 8, dtype=torch.float64)  # (R, n_g, H d_k), H = 2
        heads = pk.unpack_heads(G, 2)  # (B, H, n, n_g, d_k)
        assert heads.shape == (5, 2, 7, 3, 4) and heads.is_contiguous()
        ref = pk.unpack(G).view(5, 7, 3, 2, 4).permute(0, 3, 1, 2, 4)
        assert torch.equal(heads, ref)
        assert torch.equal(pk.pack_heads(heads)[:N], G[:N])


def _mz_float64(seed=0, **kw):
    torch.manual_seed(seed)
    mz = MZSetTransformer(**{**SMALL_MZ, **kw}).double().eval()
    for mod in mz.modules():
        if isinstance(mod, MZAttention):
            _randomise_mz(mod)  # M_c != I, active gates and W_mix: every term of Eq. eq:mz-main
    return mz


@pytest.mark.parametrize(
    "readout,gen_qk,layer_reading",
    [("ihw", False, "literal"), ("signed", False, "literal"), ("ihw", True, "literal"),
     ("ihw", False, "centre_adaptive")],
)  # fmt: skip
def test_packed_set_stream_equals_padded_layout_float64(readout, gen_qk, layer_reading):
    """The packed path (default on CPU) against the padded one (the reference layout): outputs
    and every parameter's gradient equal to float64 rounding, NaN in the padding included."""
    mz = _mz_float64(readout=readout, gen_qk=gen_qk, layer_reading=layer_reading)
    x, mask = _ragged_batch()
    assert mz._packs(x, mask, False) and not mz._packs(x, mask, True)
    out, grads = {}, {}
    for packed in (False, True):
        mz.pack_sets = packed
        mz.zero_grad()
        y = mz(x, mask)
        (y**2).sum().backward()
        out[packed] = y.detach()
        grads[packed] = {k: p.grad.clone() for k, p in mz.named_parameters()}
    assert torch.isfinite(out[True]).all()
    torch.testing.assert_close(out[True], out[False], rtol=0, atol=1e-12)
    for k, g in grads[False].items():
        torch.testing.assert_close(grads[True][k], g, rtol=1e-10, atol=1e-12, msg=k)
    # and against the model on each set alone (no padding at all)
    mz.pack_sets = None
    for b in range(len(x)):
        yb = mz(x[b : b + 1, mask[b]])
        torch.testing.assert_close(yb, out[True][b : b + 1], rtol=0, atol=1e-12)


@pytest.mark.parametrize("block", ["isab", "sab", "pma"])
def test_packed_blocks_equal_padded_blocks_float64(block):
    """MZISAB, MZSAB and MZPMA with packed tokens return the padded blocks' real rows."""
    from mzlite.nn import MZPMA
    from mzlite.nn.attention import Packing

    torch.manual_seed(0)
    d, H, n_g, L = 8, 2, 3, 2
    kw = dict(n_heads=H, d_ff=16, dropout=0.0, n_g=n_g, L=L)
    blk = {
        "isab": lambda: MZISAB(d, m=4, **kw),
        "sab": lambda: MZSAB(d, **kw),
        "pma": lambda: MZPMA(d, k=2, **kw),
    }[block]().double()
    for mod in blk.modules():
        if isinstance(mod, MZAttention):
            _randomise_mz(mod)
    _, mask = _ragged_batch()
    pk = Packing(mask)
    c_pad = pk.unpack(torch.randn(pk.N, d, dtype=torch.float64))  # (B, n, d), zero padding
    G_pad = pk.unpack(torch.randn(pk.N, n_g, d, dtype=torch.float64))
    want_c, want_G = blk(c_pad, G_pad, mask)
    got_c, got_G = blk(pk.pack(c_pad), pk.pack(G_pad), pk)  # the packing in place of the mask
    if block != "pma":  # per-element outputs come back packed: real rows, then spare rows
        want_c, want_G = pk.pack(want_c), pk.pack(want_G)
    torch.testing.assert_close(got_c, want_c, rtol=0, atol=1e-12)
    torch.testing.assert_close(got_G, want_G, rtol=0, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
def test_packed_set_stream_under_bf16_autocast(device):
    """fit's CPU default (CUDA runs the padded layout unless asked): packed and padded layouts
    agree to bf16 rounding (stated tolerance 2e-2 at outputs of size ~1; measured on CPU
    ~4e-3); NaN in the padding never reaches the output."""
    mz = _mz_float64().float().to(device)
    x, mask = (t.to(device) for t in _ragged_batch(dtype=torch.float32))
    with _bf16_autocast(device):
        mz.pack_sets = True
        y_packed = mz(x, mask)
        mz.pack_sets = False
        y_padded = mz(x, mask)
    assert y_packed.dtype == torch.bfloat16 and torch.isfinite(y_packed).all()
    torch.testing.assert_close(y_packed.float(), y_padded.float(), rtol=0, atol=2e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_float32_equals_cpu_float64_reference():
    """The same weights on CUDA in float32 (the padded layout, CUDA's default) and on CPU in
    float64 (the packed set stream): equal to float32 rounding (stated 1e-4 at outputs of size
    ~1; TF32 is off for matmuls by default), NaN in the padding included, gradients too."""
    for model in (*_models(), _mz_float64()):
        ref_model = model.double().cpu()
        x, mask = _ragged_batch()
        ref = ref_model(x, mask)
        ref.sum().backward()
        gpu = copy.deepcopy(ref_model).float().cuda()
        gpu.zero_grad(set_to_none=True)
        got = gpu(x.float().cuda(), mask.cuda())
        got.sum().backward()
        torch.testing.assert_close(got.double().cpu(), ref, rtol=0, atol=1e-4)
        pairs = zip(ref_model.named_parameters(), gpu.parameters(), strict=True)
        for (name, p_ref), p_gpu in pairs:
            if p_ref.grad is not None:
                torch.testing.assert_close(p_gpu.grad.double().cpu(), p_ref.grad, rtol=1e-3,
                                           atol=1e-4, msg=name)  # fmt: skip


def test_packed_training_forward_ignores_padding_width_with_dropout():
    """In training mode dropout draws one mask per real token: with the same RNG state the output
    does not depend on how many padded columns a batch carries (the padded layout's masks have
    the padded shape, so there it would)."""
    torch.manual_seed(0)
    mz = MZSetTransformer(**SMALL_MZ, dropout=0.3).double().train()
    x, mask = _ragged_batch()
    wide_x = torch.cat([x, torch.randn(5, 4, 3, dtype=torch.float64)], 1)
    wide_mask = torch.cat([mask, torch.zeros(5, 4, dtype=torch.bool)], 1)
    torch.manual_seed(1)
    y = mz(x, mask)
    torch.manual_seed(1)  # equal up to float64 rounding (reductions over other key counts)
    torch.testing.assert_close(mz(wide_x, wide_mask), y, rtol=0, atol=1e-12)
    torch.manual_seed(1)
    assert not torch.equal(mz(x, mask), mz(x, mask))  # dropout is really on


def test_mz_genqk_starts_as_mz_full_and_its_scores_then_read_the_generators():
    """Choice 8 (tab:genqk): W_q^gen, W_k^gen are zero at init, so MZ-GenQK is MZ-Full there (the
    same seed gives the same other weights); once they move, queries and keys read sum_g |G_g|."""
    x, mask = _batch(3, 6)
    torch.manual_seed(0)
    full = MZSetTransformer(**SMALL_MZ).eval()
    torch.manual_seed(0)
    genqk = MZSetTransformer(**SMALL_MZ, gen_qk=True).eval()
    assert torch.equal(genqk(x, mask), full(x, mask))
    n_mz_attn = sum(isinstance(m, MZAttention) for m in genqk.modules())
    d = SMALL_MZ["d_model"]
    assert n_mz_attn == 6  # 2 ISABs x 2 MABs, PMA, 1 SAB
    assert count_parameters(genqk) - count_parameters(full) == n_mz_attn * 2 * d * d
    # at the paper's sizes: ~50K more (365K -> 415K in tab:genqk)
    big = count_parameters(MZSetTransformer(gen_qk=True)) - count_parameters(MZSetTransformer())
    assert big == 49_152
    # the zero W^gen still gets a gradient: training can move it
    genqk.train()
    genqk(x, mask).sum().backward()
    attn = genqk.pool.mab.attn
    assert attn.W_q_gen.grad.abs().sum() > 0 and attn.W_k_gen.grad.abs().sum() > 0
    # moved, the attention weights depend on the generators, not only on the centres
    genqk.eval()
    c, G = torch.randn(2, 5, d), 0.5 * torch.randn(2, 5, SMALL_MZ["n_g"], d)
    with torch.no_grad():
        attn.W_q_gen.normal_(0, 1.0), attn.W_k_gen.normal_(0, 1.0)
        a1 = attn(c[:, :1], c, G, Gq=G[:, :1], need_details=True)[2].attention
        a2 = attn(c[:, :1], c, 2 * G, Gq=2 * G[:, :1], need_details=True)[2].attention
    assert not torch.allclose(a1, a2)
    with pytest.raises(ValueError, match="needs Gq"):
        attn(c, c, G)
    with pytest.raises(ValueError, match="gen_qk"):
        MZSetTransformer(**SMALL_MZ, gen_qk="yes")


# ----------------------------------------------------------------------------- the layer readings
# Where the matrix zonotope acts (mzlite.nn choice 9): Eq. eq:mz-main as printed ("literal",
# o_c = M_c c_hat) or def:relop's o_c = M(mu) c_hat ("centre_adaptive").


def _attention_at_init(layer_reading, seed=0, d=16, H=4, n_g=3, L=2):
    torch.manual_seed(seed)
    att = MZAttention(d, n_heads=H, n_g=n_g, L=L, layer_reading=layer_reading)
    with torch.no_grad():  # the default init leaves o and the gate biases at 0: make them count
        att.gate.bias.normal_(0, 1.0)
    cq, _ = _batch(2, 5, d)
    ckv, mask = _batch(2, 6, d, seed=3)
    Gkv = torch.randn(2, 6, n_g, d)
    mha = _torch_mha(d, H, att.q, att.k, att.v, att.o.weight, att.o.bias)
    standard, _ = mha(cq, ckv, ckv, key_padding_mask=~mask)
    return att, (cq, ckv, Gkv, mask), standard


@pytest.mark.parametrize("layer_reading", LAYER_READINGS)
def test_both_layer_readings_reduce_to_standard_attention_at_initialisation(layer_reading):
    """Eq. eq:mz-main's "M_c = I and M_l ~ 0 at initialisation, so the block reduces to standard
    attention", under each reading: with M_l = 0 the centre stream is torch's multi-head
    attention whatever W_mix is. At the paper's init scale (M_l ~ N(0, 0.02^2)) the literal
    reading still is; the centre-adaptive one differs by W_o (sum_l gamma_l M_l) c_hat, which
    is first order in M_l: it scales exactly with M_l and vanishes with it."""
    att, args, standard = _attention_at_init(layer_reading)
    with torch.no_grad():
        o_c, _, info = att(*args, need_details=True)
        gap = (o_c - standard).abs().max()
        if layer_reading == "literal":
            torch.testing.assert_close(o_c, standard, atol=1e-6, rtol=0)
        else:
            assert 1e-4 < gap < 0.5 * standard.abs().max()
            assert (info.operators - att.M_c).abs().max() > 1e-3  # M(mu) != M_c: it acts
        M_l = att.M_l.clone()
        att.M_l.copy_(0.1 * M_l)  # a tenth of the init scale: a tenth of the gap
        tenth = (att(*args)[0] - standard).abs().max()
        torch.testing.assert_close(tenth, 0.1 * gap, atol=1e-6, rtol=1e-3)
        att.M_l.zero_()
        att.W_mix.normal_(0, 1.0)
        torch.testing.assert_close(att(*args)[0], standard, atol=1e-6, rtol=0)


@pytest.mark.parametrize("layer_reading", LAYER_READINGS)
def test_untrained_model_centre_stream_is_the_set_transformers_without_M_l(layer_reading):
    """The whole MZ-Set Transformer, every block: with every M_l = 0 its centre stream is that
    of a Set Transformer holding its weights (``initial_state``'s centre gap), under both
    readings; at the paper's init scale only the literal reading is exactly so."""
    from mzlite.analysis.initialisation import initial_state

    x, mask = _batch(4, 7, 3)
    torch.manual_seed(0)
    mz = MZSetTransformer(**SMALL_MZ, layer_reading=layer_reading)
    at_init = initial_state(mz, x, mask).centre_gap
    assert at_init < 1e-5 if layer_reading == "literal" else at_init > 1e-3
    with torch.no_grad():
        for mod in mz.modules():
            if isinstance(mod, MZAttention):
                mod.M_l.zero_()
    assert initial_state(mz, x, mask).centre_gap < 1e-5


def test_randomised_matrix_zonotopes_move_the_pooled_centre_only_under_def_relop():
    """The issue's probe: randomise every M_l and W_mix of an MZ-Set Transformer. Under the
    literal reading the pooled centre (and every block's centre) is unchanged: the matrix
    zonotope reaches the prediction only through the generators. Under the centre-adaptive
    reading the pooled centre changes."""
    x, mask = _batch(4, 7, 3)
    for layer_reading in LAYER_READINGS:
        torch.manual_seed(0)
        mz = MZSetTransformer(**SMALL_MZ, layer_reading=layer_reading)
        before = mz.inspect(x, mask)
        with torch.no_grad():
            for mod in mz.modules():
                if isinstance(mod, MZAttention):
                    mod.M_l.normal_(0, 0.5), mod.W_mix.normal_(0, 1.0)
        after = mz.inspect(x, mask)
        moved = (after.pooled.center - before.pooled.center).abs().max()
        spread = (after.pooled.generators - before.pooled.generators).abs().max()
        assert spread > 1e-2  # the generators move under both readings
        if layer_reading == "literal":
            assert moved == 0
        else:
            assert moved > 1e-2


def test_only_the_literal_reading_runs_the_fused_kernels(monkeypatch):
    """The fused CPU kernels serve the literal reading; the centre-adaptive one takes the eager
    path (``fused.disabled()``) with the kernels loaded and selected, and still computes its own
    reading (not the literal one)."""
    from mzlite.nn import fused

    if os.environ.get("MZLITE_FUSED") == "0" or not fused.build():
        pytest.skip(f"the fused CPU kernels are not available here: {fused.build_error()}")
    monkeypatch.setenv("MZLITE_FUSED", "1")  # wherever they can run, AVX-512 or not
    x, mask = _batch(4, 7, 3)
    outputs, ran = {}, {}
    for layer_reading in LAYER_READINGS:
        torch.manual_seed(0)
        mz = MZSetTransformer(**SMALL_MZ, layer_reading=layer_reading).eval()
        before = fused.calls.copy()
        outputs[layer_reading] = mz(x, mask)
        ran[layer_reading] = fused.calls - before
        with fused.disabled():
            eager = mz(x, mask)
        torch.testing.assert_close(outputs[layer_reading], eager, atol=1e-4, rtol=0)
    assert ran["literal"]["add_zonotope_norm"] > 0
    assert sum(ran["centre_adaptive"].values()) == 0
    assert (outputs["literal"] - outputs["centre_adaptive"]).abs().max() > 1e-4


def test_a_saved_config_without_the_layer_reading_is_the_literal_one():
    saved = {k: v for k, v in MZSetTransformerConfig(gen_norm="zonotope").__dict__.items()
             if k != "layer_reading"}  # fmt: skip
    assert MZSetTransformerConfig.from_dict(saved).layer_reading == "literal"
    model = MZSetTransformer(**SMALL_MZ, layer_reading="centre_adaptive")
    assert config_dict(model)["layer_reading"] == "centre_adaptive"  # results record it
