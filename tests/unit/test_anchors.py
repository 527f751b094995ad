"""The anchors: a plain control chart, Mann-Whitney with Holm's correction, a 10 % median threshold."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipelines.evaluation import anchors

KW = {"lower_pct": 1.0, "upper_pct": 99.0, "top_fraction": 0.5}


def test_holm_by_hand():
    # sorted 0.005 <= 0.05/4, 0.01 <= 0.05/3, 0.03 > 0.05/2: stop; b (0.04) is not reached
    p = pd.Series({"a": 0.01, "b": 0.04, "c": 0.03, "d": 0.005})
    assert anchors.holm(p, 0.05).to_dict() == {"a": True, "b": False, "c": False, "d": True}
    assert not anchors.holm(pd.Series({"a": 0.03, "b": 0.04}), 0.05).any()    # 0.03 > 0.05 / 2
    assert anchors.holm(pd.Series({"a": 0.02, "b": 0.03}), 0.05).all()        # 0.02 <= 0.05 / 2, 0.03 <= 0.05 / 1


def test_median_threshold_by_hand():
    base = [pd.DataFrame({"x": [100.0] * 3, "y": [50.0] * 3}), pd.DataFrame({"x": [110.0] * 3, "y": [50.0] * 3}),
            pd.DataFrame({"x": [90.0] * 3, "y": [50.0] * 3})]
    # baseline level: median of the run medians = 100 and 50
    out = anchors.median_threshold(base, pd.DataFrame({"x": [111.0, 111, 111], "y": [54.0, 54, 54]}), change=0.10)
    assert out["verdict"] == "fail" and out["flagged_counters"] == ["x"]          # +11 % vs +8 %
    assert out["counter_scores"] == pytest.approx({"x": 0.11, "y": 0.08})
    calm = anchors.median_threshold(base, pd.DataFrame({"x": [109.0] * 3, "y": [50.0] * 3}), change=0.10)
    assert calm["verdict"] == "pass" and calm["flagged_counters"] == []


def test_plain_chart_ratios_and_threshold_by_hand():
    # a baseline of 0..100: 1st/99th percentiles 1 and 99; 10 target points of which 4 above 99 and 1 below 1
    base = [pd.DataFrame({"x": np.arange(101.0), "y": np.arange(101.0)})]
    target = pd.DataFrame({"x": [200.0] * 4 + [-5.0] + [50.0] * 5, "y": [50.0] * 10})
    avg = anchors.average_ratios(base, target, lower_pct=1, upper_pct=99)
    assert avg.to_dict() == pytest.approx({"x": 0.25, "y": 0.0})                   # (4/10 + 1/10) / 2
    # top half of 2 counters = the largest: 0.25
    out = anchors.plain_chart(base, target, 0.2, **KW)
    assert out["score"] == pytest.approx(0.25) and out["verdict"] == "fail" and out["flagged_counters"] == ["x"]
    assert anchors.plain_chart(base, target, 0.25, **KW)["verdict"] == "pass"     # not above the normal maximum


def test_plain_chart_null_charts_each_normal_run_against_the_others():
    a = pd.DataFrame({"x": np.arange(101.0)})
    b = pd.DataFrame({"x": np.arange(101.0)})
    c = pd.DataFrame({"x": np.arange(101.0) + 1000})                              # far from a and b
    null = anchors.plain_chart_null({"a": a, "b": b, "c": c}, **KW)
    # c against a+b: every point above the 99th percentile -> average ratio 0.5
    assert null["c"] == pytest.approx(0.5)
    # a against b+c pooled (202 values): 1st percentile at rank 0.01 * 201 = 2.01 -> 2.01, 99th at rank 199
    # -> 1098; a's 0, 1 and 2 are below: lower ratio 3/101, average 1.5/101
    assert null["a"] == pytest.approx(1.5 / 101)


def test_mann_whitney_flags_a_shift_and_not_the_same_distribution():
    rng = np.random.default_rng(0)
    base = [pd.DataFrame({"x": rng.normal(100, 5, 60), "y": rng.normal(10, 1, 60)}) for _ in range(3)]
    target = pd.DataFrame({"x": rng.normal(130, 5, 20), "y": rng.normal(10, 1, 20)})
    out = anchors.mann_whitney(base, target, alpha=0.05)
    assert out["flagged_counters"] == ["x"] and out["counter_scores"]["x"] > 0.999
    flat = anchors.mann_whitney([pd.DataFrame({"z": [1.0] * 5})], pd.DataFrame({"z": [1.0] * 5}), alpha=0.05)
    assert flat["verdict"] == "pass" and flat["counter_scores"] == {"z": 0.0}
