"""cause_files: the cause classifier's files, typed — a run's prediction (``predict_causes``:
``data/processed/causes/<run>.json``) and a system's model meta (``train_causes``:
``data/processed/cause_models/<system>/``), Nguyen 2017 ch. 8-9, seed 004.  In storage: the model
store reads the meta.
"""
from __future__ import annotations

from typing import Any, TypedDict



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


class CounterProfile(TypedDict, total=False):
    """What each cause does to each counter on a system (``prediction.counter_profile``): per
    violation-ratio feature some cause raises, the normal runs' mean and standard deviation, and
    each fault cause's mean where it lies above theirs (empty without normal runs)."""

    none_mean: dict[str, float]
    none_sd: dict[str, float]
    cause_mean: dict[str, dict[str, float]]


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
    counter_profile: CounterProfile
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
