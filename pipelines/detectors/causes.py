"""train_causes: regression-cause classifiers on violation-ratio features, judged by leave-one-out.

Nguyen 2017 ch. 8 (seed 004):

* several learners, each a scikit-learn ``Pipeline`` (imputation with missing-value
  indicators, scaling, classifier): random forest, logistic regression, SVM, naive Bayes,
  decision tree, k-NN and MLP, on the columns of ``cause_features.design``: the design (per-counter
  ratios, the ratios folded by counter kind across components, the excursions folded so) is
  chosen per system among ``feature_designs`` by the leave-one-run-out of ``design_learner``
  (:func:`choose_design`);
* **balanced classes** (``balance_classes``): a history has many more normal runs
  than runs of one fault, and a fault seen twice would be drowned by one seen thirty times.
  Every run weighs ``N / (K · n_c)`` (``N`` runs, ``K`` causes, ``n_c`` runs of its cause),
  shared by its pairs, so each cause weighs the same in total whatever its runs and pairs;
  weights are rescaled to a mean of 1 per row.  k-NN takes no weights and is fitted unweighted;
* **leave-one-out** by run (§8.4): the held-out run's rows are the test set, and no row
  that uses it (as target or as baseline) is trained on.  A run's prediction is the class
  probabilities averaged over its pairs;
* **accuracy** and **gain** = accuracy / r, with ``r = Σ (n_type/N)²`` the accuracy of
  the random predictor (eq. 4.2-4.3);
* the **learning curve** (§8.5): a random test run, ``n`` = 1..6 random training runs per
  cause, repeated; for the best learners;
* the **night's learner** is the first of ``learners`` (random forest), refitted on every row and
  saved with skops (no pickle), with its metrics and the hash of its training data.  Nguyen finds
  no universal best learner, but random forest the best on average over his systems (§8.3, Table
  8.3: "if the best learner for a software system is not known yet, learners from these two
  classes can be used"), and the largest of seven LOO accuracies measured on a few dozen runs
  is biased upwards.  Comparing the learners is model selection, retraining work that no night
  waits on (:func:`compare_learners_of`, run by ``evaluate`` after the night's report): it says
  when another learner is better by more than ``learner_standard_errors`` standard errors of the
  best accuracy (the one-standard-error rule of Breiman et al.'s CART, :func:`choose_learner`),
  and listing that learner first adopts it.  Models are versioned by that hash and the learner:
  a night without new verified runs retrains nothing; every version stays on disk.

Unknown causes (§9.2.2, limitation 3): a run whose largest class probability is below
``tau`` matches no cause of the history well enough (``known: false``).  ``tau`` is the
threshold that best separates (balanced accuracy) the LOO probabilities of runs of known
causes from those of runs whose cause was held out of training entirely (each cause in
turn).  It is measured honestly: for each held-out cause, ``tau`` is calibrated without
that cause's runs and then applied to them.

The classifier as a detector: a run's **fault score** is ``1 − P(none)``, the
probability that it is a fault of any kind.  The leave-one-out fault scores of the history's
normal runs (``null_fault_scores``) are the null against which ``headline`` calibrates a
target's score, like the other detectors' (each normal run judged by a model that never saw it).

The **nearest fault** of a failed run answers another question: given that the
run is a fault, which one?  Dropping ``none`` from the full model's probabilities is one
answer; a model of the fault runs alone, ``P(cause | fault, x)`` estimated directly, is
another, and on Nezha the normal runs (36 of 69, all of one day) shape the full model so much
that its fault classes follow the day rather than the fault.  Both are scored in leave-one-run-
out on the history's fault runs with the chosen learner, and the one with the better
nearest-fault accuracy names the fault (``fault_model_from``: ``all_runs`` on a tie, the
simpler one).  Measured on the labelled targets, not used to choose: docs/results/causes.md.
"""
from __future__ import annotations

import inspect
import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np
import pandas as pd

if TYPE_CHECKING:         # scikit-learn is imported where a learner is made: a night whose models are current skips it
    from sklearn.pipeline import Pipeline

from pipelines import config, parallel
from pipelines.detectors import cause_features
from pipelines.storage.stage_files import (CauseModelMeta, CausePrediction, CauseRecall, FaultGuess, HeldOutCause,
                                           LearnerScore, LooPrediction, UnknownCauses)

log = logging.getLogger("regresslab.train_causes")
CODE_VERSION = 8      # a model trained by other code is another version (8: the counters profile of its causes)


@dataclass(frozen=True)
class CauseParams:
    """The ``train_causes`` block, typed: the ``learners`` in order of preference (the night trains
    the first), the ``seed``, the feature ``feature_designs`` each system chooses among with
    ``design_learner``, ``balance_classes``, the ``few_runs`` a cause is shown as learned from few
    runs below, and model selection's ``learner_standard_errors`` and learning curves
    (``learning_curve_max_runs`` runs per cause, ``learning_curve_repeats``, for the
    ``learning_curve_learners`` best).  ``block`` is the block as validated (a model's version
    hashes it, and its description keeps it)."""

    learners: tuple[str, ...]
    seed: int
    feature_designs: tuple[tuple[str, ...], ...]
    design_learner: str
    balance_classes: bool
    few_runs: int
    learner_standard_errors: float
    learning_curve_max_runs: int
    learning_curve_repeats: int
    learning_curve_learners: int
    block: Mapping[str, Any] = field(compare=False, repr=False)

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "CauseParams":
        return cls(learners=tuple(block["learners"]), seed=int(block["seed"]),
                   feature_designs=tuple(tuple(d) for d in block["feature_designs"]),
                   design_learner=str(block["design_learner"]), balance_classes=bool(block["balance_classes"]),
                   few_runs=int(block["few_runs"]), learner_standard_errors=float(block["learner_standard_errors"]),
                   learning_curve_max_runs=int(block["learning_curve_max_runs"]),
                   learning_curve_repeats=int(block["learning_curve_repeats"]),
                   learning_curve_learners=int(block["learning_curve_learners"]), block=dict(block))

    @classmethod
    def load(cls) -> "CauseParams":
        """The project's ``train_causes`` block."""
        return cls.of(config.load_params("train_causes"))


class CurvePoint(TypedDict):
    """A learning curve's point: the accuracy with ``runs_per_cause`` training runs of each cause
    over its ``trials`` (None when none could be trained)."""

    runs_per_cause: int
    accuracy: float | None
    trials: int


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


# --------------------------------------------------------------------------- pure core


def learners(seed: int = 0) -> dict[str, Pipeline]:
    """The candidate learners, each imputing (with indicators) and scaling first."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    warnings.filterwarnings("ignore", message="The `probability` parameter was deprecated", category=FutureWarning)
    def pipe(clf) -> Pipeline:
        return Pipeline([("impute", SimpleImputer(strategy="constant", fill_value=0.0, add_indicator=True,
                                                  keep_empty_features=True)),
                         ("scale", StandardScaler()), ("clf", clf)])
    return {
        "random_forest": pipe(RandomForestClassifier(n_estimators=200, random_state=seed)),
        "logistic_regression": pipe(LogisticRegression(max_iter=2000)),
        # SVC's probability=True (Platt scaling) is deprecated from scikit-learn 1.9 in favour of
        # CalibratedClassifierCV, whose inner folds need more runs per cause than a young history has
        "svm": pipe(SVC(kernel="rbf", probability=True, random_state=seed)),
        "naive_bayes": pipe(GaussianNB()),
        "decision_tree": pipe(DecisionTreeClassifier(random_state=seed)),
        "knn": pipe(KNeighborsClassifier(n_neighbors=3)),
        "mlp": pipe(MLPClassifier(hidden_layer_sizes=(64,), max_iter=2000, random_state=seed)),
    }


def random_accuracy(labels: list[str]) -> float:
    """``r = Σ (n_type / N)²``: the accuracy of a predictor that guesses by the class shares (eq. 4.3)."""
    if not labels:
        return 0.0
    shares = pd.Series(labels).value_counts(normalize=True)
    return float((shares ** 2).sum())


def gain(accuracy: float, r: float) -> float:
    """Accuracy over the random predictor's (Nguyen 2017 eq. 4.2)."""
    return accuracy / r if r > 0 else float("nan")


def run_probabilities(model: Pipeline, rows: pd.DataFrame, columns: list[str], classes: list[str]) -> pd.Series:
    """The class probabilities of one run: the mean over its pairs, over ``classes`` (0 for unseen)."""
    proba = model.predict_proba(rows[columns].to_numpy(dtype=float)).mean(axis=0)
    return pd.Series(proba, index=list(model.classes_)).reindex(classes, fill_value=0.0)


def balanced_weights(frame: pd.DataFrame) -> np.ndarray:
    """One weight per row: its run weighs ``N / (K · n_c)`` (``N`` runs, ``K`` causes, ``n_c`` runs
    of the run's cause), split evenly over the run's rows; rescaled to a mean of 1 per row."""
    labels = run_labels(frame)
    per_run = len(labels) / (labels.nunique() * labels.map(labels.value_counts()))
    pairs = frame.groupby("target")["target"].transform("size")
    w = frame["target"].map(per_run).to_numpy(dtype=float) / pairs.to_numpy(dtype=float)
    return w * len(w) / w.sum()


def fit_rows(template: Pipeline, frame: pd.DataFrame, columns: list[str], balance: bool = False) -> Pipeline:
    """A fresh copy of ``template`` fitted on ``frame`` (k-NN's k capped at the number of rows);
    with ``balance``, weighted by :func:`balanced_weights` when the classifier takes weights."""
    from sklearn.base import clone

    model = clone(template)
    k = model.get_params().get("clf__n_neighbors")
    if k is not None and k > len(frame):
        model.set_params(clf__n_neighbors=max(1, len(frame)))
    fit_kw = {}
    if balance and "sample_weight" in inspect.signature(model.named_steps["clf"].fit).parameters:
        fit_kw["clf__sample_weight"] = balanced_weights(frame)
    model.fit(frame[columns].to_numpy(dtype=float), frame["cause"].to_numpy(), **fit_kw)
    return model


def train_mask(frame: pd.DataFrame, held_out: set[str]) -> np.ndarray:
    """Rows that use none of ``held_out`` as target or baseline."""
    return ~(frame["target"].isin(held_out) | frame["baseline"].isin(held_out)).to_numpy()


def loo_probabilities(template: Pipeline, frame: pd.DataFrame, columns: list[str], balance: bool = False,
                      progress=None, bound: "LooBound | None" = None) -> pd.DataFrame | None:
    """Leave-one-run-out class probabilities, one row per run (Nguyen 2017 §8.4); ``progress``: a
    :func:`parallel.map_ordered` callback, called as each run's fit ends.  With ``bound``, the
    loop stops once the bound says the figures can no longer reach what it needs, and returns None
    (the figures of a loop stopped early would depend on the order the runs ended in)."""
    classes = sorted(frame["cause"].unique())

    def held_out(run_id: str) -> pd.Series | None:
        train = frame[train_mask(frame, {run_id})]
        if train["cause"].nunique() < 2:
            return None
        model = fit_rows(template, train, columns, balance)
        return run_probabilities(model, frame[frame["target"] == run_id], columns, classes)
    runs = sorted(frame["target"].unique())
    if bound is not None and bound.hopeless(0, 0, len(runs)):
        return None
    results = parallel.map_ordered(held_out, runs, progress=progress,
                                   stop=None if bound is None else bound.stop_for(frame))
    if any(p is parallel.NOT_RUN for p in results):
        return None
    out = {r: p for r, p in zip(runs, results) if p is not None}
    return pd.DataFrame(out).T


class LooBound:
    """When a leave-one-out loop may stop: its figures can no longer beat ``to_beat``.

    The loop's figure is the share of its scored runs whose ``hit(run, probabilities)`` is true,
    rounded to 4 decimals as the figures are compared (a run whose fit had fewer than two causes is
    not scored).  With ``k`` runs scored so far, ``m`` of them missed, and ``r`` runs left, the
    final share is at most ``(k − m + r) / (k + r)``: every run left scored and hit (more of them
    scored only raises it, since the share is below one once a run missed).  The loop is hopeless
    once that cannot exceed ``to_beat``, or can at best equal it when ``ties_lose``.  It only ever
    stops a loop whose result would be set aside: the choice made with it is the choice made
    without it (``tests/unit/test_causes.py``)."""

    def __init__(self, to_beat: float, hit, *, ties_lose: bool):
        self.to_beat, self.hit, self.ties_lose = float(to_beat), hit, ties_lose

    def hopeless(self, scored: int, missed: int, left: int) -> bool:
        if scored + left == 0:
            return False
        best = round((scored - missed + left) / (scored + left), 4)
        return best < self.to_beat or (self.ties_lose and best <= self.to_beat)

    def stop_for(self, frame: pd.DataFrame):
        """A :func:`parallel.map_ordered` ``stop`` over ``frame``'s runs."""
        tally = {"scored": 0, "missed": 0}

        def stop(run_id: str, proba: pd.Series | None, left: int) -> bool:
            if proba is not None:
                tally["scored"] += 1
                tally["missed"] += 0 if self.hit(run_id, proba) else 1
            return self.hopeless(tally["scored"], tally["missed"], left)
        return stop


def nearest_fault(proba: pd.Series) -> str | None:
    """The most probable cause other than ``none`` in a run's class probabilities (None without one)."""
    faults = proba.drop("none", errors="ignore")
    return str(faults.idxmax()) if len(faults) else None


def fault_score(proba: pd.Series) -> float:
    """``1 − P(none)``: how probable it is that a run is a fault of any kind (1 without a ``none`` class)."""
    return float(1.0 - proba.get("none", 0.0))


def run_labels(frame: pd.DataFrame) -> pd.Series:
    return frame.groupby("target")["cause"].first()


def learning_curve(template: Pipeline, frame: pd.DataFrame, columns: list[str], *, max_runs: int,
                   repeats: int, seed: int, balance: bool = False) -> list[CurvePoint]:
    """Accuracy with ``n`` = 1..``max_runs`` training runs per cause (Nguyen 2017 §8.5).

    Points past the largest cause's run count are not drawn: from there on every cause gives all
    its runs (but the one held out), so each such point trains on the same runs as that one, and a
    young history would pay for the same trial again and again.  The points drawn are the same
    draws either way (the plan is drawn in order of ``n``)."""
    rng = np.random.default_rng(seed)
    labels = run_labels(frame)
    classes = sorted(labels.unique())
    max_runs = min(max_runs, int(labels.value_counts().max()) if len(labels) else 0)
    plan = []                       # every trial drawn first, in order, so that any number of processes agree
    for n in range(1, max_runs + 1):
        for _ in range(repeats):
            test = str(rng.choice(labels.index.to_numpy()))
            chosen = set()
            for cause in classes:
                pool = [r for r in labels.index[labels == cause] if r != test]
                if pool:
                    chosen |= set(rng.choice(pool, size=min(n, len(pool)), replace=False).tolist())
            plan.append((n, test, chosen))

    def trial(drawn: tuple[int, str, set[str]]) -> bool | None:
        _, test, chosen = drawn
        train = frame[frame["target"].isin(chosen) & train_mask(frame, {test})]
        if train["cause"].nunique() < 2:
            return None
        model = fit_rows(template, train, columns, balance)
        proba = run_probabilities(model, frame[frame["target"] == test], columns, classes)
        return bool(proba.idxmax() == labels[test])
    outcomes = parallel.map_ordered(trial, plan)
    rows: list[CurvePoint] = []
    for n in range(1, max_runs + 1):
        hits = [hit for (k, _, _), hit in zip(plan, outcomes) if k == n and hit is not None]
        rows.append({"runs_per_cause": n, "accuracy": round(float(np.mean(hits)), 4) if hits else None,
                     "trials": len(hits)})
    return rows


def held_out_cause_probabilities(template: Pipeline, frame: pd.DataFrame, columns: list[str],
                                 causes: list[str], balance: bool = False, progress=None) -> dict[str, pd.Series]:
    """Per cause, the largest class probability of its runs when no run of it was trained on."""
    labels = run_labels(frame)

    def without(cause: str) -> pd.Series | None:
        runs = set(labels.index[labels == cause])
        train = frame[train_mask(frame, runs)]
        if train["cause"].nunique() < 2:
            return None
        model = fit_rows(template, train, columns, balance)
        classes = sorted(train["cause"].unique())
        return pd.Series({r: float(run_probabilities(model, frame[frame["target"] == r], columns,
                                                      classes).max()) for r in sorted(runs)})
    return {c: p for c, p in zip(causes, parallel.map_ordered(without, causes, progress=progress)) if p is not None}


def best_threshold(known: np.ndarray, unknown: np.ndarray) -> float:
    """The ``tau`` that maximises balanced accuracy of "unknown = max probability < tau"."""
    known, unknown = np.asarray(known, dtype=float), np.asarray(unknown, dtype=float)
    if known.size == 0 or unknown.size == 0:
        return 0.0
    candidates = np.unique(np.concatenate([known, unknown, [1.0 + 1e-9]]))
    best, best_score = 0.0, -1.0
    for tau in candidates:
        score = (np.mean(unknown < tau) + np.mean(known >= tau)) / 2.0
        if score > best_score + 1e-12:
            best, best_score = float(tau), score
    return best


def unknown_cause_figures(known_max: pd.Series, labels: pd.Series, held_out: dict[str, pd.Series]
                          ) -> UnknownCauses:
    """Hold each cause out in turn: calibrate ``tau`` without it, then apply it to its runs.

    Returns per cause the share of its runs called unknown and the share of the other
    (known) runs wrongly called unknown, their means, and ``tau`` from every cause.
    """
    per_cause: dict[str, HeldOutCause] = {}
    for cause, scores in held_out.items():
        other_unknown = np.concatenate([s.to_numpy() for c, s in held_out.items() if c != cause] or [np.zeros(0)])
        known = known_max[labels.reindex(known_max.index) != cause].to_numpy()
        tau = best_threshold(known, other_unknown)
        per_cause[cause] = {"tau": round(tau, 4), "runs": int(len(scores)),
                            "called_unknown": round(float(np.mean(scores.to_numpy() < tau)), 4),
                            "known_called_unknown": round(float(np.mean(known < tau)), 4) if known.size else None}
    all_unknown = np.concatenate([s.to_numpy() for s in held_out.values()] or [np.zeros(0)])
    tau = best_threshold(known_max.to_numpy(), all_unknown)
    vals = list(per_cause.values())
    return {"tau": round(tau, 4), "per_held_out_cause": per_cause,
            "unknown_recall": round(float(np.mean([v["called_unknown"] for v in vals])), 4) if vals else None,
            "known_called_unknown": round(float(np.mean([v["known_called_unknown"] for v in vals
                                                         if v["known_called_unknown"] is not None])), 4)
            if vals else None}


def design_frame(frame: pd.DataFrame, blocks: list[str]) -> tuple[pd.DataFrame, list[str]]:
    """The feature rows' keys beside their :func:`cause_features.design` columns, and those columns."""
    x = cause_features.design(frame, blocks)
    return pd.concat([frame[cause_features.KEY_COLUMNS].reset_index(drop=True), x.reset_index(drop=True)], axis=1), \
        list(x.columns)


def confusion(predictions: dict[str, LooPrediction], classes: list[str]) -> dict[str, dict[str, int]]:
    """``truth -> predicted -> runs`` over the leave-one-out predictions (every class on both sides)."""
    table = {t: {p: 0 for p in classes} for t in classes}
    for row in predictions.values():
        table[row["truth"]][row["predicted"]] += 1
    return table


def per_cause(predictions: dict[str, LooPrediction], *, few: int) -> dict[str, CauseRecall]:
    """Per cause: its runs, the share of them leave-one-out labels right, and whether it has
    ``few`` runs or fewer (a cause learned from so few runs is shown as such)."""
    out: dict[str, dict[str, int]] = {}
    for row in predictions.values():
        c = out.setdefault(row["truth"], {"runs": 0, "right": 0})
        c["runs"] += 1
        c["right"] += int(row["predicted"] == row["truth"])
    return {k: {"runs": v["runs"], "recall": round(v["right"] / v["runs"], 4), "few_runs": v["runs"] <= few}
            for k, v in sorted(out.items())}


def fault_only_model(template: Pipeline, frame: pd.DataFrame, columns: list[str], labels: pd.Series,
                     balance: bool, progress=None, to_beat: float | None = None
                     ) -> tuple[Pipeline | None, str, float | None]:
    """A model of the fault runs alone (``P(cause | fault, x)``) and its leave-one-run-out
    nearest-fault accuracy on them; (None, "all_runs", None) with fewer than two fault causes.
    ``to_beat``: the accuracy it must exceed to be used (the full model's nearest fault); its
    leave-one-out stops once it cannot, and then no model is fitted ((None, "all_runs", None))."""
    faults = frame[frame["cause"] != "none"]
    if faults["cause"].nunique() < 2:
        return None, "all_runs", None
    bound = None if to_beat is None else LooBound(to_beat, lambda r, p: p.idxmax() == labels[r], ties_lose=True)
    proba = loo_probabilities(template, faults, columns, balance, progress, bound)
    if proba is None:
        return None, "all_runs", None
    hits = [proba.loc[r].idxmax() == labels[r] for r in proba.index]
    accuracy = round(float(np.mean(hits)), 4) if hits else None
    return fit_rows(template, faults, columns, balance), "faults_only", accuracy


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


def loo_accuracy(proba: pd.DataFrame, labels: pd.Series) -> float:
    """The share of runs whose most probable class (one row of class probabilities per run) is their label."""
    predicted = proba.idxmax(axis=1)
    return float((predicted == labels.reindex(predicted.index)).mean()) if len(predicted) else 0.0


def nearest_accuracy(proba: pd.DataFrame, labels: pd.Series) -> float | None:
    """The share of the fault runs whose nearest fault (:func:`nearest_fault`) is their cause (None without one)."""
    faults = [r for r in proba.index if labels[r] != "none"]
    return float(np.mean([nearest_fault(proba.loc[r]) == labels[r] for r in faults])) if faults else None


def loo_figures(proba: pd.DataFrame, labels: pd.Series) -> dict[str, float | None]:
    """Leave-one-out accuracy of class probabilities (one row per run) and the nearest-fault
    accuracy on the fault runs (None without one)."""
    nearest = nearest_accuracy(proba, labels)
    return {"accuracy": round(loo_accuracy(proba, labels), 4),
            "fault_nearest_accuracy": None if nearest is None else round(nearest, 4)}


def choose_design(frame: pd.DataFrame, designs: list[list[str]], template: Pipeline, balance: bool,
                  probabilities: dict[str, pd.DataFrame] | None = None, progress_for=None
                  ) -> tuple[list[str], dict[str, dict[str, float | None]]]:
    """Which of ``designs`` (``cause_features.design`` blocks) the classifiers see: the one whose
    leave-one-run-out accuracy with ``template`` is the highest, then its faults' nearest-cause
    accuracy, then the first listed.  What carries the cause differs between systems:
    on Nezha's shop the excursions folded by kind (``shifts``) name 0.55 of the history's faults in
    leave-one-run-out against 0.45 for the violation ratios (``kinds``), on HPC's node 0.82 against
    0.90 (docs/results/causes.md); each system's own history chooses.  One design is taken as it is.
    ``probabilities``, when given, receives each design's leave-one-out probabilities (by the
    design's name, blocks joined by ``+``), so that the caller need not compute them again.
    ``progress_for(phase, runs)``, when given, returns the progress callback of each design's
    leave-one-out."""
    if len(designs) == 1:
        return list(designs[0]), {}
    labels = run_labels(frame)
    scores: dict[str, dict[str, float | None]] = {}
    order = ["+".join(b) for b in designs]

    def rank(k: str) -> tuple[float, float, int]:
        return -scores[k]["accuracy"], -(scores[k]["fault_nearest_accuracy"] or 0.0), order.index(k)
    leader: str | None = None
    for blocks in designs:
        name = "+".join(blocks)
        bound = None
        if leader is not None:      # a design that cannot pass the leader's accuracy need not be measured to the end
            nearest = scores[leader]["fault_nearest_accuracy"]
            bound = LooBound(scores[leader]["accuracy"], lambda r, p: p.idxmax() == labels[r],
                             ties_lose=nearest is None or nearest >= 1.0)   # a tie goes to the nearest fault, then the first
        designed, columns = design_frame(frame, list(blocks))
        proba = loo_probabilities(template, designed, columns, balance,
                                  progress_for(f"design {name}", labels.size) if progress_for else None, bound)
        if proba is None:
            scores[name] = {"accuracy": None, "fault_nearest_accuracy": None}
            log.info("design %s: set aside before the end of its leave-one-out, it cannot pass %s", name, leader)
            continue
        scores[name] = loo_figures(proba, labels)
        if probabilities is not None:
            probabilities[name] = proba
        if leader is None or rank(name) < rank(leader):
            leader = name
    assert leader is not None
    return leader.split("+"), scores


def compare_learners(candidates: dict[str, Pipeline], frame: pd.DataFrame, columns: list[str], labels: pd.Series,
                     balance: bool, *, progress=None, known: dict[str, pd.DataFrame | None] | None = None,
                     ) -> tuple[dict[str, LearnerScore], dict[str, pd.DataFrame]]:
    """Each learner's leave-one-run-out accuracy and gain over the random predictor, and its
    probabilities (``known``: those already computed, by learner)."""
    r = random_accuracy(list(labels))
    table: dict[str, LearnerScore] = {}
    loo: dict[str, pd.DataFrame] = {}
    for i, (name, template) in enumerate(candidates.items(), 1):
        done = (known or {}).get(name)
        proba = done if done is not None else loo_probabilities(template, frame, columns, balance)
        loo[name] = proba
        acc = loo_accuracy(proba, labels)
        table[name] = {"accuracy": round(acc, 4), "gain": round(gain(acc, r), 4), "runs": int(len(proba))}
        if progress:
            progress(i, len(candidates), name, acc)
    return table, loo


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
    if fault_model is not None and all_runs_accuracy is not None and alone > all_runs_accuracy:
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


# --------------------------------------------------------------------------- I/O shell


ALTERNATIVES = 2          # the runner-up causes a prediction names


EVIDENCE_SD = 3.0        # a counter carries a cause's evidence beyond this many of the normal runs' deviations
EVIDENCE_FLOOR = 0.05     # the smallest deviation of a violation ratio counted (a twentieth of the intervals)
EVIDENCE_TOP = 15         # counters kept per prediction


def counter_profile(frame: pd.DataFrame) -> dict[str, Any]:
    """What each cause does to each counter on this system, from the training rows: per counter-level
    feature (``above:``/``below:`` violation ratios), the verified normal runs' mean and standard
    deviation (each run the mean of its pair rows) and each fault cause's mean, for the features some
    cause raises above the normal runs' mean.  Whatever design the model uses (kinds or shifts fold
    the counters), the evidence a prediction shows is read on the counters (:func:`evidence_counters`)."""
    ratios = tuple(side + ":" for side in cause_features.RATIO_SIDES)
    cols = [c for c in cause_features.feature_columns(frame) if c.startswith(ratios)]
    per_run = frame.groupby("target")[cols].mean()
    cause_of = frame.groupby("target")["cause"].first()
    normal = per_run[cause_of.reindex(per_run.index) == "none"]
    if normal.empty or not cols:
        return {}
    none_mean, none_sd = normal.mean(), normal.std(ddof=1).fillna(0.0) if len(normal) > 1 else normal.mean() * 0.0
    means = {c: per_run[cause_of.reindex(per_run.index) == c].mean() for c in sorted(set(cause_of) - {"none"})}
    raised = sorted({col for m in means.values() for col in cols if m[col] > none_mean[col]})
    return {"none_mean": {c: round(float(none_mean[c]), 4) for c in raised},
            "none_sd": {c: round(float(none_sd[c]), 4) for c in raised},
            "cause_mean": {cause: {c: round(float(m[c]), 4) for c in raised if m[c] > none_mean[c]}
                           for cause, m in means.items()}}


def evidence_counters(rows: pd.DataFrame, profile: Mapping[str, Any] | None, cause: str | None) -> dict[str, float]:
    """The counters that carry the prediction of ``cause`` on this run (the cause classifier's
    evidence, Nguyen 2017 ch. 8, seed 004): each counter whose violation ratio on the run's pair rows
    lies ``EVIDENCE_SD`` or more of the normal runs' deviations (at least ``EVIDENCE_FLOOR``) above
    their mean, on a side the cause's verified runs raised; its strength is that distance (the
    larger side).  First the counters the run moved furthest *and* the cause raises most (the
    distance times the cause's own raise of the ratio: a run past every normal run on many counters
    shows first those its cause is known by), at most ``EVIDENCE_TOP``.  Pure: rows and profile in."""
    means = ((profile or {}).get("cause_mean") or {}).get(cause or "") or {}
    if not means:
        return {}
    target = rows.reindex(columns=list(means)).astype(float).mean()
    out: dict[str, tuple[float, float]] = {}
    for col, raised in means.items():
        mu = profile["none_mean"][col]
        distance = (float(target[col]) - mu) / max(float(profile["none_sd"][col]), EVIDENCE_FLOOR)
        if np.isfinite(distance) and distance >= EVIDENCE_SD and raised > mu:
            counter = col.split(":", 1)[1]
            out[counter] = max(out.get(counter, (0.0, 0.0)), (round(distance * (raised - mu), 6), round(distance, 3)))
    ranked = sorted(out.items(), key=lambda kv: (-kv[1][0], kv[0]))[:EVIDENCE_TOP]
    return {counter: distance for counter, (_, distance) in ranked}


def predict_cause(model, rows: pd.DataFrame, columns: list[str], classes: list[str], *, tau: float,
                  blocks: list[str] = ("counters",),
                  per_cause: dict[str, CauseRecall] | None = None, fault_model=None) -> CausePrediction:
    """Label, probability, ``known`` and the runner-up causes of one run from its pair rows.

    ``fault`` is the most probable cause other than ``none`` with its own probability (not
    renormalised: a run the classifier finds normal shows a low one), for a run the
    detectors fail whatever the classifier thinks.
    Counters the model was trained on but the run lacks are NaN (imputed with their
    missing indicator); counters the model never saw are ignored and listed.  ``blocks`` are
    the model's ``cause_features.design`` blocks; ``per_cause`` its training runs per cause, so that a
    label learned from few runs says so (``runs_of_cause``, ``few_runs``).  ``fault_model`` (the
    model of the fault runs alone, when ``train_causes`` chose it) names the fault instead, with
    its probability given that the run is a fault (``given_a_fault``).
    """
    designed = cause_features.design(rows, list(blocks))
    aligned = designed.reindex(columns=columns)
    proba = run_probabilities(model, aligned, columns, classes).sort_values(ascending=False)
    label, p = str(proba.index[0]), float(proba.iloc[0])
    unseen = sorted(set(designed.columns) - set(columns))
    if fault_model is not None:     # the model of the fault runs alone names the fault: P(cause | fault)
        given = run_probabilities(fault_model, aligned, columns, list(fault_model.classes_))
        nearest = str(given.idxmax())
        fault: FaultGuess = {"label": nearest, "probability": round(float(given[nearest]), 4), "given_a_fault": True}
    else:
        nearest = nearest_fault(proba)
        fault = {"label": nearest, "probability": None if nearest is None else round(float(proba[nearest]), 4)}
    learned = (per_cause or {}).get(fault["label"]) or {}
    fault.update({"runs_of_cause": learned.get("runs"), "few_runs": learned.get("few_runs")})
    return {"label": label, "probability": round(p, 4), "known": bool(p >= tau), "tau": round(float(tau), 4),
            "fault": fault, "none_probability": round(float(proba.get("none", 0.0)), 4),
            "fault_score": round(fault_score(proba), 4),
            "alternatives": [{"label": str(c), "probability": round(float(v), 4)}
                             for c, v in proba.iloc[1:1 + ALTERNATIVES].items()],
            "pairs": int(len(rows)), "features_not_in_model": len(unseen)}
