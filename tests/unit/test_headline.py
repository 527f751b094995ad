"""The headline decision: verdict rule, counter scores, cause, flagged counters."""
from __future__ import annotations

import pytest

from pipelines import headline


@pytest.mark.parametrize("rule,stacking,charts,expected", [
    ("all", "fail", "fail", "fail"), ("all", "fail", "pass", "pass"), ("all", "fail", None, "fail"),
    ("any", "pass", "fail", "fail"), ("any", "pass", "pass", "pass"),
    ("stacking", "fail", "pass", "fail"), ("control_charts", "fail", "pass", "pass"),
])
def test_headline_verdict(rule, stacking, charts, expected):
    assert headline.headline_verdict({"stacking": stacking, "control_charts": charts}, rule) == expected


def test_headline_rule_must_be_known():
    with pytest.raises(ValueError):
        headline.headline_verdict({"stacking": "fail", "control_charts": "pass"}, "most")


def test_counter_scores_are_the_mean_over_methods_that_scored_the_counter():
    out = headline.combine_scores({"a": 0.2, "b": 1.0}, {"a": 0.6, "c": 0.1})
    assert out == {"b": 1.0, "a": pytest.approx(0.4), "c": 0.1}
    assert list(out) == ["b", "a", "c"]


def test_cause_of_a_failed_run_is_a_fault_and_known_only_when_the_classifier_agrees():
    pred = {"label": "none", "probability": 0.6, "known": False, "fault": {"label": "cpu", "probability": 0.7},
            "none_probability": 0.6}
    assert headline.cause_of("fail", pred) == {"label": "cpu", "probability": 0.7, "known": False}
    sure = {**pred, "label": "cpu", "known": True}
    assert headline.cause_of("fail", sure)["known"] is True
    assert headline.cause_of("pass", pred) == {"label": "none", "probability": 0.6, "known": True}
    assert headline.cause_of("fail", None) == {"label": None, "probability": None, "known": False}


def test_flag_rule_rules_keeps_stacking_flags_and_falls_back_to_the_charts():
    det = {"run_id": "s-1", "system": "s", "counter_scores": {"a": 0.9, "b": 0.2, "c": 0.1}, "baseline_runs": [],
           "methods": {k: {"verdict": "fail", "flagged_counters": ["a"]} for k in headline.RULE_METHODS}}
    charts = {"verdict": "fail", "violation_ratio": 0.3, "threshold": 0.1, "flagged_counters": ["b", "c"],
              "load_independent_counters": [], "baseline_runs": [], "counter_scores": {"a": 0.5, "b": 0.4, "c": 0.3}}
    union = headline.compose(det, charts, None, verdict_rule="all", flag_rule="union")
    rules = headline.compose(det, charts, None, verdict_rule="all", flag_rule="rules")
    assert set(union["flagged_counters"]) == {"a", "b", "c"} and rules["flagged_counters"] == ["a"]
    passed_rules = {**det, "methods": {k: {"verdict": "pass", "flagged_counters": []} for k in headline.RULE_METHODS}}
    either = headline.compose(passed_rules, charts, None, verdict_rule="any", flag_rule="rules")
    assert either["verdict"] == "fail" and set(either["flagged_counters"]) == {"b", "c"}
    with pytest.raises(ValueError, match="flag_rule"):
        headline.compose(det, charts, None, verdict_rule="all", flag_rule="vote")
