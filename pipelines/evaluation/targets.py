"""The labelled targets: runs analysed as targets whose truth is known (``evaluate.labels``),
scored from their verdict files -- the three combiners from ``detect``'s, the headline from the report's --
and their causes against the truth.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pipelines import config
from pipelines.verdict.cause import cause_of
from pipelines.evaluation.scores import COMBINERS, ScoreRow, Truth, classifier_rows, score_rows
from pipelines.storage import atomic, store
from pipelines.storage.run_records import ValidIndex


def labelled_targets(index: ValidIndex, label_files: list[Path]):
    """``(run_id, truth)`` of every run of the index that a labels file knows the truth of."""
    for path in label_files:
        if path.exists():
            for run_id, truth in atomic.read_json(path).items():
                if run_id in index:
                    yield run_id, truth


def target_rows(index: ValidIndex, label_files: list[Path]) -> list[ScoreRow]:
    rows: list[ScoreRow] = []
    for run_id, truth in labelled_targets(index, label_files):
        detection = config.detection_path(run_id)
        if not detection.exists():
            continue
        doc = atomic.read_json(detection)
        known = Truth.of(run_id, index[run_id]["system"], truth)
        flagged: dict[str, list[str]] = {c: doc["methods"][f"association_rules_{c}"]["flagged_counters"]
                                         for c in COMBINERS}
        rows += score_rows(known, flagged, doc["counter_scores"], "targets")
        chart = store.read_optional(config.chart_path(run_id))
        if chart and chart.get("verdict"):
            rows += score_rows(known, {"control_charts": chart["flagged_counters"]},
                               chart["counter_scores"], "targets", failed=chart["verdict"] == "fail")
        within = (chart or {}).get("within_run") or {}
        if within.get("verdict"):
            rows += score_rows(known, {"within_run": within["flagged_counters"]},
                               within["counter_scores"], "targets", failed=within["verdict"] == "fail")
        clustered = store.read_optional(config.cluster_path(run_id))
        if clustered and clustered.get("verdict"):
            rows += score_rows(known, {"clustered_regression": clustered["flagged_counters"]},
                               clustered["counter_scores"], "targets", failed=clustered["verdict"] == "fail")
        verdict_file = config.run_report_path(run_id)
        if verdict_file.exists():
            head = atomic.read_json(verdict_file)
            rows += score_rows(known, {"headline": head["flagged_counters"]},
                               head["counter_scores"], "targets", failed=head["verdict"] == "fail")
            rows += classifier_rows(known, head, "targets")
    return rows


def target_cause_figures(index: ValidIndex, label_files: list[Path]) -> dict[str, Any]:
    """How the targets' causes compare with the truth, on the targets that truly failed.

    The cause is judged whatever the headline said (cause accuracy on failed targets):
    the cause the run would show failed (``cause.cause_of``: the nearest fault cause, and
    whether it is known) against the true cause.  For a cause seen in the history: whether that label is right (``nearest``), whether it
    was called known, and the same among the runs the headline failed (what a reader sees).  For
    an unseen cause: whether it was called unknown.  ``confusion`` is truth -> nearest -> runs."""
    seen = {(row["system"], row.get("cause")) for row in index.values() if row.get("verdict") == "fail"}
    known_rows: list[tuple[bool, bool, bool]] = []
    unseen_rows: list[bool] = []
    confusion: dict[str, dict[str, int]] = {}
    for run_id, truth in labelled_targets(index, label_files):
        verdict_file = config.run_report_path(run_id)
        if truth.get("verdict") != "fail" or not verdict_file.exists():
            continue
        doc = atomic.read_json(verdict_file)
        as_failed = cause_of("fail", doc.get("details", {}).get("cause_prediction"))
        nearest, known = as_failed["label"], as_failed["known"]
        row = confusion.setdefault(str(truth.get("cause")), {})
        row[str(nearest)] = row.get(str(nearest), 0) + 1
        if (index[run_id]["system"], truth.get("cause")) in seen:
            known_rows.append((nearest == truth["cause"], known, doc["verdict"] == "fail"))
        else:
            unseen_rows.append(not known)

    def share(values: list[bool]) -> float | None:
        return round(float(np.mean(values)), 4) if values else None
    detected = [a for a, _, d in known_rows if d]
    return {"seen_cause_runs": len(known_rows),
            "seen_cause_label_correct": share([a for a, _, _ in known_rows]),
            "seen_cause_called_known": share([b for _, b, _ in known_rows]),
            "seen_cause_known_and_correct": share([a and b for a, b, _ in known_rows]),
            "seen_cause_runs_failed_by_headline": len(detected),
            "seen_cause_label_correct_when_failed": share(detected),
            "unseen_cause_runs": len(unseen_rows),
            "unseen_cause_called_unknown": share(unseen_rows),
            "confusion": {t: dict(sorted(r.items())) for t, r in sorted(confusion.items())}}

