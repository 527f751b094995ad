"""The verdict file's headline and the HTML pages (escaping, self-contained)."""
from __future__ import annotations

import re

import pytest

from pipelines import report


@pytest.mark.parametrize("rule,stacking,charts,expected", [
    ("all", "fail", "fail", "fail"), ("all", "fail", "pass", "pass"), ("all", "fail", None, "fail"),
    ("any", "pass", "fail", "fail"), ("any", "pass", "pass", "pass"),
    ("stacking", "fail", "pass", "fail"), ("control_charts", "fail", "pass", "pass"),
])
def test_headline_verdict(rule, stacking, charts, expected):
    assert report.headline_verdict({"stacking": stacking, "control_charts": charts}, rule) == expected


def test_headline_rule_must_be_known():
    with pytest.raises(ValueError):
        report.headline_verdict({"stacking": "fail", "control_charts": "pass"}, "most")


def test_counter_scores_are_the_mean_over_methods_that_scored_the_counter():
    out = report.combine_scores({"a": 0.2, "b": 1.0}, {"a": 0.6, "c": 0.1})
    assert out == {"b": 1.0, "a": pytest.approx(0.4), "c": 0.1}
    assert list(out) == ["b", "a", "c"]


def test_cause_of_a_failed_run_is_a_fault_and_known_only_when_the_classifier_agrees():
    pred = {"label": "none", "probability": 0.6, "known": False, "fault": {"label": "cpu", "probability": 0.7},
            "none_probability": 0.6}
    assert report.cause_of("fail", pred) == {"label": "cpu", "probability": 0.7, "known": False}
    sure = {**pred, "label": "cpu", "known": True}
    assert report.cause_of("fail", sure)["known"] is True
    assert report.cause_of("pass", pred) == {"label": "none", "probability": 0.6, "known": True}
    assert report.cause_of("fail", None) == {"label": None, "probability": None, "known": False}


def test_night_changes():
    now = {"a": {"verdict": "fail", "cause": "x"}, "b": {"verdict": "pass", "cause": "none"},
           "c": {"verdict": "fail", "cause": "y"}}
    before = {"a": {"verdict": "pass", "cause": "none"}, "c": {"verdict": "fail", "cause": "y"}}
    assert report.night_changes(now, before) == {"a": "pass → fail", "b": "new", "c": "unchanged"}
    assert set(report.night_changes(now, None).values()) == {"new"}


EVIL = '<script>alert("x")</script>'


def _doc():
    counter = f"web.{EVIL}"
    return {
        "schema_version": 1, "run_id": f"r-{EVIL}", "system": f"s{EVIL}", "verdict": "fail", "score": 0.8,
        "flagged_counters": [counter], "counter_scores": {counter: 0.9},
        "cause": {"label": f"c{EVIL}", "probability": 0.4, "known": False},
        "baseline_runs": [{"run_id": f"b{EVIL}", "weight": 1.0}],
        "methods": {"association_rules_stacking": {"verdict": "fail", "flagged_counters": [counter]}},
        "details": {"verdict_rule": "all", "n_intervals": 10, "interval_s": 30.0,
                    "stacking_score": {counter: 1.0}, "bagging_votes": {counter: 1},
                    "violated_rules": {counter: [{"model": f"b{EVIL}", "premise": [f"x{EVIL}=1"],
                                                  "consequent": f"{counter}=2", "confidence_history": 0.95,
                                                  "confidence_new": 0.1, "delta": 0.8, "premise_intervals": 10}]},
                    "violation_intervals": {counter: [1, 2, 3]}, "not_analysed": {"missing_in_target": [EVIL]},
                    "below_min_rel_change": {f"tiny{EVIL}": 0.0136},
                    "control_charts": None},
    }


def test_run_page_escapes_everything_from_the_archive_and_is_self_contained():
    html = report.render_run(_doc(), {"version": EVIL, "started_at": "2026", "environment": {"os": EVIL}}, None,
                             baseline_envs={f"b{EVIL}": {"os": "other"}}, raw_href="../../data/raw/x.tar.gz",
                             raw_name="x.tar.gz")
    assert "<script" not in html
    assert "&lt;script&gt;" in html
    assert "Unknown cause" in html                       # known: false is said plainly
    assert not re.search(r'(src|href)="https?://', html)  # nothing fetched from the network
    assert 'id="timeline"' in html and "data:image/png;base64," in html
    assert "tiny&lt;script&gt;" in html and "(1.4 %)" in html   # the small-change list, escaped, in percent


def test_index_page_escapes_and_orders():
    rows = [report.index_row(_doc()) | {"change": "new"}]
    html = report.render_index(rows, night="2026-11-22", generated="now", quarantined=[EVIL])
    assert "<script" not in html and "1 of 1 runs regressed" in html


def test_novel_environment_lists_components_no_baseline_shares():
    target = {"cpu": "new", "db": "5.1", "os": "x"}
    assert report.novel_environment(target, [{"cpu": "old", "db": "5.1"}, {"cpu": "older", "os": "x"}]) == {"cpu": "new"}
    assert report.novel_environment(target, []) == target


def test_flag_rule_rules_keeps_stacking_flags_and_falls_back_to_the_charts():
    det = {"run_id": "s-1", "system": "s", "counter_scores": {"a": 0.9, "b": 0.2, "c": 0.1}, "baseline_runs": [],
           "methods": {k: {"verdict": "fail", "flagged_counters": ["a"]} for k in report.RULE_METHODS}}
    charts = {"verdict": "fail", "violation_ratio": 0.3, "threshold": 0.1, "flagged_counters": ["b", "c"],
              "load_independent_counters": [], "baseline_runs": [], "counter_scores": {"a": 0.5, "b": 0.4, "c": 0.3}}
    union = report.compose(det, charts, None, verdict_rule="all", flag_rule="union")
    rules = report.compose(det, charts, None, verdict_rule="all", flag_rule="rules")
    assert set(union["flagged_counters"]) == {"a", "b", "c"} and rules["flagged_counters"] == ["a"]
    passed_rules = {**det, "methods": {k: {"verdict": "pass", "flagged_counters": []} for k in report.RULE_METHODS}}
    either = report.compose(passed_rules, charts, None, verdict_rule="any", flag_rule="rules")
    assert either["verdict"] == "fail" and set(either["flagged_counters"]) == {"b", "c"}
    with pytest.raises(ValueError, match="flag_rule"):
        report.compose(det, charts, None, verdict_rule="all", flag_rule="vote")
