"""predict_causes: the probable regression cause of every target run, or "unknown".

The prediction (Nguyen 2017 ch. 8-9, seed 004) is :func:`pipelines.detectors.causes.predict_cause`:
the target's pair rows through the system's current cause model.  Writes
``data/processed/causes/<run_id>.json``.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterator

from pipelines import config, parallel
from pipelines.calibration import history, labs
from pipelines.detectors import cause_features, charts
from pipelines.detectors.causes import predict_cause
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest, store
from pipelines.storage.run_records import ValidIndex
from pipelines.storage.stage_files import CauseModelMeta, CausePrediction

log = logging.getLogger("regresslab.predict_causes")


def history_fault_scores(meta: CauseModelMeta) -> dict[str, float]:
    """The leave-one-out fault score of each verified fault run of the model's history (the model
    trained without it): what ``headline.fault_weights`` counts the classifier's catches from."""
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
            result = predict_cause(model, cause_features.pair_features(charter, run_id, pairs, lab["shift"]),
                                   meta["columns"], meta["classes"], tau=meta["unknown"]["tau"],
                                   blocks=meta.get("feature_blocks") or ["counters"], per_cause=meta.get("per_cause"),
                                   fault_model=models.fault_model(system))
            result["baseline_runs"] = pairs
            if meta.get("null_fault_scores") is not None:     # the classifier as a detector (headline)
                result["null_fault_scores"] = sorted(meta["null_fault_scores"].values())
                result["history_fault_scores"] = history_fault_scores(meta)
                result["history_normal_scores"] = dict(sorted(meta["null_fault_scores"].items()))
        result.update({"model_version": meta["version"], "learner": meta["best"]})
    result["run_id"] = run_id
    atomic.write_json_atomic(config.cause_path(run_id), result)
    return result


def run_one(run_id: str) -> CausePrediction:
    """Predict the cause of one target run: a batch of one (:func:`batch`)."""
    with batch() as one:
        return one(run_id)


@contextmanager
def batch() -> Iterator[Callable[[str], CausePrediction]]:
    """The per-run work of one nightly DAG task (:func:`run_one` is a batch of one): one shared hold of
    the data folder, the cause models and one charter per system, loaded once for the batch."""
    index = manifest.read_valid_index()
    cc_params, hist = charts.ControlChartParams.load(), history.HistoryParams.load()
    models = store.CauseModels()
    charters: dict[str, charts.Charter] = {}

    def one(run_id: str) -> CausePrediction:
        system = index[run_id]["system"]
        if system not in charters:
            charters[system] = charts.Charter(store.FrameStore.of_system(system), cc_params.chart)
        return predict_one(run_id, index, models, charters[system], cc_params, hist)

    with locks.data_lock("predict_causes batch", shared=True):
        yield one


@locks.holding("predict_causes")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.CAUSES)
    cc_params, hist = charts.ControlChartParams.load(), history.HistoryParams.load()
    index = manifest.read_valid_index()
    todo = history.targets(index)
    atomic.prune_outputs(config.CAUSES, todo)
    progress = Progress(log, "predict_causes", len(todo))
    models = store.CauseModels()
    for system in history.systems(index):
        charter = charts.Charter(store.FrameStore.of_system(system), cc_params.chart)
        models[system], models.fault_model(system)     # loaded once, before the processes share them
        parallel.map_ordered(lambda run_id: predict_one(run_id, index, models, charter, cc_params, hist),
                             [t for t in todo if index[t]["system"] == system],
                             progress=progress.each(lambda run_id, result: f"{run_id} -> {result['label']} "
                                                    f"p={result['probability']} known={result['known']}"))
    print(f"[predict_causes] {len(todo)} target runs")


if __name__ == "__main__":
    config.install_error_hook()
    main()

