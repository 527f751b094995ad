"""Interval medians and load scaling (Foo et al. 2015 phase 1; Nguyen 2017 §5.2)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipelines import load_scaling
from pipelines.preparation import intervals


def test_interval_medians_absorb_skew_and_sampling_periods():
    start = 1000.0
    # web samples every 5 s, a little skewed; db every 15 s; both before/after the 60 s phase too
    web = pd.DataFrame({"ts": start + np.array([-5, 1.5, 6.5, 11.5, 16.5, 21.5, 26.5, 31.5, 36.5, 41.5, 46.5,
                                                51.5, 56.5, 65]),
                        "web.cpu_pct": [99, 10, 30, 20, 40, 50, 60, 1, 2, 3, 7, 8, 9, 99]})
    db = pd.DataFrame({"ts": start + np.array([0.0, 15, 30, 45, 60, 75]), "db.tx": [5.0, 6, 7, 8, 9, 100]})
    out = intervals.interval_medians({"web01": web, "db01": db}, start=start, duration_s=60, interval_s=30)
    # interval 0 = [0, 30): web 10,30,20,40,50,60 -> median 35; db 5,6 -> 5.5
    # interval 1 = [30, 60]: web 1,2,3,7,8,9 -> 5; db 7,8,9 (60 is the end of the phase) -> 8
    assert list(out.index) == [0, 1]
    assert out.loc[0, "web.cpu_pct"] == 35 and out.loc[1, "web.cpu_pct"] == 5
    assert out.loc[0, "db.tx"] == 5.5 and out.loc[1, "db.tx"] == 8


def test_empty_interval_is_nan_not_dropped():
    f = pd.DataFrame({"ts": [1.0, 2.0, 95.0], "h.x": [1.0, 3.0, 5.0]})
    out = intervals.interval_medians({"h": f}, start=0, duration_s=120, interval_s=30)
    assert len(out) == 4
    assert out["h.x"].tolist()[:1] == [2.0] and np.isnan(out.loc[1, "h.x"]) and out.loc[3, "h.x"] == 5.0


@pytest.mark.parametrize("periods,interval,expected", [([5, 10], 30, 30), ([5, 45], 30, 60), ([60], 30, 60),
                                                       ([], 30, 30), ([31], 10, 40)])
def test_interval_adapts_to_the_slowest_host(periods, interval, expected):
    assert intervals.choose_interval(periods, interval, duration_s=3600, min_intervals=10) == expected


@pytest.mark.parametrize("periods,duration,expected", [
    ([1.0], 60, 6.0),      # a 1-minute run sampled every second: 10 intervals of 6 s, not 2 of 30 s
    ([60.0], 600, 60.0),   # a 10-minute run sampled once a minute: 10 intervals of 60 s
    ([2.5], 60, 6.0),      # sampled every 2.5 s: 6 s intervals hold two or three samples each
    ([8.0], 60, 12.0),     # sampled every 8 s: 6 s enlarged to its next multiple above 8 (5 intervals)
    ([90.0], 600, 90.0),   # sampled too slowly for 10 intervals: the resolution it has (7 intervals of 90 s)
])
def test_short_runs_keep_at_least_min_intervals_where_the_sampling_allows(periods, duration, expected):
    assert intervals.choose_interval(periods, 30, duration_s=duration, min_intervals=10) == expected


def test_load_scaling_on_a_known_linear_relation():
    load = np.array([40.0, 45, 50, 55, 60, 48, 52, 44, 56, 50, 47, 53])
    frame = pd.DataFrame({"app.load": load, "x.cpu": 2 * load + 10, "x.flat": 7.0 + 0 * load,
                          "x.noise": np.array([3, 9, 1, 7, 2, 8, 4, 6, 5, 3, 9, 1.0])})
    fits = intervals.fit_load(frame, "app.load", min_correlation=0.6)
    assert set(fits) == {"x.cpu"}                                    # flat and uncorrelated are not fitted
    assert fits["x.cpu"] == pytest.approx([2.0, 10.0])
    scaled = load_scaling.scale_to_load(frame, "app.load", fits, reference_load=50.0)
    # c' = c (a L + b) / (a l + b) = (2l+10)(110)/(2l+10) = 110 at every interval
    np.testing.assert_allclose(scaled["x.cpu"], 110.0)
    assert scaled["app.load"].equals(frame["app.load"])               # the load counter is never scaled
    assert scaled["x.noise"].equals(frame["x.noise"])


def test_load_scaling_keeps_a_regression_visible():
    load = np.linspace(40, 60, 12)
    base = pd.DataFrame({"app.load": load, "x.cpu": 2 * load + 10})
    hot = pd.DataFrame({"app.load": load, "x.cpu": 3 * load + 10})    # 50 % more CPU per request
    ref = 50.0
    s_base = load_scaling.scale_to_load(base, "app.load", intervals.fit_load(base, "app.load", min_correlation=0.6), ref)
    s_hot = load_scaling.scale_to_load(hot, "app.load", intervals.fit_load(hot, "app.load", min_correlation=0.6), ref)
    assert s_base["x.cpu"].median() == pytest.approx(110) and s_hot["x.cpu"].median() == pytest.approx(160)


def test_a_process_registers_its_budgeted_childs_exit_once_however_many_batches_it_runs():
    """A long-lived worker (Celery's) runs batch after batch: each batch's child is closed at its end
    and the next one started, but the close at the process' exit is registered once, not per batch."""
    import multiprocessing.util

    from pipelines.preparation import normalized_runs as normalize
    params = normalize.NormalizeParams.of({"interval_s": 30, "min_intervals": 5, "load_scaling": True,
                                           "min_load_correlation": 0.6, "max_memory_mb": 256, "max_seconds": 30})
    registered = len(multiprocessing.util._finalizer_registry)
    for _ in range(3):
        worker = normalize.process_worker(params)
        assert normalize.process_worker(params) is worker          # one child per process while open
        normalize.close_workers()
    assert len(multiprocessing.util._finalizer_registry) - registered <= 1
