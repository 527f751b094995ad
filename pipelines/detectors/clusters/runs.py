"""The clustered regression models of a system's runs, stored: the system calibrated once on its
history (the largest excess error of its normal runs, each modelled against the others; the
cross-lab null; the record of its verified faults and normal runs), each target modelled against
its baseline under that calibration (Shang et al. 2015, seed 000; the models themselves are
:mod:`pipelines.detectors.clusters.models`).  A result computed under the same input key
(``memo``) is kept.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from pipelines import config, parallel
from pipelines.systems import history
from pipelines.detectors.clusters.models import (
    ClusterParams,
    cross_lab_scores,
    judge_matched,
    model_against,
    normal_pvalues,
    normal_scores,
)
from pipelines.protocol import SystemHistory
from pipelines.progress import Progress
from pipelines.storage import atomic, memo
from pipelines.storage.run_records import ValidIndex
from pipelines.storage.stage_files import Calibration, ClusterResult

log = logging.getLogger("regresslab.clusters")


def load_params() -> ClusterParams:
    """The project's ``clusters`` block (``config.load_params``), typed: the stages' one loading site."""
    return ClusterParams.of(config.load_params("clusters"))


def calibrate_system(system: str, index: ValidIndex, frames, params: ClusterParams,
                     hist: history.HistoryParams) -> Calibration:
    """The null distribution of the largest excess error (:func:`normal_scores`), written per system;
    an unchanged one (``memo``: the same passed runs, params and code) is kept."""
    passed = hist.passed(index, system)
    path = config.cluster_calibration_path(system)
    key = memo.input_key("clusters", index, {"passed": passed, "verified": verified_of(index, system, hist)},
                         system=system, clusters=params.block, history=hist.block, reference=frames.reference)
    done = memo.reuse_as(path, key, Calibration)
    if done is not None:
        log.info("clusters calibration %s: %d normal runs unchanged, reused", system, len(passed))
        return done
    null, _ = normal_scores(passed, index, frames, params, hist)
    verdicts = hist.verdicts(index, system)
    cross = cross_lab_scores(passed, index, frames, params, hist, verdicts)
    calibration: Calibration = {"system": system, "runs": passed, "normal_scores": null, "cross_lab_scores": cross,
                                "fault_pvalues": fault_pvalues(index, frames, params, hist, null, verdicts),
                                "normal_pvalues": normal_pvalues(null)}
    return memo.write(path, calibration, key)


def fault_pvalues(index: ValidIndex, frames, params: ClusterParams, hist: history.HistoryParams,
                  null: dict[str, float], verdicts: dict[str, str]) -> dict[str, float]:
    """Each verified fault run whose baseline shares its lab, modelled as a target is: its p-value
    against the normal runs' (``decision.fault_weights`` learns each detector's share of the rate
    from them), on the stage's processes."""
    faults = history.fault_runs(verdicts)
    progress = Progress(log, "clusters calibration faults", len(faults), what="fault runs")

    def model_fault(run_id: str) -> float | None:
        baseline = hist.baseline(run_id, index)
        result = judge_matched(model_against(run_id, baseline, index, frames, params, hist), null, None, params, run_id)
        return result.get("p_value") if (result.get("lab") or {}).get("status") == "same_lab" else None
    judged = dict(zip(faults, parallel.map_ordered(model_fault, faults, progress=progress.each())))
    return {r: p for r, p in judged.items() if p is not None}


def verified_of(index: ValidIndex, system: str, hist: history.HistoryParams) -> list[str]:
    """The verified runs of a system: the labs' levels (``labs.lab_shift``) are learned from them."""
    return hist.verified(index, system)


def cluster_key(run_id: str, index: ValidIndex, frames, params: ClusterParams, hist: history.HistoryParams,
                calibration: Calibration) -> str:
    """The input key of a target's cluster models (``memo``): the run, its baseline, the verified
    runs, the calibration, the params and the code."""
    return memo.input_key("clusters", index, {"target": [run_id], "baseline": hist.baseline(run_id, index),
                                              "verified": verified_of(index, index[run_id]["system"], hist)},
                          clusters=params.block, history=hist.block, reference=frames.reference,
                          calibration=calibration.get(memo.KEY_FIELD) or calibration)


def cluster_run(run_id: str, index: ValidIndex, frames, params: ClusterParams, hist: history.HistoryParams,
                calibration: Calibration) -> ClusterResult:
    """One target's clustered regression models against the most similar passed runs of its
    baseline, judged against its system's calibration, and written under its :func:`cluster_key`."""
    key = cluster_key(run_id, index, frames, params, hist, calibration)
    result = judge_matched(model_against(run_id, hist.baseline(run_id, index), index, frames, params, hist),
                           calibration.get("normal_scores") or {}, calibration.get("cross_lab_scores"), params, run_id)
    result["history_faults"] = calibration.get("fault_pvalues")
    result["history_normals"] = calibration.get("normal_pvalues")
    return memo.write(config.cluster_path(run_id), result, key)


def stored_calibration(system: str, index, frames, params, hist) -> Calibration:
    """The system's stored calibration, or a new one (:func:`calibrate_system`)."""
    path = config.cluster_calibration_path(system)
    return atomic.read_json(path) if path.exists() else calibrate_system(system, index, frames, params, hist)


@dataclass(frozen=True)
class ClusterModels:
    """The clustered regression models as a :class:`~pipelines.protocol.Detector` (the
    ``clusters`` stage's)."""

    params: ClusterParams
    name: str = "clustered_regression"

    def calibrate(self, seen: SystemHistory) -> Calibration:
        return calibrate_system(seen.system, seen.index, seen.frames, self.params, seen.hist)

    def stored(self, seen: SystemHistory) -> Calibration:
        return stored_calibration(seen.system, seen.index, seen.frames, self.params, seen.hist)

    def kept(self, run_id: str, seen: SystemHistory, calibration: Calibration) -> ClusterResult | None:
        return memo.reuse_as(config.cluster_path(run_id), cluster_key(run_id, seen.index, seen.frames, self.params,
                                                                      seen.hist, calibration), ClusterResult)

    def judge(self, run_id: str, seen: SystemHistory, calibration: Calibration) -> ClusterResult:
        return cluster_run(run_id, seen.index, seen.frames, self.params, seen.hist, calibration)
