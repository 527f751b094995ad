"""predict_causes: the probable regression cause of every target run, or "unknown".

Nguyen 2017 ch. 8-9 (seed 004; METHODS.md §D): the target's violation ratios against
each of its most similar passed baseline runs (the rows ``features`` builds for the
history) go through the system's current cause model (``train_causes``); the run's
class probabilities are the mean over its pairs.  ``known`` is false when the largest
probability is below the model's ``tau`` (calibrated on held-out causes): the label is
then only the nearest cause seen in history and must not be presented as certain
(DATA_CONTRACT.md §2).  The report uses the cause only when the run fails.
Each prediction also carries the run's ``fault_score`` (``1 − P(none)``) and the model's
leave-one-out fault scores of the history's normal runs, from which ``headline`` makes the
classifier a calibrated detector (issue 11).
"""
from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from pipelines import archive, config, control_charts, features, history, labs, locks, store, train_causes
from pipelines.progress import Progress

log = logging.getLogger("regresslab.predict_causes")


# --------------------------------------------------------------------------- pure core


def predict_cause(model, rows: pd.DataFrame, columns: list[str], classes: list[str], *, tau: float,
                  top: int = 3, blocks: list[str] = ("counters",),
                  per_cause: dict[str, dict[str, Any]] | None = None, fault_model=None) -> dict[str, Any]:
    """Label, probability, ``known`` and the runner-up causes of one run from its pair rows.

    ``fault`` is the most probable cause other than ``none`` with its own probability (not
    renormalised: a run the classifier finds normal shows a low one), for a run the
    detectors fail whatever the classifier thinks.
    Counters the model was trained on but the run lacks are NaN (imputed with their
    missing indicator); counters the model never saw are ignored and listed.  ``blocks`` are
    the model's ``features.design`` blocks; ``per_cause`` its training runs per cause, so that a
    label learned from few runs says so (``runs_of_cause``, ``few_runs``).  ``fault_model`` (the
    model of the fault runs alone, when ``train_causes`` chose it) names the fault instead, with
    its probability given that the run is a fault (``given_a_fault``).
    """
    designed = features.design(rows, list(blocks))
    aligned = designed.reindex(columns=columns)
    proba = train_causes.run_probabilities(model, aligned, columns, classes).sort_values(ascending=False)
    label, p = str(proba.index[0]), float(proba.iloc[0])
    unseen = sorted(set(designed.columns) - set(columns))
    if fault_model is not None:     # the model of the fault runs alone names the fault: P(cause | fault)
        given = train_causes.run_probabilities(fault_model, aligned, columns, list(fault_model.classes_))
        nearest = str(given.idxmax())
        fault = {"label": nearest, "probability": round(float(given[nearest]), 4), "given_a_fault": True}
    else:
        nearest = train_causes.nearest_fault(proba)
        fault = {"label": nearest, "probability": None if nearest is None else round(float(proba[nearest]), 4)}
    learned = (per_cause or {}).get(fault["label"]) or {}
    fault.update({"runs_of_cause": learned.get("runs"), "few_runs": learned.get("few_runs")})
    return {"label": label, "probability": round(p, 4), "known": bool(p >= tau), "tau": round(float(tau), 4),
            "fault": fault, "none_probability": round(float(proba.get("none", 0.0)), 4),
            "fault_score": round(train_causes.fault_score(proba), 4),
            "alternatives": [{"label": str(c), "probability": round(float(v), 4)} for c, v in proba.iloc[1:top].items()],
            "pairs": int(len(rows)), "features_not_in_model": len(unseen)}


# --------------------------------------------------------------------------- I/O shell


def predict_one(run_id: str, index: dict[str, Any], models: store.CauseModels, charter: control_charts.Charter,
                cc_params: dict[str, Any], hist: dict[str, Any]) -> dict[str, Any]:
    """Predict the cause of one target run and write it."""
    system = index[run_id]["system"]
    loaded = models[system]
    if loaded is None:
        result = {"label": None, "probability": None, "known": False, "reason": "no cause model yet"}
    else:
        model, meta = loaded
        envs = {r: index[r].get("environment") or {} for r in index if index[r]["system"] == system}
        baseline = history.baseline_for(run_id, index, window=hist["window"], exclude=set(hist["exclude"]))
        pairs = features.pair_baselines(run_id, baseline, envs, cc_params["max_baseline_runs"])
        if not pairs:
            result = {"label": None, "probability": None, "known": False, "reason": "no passed baseline run"}
        else:
            lab = charter.lab(run_id, pairs, index,
                              history.verdicts(index, system, exclude=set(hist["exclude"])), labs.lab_params(hist))
            result = predict_cause(model, features.pair_features(charter, run_id, pairs, lab["shift"]),
                                   meta["columns"], meta["classes"], tau=meta["unknown"]["tau"],
                                   blocks=meta.get("feature_blocks") or ["counters"], per_cause=meta.get("per_cause"),
                                   fault_model=models.fault_model(system))
            result["baseline_runs"] = pairs
            if meta.get("null_fault_scores") is not None:     # the classifier as a detector (headline)
                result["null_fault_scores"] = sorted(meta["null_fault_scores"].values())
        result.update({"model_version": meta["version"], "learner": meta["best"]})
    result["run_id"] = run_id
    archive.write_json_atomic(config.cause_path(run_id), result)
    return result


@locks.holding("predict_causes", shared=True)
def run_one(run_id: str) -> dict[str, Any]:
    """Predict the cause of one target run (the per-run task of the nightly DAG)."""
    index = archive.read_valid_index()
    cc_params = config.load_params("control_charts")
    charter = control_charts.Charter(store.FrameStore.of_system(index[run_id]["system"]), cc_params)
    return predict_one(run_id, index, store.CauseModels(), charter, cc_params, config.load_params("history"))


@locks.holding("predict_causes")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.CAUSES)
    cc_params, hist = config.load_params("control_charts"), config.load_params("history")
    index = archive.read_valid_index()
    todo = history.targets(index)
    archive.prune_outputs(config.CAUSES, todo)
    progress = Progress(log, "predict_causes", len(todo))
    models = store.CauseModels()
    charters: dict[str, control_charts.Charter] = {}
    for i, run_id in enumerate(todo, 1):
        system = index[run_id]["system"]
        if system not in charters:
            charters[system] = control_charts.Charter(store.FrameStore.of_system(system), cc_params)
        result = predict_one(run_id, index, models, charters[system], cc_params, hist)
        progress.step(i, f"{run_id} -> {result['label']} p={result['probability']} known={result['known']}")
    print(f"[predict_causes] {len(todo)} target runs")


if __name__ == "__main__":
    main()
