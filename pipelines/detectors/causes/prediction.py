"""A target's probable cause from a trained classifier (Nguyen 2017 ch. 8, seed 004): the nearest cause
and its probability, called unknown below the model's threshold, the runner-up causes, its fault
score, and the counters that carried the prediction (each counter's violation ratio against the
normal runs' and the cause's own, :func:`counter_profile` of the training frame).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipelines.detectors.causes import features as cause_features
from pipelines.detectors.causes.classifiers import fault_score, nearest_fault, per_cause, run_probabilities
from pipelines.storage.cause_files import CausePrediction, CauseRecall, CounterProfile, FaultGuess


ALTERNATIVES = 2          # the runner-up causes a prediction names

EVIDENCE_SD = 3.0        # a counter carries a cause's evidence beyond this many of the normal runs' deviations

EVIDENCE_FLOOR = 0.05     # the smallest deviation of a violation ratio counted (a twentieth of the intervals)

EVIDENCE_TOP = 15         # counters kept per prediction

def counter_profile(frame: pd.DataFrame) -> CounterProfile:
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
    if not means or profile is None:
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
                  blocks: Sequence[str] = ("counters",),
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
    nearest: str | None
    if fault_model is not None:     # the model of the fault runs alone names the fault: P(cause | fault)
        given = run_probabilities(fault_model, aligned, columns, list(fault_model.classes_))
        nearest = str(given.idxmax())
        fault: FaultGuess = {"label": nearest, "probability": round(float(given[nearest]), 4), "given_a_fault": True}
    else:
        nearest = nearest_fault(proba)
        fault = {"label": nearest, "probability": None if nearest is None else round(float(proba[nearest]), 4)}
    learned: Mapping[str, Any] = (per_cause or {}).get(fault["label"] or "") or {}
    fault.update({"runs_of_cause": learned.get("runs"), "few_runs": learned.get("few_runs")})
    return {"label": label, "probability": round(p, 4), "known": bool(p >= tau), "tau": round(float(tau), 4),
            "fault": fault, "none_probability": round(float(proba.get("none", 0.0)), 4),
            "fault_score": round(fault_score(proba), 4),
            "alternatives": [{"label": str(c), "probability": round(float(v), 4)}
                             for c, v in proba.iloc[1:1 + ALTERNATIVES].items()],
            "pairs": int(len(rows)), "features_not_in_model": len(unseen)}
