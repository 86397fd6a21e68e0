"""Guarantees of mzlite.nn.baselines, each against an independent computation: masking (each set
alone, unpadded), permutation / E(n) invariance, explicit-formula references for linear attention,
the HyperNet value map and the EGNN layer, hand-counted parameters, and parameter matching."""

import math

import pytest
import torch
import torch.nn.functional as F

from mzlite.nn import (
    MODEL_NAMES,
    MODELS,
    ModelSpec,
    build_model,
    count_parameters,
    match_width,
    model_spec,
    param_table,
)
from mzlite.nn.baselines import DeepSets, DeepSetsConfig, EGNNLayer, HyperAttention, LinearAttention
from mzlite.nn.registry import FAMILIES, PAPER_COUNT_TOLERANCE
from mzlite.tasks import baseline_r2, make_task

D_IN = 4
NETWORKS = tuple(n for n, spec in MODELS.items() if spec.trainable)  # every buildable model
ST = dict(d_model=16, n_heads=4, d_ff=32, n_inducing=4)
SMALL = {
    "deepsets": dict(d_hidden=16),
    "st": ST,
    "st_large": ST,
    "st_film": ST,
    "hypernet": dict(ST, rank=3),
    "perceiver": dict(d_model=16, d_ff=32, n_latents=4, n_self=2),
    "la_st": ST,
    "slot": dict(d_model=16, d_mlp=32),
    "egnn": dict(d_hidden=16, n_layers=3, n_coord=3),  # 3 coordinates + 1 invariant attribute
    "mamba_pma": dict(d_model=16, d_ff=32, n_layers=2),
    "st_meanpool": ST,
    **{f"mz_{v}": ST for v in ("slim", "med", "full", "large")},
}


def _model(name, seed=0, d_out=2, **kw):
    """A small build where ``SMALL`` has one (for speed); a newly registered model is tested at
    its default config."""
    small = SMALL.get(name, {})
    return build_model(name, D_IN, d_out, device="cpu", seed=seed, **{**small, **kw}).eval()


def _randomise_generators(model):
    """Zero-initialised FiLM / HyperNet generators make those models equal ST at init; give them
    random values so that the tests exercise the context-dependent path."""
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, HyperAttention):
                mod.U.weight.normal_(0, 0.3)
                mod.U.bias.normal_(0, 0.3)
        for lin in getattr(model, "film", []):
            lin.weight.normal_(0, 0.3)
            lin.bias.normal_(0, 0.3)
    return model


def _batch(B=3, n=6, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, n, D_IN, generator=g)
    mask = torch.ones(B, n, dtype=torch.bool)
    mask[0, n - 2 :] = False
    mask[1, 1] = False  # padding in the middle
    mask[2, 0] = False
    return x, mask


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_every_registered_model_has_a_complete_spec(name):
    spec = model_spec(name)
    assert spec.display.strip() and spec.family in FAMILIES and isinstance(spec.invariant, bool)
    assert (spec.fit is None) == spec.trainable
    if spec.trainable:  # it builds and counts; the small test config names real fields
        assert count_parameters(build_model(name, D_IN, 1, device="meta")) > 0
        assert set(SMALL.get(name, {})) <= set(spec.config.__dataclass_fields__)
    else:  # a closed form has no network: building it says what to call instead
        with pytest.raises(ValueError, match="closed form"):
            build_model(name, D_IN)
    assert set(SMALL) <= set(MODEL_NAMES)  # no stale entry for a model that was renamed


@pytest.mark.parametrize("name", [n for n in NETWORKS if model_spec(n).paper_count])
def test_default_build_matches_its_paper_count(name):
    """Where the paper states a count for the default configuration, ours is within
    ``PAPER_COUNT_TOLERANCE`` at d_in=8 (the paper's tasks do not all state their d_in)."""
    spec = model_spec(name)
    ours = count_parameters(build_model(name, 8, 1, device="meta"))
    assert abs(ours - spec.paper_count) <= PAPER_COUNT_TOLERANCE * spec.paper_count, (
        f"{name}: {ours:,} parameters, the paper's {spec.paper_params}"
    )


def test_the_yardstick_is_a_closed_form_spec():
    """set_stats is registered like the networks; its fit hook is the ridge of baseline_r2."""
    spec = model_spec("set_stats")
    assert not spec.trainable and spec.family == "closed_form"
    train = make_task("set_regression", 80, seed=0, d=3)
    test = make_task("set_regression", 40, seed=1, d=3)
    fitted, ridge = spec.fit(train, test), baseline_r2(train, test)
    size_only = baseline_r2(train, test, features="size")  # recorded beside it (issue 49)
    assert fitted["test"] == {"r2": ridge["r2"], "n": 40, "set_size_r2": size_only["r2"]}
    assert fitted["params"] == len(ridge["features"]) + 1
    assert "set_stats" not in [r["model"] for r in param_table(3)]  # no network to count
    with pytest.raises(ValueError, match="closed form"):
        match_width("set_stats", 3)


def test_a_model_spec_is_a_network_or_a_closed_form_never_both():
    with pytest.raises(ValueError, match="family must be one of"):
        ModelSpec("X", "transformer", DeepSets, DeepSetsConfig)
    with pytest.raises(ValueError, match="either model and config"):
        ModelSpec("X", "baseline")
    with pytest.raises(ValueError, match="either model and config"):
        ModelSpec("X", "closed_form", DeepSets, DeepSetsConfig, fit=lambda tr, te: {})
    with pytest.raises(ValueError, match="'closed_form' is for models with a fit hook"):
        ModelSpec("X", "baseline", fit=lambda tr, te: {})


def test_model_names_are_one_per_model():
    assert len(set(MODEL_NAMES)) == len(MODEL_NAMES) and "standard" not in MODEL_NAMES
    assert model_spec("standard") is model_spec("st")  # the paper's name, an alias
    with pytest.raises(ValueError, match="valid models: deepsets"):
        model_spec("deepset")


@pytest.mark.parametrize("name", NETWORKS)
def test_shape_and_masking_against_each_set_alone(name):
    model = _randomise_generators(_model(name))
    x, mask = _batch()
    with torch.no_grad():
        y = model(x, mask)
        assert y.shape == (3, 2) and torch.isfinite(y).all()
        # reference: every set run alone with its real elements only (in their order), no mask
        ref = torch.cat([model(x[b, mask[b]][None]) for b in range(3)])
        torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
        # appended padding with junk values changes nothing
        junk = 100 * torch.randn(3, 4, D_IN)
        x2 = torch.cat([x.masked_fill(~mask[..., None], 7.0), junk], dim=1)
        m2 = torch.cat([mask, torch.zeros(3, 4, dtype=torch.bool)], dim=1)
        torch.testing.assert_close(model(x2, m2), y, atol=1e-5, rtol=1e-5)
        assert model(x, None).shape == (3, 2)  # None: every element real


@pytest.mark.parametrize("name", NETWORKS)
def test_padding_content_never_matters_nan_included(name):
    model = _randomise_generators(_model(name))
    x, mask = _batch()
    with torch.no_grad():
        y = model(x, mask)
        for junk in (float("nan"), float("inf"), -float("inf"), 1e30):
            torch.testing.assert_close(
                model(x.masked_fill(~mask[..., None], junk), mask), y, atol=0, rtol=0
            )
        bad = x.clone()
        bad[1, 2, 0] = float("nan")  # a real element: still a clear error naming where it is
        with pytest.raises(ValueError, match=r"x contains NaN or inf .* set 1, element 2"):
            model(bad, mask)


@pytest.mark.parametrize("name", NETWORKS)
def test_permutation_invariance(name):
    model = _randomise_generators(_model(name, seed=3))
    x, mask = _batch(seed=4)
    perm = torch.randperm(x.shape[1], generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        y, yp = model(x, mask), model(x[:, perm], mask[:, perm])
    if model_spec(name).invariant:
        torch.testing.assert_close(yp, y, atol=1e-4, rtol=1e-4)
    else:  # e.g. mamba_pma reads the set as a sequence: its spec says so, and it is so
        assert (yp - y).abs().max() > 1e-4


@pytest.mark.parametrize("name", NETWORKS)
def test_learns_a_masked_mean(name):
    """A few dozen Adam steps on y = masked mean of the last feature (an invariant attribute for
    EGNN): the training loss falls well below its start."""
    torch.manual_seed(0)
    B, n = 64, 8
    x = torch.randn(B, n, D_IN)
    mask = torch.arange(n)[None] < torch.randint(2, n + 1, (B, 1))
    y = (x[..., -1] * mask).sum(1, keepdim=True) / mask.sum(1, keepdim=True)
    y = (y - y.mean()) / y.std()
    model = _model(name, d_out=1, **({"dropout": 0.0} if "dropout" in _fields(name) else {}))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    with torch.no_grad():
        start = F.mse_loss(model(x, mask), y).item()
    model.train()
    for _ in range(60):
        opt.zero_grad()
        F.mse_loss(model(x, mask), y).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        end = F.mse_loss(model(x, mask), y).item()
    assert end < 0.5 * start and end < 0.5, (start, end)


def _fields(name):
    from mzlite.nn import MODELS

    return {f for f in MODELS[name].config.__dataclass_fields__}


# ----------------------------------------------------------------------------- bad input


def test_bad_inputs_raise_clear_errors():
    model = _model("deepsets")
    x, mask = _batch()
    with pytest.raises(ValueError, match="x must have shape"):
        model(torch.randn(3, 6, D_IN + 1), mask)
    with pytest.raises(ValueError, match="x must have shape"):
        model(torch.randn(6, D_IN))
    with pytest.raises(ValueError, match="mask must have shape"):
        model(x, mask[:, :5])
    with pytest.raises(TypeError, match="mask must be a bool"):
        model(x, mask.int())
    with pytest.raises(ValueError, match="NaN"):
        model(x.index_fill(1, torch.tensor([0]), float("nan")), mask)
    empty = mask.clone()
    empty[0] = False
    with pytest.raises(ValueError, match="no real element"):
        model(x, empty)
    with pytest.raises(TypeError, match="floating-point"):
        model(x.long(), mask)


@pytest.mark.parametrize("name", ["egnn", "mamba_pma", "slot", "perceiver", "hypernet"])
def test_every_model_validates(name):
    model = _model(name)
    with pytest.raises(ValueError, match="x must have shape"):
        model(torch.randn(2, 5, D_IN + 2))
    with pytest.raises(ValueError, match="no real element"):
        model(torch.randn(2, 5, D_IN), torch.zeros(2, 5, dtype=torch.bool))


def test_bad_names_and_configs():
    with pytest.raises(ValueError, match="deepsets"):  # the message lists the valid names
        build_model("transformer", 3)
    with pytest.raises(ValueError, match="unknown config field"):
        build_model("slot", 3, d_ff=3)
    with pytest.raises(ValueError, match="divisible by n_heads"):
        build_model("perceiver", 3, d_model=18)
    with pytest.raises(ValueError, match="pool"):
        build_model("deepsets", 3, pool="max")
    with pytest.raises(ValueError, match="n_coord"):
        build_model("egnn", 3, n_coord=4)
    with pytest.raises(ValueError, match="rank"):
        build_model("hypernet", 3, rank=0)
    with pytest.raises(ValueError, match="n_seeds"):
        build_model("st_meanpool", 3, n_seeds=2)
    with pytest.raises(ValueError, match="knob"):
        match_width("st", 3, 1, 10_000, knob="nope")
    assert count_parameters(build_model("standard", 8, device="cpu")) == 207_745  # alias of "st"


# ----------------------------------------------------------------------------- references


def test_linear_attention_matches_the_explicit_formula():
    torch.manual_seed(0)
    att = LinearAttention(8, n_heads=2)
    xq, xkv = torch.randn(2, 3, 8), torch.randn(2, 5, 8)
    mask = torch.tensor([[1, 1, 0, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    out, _ = att(xq, xkv, mask)
    phi = lambda t: F.elu(t) + 1  # noqa: E731
    ref = torch.zeros(2, 3, 8)
    for b in range(2):
        for h in range(2):
            sl = slice(4 * h, 4 * h + 4)
            q, k = phi(att.q(xq[b])[:, sl]), phi(att.k(xkv[b])[:, sl])  # (3, 4), (5, 4)
            v = att.v(xkv[b])[:, sl]
            s = (q @ k.T) * mask[b]  # (3, 5) kernel similarities, real keys only
            ref[b, :, sl] = (s @ v) / s.sum(1, keepdim=True)
    torch.testing.assert_close(out, att.o(ref), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("v_factor", ["static", "dynamic"])
def test_hypernet_value_map_is_wv_plus_low_rank(v_factor):
    """Reference: standard masked attention whose value weight is set, per sample, to the explicit
    matrix W_V + U(mu) V^T (torch.nn.MultiheadAttention, an independent code path)."""
    torch.manual_seed(0)
    d, H, r = 8, 2, 3
    att = HyperAttention(d, n_heads=H, rank=r, v_factor=v_factor)
    with torch.no_grad():
        att.U.weight.normal_(0, 0.3)
    xq, xkv = torch.randn(2, 3, d), torch.randn(2, 5, d)
    mask = torch.tensor([[1, 0, 1, 1, 0], [1, 1, 1, 1, 1]], dtype=torch.bool)
    out, _ = att(xq, xkv, mask)
    for b in range(2):
        mu = xkv[b][mask[b]].mean(0)
        U = att.U(mu).view(d, r)
        V = att.V if v_factor == "static" else att.V(mu).view(d, r)
        assert torch.linalg.matrix_rank(U @ V.T) <= r
        mha = torch.nn.MultiheadAttention(d, H, batch_first=True)
        with torch.no_grad():
            W_v = att.v.weight + U @ V.T
            mha.in_proj_weight.copy_(torch.cat([att.q.weight, att.k.weight, W_v]))
            mha.in_proj_bias.copy_(torch.cat([att.q.bias, att.k.bias, att.v.bias]))
            mha.out_proj.weight.copy_(att.o.weight)
            mha.out_proj.bias.copy_(att.o.bias)
        ref, _ = mha(
            xq[b : b + 1], xkv[b : b + 1], xkv[b : b + 1], key_padding_mask=~mask[b : b + 1]
        )
        torch.testing.assert_close(out[b : b + 1], ref, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", ["st_film", "hypernet"])
def test_film_and_hypernet_start_as_the_set_transformer(name):
    model = _model(name, seed=0)
    st = build_model("st", D_IN, 2, device="cpu", **ST).eval()
    missing = st.load_state_dict(model.state_dict(), strict=False)
    assert not missing.missing_keys  # every ST weight is shared
    x, mask = _batch()
    with torch.no_grad():
        torch.testing.assert_close(model(x, mask), st(x, mask), atol=1e-6, rtol=1e-6)
        _randomise_generators(model)
        assert (model(x, mask) - st(x, mask)).abs().max() > 1e-3


def test_egnn_layer_matches_a_loop_over_edges():
    torch.manual_seed(0)
    h_dim, n = 6, 5
    layer = EGNNLayer(h_dim)
    h, x = torch.randn(1, n, h_dim), torch.randn(1, n, 3)
    mask = torch.tensor([[1, 1, 0, 1, 1]], dtype=torch.bool)
    h, x = h * mask[..., None], x * mask[..., None]
    h_out, x_out = layer(h, x, mask)
    real = mask[0].nonzero().flatten().tolist()
    phi_e = torch.nn.Sequential(layer.edge_in, layer.edge_out)
    for i in real:
        m_sum, dx = torch.zeros(h_dim), torch.zeros(3)
        for j in real:
            if j == i:
                continue
            m = phi_e(torch.cat([h[0, i], h[0, j], ((x[0, i] - x[0, j]) ** 2).sum()[None]]))
            m_sum += m
            dx += (x[0, i] - x[0, j]) * layer.phi_x(m)
        torch.testing.assert_close(
            x_out[0, i], x[0, i] + dx / (len(real) - 1), atol=1e-5, rtol=1e-5
        )
        ref_h = h[0, i] + layer.phi_h(torch.cat([h[0, i], m_sum]))
        torch.testing.assert_close(h_out[0, i], ref_h, atol=1e-5, rtol=1e-5)
    assert h_out[0, 2].abs().max() == 0 and x_out[0, 2].abs().max() == 0


def test_egnn_is_en_invariant():
    model = _model("egnn", seed=2, d_out=3)
    x, mask = _batch(seed=6)
    Q, _ = torch.linalg.qr(torch.randn(3, 3, generator=torch.Generator().manual_seed(7)))
    Q[:, 0] *= -1 if torch.det(Q) > 0 else 1  # include a reflection: E(n), not only SE(n)
    t = torch.tensor([3.0, -2.0, 0.5])
    x2 = x.clone()
    x2[..., :3] = x[..., :3] @ Q.T + t  # the trailing attribute is not a coordinate
    with torch.no_grad():
        y, y2 = model(x, mask), model(x2, mask)
        torch.testing.assert_close(y2, y, atol=1e-4, rtol=1e-4)
        x3 = x.clone()
        x3[..., 3] += 1.0  # attributes are features, so they do matter
        assert (model(x3, mask) - y).abs().max() > 1e-3
    # all features as coordinates (the default)
    model = build_model("egnn", 3, 1, device="cpu", seed=0, d_hidden=16, n_layers=2).eval()
    with torch.no_grad():
        xs = x[..., :3]
        torch.testing.assert_close(model(xs @ Q.T - t, mask), model(xs, mask), atol=1e-4, rtol=1e-4)


# ----------------------------------------------------------------------------- parameter counts


def _mab(d, f):  # q, k, v, o with biases + 2 LayerNorms + FFN d -> f -> d
    return 4 * (d * d + d) + 4 * d + (d * f + f) + (f * d + d)


def test_parameter_counts_by_hand():
    d, f, d_in = 64, 128, 8
    embed, head = d_in * d + d, d * d + d + d + 1
    isab = 2 * _mab(d, f) + 16 * d
    st = embed + 2 * isab + (_mab(d, f) + d) + _mab(d, f) + head
    count = lambda name, **kw: count_parameters(build_model(name, d_in, device="cpu", **kw))  # noqa: E731
    assert count("st") == st == 207_745  # the paper's 208K
    assert count("st_film") == st + 2 * (d * 2 * d + 2 * d)  # FiLM on the two ISABs: 225K
    assert count("st_meanpool") == st - (_mab(d, f) + d) - _mab(d, f)  # the paper's 140K
    assert count("la_st") == st
    for r in (8, 64):  # four encoder MABs, U generator d -> d r plus a static V (d, r)
        assert count("hypernet", rank=r) == st + 4 * (d * d * r + d * r + d * r)
    assert count("hypernet", rank=64) == 1_289_089  # the paper's 1.3M
    assert count("perceiver") == embed + 16 * d + 9 * _mab(d, f) + (_mab(d, f) + d) + head
    assert count("deepsets") == (d_in * 128 + 128) + 2 * (128 * 128 + 128) + 129


@pytest.mark.parametrize(
    ("name", "target", "kw"),
    [
        ("st", 365_000, {}),
        ("hypernet", 360_000, {"rank": 16}),
        ("perceiver", 341_000, {}),
        ("la_st", 359_000, {}),
        ("egnn", 303_000, {}),
        ("mz_full", 150_000, {}),
        ("slot", 59_000, {}),
    ],
)
def test_match_width_hits_the_target(name, target, kw):
    kwargs, params = match_width(name, 8, 1, target, **kw)
    built = build_model(name, 8, 1, device="cpu", **kwargs)  # counted on real weights
    assert count_parameters(built) == params
    assert abs(params - target) <= 0.02 * target
    if "d_model" in kwargs:
        assert kwargs["d_model"] % 4 == 0
    for k, v in kw.items():
        assert kwargs[k] == v


@pytest.mark.slow
def test_match_width_other_knobs_and_table():
    kwargs, params = match_width("perceiver", 8, 1, 200_000, knob="n_self")
    assert set(kwargs) == {"n_self"} and abs(params - 200_000) < 0.1 * 200_000
    rows = param_table(8, target_params=100_000)
    assert [r["model"] for r in rows] == list(NETWORKS)
    for r in rows:
        assert abs(r["matched_params"] - 100_000) <= 2_000, r
    assert next(r for r in rows if r["model"] == "mz_full")["params"] == 370_273


def test_mamba_masking_keeps_real_order():
    """Padding anywhere = the real elements as one unpadded sequence in their given order."""
    model = _model("mamba_pma", seed=1)
    x = torch.randn(1, 5, D_IN)
    mask = torch.tensor([[True, False, True, False, True]])
    with torch.no_grad():
        torch.testing.assert_close(model(x, mask), model(x[:, [0, 2, 4]]), atol=1e-5, rtol=1e-5)
        assert (model(x, mask) - model(x[:, [4, 2, 0]])).abs().max() > 1e-4
    assert math.isfinite(model(x, mask).sum().item())
