import importlib
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from mzlite import exercises
from mzlite.exercises import check, exercise


@exercise("test.double", hint="twice three")
def _double(answer):
    return answer == 6, "2 * 3 = 6"


def test_unanswered_is_reported_not_failed():
    r = check("test.double", ...)
    assert r.status == "unanswered" and not r and "twice three" in r.message
    assert check("test.double", None).status == "unanswered"


def test_right_and_wrong_answers():
    assert check("test.double", 6).status == "correct"
    wrong = check("test.double", 5)
    assert wrong.status == "wrong" and "Hint" in wrong.message
    assert "Not yet" in wrong._repr_html_()


def test_strict_raises_on_a_wrong_solution():
    check("test.double", 6, strict=True)
    with pytest.raises(AssertionError, match="test.double"):
        check("test.double", 7, strict=True)


def test_a_malformed_answer_is_a_wrong_answer():
    @exercise("test.len")
    def _len(answer):
        return len(answer) == 2, "two items"

    r = check("test.len", 3)
    assert r.status == "wrong" and "TypeError" in r.message


def test_unknown_key_and_duplicate_registration():
    with pytest.raises(KeyError, match="unknown exercise"):
        check("nope.nothing", 1)
    with pytest.raises(ValueError, match="registered twice"):
        exercise("test.double")(lambda a: (True, ""))


def test_number_answers_and_per_student_inputs():
    from mzlite.exercises.checker import (
        number_exercise,
        same_integer,
        same_number,
        student_inputs,
    )

    assert same_integer(3, 3) and same_integer(3.0, 3) and not same_integer(3.5, 3)
    assert not same_integer(True, 1)
    assert same_number(2.0000001, 2.0) and not same_number(2.01, 2.0)
    assert same_number(1e-9, 0.0, atol=1e-8) and not same_number(float("nan"), 1.0)
    with pytest.raises(TypeError, match="bool"):
        same_number(True, 1.0)

    def draw(g):
        return {"x": g.uniform(0.0, 1.0, 3)}

    typed = student_inputs(99, 0, draw, {"x": [1.0, 2.0, 3.0], "level": 0.9})
    assert typed["x"].dtype == np.float64 and typed["level"] == 0.9
    a, b = student_inputs(99, 1, draw, typed), student_inputs(99, 2, draw, typed)
    assert np.array_equal(a["x"], student_inputs(99, 1, draw)["x"])  # the checker's inputs
    assert not np.array_equal(a["x"], b["x"])  # another student, other numbers

    number_exercise(
        "test.sum",
        lambda ex: float(ex["x"].sum()),
        hint="add them",
        inputs=lambda seed: student_inputs(99, seed, draw, {"x": [1.0, 2.0, 3.0]}),
        right="sum = {:.1f}",
        wrong="not the sum",
    )
    assert check("test.sum", 6.0).message == "sum = 6.0"
    assert check("test.sum", float(a["x"].sum()), seed=1).status == "correct"
    assert check("test.sum", 6.0, seed=1).message == "not the sum Hint: add them"


def test_chapter_exercises_are_discovered():
    # Chapter modules register themselves on first use of the registry.
    assert all(k.count(".") >= 1 for k in exercises.keys())


# ---- coding exercises: right functions pass, typical mistakes are named, placeholders wait
import torch  # noqa: E402

from mzlite.exercises import ch2, ch3, ch5, ch6, ch7, ch8, ch9, ch11  # noqa: E402
from mzlite.nn import build_model, count_parameters  # noqa: E402
from mzlite.zonotope import MatrixZonotope, Zonotope  # noqa: E402


def _half_widths(G):
    return G.abs().sum(dim=-2)


def _mz_times_z(M_c, M_l, c, G, transpose=False, cross=True):
    if transpose:
        M_c, M_l = M_c.mT, M_l.mT
    gens = [G @ M_c.T, M_l @ c]
    if cross:
        gens.append(torch.einsum("lpq,kq->lkp", M_l, G).reshape(-1, M_c.shape[0]))
    return M_c @ c, torch.cat(gens)


def _minkowski_mean(alpha, c, G, scaled=True):
    gens = (
        alpha[..., None, None] * G[:, None]
        if scaled
        else G[:, None].expand(-1, alpha.shape[1], -1, -1, -1)
    )
    return alpha @ c, gens.flatten(2, 3)


def _slot_wise_mean(alpha, c, G):
    """Step 5 of chapter 3 for one head (its cell's einsum without the head axis): the layer's
    own averaging, the reshape of the cell above the exercise."""
    return alpha @ c, torch.einsum("bqj,bjgk->bqgk", alpha, G)


def _readout_operator(gamma, M_c, M_l, W_mix):
    return M_c + torch.einsum("bl,lij->bij", gamma * W_mix.sum(0), M_l)


def _step7_operator(gamma, M_c, M_l, W_mix):
    """Step 7 of chapter 3 for one head: M(mu), the reshape of the cell above the exercise."""
    return M_c + torch.einsum("bl,lij->bij", gamma, M_l)


def _tdof(ops, centred=True, tol=True):
    flat = ops.flatten(1)
    s = torch.linalg.svdvals(flat[1:] - flat[:1] if centred else flat)
    return int((s > (1e-8 * s[0] if tol else 0)).sum())


def _image_points(image, threshold, flip=True, ge=True):
    r, c = np.nonzero(image >= threshold if ge else image > threshold)
    return np.stack([c - 3.5, 3.5 - r if flip else r - 3.5], 1)


def _p_advantage(observed, ties=True):
    outcomes = list(itertools.product(range(1, 8), repeat=len(observed)))
    s = sum(observed)
    return sum(sum(o) <= s if ties else sum(o) < s for o in outcomes) / len(outcomes)


CODING = {
    "ch10.image_points": (
        _image_points,
        [
            (lambda *a: _image_points(*a, flip=False), "upside down"),
            (lambda *a: _image_points(*a, ge=False), "> threshold"),
            (lambda image, t: _image_points(image, t)[::-1], "another order"),
        ],
    ),
    "ch10.null_test": (
        _p_advantage,
        [(lambda o: _p_advantage(o, ties=False), "ties count too")],
    ),
    "ch2.tdof_function": (
        _tdof,
        [
            (lambda ops: _tdof(ops, centred=False), "the operators themselves"),
            (lambda ops: _tdof(ops, tol=False), "round-off"),
        ],
    ),
    "ch1.half_widths": (
        _half_widths,
        [(lambda G: G.norm(dim=-2), "L2 norm"), (lambda G: G.sum(dim=-2), "signed sum")],
    ),
    "ch1.mz_product": (
        _mz_times_z,
        [
            (lambda *a: _mz_times_z(*a, cross=False), "h + L generators"),
            (lambda *a: _mz_times_z(*a, transpose=True), "transposed operator"),
        ],
    ),
    "ch3.minkowski_mean": (
        _minkowski_mean,
        [
            (_slot_wise_mean, "slot-wise average"),
            (lambda *a: _minkowski_mean(*a, scaled=False), "not scaled by alpha"),
        ],
    ),
    "ch3.readout_operator": (
        _readout_operator,
        [
            (_step7_operator, "M(mu) = M_c + sum_l gamma_l M_l of step 7"),
            (lambda *a: _readout_operator(*a).mT, "transposed operator"),
            (lambda g, M_c, M_l, W: _readout_operator(g, M_c, M_l, W.abs()), "|W_mix|"),
        ],
    ),
}


@pytest.mark.parametrize("key", sorted(CODING))
@pytest.mark.parametrize("seed", [0, 3])
def test_coding_exercise_right_wrong_and_placeholder(key, seed):
    right, mistakes = CODING[key]
    assert check(key, right, seed=seed).status == "correct"
    for wrong, name in mistakes:
        r = check(key, wrong, seed=seed)
        assert r.status == "wrong" and name in r.message, (name, r.message)

    def todo(*args): ...

    assert check(key, todo, seed=seed).status == "unanswered"
    broken = check(key, lambda *a: 1 / 0, seed=seed)
    assert broken.status == "wrong" and "ZeroDivisionError" in broken.message
    assert check(key, 3.0, seed=seed).status == "wrong"  # not a function


def test_ch3_coding_exercises_are_not_a_reshape_of_the_cell_above():
    """Issue 37: each of chapter 3's coding exercises follows a cell that computes something
    close (step 5's slot-wise average of generators, step 7's operator M(mu)); that cell's code,
    reshaped to the exercise's arguments, is graded wrong with its name, and the honest solution,
    which needs a step no cell of the chapter takes, passes on hidden seeds."""
    from mzlite.exercises.checker import get

    path = Path(__file__).resolve().parents[1] / "notebooks" / "03_mzattn_from_scratch.ipynb"
    code = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"]]
    above = {}
    for i, src in enumerate(code):
        for key in ("ch3.minkowski_mean", "ch3.readout_operator"):
            if f'check("{key}", ' in src and "strict=True" not in src:
                above[key] = next(
                    c for c in reversed(code[:i]) if c.lstrip().startswith(("c_hat", "M_mu"))
                )
    # the cells above compute what the reshapes below compute, for H heads
    assert 'torch.einsum("bhqj,bhjgk->bhqgk", alpha, v_G)' in above["ch3.minkowski_mean"]
    assert (
        'Wt["M_c"] + torch.einsum("bhl,hlij->bhij", gamma, Wt["M_l"])'
        in above["ch3.readout_operator"]
    )
    reshapes = {
        "ch3.minkowski_mean": (_slot_wise_mean, _minkowski_mean, "slot-wise average"),
        "ch3.readout_operator": (_step7_operator, _readout_operator, "of step 7"),
    }
    for key, (reshape, honest, name) in reshapes.items():
        assert get(key).kind == "coding"
        for seed in (0, 1_000_003, 271_828):  # the student's and two hidden trials' seeds
            wrong = check(key, reshape, seed=seed)
            assert wrong.status == "wrong" and name in wrong.message, wrong.message
            assert check(key, honest, seed=seed).status == "correct"


def test_ch3_minkowski_mean_compares_sets_not_generator_lists():
    """The Minkowski mean is a set: its generators in another order, with flipped signs or with
    zero generators added (a padded token's) are the same answer; a set that differs is not."""

    def shuffled(alpha, c, G):
        centres, gens = _minkowski_mean(alpha, c, G)
        zero = torch.zeros_like(gens[:, :, :1])
        return centres, torch.cat([-gens.flip(2), zero], dim=2)

    def one_generator_short(alpha, c, G):
        centres, gens = _minkowski_mean(alpha, c, G)
        return centres, gens[:, :, 1:]

    assert check("ch3.minkowski_mean", shuffled, seed=4).status == "correct"
    r = check("ch3.minkowski_mean", one_generator_short, seed=4)
    assert r.status == "wrong" and "differs" in r.message
    r = check("ch3.minkowski_mean", lambda alpha, c, G: (alpha @ c, G), seed=4)
    assert r.status == "wrong" and "generators must have shape" in r.message


def test_ch10_p_floor_and_image_points_input_checks():
    assert check("ch10.p_floor", (1 / 7) ** 4).status == "correct"
    assert check("ch10.p_floor", 1 / 7).status == "wrong"
    from mzlite.tasks import image_points

    with pytest.raises(ValueError, match=r"image must have shape \(8, 8\)"):
        image_points(np.zeros((8, 7)))
    with pytest.raises(ValueError, match="threshold"):
        image_points(np.zeros((8, 8)), threshold=0)
    top_right = np.zeros((8, 8))
    top_right[0, 7] = 16
    assert image_points(top_right).tolist() == [[3.5, 3.5]]


def test_a_check_leaves_the_notebooks_random_stream_alone():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    check(
        "ch3.readout_operator", _readout_operator
    )  # builds layers (their init draws random numbers)
    assert torch.equal(torch.rand(3), expected)


def test_every_exercise_depends_on_the_students_seed():
    """A value exercise draws its inputs from the seed; a coding exercise is graded on hidden
    trials drawn from it: no two students share an answer to copy."""
    from mzlite.exercises.checker import get, keys

    for n in range(1, 12):
        importlib.import_module(f"mzlite.exercises.ch{n}")
    shared = [k for k in keys("ch") if not get(k).per_seed]
    assert shared == []


def test_per_seed_inputs_differ_and_the_reference_follows_the_seed():
    for inputs in (ch6.exercise_inputs, ch8.exercise_inputs):
        a, b = inputs(0), inputs(1)
        assert any(not np.array_equal(a[k], b[k]) for k in a if k != "level")
    y, p = ch6.exercise_inputs(1)["y"], ch6.exercise_inputs(1)["pred"]
    r2_seed1 = 1 - ((y - p) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    assert check("ch6.r2", r2_seed1, seed=1).status == "correct"
    assert check("ch6.r2", r2_seed1, seed=0).status == "wrong"
    layer, c, G, mask = ch3.exercise_inputs(5)
    assert not torch.equal(c, ch3.exercise_inputs(0)[1])
    with torch.no_grad():
        gates = layer(c, c, G, mask, need_details=True)[2].gates
    assert check("ch3.gates", gates, seed=5) and not check("ch3.gates", gates, seed=0)


def test_the_check_log_records_every_result(tmp_path, monkeypatch):
    log = tmp_path / "checks.jsonl"
    monkeypatch.setenv("MZLITE_CHECK_LOG", str(log))
    check("test.double", 6)
    check("test.double", ...)
    lines = [json.loads(s) for s in log.read_text().splitlines()]
    assert [(r["key"], r["status"]) for r in lines] == [
        ("test.double", "correct"),
        ("test.double", "unanswered"),
    ]
    with pytest.raises(TypeError, match="seed must be an int"):
        check("test.double", 6, seed="0")


def test_inputs_match_between_notebook_and_checker():
    # The function the notebook offers (product_inputs) is the checker's first draw.
    from mzlite.exercises.ch1 import product_inputs

    M_c, M_l, c, G = product_inputs(4)
    ref = MatrixZonotope(M_c, M_l) @ Zonotope(c, G)
    assert ref.num_generators == G.shape[0] + M_l.shape[0] * (1 + G.shape[0])


# ---- value exercises: a usual slip, computed here the wrong way, is named (issue 25)
def _slip_ch1_generators(seed):
    from mzlite.exercises.ch1 import generator_sizes

    L, h = generator_sizes(seed)
    return h + L  # the cross terms forgotten


def _slip_ch1_area(seed):
    from mzlite.exercises.ch1 import exercise_zonotope

    G = exercise_zonotope(seed)[0].generators
    return float(4 * G.abs().sum(0).prod())  # the interval hull's area


def _slip_ch2_extrapolate(seed):
    from mzlite.exercises.ch2 import constant_set, exercise_layer

    layer, query = exercise_layer(seed)
    with torch.no_grad():
        o1, o2 = (layer(query, constant_set(t))[0].flatten() for t in (1.0, 2.0))
    return o1 + (-1.5) * (o2 - o1)  # the line anchored at o(S_1) with t, not t - 1


def _slip_ch3_gates(seed):
    layer, c, _, _ = ch3.exercise_inputs(seed)
    with torch.no_grad():
        return torch.tanh(layer.gate(c.mean(1))).view(1, layer.n_heads, layer.L)


def _slip_ch3_ihw(seed):
    layer, c, G, mask = ch3.exercise_inputs(seed)
    with torch.no_grad():
        _, o_G, _ = layer(c, c, G, mask)
    return float(o_G[0, 0].norm(dim=-1).sum())  # L2 norms


def _slip_ch6_mst(seed):
    from scipy.sparse.csgraph import minimum_spanning_tree
    from scipy.spatial.distance import pdist, squareform

    return float(
        minimum_spanning_tree(squareform(pdist(ch6.exercise_inputs(seed)["mst_points"])) ** 2).sum()
    )


def _slip_ch6_chamfer(seed):
    inp = ch6.exercise_inputs(seed)
    d2 = ((inp["A"][:, None] - inp["B"][None]) ** 2).sum(-1)
    return float(d2.min(1).mean())  # one direction


def _slip_ch6_r2(seed):
    inp = ch6.exercise_inputs(seed)
    return float(np.corrcoef(inp["y"], inp["pred"])[0, 1] ** 2)


def _slip_ch8_nll(seed):
    inp = ch8.exercise_inputs(seed)
    z = (inp["y"] - inp["mu"]) / inp["sigma"]
    return float((0.5 * z**2 + np.log(inp["sigma"])).mean())  # without 0.5 log(2 pi)


def _slip_ch8_spearman(seed):
    inp = ch8.exercise_inputs(seed)
    return float(np.corrcoef(inp["u"], np.abs(inp["y"] - inp["mu"]))[0, 1])  # Pearson


def _slip_ch3_extra_params(seed):
    s = ch3.layer_sizes(seed)
    d, H, n_g, L = s["d"], s["n_heads"], s["n_g"], s["L"]
    d_k = d // H
    # M_c and M_l, W_mix, the gate's weight but not its bias, W_vg and W_og
    return H * (1 + L) * d_k**2 + H * n_g * L + d * H * L + 2 * d * d


def _slip_ch5_radius(seed):
    from scipy.spatial.distance import pdist

    P = ch5.exercise_points(seed)
    D = pdist(P)
    a, b, c = sorted(D)
    if a * a + b * b <= c * c:  # obtuse or right: the longest side is a diameter
        radius = c / 2
    else:  # acute: the circumcircle
        (x1, y1), (x2, y2) = P[1] - P[0], P[2] - P[0]
        radius = a * b * c / (2 * abs(x1 * y2 - x2 * y1))
    return 2 * radius  # the diameter


def _floor_steps(seed):
    from mzlite.exercises.ch4 import steps_inputs

    n_train, batch = steps_inputs(seed)  # the exercise's inputs; the slip drops the last batch
    return n_train // batch


def _slip_ch4_layer_params(seed):
    from mzlite.exercises.ch4 import layer_inputs

    sizes = layer_inputs(seed)
    return count_parameters(build_model("st", 32, 1, device="cpu", n_enc=4, **sizes))  # whole


def _slip_ch5_sandwich(seed):
    P = ch5.sandwich_points(seed)
    dist = np.linalg.norm(P - P.mean(0), axis=1)
    return float(dist.mean()), float(dist.max())  # the mean distance, not the RMS


def _slip_ch5_constant(seed):
    P = ch5.sandwich_points(seed)
    dist = np.linalg.norm(P - P.mean(0), axis=1)
    return "rms_spread", float(dist.max())  # not divided by the RMS spread


def _slip_ch7_rankbound(seed):
    head = ch7.rankbound_inputs(seed)  # a bound, but the loosest one
    bounds = [head["L"], head["d_k"] ** 2] + ([head["n_sets"] - 1] if head["n_sets"] else [])
    assert max(bounds) > min(bounds)
    return max(bounds)


def _slip_ch9_smoke(seed):
    inputs, profile = ch9.smoke_inputs(seed)  # the profile ignored: judged as converged runs
    return ch9._verdict_of(inputs, "cpu-converged")


def _slip_ch9_not_run(seed):
    from mzlite.repro.exercises import not_run_table
    from mzlite.repro.experiments.scorecard import scorecard

    rows = scorecard().rows  # every table's rows, whatever the seed's table
    table = not_run_table(seed)
    return sum(r["verdict"] != "not run" for r in rows if table is None or r["table"] == table)


VALUE_SLIPS = {
    "ch1.generators": (_slip_ch1_generators, "cross terms"),
    "ch1.area": (_slip_ch1_area, "interval hull"),
    "ch1.inside": (lambda seed: True, "interval hull is not inside"),
    "ch2.extrapolate": (_slip_ch2_extrapolate, "o(S_1) + t"),
    "ch2.tdof": (lambda seed: ch2.tdof_dimension(seed) ** 2, "symmetric"),
    "ch3.gates": (_slip_ch3_gates, "unmasked mean"),
    "ch3.ihw": (_slip_ch3_ihw, "L1 norms"),
    "ch3.extra_params": (_slip_ch3_extra_params, "gate without its bias"),
    "ch4.steps": (_floor_steps, "floor"),
    "ch4.layer_params": (_slip_ch4_layer_params, "whole model"),
    "ch5.sandwich": (_slip_ch5_sandwich, "mean distance"),
    "ch5.constant": (_slip_ch5_constant, "divide by"),
    "ch7.rankbound": (_slip_ch7_rankbound, "is not the smallest"),
    "ch9.smoke": (_slip_ch9_smoke, "smoke run"),
    "ch9.not_run": (_slip_ch9_not_run, "HAVE a verdict"),
    "ch5.radius": (_slip_ch5_radius, "diameter"),
    "ch6.mst": (_slip_ch6_mst, "squared edge lengths"),
    "ch6.chamfer": (_slip_ch6_chamfer, "one direction only"),
    "ch6.r2": (_slip_ch6_r2, "squared correlation"),
    "ch8.nll": (_slip_ch8_nll, "0.5 log(2 pi)"),
    "ch8.spearman": (_slip_ch8_spearman, "Pearson"),
    "ch10.p_floor": (lambda seed: 1 / 7, "one cell's chance"),
    "ch11.noise_scale": (lambda seed: ch11.noise_factor(seed) ** 2, "the square"),
}


@pytest.mark.parametrize("key", sorted(VALUE_SLIPS))
@pytest.mark.parametrize("seed", [0, 5])
def test_a_planted_slip_in_a_value_exercise_is_named(key, seed):
    slip, phrase = VALUE_SLIPS[key]
    if key == "ch1.inside":
        seed = 7 if seed else 0  # seeds whose point is outside the zonotope, inside its hull
    if key == "ch9.smoke":
        seed = 1 if seed else 0  # seeds whose runs come from smoke
    r = check(key, slip(seed), seed=seed)
    assert r.status == "wrong" and phrase in r.message, r.message


def test_while_grading_check_records_the_answer_and_judges_nothing(tmp_path, monkeypatch):
    from mzlite.exercises.checker import CAPTURE_ENV
    from mzlite.exercises.wire import decode

    capture = tmp_path / "capture.jsonl"
    monkeypatch.setenv(CAPTURE_ENV, str(capture))
    r = check("test.double", 6)
    assert r.status == "recorded" and not r  # no verdict: a loop over answers learns nothing
    assert check("test.double", 5, strict=True).status == "recorded"  # strict does not raise
    check("ch1.half_widths", _half_widths, seed=3)
    check("test.double", object())
    lines = [json.loads(s) for s in capture.read_text().splitlines()]
    assert decode(lines[0]["answer"]) == 6 and decode(lines[1]["answer"]) == 5
    assert lines[2] == {"key": "ch1.half_widths", "seed": 3, "function": "_half_widths"}
    assert "cannot be graded" in lines[3]["unencodable"]


def test_ch9_verdict_is_the_scorecards_verdict_on_cells_of_a_registered_table():
    """The exercise's claim is a Claim like the scorecard's (its cells must exist): the
    scorecard's own verdict is right, any other is wrong, for every seed."""
    from mzlite.analysis.verdicts import Label
    from mzlite.exercises.checker import get
    from mzlite.repro.experiments import stats
    from mzlite.repro.experiments.claims import Kind
    from mzlite.repro.experiments.scorecard import VERDICTS, Claim

    cells = {"mz": "A-mz_full", "b0": "A-st", "b1": "A-st_large", "b2": "A-deepsets"}
    mz, rivals = cells["mz"], tuple(cells[b] for b in ch9.BASELINES)
    claim = Claim("exercise", "tab:main-results", Kind.BEATS, "MZAttn-Full beats the best "
                  "baseline", (mz, *rivals))  # fmt: skip
    checker = get("ch9.verdict").checker
    seen = set()
    for seed in range(12):
        inputs = ch9.claim_inputs(seed)
        mean = {cells[k]: sum(v) / len(v) for k, v in inputs.items()}
        p_max = max(stats.welch(inputs["mz"], inputs[b])["p"] for b in ch9.BASELINES)
        for profile in ("cpu-converged", "smoke"):
            better = [cells[b] for b in ch9.BASELINES  # more than a tie above MZ, significantly
                      if mean[cells[b]] - mean[cells["mz"]] > ch9.TIE
                      and stats.welch(inputs[b], inputs["mz"])["p"] < stats.ALPHA]  # fmt: skip
            ref = (Label.PIPELINE_ONLY if profile == "smoke"  # the engine's label of a smoke run
                   else claim.label(claim.expr(mean.__getitem__), True, p_max, better))  # fmt: skip
            assert ch9._verdict_of(inputs, profile) == ref, (seed, profile)
            seen.add(ref)
        ref = ch9._verdict_of(inputs, "cpu-converged")
        assert checker(ref, seed)[0]
        assert not any(checker(v, seed)[0] for v in VERDICTS if v != ref)
    assert {"pipeline only", "holds partly", "not decided"} <= seen  # not one verdict


def test_ch9_inputs_keep_clear_of_every_threshold_so_rounding_never_flips_the_verdict():
    """Ties and boundary cases are excluded by construction: moving every input by 1e-6 (a
    student's float32, another summation order) leaves both exercises' verdicts unchanged. The
    listed seeds drew a boundary case before the draw excluded them."""
    for seed in [*range(200), 740, 1074, 1217, 1230, 1625]:
        inputs = ch9.claim_inputs(seed)
        smoke, profile = ch9.smoke_inputs(seed)
        for col, prof in ((inputs, "cpu-annealed"), (smoke, profile)):
            ref = ch9._verdict_of(col, prof)
            for delta in (1e-6, -1e-6):
                nudged = {
                    k: [x + delta * (1 if k == "mz" else -1) for x in v] for k, v in col.items()
                }
                assert ch9._verdict_of(nudged, prof) == ref, (seed, prof)


def _rebinds_seed(tree) -> list[int]:
    """Lines of top-level statements that bind ``seed`` in the notebook's namespace (a loop
    variable, an assignment, a ``with ... as``, an import, a walrus): function, class and lambda
    bodies and comprehensions have scopes of their own and are skipped (a walrus in a
    comprehension is not: it binds in the enclosing scope)."""
    import ast

    lines = []

    def binds(node) -> bool:
        if isinstance(node, ast.Name):
            return node.id == "seed" and isinstance(node.ctx, (ast.Store, ast.Del))
        if isinstance(node, ast.alias):
            return (node.asname or node.name.split(".")[0]) == "seed"
        if isinstance(node, ast.ExceptHandler):
            return node.name == "seed"
        if isinstance(node, ast.NamedExpr):
            return node.target.id == "seed"
        return False

    def visit(node, in_comprehension=False) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return
        comp = in_comprehension or isinstance(
            node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
        )
        if binds(node) and (not comp or isinstance(node, ast.NamedExpr)):
            lines.append(node.lineno if hasattr(node, "lineno") else 0)
        for child in ast.iter_child_nodes(node):
            visit(child, comp)

    visit(tree)
    return lines


def test_no_top_level_statement_of_a_chapter_rebinds_seed():
    """Every exercise reads the notebook's ``seed``, the parameters cell's: a loop ``for seed in
    ...`` at the top level left it at its last value, so the home check used another seed than
    the grader (chapter 10's "6 complete settings" for every student)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "notebooks"
    offenders = []
    for path in sorted(root.glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        for i, cell in enumerate(cells):
            tags = cell.get("metadata", {}).get("tags", [])
            if cell["cell_type"] != "code" or "parameters" in tags:
                continue
            src = "".join(cell["source"])
            # IPython magics and shell lines are not Python
            src = "\n".join("" if s.lstrip()[:1] in "%!" else s for s in src.splitlines())
            offenders += [f"{path.name} cell {i} line {n}" for n in _rebinds_seed(ast.parse(src))]
    assert not offenders, f"top-level statements rebind `seed`: {offenders}"
    # the test can fail: each of these rebinds it, none of these does
    for bad in [
        "for seed, r2 in x.items():\n    pass",
        "seed = 3",
        "with f() as seed:\n    1",
        "import seed",
        "[(seed := 2) for _ in x]",
        "del seed",
        "if x:\n    seed += 1",
    ]:
        assert _rebinds_seed(ast.parse(bad)), bad
    for fine in [
        "def f(seed):\n    seed = 2",
        "[seed for seed in x]",
        "g = lambda seed: seed",
        "print(seed)",
        "class A:\n    seed = 1",
    ]:
        assert not _rebinds_seed(ast.parse(fine)), fine


def test_ch1_inside_has_no_boundary_point_and_no_free_answer():
    """The point of ch1.inside is never within MIN_MARGIN of the zonotope's boundary (where the
    verdict would hang on a tolerance), and the interval-hull slip ("inside": the point is
    always inside the hull) is right on about half of the seeds, as a coin would be."""
    from mzlite.exercises.ch1 import MIN_MARGIN, boundary_margin, exercise_zonotope

    inside = 0
    for seed in range(1, 401):
        z, p = exercise_zonotope(seed)
        G, point = z.generators.numpy(), p.numpy()
        margin = boundary_margin(G, point)
        assert abs(margin) >= MIN_MARGIN, (seed, margin)
        assert bool(z.contains(p)) == (margin > 0), seed
        assert (np.abs(point) <= np.abs(G).sum(0)).all(), seed  # inside the interval hull
        inside += margin > 0
    assert 0.4 < inside / 400 < 0.6, inside
    # the margin is a distance: a point on a side has margin 0, one beyond it a negative one
    square = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    assert boundary_margin(square, np.array([2.0, 0.0])) == pytest.approx(0.0)
    assert boundary_margin(square, np.array([1.5, -1.0])) == pytest.approx(-0.5 / np.sqrt(2))
