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


# Coding exercises: the learner writes the function, the checker runs it against mzlite. Neither
# is a reshape of a cell of the chapter: the first asks for the sound aggregation that the layer's
# step 5 does *not* compute, the second for the operator that step 8's equation implies but no
# cell writes down (the chapter's own cells are the named slips).
MINKOWSKI_SIZES = {"B": 3, "n_q": 4, "n": 5, "n_g": 2, "d": 3}


def minkowski_inputs(seed: int = 0) -> tuple[torch.Tensor, ...]:
    """``(alpha (B, n_q, n), c (B, n, d), G (B, n, n_g, d))`` of exercise ch3.minkowski_mean
    (float64): attention weights of three sets with 5, 3 and 2 real tokens (weight exactly 0 on
    the padded ones, whose centres and generators hold junk) and the value tokens' zonotopes."""
    g = rng("ch3.minkowski_mean", seed)
    B, nq, n, ng, d = (MINKOWSKI_SIZES[k] for k in "B n_q n n_g d".split())
    c = torch.randn(B, n, d, generator=g, dtype=torch.float64)
    G = 0.5 * torch.randn(B, n, ng, d, generator=g, dtype=torch.float64)
    mask = torch.arange(n) < torch.tensor([[n], [3], [2]])  # (B, n), True = real
    c[~mask], G[~mask] = 40.0, -7.0  # padding junk: weight 0 must keep it out
    scores = 1.5 * torch.randn(B, nq, n, generator=g, dtype=torch.float64)
    alpha = scores.masked_fill(~mask[:, None, :], float("-inf")).softmax(-1)
    return alpha, c, G


def _minkowski_reference(alpha, c, G) -> Zonotope:
    """``sum_j alpha_ij Z_j`` with mzlite's zonotope operations: each token scaled (a linear map
    alpha_ij I) and the results added as Minkowski sums; batch ``(B, n_q)``."""
    eye = torch.eye(c.shape[-1], dtype=c.dtype)
    total = None
    for j in range(c.shape[1]):
        token = Zonotope(c[:, None, j], G[:, None, j])  # batch (B, 1)
        part = token.linear_map(alpha[:, :, j, None, None] * eye)  # alpha_ij Z_j: (B, n_q)
        total = part if total is None else total + part
    return total


def _support(out, directions, shape) -> torch.Tensor:
    """The support function of the learner's zonotopes ``out = (centres, generators)`` in every
    direction, ``(K, B, n_q)``: order and sign of the generators do not matter, only the set."""
    B, nq, d = shape
    if not isinstance(out, tuple | list) or len(out) != 2:
        raise ValueError("return the pair (centres (B, n_q, d), generators (B, n_q, m, d))")
    c, G = (torch.as_tensor(t).to(torch.float64) for t in out)
    if tuple(c.shape) != (B, nq, d):
        raise ValueError(
            f"the centres must have shape (B, n_q, d) = {(B, nq, d)}, got {tuple(c.shape)}"
        )
    if G.ndim != 4 or tuple(G.shape[:2]) != (B, nq) or G.shape[-1] != d:
        raise ValueError(
            f"the generators must have shape (B, n_q, m, d) = ({B}, {nq}, m, {d}), "
            f"got {tuple(G.shape)}"
        )
    return Zonotope(c, G).support(directions[:, None, None, :])


@exercise(
    "ch3.minkowski_mean",
    hint="chapter 1's zonotope arithmetic: what are the centre and generators of a scaled token "
    "alpha Z, and of a Minkowski sum Z_1 + Z_2? How many generators does the sum keep?",
    per_seed=True,
    kind="coding",
)
def _minkowski_mean(function, seed):
    for trial in range(3):
        inputs = minkowski_inputs(seed + 7919 * trial)
        alpha, c, G = inputs
        B, nq, n = alpha.shape
        ref = _minkowski_reference(*inputs)
        g = rng("ch3.minkowski_mean.directions", seed + 7919 * trial)
        U = torch.randn(16, c.shape[-1], generator=g, dtype=torch.float64)  # (K, d)
        shape = (B, nq, c.shape[-1])
        got = _support(call(function, *inputs), U, shape)
        slot_wise = torch.einsum("bqj,bjgk->bqgk", alpha, G)  # step 5: one average per slot
        unscaled = G[:, None].expand(B, nq, *G.shape[1:]).flatten(2, 3)
        ok, why = diagnose(
            got,
            ref.support(U[:, None, None, :]),
            [
                (
                    _support((alpha @ c, slot_wise), U, shape),
                    "the layer's slot-wise average sum_j alpha_ij G_j of step 5: generators of "
                    "different tokens cancel there, a Minkowski sum keeps every one",
                ),
                (
                    _support((alpha @ c, unscaled), U, shape),
                    "the tokens' generators not scaled by alpha_ij (alpha Z = <alpha c, alpha G>)",
                ),
            ],
            what="your result (compared as sets, by support functions)",
        )
        if not ok:
            return False, why + f" (inputs: minkowski_inputs({seed + 7919 * trial}))"
    return True, "the Minkowski means agree with mzlite's zonotope arithmetic, padded sets included"


READOUT_SIZES = {"B": 3, "n_g": 3, "d_k": 4, "L": 2}


def readout_inputs(seed: int = 0) -> tuple[torch.Tensor, ...]:
    """``(gamma (B, L), M_c (d_k, d_k), M_l (L, d_k, d_k), W_mix (n_g, L))`` of exercise
    ch3.readout_operator (float64): one head's parameters and the gates of three sets."""
    g = rng("ch3.readout_operator", seed)
    B, ng, dk, L = (READOUT_SIZES[k] for k in "B n_g d_k L".split())

    def r(*shape, scale=1.0):
        return scale * torch.randn(*shape, generator=g, dtype=torch.float64)

    gamma = torch.tanh(r(B, L, scale=1.5))
    return gamma, r(dk, dk), r(L, dk, dk, scale=0.5), r(ng, L)


def _readout_reference(gamma, M_c, M_l, W_mix) -> torch.Tensor:
    """``R`` (B, d_k, d_k) column by column from mzlite's MZAttention: one head with identity
    value and output weights and gates set by the gate's bias (its weight 0); set ``j`` holds the
    token ``c_hat = e_j`` without generators and a padded token full of junk; the signed readout
    ``o_c + sum_g o_G[g]`` of its output is ``R e_j``."""
    B, L = gamma.shape
    ng, dk = W_mix.shape[0], M_c.shape[0]
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
    ckv = torch.stack([eye, torch.full_like(eye, 40.0)], 1)  # (d_k sets, 2 tokens, d_k)
    Gkv = torch.zeros(dk, 2, ng, dk, dtype=torch.float64)
    Gkv[:, 1] = -9.0  # the padded token's generators: junk
    mask = torch.tensor([[True, False]]).expand(dk, 2)
    ops = []
    for i in range(B):
        with torch.no_grad():
            layer.gate.bias.copy_(torch.atanh(gamma[i]))
            o_c, o_G, _ = layer(ckv[:, :1], ckv, Gkv, mask)  # (d_k, 1, d_k), (d_k, 1, n_g, d_k)
        ops.append((o_c[:, 0] + o_G[:, 0].sum(1)).T)  # column j: the readout of e_j
    return torch.stack(ops)


@exercise(
    "ch3.readout_operator",
    hint="write o_c + sum_g o_G[g] with step 8's equation and collect the terms in c_hat: "
    "which weight does each gamma_l M_l carry once the slots are added?",
    per_seed=True,
    kind="coding",
)
def _readout_operator(function, seed):
    for trial in range(3):
        args = readout_inputs(seed + 7919 * trial)
        gamma, M_c, M_l, W_mix = args
        ref = _readout_reference(*args)
        gated = torch.einsum("bl,lij->bij", gamma * W_mix.sum(0), M_l)
        ok, why = diagnose(
            call(function, *args),
            ref,
            [
                (
                    M_c + torch.einsum("bl,lij->bij", gamma, M_l),
                    "the operator M(mu) = M_c + sum_l gamma_l M_l of step 7: the readout adds "
                    "the slots, so gamma_l M_l comes weighted by sum_g W_mix[g, l]",
                ),
                (
                    M_c + torch.einsum("bl,lij->bij", gamma * W_mix.abs().sum(0), M_l),
                    "|W_mix|: a signed readout adds the slots with their signs (the IHW takes "
                    "absolute values, a linear readout does not)",
                ),
                ((M_c + gated).mT, "a transposed operator: R acts on c_hat as R @ c_hat"),
                (gated, "the centre o_c = M_c c_hat left out of the readout"),
            ],
            what="R",
        )
        if not ok:
            return False, why + f" (inputs: readout_inputs({seed + 7919 * trial}))"
    return True, "R agrees with the signed readout of one head of mzlite's MZAttention"
