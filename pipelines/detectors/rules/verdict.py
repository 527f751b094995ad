"""The association rules' verdict on one run (Foo et al. 2015, seed 003, phases 4 and 5; the
practical change is this project's, measured in docs/results/rules.md): how far a flagged counter
moved (:func:`change_magnitude`, :func:`practical_filter`), the verdict document of a detection, and
stacking's score and p-value against the history's normal runs.  The ensembles themselves are
:mod:`pipelines.detectors.rules.ensemble`.
"""
from __future__ import annotations


import numpy as np
import pandas as pd

from pipelines.detectors.rules.ensemble import RulesResult, StackingEvidence
from pipelines.preparation import bins
from pipelines.stats import pvalues
from pipelines.storage.run_records import RunRecord
from pipelines.storage.stage_files import RuleDetection


def change_magnitude(values: np.ndarray, intervals: list[int] | None, low: float, level: float,
                     high: float) -> float:
    """How far a counter is from its usual band where its rules were violated.

    The median over the violation intervals of the distance of the value from the
    reference runs' band ``[low, high]`` (their 5th and 95th percentiles; 0 inside it),
    relative to ``max(|level|, high - low)`` (``level`` = their median; the spread keeps a
    counter that idles near 0 from turning a tiny absolute move into a huge relative
    one).  A counter that moved as a whole scores about its shift less half the band; a
    burst scores its height; ordinary noise that happened to break a rule scores ~0.
    NaN when there is nothing to measure.
    """
    x = np.asarray(values, dtype=float)
    if intervals:
        x = x[np.asarray(intervals, dtype=int)]
    x = x[~np.isnan(x)]
    scale = max(abs(level), high - low)
    if x.size == 0 or not np.isfinite(scale) or scale <= 0:
        return float("nan")
    return float(np.median(np.maximum(low - x, 0) + np.maximum(x - high, 0)) / scale)


def practical_filter(flagged: dict[str, list[str]], magnitude: dict[str, float], min_rel_change: float
                     ) -> tuple[dict[str, list[str]], dict[str, float]]:
    """The combiners' flagged counters without those that moved less than ``min_rel_change``.

    A rule model sees a counter that moved from one bin to the next as regressed however
    small the move; an analyst does not call a 2 % move a regression.  ``flagged`` maps a
    combiner to its counters; returns the same without the small changes, and those
    counters with their magnitude (a NaN magnitude — nothing to measure — keeps the flag).
    """
    small = {c: m for c, m in magnitude.items() if np.isfinite(m) and m < min_rel_change}
    return {k: [c for c in v if c not in small] for k, v in flagged.items()}, small


def verdict_document(run_id: str, meta: RunRecord, result: RulesResult, *, interval_s: float,
                     not_analysed: dict[str, list[str]]) -> RuleDetection:
    """The per-run verdict file (contract §2), headline from stacking."""
    scores = result["counter_scores"]
    stack = result["stacking"]
    verdict = "fail" if stack else "pass"
    return {
        "schema_version": 1,
        "run_id": run_id,
        "system": meta["system"],
        "verdict": verdict,
        "score": round(float(scores.max()) if len(scores) else 0.0, 4),
        "flagged_counters": stack,
        "counter_scores": {c: round(float(v), 4) for c, v in scores.sort_values(ascending=False).items()},
        "cause": {"label": None, "probability": None, "known": False},
        "baseline_runs": [{"run_id": r, "weight": round(w, 4)} for r, w in result["weights"].items()],
        "methods": {
            "association_rules_stacking": {"verdict": verdict, "flagged_counters": stack},
            "association_rules_bagging": {"verdict": "fail" if result["bagging"] else "pass",
                                          "flagged_counters": result["bagging"]},
            "association_rules_single": {"verdict": "fail" if result["single"] else "pass",
                                         "flagged_counters": result["single"]},
        },
        "details": {
            "interval_s": interval_s,
            "n_intervals": result["n_intervals"],
            "stacking_score": {c: round(float(result["s"][c]), 4) for c in result["s"].index if result["s"][c] > 0},
            "bagging_votes": {c: int(result["votes"][c]) for c in result["votes"].index if result["votes"][c] > 0},
            # flagged order (stacking's, then bagging's others): a set here made the file's bytes depend on
            # the process's hash seed
            "severity": {c: round(float(result["severity"][c]), 4)
                         for c in dict.fromkeys(stack + result["bagging"])},
            "violated_rules": result["violated_rules"],
            "violation_intervals": {c: v for c, v in result["intervals"].items()
                                    if c in set(stack) | set(result["bagging"])},
            "not_analysed": not_analysed,
            # flagged by the rules but moved less than detect.min_rel_change: counter -> magnitude
            "below_min_rel_change": {c: round(float(m), 4) for c, m in
                                     sorted((result.get("small_changes") or {}).items())},
            # flagged by the rules but changed less than significance.min_effect_pct: counter -> change in %
            "below_min_effect": dict(sorted((result.get("small_effects") or {}).items())),
            # every counter's relative change against the reference runs (the headline's practical test)
            # (null: not measurable, or moved off a level of exactly 0)
            "effects": {c: round(float(v), 4) if np.isfinite(v) else None
                        for c, v in sorted((result.get("effects") or {}).items())},
        },
    }


def split_counters(frame: pd.DataFrame, edges: bins.Edges, model_counters: set[str]) -> dict[str, list[str]]:
    """Counters of the target that cannot be analysed, and counters the history has but the target lacks."""
    present = set(frame.columns[frame.notna().any()])
    return {
        "new_in_target": sorted(present - set(edges) - model_counters),
        "no_variance_in_history": sorted((present & model_counters) - set(edges)),
        "missing_in_target": sorted(set(edges) - present),
    }


def stacking_score(result: RulesResult) -> float:
    """A run's stacking evidence: ``Σ_c s(c)``, the expected number of counters the weighted
    models flag, over the counters the practical-change filter kept (a score that
    :func:`pvalues.calibrated_pvalue` can judge against the history's normal runs; the
    largest ``s`` alone saturates at 1)."""
    s = result["s"].drop([*(result.get("small_changes") or {}), *(result.get("small_effects") or {})],
                         errors="ignore")
    return float(s.clip(lower=0).sum())


def stacking_pvalue(score: float, null: list[float], n_models: int) -> float:
    """The stacking score's p-value against the normal runs' scores (resolution: one model's share)."""
    return pvalues.calibrated_pvalue(score, null, resolution=1.0 / max(1, n_models))


def normal_pvalues(normal_scores: dict[str, float]) -> dict[str, float]:
    """Each normal run's stacking p-value against the others' scores (each judged by the models of
    all the others but itself: one model fewer than the runs), the record's false alarms
    (``record``)."""
    models = max(1, len(normal_scores) - 1)
    return pvalues.loo_pvalues(normal_scores, lambda s, null: stacking_pvalue(s, null, models))


def stacking_evidence(result: RulesResult, null: list[float] | None) -> StackingEvidence:
    """What the verdict file's ``association_rules_stacking`` gains from the calibration."""
    score = stacking_score(result)
    p = stacking_pvalue(score, null, len(result["weights"])) if null else float("nan")
    return {"score": round(score, 4), "p_value": round(p, 6) if np.isfinite(p) else None,
            "normal_runs": len(null or [])}
