"""The control charts' result of a run as the verdict reads it (``control_charts``' file):
:func:`result`, registered as ``pipelines.detectors.charts.reader:result``.
"""
from __future__ import annotations

from typing import Any

from pipelines.detectors.charts.files import ChartResult
from pipelines.protocol import DetectorResult, RunFiles, null_of, recorded

CHART_FIELDS = ("verdict", "violation_ratio", "threshold", "flagged_counters", "load_independent_counters")

CHART_OPTIONAL = ("p_value", "window_ratio", "false_alarm_rate", "load_independent_skipped", "null")


def result(files: RunFiles) -> DetectorResult | None:
    """``control_charts``' result (None when the stage wrote none for the run); the counters over
    their limit name what moved when the charts flagged none."""
    charts: ChartResult | None = files.docs.get("control_charts")
    if charts is None:
        return None
    if not charts.get("verdict"):
        return recorded(charts, title="control charts", counters="scored", details={"control_charts": None})
    fields: dict[str, Any] = dict(charts)
    chart = {k: fields[k] for k in CHART_FIELDS}
    chart.update({k: fields[k] for k in CHART_OPTIONAL if k in fields})
    chart["baseline_runs"] = charts["baseline_runs"]
    if charts.get("lab"):
        chart["lab"] = charts["lab"]
    return recorded(charts, title="control charts", counters="scored", verdict=charts["verdict"],
                    p_value=charts.get("p_value"), votes=True,
                    run_score=min(1.0, 2.0 * float(charts["violation_ratio"])),
                    counter_scores=charts["counter_scores"], flagged_counters=list(charts["flagged_counters"]),
                    page={"control_charts": chart}, **null_of(chart),
                    reserve_counters=list(charts.get("counters_over_limit") or []),
                    details={"control_charts": {k: charts.get(k) for k in ("ratios", "multimodal",
                                                                           "counters_over_limit")}})
