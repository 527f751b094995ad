"""clusters: clustered regression models of every target run.

The models (Shang et al. 2015, seed 000) are :mod:`pipelines.detectors.cluster_models`.
This stage calibrates each system on its normal runs and writes the calibration and each
target's clusters to ``data/processed/clusters/``.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from pipelines import config, parallel
from pipelines.calibration import history
from pipelines.detectors.cluster_models import (
    cross_lab_scores,
    decide_matched,
    model_against,
    normal_pvalues,
    normal_scores,
)
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest, memo, store

log = logging.getLogger("regresslab.clusters")


def calibrate_system(system: str, index: dict[str, Any], frames, params: dict[str, Any],
                     hist: dict[str, Any]) -> dict[str, Any]:
    """The null distribution of the largest excess error (:func:`normal_scores`), written per system;
    an unchanged one (``memo``: the same passed runs, params and code) is kept."""
    passed = history.passed_runs(index, system, exclude=set(hist["exclude"]), window=hist["window"])
    path = config.cluster_calibration_path(system)
    key = memo.input_key("clusters", index, {"passed": passed, "verified": verified_of(index, system, hist)},
                         system=system, clusters=params, history=hist, reference=frames.reference)
    done = memo.reuse(path, key)
    if done is not None:
        log.info("clusters calibration %s: %d normal runs unchanged, reused", system, len(passed))
        return done
    null, _ = normal_scores(passed, index, frames, params, hist)
    verdicts = history.verdicts(index, system, exclude=set(hist["exclude"]))
    cross = cross_lab_scores(passed, index, frames, params, hist, verdicts)
    return memo.write(path, {"system": system, "runs": passed, "normal_scores": null, "cross_lab_scores": cross,
                             "fault_pvalues": fault_pvalues(index, frames, params, hist, null, verdicts),
                             "normal_pvalues": normal_pvalues(null)}, key)


def fault_pvalues(index: dict[str, Any], frames, params: dict[str, Any], hist: dict[str, Any],
                  null: dict[str, float], verdicts: dict[str, str]) -> dict[str, float]:
    """Each verified fault run whose baseline shares its lab, modelled as a target is: its p-value
    against the normal runs' (``headline.fault_weights`` learns each detector's share of the rate
    from them), on the stage's processes."""
    faults = history.fault_runs(verdicts)
    progress = Progress(log, "clusters calibration faults", len(faults), what="fault runs")

    def model_fault(run_id: str) -> float | None:
        baseline = history.baseline_for(run_id, index, window=hist["window"], exclude=set(hist["exclude"]))
        result = decide_matched(model_against(run_id, baseline, index, frames, params, hist), null, None, params, run_id)
        return result.get("p_value") if (result.get("lab") or {}).get("status") == "same_lab" else None
    judged = dict(zip(faults, parallel.map_ordered(model_fault, faults, progress=progress.each())))
    return {r: p for r, p in judged.items() if p is not None}


def verified_of(index: dict[str, Any], system: str, hist: dict[str, Any]) -> list[str]:
    """The verified runs of a system: the labs' levels (``labs.lab_shift``) are learned from them."""
    return history.verified_runs(index, system, exclude=set(hist["exclude"]))


def cluster_run(run_id: str, index: dict[str, Any], frames, params: dict[str, Any], hist: dict[str, Any],
                calibration: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """One target's clustered regression models against the most similar passed runs of its
    baseline, judged against its system's calibration, and written; (the result, whether it was
    reused: ``memo``, the same run, baseline, verified runs, calibration, params and code)."""
    baseline = history.baseline_for(run_id, index, window=hist["window"], exclude=set(hist["exclude"]))
    key = memo.input_key("clusters", index, {"target": [run_id], "baseline": baseline,
                                             "verified": verified_of(index, index[run_id]["system"], hist)},
                         clusters=params, history=hist, reference=frames.reference,
                         calibration=calibration.get(memo.KEY_FIELD) or calibration)
    done = memo.reuse(config.cluster_path(run_id), key)
    if done is not None:
        return done, True
    result = decide_matched(model_against(run_id, baseline, index, frames, params, hist),
                            calibration.get("normal_scores") or {}, calibration.get("cross_lab_scores"), params, run_id)
    result["history_faults"] = calibration.get("fault_pvalues")
    result["history_normals"] = calibration.get("normal_pvalues")
    return memo.write(config.cluster_path(run_id), result, key), False


def _calibration(system: str, index, frames, params, hist) -> dict[str, Any]:
    path = config.cluster_calibration_path(system)
    return atomic.read_json(path) if path.exists() else calibrate_system(system, index, frames, params, hist)


@locks.holding("clusters calibration")
def calibrate_all() -> list[str]:
    """Calibrate every system; the systems (nightly DAG task)."""
    return store.calibrate_every_system(calibrate_system, config.load_params("clusters"),
                                        config.load_params("history"))


def run_one(run_id: str) -> dict[str, Any]:
    """Model one target and write its result: a batch of one (:func:`batch`)."""
    with batch() as one:
        return one(run_id)


@contextmanager
def batch() -> Iterator[Callable[[str], dict[str, Any]]]:
    """The per-run work of one nightly DAG task (:func:`run_one` is a batch of one): one shared hold of
    the data folder, one frame store and one calibration per system, read once for the batch."""
    index = manifest.read_valid_index()
    params, hist = config.load_params("clusters"), config.load_params("history")
    shared: dict[str, tuple[store.FrameStore, dict[str, Any]]] = {}

    def one(run_id: str) -> dict[str, Any]:
        system = index[run_id]["system"]
        if system not in shared:
            frames = store.FrameStore.of_system(system)
            shared[system] = frames, _calibration(system, index, frames, params, hist)
        frames, calibration = shared[system]
        return cluster_run(run_id, index, frames, params, hist, calibration)[0]

    with locks.data_lock("clusters batch", shared=True):
        yield one


@locks.holding("clusters")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    config.ensure_dirs(config.CLUSTERS / "calibration")
    params, hist = config.load_params("clusters"), config.load_params("history")
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

