"""detect: the association-rule ensembles on every target run.

The ensembles (Foo et al. 2015 phases 3-6, seed 003) are
:mod:`pipelines.detectors.rule_ensemble`; a target's detection, stored, is
:mod:`pipelines.calibration.rule_runs`.  This stage calibrates stacking on each system's
normal runs, then analyses every target and writes
``data/processed/detections/<run_id>.json`` with stacking's p-value against the null of the
run's situation.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from pipelines import config, parallel
from pipelines.calibration import effects, history
from pipelines.calibration.rule_runs import DetectJob, detect_one
from pipelines.detectors.rule_mining import MiningParams
from pipelines.detectors.rule_ensemble import DetectCache, DetectContext, DetectParams, calibrate_system
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest, store

log = logging.getLogger("regresslab.detect")


@locks.holding("detect calibration")
def calibrate_all(caches: dict[str, DetectCache] | None = None) -> list[str]:
    """Calibrate stacking for every system; the systems (nightly DAG task)."""
    params, mine_params, hist = DetectParams.load(), MiningParams.load(), \
        history.HistoryParams.load()
    significance = effects.Significance.load()
    index = manifest.read_valid_index()
    caches = {} if caches is None else caches
    systems = [s for s in history.systems(index) if config.edges_path(s).exists()]
    for system in systems:
        spec = store.read_edges(system)
        cache = caches.setdefault(system, DetectCache(store.FrameStore(spec["reference_load"])))
        calibrate_system(system, DetectContext.of_system(system, index, spec, cache, params, mine_params, hist,
                                                         significance), hist)
    return systems


@locks.holding("detect", shared=True)
def run_one(run_id: str, caches: dict[str, DetectCache] | None = None) -> dict[str, Any]:
    """Detect on one target run and write its result (the per-run task of the nightly DAG).

    ``caches`` keeps one :class:`DetectCache` per system across the targets of one process.
    A result computed under the same input key (``memo``: the run, its baseline, the lab's
    verified runs, the bins, the calibration, the params and the code) is kept as it is.
    """
    return detect_one(run_id, caches)[0]


@contextmanager
def batch() -> Iterator[Callable[[str], dict[str, Any]]]:
    """:func:`run_one` for the runs of one nightly DAG task: one shared hold of the data folder
    and one :class:`DetectCache` per system (the history's rule models and binned runs, loaded
    once for the batch, not once per run)."""
    caches: dict[str, DetectCache] = {}
    with locks.data_lock("detect batch", shared=True):
        yield lambda run_id: detect_one(run_id, caches)[0]


@locks.holding("detect")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.DETECTIONS, config.SINGLE_MODELS, config.STACKING_CALIBRATION)
    index = manifest.read_valid_index()
    todo = history.targets(index)
    progress = Progress(log, "detect", len(todo))
    caches: dict[str, DetectCache] = {}
    systems = calibrate_all(caches)
    atomic.prune_outputs(config.STACKING_CALIBRATION, systems)
    atomic.prune_outputs(config.DETECTIONS, todo)
    def detected(run_id: str, out: tuple[dict[str, Any], bool]) -> str:
        doc, kept = out
        return (f"{run_id} -> {doc['verdict']}, {len(doc['flagged_counters'])} flagged"
                + (" (unchanged, reused)" if kept else ""))
    jobs = {run_id: DetectJob.of(run_id, index) for run_id in todo}
    kept = {run_id: job.reused() for run_id, job in jobs.items()}
    tick = progress.each(detected)
    for run_id in [r for r in todo if kept[r] is not None]:
        tick(0, run_id, (kept[run_id], True))
    fresh = [r for r in todo if kept[r] is None]
    # targets on every core; fewer new targets than cores (a second night's one new archive): one
    # at a time here, and each target's own work (pruning by reference run) on every core
    one_by_one = len(fresh) < parallel.configured_jobs()
    parallel.map_ordered(lambda run_id: (jobs[run_id].compute(caches), False), fresh, jobs=1 if one_by_one else None,
                         progress=tick)
    reused = len(todo) - len(fresh)
    print(f"[detect] {len(todo)} target runs analysed ({reused} unchanged since the last night, reused) "
          f"-> {config.DETECTIONS}")


if __name__ == "__main__":
    config.install_error_hook()
    main()

