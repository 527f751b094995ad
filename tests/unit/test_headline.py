"""The headline decision: verdict rule, counter scores, cause, flagged counters."""
from __future__ import annotations

import pytest
from pipelines.detection import stage_results
from pipelines.detectors.causes import reader as causes_reader

from pipelines.verdict import headline
from pipelines.verdict.cause import cause_of, fault_pattern
from pipelines.verdict.decision import calibrated_verdict, fault_weights, headline_verdict
from pipelines.verdict.evidence import combine_scores
from pipelines.verdict.rule import PARAM_FIELDS

BASELINE = [{"run_id": "b", "weight": 1.0}]


# what these tests exercise unless they say otherwise: every detector that judged the run combined
# with equal shares, no record, no practical-change floor (the defaults file's rule adds all three)
PLAIN = {"detectors": None, "detector_weights": "equal", "trust": "none", "min_effect_pct": 0.0}


def compose(detection, charts, predicted, *, clustered=None, **rule):
    """The verdict file (JSON) of ``stage_results.verdict_of`` under :data:`PLAIN` and ``rule``'s keywords."""
    return stage_results.verdict_of(stage_results.StageDocs(detection, charts, predicted, clustered=clustered),
                                    headline.HeadlineRule(**{**PLAIN, **rule}))


@pytest.mark.parametrize("rule,stacking,charts,expected", [
    ("all", "fail", "fail", "fail"), ("all", "fail", "pass", "pass"), ("all", "fail", None, "fail"),
    ("any", "pass", "fail", "fail"), ("any", "pass", "pass", "pass"),
    ("stacking", "fail", "pass", "fail"), ("control_charts", "fail", "pass", "pass"),
])
def test_headline_verdict(rule, stacking, charts, expected):
    assert headline_verdict({"stacking": stacking, "control_charts": charts}, rule) == expected


def test_the_rule_is_built_once_from_params_and_checked():
    params = {"verdict_rule": "calibrated", "flag_rule": "union", "false_alarm_rate": "0.01",
              "headline_detectors": ["stacking", "control_charts"], "classifier_resolution": 0.02,
              "combination": "bonferroni", "detector_weights": "faults"}
    rule = headline.HeadlineRule.from_params(params)
    assert rule == headline.HeadlineRule("calibrated", "union", 0.01, ("stacking", "control_charts"), 0.02, "bonferroni",
                                         detector_weights="faults")
    with pytest.raises(ValueError, match="flag_rule"):
        headline.HeadlineRule.from_params({**params, "flag_rule": "vote"})
    with pytest.raises(ValueError, match="detector_weights"):
        headline.HeadlineRule.from_params({**params, "detector_weights": "votes"})


def test_the_verdict_file_keeps_the_contract_order_and_adds_the_report_fields_once_set():
    det = {"run_id": "r", "system": "s", "baseline_runs": BASELINE, "counter_scores": {"a": 0.6}, "details": {},
           "methods": {k: {"verdict": "pass", "flagged_counters": []} for k in stage_results.RULE_METHODS}}
    verdict = stage_results.verdict_of(stage_results.StageDocs(det),
                                       headline.HeadlineRule(**{**PLAIN, "verdict_rule": "all"}))
    assert list(verdict) == ["schema_version", "run_id", "system", "verdict", "score", "flagged_counters",
                             "counter_scores", "cause", "baseline_runs", "baseline_status", "p_value",
                             "methods", "details"]
    verdict["summary"] = "No regression found."
    assert list(verdict)[-1] == "summary" and verdict["verdict"] == "pass"


def test_headline_rule_must_be_known():
    with pytest.raises(ValueError):
        headline_verdict({"stacking": "fail", "control_charts": "pass"}, "most")


def test_counter_scores_are_the_mean_over_methods_that_scored_the_counter():
    out = combine_scores({"a": 0.2, "b": 1.0}, {"a": 0.6, "c": 0.1})
    assert out == {"b": 1.0, "a": pytest.approx(0.4), "c": 0.1}
    assert list(out) == ["b", "a", "c"]


def test_cause_of_a_failed_run_is_a_fault_and_known_only_when_the_classifier_agrees():
    pred = {"label": "none", "probability": 0.6, "known": False, "fault": {"label": "cpu", "probability": 0.7},
            "none_probability": 0.6}
    assert cause_of("fail", pred) == {"label": "cpu", "probability": 0.7, "known": False}
    sure = {**pred, "label": "cpu", "known": True}
    assert cause_of("fail", sure)["known"] is True
    assert cause_of("pass", pred) == {"label": "none", "probability": 0.6, "known": True}
    assert cause_of("fail", None) == {"label": None, "probability": None, "known": False}


def test_flag_rule_rules_keeps_stacking_flags_and_falls_back_to_the_charts():
    det = {"run_id": "s-1", "system": "s", "counter_scores": {"a": 0.9, "b": 0.2, "c": 0.1}, "baseline_runs": BASELINE,
           "methods": {k: {"verdict": "fail", "flagged_counters": ["a"]} for k in stage_results.RULE_METHODS}}
    charts = {"verdict": "fail", "violation_ratio": 0.3, "threshold": 0.1, "flagged_counters": ["b", "c"],
              "load_independent_counters": [], "baseline_runs": BASELINE, "counter_scores": {"a": 0.5, "b": 0.4, "c": 0.3}}
    union = compose(det, charts, None, verdict_rule="all", flag_rule="union", false_alarm_rate=0.05)
    rules = compose(det, charts, None, verdict_rule="all", flag_rule="rules", false_alarm_rate=0.05)
    assert set(union["flagged_counters"]) == {"a", "b", "c"} and rules["flagged_counters"] == ["a"]
    passed_rules = {**det, "methods": {k: {"verdict": "pass", "flagged_counters": []} for k in stage_results.RULE_METHODS}}
    either = compose(passed_rules, charts, None, verdict_rule="any", flag_rule="rules", false_alarm_rate=0.05)
    assert either["verdict"] == "fail" and set(either["flagged_counters"]) == {"b", "c"}
    with pytest.raises(ValueError, match="flag_rule"):
        compose(det, charts, None, verdict_rule="all", flag_rule="vote", false_alarm_rate=0.05)


@pytest.mark.parametrize("p_stacking,p_charts,expected,combined", [
    (0.02, 0.30, "fail", 0.04),     # 2 x 0.02 <= 0.05: strong rules evidence fails the run; `all` would pass it
    (0.03, 0.04, "pass", 0.06),     # 2 x 0.03 > 0.05: two weak signals do not make a failure
    (None, 0.01, "fail", 0.01),     # one calibrated detector: its own p-value, no correction
    (0.60, 0.90, "pass", 1.0),
])
def test_calibrated_verdict_is_bonferroni_over_the_detectors(p_stacking, p_charts, expected, combined):
    verdict, p = calibrated_verdict({"stacking": "pass", "control_charts": "pass"},
                                             {"stacking": p_stacking, "control_charts": p_charts}, 0.05,
                                             "bonferroni")
    assert verdict == expected and p == pytest.approx(combined)


@pytest.mark.parametrize("p_stacking,p_charts,expected,combined", [
    (0.02, 0.30, "fail", 0.04),     # min(2 x 0.02 / 1, 2 x 0.30 / 2) = 0.04: Bonferroni's term decides
    (0.03, 0.04, "fail", 0.04),     # min(2 x 0.03 / 1, 2 x 0.04 / 2) = min(0.06, 0.04): both saw part of it
    (0.03, 0.06, "pass", 0.06),     # min(0.06, 0.06) > 0.05
    (None, 0.01, "fail", 0.01),
])
def test_calibrated_verdict_by_simes_adds_up_detectors_that_each_see_part(p_stacking, p_charts, expected, combined):
    verdict, p = calibrated_verdict({"stacking": "pass", "control_charts": "pass"},
                                             {"stacking": p_stacking, "control_charts": p_charts}, 0.05, "simes")
    assert verdict == expected and p == pytest.approx(combined)


def test_calibrated_verdict_without_any_calibration_falls_back_to_all():
    both = {"stacking": "fail", "control_charts": "fail"}
    assert calibrated_verdict(both, {"stacking": None, "control_charts": float("nan")}, 0.05) == ("fail", None)
    assert calibrated_verdict({**both, "control_charts": "pass"}, {}, 0.05) == ("pass", None)


def test_a_calibrated_failure_names_the_counters_over_their_limits():
    """Neither method failed the run on its own, but their combined evidence did: the verdict file
    still names what moved (bagging's counters, the charts' counters over their limits)."""
    det = {"run_id": "s-1", "system": "s", "counter_scores": {"a": 0.9, "b": 0.2}, "baseline_runs": BASELINE,
           "methods": {"association_rules_stacking": {"verdict": "pass", "flagged_counters": [], "p_value": 0.01},
                       "association_rules_bagging": {"verdict": "fail", "flagged_counters": ["a"]},
                       "association_rules_single": {"verdict": "pass", "flagged_counters": []}}}
    charts = {"verdict": "pass", "violation_ratio": 0.1, "threshold": 0.2, "flagged_counters": [], "p_value": 0.2,
              "counters_over_limit": ["b"], "load_independent_counters": [], "baseline_runs": BASELINE,
              "counter_scores": {"a": 0.1, "b": 0.8}}
    doc = compose(det, charts, None, verdict_rule="calibrated", flag_rule="union", false_alarm_rate=0.05,
                           combination="bonferroni")
    assert doc["verdict"] == "fail" and doc["p_value"] == pytest.approx(0.02)
    assert set(doc["flagged_counters"]) == {"a", "b"}
    assert doc["baseline_status"] == "same_lab"
    assert compose(det, charts, None, verdict_rule="all", flag_rule="union",
                            false_alarm_rate=0.05)["verdict"] == "pass"
    with pytest.raises(ValueError, match="verdict_rule"):
        compose(det, charts, None, verdict_rule="most", flag_rule="union", false_alarm_rate=0.05)


def test_the_cluster_models_join_the_calibrated_decision_and_name_their_counters():
    """With the clusters' p-value the factor is 3.  Stacking 0.40,
    charts 0.30, clusters 0.01: 3 x 0.01 = 0.03 <= 0.05 fails the run (Simes' other terms,
    3 x 0.30 / 2 and 0.40, are larger, so Bonferroni's term decides); neither the rules nor
    the charts flagged a counter, so the failing clusters' counters are the flagged ones.
    Clusters at 0.02 give 3 x 0.02 = 0.06: a pass."""
    det = {"run_id": "s-1", "system": "s", "counter_scores": {"a": 0.1, "b": 0.1}, "baseline_runs": BASELINE,
           "methods": {k: {"verdict": "pass", "flagged_counters": [], "p_value": 0.40} for k in stage_results.RULE_METHODS}}
    charts = {"verdict": "pass", "violation_ratio": 0.05, "threshold": 0.1, "flagged_counters": [],
              "load_independent_counters": [], "baseline_runs": BASELINE, "counter_scores": {"a": 0.0}, "p_value": 0.30}
    clustered = {"verdict": "fail", "p_value": 0.01, "max_prediction_error": 0.8, "max_excess_error": 0.7,
                 "error_threshold": 0.2, "flagged_counters": ["io.read_bytes", "cpu.sys_pct"],
                 "clusters": [{"counters": ["cpu.sys_pct", "io.read_bytes"], "target_counter": "io.read_bytes",
                               "ks_p_value": 0.001, "error": 0.8, "baseline_error": 0.1, "excess_error": 0.7,
                               "regression": True}]}
    doc = compose(det, charts, None, clustered=clustered, verdict_rule="calibrated", flag_rule="union",
                           false_alarm_rate=0.05)
    assert doc["verdict"] == "fail" and doc["p_value"] == pytest.approx(0.03)
    assert doc["flagged_counters"] == ["io.read_bytes", "cpu.sys_pct"]
    assert doc["methods"]["clustered_regression"]["max_prediction_error"] == 0.8     # the contract's key
    weaker = compose(det, charts, None, clustered={**clustered, "p_value": 0.02}, verdict_rule="calibrated",
                              flag_rule="union", false_alarm_rate=0.05)
    assert weaker["verdict"] == "pass" and weaker["p_value"] == pytest.approx(0.06)
    without = compose(det, charts, None, verdict_rule="calibrated", flag_rule="union", false_alarm_rate=0.05)
    assert "clustered_regression" not in without["methods"] and without["verdict"] == "pass"


def test_headline_detectors_chooses_the_p_values_combined():
    det = {"run_id": "s-1", "system": "s", "counter_scores": {"a": 0.1}, "baseline_runs": BASELINE,
           "methods": {k: {"verdict": "pass", "flagged_counters": [], "p_value": 0.03} for k in stage_results.RULE_METHODS}}
    charts = {"verdict": "pass", "violation_ratio": 0.05, "threshold": 0.1, "flagged_counters": [],
              "load_independent_counters": [], "baseline_runs": BASELINE, "counter_scores": {"a": 0.0}, "p_value": 0.9}
    clustered = {"verdict": "pass", "p_value": 0.8, "max_prediction_error": 0.1, "flagged_counters": [], "clusters": []}
    kw = dict(verdict_rule="calibrated", flag_rule="rules", false_alarm_rate=0.05, clustered=clustered)
    assert compose(det, charts, None, **kw)["p_value"] == pytest.approx(0.09)        # 3 x 0.03
    only_rules = compose(det, charts, None, detectors=["stacking"], **kw)
    assert only_rules["p_value"] == pytest.approx(0.03) and only_rules["verdict"] == "fail"
    assert "clustered_regression" in only_rules["methods"]                                    # still reported


def test_a_passed_run_with_a_known_fault_pattern_says_so():
    seen = {"label": "memory_leak", "probability": 0.91, "known": True,
            "fault": {"label": "memory_leak", "probability": 0.91, "runs_of_cause": 3, "few_runs": True}}
    assert fault_pattern("pass", seen) == {"label": "memory_leak", "probability": 0.91, "runs_of_cause": 3}
    # the contract's cause stays none: the verdict is the detectors'
    assert cause_of("pass", {**seen, "none_probability": 0.05})["label"] == "none"
    assert fault_pattern("fail", seen) is None                         # a failure has its cause
    assert fault_pattern("pass", {**seen, "known": False}) is None     # below tau: nothing to say
    assert fault_pattern("pass", {**seen, "label": "none"}) is None
    assert fault_pattern("pass", None) is None


def test_the_cause_classifier_is_a_calibrated_detector_computed_by_hand():
    """The fault score 1 − P(none) against the normal runs' leave-one-out scores.
    Null 0.04, 0.09, 0.19 with resolution 0.01: logs of 0.05, 0.10, 0.20, mean ln 0.10, standard
    deviation ln 2 (equal steps); a score of 0.99 sits at ln 1.00, so t = ln 10 / (ln 2 · sqrt(4/3))
    = 2.8769 on k − 1 = 2 degrees of freedom, whose tail is 1/2 − t / (2 sqrt(t² + 2)) = 0.0513.
    At 0.05 that passes (three normal runs cannot make a near-certain fault significant), at 0.06
    it fails."""
    import math
    t = math.log(10) / (math.log(2) * math.sqrt(4 / 3))
    expected = 0.5 - t / (2 * math.sqrt(t * t + 2))
    predicted = {"fault_score": 0.99, "null_fault_scores": [0.04, 0.09, 0.19]}
    ev = causes_reader.classifier_evidence(predicted, "same_lab", resolution=0.01, false_alarm_rate=0.05)
    assert ev["p_value"] == pytest.approx(expected, abs=1e-6) and expected == pytest.approx(0.0513, abs=1e-4)
    assert ev["verdict"] == "pass" and ev["null_runs"] == 3 and ev["abstained"] is None
    assert causes_reader.classifier_evidence(predicted, "same_lab", resolution=0.01,
                                             false_alarm_rate=0.06)["verdict"] == "fail"
    # a score of 0.65 is below one normal run's (0.70): p is at least 1/4 whatever the fitted tail says
    odd = {**predicted, "null_fault_scores": [0.04, 0.09, 0.70]}
    low = causes_reader.classifier_evidence({**odd, "fault_score": 0.65}, "same_lab", resolution=0.01,
                                            false_alarm_rate=0.05)
    assert low["p_value"] >= 0.25
    # a run the classifier finds more probably normal (0.30 <= 1/2) gives no evidence, however far
    # above the normal runs' scores: p = 1
    normalish = causes_reader.classifier_evidence({**predicted, "fault_score": 0.30}, "same_lab", resolution=0.01,
                                             false_alarm_rate=0.05)
    assert normalish["p_value"] == 1.0 and normalish["verdict"] == "pass"
    # another lab: the classifier's normal class never saw it, so it abstains and says why
    other = causes_reader.classifier_evidence(predicted, "adjusted", resolution=0.01, false_alarm_rate=0.05)
    assert other["verdict"] is None and other["p_value"] is None and "adjusted" in other["abstained"]
    few = causes_reader.classifier_evidence({**predicted, "null_fault_scores": [0.1]}, "same_lab", resolution=0.01,
                                       false_alarm_rate=0.05)
    assert few["verdict"] is None and "too few" in few["abstained"]
    assert causes_reader.classifier_evidence({"label": "none"}, "same_lab", resolution=0.01,
                                             false_alarm_rate=0.05) is None


def test_the_cause_classifier_alone_can_fail_a_run_and_then_its_top_counters_are_shown():
    """Four p-values (stacking 0.5, charts 0.6, clusters 0.7, classifier): Bonferroni factor 4.
    A classifier p of 0.01 gives 4 × 0.01 = 0.04 <= 0.05: the run fails though no counter-level
    method flagged anything, and the flagged counters are the top-scored ones (at most
    FALLBACK_FLAGS, none scored 0).  In another lab the classifier abstains and the factor is 3."""
    det = {"run_id": "s-1", "system": "s", "baseline_runs": BASELINE,
           "counter_scores": {f"c{i}": 0.1 * (9 - i) for i in range(9)},      # c8 scores 0
           "methods": {k: {"verdict": "pass", "flagged_counters": [], "p_value": 0.5} for k in stage_results.RULE_METHODS}}
    charts = {"verdict": "pass", "violation_ratio": 0.05, "threshold": 0.1, "flagged_counters": [],
              "load_independent_counters": [], "baseline_runs": BASELINE, "counter_scores": {}, "p_value": 0.6}
    clustered = {"verdict": "pass", "p_value": 0.7, "max_prediction_error": 0.1, "flagged_counters": [], "clusters": []}
    # null 0.1, 0.1 (every positive score equal): a higher score gets the empirical 1/(k+1) = 1/3
    predicted = {"label": "cpu_hog", "known": True, "probability": 0.9, "fault": {"label": "cpu_hog", "probability": 0.9},
                 "fault_score": 0.95, "null_fault_scores": [0.1, 0.1]}
    kw = dict(verdict_rule="calibrated", flag_rule="rules", false_alarm_rate=0.05, clustered=clustered,
              combination="bonferroni")
    doc = compose(det, charts, predicted, **kw)
    assert doc["methods"]["cause_classifier"]["p_value"] == pytest.approx(1 / 3)
    assert doc["p_value"] == pytest.approx(1.0) and doc["verdict"] == "pass"          # min(1, 4 × 1/3)
    # Simes over the same four: min(4·(1/3)/1, 4·0.5/2, 4·0.6/3, 4·0.7/4) = 0.7, still a pass
    simes = compose(det, charts, predicted, **{**kw, "combination": "simes"})
    assert simes["p_value"] == pytest.approx(0.7) and simes["verdict"] == "pass"
    assert simes["details"]["combination"] == "simes"
    strong = {**predicted, "null_fault_scores": [0.01, 0.02, 0.01, 0.02, 0.015, 0.01, 0.02, 0.01]}
    doc = compose(det, charts, strong, **kw)
    p = doc["methods"]["cause_classifier"]["p_value"]
    assert p <= 0.0125 and doc["p_value"] == pytest.approx(4 * p, abs=1e-6) and doc["verdict"] == "fail"
    assert doc["flagged_counters"] == ["c0", "c1", "c2", "c3", "c4"] and doc["cause"]["label"] == "cpu_hog"
    elsewhere = compose({**det, "details": {"lab": {"status": "adjusted", "lab_runs": [], "reason": "r"}}},
                                 charts, strong, **kw)
    assert elsewhere["methods"]["cause_classifier"]["verdict"] is None
    assert elsewhere["p_value"] == pytest.approx(1.0) and elsewhere["verdict"] == "pass"   # 3 × 0.5


def test_a_run_with_no_passed_run_to_compare_gets_no_baseline():
    det = {"run_id": "r", "system": "s", "baseline_runs": [], "counter_scores": {}, "details": {},
           "methods": {k: {"verdict": "pass", "flagged_counters": []} for k in stage_results.RULE_METHODS}}
    doc = compose(det, None, {"label": "none", "known": True}, verdict_rule="calibrated")
    assert doc["verdict"] == "no_baseline" and doc["schema_version"] == 2 and doc["score"] is None
    assert doc["baseline_status"] == "none" and doc["p_value"] is None
    assert doc["cause"] == {"label": None, "probability": None, "known": False}
    assert "no verified passed run" in doc["details"]["no_baseline"]


def test_an_unusual_run_fails_only_with_a_change_large_enough_to_matter():
    """Stacking p 0.001, charts p 0.002: unusual.  Flagged: memory +1.2 % and a node counter -1.0 %,
    both under the 5 % of min_effect_pct: set aside, the run passes and says why.  With the node
    counter at -45 % it fails, and shows that counter only."""
    def detection(node_change):
        return {"run_id": "r", "system": "s", "baseline_runs": BASELINE,
                "counter_scores": {"pod.memory_mi": 0.9, "pod.node_memory_pct": 0.8},
                "details": {"effects": {"pod.memory_mi": 0.012, "pod.node_memory_pct": node_change},
                            "below_min_effect": {}},
                "methods": {"association_rules_stacking": {"verdict": "fail", "p_value": 0.001,
                                                           "flagged_counters": ["pod.memory_mi", "pod.node_memory_pct"]},
                            "association_rules_bagging": {"verdict": "fail", "flagged_counters": []},
                            "association_rules_single": {"verdict": "pass", "flagged_counters": []}}}
    charts = {"verdict": "fail", "violation_ratio": 0.3, "threshold": 0.1, "p_value": 0.002,
              "flagged_counters": ["pod.memory_mi"], "counters_over_limit": ["pod.memory_mi"],
              "load_independent_counters": [], "baseline_runs": [], "counter_scores": {"pod.memory_mi": 0.7}}
    small = compose(detection(-0.010), charts, None, verdict_rule="calibrated", min_effect_pct=5.0)
    assert small["verdict"] == "pass" and small["flagged_counters"] == []
    assert small["details"]["set_aside_small"] == {"pod.memory_mi": 1.2, "pod.node_memory_pct": -1.0}
    assert small["methods"]["control_charts"]["flagged_counters"] == []
    large = compose(detection(-0.45), charts, None, verdict_rule="calibrated", min_effect_pct=5.0)
    assert large["verdict"] == "fail" and large["flagged_counters"] == ["pod.node_memory_pct"]
    assert large["details"]["set_aside_small"] == {"pod.memory_mi": 1.2}


def adjusted_run(null: str, within: dict | None):
    """A run whose baseline is not of its lab (adjusted), its between-run detectors judged against
    ``null``, and the control charts' result carrying ``within`` (the run against itself)."""
    lab = {"status": "adjusted", "lab_runs": ["l1", "l2", "l3"], "reason": "moved by its lab's level",
           "largest_shifts": {}}
    det = {"run_id": "r", "system": "s", "baseline_runs": BASELINE, "counter_scores": {"a": 0.9, "b": 0.1},
           "details": {"lab": lab, "effects": {"a": 0.5, "b": 0.2}},
           "methods": {k: {"verdict": "fail", "flagged_counters": ["a"], "p_value": 0.001, "null": null}
                       for k in stage_results.RULE_METHODS}}
    charts = {"verdict": "fail", "violation_ratio": 0.4, "threshold": 0.1, "flagged_counters": ["a"], "p_value": 0.002,
              "null": null, "load_independent_counters": [], "baseline_runs": BASELINE, "counter_scores": {"a": 0.8},
              "lab": lab, "within_run": within}
    return det, charts


WITHIN = {"verdict": "pass", "score": 0.8, "p_value": 0.4, "normal_runs": 30, "false_alarm_rate": 0.05,
          "flagged_counters": [], "counters_beyond_limit": [], "changes": {}, "counter_scores": {"b": 0.4}}


def test_an_adjusted_run_with_only_same_lab_nulls_is_judged_by_the_run_against_itself():
    kw = dict(verdict_rule="calibrated", flag_rule="rules", false_alarm_rate=0.05,
              detectors=("stacking", "control_charts", "clustered_regression", "cause_classifier"))
    # stacking 0.001 and the charts 0.002 compare it with runs judged inside their own lab: set aside
    calm = compose(*adjusted_run("same_lab", WITHIN), None, **kw)
    assert calm["verdict"] == "pass" and calm["p_value"] == pytest.approx(0.4)
    assert calm["details"]["combined_detectors"] == ["within_run"]
    assert sorted(calm["details"]["set_aside_detectors"]) == ["control_charts", "stacking"]
    assert calm["score"] == pytest.approx(0.8 / 1.8, abs=1e-4)              # r / (1 + r) of its own score
    inside = {**WITHIN, "verdict": "fail", "score": 6.0, "p_value": 0.01, "flagged_counters": ["b"],
              "counters_beyond_limit": ["b"]}
    loud = compose(*adjusted_run("same_lab", inside), None, **kw)
    assert loud["verdict"] == "fail" and loud["p_value"] == pytest.approx(0.01) and loud["flagged_counters"] == ["b"]
    # with a null measured across labs the between-run detectors judge, and the within-run one is not combined
    across = compose(*adjusted_run("cross_lab", inside), None, **kw)
    assert across["details"]["set_aside_detectors"] == {} and across["p_value"] == pytest.approx(0.002)
    assert across["details"]["combined_detectors"] == ["control_charts", "stacking"]
    assert across["flagged_counters"] == ["a"]
    # named among the headline detectors it always joins: Simes over 0.001, 0.002, 0.01 -> min(3 x 0.001, ...)
    named = compose(*adjusted_run("cross_lab", inside), None, **{**kw, "detectors": kw["detectors"] + ("within_run",)})
    assert named["p_value"] == pytest.approx(0.003)


def test_an_adjusted_run_nothing_can_judge_has_no_baseline():
    doc = compose(*adjusted_run("same_lab", None), None, verdict_rule="calibrated", flag_rule="rules",
                  false_alarm_rate=0.05)
    assert doc["verdict"] == "no_baseline" and doc["score"] is None and doc["schema_version"] == 2
    assert "another lab" in doc["details"]["no_baseline"]


def test_weights_are_learned_from_the_faults_every_detector_judged_by_hand():
    faults = {"stacking": {"f1": 0.01, "f2": 0.20, "f3": 0.04, "f4": 0.01},
              "cause_classifier": {"f1": 0.01, "f2": 0.01, "f3": 0.01},
              "within_run": {"f1": 0.50, "f2": 0.90, "f3": None}}
    out = fault_weights(faults, ["stacking", "cause_classifier", "within_run"], alpha=0.05)
    # judged by all three: f1, f2, f3 (f4 only by stacking); caught: stacking 2, classifier 3, within 0
    # weights (1 + caught) scaled to a mean of 1: 3, 4, 1 over 8, times 3
    assert out["faults"] == 3 and out["caught"] == {"stacking": 2, "cause_classifier": 3, "within_run": 0}
    assert out["weights"] == pytest.approx({"stacking": 9 / 8, "cause_classifier": 12 / 8, "within_run": 3 / 8})
    # in leave-one-out the judged run does not teach its own weight: without f3, stacking 1, classifier 2
    loo = fault_weights(faults, ["stacking", "cause_classifier", "within_run"], alpha=0.05, run_id="f3")
    assert loo["caught"] == {"stacking": 1, "cause_classifier": 2, "within_run": 0}
    assert fault_weights(faults, ["stacking", "control_charts"], alpha=0.05) is None   # no record: equal
    assert fault_weights({"stacking": {}}, ["stacking"], alpha=0.05) is None


def test_a_weighted_combination_gives_the_detectors_that_see_this_systems_faults_more_of_the_rate():
    # equal shares: Simes over 0.02, 0.30 -> min(2 x 0.02, 2 x 0.30 / 2) = 0.04
    verdict, p = calibrated_verdict({}, {"cause_classifier": 0.02, "within_run": 0.30}, 0.05)
    assert (verdict, p) == ("fail", pytest.approx(0.04))
    # weights 1.5 and 0.5: 0.02 / 1.5 and 0.30 / 0.5 -> min(2 x 0.01333, 2 x 0.6 / 2) = 0.02667
    verdict, p = calibrated_verdict({}, {"cause_classifier": 0.02, "within_run": 0.30}, 0.05, "simes",
                                             {"cause_classifier": 1.5, "within_run": 0.5})
    assert p == pytest.approx(2 * 0.02 / 1.5)
    # the other way round the classifier's 0.02 counts for less: min(2 x 0.04, 2 x 0.2 / 2) = 0.08
    verdict, p = calibrated_verdict({}, {"cause_classifier": 0.02, "within_run": 0.30}, 0.05, "simes",
                                             {"cause_classifier": 0.5, "within_run": 1.5})
    assert (verdict, p) == ("pass", pytest.approx(0.08))


def test_compose_weights_the_detectors_by_the_history_faults_they_caught():
    det, charts = adjusted_run("same_lab", None)
    lab = {**det["details"]["lab"], "status": "same_lab"}
    det = {**det, "details": {**det["details"], "lab": lab}}
    det["methods"]["association_rules_stacking"] = {"verdict": "pass", "flagged_counters": [], "p_value": 0.03,
                                                    "history_faults": {"f1": 0.01, "f2": 0.01, "f3": 0.01}}
    charts = {**charts, "lab": lab, "p_value": 0.5, "verdict": "pass", "flagged_counters": [],
              "history_faults": {"f1": 0.6, "f2": 0.7, "f3": 0.8}}
    kw = dict(verdict_rule="calibrated", flag_rule="rules", false_alarm_rate=0.05,
              detectors=("stacking", "control_charts"))
    equal = compose(det, charts, None, **kw)
    assert equal["verdict"] == "pass" and equal["p_value"] == pytest.approx(0.06)      # 2 x 0.03
    weighted = compose(det, charts, None, **kw, detector_weights="faults")
    # stacking caught 3 of 3, the charts none: weights 4/5 x 2 = 1.6 and 1/5 x 2 = 0.4 -> 2 x 0.03 / 1.6
    assert weighted["details"]["detector_weights"]["weights"] == {"stacking": 1.6, "control_charts": 0.4}
    assert weighted["p_value"] == pytest.approx(2 * 0.03 / 1.6) and weighted["verdict"] == "fail"
    assert "history_faults" not in weighted["methods"]["association_rules_stacking"]        # kept out of the file


def test_a_run_not_judged_in_its_own_lab_gets_equal_shares():
    # the history's faults were judged against baselines of their own lab: their weights do not
    # serve a run whose lab is adjusted for (here against the cross-lab null, so nothing is set aside)
    det, charts = adjusted_run("cross_lab", None)
    det["methods"]["association_rules_stacking"] = {"verdict": "pass", "flagged_counters": [], "p_value": 0.03,
                                                    "null": "cross_lab",
                                                    "history_faults": {"f1": 0.01, "f2": 0.01, "f3": 0.01}}
    charts = {**charts, "p_value": 0.5, "verdict": "pass", "flagged_counters": [],
              "history_faults": {"f1": 0.6, "f2": 0.7, "f3": 0.8}}
    doc = compose(det, charts, None, verdict_rule="calibrated", flag_rule="rules", false_alarm_rate=0.05,
                  detectors=("stacking", "control_charts"), detector_weights="faults")
    assert doc["baseline_status"] == "adjusted" and doc["details"]["detector_weights"] is None
    assert doc["verdict"] == "pass" and doc["p_value"] == pytest.approx(0.06)      # 2 x 0.03, as with equal shares


def test_every_setting_of_the_rule_is_a_param_and_its_default_is_the_defaults_files():
    """Each field of the rule is read from a key of params.yaml's ``report`` block (or, the practical
    floor, ``significance.min_effect_pct``), and ``HeadlineRule()`` is what a project that set none of
    them reads: the defaults file's values, typed."""
    import dataclasses

    from pipelines import params_schema

    defaults = params_schema.defaults()
    mapped = {name for name, _ in PARAM_FIELDS.values()}
    assert {f.name for f in dataclasses.fields(headline.HeadlineRule)} == mapped | {"min_effect_pct"}
    assert set(PARAM_FIELDS) <= set(defaults["report"])
    rule = headline.HeadlineRule()
    assert rule == headline.HeadlineRule.from_params(defaults["report"])
    assert rule.trust == defaults["report"]["detector_trust"] and rule.detector_weights == defaults["report"]["detector_weights"]
    assert rule.detectors is None and defaults["report"]["headline_detectors"] is None   # every registered one
    assert rule.min_effect_pct == float(defaults["significance"]["min_effect_pct"])
    assert rule.false_alarm_rate == float(defaults["report"]["false_alarm_rate"])
