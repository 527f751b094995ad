"""The shape every detector of a run takes: calibrated on a history, it judges a run against its
baseline and the history's own verified runs the same way, and says so in one record.

The verdict (:mod:`pipelines.calibration.headline`) reads nothing else: a :class:`DetectorResult`
per detector (``stacking``, ``control_charts``, ``clustered_regression``, ``within_run``,
``cause_classifier``), built from the stages' files at one edge
(:mod:`pipelines.calibration.stage_results`).  A new detector is a module that calibrates, judges
and returns this record; the verdict weighs it by its record on the system's history
(:mod:`pipelines.calibration.record`) like the others.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class DetectorResult:
    """What one detector said of one run.

    ``judged``: it judged the run (its entries are on the verdict file's ``methods`` and its
    p-value, even ``None``, among the detectors' ``p_values``); a detector that did not may still
    bring its record (``history_faults``, ``history_normals``: its leave-one-out p-values on the
    history's verified fault and normal runs) or a ``reason``.  ``verdict``: ``pass``/``fail`` at
    its own threshold, ``None`` when it could not say; ``votes``: that verdict counts under the
    rules ``all``/``any``.  ``run_score`` (in [0, 1]) joins the run's score when given;
    ``counter_scores`` and ``flagged_counters`` are the counters it points to; ``page`` its
    entries of the verdict file's ``methods`` (contract §2), by method name; ``extra`` what else
    the verdict reads of it (the charts' counters over their limit, the run against itself's
    counters beyond its limit)."""

    judged: bool
    verdict: str | None = None
    p_value: float | None = None
    votes: bool = False
    run_score: float | None = None
    counter_scores: dict[str, float] = field(default_factory=dict)
    flagged_counters: list[str] = field(default_factory=list)
    history_faults: dict[str, float | None] | None = None
    history_normals: dict[str, float] | None = None
    page: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None


class Detector(Protocol):
    """A detector of regressed runs.  ``calibrate`` learns from a system's history (its verified
    normal runs judged against the others: the null; its verified faults: the record);
    ``judge`` says what it sees in one run against its baseline, under that calibration."""

    name: str

    def calibrate(self, history: Any) -> Any: ...

    def judge(self, run: Any, baseline: Any, calibration: Any) -> DetectorResult: ...
