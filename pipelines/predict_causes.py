"""predict_causes: the probable regression cause of every target run, or "unknown".

Nguyen 2017 ch. 8-9 (seed 004; METHODS.md §D): the target's violation ratios against
each of its most similar passed baseline runs (the rows ``features`` builds for the
history) go through the system's current cause model (``train_causes``); the run's
class probabilities are the mean over its pairs.  ``known`` is false when the largest
probability is below the model's ``tau`` (calibrated on held-out causes): the label is
then only the nearest cause seen in history and must not be presented as certain
(DATA_CONTRACT.md §2).  The report uses the cause only when the run fails.
"""
from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from pipelines import archive, config, control_charts, features, history, train_causes
from pipelines.progress import Progress

log = logging.getLogger("regresslab.predict_causes")


# --------------------------------------------------------------------------- pure core


def predict_cause(model, rows: pd.DataFrame, columns: list[str], classes: list[str], *, tau: float,
                  top: int = 3) -> dict[str, Any]:
    """Label, probability, ``known`` and the runner-up causes of one run from its pair rows.

    ``fault`` is the most probable cause other than ``none`` with its own probability (not
    renormalised: a run the classifier finds normal shows a low one), for a run the
    detectors fail whatever the classifier thinks.
    Counters the model was trained on but the run lacks are NaN (imputed with their
    missing indicator); counters the model never saw are ignored and listed.
    """
    aligned = rows.reindex(columns=columns)
    proba = train_causes.run_probabilities(model, aligned, columns, classes).sort_values(ascending=False)
    label, p = str(proba.index[0]), float(proba.iloc[0])
    unseen = sorted(set(features.feature_columns(rows)) - set(columns))
    faults = proba.drop("none", errors="ignore")
    fault = {"label": str(faults.index[0]), "probability": round(float(faults.iloc[0]), 4)} \
        if len(faults) else {"label": None, "probability": None}
    return {"label": label, "probability": round(p, 4), "known": bool(p >= tau), "tau": round(float(tau), 4),
            "fault": fault, "none_probability": round(float(proba.get("none", 0.0)), 4),
            "alternatives": [{"label": str(c), "probability": round(float(v), 4)} for c, v in proba.iloc[1:top].items()],
            "pairs": int(len(rows)), "features_not_in_model": len({c.split(":", 1)[1] for c in unseen})}


# --------------------------------------------------------------------------- I/O shell


def result_path(run_id: str):
    return config.PROCESSED / "causes" / f"{run_id}.json"


class CauseModels:
    """The current cause model of each system, loaded once (None when a system has none yet)."""

    def __init__(self):
        self._models: dict[str, tuple | None] = {}

    def __getitem__(self, system: str):
        if system not in self._models:
            latest = train_causes.latest_path(system)
            if not latest.exists():
                self._models[system] = None
            else:
                pointer = archive.read_json(latest)
                meta = archive.read_json(train_causes.models_dir(system) / pointer["meta"])
                self._models[system] = (train_causes.load_model(train_causes.models_dir(system) / pointer["model"]),
                                        meta)
        return self._models[system]


def run_one(run_id: str, index: dict[str, Any] | None = None, models: CauseModels | None = None,
            charter: control_charts.Charter | None = None) -> dict[str, Any]:
    """Predict the cause of one target run and write it (the per-run task of the nightly DAG)."""
    hist = config.load_params("history")
    index = index or archive.read_json(config.VALID_INDEX)["valid"]
    system = index[run_id]["system"]
    loaded = (models or CauseModels())[system]
    if loaded is None:
        result = {"label": None, "probability": None, "known": False, "reason": "no cause model yet"}
    else:
        model, meta = loaded
        if charter is None:
            store = control_charts.FrameStore.of_system(system)
            charter = control_charts.Charter(store, config.load_params("control_charts"))
        envs = {r: index[r].get("environment") or {} for r in index if index[r]["system"] == system}
        baseline = history.baseline_for(run_id, index, window=hist["window"], exclude=set(hist.get("exclude", [])))
        pairs = features.pair_baselines(run_id, baseline, envs,
                                        config.load_params("control_charts").get("max_baseline_runs"))
        if not pairs:
            result = {"label": None, "probability": None, "known": False, "reason": "no passed baseline run"}
        else:
            result = predict_cause(model, features.pair_features(charter, run_id, pairs), meta["columns"],
                                   meta["classes"], tau=meta["unknown"]["tau"])
            result["baseline_runs"] = pairs
        result.update({"model_version": meta["version"], "learner": meta["best"]})
    result["run_id"] = run_id
    archive.write_json_atomic(result_path(run_id), result)
    return result


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    index = archive.read_json(config.VALID_INDEX)["valid"]
    todo = history.targets(index)
    progress = Progress(log, "predict_causes", len(todo))
    models = CauseModels()
    charters: dict[str, control_charts.Charter] = {}
    for i, run_id in enumerate(todo, 1):
        system = index[run_id]["system"]
        if system not in charters:
            store = control_charts.FrameStore.of_system(system)
            charters[system] = control_charts.Charter(store, config.load_params("control_charts"))
        result = run_one(run_id, index, models, charters[system])
        progress.step(i, f"{run_id} -> {result['label']} p={result['probability']} known={result['known']}")
    print(f"[predict_causes] {len(todo)} target runs")


if __name__ == "__main__":
    main()
