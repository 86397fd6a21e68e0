"""mzlite.timing: what is timed, how often, and argument checks (no speed is asserted, only that
more work takes longer); FLOPs against models whose work is known."""

import time

import pytest
import torch
from torch import nn

from mzlite import timing
from mzlite.timing import median_time, synchronize, time_call


def test_time_call_times_one_call():
    calls = []
    t = time_call(lambda: (calls.append(1), time.sleep(0.02)), "cpu")
    assert calls == [1] and t >= 0.02
    synchronize("cpu")  # nothing to wait for on a CPU
    with pytest.raises(TypeError, match="fn must be callable"):
        time_call(3)


def test_median_time_is_the_median_per_call_of_the_benchmark_timer(monkeypatch):
    # a fake clock that each call of fn advances: no sleeping, no load sensitivity
    now, threads = [0.0], []
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])

    def fn():
        threads.append(torch.get_num_threads())
        now[0] += 0.003 if len(threads) % 2 else 0.001  # two speeds: the median is per call

    assert median_time(fn, min_run_time=0.5) == pytest.approx(0.002)
    assert len(threads) >= 0.5 / 0.003  # it kept calling for min_run_time
    assert set(threads) == {torch.get_num_threads()}  # not the Timer's default of one thread
    with pytest.raises(ValueError, match="min_run_time must be > 0"):
        median_time(fn, min_run_time=0)
    with pytest.raises(TypeError, match="min_run_time must be a number"):
        median_time(fn, min_run_time="1s")
    with pytest.raises(TypeError, match="fn must be callable"):
        median_time(3)


class _SetLinear(nn.Module):
    """Maps every element of a set by one linear layer (no bias) and sums: 2 d_in d_out
    FLOPs per element."""

    def __init__(self, d_in, d_out, repeat=1):
        super().__init__()
        self.lin = nn.Linear(d_in, d_out, bias=False)
        self.repeat = repeat

    def forward(self, x, mask):
        h = x
        for _ in range(self.repeat):
            h = self.lin(h)
        return (h * mask[..., None]).sum(1)


def _batch(b=4, n=6, d=8):
    g = torch.Generator().manual_seed(0)
    return torch.randn(b, n, d, generator=g), torch.ones(b, n, dtype=torch.bool), torch.randn(b, d)


def test_forward_flops_count_a_linear_map_per_element():
    x, mask, _ = _batch()
    assert timing.forward_flops(_SetLinear(8, 8), x, mask) == 2 * 4 * 6 * 8 * 8
    assert timing.forward_flops(_SetLinear(8, 8, repeat=3), x, mask) == 3 * 2 * 4 * 6 * 8 * 8


def test_step_costs_time_every_model_and_phase_and_see_more_work():
    x, mask, y = _batch(b=64, n=30, d=128)
    torch.manual_seed(0)
    models = {"light": _SetLinear(128, 128), "heavy": _SetLinear(128, 128, repeat=40)}
    costs = timing.step_costs(models, x, mask, y, rounds=1, min_run_time=0.02)
    assert set(costs) == {"light", "heavy"}  # no bf16 rows on a CPU unless asked
    for phases in costs.values():
        assert set(phases) == set(timing.PHASES) and all(v > 0 for v in phases.values())
    assert costs["heavy"]["forward"] > costs["light"]["forward"]
    assert costs["heavy"]["train step"] > costs["light"]["train step"]
    bf16 = timing.step_costs({"light": models["light"]}, x, mask, y, rounds=1, min_run_time=0.01,
                         bf16=True)  # fmt: skip
    assert set(bf16) == {"light", "light (bf16)"}
    with pytest.raises(ValueError, match="models must be a non-empty dict"):
        timing.step_costs({}, x, mask, y)
    with pytest.raises(ValueError, match="rounds must be an int >= 1"):
        timing.step_costs(models, x, mask, y, rounds=0)


def test_a_train_step_call_moves_the_weights_by_the_optimiser():
    x, mask, y = _batch()
    model = _SetLinear(8, 8)
    before = model.lin.weight.detach().clone()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    timing.train_step_call(model, opt, x, mask, y)()
    assert model.training and not torch.equal(before, model.lin.weight)
    out = timing.forward_call(model, x, mask)()
    assert not model.training and not out.requires_grad
