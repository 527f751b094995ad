"""chart_files: the control charts' result and calibration files, typed — what ``control_charts`` writes
(``data/processed/control_charts/runs/<run>.json``, the run against itself inside, and
``control_charts/calibration/<system>.json``) and the detection, the report and the evaluation read
(:mod:`pipelines.detectors.charts.control_charts`, :mod:`pipelines.detectors.within_run.windows`, Nguyen 2017 ch. 3, 6-7, seed 004).
"""
from __future__ import annotations

from typing import TypedDict

from pipelines.storage.stage_files import LabSummary, Calibration


class WindowChange(TypedDict):
    """A counter beyond its limit in the run against itself: its strongest window (first and last
    interval), that window's median against the rest of the run's, the change in % of the counter's
    usual peak and its ratio to the limit."""

    change_pct: float
    ratio: float
    window: list[int]
    window_median: float
    rest_median: float


class WithinRunResult(TypedDict, total=False):
    """The run against itself (``within_run.judge``): its score (the largest change between a window
    and the rest of the run over that counter's limit), p-value against the normal runs' own, the
    counters beyond their limit and their changes, and which limits (``limits_by``) it used."""

    verdict: str | None
    score: float | None
    p_value: float | None
    normal_runs: int
    flagged_counters: list[str]
    counter_scores: dict[str, float]
    changes: dict[str, WindowChange]
    limits_by: str
    false_alarm_rate: float
    counters_beyond_limit: list[str]
    limits_p_values: dict[str, float]
    reason: str | None
    history_faults: dict[str, float] | None
    history_normals: dict[str, float] | None


class MinorMode(TypedDict):
    """A bimodal counter's minor mode in a baseline (``charts.find_modes``): the ``cut`` between the
    modes, the minor mode's ``side`` of it (``low`` or ``high``) and its ``share`` of the points."""

    cut: float
    side: str
    share: float


class ChartSeries(TypedDict):
    """One plotted counter of a run's charts: the baseline's centre line and limits and the run's
    points, one per interval (None where missing)."""

    cl: list[float | None]
    lcl: list[float | None]
    ucl: list[float | None]
    target: list[float | None]


class ChartResult(TypedDict, total=False):
    """``control_charts``' file: the run's violation ratios against its baseline's limits, the run
    score (``violation_ratio``: the top counters' average ratio; ``window_ratio`` its strongest
    window's), its p-value against the ``null`` the lab status chose, the flagged counters, the
    ratios and plotted series of the top counters, and the run against itself (``within_run``)."""

    run_id: str
    system: str
    verdict: str | None
    reason: str
    violation_ratio: float
    window_ratio: float
    p_value: float | None
    p_run: float | None
    p_window: float | None
    false_alarm_rate: float
    threshold: float
    flagged_counters: list[str]
    counters_over_limit: list[str]
    load_independent_counters: list[str]
    load_independent_skipped: str | None
    counter_scores: dict[str, float]
    null: str
    history_faults: dict[str, float] | None
    history_normals: dict[str, float] | None
    baseline_runs: list[str]
    lab: LabSummary
    ratios: dict[str, dict[str, float | None]]
    multimodal: dict[str, MinorMode]
    charts: dict[str, ChartSeries]
    within_run: WithinRunResult
    input_key: str


class LimitsRecord(TypedDict):
    """How one choice of the run against itself's limits did on the history (``choose_limits``)."""

    normal_failed: int
    normal_runs: int
    faults_caught: int
    faults: int
    forward_failed: int
    forward_judged: int


class WithinRunCalibration(TypedDict, total=False):
    """The run against itself's calibration (``within_run.calibrate``, kept in the charts'): each
    counter's usual ``peaks``, the normal runs' largest changes per counter and per metric
    (``limits``, ``metric_limits``: counter -> the two largest, with their runs), the change that
    matters (``min_effect``), and under each choice of limits the normal runs' scores and p-values
    (``scores``, ``normal_pvalues_by``) and their judgement forward in time (``forward``); the
    limits chosen (``limits_by``) with their null, record and ``limits_record``."""

    peaks: dict[str, float]
    limits: dict[str, list]
    metric_limits: dict[str, list]
    min_effect: float
    floor_share: float
    scores: dict[str, dict[str, float]]
    normal_pvalues_by: dict[str, dict[str, float]]
    forward: dict[str, dict[str, bool]]
    limits_by: str
    normal_scores: dict[str, float]
    normal_pvalues: dict[str, float]
    fault_pvalues: dict[str, float]
    limits_record: dict[str, LimitsRecord]


class CrossLabNull(TypedDict):
    """The normal runs charted the way a target whose baseline is of another lab is: each one's run
    score and strongest-window score (``charts.cross_lab_calibration``)."""

    normal_scores: dict[str, float]
    window_scores: dict[str, float]


class ChartCalibration(Calibration, total=False):
    """The control charts' calibration (``control_charts/calibration/<system>.json``): besides the
    shared shape, the run score's threshold and where it came from, the normal runs' strongest-window
    scores, the load-independent counters, each counter's largest ratio in the normal runs, the
    same-version pairs that set the threshold, the cross-lab null (``cross_lab``) and the run
    against itself's calibration."""

    threshold: float
    threshold_from: str
    window_scores: dict[str, float]
    load_independent: list[str]
    load_independent_skipped: str | None
    counter_normal_max: dict[str, float]
    counter_window_max: dict[str, float]
    same_version_pairs: int
    cross_lab: dict[str, CrossLabNull]
    within_run: WithinRunCalibration
