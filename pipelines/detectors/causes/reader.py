"""The cause classifier as a detector, as the verdict reads it (``predict_causes``' file): its
fault score against the history's normal runs' (:func:`result`, registered as
``pipelines.detectors.causes.reader:result``).
"""
from __future__ import annotations

from typing import TypedDict

import numpy as np

from pipelines.protocol import DetectorResult, RunFiles, null_of
from pipelines.stats import pvalues
from pipelines.storage.cause_files import CausePrediction


class ClassifierEvidence(TypedDict):
    """The cause classifier's entry of the verdict file's ``methods`` (:func:`classifier_evidence`)."""

    score: float
    null_runs: int
    verdict: str | None
    p_value: float | None
    abstained: str | None


def classifier_evidence(predicted: CausePrediction | None, status: str, *, resolution: float,
                        false_alarm_rate: float) -> ClassifierEvidence | None:
    """The cause classifier's evidence that a run is a fault: its fault score ``1 − P(none)``, the
    p-value of that score against the leave-one-out fault scores of the history's normal runs
    (``pvalues.calibrated_pvalue``; ``resolution``: probabilities closer than this are not told
    apart), and a verdict at ``false_alarm_rate``.  A run the classifier itself finds more probably
    normal than faulty (score at most 1/2) gives no evidence: p = 1 (a conservative p-value).  The
    normal runs' scores of a confident classifier lie within a few thousandths of 0, and the fitted
    tail would call a normal run whose fault probability is 2 % extreme (the example lab's ledger:
    0.0216 against at most 0.0073, p = 0.0005), though the classifier itself says 98 % normal.
    Abstains (verdict and p None, with the reason)
    when the run's lab ``status`` is not ``same_lab`` or the null is too small; None when the
    prediction carries no fault score or no null (no model, or a model trained without them)."""
    if not predicted or predicted.get("fault_score") is None or predicted.get("null_fault_scores") is None:
        return None
    score, null = float(predicted["fault_score"]), [float(v) for v in predicted["null_fault_scores"]]
    out: ClassifierEvidence = {"score": round(score, 4), "null_runs": len(null), "verdict": None, "p_value": None,
                               "abstained": None}
    if status != "same_lab":
        out["abstained"] = (f"the baseline is not of the run's lab ({status}): the classifier's normal class "
                            "was learned from other labs")
        return out
    p = classifier_pvalue(score, null, resolution=resolution)
    if not np.isfinite(p):
        out["abstained"] = f"{len(null)} normal run(s) in the history: too few to calibrate"
        return out
    out["p_value"], out["verdict"] = round(p, 6), "fail" if p <= false_alarm_rate else "pass"
    return out


def classifier_pvalue(score: float, null: list[float], *, resolution: float) -> float:
    """The fault score's p-value against the normal runs' (:func:`classifier_evidence`): 1 when the
    classifier finds the run more probably normal than not (score at most 1/2)."""
    return 1.0 if score <= 0.5 else pvalues.calibrated_pvalue(score, null, resolution=resolution)


def classifier_history_faults(predicted: CausePrediction | None, *, resolution: float) -> dict[str, float] | None:
    """The classifier's p-value on each verified fault run of the history: its leave-one-out fault
    score (``history_fault_scores``, from the model trained without it) against the normal runs'
    (``decision.fault_weights``); None when the prediction carries none."""
    if not predicted or predicted.get("history_fault_scores") is None or predicted.get("null_fault_scores") is None:
        return None
    null = [float(v) for v in predicted["null_fault_scores"]]
    return {r: classifier_pvalue(float(v), null, resolution=resolution)
            for r, v in predicted["history_fault_scores"].items()}


def classifier_history_normals(predicted: CausePrediction | None, *, resolution: float) -> dict[str, float] | None:
    """The classifier's p-value on each verified normal run of the history: its leave-one-out fault
    score against the other normal runs' (``record``); None when the prediction carries none."""
    scores = (predicted or {}).get("history_normal_scores")
    if not scores:
        return None
    return pvalues.loo_pvalues(scores, lambda s, null: classifier_pvalue(s, null, resolution=resolution))


def result(files: RunFiles) -> DetectorResult | None:
    """The cause classifier as a detector (:func:`classifier_evidence`; its record from the
    leave-one-out fault scores of the history's runs; the counters its predicted cause raises on
    the run carry its evidence)."""
    predicted: CausePrediction | None = files.docs.get("predict_causes")
    resolution = files.resolution
    evidence = classifier_evidence(predicted, files.lab["status"], resolution=resolution,
                                   false_alarm_rate=files.false_alarm_rate)
    faults = classifier_history_faults(predicted, resolution=resolution)
    normals = classifier_history_normals(predicted, resolution=resolution)
    if evidence is None and faults is None and normals is None:
        return None
    if evidence is None:
        return DetectorResult(judged=False, history_faults=faults, history_normals=normals, title="cause classifier",
                              counters="evidence")
    carried = dict((predicted or {}).get("evidence") or {})     # the counters that carried it
    return DetectorResult(judged=True, history_faults=faults, history_normals=normals, title="cause classifier",
                          counters="evidence", verdict=evidence["verdict"], p_value=evidence["p_value"],
                          page={"cause_classifier": dict(evidence)}, null_runs=null_of(evidence)["null_runs"],
                          counter_scores=carried, flagged_counters=list(carried))
