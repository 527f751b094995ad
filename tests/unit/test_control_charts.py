"""Control limits, violation ratios, multimodal filter, load scaling, run score (Nguyen 2017, seed 004)."""
from __future__ import annotations

import math
import statistics

import numpy as np
import pandas as pd
import pytest

from pipelines.stats import pvalues
from pipelines.detectors.charts import calibration as chart_calibration
from pipelines.detectors.charts import modes as chart_modes
from pipelines.detectors.charts import control_charts as charts
from pipelines import load_scaling

# The thesis' settings (Nguyen 2017 §3.2.1, §5.3), spelled out: the cores take no defaults.
LIMITS = {"method": "percentile", "lower_pct": 1.0, "upper_pct": 99.0, "sigma": 3.0, "scope": "run"}
CHART = {**LIMITS, "multimodal_filter": True, "max_dip": 0.5, "min_mode_share": 0.02, "window_share": 0.2}
MODES = {"max_dip": 0.5, "min_share": 0.02}


def _table_3_3_runs():
    """A baseline of 0..100 (1st/99th percentiles 1 and 99) and a 47-point target per counter shaped
    so that the violation ratios are those of Nguyen 2017 Table 3.3."""
    base = pd.DataFrame({c: np.arange(101, dtype=float) for c in ("CPU", "NetRx", "NetTx", "NotHeap", "Heap")})
    target = pd.DataFrame({
        "CPU": [150.0] * 45 + [50.0] * 2,        # 45/47 above the UCL
        "NetRx": [-5.0] * 7 + [50.0] * 40,       # 7/47 below the LCL
        "NetTx": [200.0] * 47,                   # all above
        "NotHeap": [-10.0] * 47,                 # all below
        "Heap": [50.0] * 47,                     # all inside
    })
    return base, target


def test_limits_are_the_baseline_percentiles_and_median():
    base, _ = _table_3_3_runs()
    limits = charts.control_limits([base], **LIMITS)
    assert limits.lcl.iloc[0]["CPU"] == pytest.approx(1.0)
    assert limits.ucl.iloc[0]["CPU"] == pytest.approx(99.0)
    assert limits.cl.iloc[0]["CPU"] == pytest.approx(50.0)


def test_violation_ratios_reproduce_table_3_3():
    base, target = _table_3_3_runs()
    ratios = charts.violation_ratios(target, charts.control_limits([base], **LIMITS))
    expected = {  # Table 3.3, in percent: lower, upper, average, sum
        "CPU": (0.00, 95.74, 47.87, 95.74),
        "NetRx": (14.89, 0.00, 7.45, 14.89),
        "NetTx": (0.00, 100.00, 50.00, 100.00),
        "NotHeap": (100.00, 0.00, 50.00, 100.00),
        "Heap": (0.00, 0.00, 0.00, 0.00),
    }
    for counter, values in expected.items():
        got = ratios.loc[counter, ["lower", "upper", "average", "sum"]].to_numpy() * 100
        assert got == pytest.approx(values, abs=0.01), counter


def test_sigma_limits_by_hand():
    base = pd.DataFrame({"x": [1.0, 2, 3, 4, 5]})            # mean 3, sd 1.5811
    limits = charts.control_limits([base], **{**LIMITS, "method": "sigma", "sigma": 3})
    assert limits.lcl.iloc[0]["x"] == pytest.approx(3 - 3 * 1.5811388, abs=1e-6)
    ratios = charts.violation_ratios(pd.DataFrame({"x": [-2.0, 0.0, 8.5, 9.0]}), limits)
    assert ratios.loc["x", "lower"] == 0.25 and ratios.loc["x", "upper"] == 0.5


def test_interval_scope_compares_each_position_with_its_own_limits():
    b1 = pd.DataFrame({"x": [10.0, 100.0]})
    b2 = pd.DataFrame({"x": [12.0, 110.0]})
    limits = charts.control_limits([b1, b2], **{**LIMITS, "lower_pct": 0, "upper_pct": 100, "scope": "interval"})
    # position 0 limits 10..12, position 1 limits 100..110: 50 is low at 1 and high at 0
    ratios = charts.violation_ratios(pd.DataFrame({"x": [50.0, 50.0]}), limits)
    assert ratios.loc["x", "upper"] == 0.5 and ratios.loc["x", "lower"] == 0.5
    whole = charts.violation_ratios(pd.DataFrame({"x": [50.0, 50.0]}), charts.control_limits([b1, b2], **{**LIMITS, "lower_pct": 0, "upper_pct": 100}))
    assert whole.loc["x", "sum"] == 0.0


def test_missing_counter_and_missing_points_are_not_violations():
    base = pd.DataFrame({"x": [1.0, 2, 3], "gone": [1.0, 1, 1]})
    target = pd.DataFrame({"x": [np.nan, 10.0, 2.0], "new": [5.0, 5, 5]})
    ratios = charts.violation_ratios(target, charts.control_limits([base], **{**LIMITS, "lower_pct": 0, "upper_pct": 100}))
    assert list(ratios.index) == ["x"]                        # only counters both sides have
    assert ratios.loc["x", "upper"] == 0.5 and ratios.loc["x", "n"] == 2


@pytest.mark.parametrize("bad", [{"method": "iqr"}, {"scope": "hour"}])
def test_unknown_options_are_refused(bad):
    with pytest.raises(ValueError):
        charts.control_limits([pd.DataFrame({"x": [1.0]})], **{**LIMITS, **bad})


def test_the_top_ratio_mean_is_the_mean_of_the_top_half():
    avg = pd.Series({"a": 0.5, "b": 0.1, "c": 0.0, "d": 0.3})
    assert charts.top_ratio_mean(avg, top_fraction=0.5) == pytest.approx(0.4)          # (0.5 + 0.3) / 2
    assert charts.top_ratio_mean(avg, top_fraction=0.5, exclude=["a"]) == pytest.approx(0.2)   # b, c, d: top 2 = 0.3, 0.1
    assert charts.top_ratio_mean(pd.Series(dtype=float), top_fraction=0.5) == 0.0


def test_load_independent_counters_from_normal_pairs():
    pairs = [pd.Series({"cache": 0.4, "cpu": 0.02, "io": 0.2}), pd.Series({"cache": 0.3, "cpu": 0.05, "io": 0.01})]
    # cache above 10 % in both pairs, io in one of two (not more than half)
    assert chart_calibration.load_independent_counters(pairs, max_ratio=0.10, min_share=0.5) == ["cache"]
    assert chart_calibration.load_independent_counters(pairs[:1], max_ratio=0.10, min_share=0.5) == ["cache", "io"]  # the thesis: one pair


def _mixture(rng, n_major, n_minor):
    return np.concatenate([rng.normal(100, 5, n_major), rng.normal(10, 2, n_minor)])


def test_minor_mode_found_between_the_peaks_of_a_known_mixture():
    rng = np.random.default_rng(0)
    cut, side, share = chart_modes.minor_mode(_mixture(rng, 900, 100), **MODES)
    assert 20 < cut < 85 and side == "low"
    assert share == pytest.approx(0.1, abs=0.005)
    assert chart_modes.minor_mode(rng.normal(100, 5, 1000), **MODES) is None              # unimodal: nothing to filter


def test_minor_mode_on_the_high_side_for_a_batch_job():
    rng = np.random.default_rng(1)
    values = np.concatenate([rng.normal(100, 5, 850), rng.normal(300, 10, 150)])
    cut, side, share = chart_modes.minor_mode(values, **MODES)
    assert 120 < cut < 270 and side == "high" and share == pytest.approx(0.15, abs=0.005)


def test_target_keeps_minor_mode_points_beyond_the_baseline_share():
    rng = np.random.default_rng(2)
    base = pd.DataFrame({"x": _mixture(rng, 900, 100)})
    same = pd.DataFrame({"x": _mixture(rng, 90, 10)})          # the baseline's idle share
    more = pd.DataFrame({"x": _mixture(rng, 60, 40)})          # 30 % more time in the low mode
    r_same, _, modes = charts.chart([base], same, charts.ChartParams(**CHART))
    r_more, _, _ = charts.chart([base], more, charts.ChartParams(**CHART))
    assert "x" in modes
    assert r_same.loc["x", "lower"] < 0.05
    # 10 of the 40 low points are dropped as idle; the other 30 of the 90 kept are below the LCL
    assert r_more.loc["x", "lower"] == pytest.approx(30 / 90, abs=0.02)
    r_off, _, _ = charts.chart([base], more, charts.ChartParams(**{**CHART, "multimodal_filter": False}))
    # unfiltered, the low mode widens the limits down to it: most of the extra idle time is hidden
    assert r_off.loc["x", "lower"] < 0.15


def test_charter_keeps_each_baseline_sets_modes_and_limits_and_charts_as_chart_does():
    rng = np.random.default_rng(3)
    frames = {"b1": pd.DataFrame({"x": _mixture(rng, 900, 100), "y": rng.normal(50, 2, 1000)}),
              "b2": pd.DataFrame({"x": _mixture(rng, 880, 120), "y": rng.normal(51, 2, 1000)}),
              "t1": pd.DataFrame({"x": _mixture(rng, 60, 40), "y": rng.normal(56, 2, 100)}),
              "t2": pd.DataFrame({"x": _mixture(rng, 90, 10), "y": rng.normal(50, 2, 100)})}
    params = {"method": "percentile", "lower_pct": 1, "upper_pct": 99, "sigma": 3, "scope": "run",
              "multimodal_filter": True, "multimodal_max_dip": MODES["max_dip"],
              "multimodal_min_share": MODES["min_share"], "window_share": 0.2}
    charter = charts.Charter(frames, charts.ChartParams.of(params))
    for target in ("t1", "t2", "t1"):                    # the second and third charts reuse the limits
        got, limits, modes = charter(["b2", "b1"], target, excursions_too=True)
        want, want_limits, want_modes = charts.chart([frames["b1"], frames["b2"]], frames[target],
                                                     charts.ChartParams.of(params), excursions_too=True)
        pd.testing.assert_frame_equal(got, want)
        pd.testing.assert_frame_equal(limits.ucl, want_limits.ucl)
        assert modes == want_modes and "x" in modes
    assert list(charter._limits) == [("b1", "b2")]
    interval = charts.Charter(frames, charts.ChartParams.of({**params, "scope": "interval"}))
    interval(["b1"], "t2")
    assert interval._limits == {}                          # a frame per baseline set is not kept


def test_load_scaling_removes_a_pure_load_difference():
    # c = 2 l + 10 exactly; the baseline ran at load 100, the target at load 150
    rng = np.random.default_rng(3)
    l_base, l_target = 100 + rng.normal(0, 3, 60), 150 + rng.normal(0, 3, 60)
    base = pd.DataFrame({"load": l_base, "c": 2 * l_base + 10 + rng.normal(0, 1, 60)})
    target = pd.DataFrame({"load": l_target, "c": 2 * l_target + 10 + rng.normal(0, 1, 60)})
    raw, _, _ = charts.chart([base], target, charts.ChartParams(**{**CHART, "multimodal_filter": False}))
    assert raw.loc["c", "upper"] > 0.9
    fits = {"c": [2.0, 10.0]}
    scaled_b = load_scaling.scale_to_load(base, "load", fits, 100.0)
    scaled_t = load_scaling.scale_to_load(target, "load", fits, 100.0)
    # c' = c (2·100 + 10) / (2 l + 10): both runs are brought to load 100
    assert scaled_t["c"].mean() == pytest.approx(210, abs=1.0)
    scaled, _, _ = charts.chart([scaled_b], scaled_t.drop(columns="load"), charts.ChartParams(**{**CHART, "multimodal_filter": False}))
    assert scaled.loc["c", "sum"] < 0.1


def _ratios(upper: list[float], window: list[float], names="abc") -> pd.DataFrame:
    ratios = pd.DataFrame({"lower": 0.0, "upper": upper, "window": window}, index=list(names))
    ratios["average"] = (ratios["lower"] + ratios["upper"]) / 2
    ratios["sum"] = ratios["lower"] + ratios["upper"]
    ratios["n"] = 20
    return ratios


def test_judge_with_a_fixed_threshold_flags_counters_over_their_normal_maximum_only_when_the_run_fails():
    ratios = _ratios([0.8, 0.3, 0.05], [0.8, 0.3, 0.05])
    calibration = {"threshold": 0.1, "threshold_from": "params", "load_independent": ["b"],
                   "counter_normal_max": {"a": 0.2, "c": 0.01}, "counter_window_max": {"a": 0.9, "c": 0.01},
                   "normal_scores": {}, "window_scores": {}}
    out = charts.judge(ratios, calibration, top_fraction=0.5, counter_flag_floor=0.1, false_alarm_rate=0.05)
    # b is load-independent: top half of (a 0.4, c 0.025) = 0.4 > 0.1
    assert out["verdict"] == "fail" and out["violation_ratio"] == 0.4
    assert out["flagged_counters"] == ["a"]          # c: 0.05 is over its normal max but under the floor
    calm = charts.judge(ratios, {**calibration, "threshold": 0.5}, top_fraction=0.5, counter_flag_floor=0.1,
                    false_alarm_rate=0.05)
    assert calm["verdict"] == "pass" and calm["flagged_counters"] == [] and calm["counters_over_limit"] == ["a"]
    # counter scores r / (1 + r), r = window / max(normal window max, floor 0.1): a: r = 0.8 / 0.9 = 8/9,
    # score 8/17; b (no normal window max): r = 0.3 / 0.1 = 3, score 3/4; c: r = 0.05 / 0.1 = 1/2, score 1/3
    assert out["counter_scores"] == pytest.approx({"a": round(8 / 17, 4), "b": 0.75, "c": round(1 / 3, 4)})


def test_calibrated_pvalue_by_hand():
    # null 0.09, 0.19, 0.29, 0.39, 0.49 with resolution 0.01: logs ln 0.1 .. ln 0.5 (k = n = 5, no zeros)
    null = [0.09, 0.19, 0.29, 0.39, 0.49]
    logs = [math.log(x) for x in (0.1, 0.2, 0.3, 0.4, 0.5)]
    m, s = statistics.mean(logs), statistics.stdev(logs)       # -1.345087, 0.635509
    assert m == pytest.approx(math.log(0.0012) / 5)
    from scipy.stats import t
    # a score of 0.99: y = ln 1.0 = 0; t = (0 - m) / (s * sqrt(1 + 1/5)), 4 degrees of freedom;
    # no normal score reaches 0.99, so no floor
    expected = t.sf((0 - m) / (s * math.sqrt(1.2)), df=4)
    assert pvalues.calibrated_pvalue(0.99, null, resolution=0.01) == pytest.approx(expected, rel=1e-9)
    assert 0.06 < expected < 0.07
    # the score whose log is the mean: t = 0, p = 1/2 -- but 3 of the 5 normal scores are at
    # least that high (0.29, 0.39, 0.49): the floor 3/6 = 1/2 as well
    at_mean = math.exp(m) - 0.01
    assert pvalues.calibrated_pvalue(at_mean, null, resolution=0.01) == pytest.approx(0.5)
    assert np.isnan(pvalues.calibrated_pvalue(0.5, [0.1], resolution=0.01))                   # one run: cannot judge
    assert pvalues.calibrated_pvalue(0.5, [0.0, 0.0, 0.0], resolution=0.01) == pytest.approx(0.25)  # all zero: 1/(n+1)
    assert pvalues.calibrated_pvalue(0.0, [0.0, 0.0, 0.0], resolution=0.01) == 1.0


def test_calibrated_pvalue_with_a_point_mass_at_zero_is_a_hurdle_model():
    """Most normal runs often score exactly 0.  Three zeros and the five positive scores above
    (n = 8, k = 5): P(S > 0) = (5 + 1) / (8 + 1) = 2/3, times the same t tail as above."""
    from scipy.stats import t
    null = [0.0, 0.0, 0.0, 0.09, 0.19, 0.29, 0.39, 0.49]
    logs = [math.log(x) for x in (0.1, 0.2, 0.3, 0.4, 0.5)]
    tail = t.sf((0 - statistics.mean(logs)) / (statistics.stdev(logs) * math.sqrt(1.2)), df=4)
    assert pvalues.calibrated_pvalue(0.99, null, resolution=0.01) == pytest.approx(2 / 3 * tail, rel=1e-9)
    # one positive normal score: no tail to fit, P(S > 0) = (1 + 1) / (3 + 1)
    assert pvalues.calibrated_pvalue(0.7, [0.0, 0.0, 0.5], resolution=0.01) == pytest.approx(0.5)
    assert pvalues.calibrated_pvalue(0.0, null, resolution=0.01) == 1.0


def test_calibrated_pvalue_is_never_below_the_share_of_normal_runs_that_scored_more():
    """Ten normal runs near 0.3 and one at 1.3: the fitted tail gives a score of 1.1 a tiny
    p-value, but 1 of 11 normal runs scored more: p >= 1/12.  Above every normal score the fit decides."""
    null = [0.28, 0.29, 0.3, 0.3, 0.31, 0.3, 0.29, 0.31, 0.3, 0.3, 1.3]
    assert pvalues.calibrated_pvalue(1.1, null, resolution=0.01) == pytest.approx(1 / 12)
    assert pvalues.calibrated_pvalue(1.5, null, resolution=0.01) < 0.01


def test_combined_pvalue_is_bonferronis_minimum():
    assert pvalues.combined_pvalue([0.01, 0.2]) == pytest.approx(0.02)
    assert pvalues.combined_pvalue([0.6, 0.9]) == 1.0
    assert pvalues.combined_pvalue([float("nan"), 0.03]) == pytest.approx(0.03)
    assert np.isnan(pvalues.combined_pvalue([float("nan")]))


def test_simes_combination_by_hand():
    """Simes: min over the sorted p-values of m·p_(i)/i.  [0.04, 0.01, 0.03]: sorted 0.01, 0.03,
    0.04 give 3·0.01/1 = 0.03, 3·0.03/2 = 0.045, 3·0.04/3 = 0.04: 0.03, Bonferroni's too.
    [0.02, 0.025, 0.03]: 0.06, 0.0375, 0.03: 0.03, where Bonferroni gives 0.06 — three
    detectors that each see part of a fault fail the run at 5 %, which Bonferroni would pass."""
    assert pvalues.combined_pvalue([0.04, 0.01, 0.03], "simes") == pytest.approx(0.03)
    assert pvalues.combined_pvalue([0.02, 0.025, 0.03], "simes") == pytest.approx(0.03)
    assert pvalues.combined_pvalue([0.02, 0.025, 0.03], "bonferroni") == pytest.approx(0.06)
    assert pvalues.combined_pvalue([0.6, 0.9, float("nan")], "simes") == pytest.approx(0.9)   # 2·0.6, 2·0.9/2
    assert np.isnan(pvalues.combined_pvalue([], "simes"))
    with pytest.raises(ValueError, match="simes, bonferroni"):
        pvalues.combined_pvalue([0.1], "fisher")


def test_one_odd_normal_run_silences_a_fault_under_the_maximum_but_not_under_the_calibrated_p_value():
    # 39 normal runs (a history window) score about 0.05, one odd normal run 0.6; a fault scores 0.4.
    # The fitted tail calls 0.4 extreme; one normal run of 40 scored more, so each test's p-value is
    # 1/41 (the floor), and Bonferroni's 2/41 = 0.0488 <= 0.05 still fails the fault.
    normal = {f"n{i}": v for i, v in enumerate([0.04, 0.05, 0.05, 0.06, 0.05] * 8)}
    normal["n0"] = 0.6
    calibration = {"threshold": max(normal.values()), "threshold_from": "max over normal runs", "load_independent": [],
                   "counter_normal_max": {}, "counter_window_max": {}, "normal_scores": normal,
                   "window_scores": {k: 2 * v for k, v in normal.items()}}
    fault = _ratios([0.8, 0.8], [0.9, 0.9], names="ab")                 # run score 0.4, window 0.9
    assert 0.4 < calibration["threshold"]                                 # the maximum rule: pass, the fault missed
    out = charts.judge(fault, calibration, top_fraction=0.5, counter_flag_floor=0.1, false_alarm_rate=0.05)
    assert out["verdict"] == "fail" and out["p_value"] == pytest.approx(2 / 41, abs=1e-6)
    assert out["flagged_counters"] == ["a", "b"]
    normal_like = _ratios([0.1, 0.1], [0.1, 0.1], names="ab")            # scores 0.05 and 0.1: ordinary
    assert charts.judge(normal_like, calibration, top_fraction=0.5, counter_flag_floor=0.1,
                    false_alarm_rate=0.05)["verdict"] == "pass"


def test_window_ratio_finds_a_regression_in_part_of_the_run():
    # 20 intervals, the last 4 out of limits: whole-run ratio 0.2, strongest window of 4 (20 %) -> 1.0
    violated = np.zeros((20, 2))
    violated[16:, 0] = 1
    violated[::5, 1] = 1                                                   # scattered: 4 of 20, never 2 in a row
    assert charts.window_width(20, 0.2) == 4 and charts.window_width(10, 0.2) == 2 and charts.window_width(1, 0.2) == 1
    assert charts.window_ratio(violated, window_share=0.2).tolist() == pytest.approx([1.0, 0.25])
    limits = charts.control_limits([pd.DataFrame({"x": np.arange(101.0)})], **LIMITS)
    target = pd.DataFrame({"x": [50.0] * 16 + [500.0] * 4})
    ratios = charts.violation_ratios(target, limits, window_share=0.2)
    assert ratios.loc["x", "sum"] == pytest.approx(0.2) and ratios.loc["x", "window"] == pytest.approx(1.0)


def window_by_window(values: np.ndarray, width: int) -> list[float]:
    """Per column, the largest mean over whole windows of ``width`` rows with at least half of
    their points comparable (NaN points not counted): the definition, one window at a time."""
    n, m = values.shape
    expected = []
    for j in range(m):
        means = [np.nanmean(values[i:i + width, j]) for i in range(n - width + 1)
                 if np.sum(~np.isnan(values[i:i + width, j])) >= max(1, width // 2)]
        expected.append(max(means) if means else np.nan)
    return expected


def test_strongest_windows_equal_a_window_by_window_count():
    """The running-sum form against the definition, window by window: whole windows of
    ``ceil(0.2·n)`` intervals, at least half of their points comparable, NaN points not counted."""
    rng = np.random.default_rng(5)
    values = rng.random((37, 6)) * (rng.random((37, 6)) < 0.3)
    values[rng.random((37, 6)) < 0.25] = np.nan
    values[:, 5] = np.nan                                                  # a counter never comparable
    width = charts.window_width(37, 0.2)
    got = charts.window_ratio(values, window_share=0.2)
    assert width == 8 and np.allclose(got, window_by_window(values, width), equal_nan=True) and np.isnan(got[5])


def test_strongest_windows_of_complete_columns_are_the_largest_window_mean():
    """Complete columns (every point comparable) take the shortcut (the largest window sum over
    the width); beside gappy and never-comparable ones, every column is still the definition.
    By hand: width ceil(0.25·8) = 2, column 0 [0,1,1,0,0,0,1,0]: best window mean 1.0;
    column 1 [3,0,0,0,0,0,0,5]: 2.5."""
    complete = np.array([[0, 1, 1, 0, 0, 0, 1, 0], [3, 0, 0, 0, 0, 0, 0, 5]], dtype=float).T
    assert charts.window_ratio(complete, window_share=0.25).tolist() == [1.0, 2.5]
    rng = np.random.default_rng(11)
    values = rng.random((41, 9)) * 1e3
    values[rng.random((41, 9)) < 0.2] = np.nan
    values[:, [0, 3, 4]] = rng.random((41, 3)) * 1e3                      # three complete columns
    values[:, 8] = np.nan                                                # one never comparable
    width = charts.window_width(41, 0.15)
    got = charts.window_ratio(values, window_share=0.15)
    alone = charts.window_ratio(values[:, [0, 3, 4]], window_share=0.15)
    assert width == 7 and np.allclose(got, window_by_window(values, width), equal_nan=True) and np.isnan(got[8])
    assert np.array_equal(got[[0, 3, 4]], alone)                           # the same with or without the others


def test_excursions_say_how_far_below_or_above_the_band_in_its_widths():
    """Baseline 0..100: LCL 1, UCL 99, band 98 wide.  20 intervals, 4 a window (20 %)."""
    limits = charts.control_limits([pd.DataFrame({"x": np.arange(101.0), "flat": np.full(101, 200.0),
                                              "zero": np.zeros(101)})], **LIMITS)
    x = [50.0] * 14 + [99.0 + 98.0, 99.0 + 2 * 98.0, 99.0 + 2 * 98.0, 99.0 + 3 * 98.0] + [1.0 - 49.0, 50.0]
    flat = [200.0] * 19 + [210.0]                  # band of no width: 1 % of the level (2.0) wide
    zero = [0.0] * 19 + [np.nan]
    ratios = charts.violation_ratios(pd.DataFrame({"x": x, "flat": flat, "zero": zero}), limits, window_share=0.2,
                                 excursions_too=True)
    assert "above" not in charts.violation_ratios(pd.DataFrame({"x": x}), limits, window_share=0.2)
    # above: 1, 2, 2, 3 widths in one window of 4 -> mean 2.0; below: one point 0.5 wide, alone in any window
    assert ratios.loc["x", "above"] == pytest.approx(2.0) and ratios.loc["x", "below"] == pytest.approx(0.5 / 4)
    assert ratios.loc["flat", "above"] == pytest.approx((10.0 / 2.0) / 4) and ratios.loc["flat", "below"] == 0.0
    assert ratios.loc["zero", "above"] == 0.0       # a missing point is not a move
    lo, hi = np.array([[1.0]]), np.array([[99.0]])
    below, above = charts.excursions(np.array([[np.nan]]), lo, hi, np.array([[False]]))
    assert np.isnan(below[0, 0]) and np.isnan(above[0, 0])


def test_a_filter_that_would_eat_the_evidence_is_not_applied():
    assert chart_calibration.capped_filter(["a"], 10, max_share=0.3) == (["a"], None)
    kept, reason = chart_calibration.capped_filter(list("abcd"), 10, max_share=0.3)      # 4 of 10 > 30 %
    assert kept == [] and "4 of 10" in reason


def test_repeat_pairs_are_consecutive_runs_of_one_version_in_one_lab():
    envs = {"a": {"cpu": 1}, "b": {"cpu": 1}, "c": {"cpu": 2}, "d": {"cpu": 1}, "e": {"cpu": 1}}
    versions = {"a": "1.0", "b": "1.0", "c": "1.0", "d": "1.1", "e": "1.0"}
    # c is another lab, d another version: a-b and b-e are the same test run again
    assert chart_calibration.repeat_pairs(list("abcde"), envs, versions) == [("a", "b"), ("b", "e")]


def test_local_maxima_by_hand_and_as_scipy_finds_them():
    """Peaks by hand: a value above both neighbours; a flat top gives its middle (rounded down);
    a plateau at either end or a shoulder (flat then up) is no peak.  Then 5,000 random series
    with many ties, against ``scipy.signal.find_peaks``."""
    from scipy.signal import find_peaks

    assert chart_modes.local_maxima(np.array([0, 2, 1, 3, 3, 3, 0, 5, 5])).tolist() == [1, 4]
    assert chart_modes.local_maxima(np.array([1, 2, 2, 0])).tolist() == [1]          # (1 + 2) // 2
    assert chart_modes.local_maxima(np.array([3, 1, 2, 2, 4, 0])).tolist() == [4]    # the shoulder 2, 2 is none
    assert chart_modes.local_maxima(np.array([1, 2])).tolist() == [] and chart_modes.local_maxima(np.array([])).tolist() == []
    rng = np.random.default_rng(3)
    for _ in range(5000):
        x = np.round(rng.normal(size=int(rng.integers(0, 30))) * rng.choice([0.4, 2.0]))
        assert chart_modes.local_maxima(x).tolist() == find_peaks(x)[0].tolist(), x
