"""The run against itself as the verdict reads it (computed by ``control_charts``, inside its file):
:func:`result`, registered as ``pipelines.detectors.within_run.reader:result``.
"""
from __future__ import annotations

from pipelines.protocol import DetectorResult, RunFiles, null_of, recorded

WITHIN_FIELDS = ("verdict", "score", "p_value", "normal_runs", "false_alarm_rate", "flagged_counters", "changes",
                 "limits_by")


def result(files: RunFiles) -> DetectorResult | None:
    """The run against itself (computed by ``control_charts``): its null needs no other run; deciding
    alone, the run's score is its largest contrast ``r`` over its limit as ``r / (1 + r)``."""
    within = (files.docs.get("control_charts") or {}).get("within_run")
    if not within:
        return None
    if not within.get("verdict"):
        return recorded(within, reason=within.get("reason"), title="the run against itself", self_contained=True)
    page = {k: within.get(k) for k in WITHIN_FIELDS}
    r = float(within.get("score") or 0.0)
    return recorded(within, reason=within.get("reason"), title="the run against itself", self_contained=True,
                    verdict=within.get("verdict"), p_value=within.get("p_value"),
                    flagged_counters=list(within.get("counters_beyond_limit") or []), page={"within_run": page},
                    null_runs=null_of(page)["null_runs"], alone_score=r / (1.0 + r))
