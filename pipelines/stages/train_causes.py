"""train_causes: the regression-cause classifiers, retrained when verified runs change.

The learners, their leave-one-run-out comparison and the unknown-cause threshold (Nguyen
2017 ch. 8-9, seed 004) are :mod:`pipelines.detectors.causes.classifiers`; a system's model versions, stored,
are :mod:`pipelines.detectors.causes.model_versions`.  This stage trains a new
model version per system when its verified history changed, keeps every version
(``data/processed/cause_models/<system>/``) and writes ``metrics/causes.json``.  It trains the
night's learner only: comparing the learners and their learning curves is model selection, done
by ``evaluate`` after the night's report (``cause_training.compare_learners_of``).
"""
from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from pipelines import config
from pipelines.systems import history
from pipelines.detectors.causes.model_versions import current_model, system_metrics, verified_history_digest
from pipelines.detectors.causes.classifiers import CauseParams
from pipelines.storage import atomic, locks, manifest, store

log = logging.getLogger("regresslab.train_causes")


def verified_runs_changed() -> list[str]:
    """The systems whose verified runs differ from those their current cause model learned from."""
    index = manifest.read_valid_index()
    return [system for system in history.systems(index)
            if store.latest_model_meta(system).get("verified_history") != verified_history_digest(index, system)]


@locks.holding("train_causes")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = CauseParams.load()
    index = manifest.read_valid_index()
    metrics: dict[str, Any] = {}
    config.CAUSE_MODELS.mkdir(parents=True, exist_ok=True)     # the stage's output, even with nothing to learn
    for system in history.systems(index):
        path = config.features_path(system)
        if not path.exists():
            continue
        frame = pd.read_parquet(path)
        if frame["cause"].nunique() < 2:
            log.warning("train_causes %s: fewer than two causes in the history, nothing to learn", system)
            continue
        meta = current_model(system, frame, params, index)
        version = meta["version"]
        atomic.write_json_atomic(config.latest_cause_model(system), {"version": version, "model": f"{version}.skops",
                                                                      "meta": f"{version}.json"})
        metrics[system] = system_metrics(meta)
        best = metrics[system]
        print(f"[train_causes] {system}: {meta['best']} LOO accuracy {best['accuracy']} gain {best['gain']} "
              f"(r={meta['random_accuracy']}); unknown causes: tau {meta['unknown']['tau']}, "
              f"recall {meta['unknown']['unknown_recall']}, known called unknown {meta['unknown']['known_called_unknown']}")
    if metrics:
        metrics["mean_best_accuracy"] = round(float(np.mean([m["accuracy"] for m in metrics.values()])), 4)
    config.METRICS.mkdir(parents=True, exist_ok=True)
    atomic.write_json_atomic(config.METRICS / "causes.json", metrics)


if __name__ == "__main__":
    config.install_error_hook()
    main()

