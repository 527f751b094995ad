"""A target's association-rule detection, stored (Foo et al. 2015 phases 3-6, seed 003; the
ensembles are :mod:`pipelines.detectors.rule_ensemble`): what it reads (its baseline, the lab's
verified runs, the system's stacking calibration, the params), the input key they make
(``memo``), and the verdict document with stacking's p-value against the null of the run's
situation and the detector's record on the history.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines import config
from pipelines.calibration import effects, history, labs
from pipelines.detectors import rule_mining
from pipelines.detectors.rule_ensemble import DetectCache, DetectContext, DetectParams, analyse, load_kept, stacking_evidence
from pipelines.storage import manifest, memo, store
from pipelines.storage.run_records import ValidIndex
from pipelines.storage.stage_files import Calibration, RuleDetection


def detect_one(run_id: str, caches: dict[str, DetectCache] | None = None) -> tuple[RuleDetection, bool]:
    """One target's detection, without the lock (the ``detect`` stage's ``run_one`` holds it): (the
    verdict document, whether it was reused)."""
    job = DetectJob.of(run_id)
    done = job.reused()
    return (done, True) if done is not None else (job.compute(caches), False)


@dataclass
class DetectJob:
    """One target's detection: what it reads (its baseline, the lab's verified runs, the
    system's calibration, the params) and the input key they make (``memo``)."""

    run_id: str
    system: str
    index: ValidIndex
    baseline: list[str]
    origin: str
    verdicts: dict[str, str]
    calibration: Calibration
    params: dict[str, dict[str, Any]]
    key: str

    @classmethod
    def of(cls, run_id: str, index: ValidIndex | None = None) -> "DetectJob":
        params = {block: config.load_params(block) for block in ("detect", "mine_rules", "history", "significance")}
        hist = history.HistoryParams.of(params["history"])
        index = manifest.read_valid_index() if index is None else index
        system = index[run_id]["system"]
        baseline, origin = hist.baseline_choice(run_id, index)
        verdicts = hist.verdicts(index, system)
        calibration = store.read_optional(config.stacking_calibration_path(system)) or {}
        key = memo.input_key("detect", index, {"target": [run_id], "baseline": baseline, "verified": list(verdicts)},
                             edges=memo.file_digest(config.edges_path(system)), detect=params["detect"],
                             mine_rules=params["mine_rules"], history=hist.block, significance=params["significance"],
                             calibration=calibration.get(memo.KEY_FIELD) or calibration)
        return cls(run_id, system, index, baseline, origin, verdicts, calibration, params, key)

    def reused(self) -> RuleDetection | None:
        """The verdict document written under this key, if any."""
        return memo.reuse(config.detection_path(self.run_id), self.key)

    def compute(self, caches: dict[str, DetectCache] | None = None) -> RuleDetection:
        """Analyse the target and write its verdict document; ``caches``: one :class:`DetectCache` per system."""
        spec = store.read_edges(self.system)
        caches = {} if caches is None else caches
        new_cache = self.system not in caches
        if new_cache:
            caches[self.system] = DetectCache(store.FrameStore(spec["reference_load"]))
        p = self.params
        hist = history.HistoryParams.of(p["history"])
        ctx = DetectContext.of_system(self.system, self.index, spec, caches[self.system], DetectParams.of(p["detect"]),
                                      rule_mining.MiningParams.of(p["mine_rules"]),
                                      hist, effects.Significance.from_params(p["significance"]))
        if new_cache:           # a process of its own (a nightly DAG batch): the calibration's masks and levels
            load_kept(self.system, ctx, hist.passed(self.index, self.system))
        result, doc = analyse(self.run_id, self.baseline, ctx, lab_runs=self.verdicts)
        null, kind = labs.matched_null(doc["details"]["lab"]["status"], self.calibration.get("normal_scores") or {},
                                       self.calibration.get("cross_lab_scores"), self.run_id)
        doc["methods"]["association_rules_stacking"].update(
            stacking_evidence(result, list(null.values())), null=kind, history_faults=self.calibration.get("fault_pvalues"),
            history_normals=self.calibration.get("normal_pvalues"))
        doc["details"]["baseline_origin"] = self.origin
        return memo.write(config.detection_path(self.run_id), doc, self.key)
