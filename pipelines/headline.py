"""headline: one decision per run from the detectors — verdict, score, flagged counters, cause.

The verdict file of ``DATA_CONTRACT.md`` §2 combines the association-rule ensembles
(``detect``, Foo et al. 2015, seed 003), the control charts (``control_charts``, Nguyen
2017 ch. 3, 6-7, seed 004) and the probable cause (``predict_causes``, Nguyen 2017 ch. 8).
``report`` writes it for the night's targets and ``evaluate`` scores the same decision in
leave-one-out, so both use this module.  Pure: dicts in, dicts out.

* **verdict** (``report.verdict_rule``): ``all`` fails a run when every detector that could
  judge it fails it.  The two detectors make different mistakes (rules break on
  environment shifts the pruning did not catch; control charts on counters that wander
  between runs), so requiring both removes most false alarms; each method's own verdict
  stays in ``methods``.  ``any``, ``stacking`` and ``control_charts`` are the alternatives.
* **flagged counters** of a failed run (``report.flag_rule``): stacking's (``rules``: its
  precision is the higher, README) or the union with the control charts' (``union``).
* **score**: the mean of the methods' scores (stacking: the largest counter score; control
  charts: twice the top-50 % average violation ratio, both in [0, 1]); a counter's score is
  the mean of its stacked confidence change and its control-chart sum violation ratio.
* **cause**: a failed run gets its most probable fault cause, ``known`` only when the
  classifier's own top class is that cause with a probability of at least its ``tau``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

RULE_METHODS = ("association_rules_stacking", "association_rules_bagging", "association_rules_single")


def headline_verdict(verdicts: dict[str, str | None], rule: str) -> str:
    """The run's verdict from the methods' verdicts (None = the method could not judge)."""
    judged = {k: v for k, v in verdicts.items() if v in ("pass", "fail")}
    if not judged:
        return "pass"
    if rule in judged:
        return judged[rule]
    if rule == "any":
        return "fail" if "fail" in judged.values() else "pass"
    if rule == "all":
        return "fail" if all(v == "fail" for v in judged.values()) else "pass"
    raise ValueError(f"report.verdict_rule must be all, any, stacking or control_charts, not {rule!r}")


def combine_scores(*scores: dict[str, float]) -> dict[str, float]:
    """Per counter, the mean of the scores of the methods that scored it, most suspicious first."""
    counters = sorted({c for s in scores for c in s})
    out = {c: float(np.mean([s[c] for s in scores if c in s])) for c in counters}
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def cause_of(verdict: str, predicted: dict[str, Any] | None) -> dict[str, Any]:
    """The contract's ``cause`` for the headline verdict.

    A failed run gets the most probable fault cause; it is ``known`` only when the
    classifier's own top class is that cause with a probability of at least its ``tau``.
    A passed run's cause is ``none``.
    """
    if not predicted or predicted.get("label") is None:
        return {"label": None if verdict == "fail" else "none", "probability": None, "known": verdict != "fail"}
    if verdict == "pass":
        return {"label": "none", "probability": predicted.get("none_probability"), "known": True}
    fault = predicted.get("fault") or {}
    known = bool(predicted["known"] and predicted["label"] == fault.get("label"))
    return {"label": fault.get("label"), "probability": fault.get("probability"), "known": known}


def compose(detection: dict[str, Any], charts: dict[str, Any] | None, predicted: dict[str, Any] | None,
            *, verdict_rule: str, flag_rule: str) -> dict[str, Any]:
    """The verdict file of one run (DATA_CONTRACT.md §2) from the stages' results.

    ``flag_rule`` names the flagged counters of a failed run: ``union`` (stacking's and the
    control charts'), or ``rules`` (stacking's when it failed the run, else the charts')."""
    if flag_rule not in ("union", "rules"):
        raise ValueError(f"report.flag_rule must be union or rules, not {flag_rule!r}")
    methods = {k: detection["methods"][k] for k in RULE_METHODS}
    rule_scores = detection.get("counter_scores", {})
    verdicts = {"stacking": methods["association_rules_stacking"]["verdict"]}
    scores = [float(max(rule_scores.values(), default=0.0))]
    cc_scores: dict[str, float] = {}
    if charts and charts.get("verdict"):
        methods["control_charts"] = {k: charts[k] for k in ("verdict", "violation_ratio", "threshold",
                                                            "flagged_counters", "load_independent_counters")}
        methods["control_charts"].update({k: charts[k] for k in ("p_value", "window_ratio", "false_alarm_rate",
                                                                 "load_independent_skipped") if k in charts})
        methods["control_charts"]["baseline_runs"] = charts["baseline_runs"]
        verdicts["control_charts"] = charts["verdict"]
        scores.append(min(1.0, 2.0 * float(charts["violation_ratio"])))
        cc_scores = charts["counter_scores"]
    verdict = headline_verdict(verdicts, verdict_rule)
    counter_scores = combine_scores(rule_scores, cc_scores)
    flagged: list[str] = []
    if verdict == "fail":
        rules = set(methods["association_rules_stacking"]["flagged_counters"])
        charted = set(methods.get("control_charts", {}).get("flagged_counters", []))
        chosen = rules | charted if flag_rule == "union" else rules or charted
        flagged = [c for c in counter_scores if c in chosen]
    doc = {
        "schema_version": 1,
        "run_id": detection["run_id"],
        "system": detection["system"],
        "verdict": verdict,
        "score": round(float(np.mean(scores)), 4),
        "flagged_counters": flagged,
        "counter_scores": {c: round(v, 4) for c, v in counter_scores.items()},
        "cause": cause_of(verdict, predicted),
        "baseline_runs": detection["baseline_runs"],
        "methods": methods,
        "details": {**detection.get("details", {}), "verdict_rule": verdict_rule, "flag_rule": flag_rule,
                    "control_charts": {k: charts.get(k) for k in ("ratios", "multimodal", "counters_over_limit")}
                    if charts and charts.get("verdict") else None,
                    "cause_prediction": predicted},
    }
    return doc
