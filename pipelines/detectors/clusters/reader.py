"""The cluster models' result of a run as the verdict reads it (``clusters``' file):
:func:`result`, registered as ``pipelines.detectors.clusters.reader:result``.
"""
from __future__ import annotations

from typing import Any, TypedDict

from pipelines.protocol import DetectorResult, RunFiles, null_of, recorded
from pipelines.storage.stage_files import ClusterResult


class ClusteredSummary(TypedDict):
    """The cluster models' entry of the verdict file's ``methods`` (:func:`clustered_summary`)."""

    verdict: str | None
    max_prediction_error: float | None
    max_excess_error: float | None
    p_value: float | None
    error_threshold: float | None
    null: str | None
    flagged_counters: list[str]
    n_clusters: int
    clusters: list[dict[str, Any]]
    redundant_counters: list[str]
    constant_counters: list[str]


def clustered_summary(result: ClusterResult, *, top: int = 10) -> ClusteredSummary:
    """What the verdict file keeps of a ``clusters`` result (contract §2: verdict and
    ``max_prediction_error``): the worst ``top`` clusters with their counters and errors."""
    keys = ("counters", "target_counter", "ks_p_value", "error", "baseline_error", "excess_error", "regression")
    return {"verdict": result["verdict"], "max_prediction_error": result["max_prediction_error"],
            "max_excess_error": result.get("max_excess_error"), "p_value": result.get("p_value"),
            "error_threshold": result.get("error_threshold"), "null": result.get("null"),
            "flagged_counters": result.get("flagged_counters") or [],
            "n_clusters": len(result.get("clusters") or []),
            "clusters": [{k: c.get(k) for k in keys} for c in (result.get("clusters") or [])[:top]],
            "redundant_counters": sorted(result.get("redundant_counters") or {}),
            "constant_counters": list(result.get("constant_counters") or [])}


def result(files: RunFiles) -> DetectorResult | None:
    """``clusters``' result: the cluster models' largest excess error against the normal runs'."""
    clustered: ClusterResult | None = files.docs.get("clusters")
    if clustered is None:
        return None
    if not clustered.get("verdict"):
        return recorded(clustered, title="cluster models", counters="models")
    summary = clustered_summary(clustered)
    return recorded(clustered, title="cluster models", counters="models", verdict=clustered["verdict"],
                    p_value=clustered.get("p_value"), flagged_counters=list(clustered.get("flagged_counters") or []),
                    page={"clustered_regression": summary}, **null_of(summary))
