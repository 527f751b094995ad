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
from pipelines.detectors.causes import features as cause_features
from pipelines.storage.cause_files import CauseRecall, HeldOutCause, LearnerScore, LooPrediction, UnknownCauses

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
        return -(scores[k]["accuracy"] or 0.0), -(scores[k]["fault_nearest_accuracy"] or 0.0), order.index(k)
    leader: str | None = None
    for blocks in designs:
        name = "+".join(blocks)
        bound = None
        if leader is not None:      # a design that cannot pass the leader's accuracy need not be measured to the end
            nearest = scores[leader]["fault_nearest_accuracy"]
            bound = LooBound(scores[leader]["accuracy"] or 0.0, lambda r, p: p.idxmax() == labels[r],
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
        proba: pd.DataFrame = done if done is not None else loo_probabilities(template, frame, columns, balance)
        loo[name] = proba
        acc = loo_accuracy(proba, labels)
        table[name] = {"accuracy": round(acc, 4), "gain": round(gain(acc, r), 4), "runs": int(len(proba))}
        if progress:
            progress(i, len(candidates), name, acc)
    return table, loo


# --------------------------------------------------------------------------- I/O shell


