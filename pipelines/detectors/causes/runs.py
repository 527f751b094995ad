"""A target's cause prediction, stored (Nguyen 2017 ch. 8-9, seed 004; the classifier is
:mod:`pipelines.detectors.causes.classifiers`): the target's pair rows through its system's current cause model,
with the model's leave-one-out fault scores, the classifier's record as a detector.

The cause classifier is a :class:`~pipelines.protocol.Detector` like the detectors that
compare runs, with one difference: its calibration (the model, its leave-one-out figures and the
normal runs' fault scores) is learned by its own stage, ``train_causes``, and only read here.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pipelines import config
from pipelines.systems import history, labs
from pipelines.detectors.causes import features as cause_features
from pipelines.detectors.charts import control_charts as charts
from pipelines.detectors.causes.prediction import evidence_counters, predict_cause
from pipelines.protocol import SystemHistory
from pipelines.storage import atomic, store
from pipelines.storage.run_records import ValidIndex
from pipelines.storage.cause_files import CauseModelMeta, CausePrediction


def history_fault_scores(meta: CauseModelMeta) -> dict[str, float]:
    """The leave-one-out fault score of each verified fault run of the model's history (the model
    trained without it): what ``decision.fault_weights`` counts the classifier's catches from."""
    return {r: v["fault_score"] for r, v in sorted((meta.get("loo_predictions") or {}).items())
            if v.get("truth") not in (None, "none") and v.get("fault_score") is not None}


def predict_one(run_id: str, index: ValidIndex, models: store.CauseModels, charter: charts.Charter,
                cc_params: charts.ControlChartParams, hist: history.HistoryParams) -> CausePrediction:
    """Predict the cause of one target run and write it."""
    system = index[run_id]["system"]
    loaded = models[system]
    result: CausePrediction
    if loaded is None:
        result = {"label": None, "probability": None, "known": False, "reason": "no cause model yet"}
    else:
        model, meta = loaded
        envs = {r: index[r].get("environment") or {} for r in index if index[r]["system"] == system}
        baseline = hist.baseline(run_id, index)
        pairs = cause_features.pair_baselines(run_id, baseline, envs, cc_params.max_baseline_runs)
        if not pairs:
            result = {"label": None, "probability": None, "known": False, "reason": "no passed baseline run"}
        else:
            lab = charter.lab(run_id, pairs, index,
                              hist.verdicts(index, system), labs.lab_params(hist))
            rows = cause_features.pair_features(charter, run_id, pairs, lab["shift"])
            result = predict_cause(model, rows, meta["columns"], meta["classes"], tau=meta["unknown"]["tau"],
                                   blocks=meta.get("feature_blocks") or ["counters"], per_cause=meta.get("per_cause"),
                                   fault_model=models.fault_model(system))
            result["baseline_runs"] = pairs
            # the counters that carried it: those the nearest fault cause raises, on this run
            result["evidence"] = evidence_counters(rows, meta.get("counter_profile"), (result.get("fault") or {}).get("label"))
            if meta.get("null_fault_scores") is not None:     # the classifier as a detector (headline)
                result["null_fault_scores"] = sorted(meta["null_fault_scores"].values())
                result["history_fault_scores"] = history_fault_scores(meta)
                result["history_normal_scores"] = dict(sorted(meta["null_fault_scores"].items()))
        result.update({"model_version": meta["version"], "learner": meta["best"]})
    result["run_id"] = run_id
    atomic.write_json_atomic(config.cause_path(run_id), result)
    return result


@dataclass
class CauseClassifier:
    """The cause classifier as a :class:`~pipelines.protocol.Detector` (the
    ``predict_causes`` stage's): its calibration is the system's current model as ``train_causes``
    stored it (loaded once per system, with the model of its fault runs alone, before the stage's
    processes share them; empty without a model); a target's prediction is made again every night
    (nothing is kept: it is one pass of a fitted model)."""

    params: charts.ControlChartParams
    models: store.CauseModels = field(default_factory=store.CauseModels)
    charters: dict[str, charts.Charter] = field(default_factory=dict)
    name: str = "cause_classifier"

    def calibrate(self, seen: SystemHistory) -> CauseModelMeta:
        loaded = self.models[seen.system]
        self.models.fault_model(seen.system)
        return loaded[1] if loaded is not None else {}

    def stored(self, seen: SystemHistory) -> CauseModelMeta:
        return self.calibrate(seen)

    def kept(self, run_id: str, seen: SystemHistory, calibration: CauseModelMeta) -> None:
        return None

    def judge(self, run_id: str, seen: SystemHistory, calibration: CauseModelMeta) -> CausePrediction:
        if seen.system not in self.charters:
            self.charters[seen.system] = charts.Charter(seen.frames, self.params.chart)
        return predict_one(run_id, seen.index, self.models, self.charters[seen.system], self.params, seen.hist)
