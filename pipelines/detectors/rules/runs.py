"""A target's association-rule detection, stored (Foo et al. 2015 phases 3-6, seed 003; the
ensembles are :mod:`pipelines.detectors.rules.ensemble`): what it reads (its baseline, the lab's
verified runs, the system's stacking calibration, the params), the input key they make
(``memo``), and the verdict document with stacking's p-value against the null of the run's
situation and the detector's record on the history.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import cast

from pipelines import config
from pipelines.systems import labs
from pipelines.detectors.rules import mining as rule_mining
from pipelines.detectors.rules.detection import (DetectCache, DetectContext, DetectParams, analyse, calibrate_system,
                                                load_kept)
from pipelines.detectors.rules.verdict import stacking_evidence
from pipelines.protocol import SystemHistory
from pipelines.storage import memo, store
from pipelines.storage.stage_files import Calibration, RuleDetection


@dataclass
class DetectJob:
    """One target's detection: what it reads (its baseline, the lab's verified runs, the
    system's calibration, the params) and the input key they make (``memo``)."""

    run_id: str
    system: str
    baseline: list[str]
    origin: str
    verdicts: dict[str, str]
    calibration: Calibration
    key: str

    @classmethod
    def of(cls, run_id: str, seen: SystemHistory, calibration: Calibration, params: DetectParams,
           mine_params: rule_mining.MiningParams) -> "DetectJob":
        index, hist = seen.index, seen.hist
        baseline, origin = hist.baseline_choice(run_id, index)
        verdicts = hist.verdicts(index, seen.system)
        key = memo.input_key("detect", index, {"target": [run_id], "baseline": baseline, "verified": list(verdicts)},
                             edges=memo.file_digest(config.edges_path(seen.system)), detect=params.block,
                             mine_rules=mine_params.block, history=hist.block,
                             significance=dataclasses.asdict(seen.significance_block()),
                             calibration=calibration.get(memo.KEY_FIELD) or calibration)
        return cls(run_id, seen.system, baseline, origin, verdicts, calibration, key)

    def reused(self) -> RuleDetection | None:
        """The verdict document written under this key, if any."""
        return memo.reuse_as(config.detection_path(self.run_id), self.key, RuleDetection)

    def compute(self, ctx: DetectContext) -> RuleDetection:
        """Analyse the target in its system's context and write its verdict document."""
        result, doc = analyse(self.run_id, self.baseline, ctx, lab_runs=self.verdicts)
        null, kind = labs.matched_null(doc["details"]["lab"]["status"], self.calibration.get("normal_scores") or {},
                                       self.calibration.get("cross_lab_scores"), self.run_id)
        doc["methods"]["association_rules_stacking"].update(
            stacking_evidence(result, list(null.values())), null=kind, history_faults=self.calibration.get("fault_pvalues"),
            history_normals=self.calibration.get("normal_pvalues"))
        doc["details"]["baseline_origin"] = self.origin
        return memo.write(config.detection_path(self.run_id), doc, self.key)


@dataclass
class AssociationRules:
    """The association-rule ensembles (stacking decides) as a
    :class:`~pipelines.protocol.Detector` (the ``detect`` stage's).  ``contexts`` holds
    each system's :class:`DetectContext` with its :class:`DetectCache` (the history's rule models,
    binned runs, pruning masks and levels) for as long as the detector lives: the calibration's, then
    its targets', in one process or in the processes forked from it."""

    params: DetectParams
    mine_params: rule_mining.MiningParams
    contexts: dict[str, DetectContext] = field(default_factory=dict)
    name: str = "stacking"

    @classmethod
    def load(cls) -> "AssociationRules":
        """The detector under the project's ``detect`` and ``mine_rules`` blocks."""
        return cls(DetectParams.load(), rule_mining.MiningParams.load())

    def context(self, seen: SystemHistory, *, kept_too: bool = True) -> DetectContext:
        """The system's context, made on first use with a cache of its own; ``kept_too``: with the
        pruning masks and levels the calibration kept (a target judged in a process of its own, a
        nightly DAG batch's; the calibration loads them itself)."""
        if seen.system not in self.contexts:
            ctx = DetectContext.of_system(seen.system, seen.index, store.read_edges(seen.system),
                                          DetectCache(seen.frames), self.params, self.mine_params, seen.hist,
                                          seen.significance_block())
            if kept_too:
                load_kept(seen.system, ctx, seen.hist.passed(seen.index, seen.system))
            self.contexts[seen.system] = ctx
        return self.contexts[seen.system]

    def calibrate(self, seen: SystemHistory) -> Calibration:
        """The system calibrated and stored; returned as stored (JSON's types), as a DAG batch reads it."""
        calibrate_system(seen.system, self.context(seen, kept_too=False), seen.hist)
        return cast(Calibration, store.read_optional(config.stacking_calibration_path(seen.system)) or {})

    def stored(self, seen: SystemHistory) -> Calibration:
        path = config.stacking_calibration_path(seen.system)
        return cast(Calibration, store.read_optional(path)) if path.exists() else self.calibrate(seen)

    def kept(self, run_id: str, seen: SystemHistory, calibration: Calibration) -> RuleDetection | None:
        return DetectJob.of(run_id, seen, calibration, self.params, self.mine_params).reused()

    def judge(self, run_id: str, seen: SystemHistory, calibration: Calibration) -> RuleDetection:
        return DetectJob.of(run_id, seen, calibration, self.params, self.mine_params).compute(self.context(seen))
