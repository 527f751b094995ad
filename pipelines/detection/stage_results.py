"""The stages' result files of one run as :class:`~pipelines.protocol.DetectorResult`
records: the one place the verdict reads JSON.

Each detector of the registry (:mod:`pipelines.detection.registry`) names the function that
reads its result of a run (:data:`~pipelines.protocol.ResultReader`).  The project's own: ``detect`` (the association rules: ``stacking``, with bagging's and
the single model's entries on its page, :func:`rules_result`), ``control_charts`` (the charts,
:func:`charts_result`, and the run against itself, computed there, :func:`within_result`),
``clusters`` (``clustered_regression``, :func:`clusters_result`) and ``predict_causes``
(``cause_classifier``: its fault score against the history's normal runs',
:func:`classifier_result`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from pipelines.objectives.gates import Evaluation
from pipelines.detection.registry import Registry, default_registry, own_files, read_own
from pipelines.protocol import DetectorResult, RunFiles, RunJudged
from pipelines.stats import pvalues
from pipelines.verdict import cause_signatures, headline
from pipelines.storage.cause_files import CausePrediction
from pipelines.detectors.charts.files import ChartResult, WithinRunResult
from pipelines.storage.stage_files import ClusterResult, LabSummary, RuleDetection, VerdictFile

RULE_METHODS = ("association_rules_stacking", "association_rules_bagging", "association_rules_single")
CHART_FIELDS = ("verdict", "violation_ratio", "threshold", "flagged_counters", "load_independent_counters")
CHART_OPTIONAL = ("p_value", "window_ratio", "false_alarm_rate", "load_independent_skipped", "null")
WITHIN_FIELDS = ("verdict", "score", "p_value", "normal_runs", "false_alarm_rate", "flagged_counters", "changes",
                 "limits_by")


def classifier_evidence(predicted: CausePrediction | None, status: str, *, resolution: float,
                        false_alarm_rate: float) -> dict[str, Any] | None:
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
    out: dict[str, Any] = {"score": round(score, 4), "null_runs": len(null), "verdict": None, "p_value": None,
                           "abstained": None}
    if status != "same_lab":
        out["abstained"] = (f"the baseline is not of the run's lab ({status}): the classifier's normal class "
                            "was learned from other labs")
        return out
    p = classifier_pvalue(score, null, resolution=resolution)
    if not np.isfinite(p):
        out["abstained"] = f"{len(null)} normal run(s) in the history: too few to calibrate"
        return out
    out.update({"p_value": round(p, 6), "verdict": "fail" if p <= false_alarm_rate else "pass"})
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
    return {r: classifier_pvalue(float(v), null, resolution=resolution) for r, v in predicted["history_fault_scores"].items()}


def classifier_history_normals(predicted: CausePrediction | None, *, resolution: float) -> dict[str, float] | None:
    """The classifier's p-value on each verified normal run of the history: its leave-one-out fault
    score against the other normal runs' (``record``); None when the prediction carries none."""
    scores = (predicted or {}).get("history_normal_scores")
    if not scores:
        return None
    return pvalues.loo_pvalues(scores, lambda s, null: classifier_pvalue(s, null, resolution=resolution))


def lab_status(detection: RuleDetection, charts: ChartResult | None) -> LabSummary:
    """How the run's baseline relates to its lab (``labs``): the control charts' finding, else the
    rules'; ``insufficient`` when either found nothing to learn the run's lab from."""
    found = [x for x in ((charts or {}).get("lab"), detection.get("details", {}).get("lab")) if x]
    for status in ("insufficient", "adjusted"):
        for x in found:
            if x["status"] == status:
                return x
    return found[0] if found else {"status": "same_lab", "lab_runs": [], "reason": None, "largest_shifts": {}}


def clustered_summary(result: ClusterResult, *, top: int = 10) -> dict[str, Any]:
    """What the verdict file keeps of a ``clusters`` result (contract §2: verdict and
    ``max_prediction_error``): the worst ``top`` clusters with their counters and errors."""
    keys = ("counters", "target_counter", "ks_p_value", "error", "baseline_error", "excess_error", "regression")
    return {"verdict": result["verdict"], "max_prediction_error": result["max_prediction_error"],
            "max_excess_error": result.get("max_excess_error"), "p_value": result.get("p_value"),
            "error_threshold": result.get("error_threshold"), "null": result.get("null"),
            "flagged_counters": result.get("flagged_counters") or [],
            "n_clusters": len(result.get("clusters") or []),
            "clusters": [{k: c.get(k) for k in keys} for c in (result.get("clusters") or [])[:top]],
            "redundant_counters": sorted(result.get("redundant_counters") or {}),
            "constant_counters": list(result.get("constant_counters") or [])}


def null_of(page: Mapping[str, Any]) -> dict[str, Any]:
    """What a detector's page says of its null: the normal runs it counts (``normal_runs`` or
    ``null_runs``) and whether they were judged across labs (``null``)."""
    runs = page.get("normal_runs", page.get("null_runs"))
    return {"null_runs": None if runs is None else int(runs), "null_kind": page.get("null")}


def rules_result(files: RunFiles) -> DetectorResult | None:
    """``detect``'s result: stacking decides; bagging and the single model are on its page (bagging's
    flags name what moved when stacking's name none)."""
    detection: RuleDetection | None = files.docs.get("detect")
    if detection is None:
        return None
    page = {k: dict(detection["methods"][k]) for k in RULE_METHODS}        # copies: the flags are filtered
    stacking = page["association_rules_stacking"]
    scores = detection.get("counter_scores", {})
    return DetectorResult(judged=True, verdict=stacking["verdict"], p_value=stacking.get("p_value"), votes=True,
                          run_score=float(max(scores.values(), default=0.0)), counter_scores=scores,
                          flagged_counters=list(stacking.get("flagged_counters") or []),
                          reserve_counters=list(page["association_rules_bagging"].get("flagged_counters") or []),
                          history_faults=stacking.pop("history_faults", None),
                          history_normals=stacking.pop("history_normals", None), page=page,
                          title="association rules (stacking)", counters="scored", **null_of(stacking))


def recorded(doc: ChartResult | ClusterResult | WithinRunResult, **fields: Any) -> DetectorResult:
    """A stage file's result: whether it judged the run (a verdict), its record on the history,
    and what the verdict reads of the detector and of its judgement (``fields``)."""
    return DetectorResult(judged=bool(doc.get("verdict")), history_faults=doc.get("history_faults"),
                          history_normals=doc.get("history_normals"), **fields)


def charts_result(files: RunFiles) -> DetectorResult | None:
    """``control_charts``' result (None when the stage wrote none for the run); the counters over
    their limit name what moved when the charts flagged none."""
    charts: ChartResult | None = files.docs.get("control_charts")
    if charts is None:
        return None
    if not charts.get("verdict"):
        return recorded(charts, title="control charts", counters="scored", details={"control_charts": None})
    fields: dict[str, Any] = dict(charts)
    chart = {k: fields[k] for k in CHART_FIELDS}
    chart.update({k: fields[k] for k in CHART_OPTIONAL if k in fields})
    chart["baseline_runs"] = charts["baseline_runs"]
    if charts.get("lab"):
        chart["lab"] = charts["lab"]
    return recorded(charts, title="control charts", counters="scored", verdict=charts["verdict"],
                    p_value=charts.get("p_value"), votes=True,
                    run_score=min(1.0, 2.0 * float(charts["violation_ratio"])),
                    counter_scores=charts["counter_scores"], flagged_counters=list(charts["flagged_counters"]),
                    page={"control_charts": chart}, **null_of(chart),
                    reserve_counters=list(charts.get("counters_over_limit") or []),
                    details={"control_charts": {k: charts.get(k) for k in ("ratios", "multimodal",
                                                                           "counters_over_limit")}})


def clusters_result(files: RunFiles) -> DetectorResult | None:
    """``clusters``' result: the cluster models' largest excess error against the normal runs'."""
    clustered: ClusterResult | None = files.docs.get("clusters")
    if clustered is None:
        return None
    if not clustered.get("verdict"):
        return recorded(clustered, title="cluster models", counters="models")
    summary = clustered_summary(clustered)
    return recorded(clustered, title="cluster models", counters="models", verdict=clustered["verdict"],
                    p_value=clustered.get("p_value"), flagged_counters=list(clustered.get("flagged_counters") or []),
                    page={"clustered_regression": summary}, **null_of(summary))


def within_result(files: RunFiles) -> DetectorResult | None:
    """The run against itself (computed by ``control_charts``): its null needs no other run; deciding
    alone, the run's score is its largest contrast ``r`` over its limit as ``r / (1 + r)``."""
    within = (files.docs.get("control_charts") or {}).get("within_run")
    if not within:
        return None
    if not within.get("verdict"):
        return recorded(within, reason=within.get("reason"), title="the run against itself", self_contained=True)
    page = {k: within.get(k) for k in WITHIN_FIELDS}
    r = float(within.get("score") or 0.0)
    return recorded(within, reason=within.get("reason"), title="the run against itself", self_contained=True,
                    verdict=within.get("verdict"), p_value=within.get("p_value"),
                    flagged_counters=list(within.get("counters_beyond_limit") or []), page={"within_run": page},
                    null_runs=null_of(page)["null_runs"], alone_score=r / (1.0 + r))


def classifier_result(files: RunFiles) -> DetectorResult | None:
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
                          page={"cause_classifier": evidence}, null_runs=null_of(evidence)["null_runs"],
                          counter_scores=carried, flagged_counters=list(carried))


@dataclass(frozen=True)
class StageDocs:
    """The documents of one run the edge reads: ``detect``'s (the run, its baseline, the rules), the
    control charts', the cause prediction and the cluster models' (each None when its stage wrote
    none), and the registered detectors' own documents in place of their files (``own``: the
    leave-one-out's held-out results; None: their files are read)."""

    detection: RuleDetection
    charts: ChartResult | None = None
    predicted: CausePrediction | None = None
    clustered: ClusterResult | None = None
    own: Mapping[str, Any] | None = None


def from_stages(stages: StageDocs, *, resolution: float, false_alarm_rate: float, detectors: Registry | None = None
                ) -> tuple[RunJudged, dict[str, DetectorResult]]:
    """The run and every registered detector's result (``detectors``, the defaults file's registry
    when None), from the stages' documents of one run; a detector with a result file of its own
    reads that file, or its document in ``stages.own`` when given (a detector it does not hold
    said nothing)."""
    detection, charts = stages.detection, stages.charts
    lab = lab_status(detection, charts)
    run = RunJudged(run_id=detection["run_id"], system=detection["system"], baseline_runs=detection["baseline_runs"],
                    details=detection.get("details", {}), lab=lab, cause_prediction=stages.predicted)
    specs = default_registry() if detectors is None else detectors
    docs: dict[str, Any] = {"detect": detection, "control_charts": charts, "clusters": stages.clustered,
                            "predict_causes": stages.predicted}
    docs.update({name: read_own(path) if stages.own is None else stages.own.get(name)
                 for name, path in own_files(run.run_id, specs).items()})
    files = RunFiles(run.run_id, docs, lab, false_alarm_rate, resolution)
    found = {spec.name: spec.read(files) for spec in specs}
    return run, {k: v for k, v in found.items() if v is not None}


def verdict_of(stages: StageDocs, rule: headline.HeadlineRule, *, lab_of: dict[str, str] | None = None,
               fault_labels: Mapping[str, cause_signatures.FaultLabel] | None = None,
               detectors: Registry | None = None, objectives: Evaluation | None = None) -> VerdictFile:
    """The verdict of one run from the stages' documents (the edge: :func:`from_stages`, then
    :func:`~pipelines.verdict.headline.compose`), and its evaluation against its system's
    objectives when it has one."""
    run, results = from_stages(stages, resolution=rule.classifier_resolution, false_alarm_rate=rule.false_alarm_rate,
                               detectors=detectors)
    return headline.compose(run, results, rule, lab_of=lab_of, fault_labels=fault_labels, objectives=objectives)
