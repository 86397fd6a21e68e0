"""Chapter 3 exercises ("MZAttn from scratch"): every reference answer is computed with mzlite
(``mzlite.nn``, ``mzlite.zonotope``); only the exercise's inputs are typed here, and the notebook
builds the same layer and set with :func:`exercise_inputs`."""

from __future__ import annotations

import torch

from .checker import exercise
from ..models import count_parameters
from ..nn import MultiheadAttention, MZAttention
from ..zonotope import Zonotope

# ch3.extra_params: one attention layer of MZ-Full (App. app:impl) against a standard one.
EX_FULL = {"d": 64, "n_heads": 4, "n_g": 8, "L": 4}
# ch3.gates and ch3.ihw: a small layer and one padded set (3 real tokens of 5).
EX_SMALL = {"d": 4, "n_heads": 2, "n_g": 2, "L": 3}
EX_SEED, EX_N, EX_N_REAL = 11, 5, 3


def exercise_inputs():
    """``(layer, c, G, mask)`` of ch3.gates / ch3.ihw (float64; the same every call): an
    ``MZAttention`` with visible matrix generators and one padded set of token zonotopes,
    ``c`` (1, 5, 4), ``G`` (1, 5, 2, 4), ``mask`` (1, 5) with 3 real tokens; the padded rows hold
    junk on purpose."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(EX_SEED)
        layer = MZAttention(**EX_SMALL).double()
        with torch.no_grad():
            layer.M_l.normal_(0.0, 0.5)
        d, n_g = EX_SMALL["d"], EX_SMALL["n_g"]
        c = torch.randn(1, EX_N, d, dtype=torch.float64)
        G = 0.3 * torch.randn(1, EX_N, n_g, d, dtype=torch.float64)
    c[:, EX_N_REAL:] = 50.0  # padding: must not reach any output
    mask = torch.arange(EX_N).unsqueeze(0) < EX_N_REAL
    return layer, c, G, mask


def _outputs():
    layer, c, G, mask = exercise_inputs()
    with torch.no_grad():
        return layer(c, c, G, mask, need_details=True)


@exercise(
    "ch3.extra_params",
    hint="M_c and M_l (H (1+L) d_k^2), W_mix (H n_g L), the gate Linear(d, H L) with its bias, "
    "and the generators' own bias-free W_vg and W_og (d^2 each).",
)
def _extra_params(answer):
    d, H = EX_FULL["d"], EX_FULL["n_heads"]
    ref = count_parameters(MZAttention(**EX_FULL)) - count_parameters(MultiheadAttention(d, H))
    ok = not isinstance(answer, bool) and int(answer) == answer == ref
    return ok, (
        f"{ref} extra parameters per attention layer"
        if ok
        else f"{answer!r} is not the number of extra parameters"
    )


@exercise(
    "ch3.gates",
    hint="gamma = tanh(W_gamma cbar + b) with cbar the mean over the REAL key/value centres.",
)
def _gates(answer):
    ref = _outputs()[2]["gates"]  # (1, H, L)
    a = torch.as_tensor(answer, dtype=torch.float64)
    if a.numel() != ref.numel():
        raise ValueError(f"expected {ref.numel()} gate values (B, H, L) = {tuple(ref.shape)}")
    ok = torch.allclose(a.reshape(ref.shape), ref, rtol=1e-6, atol=1e-8)
    return ok, "the gates of the set, read from its real tokens only" if ok else "not the gates"


@exercise("ch3.ihw", hint="Build Zonotope(o_c, o_G) and take .ihw() of the first real token.")
def _ihw(answer):
    o_c, o_G, _ = _outputs()
    ref = Zonotope(o_c, o_G)[0, 0].ihw().item()
    a = torch.as_tensor(answer, dtype=torch.float64)
    ok = a.numel() == 1 and abs(a.item() - ref) <= 1e-6 * max(1.0, abs(ref))
    return ok, f"IHW = sum_g ||G_g||_1 = {ref:.4f}" if ok else "not the IHW of that token"
