"""Chapter 3 exercises ("MZAttn from scratch"): every reference answer is computed with mzlite
(``mzlite.nn``, ``mzlite.zonotope``); only the exercise's inputs are typed here, and the notebook
builds the same layer and set with :func:`exercise_inputs`."""

from __future__ import annotations

import numpy as np
import torch

from ..nn import MultiheadAttention, MZAttention
from ..nn.models import count_parameters
from ..zonotope import Zonotope
from .checker import call, diagnose, exercise, named_mistake, rng, same_integer, same_number

# ch3.extra_params: one attention layer of MZ-Full (App. app:impl) against a standard one.
EX_FULL = {"d": 64, "n_heads": 4, "n_g": 8, "L": 4}
# ch3.gates and ch3.ihw: a small layer and one padded set (3 real tokens of 5).
EX_SMALL = {"d": 4, "n_heads": 2, "n_g": 2, "L": 3}
EX_SEED, EX_N, EX_N_REAL = 11, 5, 3


def exercise_inputs(seed: int = 0):
    """``(layer, c, G, mask)`` of ch3.gates / ch3.ihw (float64; the same for the same notebook
    ``seed``): an
    ``MZAttention`` with visible matrix generators and one padded set of token zonotopes,
    ``c`` (1, 5, 4), ``G`` (1, 5, 2, 4), ``mask`` (1, 5) with 3 real tokens; the padded rows hold
    junk on purpose."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(EX_SEED + 1_000_003 * seed)
        layer = MZAttention(**EX_SMALL).double()
        with torch.no_grad():
            layer.M_l.normal_(0.0, 0.5)
        d, n_g = EX_SMALL["d"], EX_SMALL["n_g"]
        c = torch.randn(1, EX_N, d, dtype=torch.float64)
        G = 0.3 * torch.randn(1, EX_N, n_g, d, dtype=torch.float64)
    c[:, EX_N_REAL:] = 50.0  # padding: must not reach any output
    mask = torch.arange(EX_N).unsqueeze(0) < EX_N_REAL
    return layer, c, G, mask


def layer_sizes(seed: int = 0) -> dict:
    """The layer of exercise ch3.extra_params for the notebook's ``seed``: ``d``, ``n_heads``,
    ``n_g`` and ``L`` (MZ-Full's attention layer for seed 0)."""
    if seed == 0:
        return dict(EX_FULL)
    g = np.random.default_rng([3, 1, seed])
    return {
        "d": int(g.choice([32, 48, 64, 96])),
        "n_heads": int(g.choice([2, 4])),
        "n_g": int(g.choice([2, 4, 8])),
        "L": int(g.choice([2, 3, 4, 6, 8])),
    }


def _outputs(seed: int):
    layer, c, G, mask = exercise_inputs(seed)
    with torch.no_grad():
        return layer(c, c, G, mask, need_details=True)


@exercise(
    "ch3.extra_params",
    hint="M_c and M_l (H (1+L) d_k^2), W_mix (H n_g L), the gate Linear(d, H L) with its bias, "
    "and the generators' own bias-free W_vg and W_og (d^2 each).",
    per_seed=True,
)
def _extra_params(answer, seed):
    sizes = layer_sizes(seed)
    ref = count_parameters(MZAttention(**sizes)) - count_parameters(
        MultiheadAttention(sizes["d"], n_heads=sizes["n_heads"])
    )
    if same_integer(answer, ref):
        return True, f"{ref} extra parameters per attention layer"
    mz = MZAttention(**sizes)
    generators = mz.v_g.weight.numel() + mz.o_g.weight.numel()
    return False, named_mistake(
        answer,
        [
            (count_parameters(mz), "the whole MZ layer: the question asks what it adds"),
            (ref - mz.gate.bias.numel(), "the gate without its bias"),
            (ref - generators, "without W_vg and W_og, the generators' own d x d weights"),
            (ref - mz.W_mix.numel(), "without W_mix (H n_g L)"),
            (ref - mz.M_l.numel(), "without the matrix generators M_l (H L d_k^2)"),
        ],
        f"{answer!r} is not the number of extra parameters",
        integer=True,
    )


@exercise(
    "ch3.gates",
    hint="gamma = tanh(W_gamma cbar + b) with cbar the mean over the REAL key/value centres.",
    per_seed=True,
)
def _gates(answer, seed):
    ref = _outputs(seed)[2].gates  # (1, H, L)
    a = torch.as_tensor(answer, dtype=torch.float64)
    if a.numel() != ref.numel():
        raise ValueError(f"expected {ref.numel()} gate values (B, H, L) = {tuple(ref.shape)}")
    a = a.reshape(ref.shape)
    if torch.allclose(a, ref, rtol=1e-6, atol=1e-8):
        return True, "the gates of the set, read from its real tokens only"
    layer, c, _, mask = exercise_inputs(seed)
    m = mask.unsqueeze(-1).to(c.dtype)
    c_bar = (c * m).sum(1) / m.sum(1)
    B, H, L = ref.shape
    with torch.no_grad():
        slips = [
            (
                torch.tanh(layer.gate(c.mean(1))),
                "the unmasked mean c.mean(1): the padding's junk moves the gates",
            ),  # fmt: skip
            (layer.gate(c_bar), "no tanh"),
            (
                torch.tanh(layer.gate(c_bar)).view(B, L, H).transpose(1, 2),
                "the H L outputs read as (L, H): they are head-major",
            ),  # fmt: skip
        ]
    for wrong, name in slips:
        if torch.allclose(a, wrong.reshape(ref.shape), rtol=1e-6, atol=1e-8):
            return False, f"that is {name}"
    return False, "not the gates"


@exercise(
    "ch3.ihw",
    hint="Build Zonotope(o_c, o_G) and take .ihw() of the first real token.",
    per_seed=True,
)
def _ihw(answer, seed):
    o_c, o_G, _ = _outputs(seed)
    ref = Zonotope(o_c, o_G)[0, 0].ihw().item()
    a = torch.as_tensor(answer, dtype=torch.float64)
    if a.numel() != 1:
        return False, f"one number, got {a.numel()}"
    if same_number(a.item(), ref):
        return True, f"IHW = sum_g ||G_g||_1 = {ref:.4f}"
    G = o_G[0, 0]  # (n_g, d) generators of the first real token
    _, c_in, G_in, _ = exercise_inputs(seed)
    return False, named_mistake(
        a.item(),
        [
            (G.norm(dim=-1).sum().item(), "sum_g ||G_g||_2: the IHW uses L1 norms"),
            (2 * ref, "the full width of the interval hull: the IHW sums half-widths"),
            (
                G.abs().amax(0).sum().item(),
                "the largest |G_g,i| per coordinate: every generator adds width",
            ),  # fmt: skip
            (
                Zonotope(c_in, G_in)[0, 0].ihw().item(),
                "the IHW of the input token: the layer's output is asked for",
            ),  # fmt: skip
        ],
        "not the IHW of that token",
    )


# Coding exercises: the learner writes the function, the checker runs it against mzlite.
GATE_SIZES = {"B": 3, "n": 6, "d": 4, "H": 2, "L": 3}


def gate_inputs(seed: int = 0) -> tuple[torch.Tensor, ...]:
    """``(c (B, n, d), mask (B, n), W (H L, d), b (H L,))`` of exercise ch3.gate_function: three
    sets of 6, 4 and 2 real tokens, padding filled with junk (float64)."""
    g = rng("ch3.gate_function", seed)
    B, n, d, H, L = (GATE_SIZES[k] for k in "B n d H L".split())
    c = torch.randn(B, n, d, generator=g, dtype=torch.float64)
    mask = torch.arange(n) < torch.tensor([[n], [4], [2]])  # (B, n), True = real
    c[~mask] = 5.0 + 3.0 * torch.rand(int((~mask).sum()), d, generator=g, dtype=torch.float64)
    W = 0.7 * torch.randn(H * L, d, generator=g, dtype=torch.float64)
    b = 0.1 * torch.randn(H * L, generator=g, dtype=torch.float64)
    return c, mask, W, b


def _gate_layer(W, b, d, H, L) -> MZAttention:
    layer = MZAttention(d, n_heads=H, n_g=1, L=L).double()
    with torch.no_grad():
        layer.gate.weight.copy_(W)
        layer.gate.bias.copy_(b)
    return layer


@exercise(
    "ch3.gate_function",
    hint="gamma = tanh(W cbar + b) with cbar the mean over the REAL tokens of each set; "
    "the H L outputs are head-major: .view(B, H, L).",
    per_seed=True,
    kind="coding",
)
def _gate_function(function, seed):
    H, L = GATE_SIZES["H"], GATE_SIZES["L"]
    for trial in range(3):
        c, mask, W, b = gate_inputs(seed + 7919 * trial)
        B, n, d = c.shape
        G = torch.zeros(B, n, 1, d, dtype=c.dtype)
        with torch.no_grad():
            ref = _gate_layer(W, b, d, H, L)(c, c, G, mask, need_details=True)[2].gates
        m = mask.unsqueeze(-1).to(c.dtype)
        c_bar = (c * m).sum(1) / m.sum(1)
        ok, why = diagnose(
            call(function, c, mask, W, b, H, L),
            ref,
            [
                (
                    torch.tanh(c.mean(1) @ W.T + b).view(B, H, L),
                    "the unmasked mean c.mean(1): the padding's junk moves the gates",
                ),
                ((c_bar @ W.T + b).view(B, H, L), "no tanh"),
                (
                    torch.tanh(c_bar @ W.T + b).view(B, L, H).transpose(1, 2),
                    "the H L outputs read as (L, H): they are head-major, (H, L)",
                ),
            ],
            what="gamma",
        )
        if not ok:
            return False, why + f" (inputs: gate_inputs({seed + 7919 * trial}))"
    return True, "the gates agree with mzlite's MZAttention, padded sets included"


HEAD_SIZES = {"B": 3, "n_g": 3, "d_k": 4, "L": 2}


def head_inputs(seed: int = 0) -> tuple[torch.Tensor, ...]:
    """``(c_hat (B, d_k), G_hat (B, n_g, d_k), gamma (B, L), M_c (d_k, d_k), M_l (L, d_k, d_k),
    W_mix (n_g, L))`` of exercise ch3.head_function (float64): one aggregated token per set."""
    g = rng("ch3.head_function", seed)
    B, ng, dk, L = (HEAD_SIZES[k] for k in "B n_g d_k L".split())

    def r(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, dtype=torch.float64)

    gamma = torch.tanh(r(B, L, scale=1.5))
    return r(B, dk), r(B, ng, dk, scale=0.3), gamma, r(dk, dk), r(L, dk, dk, scale=0.5), r(ng, L)


def _head_reference(c_hat, G_hat, gamma, M_c, M_l, W_mix):
    """One head of mzlite's MZAttention on one aggregated token: a layer with H = 1, identity
    value and output weights, whose gate reproduces ``gamma``, attending to that token and to a
    padded one full of junk (which must get no weight)."""
    B, dk = c_hat.shape
    ng, L = W_mix.shape
    layer = MZAttention(dk, n_heads=1, n_g=ng, L=L).double()
    eye = torch.eye(dk, dtype=torch.float64)
    with torch.no_grad():
        for lin in (layer.v, layer.o, layer.v_g, layer.o_g):
            lin.weight.copy_(eye)
        layer.v.bias.zero_()
        layer.o.bias.zero_()
        layer.M_c.copy_(M_c[None])
        layer.M_l.copy_(M_l[None])
        layer.W_mix.copy_(W_mix[None])
        layer.gate.weight.zero_()
    # The gate reads the masked mean of the key/value tokens (= c_hat here); give it per-set
    # gamma by making the gate's input carry it: a bias cannot differ between sets, so the
    # reference is computed set by set.
    outs_c, outs_G = [], []
    for i in range(B):
        with torch.no_grad():
            layer.gate.bias.copy_(torch.atanh(gamma[i]))
            ckv = torch.stack([c_hat[i], torch.full_like(c_hat[i], 40.0)])[None]  # (1, 2, dk)
            Gkv = torch.stack([G_hat[i], torch.full_like(G_hat[i], -9.0)])[None]  # (1, 2, ng, dk)
            mask = torch.tensor([[True, False]])
            o_c, o_G, _ = layer(ckv[:, :1], ckv, Gkv, mask)
        outs_c.append(o_c[0, 0])
        outs_G.append(o_G[0, 0])
    return torch.stack(outs_c), torch.stack(outs_G)


@exercise(
    "ch3.head_function",
    hint="o_c = M_c c_hat, and a matrix acts on a column vector (rows: c_hat @ M_c.T); "
    "o_G = G_hat M_c^T + W_mix stack_l[gamma_l M_l c_hat].",
    per_seed=True,
    kind="coding",
)
def _head_function(function, seed):
    for trial in range(3):
        args = head_inputs(seed + 7919 * trial)
        c_hat, G_hat, gamma, M_c, M_l, W_mix = args
        ref = _head_reference(*args)
        Mlc = torch.einsum("lij,bj->bli", M_l, c_hat)  # (B, L, dk)
        Mlc_T = torch.einsum("lji,bj->bli", M_l, c_hat)
        mixed = torch.einsum("gl,bl,bli->bgi", W_mix, gamma, Mlc)
        got = call(function, *args)
        if not isinstance(got, tuple | list) or len(got) != 2:
            return False, "return the pair (o_c, o_G)"
        ok, why = diagnose(
            tuple(got),
            ref,
            [
                (
                    (
                        c_hat @ M_c,
                        G_hat @ M_c + torch.einsum("gl,bl,bli->bgi", W_mix, gamma, Mlc_T),
                    ),
                    "a transposed operator: c_hat @ M is M^T c_hat",
                ),
                (
                    (ref[0], G_hat @ M_c.T),
                    "the generators' gated term W_mix stack[gamma_l M_l c_hat] missing",
                ),
                ((ref[0], mixed), "the propagated generators G_hat M_c^T missing"),
                (
                    (ref[0] + mixed.sum(1), ref[1]),
                    "the gated terms added to the centre: they are generators",
                ),
            ],
            what="(o_c, o_G)",
        )
        if not ok:
            return False, why + f" (inputs: head_inputs({seed + 7919 * trial}))"
    return True, "o_c and o_G agree with one head of mzlite's MZAttention"
