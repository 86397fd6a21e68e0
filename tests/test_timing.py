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


def test_median_time_warms_up_then_takes_the_median(monkeypatch):
    # a fake clock that each call of fn advances by its duration: no sleeping, no load sensitivity
    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])
    durations = iter([5.0, 0.03, 0.001, 0.02])  # the warm-up call, then three timed calls

    def fn():
        now[0] += next(durations)

    assert median_time(fn, repeats=3, warmup=1) == pytest.approx(0.02)  # middle of the three
    with pytest.raises(StopIteration):  # fn was called exactly 1 + 3 times
        fn()
    with pytest.raises(ValueError, match="repeats must be an int >= 1"):
        median_time(fn, repeats=0)
    with pytest.raises(ValueError, match="warmup must be an int >= 0"):
        median_time(fn, warmup=-1)
