"""The association rules' result of a run as the verdict reads it (``detect``'s file):
:func:`result`, registered as ``pipelines.detectors.rules.reader:result``.
"""
from __future__ import annotations

from pipelines.protocol import DetectorResult, RunFiles, null_of
from pipelines.storage.stage_files import RuleDetection

RULE_METHODS = ("association_rules_stacking", "association_rules_bagging", "association_rules_single")


def result(files: RunFiles) -> DetectorResult | None:
    """``detect``'s result: stacking decides; bagging and the single model are on its page (bagging's
    flags name what moved when stacking's name none)."""
    detection: RuleDetection | None = files.docs.get("detect")
    if detection is None:
        return None
    page = {k: dict(detection["methods"][k]) for k in RULE_METHODS}        # copies: the flags are filtered
    stacking = page["association_rules_stacking"]
    scores = detection.get("counter_scores", {})
    return DetectorResult(judged=True, verdict=stacking["verdict"], p_value=stacking.get("p_value"), votes=True,
                          run_score=float(max(scores.values(), default=0.0)), counter_scores=scores,
                          flagged_counters=list(stacking.get("flagged_counters") or []),
                          reserve_counters=list(page["association_rules_bagging"].get("flagged_counters") or []),
                          history_faults=stacking.pop("history_faults", None),
                          history_normals=stacking.pop("history_normals", None), page=page,
                          title="association rules (stacking)", counters="scored", **null_of(stacking))
