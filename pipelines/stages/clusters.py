"""clusters: clustered regression models of every target run.

The models (Shang et al. 2015, seed 000) are :mod:`pipelines.detectors.cluster_models`; a
system's calibration and a target's models, stored, are :mod:`pipelines.calibration.cluster_runs`.
This stage calibrates each system on its normal runs and writes the calibration and each
target's clusters to ``data/processed/clusters/``.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from pipelines import config, parallel
from pipelines.calibration import history
from pipelines.calibration.cluster_runs import calibrate_system, cluster_run, load_params, stored_calibration
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest, store

log = logging.getLogger("regresslab.clusters")


@locks.holding("clusters calibration")
def calibrate_all() -> list[str]:
    """Calibrate every system; the systems (nightly DAG task)."""
    return store.calibrate_every_system(calibrate_system, load_params(),
                                        history.HistoryParams.load())


def run_one(run_id: str) -> dict[str, Any]:
    """Model one target and write its result: a batch of one (:func:`batch`)."""
    with batch() as one:
        return one(run_id)


@contextmanager
def batch() -> Iterator[Callable[[str], dict[str, Any]]]:
    """The per-run work of one nightly DAG task (:func:`run_one` is a batch of one): one shared hold of
    the data folder, one frame store and one calibration per system, read once for the batch."""
    index = manifest.read_valid_index()
    params, hist = load_params(), history.HistoryParams.load()
    shared: dict[str, tuple[store.FrameStore, dict[str, Any]]] = {}

    def one(run_id: str) -> dict[str, Any]:
        system = index[run_id]["system"]
        if system not in shared:
            frames = store.FrameStore.of_system(system)
            shared[system] = frames, stored_calibration(system, index, frames, params, hist)
        frames, calibration = shared[system]
        return cluster_run(run_id, index, frames, params, hist, calibration)[0]

    with locks.data_lock("clusters batch", shared=True):
        yield one


@locks.holding("clusters")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.CLUSTERS / "calibration")
    params, hist = load_params(), history.HistoryParams.load()
    index = manifest.read_valid_index()
    todo = history.targets(index)
    atomic.prune_outputs(config.CLUSTERS / "calibration", history.systems(index))
    atomic.prune_outputs(config.CLUSTERS, todo)
    progress = Progress(log, "clusters", len(todo))
    def modelled(run_id: str, out: tuple[dict[str, Any], bool]) -> str:
        result, kept = out
        return (f"{run_id} -> {result['verdict']}, largest error {result.get('max_prediction_error')}"
                + (" (unchanged, reused)" if kept else ""))
    reused = 0
    for system in history.systems(index):
        frames = store.FrameStore.of_system(system)
        calibration = calibrate_system(system, index, frames, params, hist)
        done = parallel.map_ordered(lambda run_id: cluster_run(run_id, index, frames, params, hist, calibration),
                                    [t for t in todo if index[t]["system"] == system], progress=progress.each(modelled))
        reused += sum(kept for _, kept in done)
    print(f"[clusters] {progress.done} target(s) modelled ({reused} unchanged since the last night, reused)")


if __name__ == "__main__":
    config.install_error_hook()
    main()

