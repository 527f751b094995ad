"""labs: a target whose lab no baseline run shares is moved by its lab's level (hand-computed)."""
import numpy as np
import pandas as pd
import pytest

from pipelines import control_charts as cc
from pipelines import labs

A = {"cpu": "xeon", "db": "5.1"}
B = {"cpu": "epyc", "db": "5.1"}
KW = {"min_runs": 3, "unstable_share": 0.5, "max_unstable_share": 0.6}


def levels_of(table: dict[str, dict[str, float]]):
    return lambda runs: pd.DataFrame({r: table[r] for r in runs}).T


def test_a_baseline_run_of_the_same_lab_needs_no_shift():
    envs = {"t": A, "b1": A, "b2": B}
    out = labs.lab_shift("t", ["b1", "b2"], envs, {"b1": "pass"}, levels_of({}), **KW)
    assert out["status"] == "same_lab" and out["shift"] is None and out["unstable"] == []


def test_the_shift_is_the_lab_median_minus_the_baseline_median():
    # lab B: passed runs l1..l3 with a = 11, 12, 13 (median 12); baseline in lab A: a = 5, 6, 7 (median 6)
    table = {"l1": {"a": 11, "b": 1}, "l2": {"a": 12, "b": 10}, "l3": {"a": 13, "b": 20}, "f1": {"a": 99, "b": 99},
             "b1": {"a": 5, "b": 9}, "b2": {"a": 6, "b": 10}, "b3": {"a": 7, "b": 11}, "t": {"a": 0, "b": 0}}
    envs = {r: (B if r[0] in "lft" else A) for r in table}
    verdicts = {"l1": "pass", "l2": "pass", "l3": "pass", "f1": "fail", "t": "pass"}
    out = labs.lab_shift("t", ["b1", "b2", "b3"], envs, verdicts, levels_of(table), **KW)
    assert out["status"] == "adjusted"
    assert out["lab_runs"] == ["l1", "l2", "l3"]          # 3 passed runs: the failed one and the target are not used
    assert out["shift"]["a"] == pytest.approx(12 - 6)
    assert out["shift"]["b"] == pytest.approx(10 - 10)
    # moved lab levels: a = 5, 6, 7 (all inside the baseline's 5..7); b = 1, 10, 20 (2 of 3 outside 9..11)
    assert out["unstable"] == ["b"]
    moved = labs.shifted(pd.DataFrame({"a": [12.0, 14.0], "b": [3.0, 4.0], "c": [1.0, 2.0]}), out["shift"])
    assert moved["a"].tolist() == [6.0, 8.0] and moved["b"].tolist() == [3.0, 4.0] and moved["c"].tolist() == [1.0, 2.0]


def test_failed_runs_teach_the_level_when_the_lab_has_too_few_passed_runs():
    table = {"f1": {"a": 10}, "f2": {"a": 20}, "f3": {"a": 30}, "p1": {"a": 0}, "b1": {"a": 1}}
    envs = {"f1": B, "f2": B, "f3": B, "p1": B, "b1": A, "t": B}
    verdicts = {"f1": "fail", "f2": "fail", "f3": "fail", "p1": "pass"}
    out = labs.lab_shift("t", ["b1"], envs, verdicts, levels_of(table), **KW)
    assert out["lab_runs"] == ["f1", "f2", "f3", "p1"] and out["shift"]["a"] == pytest.approx(15 - 1)
    assert "1 passed, 3 failed" in out["reason"]


def test_too_few_runs_of_the_lab_is_an_insufficient_baseline():
    envs = {"t": B, "l1": B, "l2": B, "b1": A}
    out = labs.lab_shift("t", ["b1"], envs, {"l1": "pass", "l2": "fail", "t": "pass"}, levels_of({}), **KW)
    assert out["status"] == "insufficient" and out["shift"] is None and out["lab_runs"] == ["l1", "l2"]
    assert "2 verified run(s)" in out["reason"]


def test_the_unstable_filter_is_capped():
    table = {"l1": {"a": 11, "b": 1}, "l2": {"a": 12, "b": 10}, "l3": {"a": 13, "b": 20},
             "b1": {"a": 5, "b": 9}, "b2": {"a": 6, "b": 10}, "b3": {"a": 7, "b": 11}}
    envs = {r: (B if r[0] in "lt" else A) for r in [*table, "t"]}
    verdicts = {"l1": "pass", "l2": "pass", "l3": "pass"}
    capped = labs.lab_shift("t", ["b1", "b2", "b3"], envs, verdicts, levels_of(table),
                            **{**KW, "max_unstable_share": 0.4})          # 1 of 2 counters > 40 %: not applied
    assert capped["unstable"] == [] and "too many to set aside" in capped["reason"]


def test_the_chart_of_a_shifted_target_sees_no_lab_difference():
    rng = np.random.default_rng(1)
    base = {f"b{i}": pd.DataFrame({"x": 10 + rng.normal(0, 0.1, 30)}) for i in range(3)}
    frames = {**base, "t": pd.DataFrame({"x": 20 + rng.normal(0, 0.05, 30)})}
    params = {"method": "percentile", "lower_pct": 1, "upper_pct": 99, "sigma": 3, "scope": "run",
              "multimodal_filter": False, "multimodal_max_dip": 0.5, "multimodal_min_share": 0.02, "window_share": 0.2}
    charter = cc.Charter(frames, params)
    unshifted, _, _ = charter(list(base), "t")
    shifted, _, _ = charter(list(base), "t", pd.Series({"x": 10.0}))
    assert unshifted.at["x", "upper"] == 1.0
    assert shifted.at["x", "sum"] == 0.0
