"""Every model of the paper by name: one registry, one factory, parameter counts and matching.

``build_model(name, d_in, d_out)`` (also ``make_model``) builds any registered model: the
standard and MZ Set Transformers of ``models`` and the baselines of ``baselines``;
``match_width`` finds the width that gives a target parameter count; ``param_table`` and
``parameter_count_table`` list counts beside the paper's.
"""

from __future__ import annotations

from dataclasses import fields
from typing import NamedTuple

import torch
import torch.nn as nn

from .._checks import resolve_device
from ..registry import Registry
from .baselines import (
    EGNN,
    DeepSets,
    DeepSetsConfig,
    EGNNConfig,
    FiLMSetTransformer,
    HyperNetConfig,
    HyperNetSetTransformer,
    LinearAttentionSetTransformer,
    MambaPMA,
    MambaPMAConfig,
    MeanPoolSetTransformer,
    Perceiver,
    PerceiverConfig,
    SlotAttention,
    SlotAttentionConfig,
)
from .models import (
    MZSetTransformer,
    MZSetTransformerConfig,
    SetTransformer,
    SetTransformerConfig,
    count_parameters,
)

# ----------------------------------------------------------------------------- registry


class ModelSpec(NamedTuple):
    """How to build a registered model: ``model(config(**{**base, d_in, d_out, **overrides}))``;
    ``width`` is the config field ``match_width`` turns by default."""

    model: type
    config: type
    base: dict
    width: str


# Every model of the paper, by the name tables, results and notebooks use.
MODELS: Registry[ModelSpec] = Registry(
    "model",
    [
        ("deepsets", ModelSpec(DeepSets, DeepSetsConfig, {}, "d_hidden")),
        ("st", ModelSpec(SetTransformer, SetTransformerConfig, {}, "d_model")),
        (
            "st_large",
            ModelSpec(
                SetTransformer,
                SetTransformerConfig,
                SetTransformerConfig.VARIANTS["st_large"],
                "d_model",
            ),
        ),
        ("st_film", ModelSpec(FiLMSetTransformer, SetTransformerConfig, {}, "d_model")),
        ("hypernet", ModelSpec(HyperNetSetTransformer, HyperNetConfig, {}, "d_model")),
        ("perceiver", ModelSpec(Perceiver, PerceiverConfig, {}, "d_model")),
        ("la_st", ModelSpec(LinearAttentionSetTransformer, SetTransformerConfig, {}, "d_model")),
        ("slot", ModelSpec(SlotAttention, SlotAttentionConfig, {}, "d_model")),
        ("egnn", ModelSpec(EGNN, EGNNConfig, {}, "d_hidden")),
        ("mamba_pma", ModelSpec(MambaPMA, MambaPMAConfig, {}, "d_model")),
        (
            "st_meanpool",
            ModelSpec(MeanPoolSetTransformer, SetTransformerConfig, {"n_dec": 0}, "d_model"),
        ),
        *(
            (
                f"mz_{v}",
                ModelSpec(MZSetTransformer, MZSetTransformerConfig, base, "d_model"),
            )
            for v, base in MZSetTransformerConfig.VARIANTS.items()
        ),
    ],
)
MODELS.alias("standard", "st")  # the paper's "Standard" Set Transformer
NAMES = tuple(MODELS)  # every model ``build_model`` knows
PERMUTATION_INVARIANT = tuple(n for n in NAMES if n != "mamba_pma")

# the paper's counts, for ``param_table`` (sources: tab:main-results, tab:meb, tab:slot-baseline,
# tab:hypernet-rank, app:egnn-comparison, app:impl, tab:mz-efficient, tab:qm9)
PAPER_PARAMS = {
    "deepsets": "36K",
    "st": "208K",
    "st_large": "362K",
    "st_film": "225K",
    "hypernet": "360K (r=8, matched)",
    "perceiver": "341K",
    "la_st": "359K (matched)",
    "slot": "59K",
    "egnn": "303K (h=140, 4 layers)",
    "mamba_pma": "645K",
    "st_meanpool": "140K",
    "mz_slim": "333K",
    "mz_med": "n/a",
    "mz_full": "365-372K",
    "mz_large": "417K",
}


def _config(name: str, d_in: int, d_out: int, **kw):
    cls, cfg_cls, base, _ = MODELS[name]
    allowed = {f.name for f in fields(cfg_cls)}
    unknown = sorted(set(kw) - allowed)
    if unknown:
        raise ValueError(
            f"unknown config field(s) {unknown} for {name!r}; valid: {sorted(allowed)}"
        )
    return cls, cfg_cls(**{**base, "d_in": d_in, "d_out": d_out, **kw})


def build_model(
    name: str, d_in: int, d_out: int = 1, device="auto", seed: int | None = None, **kw
) -> nn.Module:
    """Build the model ``name`` (one of ``NAMES``; ``"standard"`` is an alias of ``"st"``) for sets
    of ``d_in`` features and ``d_out`` outputs, on ``device`` (``"auto"``: CUDA when available).

    ``kw`` are config fields (e.g. ``d_model=96``, ``rank=16``, ``n_coord=3``); ``seed`` seeds the
    initialisation. Every model maps ``(x (B, n, d_in), mask (B, n) | None) -> (B, d_out)``."""
    dev = resolve_device(device)
    cls, cfg = _config(name, d_in, d_out, **kw)
    if seed is not None:
        torch.manual_seed(seed)
    return cls(cfg).to(dev)


def _count(name: str, d_in: int, d_out: int, **kw) -> int:
    """Parameter count without allocating weights (built on the meta device)."""
    cls, cfg = _config(name, d_in, d_out, **kw)
    with torch.device("meta"):
        return count_parameters(cls(cfg))


def _bracket(count, target: int, i_max: int) -> tuple[int, int]:
    """For a nondecreasing ``count`` over ints >= 1: ``(lo, hi)`` with ``hi = lo + 1`` and
    ``count(lo) < target <= count(hi)``, or ``(1, 1)`` when ``count(1) >= target``
    (doubling, then bisection: O(log) evaluations)."""
    if count(1) >= target:
        return 1, 1
    lo, hi = 1, 2
    while count(hi) < target:
        lo, hi = hi, hi * 2
        if hi > i_max:
            raise ValueError(f"no value <= {i_max} reaches {target} parameters")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if count(mid) < target else (lo, mid)
    return lo, hi


def match_width(
    name: str,
    d_in: int,
    d_out: int = 1,
    target_params: int = 365_000,
    knob: str = "d",
    ff_ratio: float | None = None,
    fine_ff: bool = True,
    max_value: int = 4096,
    **fixed,
) -> tuple[dict, int]:
    """Config values giving a parameter count closest to ``target_params`` (the paper matches
    ST-Large, Perceiver, HyperNet, LA-ST to MZ's ~360-368K, Sec. sec:experiments).

    ``knob="d"`` means the model's width (``d_model``, or ``d_hidden`` for DeepSets and EGNN);
    ``d_model`` steps by ``n_heads`` so that ``d % H == 0``, and ``d_ff`` follows as
    ``round(ff_ratio * d)`` (default: the model's own ratio, 2, or 2.5 for ST-Large). Because a
    step of ``H`` in ``d`` moves the count by ~10%, ``fine_ff=True`` then keeps the largest ``d``
    below the target and sets ``d_ff`` (step 1) to land on it: typically within 0.1% (the paper's
    ST-Large is the same kind of pair, d=80 with d_ff=200). Any other int config field can be the
    knob (``"n_latents"``, ``"n_layers"``, ``"rank"``, ...; no fine step then). ``fixed``: config
    fields held fixed (e.g. ``rank=16``). Returns ``(kwargs, params)``:
    ``build_model(name, d_in, d_out, **kwargs)`` has ``params`` parameters. Assumes the count
    grows with the knob (true for every width here). Counting builds models on the meta device
    (no memory, ~10-30 builds)."""
    name = MODELS.canonical(name)
    _, cfg_cls, base, width = MODELS[name]
    knob = width if knob == "d" else knob
    defaults = cfg_cls(**{**base, "d_in": d_in, "d_out": d_out, **fixed})
    if knob in fixed or not isinstance(getattr(defaults, knob, None), int):
        raise ValueError(
            f"knob must be 'd' or an unfixed int config field of {name!r}, got {knob!r}"
        )
    if not (isinstance(target_params, int) and target_params > 0):
        raise ValueError(f"target_params must be a positive int, got {target_params!r}")
    step = defaults.n_heads if knob == "d_model" and hasattr(defaults, "n_heads") else 1
    ratio = None
    if knob == "d_model" and hasattr(defaults, "d_ff") and "d_ff" not in fixed:
        ratio = ff_ratio if ff_ratio is not None else defaults.d_ff / defaults.d_model

    def kwargs(i: int, d_ff: int | None = None) -> dict:
        kw = {**fixed, knob: i * step}
        if ratio is not None:
            kw["d_ff"] = d_ff if d_ff is not None else max(1, round(ratio * i * step))
        return kw

    def count(i: int, d_ff: int | None = None) -> int:
        return _count(name, d_in, d_out, **kwargs(i, d_ff))

    lo, hi = _bracket(count, target_params, max_value // step)
    cands = [(abs(count(i) - target_params), kwargs(i)) for i in (lo, hi)]
    if ratio is not None and fine_ff:  # widest d below the target, then d_ff to reach it
        f_lo, f_hi = _bracket(lambda f: count(lo, f), target_params, 1 << 20)
        cands += [(abs(count(lo, f) - target_params), kwargs(lo, f)) for f in (f_lo, f_hi)]
    best = min(cands, key=lambda c: c[0])[1]
    return best, _count(name, d_in, d_out, **best)


def param_table(d_in: int = 8, d_out: int = 1, target_params: int = 365_000) -> list[dict]:
    """One row per model: ``{"model", "params" (defaults), "paper", "matched" (kwargs of
    ``match_width`` at ``target_params``), "matched_params"}``. The paper's column is for the
    task it reports on, whose ``d_in`` is not always 8, so small differences are expected."""
    rows = []
    for name in NAMES:
        kw, n = match_width(name, d_in, d_out, target_params)
        rows.append(
            {
                "model": name,
                "params": _count(name, d_in, d_out),
                "paper": PAPER_PARAMS[name],
                "matched": kw,
                "matched_params": n,
            }
        )
    return rows


# ----------------------------------------------------------------------------- factories

# The Set Transformer family of ``mzlite.nn`` (every name of ``MODELS`` builds with make_model)
MODEL_NAMES = ("standard", "st_large", "mz_slim", "mz_med", "mz_full", "mz_large")


make_model = build_model  # the name ``mzlite.nn`` has always used


def parameter_count_table(d_in: int = 8, d_out: int = 1) -> list[dict]:
    """Rows ``{"model", "ours", "paper", "note"}``: our parameter counts beside the paper's.

    Paper numbers: ~208K Standard and ~372K MZ-Full (App. app:impl), 360-368K for the
    parameter-matched ST-Large, 333K MZ-Slim and 417K MZ-Large (reported on tasks whose ``d_in``
    the paper does not state next to them, so only Standard and MZ-Full are like for like)."""
    rows = [
        ("Set Transformer (standard)", "standard", {}, "~208K", "default: one SAB after PMA"),
        ("  same, two SABs after PMA", "standard", {"n_dec": 2}, "~208K", "does not match"),
        ("ST-Large (d=80, d_ff=200)", "st_large", {}, "~360-368K", ""),
        ("MZ-Slim (n_g=2, L=1)", "mz_slim", {}, "333K", "d_in of the paper's row unknown"),
        ("MZ-Med (n_g=4, L=2)", "mz_med", {}, "n/a", ""),
        ("MZ-Full (n_g=8, L=4)", "mz_full", {}, "~365-372K", "default: own generator W_V, W_O"),
        (
            "  same, generators share W_V, W_O",
            "mz_full",
            {"gen_own_weights": False},
            "~365-372K",
            "does not match",
        ),
        ("MZ-Large (n_g=16, L=8)", "mz_large", {}, "417K", "d_in of the paper's row unknown"),
    ]
    return [
        {
            "model": label,
            "ours": count_parameters(make_model(key, d_in, d_out, "cpu", **ov)),
            "paper": paper,
            "note": note,
        }
        for label, key, ov, paper, note in rows
    ]
