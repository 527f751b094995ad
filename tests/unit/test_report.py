"""The HTML pages (escaping, self-contained) and the night's changes."""
from __future__ import annotations

import re

from pipelines import report


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
