"""stage_files: the detectors' result and calibration files and the bins they share, typed — what each stage writes and the next reads.

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

from typing import Any, TypedDict

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


class WindowChange(TypedDict):
    """A counter beyond its limit in the run against itself: its strongest window (first and last
    interval), that window's median against the rest of the run's, the change in % of the counter's
    usual peak and its ratio to the limit."""

    change_pct: float
    ratio: float
    window: list[int]
    window_median: float
    rest_median: float


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
    p_run: float
    p_window: float
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
    max_prediction_error: float
    max_excess_error: float
    error_threshold: float
    clusters: list[dict[str, Any]]
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


class FaultGuess(TypedDict, total=False):
    """The fault a cause prediction names whatever it thinks of the run: the most probable cause
    other than ``none``, its probability (``given_a_fault`` when a model of the fault runs alone
    gave it), and how many training runs that cause had (``few_runs`` when too few)."""

    label: str | None
    probability: float | None
    given_a_fault: bool
    runs_of_cause: int | None
    few_runs: bool | None


class Alternative(TypedDict):
    """A runner-up cause of a prediction, with its probability."""

    label: str
    probability: float


class CausePrediction(TypedDict, total=False):
    """``predict_causes``' file: the most probable cause (``label``, ``probability``, ``known`` when
    above the model's ``tau``; none, with the ``reason``, without a model or a baseline), the
    probability of no fault and the run's fault score, and the history's leave-one-out fault scores
    the classifier is judged as a detector by (``null_fault_scores``: its normal runs';
    ``history_fault_scores``, ``history_normal_scores``); in the history's leave-one-out, the run's
    verified cause (``truth``)."""

    run_id: str
    label: str | None
    probability: float | None
    known: bool
    reason: str
    tau: float
    fault: FaultGuess
    none_probability: float
    fault_score: float
    alternatives: list[Alternative]
    pairs: int
    features_not_in_model: int
    baseline_runs: list[str]
    null_fault_scores: list[float]
    history_fault_scores: dict[str, float]
    history_normal_scores: dict[str, float]
    model_version: str
    learner: str
    truth: str
    evidence: dict[str, float]      # the counters that carried the prediction (cause_prediction.evidence_counters)


class LooPrediction(TypedDict):
    """The classifier's leave-one-run-out prediction of one verified run: its cause, the most
    probable class, that class's probability and the run's fault score."""

    truth: str
    predicted: str
    probability: float
    fault_score: float


class CauseRecall(TypedDict):
    """A cause's training runs, the share of them leave-one-out names right, and whether they are few."""

    runs: int
    recall: float
    few_runs: bool


class LearnerScore(TypedDict):
    """A learner's leave-one-run-out accuracy, its gain over the random predictor, and the runs."""

    accuracy: float
    gain: float
    runs: int


class HeldOutCause(TypedDict):
    """A cause held out of training (``causes.unknown_cause_figures``): the ``tau`` learned without
    it, its runs, the share of them called unknown and of the known runs wrongly so."""

    tau: float
    runs: int
    called_unknown: float
    known_called_unknown: float | None


class UnknownCauses(TypedDict):
    """How well the classifier tells a cause it never saw: ``tau`` from every cause, each held-out
    cause's figures and their means."""

    tau: float
    per_held_out_cause: dict[str, HeldOutCause]
    unknown_recall: float | None
    known_called_unknown: float | None


class CauseModelMeta(TypedDict, total=False):
    """A system's cause model as ``train_causes`` describes it (``cause_models/<system>/<version>.json``):
    its version and what it was trained on, the design and learner, their leave-one-run-out figures,
    the unknown-cause ``tau``, the fault model, the confusion matrix, per-cause recall, each verified
    run's leave-one-out prediction and the normal runs' fault scores (the classifier's null)."""

    system: str
    version: str
    training_data_sha256: str
    verified_history: str
    trained_at: str
    params: dict[str, Any]
    learners: dict[str, LearnerScore]
    best: str
    random_accuracy: float
    unknown: UnknownCauses
    columns: list[str]
    classes: list[str]
    feature_blocks: list[str]
    design_scores: dict[str, dict[str, float | None]]   # None figures: set aside before its leave-one-out ended
    counter_profile: dict[str, Any]     # each counter's violation ratios on the normal runs and each cause's (cause_prediction.counter_profile)
    balance_classes: bool
    runs: int
    pairs: int
    fault_runs: int
    fault_nearest_accuracy: float | None
    fault_model_from: str
    fault_model_file: str
    fault_nearest_accuracy_all_runs: float | None
    fault_nearest_accuracy_faults_only: float | None    # None: no second fault cause, or it could not pass all_runs
    confusion: dict[str, dict[str, int]]
    per_cause: dict[str, CauseRecall]
    loo_predictions: dict[str, LooPrediction]
    null_fault_scores: dict[str, float]


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


class IndexRow(TypedDict, total=False):
    """One run's row of the night index (``reports/nights/<night>.json``, the index page, the alert):
    its verdict and score, the cause and its probability, its first three counters and first change,
    whether its lab is new or its baseline insufficient, the counters dropped, and what ``change``d
    since the night before."""

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


class NightSummary(TypedDict):
    """What the night's index returns (the nightly DAG's ``night_index``, read by the alert): the
    night, how many runs it judged, the failed ones, the quarantined archives and the missing sources."""

    night: str
    runs: int
    failed: list[str]
    quarantined: list[str]
    missing_sources: list[str | None]
