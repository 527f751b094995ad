"""detect: the association-rule ensembles on every target run.

The ensembles (Foo et al. 2015 phases 3-6, seed 003) are
:mod:`pipelines.detectors.rule_ensemble`.  This stage calibrates stacking on each system's
normal runs, then analyses every target and writes
``data/processed/detections/<run_id>.json`` with stacking's p-value against the null of the
run's situation.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from pipelines import config, parallel
from pipelines.calibration import history, labs
from pipelines.detectors.rule_ensemble import DetectCache, DetectContext, analyse, calibrate_system, stacking_evidence
from pipelines.progress import Progress
from pipelines.storage import archive, locks, memo, store

log = logging.getLogger("regresslab.detect")


@locks.holding("detect calibration")
def calibrate_all(caches: dict[str, DetectCache] | None = None) -> list[str]:
    """Calibrate stacking for every system; the systems (nightly DAG task)."""
    params, mine_params, hist = config.load_params("detect"), config.load_params("mine_rules"), \
        config.load_params("history")
    significance = config.load_params("significance")
    index = archive.read_valid_index()
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


def detect_one(run_id: str, caches: dict[str, DetectCache] | None = None) -> tuple[dict[str, Any], bool]:
    """:func:`run_one` without the lock: (the verdict document, whether it was reused)."""
    params = config.load_params("detect")
    mine_params = config.load_params("mine_rules")
    hist = config.load_params("history")
    significance = config.load_params("significance")
    index = archive.read_valid_index()
    system = index[run_id]["system"]
    baseline, origin = history.baseline_choice(run_id, index, window=hist["window"], exclude=set(hist["exclude"]))
    verdicts = history.verdicts(index, system, exclude=set(hist["exclude"]))
    calibration = store.read_optional(config.stacking_calibration_path(system)) or {}
    key = memo.input_key("detect", index, {"target": [run_id], "baseline": baseline, "verified": list(verdicts)},
                         edges=memo.file_digest(config.edges_path(system)), detect=params, mine_rules=mine_params,
                         history=hist, significance=significance,
                         calibration=calibration.get(memo.KEY_FIELD) or calibration)
    done = memo.reuse(config.detection_path(run_id), key)
    if done is not None:
        return done, True
    spec = store.read_edges(system)
    caches = {} if caches is None else caches
    if system not in caches:
        caches[system] = DetectCache(store.FrameStore(spec["reference_load"]))
    ctx = DetectContext.of_system(system, index, spec, caches[system], params, mine_params, hist, significance)
    result, doc = analyse(run_id, baseline, ctx, lab_runs=verdicts)
    null, kind = labs.matched_null(doc["details"]["lab"]["status"], calibration.get("normal_scores") or {},
                                   calibration.get("cross_lab_scores"), run_id)
    doc["methods"]["association_rules_stacking"].update(stacking_evidence(result, list(null.values())),
                                                        null=kind, history_faults=calibration.get("fault_pvalues"))
    doc["details"]["baseline_origin"] = origin
    return memo.write(config.detection_path(run_id), doc, key), False


@locks.holding("detect")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.DETECTIONS, config.SINGLE_MODELS, config.STACKING_CALIBRATION)
    index = archive.read_valid_index()
    todo = history.targets(index)
    progress = Progress(log, "detect", len(todo))
    caches: dict[str, DetectCache] = {}
    systems = calibrate_all(caches)
    archive.prune_outputs(config.STACKING_CALIBRATION, systems)
    archive.prune_outputs(config.DETECTIONS, todo)
    def detected(run_id: str, out: tuple[dict[str, Any], bool]) -> str:
        doc, kept = out
        return (f"{run_id} -> {doc['verdict']}, {len(doc['flagged_counters'])} flagged"
                + (" (unchanged, reused)" if kept else ""))
    done = parallel.map_ordered(lambda run_id: detect_one(run_id, caches), todo, progress=progress.each(detected))
    reused = sum(kept for _, kept in done)
    print(f"[detect] {len(todo)} target runs analysed ({reused} unchanged since the last night, reused) "
          f"-> {config.DETECTIONS}")


if __name__ == "__main__":
    main()

