"""The cause classifiers' model selection, which no night waits on (Nguyen 2017 §8.3-8.5):
``metrics/cause_learners.json`` and the learning curves ``metrics/causes_learning_curve.csv``.
"""
from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from pipelines import config
from pipelines.systems import history
from pipelines.detectors.causes import training as cause_training
from pipelines.detectors.causes import classifiers as causes
from pipelines.progress import Progress
from pipelines.storage import atomic, store
from pipelines.storage.run_records import ValidIndex

log = logging.getLogger("regresslab.evaluate")


def compare_learners(index: ValidIndex) -> None:
    """Every learner of ``train_causes.learners`` in leave-one-run-out on the design each system's
    model uses, the night's own learner taken from its model (Nguyen 2017 §8.3-8.5,
    :func:`cause_training.compare_learners_of`); a learner better than the night's by more than
    ``learner_standard_errors`` is named, with how to adopt it."""
    params = causes.CauseParams.load()
    out: dict[str, Any] = {}
    curves = []
    for system in history.systems(index):
        meta = store.latest_model_meta(system)
        path = config.features_path(system)
        if not meta or not path.exists():
            continue
        prog = Progress(log, f"evaluate learners {system}", len(params.learners), what="learners")
        figures = cause_training.compare_learners_of(pd.read_parquet(path), meta["feature_blocks"], params,
                                             in_use=meta["learners"],
                                             progress=lambda i, n, name, acc: prog.step(i, f"{name} {acc:.3f}"))
        out[system] = {k: v for k, v in figures.items() if k != "learning_curve"}
        curves += [{"system": system, **row} for row in figures["learning_curve"]]
        if figures["chosen"] != figures["in_use"]:
            log.warning("evaluate %s: %s is better than the night's %s by more than %s standard error(s) in "
                        "leave-one-out; list it first in train_causes.learners to adopt it", system,
                        figures["chosen"], figures["in_use"], params.learner_standard_errors)
    config.METRICS.mkdir(parents=True, exist_ok=True)
    atomic.write_json_atomic(config.METRICS / "cause_learners.json", out)
    with atomic.atomic_path(config.METRICS / "causes_learning_curve.csv") as tmp:
        columns = ["system", "learner", "runs_per_cause", "accuracy", "trials"]
        pd.DataFrame(curves, columns=columns).to_csv(tmp, index=False)
