"""stage_files: the records many modules read, typed — the rules' and the cluster models' result
files, the calibration shape the detectors share, the bins, the verdict file and the night index.

The control charts' files are :mod:`pipelines.detectors.charts.files` (next to the charts) and the
cause classifier's :mod:`pipelines.storage.cause_files`.

``detect`` writes a run's detection (``data/processed/detections/<run>.json``), ``control_charts``
its charts with the run against itself inside (``control_charts/runs/<run>.json``), ``clusters``
its cluster models (``clusters/<run>.json``) and ``predict_causes`` its cause prediction
(``causes/<run>.json``); ``report`` reads the four into one
:class:`~pipelines.protocol.DetectorResult` per detector
(:mod:`pipelines.detection.stage_results`) and composes the verdict.  The files stay JSON at
rest and are read as plain dicts, as the valid-run index is (:mod:`run_records`); these types say
what they hold, for readers and for type checkers.  Every detector's file carries its **record**
on the system's history: ``history_faults`` and ``history_normals`` (run -> its leave-one-out
p-value), or, for the cause classifier, the scores they come from; it comes from the system's
calibration (:class:`Calibration`), whose shape the rules, the charts and the cluster models share.
"""
from __future__ import annotations

from typing import Any, Literal, TypedDict

from pipelines.storage.run_records import DroppedCounter


class LabSummary(TypedDict, total=False):
    """How a run's baseline relates to its lab (``labs.summary``): ``status`` (``same_lab``,
    ``other_lab``, ``insufficient``), the lab's verified runs, why, and the counters whose level
    follows the lab (not judged across labs) with the largest shifts."""

    status: str
    lab_runs: list[str]
    reason: str | None
    unstable_counters: list[str]
    environment_dependent: list[str]
    largest_shifts: dict[str, float]


class Cause(TypedDict):
    """The contract's ``cause`` of a run (§2): the most probable cause, its probability, and whether
    it is ``known`` (certain enough to present as the cause, else the nearest one)."""

    label: str | None
    probability: float | None
    known: bool


class CounterChange(TypedDict):
    """What a person reads first of a flagged counter (contract §2 ``counter_changes``): the
    baseline runs' median and this run's in the counter's unit, the signed change in % of the
    baseline (None from 0), and ``worse``, ``better`` or ``changed``."""

    baseline: float
    target: float
    change_pct: float | None
    direction: str


class WeightedRun(TypedDict):
    """A baseline run of the rules and its weight in stacking (its environment's similarity)."""

    run_id: str
    weight: float


class RuleDetection(TypedDict, total=False):
    """``detect``'s file: the association-rule ensembles' verdict (stacking decides; bagging and the
    single model beside it in ``methods``), the flagged counters and their scores, the baseline,
    and the rules' ``details`` (effects, lab, violated rules)."""

    run_id: str
    system: str
    baseline_runs: list[WeightedRun]
    verdict: str
    score: float
    counter_scores: dict[str, float]
    flagged_counters: list[str]
    methods: dict[str, dict[str, Any]]
    details: dict[str, Any]
    cause: Cause
    schema_version: int
    input_key: str


class FittedCluster(TypedDict):
    """One cluster's model of a ``clusters`` result: its counters, the one it predicts from the
    others (``target_counter``, chosen by its KS p-value between baseline and run), the model's
    prediction error on the run and on the baseline it was fitted on, their difference
    (``excess_error``) over the threshold (``regression``), and the model's coefficients."""

    counters: list[str]
    target_counter: str
    ks_p_value: float
    error: float
    baseline_error: float
    excess_error: float
    regression: bool
    intercept: float
    coefficients: dict[str, float]


class ClusterResult(TypedDict, total=False):
    """``clusters``' file: the cluster models fitted on the baseline and their prediction errors on
    the run (Shang et al. 2015), the largest error above the models' own fit against the normal
    runs' (``p_value``), the counters of the worst-predicted clusters and the models' make-up."""

    run_id: str
    system: str
    baseline_runs: list[str]
    lab: LabSummary
    verdict: str | None
    reason: str
    max_prediction_error: float | None
    max_excess_error: float | None
    error_threshold: float
    clusters: list[FittedCluster]
    constant_counters: list[str]
    redundant_counters: dict[str, Any]
    calinski_harabasz: dict[str, float]
    p_value: float | None
    threshold_from: str
    cluster_threshold: float
    false_alarm_rate: float
    normal_runs: int
    flagged_counters: list[str]
    counter_scores: dict[str, float]
    null: str
    history_faults: dict[str, float] | None
    history_normals: dict[str, float] | None
    input_key: str


class Calibration(TypedDict, total=False):
    """A detector's calibration on one system's history, the shape the rules' stacking
    (``stacking_calibration/<system>.json``), the control charts and the cluster models share: the
    passed ``runs`` it was learned on, each normal run's score judged against the others
    (``normal_scores``: the null), the normal runs judged across labs (``cross_lab_scores``: status
    -> run -> score), and its record — the verified faults' p-values, each judged as a target is
    (``fault_pvalues``), and the normal runs' (``normal_pvalues``, each against the others)."""

    system: str
    runs: list[str]
    normal_scores: dict[str, float]
    cross_lab_scores: dict[str, dict[str, float]]
    fault_pvalues: dict[str, float]
    normal_pvalues: dict[str, float]
    input_key: str


class CounterBins(TypedDict, total=False):
    """One counter's bins (``bins.learn_edges``): ``k`` bins between its ``edges`` (``k + 1`` of the
    inner ones), the ``unique`` values they were learned from, ``scale`` ``log`` for log-spaced
    edges, and ``open`` when two open bins flank the inner ones."""

    edges: list[float]
    k: int
    unique: int
    scale: str
    open: bool


#: A system's bins: counter -> its :class:`CounterBins`.
Edges = dict[str, CounterBins]


class EdgesFile(TypedDict, total=False):
    """``discretize``'s file of one system (``data/processed/edges/<system>.json``): its bins
    (``counters``), the passed runs they were learned from, the reference load the runs were
    scaled to, the ``discretize`` params and the bins' digest."""

    system: str
    training_runs: list[str]
    log_base: float
    open_edge_bins: bool
    log_span: float | None
    reference_load: float | None
    digest: str
    counters: Edges
    input_key: str


# one objective judged on a run (contract §2 ``objectives.objectives[]``); "pass" is a keyword: the functional form
ObjectiveEntry = TypedDict("ObjectiveEntry", {
    "sli": str, "display_name": str, "counter": str, "aggregate": str, "value": float | None,
    "compared_value": float | None, "change_pct": float | None, "key_sli": bool, "weight": int, "result": str,
    "score": float, "pass": list[list[str]], "warning": list[list[str]], "violated": list[str],
    "not_judged": list[str], "targets": dict[str, float | None]})


class ObjectivesBlock(TypedDict):
    """The verdict file's ``objectives`` (contract §2): the evaluation's result and score, whether it
    only advises, the earlier runs its relative criteria compared with, how many objectives were
    judged, the key objectives that failed, and each objective."""

    result: str
    score_pct: float
    advisory: bool
    compared_with: list[str]
    judged: int
    key_failed: list[str]
    objectives: list[ObjectiveEntry]


class CommitSummary(TypedDict, total=False):
    """What the night index says of the commit series: the changes on its page, how many are
    regressions, the first of them (the contract's order: the largest regression), or that the page's
    list could not be read (``unreadable``)."""

    changes: int
    regressions: int
    top: dict[str, Any] | None
    unreadable: bool


class VerdictFile(TypedDict, total=False):
    """``report``'s verdict file of one run (contract §2, ``reports/runs/<run>.json``): the contract's
    keys in its order, then what regresslab adds (the baseline's status, the run's p-value, every
    detector's own verdict in ``methods``, the decision's ``details``), and, once the report has set
    them, the flagged counters' changes, the plain summary and the counters validation left out."""

    schema_version: int
    run_id: str
    system: str
    verdict: str
    score: float | None
    flagged_counters: list[str]
    counter_scores: dict[str, float]
    cause: Cause
    baseline_runs: list[WeightedRun]
    baseline_status: str
    p_value: float | None
    methods: dict[str, dict[str, Any]]
    details: dict[str, Any]
    counter_changes: dict[str, CounterChange]
    summary: str
    dropped_counters: list[DroppedCounter]
    objectives: ObjectivesBlock


class IndexRow(TypedDict, total=False):
    """One run's row of the night index (``reports/nights/<night>.json``, the index page, the alert):
    its verdict and score, the cause and its probability, its first three counters and first change,
    whether its lab is new or its baseline insufficient, the counters dropped, what ``change``d
    since the night before, its objectives' result and score (None: its system declares none), its
    release ``status`` (hold, look, ship) with its ``reason`` and whether its verdict is ``certain``,
    and its ``version`` and ``build`` (the archive's build, else its version)."""

    run_id: str
    system: str
    verdict: str
    score: float | None
    cause: str | None
    probability: float
    cause_known: bool
    top: list[str]
    new_lab: bool
    insufficient_baseline: bool
    dropped: int
    top_change: str | None
    change: str
    objectives: str | None
    objectives_score: float | None
    status: Literal["hold", "look", "ship"]
    reason: str
    certain: bool
    version: str
    build: str


class NightSummary(TypedDict):
    """What the night's index returns (the nightly DAG's ``night_index``, read by the alert): the
    night, how many runs it judged, the failed ones, the quarantined archives and the missing sources."""

    night: str
    runs: int
    failed: list[str]
    quarantined: list[str]
    missing_sources: list[str | None]
