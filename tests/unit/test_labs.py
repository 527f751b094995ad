"""labs: a target whose lab no baseline run shares is moved by its lab's level (hand-computed)."""
import numpy as np
import pandas as pd
import pytest

from pipelines.systems import history, labs
from pipelines.detectors.charts import calibration as chart_calibration
from pipelines.detectors.charts import control_charts as charts

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
    charter = charts.Charter(frames, charts.ChartParams.of(params))
    unshifted, _, _ = charter(list(base), "t")
    shifted, _, _ = charter(list(base), "t", pd.Series({"x": 10.0}))
    assert unshifted.at["x", "upper"] == 1.0
    assert shifted.at["x", "sum"] == 0.0


# --------------------------------------------------------------------------- the cross-lab null

def test_each_normal_run_is_judged_by_the_other_labs_with_its_lab_known_and_unknown():
    """Labs A (a1, a2 passed, fa failed), B (b1, b2) and C (c1): a1's baseline is B's and C's passed
    runs; as ``adjusted`` it may learn its lab from every verified run, as ``insufficient`` from
    none of its lab's.  The fake judge finds ``adjusted`` when the run's lab has another verified
    run among those it may use, as ``labs.lab_shift`` does with min_runs 1."""
    lab_of = {"a1": "A", "a2": "A", "fa": "A", "b1": "B", "b2": "B", "c1": "C"}
    passed = ["a1", "a2", "b1", "b2", "c1"]
    verdicts = {**{r: "pass" for r in passed}, "fa": "fail"}
    calls = []

    def judge(run, baseline, lab_runs):
        calls.append((run, tuple(baseline), tuple(sorted(lab_runs))))
        known = [r for r in lab_runs if lab_of[r] == lab_of[run] and r != run]
        return ("adjusted" if known else "insufficient"), float(len(baseline))
    null = labs.cross_lab_null(passed, lab_of, verdicts, judge)
    assert ("a1", ("b1", "b2", "c1"), ("a1", "a2", "b1", "b2", "c1", "fa")) in calls
    assert ("a1", ("b1", "b2", "c1"), ("b1", "b2", "c1")) in calls
    assert ("c1", ("a1", "a2", "b1", "b2"), ("a1", "a2", "b1", "b2", "fa")) in calls
    # scores: the size of the other labs' passed runs (A: 3, B: 3, C: 4); C has no other run of
    # its lab, so its 'adjusted' judgement was 'insufficient' and counts under that status only
    assert null == {"adjusted": {"a1": 3.0, "a2": 3.0, "b1": 3.0, "b2": 3.0},
                    "insufficient": {"a1": 3.0, "a2": 3.0, "b1": 3.0, "b2": 3.0, "c1": 4.0}}
    # one lab only: nobody can be judged across labs; a lab with a single other-lab run is skipped
    assert labs.cross_lab_null(["a1", "a2"], lab_of, verdicts, judge) == {"adjusted": {}, "insufficient": {}}
    assert labs.cross_lab_null(["a1", "a2", "c1"], lab_of, verdicts, judge)["insufficient"] == {"c1": 2.0}


def test_the_matched_null_is_the_cross_lab_one_only_for_a_run_judged_across_labs():
    same = {"n1": 0.1, "n2": 0.2, "n3": 0.3}
    cross = {"insufficient": {"n1": 5.0, "n2": 6.0, "n3": 7.0}, "adjusted": {"n1": 1.0, "n2": 2.0}}
    assert labs.matched_null("same_lab", same, cross, "n1") == ({"n2": 0.2, "n3": 0.3}, "same_lab")
    assert labs.matched_null("insufficient", same, cross, "t") == (cross["insufficient"], "cross_lab")
    assert labs.matched_null("insufficient", same, cross, "n3") == ({"n1": 5.0, "n2": 6.0}, "cross_lab")
    # 'adjusted' without its own run has one score left: too few, the same-lab null judges
    assert labs.matched_null("adjusted", same, cross, "n2") == ({"n1": 0.1, "n3": 0.3}, "same_lab")
    assert labs.matched_null("adjusted", same, None) == (same, "same_lab")


def _calibration(normal: list[float], cross: list[float]) -> dict:
    named = lambda xs: {f"n{i}": x for i, x in enumerate(xs)}      # noqa: E731
    return {"threshold": max(normal), "threshold_from": "max over normal runs", "normal_scores": named(normal),
            "window_scores": named(normal), "load_independent": [], "counter_normal_max": {},
            "counter_window_max": {}, "cross_lab": {"insufficient": {"normal_scores": named(cross),
                                                                     "window_scores": named(cross)}}}


def test_a_new_lab_normal_run_failed_by_the_same_lab_null_passes_the_matched_one():
    """A run of a new lab with run and window scores 0.2 (one counter, 100 intervals).

    Same-lab null: 59 normal runs all at 0 (hurdle, no positive score): each p = (0 + 1)/(59 + 1)
    = 1/60, Bonferroni over run and window 2/60 = 0.0333 <= 0.05: fail.  Normal runs judged
    across labs: 9 at 0 and one at 0.5: k = 1 positive, too few to fit, p = (1 + 1)/(10 + 1) =
    2/11 each, combined 4/11 = 0.364: pass; the threshold becomes the matched null's largest, 0.5."""
    ratios = pd.DataFrame({"average": [0.2], "sum": [0.2], "window": [0.2], "n": [100]}, index=["x"])
    calibration = _calibration([0.0] * 59, [0.0] * 9 + [0.5])
    kw = {"top_fraction": 0.5, "counter_flag_floor": 0.05, "false_alarm_rate": 0.05}
    same = charts.judge(ratios, calibration, **kw)
    assert same["verdict"] == "fail" and same["p_run"] == pytest.approx(1 / 60, abs=1e-6)
    assert same["p_value"] == pytest.approx(2 / 60, abs=1e-6)
    matched, kind = chart_calibration.matched_calibration(calibration, "insufficient", "t")
    assert kind == "cross_lab" and matched["threshold"] == 0.5
    out = charts.judge(ratios, matched, **kw)
    assert out["verdict"] == "pass" and out["p_run"] == pytest.approx(2 / 11, abs=1e-6)
    assert out["p_value"] == pytest.approx(4 / 11, abs=1e-6)
    # a run of a lab the baseline shares keeps the same-lab calibration, itself
    assert chart_calibration.matched_calibration(calibration, "same_lab", "t") == (calibration, "same_lab")
    fixed = {**calibration, "threshold": 0.3, "threshold_from": "params"}
    assert chart_calibration.matched_calibration(fixed, "insufficient", "t")[0]["threshold"] == 0.3


def test_the_lab_params_are_the_history_blocks_lab_keys_typed():
    hist = {"lab_min_runs": 3.0, "lab_unstable_share": 0.5, "lab_max_unstable_share": 0.6,
            "lab_environment_alpha": 0.01, "window": 40}
    lab = labs.lab_params(history.HistoryParams.of(hist))
    assert lab == labs.LabParams(min_runs=3, unstable_share=0.5, max_unstable_share=0.6, environment_alpha=0.01)
    assert isinstance(lab.min_runs, int)
    assert lab.shift_kw() == KW                     # lab_shift's keyword arguments, nothing else


def test_the_history_block_typed_makes_the_same_runs_as_its_keys():
    """HistoryParams' runs are those of the history functions called with the block's window and
    exclusions: three passed runs, the oldest excluded, a window of one."""
    index = {f"r{i}": {"system": "s", "verdict": v, "started_at": f"2026-01-0{i + 1}T00:00:00Z", "environment": {}}
             for i, v in enumerate(["pass", "pass", "fail", "pass"])}
    index["t"] = {"system": "s", "verdict": None, "started_at": "2026-01-09T00:00:00Z", "environment": {}}
    hist = history.HistoryParams.of({"window": 1, "exclude": ["r0"], "lab_min_runs": 3})
    assert hist.passed(index, "s") == ["r3"]
    assert hist.verified(index, "s") == ["r1", "r2", "r3"]
    assert hist.verdicts(index, "s") == {"r1": "pass", "r2": "fail", "r3": "pass"}
    assert hist.baseline("t", index) == ["r3"] and hist.baseline_choice("t", index) == (["r3"], "before")
    assert hist.block == {"window": 1, "exclude": ["r0"], "lab_min_runs": 3}      # the block itself, for the keys
