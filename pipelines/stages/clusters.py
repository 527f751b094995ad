"""clusters: clustered regression models of every target run.

The models (Shang et al. 2015, seed 000) are :mod:`pipelines.detectors.clusters.models`; a
system's calibration and a target's models, stored, are :mod:`pipelines.detectors.clusters.runs`
(its :class:`~pipelines.detectors.clusters.runs.ClusterModels` detector).  This stage calibrates
each system on its normal runs and writes the calibration and each target's clusters to
``data/processed/clusters/``.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterator

from pipelines import config
from pipelines.systems import history
from pipelines.detectors.clusters.runs import ClusterModels, load_params
from pipelines.detection import judging
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest
from pipelines.storage.stage_files import ClusterResult

log = logging.getLogger("regresslab.clusters")


@locks.holding("clusters calibration")
def calibrate_all() -> list[str]:
    """Calibrate every system; the systems (nightly DAG task)."""
    return judging.calibrate_every_system(ClusterModels(load_params()), history.HistoryParams.load())


def run_one(run_id: str) -> ClusterResult:
    """Model one target and write its result: a batch of one (:func:`batch`)."""
    with batch() as one:
        return one(run_id)


@contextmanager
def batch() -> Iterator[Callable[[str], ClusterResult]]:
    """The per-run work of one nightly DAG task (:func:`run_one` is a batch of one): the history's
    frames and each system's calibration read once for the batch (:func:`judging.batch`)."""
    with judging.batch(ClusterModels(load_params()), history.HistoryParams.load(), None, lock="clusters batch") as one:
        yield one


@locks.holding("clusters")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.CLUSTERS / "calibration")
    index = manifest.read_valid_index()
    todo = history.targets(index)
    atomic.prune_outputs(config.CLUSTERS / "calibration", history.systems(index))
    atomic.prune_outputs(config.CLUSTERS, todo)
    progress = Progress(log, "clusters", len(todo))

    def modelled(run_id: str, out: tuple[ClusterResult, bool]) -> str:
        result, kept = out
        return (f"{run_id} -> {result['verdict']}, largest error {result.get('max_prediction_error')}"
                + (" (unchanged, reused)" if kept else ""))
    reused = judging.judge_night(ClusterModels(load_params()), todo, index, history.HistoryParams.load(), None,
                                 progress, modelled)
    print(f"[clusters] {progress.done} target(s) modelled ({reused} unchanged since the last night, reused)")


if __name__ == "__main__":
    config.install_error_hook()
    main()
