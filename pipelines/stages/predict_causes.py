"""predict_causes: the probable regression cause of every target run, or "unknown".

The prediction (Nguyen 2017 ch. 8-9, seed 004) is :func:`pipelines.detectors.causes.prediction.predict_cause`:
the target's pair rows through the system's current cause model; a target's prediction, stored,
is :mod:`pipelines.detectors.causes.runs` (its
:class:`~pipelines.detectors.causes.runs.CauseClassifier` detector).  Writes
``data/processed/causes/<run_id>.json``.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterator

from pipelines import config
from pipelines.systems import history
from pipelines.detectors.causes.runs import CauseClassifier
from pipelines.detectors.charts import control_charts as charts
from pipelines.detection import judging
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest
from pipelines.storage.cause_files import CausePrediction

log = logging.getLogger("regresslab.predict_causes")


def run_one(run_id: str) -> CausePrediction:
    """Predict the cause of one target run: a batch of one (:func:`batch`)."""
    with batch() as one:
        return one(run_id)


@contextmanager
def batch() -> Iterator[Callable[[str], CausePrediction]]:
    """The per-run work of one nightly DAG task (:func:`run_one` is a batch of one): one shared hold of
    the data folder, the cause models and one charter per system, loaded once for the batch."""
    with judging.batch(CauseClassifier(charts.ControlChartParams.load()), history.HistoryParams.load(), None,
                       lock="predict_causes batch") as one:
        yield one


@locks.holding("predict_causes")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.CAUSES)
    index = manifest.read_valid_index()
    todo = history.targets(index)
    atomic.prune_outputs(config.CAUSES, todo)
    progress = Progress(log, "predict_causes", len(todo))
    judging.judge_night(CauseClassifier(charts.ControlChartParams.load()), todo, index, history.HistoryParams.load(),
                        None, progress, lambda run_id, out: f"{run_id} -> {out[0]['label']} "
                        f"p={out[0]['probability']} known={out[0]['known']}")
    print(f"[predict_causes] {len(todo)} target runs")


if __name__ == "__main__":
    config.install_error_hook()
    main()
