"""The run against itself: a window's change against the rest of the run, its limit, its p-value."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipelines.stats import pvalues
from pipelines.detectors.within_run import windows as within_run

KW = {"window_share": 0.2, "min_window": 3}
FLOOR = 0.5


def change(contrast, peak=None):
    return within_run.change_of(contrast, peak, floor_share=FLOOR)


def test_a_window_that_rose_is_measured_against_the_rest_of_the_run_by_hand():
    # 10 intervals: the window is max(3, ceil(0.2 * 10)) = 3 intervals; intervals 4-6 (0-based 3..5) at 20
    x = [10, 10, 11, 20, 20, 20, 10, 9, 10, 10]
    c = within_run.window_contrasts(pd.DataFrame({"app.latency_ms": x}), **KW)["app.latency_ms"]
    # rest: 10 10 11 10 9 10 10 -> median 10; window median 20; change (20 - 10) / max(10, 0.5 * p95(rest))
    rest = np.array([10, 10, 11, 10, 9, 10, 10], dtype=float)
    scale = max(10.0, 0.5 * float(np.quantile(rest, 0.95)))
    assert (c.start, c.width, c.window_median, c.rest_median) == (3, 3, 20.0, 10.0)
    assert change(c) == pytest.approx((20 - 10) / scale) and change(c) == pytest.approx(1.0)


def test_a_shift_of_the_whole_run_is_no_change_within_it():
    """Another lab moves every interval alike: the run against itself sees nothing."""
    base = np.array([10, 10, 11, 10, 9, 10, 10, 11, 10, 10], dtype=float)
    here = change(within_run.window_contrasts(pd.DataFrame({"c": base}), **KW)["c"])
    moved = change(within_run.window_contrasts(pd.DataFrame({"c": base * 3 + 50}), **KW)["c"])
    assert abs(here) <= 0.1 and abs(moved) <= abs(here)


def test_a_counter_idling_at_zero_is_measured_against_half_its_usual_peak():
    # rest: 0 0 0 0 4 0 0 (median 0, p95 of |rest| = 2.8 by linear interpolation); window median 2
    x = [0, 0, 0, 2, 2, 2, 0, 4, 0, 0]
    c = within_run.window_contrasts(pd.DataFrame({"q.queue_length": x}), **KW)["q.queue_length"]
    p95 = float(np.quantile([0, 0, 0, 0, 4, 0, 0], 0.95))
    assert p95 == pytest.approx(2.8) and c.rest_peak == pytest.approx(p95)
    assert change(c) == pytest.approx(2 / (0.5 * p95))
    assert change(c, peak=10.0) == pytest.approx(2 / (0.5 * p95))      # its own peak: the normal runs' is not needed


def test_a_counter_that_left_exactly_zero_is_measured_against_its_usual_peak_else_capped():
    x = [0, 0, 0, 5, 5, 5, 0, 0, 0, 0]
    c = within_run.window_contrasts(pd.DataFrame({"e.errors_per_s": x}), **KW)["e.errors_per_s"]
    assert change(c) == within_run.CHANGE_CAP                # never seen away from 0: large, not infinite
    assert change(c, peak=0.2) == pytest.approx(5 / (0.5 * 0.2))     # normal runs tick to 0.2 at their peak


def test_too_short_a_run_or_too_few_values_has_no_contrast():
    assert within_run.window_contrasts(pd.DataFrame({"c": [1.0, 2, 3, 4, 5]}), **KW) == {}      # 5 < 3 + 3
    gaps = pd.DataFrame({"c": [1.0, np.nan, np.nan, 9, 9, 9, np.nan, np.nan, np.nan, np.nan]})
    assert within_run.window_contrasts(gaps, **KW) == {}          # one value outside the window


def test_limits_are_the_largest_normal_change_without_the_run_left_out():
    changes = {"n1": {"a": 0.10, "b": -0.30}, "n2": {"a": -0.20}, "n3": {"a": 0.05, "b": 0.10}}
    limits = within_run.counter_limits(changes)
    assert limits == {"a": [0.20, "n2", 0.10], "b": [0.30, "n1", 0.10]}
    assert within_run.limits_without(limits, "n2") == {"a": 0.10, "b": 0.30}
    assert within_run.limits_without(limits, None) == {"a": 0.20, "b": 0.30}


def test_the_run_score_is_the_largest_change_over_its_limit_among_changes_that_matter():
    limits = {"a": 0.20, "b": 0.02}
    # a: 0.50 / 0.20 = 2.5; b: 0.04 is under min_effect 0.05 (does not matter); c: no limit -> 0.06 / 0.05 = 1.2
    assert within_run.counter_ratios({"a": 0.50, "b": 0.04, "c": -0.06}, limits, min_effect=0.05) == \
        pytest.approx({"a": 2.5, "c": 1.2})
    assert within_run.largest_ratio({"a": 0.50, "b": 0.04, "c": -0.06}, limits, min_effect=0.05) == pytest.approx(2.5)
    assert within_run.largest_ratio({"b": 0.04}, limits, min_effect=0.05) == 0.0


def contrast(window, rest=10.0, peak=11.0):
    return within_run.Contrast(start=3, width=3, window_median=window, rest_median=rest, rest_peak=peak)


def test_calibration_scores_each_normal_run_against_the_others_and_judge_computes_the_p_value():
    # rest 10, windows 11, 12, 10.8: changes +10 %, +20 %, +8 % (the level 10 is above half the peaks)
    normal = {"n1": {"a": contrast(11.0)}, "n2": {"a": contrast(12.0, peak=13.0)}, "n3": {"a": contrast(10.8)}}
    cal = within_run.calibrate(normal, min_effect=0.05, floor_share=FLOOR)
    assert cal["peaks"] == {"a": 13.0}                                       # the largest of 11, 13, 11
    assert cal["limits"]["a"] == [pytest.approx(0.20), "n2", pytest.approx(0.10)]
    # n1: 0.10 / 0.20 = 0.5; n2 (the largest): 0.20 / 0.10 = 2.0; n3: 0.08 / 0.20 = 0.4
    assert cal["normal_scores"] == pytest.approx({"n1": 0.5, "n2": 2.0, "n3": 0.4})
    target = {"a": contrast(20.0)}                                           # +100 %
    out = within_run.judge(target, cal, false_alarm_rate=0.05)
    assert out["score"] == pytest.approx(5.0)                  # 1.0 / 0.20
    assert out["p_value"] == pytest.approx(pvalues.calibrated_pvalue(5.0, [0.5, 2.0, 0.4],
                                                                      resolution=within_run.RESOLUTION), abs=1e-6)
    assert out["counters_beyond_limit"] == ["a"] and out["changes"]["a"]["window"] == [3, 5]
    assert out["counter_scores"]["a"] == pytest.approx(5.0 / 6.0, abs=1e-4)
    assert (out["verdict"] == "fail") == (out["p_value"] <= 0.05)
    # judged as one of the normal runs, n2 is measured against n1 and n3 only
    left_out = within_run.judge(target, cal, false_alarm_rate=0.05, leave_out="n2")
    assert left_out["score"] == pytest.approx(10.0) and left_out["normal_runs"] == 2


def test_judge_abstains_without_a_null_or_a_contrast():
    one = within_run.calibrate({"n1": {"a": contrast(11.0)}}, min_effect=0.05, floor_share=FLOOR)
    assert within_run.judge({}, one, false_alarm_rate=0.05)["verdict"] is None
    two = within_run.calibrate({"n1": {"a": contrast(11.0)}, "n2": {"a": contrast(11.0)}}, min_effect=0.05,
                               floor_share=FLOOR)
    out = within_run.judge({}, two, false_alarm_rate=0.05)
    assert out["verdict"] is None and "too short" in out["reason"]


def test_a_fault_inside_the_run_stands_out_from_normal_runs_in_another_lab():
    """24 normal runs of one lab (a new positive score among 24 zeros: p = 1/25); a normal run and a
    faulty run of a lab at twice the level: only the
    fault's window is beyond the normal runs' limits."""
    rng = np.random.default_rng(3)
    normal = {f"n{i}": within_run.window_contrasts(pd.DataFrame({"cpu_pct": 40 + rng.normal(0, 1, 20)}), **KW)
              for i in range(24)}
    cal = within_run.calibrate(normal, min_effect=0.05, floor_share=FLOOR)
    other_lab = 80 + rng.normal(0, 2, 20)
    fault = other_lab.copy()
    fault[8:12] += 60
    quiet = within_run.judge(within_run.window_contrasts(pd.DataFrame({"cpu_pct": other_lab}), **KW), cal,
                             false_alarm_rate=0.05)
    loud = within_run.judge(within_run.window_contrasts(pd.DataFrame({"cpu_pct": fault}), **KW), cal,
                            false_alarm_rate=0.05)
    assert quiet["verdict"] == "pass" and loud["verdict"] == "fail"
    assert loud["changes"]["cpu_pct"]["change_pct"] > 50 and math.isfinite(loud["p_value"])


def test_a_wild_latency_that_moves_between_services_is_within_its_metrics_limit():
    """Each normal run has one service whose latency doubles (+100 %), never the same one twice;
    a target where a third service's does is unusual for that counter, not for the system."""
    quiet = contrast(10.2)                                   # +2 %: below the 5 % that matters
    normal = {"n1": {"a.lat": contrast(20.0), "b.lat": quiet, "c.lat": quiet},
              "n2": {"a.lat": quiet, "b.lat": contrast(20.0), "c.lat": quiet},
              "n3": {"a.lat": contrast(10.6), "b.lat": quiet, "c.lat": contrast(10.6)}}   # +6 % in two
    cal = within_run.calibrate(normal, min_effect=0.05, floor_share=FLOOR)
    # metric limits: n1 and n2 each hold 1.0 for "lat", n3 0.06 -> largest 1.0 (n1), second 1.0
    assert cal["metric_limits"]["lat"] == [pytest.approx(1.0), "n1", pytest.approx(1.0)]
    # c.lat's own limit is n3's 6 %: +100 % there is 16.7 times it; the metric's limit is 100 %
    target = {"a.lat": quiet, "b.lat": quiet, "c.lat": contrast(20.0)}
    own = within_run.judge(target, cal, false_alarm_rate=0.05)
    assert own["limits_by"] == "counter" and own["score"] == pytest.approx(1.0 / 0.06, abs=1e-3)
    # the normal runs under their own limits, each without its own: n1's a.lat 1.0 / 0.06 (n3's),
    # n2's b.lat 1.0 / 0.05 (its limit 2 %, below the 5 % that matters), n3's c.lat 0.06 / 0.05
    assert cal["scores"]["counter"] == pytest.approx({"n1": 1.0 / 0.06, "n2": 20.0, "n3": 1.2}, abs=1e-6)
    assert own["counters_beyond_limit"] == ["c.lat"]
    pooled = within_run.judge(target, {**cal, "limits_by": "metric"}, false_alarm_rate=0.05)
    assert pooled["score"] == pytest.approx(1.0) and pooled["counters_beyond_limit"] == []
    # under each limits, the p-value against that limits' own null (the normal runs' scores)
    for by in within_run.LIMITS_BY:
        expected = pvalues.calibrated_pvalue(1.0 / 0.06 if by == "counter" else 1.0, list(cal["scores"][by].values()),
                                             resolution=within_run.RESOLUTION)
        assert own["limits_p_values"][by] == pytest.approx(expected, abs=1e-6)
    # the normal runs under the metric's limits, each without its own: n1 1.0 / 1.0 (n2's), n2 the
    # same, n3 0.06 / 1.0 = 0.06
    assert cal["scores"]["metric"] == pytest.approx({"n1": 1.0, "n2": 1.0, "n3": 0.06})


def record_calibration(forward_metric_failed=()):
    """Ten normal runs scoring alike (none fails) under both limits, a forward record of five."""
    scores = {f"n{i}": 1.0 for i in range(10)}
    forward = {"counter": {f"n{i}": False for i in range(5, 10)},
               "metric": {f"n{i}": f"n{i}" in forward_metric_failed for i in range(5, 10)}}
    normal = within_run.normal_pvalues(scores)
    return {"scores": {"counter": scores, "metric": scores}, "normal_pvalues_by": {"counter": normal, "metric": normal},
            "forward": forward, "limits_by": "counter", "normal_scores": scores, "normal_pvalues": normal}


def test_the_metrics_limits_are_taken_where_the_record_shows_them_better_and_holding_forward():
    faults = {"counter": {"f1": 0.20, "f2": 0.01, "f3": 0.30}, "metric": {"f1": 0.01, "f2": 0.01, "f3": 0.30}}
    chosen = within_run.choose_limits(record_calibration(), faults, false_alarm_rate=0.05)
    assert chosen["limits_by"] == "metric" and chosen["fault_pvalues"] == faults["metric"]
    assert chosen["limits_record"]["metric"]["faults_caught"] == 2 and chosen["limits_record"]["counter"]["faults_caught"] == 1
    # one more normal run failed forward in time under the metric's limits: the counter's own
    drifting = within_run.choose_limits(record_calibration(("n7",)), faults, false_alarm_rate=0.05)
    assert drifting["limits_by"] == "counter" and drifting["fault_pvalues"] == faults["counter"]
    assert drifting["limits_record"]["metric"]["forward_failed"] == 1
    # no forward record at all (calibrated without a rate): the counter's own
    assert within_run.choose_limits({**record_calibration(), "forward": {}}, faults,
                                    false_alarm_rate=0.05)["limits_by"] == "counter"
    # judged in leave-one-out, f1's own catch does not count: one each, the counter's own
    assert within_run.choose_limits(record_calibration(), faults, false_alarm_rate=0.05,
                                    leave_out="f1")["limits_by"] == "counter"


def test_forward_failures_judge_each_run_by_the_runs_before_it():
    """The vectorised forward record against its definition: each run from the fifth on, scored by
    the limits of the runs before it, against their scores each without its own."""
    rng = np.random.default_rng(7)
    runs = [f"r{i}" for i in range(9)]
    names = ["a.lat", "b.lat", "c.lat", "a.cpu", "b.cpu"]
    changes = {r: {c: float(v) for c, v in zip(names, rng.normal(0, 0.1, len(names)))} for r in runs}
    changes["r7"]["b.lat"] = 1.5                                     # one wild latency, late: +150 %
    for by in within_run.LIMITS_BY:
        got = within_run.forward_failures(changes, runs, by, min_effect=0.05, false_alarm_rate=0.05)
        expected = {}
        for i in range(within_run.FORWARD_MIN, len(runs)):
            before = {r: changes[r] for r in runs[:i]}
            cal = {"limits": within_run.counter_limits(before),
                   "metric_limits": within_run.counter_limits(within_run.metric_maxima(before))}
            null = [within_run.largest_ratio(before[q], within_run.run_limits(cal, before[q], q, by), min_effect=0.05)
                    for q in before]
            score = within_run.largest_ratio(changes[runs[i]], within_run.run_limits(cal, changes[runs[i]], None, by),
                                             min_effect=0.05)
            expected[runs[i]] = pvalues.calibrated_pvalue(score, null, resolution=within_run.RESOLUTION) <= 0.05
        assert got == expected and list(got) == runs[within_run.FORWARD_MIN:]
        assert expected["r7"] and sum(expected.values()) == 1      # the late wild run, and it alone
