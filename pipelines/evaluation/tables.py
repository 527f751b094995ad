"""The evaluation's tables: the detectors beside the anchors (markdown), and the metrics files
(``metrics/<name>.json`` with its ``<name>_runs.csv``) written atomically.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from pipelines import config
from pipelines.evaluation import anchors
from pipelines.evaluation.leave_one_out import COMBINERS
from pipelines.storage import atomic

DETECTORS = ("headline", "control_charts", "clustered_regression", "cause_classifier", "within_run") + COMBINERS + anchors.ANCHORS


def detector_table(metrics: dict[str, Any]) -> list[str]:
    """The detectors beside the anchors, one markdown row each: run accuracy, normal runs failed and
    counter F / ROC AUC, in leave-one-out and on the targets whose truth is known."""
    def cell(source: str, name: str) -> str:
        m = metrics.get(source, {}).get(name)
        if not m:
            return "— | — | — | —"
        fmt = lambda v: "—" if v is None else f"{v:.3f}"     # noqa: E731
        return (f"{fmt(m['run_accuracy'])} | {m['normal_runs_with_flags']}/{m['normal_runs']} | {fmt(m['f'])} | "
                f"{fmt(m['counter_roc_auc'])}")
    lines = ["| detector | LOO run accuracy | LOO normal failed | LOO counter F | LOO AUC | targets run accuracy "
             "| targets normal failed | targets counter F | targets AUC |", "|" + "---|" * 9]
    lines += [f"| {name} | {cell('loo', name)} | {cell('targets', name)} |" for name in DETECTORS
              if name in metrics.get("loo", {}) or name in metrics.get("targets", {})]
    return lines


def write_table(metrics: dict[str, Any], frame: pd.DataFrame, name: str) -> None:
    """``metrics/<name>.json`` and ``metrics/<name>_runs.csv``, atomically."""
    config.METRICS.mkdir(parents=True, exist_ok=True)
    atomic.write_json_atomic(config.METRICS / f"{name}.json", metrics)
    with atomic.atomic_path(config.METRICS / f"{name}_runs.csv") as tmp:
        frame.to_csv(tmp, index=False)
