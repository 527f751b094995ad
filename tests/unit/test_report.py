"""The HTML pages (escaping, self-contained) and the night's changes."""
from __future__ import annotations

import re

from pipelines.reporting import pages, plots, run_reports, summary


def test_night_changes():
    now = {"a": {"verdict": "fail", "cause": "x"}, "b": {"verdict": "pass", "cause": "none"},
           "c": {"verdict": "fail", "cause": "y"}}
    before = {"a": {"verdict": "pass", "cause": "none"}, "c": {"verdict": "fail", "cause": "y"}}
    assert summary.night_changes(now, before) == {"a": "pass → fail", "b": "new", "c": "unchanged"}
    assert set(summary.night_changes(now, None).values()) == {"new"}


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
    html = pages.render_run(_doc(), {"version": EVIL, "started_at": "2026", "environment": {"os": EVIL}}, None,
                            pages.RunPage(baseline_envs={f"b{EVIL}": {"os": "other"}},
                                          raw_href="../../data/raw/x.tar.gz",
                      raw_name="x.tar.gz"))
    assert "<script" not in html
    assert "&lt;script&gt;" in html
    assert "Unknown cause" in html                       # known: false is said plainly
    assert not re.search(r'(src|href)="https?://', html)  # nothing fetched from the network
    assert 'id="timeline"' in html and "data:image/svg+xml;base64," in html
    assert "tiny&lt;script&gt;" in html and "(1.4 %)" in html   # the small-change list, escaped, in percent


def test_index_page_escapes_and_orders():
    rows = [pages.index_row(_doc()) | {"change": "new"}]
    html = pages.render_index(rows, pages.NightIndex(night="2026-11-22", generated="now", quarantined=[EVIL]))
    assert "<script" not in html and "1 of 1 runs regressed" in html


def test_novel_environment_lists_components_no_baseline_shares():
    target = {"cpu": "new", "db": "5.1", "os": "x"}
    assert summary.novel_environment(target, [{"cpu": "old", "db": "5.1"}, {"cpu": "older", "os": "x"}]) == {"cpu": "new"}
    assert summary.novel_environment(target, []) == target


DIRECTIONS = [{"counter": "(hit|throughput|_rps$)", "worse": "down"},
              {"counter": "(_ms$|cpu|error)", "worse": "up"}]


def test_counter_changes_by_hand():
    import pandas as pd
    target = pd.Series({"app.response_time_ms": 32.0, "app.throughput_rps": 90.0, "db.cpu_pct": 30.0,
                        "app.queue_length": 5.0, "app.errors_count": 3.0, "redis.hit_pct": 99.0})
    base = pd.Series({"app.response_time_ms": 24.0, "app.throughput_rps": 100.0, "db.cpu_pct": 40.0,
                      "app.queue_length": 4.0, "app.errors_count": 0.0, "redis.hit_pct": 99.0})
    ch = summary.counter_changes(list(target.index) + ["missing.x"], target, base, DIRECTIONS)
    assert ch["app.response_time_ms"] == {"baseline": 24.0, "target": 32.0, "change_pct": 33.3, "direction": "worse"}
    assert ch["app.throughput_rps"] == {"baseline": 100.0, "target": 90.0, "change_pct": -10.0, "direction": "worse"}
    assert ch["db.cpu_pct"]["change_pct"] == -25.0 and ch["db.cpu_pct"]["direction"] == "better"
    assert ch["app.queue_length"]["direction"] == "changed"           # no rule knows it: +25 %, "changed"
    assert ch["app.errors_count"]["change_pct"] is None                # from 0: no percentage
    assert ch["app.errors_count"]["direction"] == "worse"
    assert ch["redis.hit_pct"]["direction"] == "changed" and ch["redis.hit_pct"]["change_pct"] == 0.0
    assert "missing.x" not in ch
    tiny = summary.counter_changes(["app.response_time_ms"], pd.Series({"app.response_time_ms": 24.004}),
                                   pd.Series({"app.response_time_ms": 24.0}), DIRECTIONS)["app.response_time_ms"]
    assert tiny["change_pct"] == 0.0 and tiny["direction"] == "changed"     # +0.017 % shown as +0.0 %: not "worse"
    assert summary.signed_pct(4.44) == "+4.4 %" and summary.signed_pct(-0.0312) == "-0.031 %"
    assert summary.signed_pct(0.0) == "+0.0 %"
    small = {"verdict": "pass", "details": {"set_aside_small": {"app.response_time_ms": 0.82, "redis.hit_pct": 0.03}}}
    assert summary.plain_summary(small, {}) == (
        "No regression found (2 unusual change(s) too small to matter; the largest, each at its strongest: "
        "app.response_time_ms +0.8 %, redis.hit_pct +0.03 %).")


def test_a_pass_judged_against_itself_alone_says_why_it_was_not_compared():
    """The run against itself alone decided: the summary says the run was not compared with other
    runs, and why, from the first clause of the record's reason (up to its colon)."""
    def judged(basis: str, reason: str) -> dict:
        return {"verdict": "pass", "methods": {}, "flagged_counters": [],
                "details": {"combined_detectors": ["within_run"], "trust": {"basis": basis, "reason": reason}}}
    small = judged("small_history", "history too small to weigh the detectors (4 verified normal runs): decided by …")
    silent = judged("silent_null", "no verified fault in the history, and the best record comes from a null that "
                                   "finds nothing: decided by the run against itself")
    assert summary.plain_summary(small, {}) == ("No regression found within the run; it was not compared with other "
                                                "runs: history too small to weigh the detectors (4 verified normal runs).")
    assert summary.plain_summary(silent, {}) == (
        "No regression found within the run; it was not compared with other runs: no verified fault in the "
        "history, and the best record comes from a null that finds nothing.")
    assert summary.plain_summary(judged("record", "the best record"), {}) == "No regression found."


def test_directions_of_the_shipped_table():
    from pipelines import config
    table = config.load_params("report")["directions"]
    expected = {"app.response_time_ms": "up", "jmeter.throughput_rps": "down", "mysql.buffer_pool_hit_pct": "down",
                "web01.mem_available_mb": "down", "tomcat.cpu_pct": "up", "jmeter.error_rate_pct": "up",
                "vm.cpu_idle_pct": "down", "tomcat.private_bytes": "up", "frontend.pod_workload_ops": None}
    assert {c: summary.worse_direction(c, table) for c in expected} == expected


def test_units_and_the_plain_summary():
    assert pages.with_unit("app.response_time_ms", 24.0) == "24 ms"
    assert pages.with_unit("db.cpu_pct", 41.26) == "41.3 %"
    assert pages.with_unit("tomcat.private_bytes", 3 * 2**20) == "3 MiB"
    assert pages.with_unit("web.io_read_bytes_per_s", 1536.0) == "1.5 KiB/s"
    doc = {"verdict": "fail", "flagged_counters": ["app.response_time_ms"], "baseline_status": "same_lab",
           "cause": {"label": "cpu_hot_path", "probability": 0.78, "known": True}, "details": {}}
    changes = {"app.response_time_ms": {"baseline": 24.0, "target": 32.0, "change_pct": 33.3, "direction": "worse"}}
    assert summary.plain_summary(doc, changes) == (
        "Regression: app.response_time_ms 24 ms → 32 ms (+33 %, worse). Probable cause: cpu_hot_path (78 %).")
    doc.update(cause={"label": "cpu_hot_path", "probability": 0.3, "known": False}, baseline_status="insufficient")
    assert summary.plain_summary(doc, changes).endswith(
        "Cause unknown (nearest: cpu_hot_path, not certain). New lab with no baseline of its own: this verdict is "
        "uncertain.")
    assert summary.plain_summary({"verdict": "pass", "details": {}}, {}) == "No regression found."
    # a change for the better is never named as the regression: a worse one first, the better left out;
    # with none worse, the sentence says so and shows the better one as what it is
    better = {"baseline": 1.02, "target": 0.968, "change_pct": -5.1, "direction": "better"}
    two = dict(doc, flagged_counters=["user_db.cpu_pct", "orders.cpu_pct"], baseline_status="same_lab",
               cause={"label": "orders-cpu", "probability": 0.95, "known": True})
    worse = {"baseline": 10.0, "target": 33.0, "change_pct": 230.0, "direction": "worse"}
    assert summary.plain_summary(two, {"user_db.cpu_pct": better, "orders.cpu_pct": worse}) == (
        "Regression: orders.cpu_pct 10 % → 33 % (+230 %, worse). Probable cause: orders-cpu (95 %).")
    only = summary.plain_summary(dict(two, flagged_counters=["user_db.cpu_pct"]), {"user_db.cpu_pct": better})
    assert only.startswith("Regression: the detectors' combined evidence; no flagged counter got worse (the largest "
                           "change was for the better: user_db.cpu_pct 1.02 % → 0.968 % (-5 %, better))")
    # the cause's own counter (its signature's, from the history's verified faults of that cause)
    # leads, with the cause, in one line: before the user-facing latency that would otherwise come first
    latency = {"baseline": 100.0, "target": 150.0, "change_pct": 50.0, "direction": "worse"}
    signed = dict(two, flagged_counters=["front.latency_ms", "user_db.cpu_pct", "orders.cpu_pct"],
                  details={"cause_signature": {"cause": "orders-cpu", "counters": ["orders.cpu_pct"],
                                               "kinds": ["cpu_pct"], "runs": 4}})
    moves = {"front.latency_ms": latency, "user_db.cpu_pct": better, "orders.cpu_pct": worse}
    assert summary.plain_summary(signed, moves) == (
        "Regression, probable cause orders-cpu (95 %): orders.cpu_pct 10 % → 33 % (+230 %, worse); "
        "front.latency_ms 100 ms → 150 ms (+50 %, worse).")
    # a cause not certain gives its counter no lead: the sentence is the detectors' as before
    unsure = dict(signed, cause={"label": "orders-cpu", "probability": 0.4, "known": False})
    assert summary.plain_summary(unsure, moves).startswith("Regression: front.latency_ms 100 ms → 150 ms")
    seen = {"verdict": "pass", "details": {"fault_pattern": {"label": "cpu_hog", "probability": 0.87}}}
    assert summary.plain_summary(seen, {}) == ("No regression found, but the cause classifier sees the pattern "
                                              "of cpu_hog (87 %): worth a look.")
    assert pages.with_unit("web01.mem_available_mb", 13742.0) == "13,700 MB"


def test_the_summary_leads_with_what_users_feel_then_the_worst():
    ch = {"cache.mem_available_mb": {"baseline": 1.0, "target": 1.1, "change_pct": 9.0, "direction": "better"},
          "db.privileged_pct": {"baseline": 1.0, "target": 4.7, "change_pct": 371.0, "direction": "worse"},
          "db.page_faults_per_s": {"baseline": 1.0, "target": 1.9, "change_pct": 88.0, "direction": "worse"},
          "app.response_time_ms": {"baseline": 36.9, "target": 47.2, "change_pct": 27.7, "direction": "worse"},
          "db.context_switches_per_s": {"baseline": 1.0, "target": 2.9, "change_pct": 190.0, "direction": "changed"}}
    flagged = list(ch)
    assert summary.summary_order(flagged, ch, user_facing="(response|throughput)") == [
        "app.response_time_ms", "db.privileged_pct", "db.page_faults_per_s", "db.context_switches_per_s",
        "cache.mem_available_mb"]


def test_run_page_leads_with_the_summary_and_the_change():
    doc = _doc()
    counter = doc["flagged_counters"][0]
    doc["summary"] = f"Regression: {counter} 1 → 2"
    changes = {counter: {"baseline": 1.0, "target": 2.0, "change_pct": 100.0, "direction": "changed"}}
    html = pages.render_run(doc, {"version": "1", "started_at": "2026", "environment": {}}, None,
                            pages.RunPage(baseline_envs={}, raw_href="x", raw_name="x",
                                          changes=changes))
    assert html.index('id="summary"') < html.index('id="cause"') < html.index('id="top-counters"')
    row = html[html.index('id="top-counters"'):html.index('id="method-details"')]
    assert "+100.0 %" in row and "stacking s" not in row                 # the change first, methods in details
    assert "<script" not in html


def test_night_trends_by_hand():
    nights = [("2026-11-20", {"a": {"system": "shop", "verdict": "pass", "score": 0.1},
                              "b": {"system": "ledger", "verdict": "fail", "score": 0.7}}),
              ("2026-11-21", {"c": {"system": "shop", "verdict": "fail", "score": 0.9},
                              "d": {"system": "shop", "verdict": "pass", "score": 0.2}}),
              ("2026-11-22", {"e": {"system": "shop", "verdict": "pass", "score": 0.3}})]
    trends = {t["system"]: t for t in plots.night_trends(nights, last=2)}
    assert trends["shop"]["nights"] == ["2026-11-21", "2026-11-22"]           # the last 2 of its 3 nights
    assert trends["shop"]["text"] == "2026-11-21: 1/2 failed, 2026-11-22: 0/1 failed"
    assert trends["shop"]["chart"].startswith("data:image/svg+xml;base64,")
    assert trends["ledger"]["nights"] == ["2026-11-20"] and trends["ledger"]["chart"] is None   # one point: no line
    assert plots.sparkline([1.0, None]) is None
    import base64
    svg = base64.b64decode(plots.sparkline([1.0, 2.0, 3.0]).split(",", 1)[1]).decode()
    # three points from left to right, rising: y from the bottom (23) to the top (3)
    assert 'points="3.0,23.0 60.0,13.0 117.0,3.0"' in svg and svg.count("<circle") == 3


def test_a_short_run_says_it_was_analysed_at_its_own_resolution():
    meta = {"version": "1", "started_at": "2026", "environment": {}}
    kw = dict(baseline_envs={}, raw_href="x", raw_name="x", few_intervals=20)
    short = pages.render_run(_doc(), meta, None, pages.RunPage(**kw))                       # 10 intervals of 30 s
    assert 'id="short-run"' in short and "10 intervals of 30 s" in short
    long = _doc()
    long["details"]["n_intervals"] = 20                                       # not fewer than few_intervals
    assert 'id="short-run"' not in pages.render_run(long, meta, None, pages.RunPage(**kw))


def test_a_method_row_under_the_calibrated_verdict_says_what_its_p_value_says():
    """Stacking fails on any flagged counter by its own rule; under the calibrated verdict the run
    fails on its p-value only, and the row says which (0.154 > 0.05: pass; 0.01 <= 0.05: fail)."""
    meta = {"version": "1", "started_at": "2026", "environment": {}}
    kw = dict(baseline_envs={}, raw_href="x", raw_name="x")
    doc = _doc()
    doc["details"].update(verdict_rule="calibrated", false_alarm_rate=0.05)

    def row(p_value):
        doc["methods"]["association_rules_stacking"].update(score=1.061, p_value=p_value, normal_runs=12)
        html = pages.render_run(doc, meta, None, pages.RunPage(**kw))
        return re.search(r"<tr><td>association_rules_stacking</td>.*?</tr>", html, re.S).group(0)
    quiet = row(0.154)
    assert 'class="tag pass"' in quiet and "1 counters flagged, none of them unusual enough" in quiet
    loud = row(0.01)
    assert 'class="tag fail"' in loud and "unusual enough" not in loud
    doc["details"]["verdict_rule"] = "all"                  # the rules' own verdict decides: shown as it is
    assert 'class="tag fail"' in row(0.154)


def test_the_cause_classifier_row_shows_its_score_p_value_or_why_it_abstained():
    meta = {"version": "1", "started_at": "2026", "environment": {}}
    kw = dict(baseline_envs={}, raw_href="x", raw_name="x")
    doc = _doc()
    doc["methods"]["cause_classifier"] = {"score": 0.93, "null_runs": 36, "verdict": "fail", "p_value": 0.0031,
                                          "abstained": None}
    html = pages.render_run(doc, meta, None, pages.RunPage(**kw))
    row = re.search(r"<tr><td>cause_classifier</td>.*?</tr>", html, re.S).group(0)
    assert 'class="tag fail"' in row and "0.930" in row and "p = 0.0031" in row and "36 normal runs" in row
    doc["methods"]["cause_classifier"] = {"score": 0.93, "null_runs": 36, "verdict": None, "p_value": None,
                                          "abstained": "the baseline is not of the run's lab (adjusted)"}
    row = re.search(r"<tr><td>cause_classifier</td>.*?</tr>", pages.render_run(doc, meta, None,
                                                                               pages.RunPage(**kw)), re.S).group(0)
    assert "n/a" in row and "abstains: the baseline is not of the run&#39;s lab (adjusted)" in row


def test_a_cause_named_by_the_model_of_the_faults_alone_says_its_probability_is_given_a_fault():
    """The fault model's probability is P(cause | fault), and the page says so."""
    meta = {"version": "1", "started_at": "2026", "environment": {}}
    kw = dict(baseline_envs={}, raw_href="x", raw_name="x", few_intervals=20)
    doc = _doc()
    assert "if it is a fault" not in pages.render_run(doc, meta, None, pages.RunPage(**kw))
    doc["details"]["cause_prediction"] = {"fault": {"label": "c", "probability": 0.4, "given_a_fault": True}}
    unknown = pages.render_run(doc, meta, None, pages.RunPage(**kw))
    assert "(40 %, if it is a fault), not to be taken as certain" in unknown
    doc["cause"]["known"] = True
    assert "(probability 40 %, if it is a fault)" in pages.render_run(doc, meta, None, pages.RunPage(**kw))


def test_a_runs_raw_archive_link_names_its_own_archive_only(tmp_path, monkeypatch):
    # run "a" must not link to "a.b.tar.gz" (a glob on "a.*" would)
    import dataclasses

    from pipelines import config
    monkeypatch.setattr(config, "_PATHS", dataclasses.replace(config.paths(), raw=tmp_path))
    for name in ("a.b.tar.gz", "a.zip", "ab.tar.gz", "a.b"):
        (tmp_path / name).write_bytes(b"x")
    assert run_reports.raw_archives("a") == ["a.zip"]
    assert run_reports.raw_archives("a.b") == ["a.b", "a.b.tar.gz"]          # a directory archive, and a tar.gz
    assert run_reports.raw_archives("c") == []


def test_a_run_with_no_baseline_says_so_and_is_not_scored():
    doc = {**_doc(), "schema_version": 2, "verdict": "no_baseline", "score": None, "flagged_counters": [],
           "cause": {"label": None, "probability": None, "known": False}, "baseline_runs": [],
           "baseline_status": "none"}
    doc["details"] = {**doc["details"], "no_baseline": "no verified passed run of this system"}
    assert summary.plain_summary(doc, {}) == "Not judged: no verified passed run of this system."
    html = pages.render_run(doc, {"version": "1", "started_at": "2026", "environment": {}}, None,
                            pages.RunPage(baseline_envs={}, raw_href="x", raw_name="x"))
    assert 'id="no-baseline"' in html and "not judged" in html and "--verdict pass|fail" in html
    rows = [{**pages.index_row(doc), "change": "new"}, {**pages.index_row(_doc()), "change": "new"}]
    index = pages.render_index(rows, pages.NightIndex(night="n", generated="g", quarantined=[]))
    assert 'id="no-baseline-count">1 run(s) not judged' in index and "1 of 2 runs regressed" in index


def test_a_run_compared_with_runs_verified_after_it_says_so():
    doc = _doc()
    doc["details"] = {**doc["details"], "baseline_origin": "later"}
    html = pages.render_run(doc, {"version": "1", "started_at": "2026", "environment": {}}, None,
                            pages.RunPage(baseline_envs={}, raw_href="x", raw_name="x"))
    assert 'id="later-baseline"' in html and "verified since, which started later" in html
    assert "Compared with runs verified after it" in summary.plain_summary({**doc, "verdict": "pass"}, {})


def test_a_run_compared_with_its_own_labs_later_runs_says_so():
    doc = _doc()
    doc["details"] = {**doc["details"], "baseline_origin": "later_lab"}
    html = pages.render_run(doc, {"version": "1", "started_at": "2026", "environment": {}}, None,
                            pages.RunPage(baseline_envs={}, raw_href="x", raw_name="x"))
    assert 'id="later-lab-baseline"' in html and 'id="later-baseline"' not in html
    assert "Compared with runs of its own lab verified after it" in summary.plain_summary(
        {**doc, "verdict": "pass"}, {})


def test_a_run_judged_against_itself_says_where_in_the_run_it_changed():
    meta = {"version": "1", "started_at": "2026", "environment": {}}
    doc = _doc()
    doc["flagged_counters"] = ["app.latency_ms"]
    doc["methods"]["within_run"] = {
        "verdict": "fail", "score": 4.0, "p_value": 0.002, "normal_runs": 30, "false_alarm_rate": 0.05,
        "flagged_counters": ["app.latency_ms"],
        "changes": {"app.latency_ms": {"change_pct": 150.0, "ratio": 4.0, "window": [2, 4], "window_median": 50.0,
                                       "rest_median": 20.0}}}
    doc["details"] = {**doc["details"], "combined_detectors": ["within_run"],
                      "set_aside_detectors": {"stacking": "its p-value compares this adjusted run with normal runs "
                                                          "judged inside their own lab"}}
    text = summary.plain_summary(doc, {}, directions=[{"counter": "latency", "worse": "up"}])
    # 20 -> 50 is +150 % of the rest of the run, in intervals 3-5 (counted from 1)
    assert text.startswith("Regression within the run: app.latency_ms 20 ms → 50 ms in intervals 3–5 of the run "
                           "(+150 %, worse)")
    html = pages.render_run(doc, meta, None, pages.RunPage(baseline_envs={}, raw_href="x", raw_name="x"))
    row = re.search(r"<tr><td>within_run</td>.*?</tr>", html, re.S).group(0)
    assert "p = 0.002" in row and "30 normal runs" in row and "4.00 ×" in row
    assert 'id="within-run"' in html and 'id="set-aside-detectors"' in html
    assert "The verdict rests on the run against itself" in html
    calm = {**doc, "verdict": "pass", "flagged_counters": []}
    assert summary.plain_summary(calm, {}).startswith("No regression found within the run; it was not compared")
    assert "that counter's largest in the normal runs" in row and "in any component" not in row
    # limits of the counter's metric in any component (the system's record chose them): the page says so
    doc["methods"]["within_run"]["limits_by"] = "metric"
    html = pages.render_run(doc, meta, None, pages.RunPage(baseline_envs={}, raw_href="x", raw_name="x"))
    row = re.search(r"<tr><td>within_run</td>.*?</tr>", html, re.S).group(0)
    assert "the largest change of that counter's metric in any component of the normal runs" in row
    assert "more than their metric did in any component of any normal run" in html


def test_the_page_gives_each_detectors_share_of_the_rate_and_where_it_came_from():
    meta = {"version": "1", "started_at": "2026", "environment": {}}
    doc = _doc()
    doc["details"] = {**doc["details"], "detector_weights": {
        "faults": 3, "caught": {"stacking": 3, "control_charts": 0}, "weights": {"stacking": 1.6, "control_charts": 0.4}}}
    html = pages.render_run(doc, meta, None, pages.RunPage(baseline_envs={}, raw_href="x", raw_name="x"))
    shares = re.search(r'<p id="detector-weights".*?</p>', html, re.S).group(0)
    assert "3 verified fault run(s)" in shares
    assert "<code>stacking</code> 1.60 (3 caught)" in shares and "<code>control_charts</code> 0.40 (0 caught)" in shares
    equal = pages.render_run(_doc(), meta, None, pages.RunPage(baseline_envs={}, raw_href="x", raw_name="x"))
    assert 'id="detector-weights"' not in equal


def test_a_top_counter_shows_the_size_judged_when_it_differs_from_the_medians_change():
    # the medians moved +1.0 % (660,300 -> 666,700) but the strongest window +5.4 %: that size made the flag count
    assert pages.change_cell({"baseline": 660300.0, "target": 666700.0, "change_pct": 1.0}, 0.0537) == \
        "+1.0 % (+5.4 % at its strongest)"
    assert pages.change_cell({"baseline": 100.0, "target": 110.0, "change_pct": 10.0}, 0.104) == "+10.0 %"   # within a point
    assert pages.change_cell({"baseline": 100.0, "target": 110.0, "change_pct": 10.0}, None) == "+10.0 %"
    assert pages.change_cell(None, 0.2) == "—"


def test_only_a_flagged_counter_shows_its_size_at_its_strongest():
    doc = _doc()
    flagged = doc["flagged_counters"][0]
    doc["counter_scores"]["calm.cpu_pct"] = 0.1
    doc["details"]["effects"] = {flagged: 0.2, "calm.cpu_pct": 0.2}
    changes = {flagged: {"baseline": 100.0, "target": 101.0, "change_pct": 1.0, "direction": "worse"},
               "calm.cpu_pct": {"baseline": 50.0, "target": 50.5, "change_pct": 1.0, "direction": "changed"}}
    html = pages.render_run(doc, {"version": "1", "started_at": "2026", "environment": {}}, None,
                            pages.RunPage(baseline_envs={}, raw_href="x", raw_name="x",
                                          changes=changes))
    rows = re.findall(r"<tr(?: class=\"flagged\")?><td>.*?</tr>", html.split('id="top-counters"')[1].split("</table>")[0], re.S)
    assert len(rows) == 2
    assert "+1.0 % (+20.0 % at its strongest)" in next(r for r in rows if 'class="flagged"' in r)
    calm = next(r for r in rows if "calm.cpu_pct" in r)
    assert "+1.0 %" in calm and "at its strongest" not in calm


def test_a_failed_night_opens_the_index_once_escaped_and_says_what_the_rest_is():
    from pipelines.reporting.pages import mark_night_failed

    earlier = "<html><head><title>regresslab — night 2026-11-25</title></head><body><main>\n<h1>night 2026-11-25</h1>"
    once = mark_night_failed(earlier, night="2026-11-26", stage="pull", reason="source <b>/mnt/x</b>:\n  gone")
    body = once[once.index("<main>") + 6:].strip()
    assert body.startswith('<!-- regresslab:night-failed --><div class="banner fail" id="night-failed"><div class="v">'
                           'Night 2026-11-26 FAILED at pull')
    assert "source &lt;b&gt;/mnt/x&lt;/b&gt;: gone" in body and "<b>/mnt" not in once
    assert "last night analysed, not tonight" in body and "<h1>night 2026-11-25</h1>" in body
    twice = mark_night_failed(once, night="2026-11-27", stage="validate", reason="disk full")
    assert twice.count('id="night-failed"') == 1 and "2026-11-27 FAILED at validate" in twice
    assert "<title>regresslab — night 2026-11-27 FAILED</title>" in twice
    # a third failure, a night label with a backslash (a replacement template would choke on it) and a
    # reason with tags: one banner, the latest, nothing of the earlier reasons left, the tags balanced
    thrice = mark_night_failed(twice, night="2026\\11\\28", stage="report", reason="</div></div><div>x")
    assert thrice.count('id="night-failed"') == 1 and "disk full" not in thrice and "gone" not in thrice
    assert "2026\\11\\28 FAILED at report" in thrice
    assert thrice.count("<div") == thrice.count("</div>") and thrice.count("<title>") == 1
    banner = thrice[thrice.index("<!-- regresslab"):thrice.index("-->\n<h1>") + 4]
    assert thrice.replace(banner, "").split("<main>")[1] == earlier.split("<main>")[1]      # the page below, as it was
    fresh = mark_night_failed(None, night="2026-11-26", stage="pull", reason="gone")
    assert "FAILED at pull" in fresh and "No run was analysed tonight." in fresh and "last night" not in fresh


def test_run_page_says_when_the_counters_follow_the_predicted_causes_signature():
    doc = _doc()
    page = pages.RunPage(baseline_envs={}, raw_href="../../data/raw/x.tar.gz", raw_name="x.tar.gz")
    meta = {"version": "1", "started_at": "2026", "environment": {}}
    assert 'id="cause-signature"' not in pages.render_run(doc, meta, None, page)
    doc["details"]["cause_signature"] = {"cause": f"c{EVIL}", "kinds": ["cpu_usage_m", f"k{EVIL}"], "runs": 3}
    html = pages.render_run(doc, meta, None, page)
    assert 'id="cause-signature"' in html and "history’s 3 verified" in html and "<code>cpu_usage_m</code>" in html
    assert "<script" not in html
    assert "the nearest cause, not certain" in html                 # the cause is not known (_doc)
    doc["cause"]["known"] = True
    assert "the nearest cause, not certain" not in pages.render_run(doc, meta, None, page)


def test_a_changed_template_changes_the_pages_input_key(tmp_path):
    """A run page is rendered again when a template or the style sheet changes (its key holds their
    digest), and only then."""
    (tmp_path / "run.html.j2").write_text("<p>{{ doc.run_id }}</p>")
    (tmp_path / "style.css").write_text("p { color: black }")
    first = pages.templates_digest.__wrapped__(tmp_path)
    assert pages.templates_digest.__wrapped__(tmp_path) == first
    (tmp_path / "style.css").write_text("p { color: red }")
    assert pages.templates_digest.__wrapped__(tmp_path) != first
    (tmp_path / "style.css").write_text("p { color: black }")
    assert pages.templates_digest.__wrapped__(tmp_path) == first
    (tmp_path / "new.html.j2").write_text("")
    assert pages.templates_digest.__wrapped__(tmp_path) != first


def test_run_changes_read_whole_only_the_frames_a_compare_page_shows(tree):
    """Target t (cpu 12 for 4 intervals), baseline runs a (cpu 8, 10, 12, 14) and b (cpu 10 x4):
    the baseline's median over 8 intervals is 10, the target's 12, +20 %; the sparkline has
    a's median 11, b's 10, then 12. Only b asked whole: the frames returned are t's and b's,
    each with every counter; a was read for its shown counter only, and the changes are the same
    as with every frame whole.  A frame handed in already read is used as it is."""
    import pandas as pd

    from pipelines import config
    from pipelines.storage import atomic
    frames = {"t": {"h.cpu": [12.0] * 4, "h.mem": [1.0] * 4}, "a": {"h.cpu": [8.0, 10.0, 12.0, 14.0], "h.mem": [2.0] * 4},
              "b": {"h.cpu": [10.0] * 4, "h.mem": [3.0] * 4}}
    for run_id, columns in frames.items():
        config.frame_path(run_id).parent.mkdir(parents=True, exist_ok=True)
        atomic.write_parquet_atomic(config.frame_path(run_id), pd.DataFrame(columns))
    directions = [{"counter": "cpu", "worse": "up"}]
    changes, trends, read = run_reports.run_changes("t", ["a", "b"], ["h.cpu"], directions, whole={"b"})
    assert set(read) == {"t", "b"} and all(list(f.columns) == ["h.cpu", "h.mem"] for f in read.values())
    assert changes["h.cpu"] == {"baseline": 10.0, "target": 12.0, "change_pct": 20.0, "direction": "worse"}
    everything = run_reports.run_changes("t", ["a", "b"], ["h.cpu"], directions, whole={"a", "b"})
    assert (changes, trends) == everything[:2] and set(everything[2]) == {"t", "a", "b"}
    assert trends == {"h.cpu": plots.sparkline([11.0, 10.0, 12.0])}
    # frames already read whole (the anchor's) are used, not read again: a's given here as cpu 20 x4,
    # the file's 8..14 never read: the baseline's median over a's 20s and b's 10s is 15, the target -20 %
    known = {"a": pd.DataFrame({"h.cpu": [20.0] * 4, "h.mem": [2.0] * 4})}
    again = run_reports.run_changes("t", ["a", "b"], ["h.cpu"], directions, whole={"b"}, read=known)
    assert again[0]["h.cpu"]["baseline"] == 15.0 and again[0]["h.cpu"]["change_pct"] == -20.0
