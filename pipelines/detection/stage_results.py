"""The stages' result files of one run as :class:`~pipelines.protocol.DetectorResult`
records: the edge where the verdict reads the stages' documents.

Each detector of the registry (:mod:`pipelines.detection.registry`) names the function that reads
its result of a run (:data:`~pipelines.protocol.ResultReader`), which its family holds: the
association rules' (``stacking``, with bagging's and the single model's entries on its page,
:mod:`pipelines.detectors.rules.reader`), the control charts' and the run against itself's (both
from ``control_charts``' file: :mod:`pipelines.detectors.charts.reader`,
:mod:`pipelines.detectors.within_run.reader`), the cluster models' (``clustered_regression``,
:mod:`pipelines.detectors.clusters.reader`) and the cause classifier's (its fault score against the
history's normal runs', :mod:`pipelines.detectors.causes.reader`).  Their names here
(``rules_result`` ...) are those a lab's params.yaml may still register.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pipelines.objectives.gates import Evaluation
from pipelines.detection.registry import Registry, default_registry, own_files, read_own
from pipelines.detectors.causes.reader import result as classifier_result
from pipelines.detectors.charts.reader import result as charts_result
from pipelines.detectors.clusters.reader import result as clusters_result
from pipelines.detectors.rules.reader import RULE_METHODS
from pipelines.detectors.rules.reader import result as rules_result
from pipelines.detectors.within_run.reader import result as within_result
from pipelines.protocol import DetectorResult, RunFiles, RunJudged
from pipelines.verdict import cause_signatures, headline
from pipelines.storage.cause_files import CausePrediction
from pipelines.detectors.charts.files import ChartResult
from pipelines.storage.stage_files import ClusterResult, LabSummary, RuleDetection, VerdictFile

__all__ = ["RULE_METHODS", "StageDocs", "classifier_result", "charts_result", "clusters_result", "from_stages",
           "lab_status", "rules_result", "verdict_of", "within_result"]


def lab_status(detection: RuleDetection, charts: ChartResult | None) -> LabSummary:
    """How the run's baseline relates to its lab (``labs``): the control charts' finding, else the
    rules'; ``insufficient`` when either found nothing to learn the run's lab from."""
    found = [x for x in ((charts or {}).get("lab"), detection.get("details", {}).get("lab")) if x]
    for status in ("insufficient", "adjusted"):
        for x in found:
            if x["status"] == status:
                return x
    return found[0] if found else {"status": "same_lab", "lab_runs": [], "reason": None, "largest_shifts": {}}


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
