"""mzlite.timing: what is timed, how often, and argument checks (no speed is asserted)."""

import time

import pytest

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
    import torch

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
