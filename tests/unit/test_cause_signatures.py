"""A failed run's counters in the order that explains it: the signature of its predicted cause,
learned from the history's verified faults, taken in turn with the detectors' order."""
from __future__ import annotations

from pipelines.verdict import cause_signatures as cs
from pipelines.detection import stage_results
from pipelines.verdict import headline

INDEX = {
    # two verified CPU faults, in different services: their labels name CPU counters
    "h1": {"system": "shop", "verdict": "fail", "cause": "cpu_hog",
           "regressed_counters": ["cart.cpu_usage_m", "cart.cpu_usage_rate_pct"]},
    "h2": {"system": "shop", "verdict": "fail", "cause": "cpu_hog", "regressed_counters": ["ads.cpu_usage_m"]},
    # a code fault names no counter; a normal run; a target (not verified); another system
    "h3": {"system": "shop", "verdict": "fail", "cause": "exception", "regressed_counters": []},
    "h4": {"system": "shop", "verdict": "pass", "cause": "none", "regressed_counters": []},
    "t1": {"system": "shop", "verdict": None, "cause": None, "regressed_counters": []},
    "o1": {"system": "other", "verdict": "fail", "cause": "cpu_hog", "regressed_counters": ["db.load_avg"]},
}


def test_fault_labels_are_the_systems_verified_faults_that_name_counters():
    labels = cs.fault_labels(INDEX, "shop")
    assert sorted(labels) == ["h1", "h2"]
    assert labels["h1"] == cs.FaultLabel("cpu_hog", ("cart.cpu_usage_m", "cart.cpu_usage_rate_pct"))


def test_a_signature_is_the_kinds_its_causes_faults_named_and_a_run_never_explains_itself():
    labels = cs.fault_labels(INDEX, "shop")
    sig = cs.signature(labels, "cpu_hog")
    assert sig == cs.Signature("cpu_hog", frozenset({"cpu_usage_m", "cpu_usage_rate_pct"}), 2)
    assert sig.names("frontend.cpu_usage_m") and not sig.names("frontend.latency_p90_s")
    assert sig.counters == frozenset()              # each counter named by one fault of two: no majority
    # h1 judged in leave-one-out: only h2's label is left, and its counter is the signature's own
    assert cs.signature(labels, "cpu_hog", leave_out="h1") == cs.Signature("cpu_hog", frozenset({"cpu_usage_m"}), 1,
                                                                           frozenset({"ads.cpu_usage_m"}))
    assert cs.signature(labels, "cpu_hog", leave_out="h1").kinds == {"cpu_usage_m"}
    assert cs.signature(labels, "exception") is None and cs.signature(labels, None) is None


def test_the_signatures_counters_come_in_turn_with_the_detectors_order():
    sig = cs.Signature("cpu_hog", frozenset({"cpu_usage_m"}), 2)
    flagged = ["frontend.latency_p90_s", "entry.latency_p50_s", "cart.cpu_usage_m", "frontend.latency_p99_s",
               "ads.cpu_usage_m"]
    assert cs.explain_order(flagged, sig) == ["cart.cpu_usage_m", "frontend.latency_p90_s", "ads.cpu_usage_m",
                                              "entry.latency_p50_s", "frontend.latency_p99_s"]
    # nothing of the signature flagged, or no signature: the detectors' order as it was
    assert cs.explain_order(flagged[:2], sig) == flagged[:2]
    assert cs.explain_order(flagged, None) == flagged


def test_the_verdict_file_shows_a_failed_runs_counters_in_the_order_of_its_predicted_cause():
    lab = {"status": "same_lab", "lab_runs": [], "reason": None, "largest_shifts": {}}
    counters = ["frontend.latency_p90_s", "entry.latency_p50_s", "cart.cpu_usage_m"]
    scores = {"frontend.latency_p90_s": 0.9, "entry.latency_p50_s": 0.8, "cart.cpu_usage_m": 0.7}
    det = {"run_id": "t1", "system": "shop", "baseline_runs": [{"run_id": "h4", "weight": 1.0}],
           "counter_scores": scores, "details": {"lab": lab, "effects": {c: 0.5 for c in counters}},
           "methods": {k: {"verdict": "fail", "flagged_counters": counters, "p_value": 0.001}
                       for k in stage_results.RULE_METHODS}}
    predicted = {"label": "cpu_hog", "known": True, "probability": 0.9, "none_probability": 0.1,
                 "fault": {"label": "cpu_hog", "probability": 0.9}}
    rule = headline.HeadlineRule(verdict_rule="all", detectors=("stacking",))
    doc = stage_results.verdict_of(stage_results.StageDocs(det, None, predicted), rule,
                                   fault_labels=cs.fault_labels(INDEX, "shop"))
    assert doc["verdict"] == "fail" and doc["cause"]["label"] == "cpu_hog"
    assert doc["flagged_counters"] == ["cart.cpu_usage_m", "frontend.latency_p90_s", "entry.latency_p50_s"]
    assert doc["details"]["cause_signature"] == {"cause": "cpu_hog", "counters": [],
                                                 "kinds": ["cpu_usage_m", "cpu_usage_rate_pct"], "runs": 2}
    # without the history's labels: the detectors' order, and no signature on the page
    plain = stage_results.verdict_of(stage_results.StageDocs(det, None, predicted), rule)
    assert plain["flagged_counters"] == counters and "cause_signature" not in plain["details"]


SOCK_SHOP = {   # four verified orders-cpu faults, each naming orders.cpu; a user-db fault; a normal run
    **{f"o{i}": {"system": "sock", "verdict": "fail", "cause": "orders-cpu", "regressed_counters": ["orders.cpu"]}
       for i in range(4)},
    "u0": {"system": "sock", "verdict": "fail", "cause": "user-db-cpu", "regressed_counters": ["user_db.cpu"]},
    "n0": {"system": "sock", "verdict": "pass", "cause": "none", "regressed_counters": []},
}


def test_a_cause_whose_faults_all_name_one_counter_shows_it_first_flagged_first_or_not():
    """The four orders-cpu faults all name orders.cpu: that counter is the signature (not every *.cpu,
    of which user_db.cpu is one).  On a new orders-cpu fault whose detectors put user_db.cpu first and
    orders.cpu third, orders.cpu comes first; when no detector flagged it but the run moved it enough
    to matter (its score and change), it is shown, first."""
    labels = cs.fault_labels(SOCK_SHOP, "sock")
    sig = cs.signature(labels, "orders-cpu")
    assert sig.counters == {"orders.cpu"} and sig.kinds == {"cpu"} and sig.runs == 4
    flagged = ["user_db.cpu", "front_end.latency", "orders.cpu", "carts.cpu"]
    assert cs.explain_order(flagged, sig) == ["orders.cpu", "user_db.cpu", "front_end.latency", "carts.cpu"]
    lab = {"status": "same_lab", "lab_runs": [], "reason": None, "largest_shifts": {}}
    shown = ["user_db.cpu", "front_end.latency"]
    scores = {"user_db.cpu": 0.9, "front_end.latency": 0.8, "orders.cpu": 0.4, "queue.depth": 0.3}
    det = {"run_id": "t1", "system": "sock", "baseline_runs": [{"run_id": "n0", "weight": 1.0}],
           "counter_scores": scores,
           "details": {"lab": lab, "effects": {"user_db.cpu": -5.0, "front_end.latency": 40.0, "orders.cpu": 230.0,
                                               "queue.depth": 1.0}},
           "methods": {k: {"verdict": "fail", "flagged_counters": shown, "p_value": 0.001}
                       for k in stage_results.RULE_METHODS}}
    predicted = {"label": "orders-cpu", "known": True, "probability": 0.95, "none_probability": 0.05,
                 "fault": {"label": "orders-cpu", "probability": 0.95}}
    rule = headline.HeadlineRule(verdict_rule="all", detectors=("stacking",), min_effect_pct=5.0)
    doc = stage_results.verdict_of(stage_results.StageDocs(det, None, predicted), rule, fault_labels=labels)
    assert doc["flagged_counters"][0] == "orders.cpu" and set(doc["flagged_counters"]) == {
        "orders.cpu", "user_db.cpu", "front_end.latency"}                  # queue.depth: 1 %, too small to show
    assert doc["details"]["cause_signature"]["counters"] == ["orders.cpu"]
    elsewhere = dict(predicted, fault={"label": "user-db-cpu", "probability": 0.9}, label="user-db-cpu")
    other = stage_results.verdict_of(stage_results.StageDocs(det, None, elsewhere), rule, fault_labels=labels)
    assert other["flagged_counters"][0] == "user_db.cpu" and "orders.cpu" not in other["flagged_counters"]
