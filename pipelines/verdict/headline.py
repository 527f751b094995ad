"""headline: the verdict file of one run (data contract §2) from its detectors' results.

It combines the association-rule ensembles (``detect``, Foo et al. 2015, seed 003), the control
charts and the run against itself (``control_charts``, Nguyen 2017 ch. 3, 6-7, seed 004), the
clustered regression models (``clusters``, Shang et al. 2015, seed 000) and the cause classifier
(``predict_causes``, Nguyen 2017 ch. 8), as the registry lists them, without naming any: the
decision (:mod:`~pipelines.verdict.decision`: the p-values calibrated on the history's normal runs
and combined at ``report.false_alarm_rate``, the detectors the record trusts, the lab, the team's
objectives), the counters a failed run shows (:mod:`~pipelines.verdict.evidence`), its cause
(:mod:`~pipelines.verdict.cause`).  ``report`` writes it for the night's targets and ``evaluate``
scores the same decision in leave-one-out.  Pure: records in, a record out.  Why each rule is as
it is, and what was measured: docs/methods/calibration.md.
"""
from __future__ import annotations

from collections.abc import Mapping

from pipelines.objectives.gates import Evaluation
from pipelines.protocol import DetectorResult, RunJudged
from pipelines.stats import effects
from pipelines.storage.stage_files import VerdictFile
from pipelines.verdict import cause_signatures
from pipelines.verdict.cause import cause_of, fault_pattern
from pipelines.verdict.decision import decide_run
from pipelines.verdict.evidence import detector_details, failed_counters, gather_evidence, set_aside_small, verdict_score
from pipelines.verdict.rule import HeadlineRule

__all__ = ["HeadlineRule", "compose"]


def compose(run: RunJudged, results: dict[str, DetectorResult], rule: HeadlineRule, *,
            lab_of: dict[str, str] | None = None,
            fault_labels: Mapping[str, cause_signatures.FaultLabel] | None = None,
            objectives: Evaluation | None = None) -> VerdictFile:
    """The verdict file of one run (contract §2, its keys in the contract's order) from its
    detectors' results under ``rule``: decided (:func:`decide_run`), its counters explained, then
    assembled; the report adds the flagged counters' changes, the plain summary and the counters
    validation dropped once it has them.

    Every detector's own verdict is reported whatever the rule; the run's cause comes from its
    cause prediction (``run.cause_prediction``).  ``lab_of`` (run -> ``labs.lab_key``, the run's and
    its history's) reads the detectors' record in the run's lab (``report.detector_trust: record``,
    :func:`trusted`).  ``fault_labels`` (the system's verified faults and the counters their labels
    name) put a failed run's counters in the order that explains it
    (:func:`cause_signatures.explain_order`, the signature of its predicted cause).  A failed run
    none of whose counters changed enough to matter (``significance.min_effect_pct``) passes: the
    one way the counters change the verdict.  ``objectives``: the run's evaluation against its
    system's objectives (:meth:`Decision.heard`), the verdict file's ``objectives`` block."""
    ev = gather_evidence(results)
    lab, predicted = run.lab, run.cause_prediction
    decided = decide_run(run, ev, results, rule, lab_of)
    counter_scores = ev.counter_scores()
    changes = (run.details or {}).get("effects") or {}
    ev, small = set_aside_small(ev, changes, rule.min_effect_pct)
    small.update((run.details or {}).get("below_min_effect") or {})
    flagged = failed_counters(ev, counter_scores, rule.flag_rule, changes, rule.min_effect_pct, decided.used,
                              only_deciders=decided.choice is not None) if decided.verdict == "fail" else []
    decision = decided.explained(flagged).heard(objectives)
    verdict, used, choice, unjudged = decision.verdict, decision.used, decision.choice, decision.unjudged
    flagged = list(decision.flagged)
    cause = cause_of(verdict, predicted)
    signature = cause_signatures.signature(fault_labels or {}, cause["label"], leave_out=run.run_id) \
        if verdict == "fail" else None
    if signature is not None:           # the cause's own counters the run moved enough: its evidence, shown
        moved = effects.split_by_effect([c for c in sorted(signature.counters) if counter_scores.get(c, 0) > 0
                                         and c not in flagged], changes, rule.min_effect_pct)[0]
        flagged = flagged + moved
    flagged = cause_signatures.explain_order(flagged, signature)
    details = {**run.details, "verdict_rule": rule.verdict_rule, "flag_rule": rule.flag_rule,
               "false_alarm_rate": rule.false_alarm_rate, "p_values": ev.p_values,
               "combination": rule.combination if rule.verdict_rule == "calibrated" else None,
               **detector_details(results, run.details),
               "cause_prediction": predicted, "fault_pattern": fault_pattern(verdict, predicted)}
    if unjudged is not None:
        details["no_baseline"] = unjudged
    if rule.verdict_rule == "calibrated":
        details["combined_detectors"] = sorted(k for k, v in used.items() if v is not None)
        details["set_aside_detectors"] = decision.set_aside
        details["detector_weights"] = decision.weighting
        if choice is not None:
            details["trust"] = choice.to_json()
    if signature is not None and any(signature.names(c) for c in flagged):
        details["cause_signature"] = signature.to_json()
    details["set_aside_small"] = dict(sorted(small.items(), key=lambda kv: (-abs(kv[1]), kv[0])))
    details["min_effect_pct"] = rule.min_effect_pct
    if decision.objectives is not None:
        details["decision"] = decision.objectives
    p_value = decision.p_value
    score = None if unjudged is not None else verdict_score(ev, used)
    if objectives is not None and objectives.fails_run:   # how far the objectives fell short orders it too
        score = round(max(score or 0.0, 1.0 - objectives.score_pct / 100.0), 4)
    doc: VerdictFile = {
        "schema_version": 2 if unjudged is not None or objectives is not None else 1, "run_id": run.run_id,
        "system": run.system, "verdict": verdict, "score": score, "flagged_counters": flagged,
        "counter_scores": {c: round(v, 4) for c, v in counter_scores.items()}, "cause": cause,
        "baseline_runs": run.baseline_runs, "baseline_status": "none" if not run.baseline_runs else lab["status"],
        "p_value": None if p_value is None else round(p_value, 6), "methods": ev.methods, "details": details}
    if objectives is not None:
        doc["objectives"] = objectives.to_json()
    return doc
