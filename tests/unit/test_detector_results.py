"""The verdict from detector records built by hand (pipelines/protocol.py, detection/stage_results.py)."""
from __future__ import annotations

import dataclasses

import pytest

from pipelines.verdict import headline
from pipelines.verdict.decision import Decision, decide_run
from pipelines.verdict.evidence import gather_evidence
from pipelines.detection.stage_results import RULE_METHODS, RunJudged, StageDocs, from_stages
from pipelines.protocol import DetectorResult

NORMALS = [f"n{i}" for i in range(20)]      # enough for the record to weigh the detectors (record.n_min)
FAULTS = [f"f{i}" for i in range(6)]
LAB = {"status": "same_lab", "lab_runs": [], "reason": None, "largest_shifts": {}}


def _rules(verdict: str, p: float, normals: dict, faults: dict) -> DetectorResult:
    page = {k: {"verdict": verdict, "flagged_counters": ["a"], "p_value": p, "null": "same_lab"} for k in RULE_METHODS}
    return DetectorResult(judged=True, verdict=verdict, p_value=p, votes=True, run_score=0.9,
                          counter_scores={"a": 0.9}, flagged_counters=["a"], history_faults=faults,
                          history_normals=normals, page=page, counters="scored", null_kind="same_lab")


def stacking_and_spectral() -> dict[str, DetectorResult]:
    """Stacking failing the run (p 0.001) with a record of 20 failed normal runs, and a detector of
    another kind, ``spectral``, failing it (p 0.004) with none failed and 5 of 6 faults caught."""
    spectral = DetectorResult(judged=True, verdict="fail", p_value=0.004, flagged_counters=["b"],
                              history_normals={r: 0.5 for r in NORMALS},
                              history_faults={f: (0.001 if f != "f5" else 0.3) for f in FAULTS},
                              page={"spectral": {"verdict": "fail", "p_value": 0.004}})
    return {"stacking": _rules("fail", 0.001, {r: 0.01 for r in NORMALS}, {f: 0.01 for f in FAULTS}),
            "spectral": spectral}


def test_a_new_detector_is_a_record_and_the_record_decides():
    """No stage file at all: stacking fails the run (p 0.001) but failed all 20 normal runs of the
    history (p 0.01 each at a rate of 0.05); a detector of another kind, ``spectral``, passed all
    20 and caught 5 of 6 faults, and says fail here (p 0.004): the run fails on ``spectral`` alone,
    p 0.004, and stacking's record is on the page."""
    run = RunJudged(run_id="r", system="s", baseline_runs=[{"run_id": "n0", "weight": 1.0}],
                    details={"lab": LAB, "effects": {"a": 0.5, "b": 0.4}}, lab=LAB)
    results = stacking_and_spectral()
    rule = headline.HeadlineRule(verdict_rule="calibrated", false_alarm_rate=0.05, trust="record", detectors=None)
    doc = headline.compose(run, results, rule)
    assert doc["verdict"] == "fail" and doc["p_value"] == pytest.approx(0.004)
    assert doc["details"]["trust"]["decided_by"] == ["spectral"]
    assert doc["details"]["trust"]["record"]["stacking"]["normal_failed"] == 20
    assert doc["methods"]["spectral"] == {"verdict": "fail", "p_value": 0.004}
    assert doc["details"]["p_values"] == {"stacking": 0.001, "spectral": 0.004}


def test_the_stage_files_become_the_same_records():
    """The edge: a detection and a control-chart file as the stages write them, read as records."""
    det = {"run_id": "r", "system": "s", "baseline_runs": [], "counter_scores": {"a": 0.2, "b": 0.6},
           "details": {"lab": LAB},
           "methods": {k: {"verdict": "pass", "flagged_counters": [], "p_value": 0.3,
                           **({"history_faults": {"f0": 0.01}} if k == RULE_METHODS[0] else {})} for k in RULE_METHODS}}
    charts = {"verdict": "fail", "violation_ratio": 0.3, "threshold": 0.1, "flagged_counters": ["b"],
              "load_independent_counters": [], "p_value": 0.02, "baseline_runs": [], "counter_scores": {"b": 0.7},
              "ratios": {"b": 0.3}, "multimodal": [], "counters_over_limit": ["b"],
              "within_run": {"verdict": None, "reason": "too short", "history_normals": {"n0": 0.4}}}
    run, results = from_stages(StageDocs(det, charts), resolution=0.01, false_alarm_rate=0.05)
    assert run.run_id == "r" and run.lab == LAB and list(results) == ["stacking", "control_charts", "within_run"]
    stacking, chart, within = results["stacking"], results["control_charts"], results["within_run"]
    assert stacking.run_score == 0.6 and stacking.history_faults == {"f0": 0.01}
    assert "history_faults" not in stacking.page[RULE_METHODS[0]]                  # the record is not on the page
    assert chart.judged and chart.run_score == pytest.approx(0.6) and chart.votes   # 2 x the violation ratio
    assert chart.details == {"control_charts": {"ratios": {"b": 0.3}, "multimodal": [], "counters_over_limit": ["b"]}}
    assert chart.reserve_counters == ["b"] and chart.counters == stacking.counters == "scored"
    assert not within.judged and within.reason == "too short" and within.history_normals == {"n0": 0.4}


def test_a_failure_the_cause_classifier_decides_shows_the_counters_that_carried_it():
    """Stacking failed every normal run of the history, so the classifier decides alone (it passed
    them all, caught 5 of 6 faults) and fails the run (p 0.004).  Its evidence names ``orders.cpu``
    (and ``db.cpu``, whose change is too small to matter: 1 % at a 5 % floor); stacking flagged
    ``a``.  The page shows orders.cpu first, then what the others flagged; without any other flag the
    run passes as it did before (the evidence never stands alone, so the verdict cannot change)."""
    run = RunJudged(run_id="r", system="s", baseline_runs=[{"run_id": "n0", "weight": 1.0}],
                    details={"lab": LAB, "effects": {"a": 0.5, "orders.cpu": 2.3, "db.cpu": 0.01}}, lab=LAB)
    classifier = DetectorResult(judged=True, verdict="fail", p_value=0.004,
                                counter_scores={"orders.cpu": 7.5, "db.cpu": 4.0},
                                flagged_counters=["orders.cpu", "db.cpu"],
                                history_normals={r: 0.5 for r in NORMALS},
                                history_faults={f: (0.001 if f != "f5" else 0.3) for f in FAULTS},
                                page={"cause_classifier": {"verdict": "fail", "p_value": 0.004}}, counters="evidence")
    results = {"stacking": _rules("fail", 0.001, {r: 0.01 for r in NORMALS}, {f: 0.01 for f in FAULTS}),
               "cause_classifier": classifier}
    rule = headline.HeadlineRule(verdict_rule="calibrated", false_alarm_rate=0.05, trust="record", min_effect_pct=5.0)
    doc = headline.compose(run, results, rule)
    assert doc["details"]["trust"]["decided_by"] == ["cause_classifier"] and doc["verdict"] == "fail"
    assert doc["flagged_counters"] == ["orders.cpu", "a"]
    silent = _rules("pass", 0.5, {r: 0.01 for r in NORMALS}, {f: 0.01 for f in FAULTS})
    silent = dataclasses.replace(silent, flagged_counters=[], counter_scores={},
                                 page={k: {**v, "flagged_counters": []} for k, v in silent.page.items()})
    quiet = dict(results, stacking=silent)
    alone = headline.compose(run, quiet, rule)
    assert alone["verdict"] == "pass" and alone["flagged_counters"] == []


def test_a_night_of_detectors_the_verdict_has_never_heard_of_is_composed():
    """No rules, no charts: two detectors of other kinds, each with its record, are the night's
    whole evidence.  ``spectral`` passed all 20 normal runs and caught 5 of 6 faults, ``drift``
    failed every normal run: spectral decides (p 0.004: fail) and its flag is the counter shown."""
    run = RunJudged(run_id="r", system="s", baseline_runs=[{"run_id": "n0", "weight": 1.0}],
                    details={"lab": LAB, "effects": {"b": 0.4}}, lab=LAB)

    def detector(p: float, normal_p: float, flags: list[str]) -> DetectorResult:
        return DetectorResult(judged=True, verdict="fail" if p <= 0.05 else "pass", p_value=p, flagged_counters=flags,
                              history_normals={r: normal_p for r in NORMALS},
                              history_faults={f: (0.001 if f != "f5" else 0.3) for f in FAULTS})
    results = {"spectral": detector(0.004, 0.5, ["b"]), "drift": detector(0.001, 0.01, ["c"])}
    rule = headline.HeadlineRule(verdict_rule="calibrated", false_alarm_rate=0.05, trust="record", detectors=None)
    doc = headline.compose(run, results, rule)
    assert doc["verdict"] == "fail" and doc["details"]["trust"]["decided_by"] == ["spectral"]
    assert doc["p_value"] == pytest.approx(0.004) and doc["flagged_counters"] == ["b"]
    assert doc["score"] == pytest.approx(0.996)          # no run score given: 1 - the deciders' p-value


def test_a_failure_a_small_null_cannot_calibrate_needs_a_second_witness():
    """A history of 12 normal runs: a null that cannot calibrate a p-value at the rate at all
    (1/13 = 0.077 > 0.05).  A target whose only evidence is stacking's p-value 0.0048, beyond every
    run of that null, with the run against itself at p 0.6: it passes, and the page's sentence says
    why.  The same target with the run against itself at the rate too (p 0.03): a second witness, it
    fails at stacking's p-value.  ``trust_corroborate: false`` fails the first (Simes of the two)."""
    from pipelines import config
    from pipelines.reporting.summary import plain_summary

    report = dict(config.load_params()["report"])
    runs = NORMALS[:12]
    run = RunJudged(run_id="r", system="s", baseline_runs=[{"run_id": r, "weight": 1 / 12} for r in runs],
                    details={"lab": LAB, "effects": {"a": 0.5}}, lab=LAB)

    def within(p: float) -> DetectorResult:
        return DetectorResult(judged=True, verdict="fail" if p <= 0.05 else "pass", p_value=p, flagged_counters=[],
                              history_normals={r: 0.5 for r in runs}, history_faults={f: 0.5 for f in FAULTS},
                              page={"within_run": {"verdict": "pass", "p_value": p}}, self_contained=True)

    stacking = _rules("fail", 0.0048, {r: 0.5 for r in runs}, {f: 0.001 for f in FAULTS})
    default = headline.HeadlineRule.from_params(report)
    assert (default.trust_min_runs, default.trust_corroborate) == (3, True)
    doc = headline.compose(run, {"stacking": stacking, "within_run": within(0.6)}, default)
    trust = doc["details"]["trust"]
    assert doc["verdict"] == "pass" and trust["decided_by"] == ["stacking", "within_run"]
    assert trust["uncorroborated"] == ["stacking"]
    assert trust["beyond_calibration"] == {"stacking": pytest.approx(1 / 13, abs=1e-6)}
    assert trust["short"] == "stacking's evidence beyond what 12 normal runs can calibrate; not corroborated"
    assert doc["p_value"] > 0.05             # stacking's p-value read at what its null can support, 1/13
    assert plain_summary(doc, {}).startswith("No regression found: stacking's evidence beyond what 12 normal runs "
                                             "can calibrate; not corroborated")
    seconded = headline.compose(run, {"stacking": stacking, "within_run": within(0.03)}, default)
    assert seconded["verdict"] == "fail" and "uncorroborated" not in seconded["details"]["trust"]
    lenient = headline.HeadlineRule.from_params({**report, "trust_corroborate": False})
    assert headline.compose(run, {"stacking": stacking, "within_run": within(0.6)}, lenient)["verdict"] == "fail"
    # 19 normal runs calibrate the rate (1/20 = 0.05): nothing changes, stacking alone fails the run
    rich = [f"m{i}" for i in range(19)]
    big = RunJudged(run_id="r", system="s", baseline_runs=[{"run_id": r, "weight": 1 / 19} for r in rich],
                    details={"lab": LAB, "effects": {"a": 0.5}}, lab=LAB)
    calibrated = _rules("fail", 0.0048, {r: 0.5 for r in rich}, {f: 0.001 for f in FAULTS})
    assert headline.compose(big, {"stacking": calibrated, "within_run": within(0.6)}, default)["verdict"] == "fail"


def test_the_decision_is_one_value_and_only_a_change_too_small_to_matter_turns_a_fail():
    """``decide_run`` returns what decided (verdict, p-value, who): the record's choice on the
    run of the first test.  The verdict file carries that decision; and when no counter the deciders
    flagged changed enough to matter (here every change 0.1 % against a 1 % floor), the failed
    decision is written as a pass, its p-value and record kept: the one way the counters reach the
    verdict."""
    results = stacking_and_spectral()
    rule = headline.HeadlineRule(verdict_rule="calibrated", false_alarm_rate=0.05, trust="record", min_effect_pct=1.0,
                                 detectors=None)
    for change, written in ((0.5, "fail"), (0.001, "pass")):
        run = RunJudged(run_id="r", system="s", baseline_runs=[{"run_id": "n0", "weight": 1.0}],
                        details={"lab": LAB, "effects": {"a": change, "b": change}}, lab=LAB)
        decision = decide_run(run, gather_evidence(results), results, rule, None)
        assert isinstance(decision, Decision)
        assert (decision.verdict, decision.p_value, list(decision.used)) == ("fail", 0.004, ["spectral"])
        assert decision.choice is not None and decision.choice.detectors == ("spectral",) and decision.unjudged is None
        doc = headline.compose(run, results, rule)
        assert doc["verdict"] == written and doc["p_value"] == pytest.approx(0.004)
        assert doc["details"]["trust"]["decided_by"] == ["spectral"]
        assert (doc["flagged_counters"] == ["b"]) == (written == "fail")


def test_the_run_against_itself_names_counters_only_when_it_decides():
    """Stacking fails the run (p 0.001) without flagging a counter; the run against itself judged the
    run too (p 0.6, a counter ``w`` beyond its limit) but is not among the detectors combined.  The
    failed run shows what moved most (stacking's scored counter ``a``), not the counter of a detector
    that did not decide; when the run against itself decides alone, its counter is the one shown."""
    run = RunJudged(run_id="r", system="s", baseline_runs=[{"run_id": "n0", "weight": 1.0}],
                    details={"lab": LAB, "effects": {"a": 0.5, "w": 0.4}}, lab=LAB)
    stacking = DetectorResult(judged=True, verdict="fail", p_value=0.001, votes=True, run_score=0.9,
                              counter_scores={"a": 0.9}, page={RULE_METHODS[0]: {"verdict": "fail", "p_value": 0.001}},
                              counters="scored")
    within = DetectorResult(judged=True, verdict="pass", p_value=0.6, flagged_counters=["w"],
                            page={"within_run": {"verdict": "pass", "p_value": 0.6}}, self_contained=True,
                            alone_score=0.5)
    results = {"stacking": stacking, "within_run": within}
    rule = headline.HeadlineRule(verdict_rule="calibrated", false_alarm_rate=0.05, trust="none",
                                 detectors=("stacking",), min_effect_pct=1.0)
    doc = headline.compose(run, results, rule)
    assert doc["verdict"] == "fail" and doc["flagged_counters"] == ["a"]
    alone = headline.compose(run, {"stacking": stacking, "within_run": dataclasses.replace(within, p_value=0.001)},
                             headline.HeadlineRule(verdict_rule="calibrated", false_alarm_rate=0.05, trust="none",
                                                   detectors=("within_run",), min_effect_pct=1.0))
    assert alone["verdict"] == "fail" and alone["flagged_counters"] == ["w"] and alone["score"] == 0.5


def test_the_page_says_when_the_deciders_clean_record_comes_from_a_null_that_finds_nothing():
    """A history of 8 normal runs and no fault where stacking's p-values are 0.125 once and 1 seven
    times: it decides on its clean record, and the run page says that record cannot show what it
    would catch."""
    from pipelines.reporting import pages

    runs = [f"n{i}" for i in range(8)]
    stacking = _rules("pass", 1.0, {r: (0.125 if r == "n0" else 1.0) for r in runs}, {})
    charts = DetectorResult(judged=True, verdict="pass", p_value=0.2, votes=True,
                            history_normals={r: (0.01 if r in ("n1", "n2") else 0.4) for r in runs},
                            page={"control_charts": {"verdict": "pass", "p_value": 0.2, "flagged_counters": []}},
                            counters="scored", null_kind="same_lab")
    run = RunJudged(run_id="r", system="s", baseline_runs=[{"run_id": "n0", "weight": 1.0}],
                    details={"lab": LAB, "effects": {"a": 0.5}}, lab=LAB)
    doc = headline.compose(run, {"stacking": stacking, "control_charts": charts},
                           headline.HeadlineRule(verdict_rule="calibrated", false_alarm_rate=0.05, trust="record"))
    assert doc["details"]["trust"]["decided_by"] == ["stacking"] and doc["verdict"] == "pass"
    html = pages.render_run(doc, {"version": "1", "started_at": "2026", "environment": {}}, None,
                            pages.RunPage(baseline_envs={}, raw_href="#", raw_name="r.tar.gz"))
    assert ("with no verified fault in the history, its p-value is above 1/2 on 7 of its 8 normal runs" in html
            and "cannot show what it would catch" in html)
