"""A system's cause classifier trained, and its learners compared (Nguyen 2017 ch. 8, seed 004: the
classifier of a regression's cause, retrained as the verified faults grow): the feature design and
the learner chosen by leave-one-out, the model fitted on every verified run, its figures (accuracy,
recall per cause, the unknown-cause threshold) and the counters profile its predictions name
their evidence from.  The leave-one-out machinery is :mod:`pipelines.detectors.causes.classifiers`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd

if TYPE_CHECKING:         # scikit-learn is imported where a learner is made: a night whose models are current skips it
    from sklearn.pipeline import Pipeline

from pipelines.detectors.causes.prediction import counter_profile
from pipelines.detectors.causes.classifiers import (CauseParams, choose_design, compare_learners, confusion, design_frame,
                                        fault_only_model, fault_score, fit_rows, held_out_cause_probabilities,
                                        learners, learning_curve, nearest_accuracy, per_cause, random_accuracy,
                                        run_labels, unknown_cause_figures)
from pipelines.storage.cause_files import CauseModelMeta, LearnerScore, LooPrediction


class TrainedCauses(CauseModelMeta, total=False):
    """:func:`train_system`'s result: the model's description and the fitted models themselves
    (``model``; ``fault_model``, the model of the fault runs alone, when it names faults better)."""

    model: Pipeline
    fault_model: Pipeline | None

class LearnerComparison(TypedDict):
    """Model selection for one system (:func:`compare_learners_of`): every learner's figures, the
    learner in use and the one :func:`choose_learner` would keep, and the learning curves."""

    learners: dict[str, LearnerScore]
    in_use: str
    chosen: str
    random_accuracy: float
    runs: int
    feature_blocks: list[str]
    learning_curve: list[dict[str, Any]]

def choose_learner(accuracies: dict[str, float], order: list[str], runs: int, standard_errors: float) -> str:
    """The learner the system keeps: the first of ``order`` whose leave-one-out accuracy is within
    ``standard_errors`` standard errors of the best one (0: the best, ties to the first listed).
    The standard error is the binomial one of the best accuracy ``p`` over ``runs`` runs, with
    Agresti and Coull's centre for one standard error (``p' = (p·n + 1/2)/(n + 1)``,
    ``se = sqrt(p'(1 − p')/(n + 1))``), so that a perfect score still has a nonzero error."""
    if not accuracies:
        raise ValueError("no learner to choose from")
    top = max(accuracies.values())
    n = max(int(runs), 0)
    centre = (top * n + 0.5) / (n + 1)
    se = float(np.sqrt(centre * (1.0 - centre) / (n + 1)))
    floor = top - float(standard_errors) * se - 1e-9
    return next(k for k in order if k in accuracies and accuracies[k] >= floor)

def train_system(frame: pd.DataFrame, params: CauseParams, progress=None, progress_for=None) -> TrainedCauses:
    """What the night's classifier is, for one system: the feature design (:func:`choose_design`),
    the first of ``learners`` fitted on every row, its leave-one-run-out figures (the detector's
    null, the confusion matrix, per-cause recall), the unknown-cause tau and the fault model.
    Comparing the learners is retraining work, done after the night (:func:`compare_learners_of`,
    the ``evaluate`` stage); ``progress(i, n, name, accuracy)`` is called once, for the learner;
    ``progress_for(phase, items)`` returns the progress callback of each leave-out loop (the
    designs', the held-out causes', the fault model's)."""
    balance = params.balance_classes
    profile = counter_profile(frame)
    available = learners(params.seed)
    phase = progress_for or (lambda name, items: None)
    seen: dict[str, pd.DataFrame] = {}          # the design learner's LOO of each design, computed once
    blocks, design_scores = choose_design(frame, [list(d) for d in params.feature_designs],
                                          available[params.design_learner], balance, seen, progress_for)
    frame, columns = design_frame(frame, blocks)
    labels = run_labels(frame)
    r = random_accuracy(list(labels))
    best = params.learners[0]
    table, loo = compare_learners({best: available[best]}, frame, columns, labels, balance, progress=progress,
                                  known={params.design_learner: seen.get("+".join(blocks))})
    template = available[best]
    fault_causes = sorted(c for c in labels.unique() if c != "none")
    held = held_out_cause_probabilities(template, frame, columns, fault_causes, balance,
                                        phase("causes held out", len(fault_causes)))
    known_max = loo[best].max(axis=1)
    unknown = unknown_cause_figures(known_max, labels, held)
    model = fit_rows(template, frame, columns, balance)
    predictions: dict[str, LooPrediction] = {run: {"truth": labels[run], "predicted": loo[best].loc[run].idxmax(),
                         "probability": round(float(loo[best].loc[run].max()), 4),
                         "fault_score": round(fault_score(loo[best].loc[run]), 4)} for run in loo[best].index}
    faults = [r for r in predictions if labels[r] != "none"]
    nearest = nearest_accuracy(loo[best], labels)
    all_runs_accuracy = None if nearest is None else round(nearest, 4)
    fault_model, fault_from, alone = fault_only_model(template, frame, columns, labels, balance,
                                                      phase("fault model", int((labels != "none").sum())),
                                                      to_beat=all_runs_accuracy)
    if fault_model is not None and all_runs_accuracy is not None and alone is not None and alone > all_runs_accuracy:
        fault_from = "faults_only"
    else:
        fault_model, fault_from = None, "all_runs"
    classes = sorted(labels.unique())
    return {"learners": table, "best": best, "random_accuracy": round(r, 4),
            "unknown": unknown, "model": model, "columns": columns, "classes": classes,
            "feature_blocks": blocks, "design_scores": design_scores, "balance_classes": balance,
            "counter_profile": profile,
            "runs": int(len(labels)), "pairs": int(len(frame)),
            "fault_runs": len(faults),
            "fault_nearest_accuracy": alone if fault_from == "faults_only" else all_runs_accuracy,
            "fault_model_from": fault_from, "fault_model": fault_model,
            "fault_nearest_accuracy_all_runs": all_runs_accuracy, "fault_nearest_accuracy_faults_only": alone,
            "confusion": confusion(predictions, classes),
            "per_cause": per_cause(predictions, few=params.few_runs),
            "loo_predictions": predictions,
            "null_fault_scores": {r: v["fault_score"] for r, v in predictions.items() if v["truth"] == "none"}}

def compare_learners_of(frame: pd.DataFrame, blocks: list[str], params: CauseParams,
                        in_use: dict[str, LearnerScore] | None = None, progress=None) -> LearnerComparison:
    """Model selection for one system, on the design its model uses (``blocks``): every learner's
    leave-one-run-out accuracy and gain (``in_use``: the rows the night already measured, by
    learner, taken as they are), the learner :func:`choose_learner` would keep, and the learning
    curves of the ``learning_curve_learners`` best (Nguyen 2017 §8.3, §8.5).  ``chosen`` differs
    from ``in_use`` (the first of ``learners``) only when another learner is better by more than
    ``learner_standard_errors`` standard errors: listing it first adopts it."""
    balance, seed = params.balance_classes, params.seed
    available = learners(seed)
    frame, columns = design_frame(frame, list(blocks))
    labels = run_labels(frame)
    r = random_accuracy(list(labels))
    candidates = {k: available[k] for k in params.learners}      # in the order listed: the first is preferred
    done = {k: v for k, v in (in_use or {}).items() if k in candidates}
    table, _ = compare_learners({k: v for k, v in candidates.items() if k not in done}, frame, columns, labels,
                                balance, progress=progress)
    table = {k: done.get(k) or table[k] for k in candidates}
    order = list(candidates)
    ranked = sorted(table, key=lambda k: (-table[k]["accuracy"], -table[k]["gain"], order.index(k)))
    chosen = choose_learner({k: table[k]["accuracy"] for k in table}, order, len(labels),
                            params.learner_standard_errors)
    curve = []
    for name in ranked[:params.learning_curve_learners]:
        for row in learning_curve(candidates[name], frame, columns, max_runs=params.learning_curve_max_runs,
                                  repeats=params.learning_curve_repeats, seed=seed, balance=balance):
            curve.append({"learner": name, **row})
    return {"learners": table, "in_use": order[0], "chosen": chosen, "random_accuracy": round(r, 4),
            "runs": int(len(labels)), "feature_blocks": list(blocks), "learning_curve": curve}
