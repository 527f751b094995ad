"""anchors: the simple baselines a performance team would otherwise use, judged like the detectors.

A detector earns its place only by beating what a team writes in an afternoon, so
``evaluate`` scores these beside the project's detectors on every labelled set.  Each anchor
judges a target run against baseline runs (normalised interval frames, no load scaling, no
filters, no environment matching) and returns the run's verdict, its flagged counters
(most suspicious first) and a score per counter for the ROC:

* **plain control chart** (Nguyen 2017 §3.2, §7.5.2-7.5.3, seed 004, without the project's
  additions): limits are the ``lower_pct``/``upper_pct`` percentiles of the baseline runs
  pooled; the run score is the mean average violation ratio of the top ``top_fraction``
  counters; the run fails when its score exceeds the largest score of the history's normal
  runs, each charted against the other normal runs.  Flagged: the counters whose average
  ratio exceeds that threshold (at least one when the run fails).
* **Mann-Whitney** per counter: the target's intervals against the baseline's intervals
  pooled, two-sided, Holm's step-down correction over the counters at ``alpha`` (family-wise:
  the run fails when any counter is significant).  Counter score ``1 - p``.
* **median threshold**: the target's median of each counter against the median of the
  baseline runs' medians; flagged when the change exceeds ``median_change`` (10 %) of the
  baseline's level.  Counter score: the relative change.

Pure functions: frames in, dicts out.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, TypedDict

import numpy as np
import pandas as pd

ANCHORS = ("anchor_chart", "anchor_mannwhitney", "anchor_median")


@dataclass(frozen=True)
class AnchorParams:
    """The ``evaluate.anchors`` block, typed: the plain chart's percentiles and top fraction, the
    Mann-Whitney family-wise ``alpha``, the median threshold's ``median_change``."""

    lower_pct: float
    upper_pct: float
    top_fraction: float
    alpha: float
    median_change: float

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "AnchorParams":
        return cls(**{k: float(block[k]) for k in ("lower_pct", "upper_pct", "top_fraction", "alpha", "median_change")})

    def chart_kw(self) -> dict[str, float]:
        """The plain chart's own (:func:`plain_chart`, :func:`plain_chart_null`)."""
        return {"lower_pct": self.lower_pct, "upper_pct": self.upper_pct, "top_fraction": self.top_fraction}


class AnchorJudgement(TypedDict, total=False):
    """An anchor's judgement of one run: its verdict, the counters it flagged (most suspicious
    first), a score per counter, and the plain chart's run score."""

    verdict: str
    flagged_counters: list[str]
    counter_scores: dict[str, float]
    score: float


def _judged(flagged: list[str], scores: dict[str, float]) -> AnchorJudgement:
    return {"verdict": "fail" if flagged else "pass", "flagged_counters": flagged, "counter_scores": scores}


def average_ratios(baseline: list[pd.DataFrame], target: pd.DataFrame, *, lower_pct: float,
                   upper_pct: float) -> pd.Series:
    """Average violation ratio (lower + upper) / 2 per counter, limits from the baseline pooled
    (Nguyen 2017 §3.2.1-3.2.2); counters the baseline or the target lack are left out."""
    pooled = pd.concat(baseline, ignore_index=True)
    counters = [c for c in target.columns if c in pooled.columns]
    lo = pooled[counters].quantile(lower_pct / 100.0)
    hi = pooled[counters].quantile(upper_pct / 100.0)
    t = target[counters]
    seen = t.notna() & lo.notna() & hi.notna()
    n = seen.sum(axis=0)
    ratio = ((t.lt(lo) | t.gt(hi)) & seen).sum(axis=0) / n.where(n > 0)
    return (ratio / 2.0).dropna()


def top_mean(average: pd.Series, top_fraction: float) -> float:
    """Mean of the largest ``top_fraction`` of the values (Nguyen 2017 §7.5.2); 0 for none."""
    a = average.dropna().sort_values(ascending=False)
    if a.empty:
        return 0.0
    return float(a.iloc[: max(1, int(math.ceil(top_fraction * len(a))))].mean())


def plain_chart_null(normal: dict[str, pd.DataFrame], *, lower_pct: float, upper_pct: float,
                     top_fraction: float) -> dict[str, float]:
    """The run score of each normal run charted against all the other normal runs."""
    return {r: top_mean(average_ratios([f for o, f in normal.items() if o != r], frame, lower_pct=lower_pct,
                                       upper_pct=upper_pct), top_fraction)
            for r, frame in normal.items() if len(normal) > 1}


def plain_chart(baseline: list[pd.DataFrame], target: pd.DataFrame, threshold: float, *, lower_pct: float,
                upper_pct: float, top_fraction: float) -> AnchorJudgement:
    """The plain control chart's judgement of one run; ``threshold`` = the largest normal score."""
    average = average_ratios(baseline, target, lower_pct=lower_pct, upper_pct=upper_pct)
    score = top_mean(average, top_fraction)
    flagged = []
    if score > threshold:
        flagged = list(average[average > threshold].sort_values(ascending=False).index)
    out = _judged(flagged, {c: float(2 * v) for c, v in average.items()})
    out["score"] = score
    return out


def holm(pvalues: pd.Series, alpha: float) -> pd.Series:
    """Holm's step-down procedure: which hypotheses are rejected at family-wise level ``alpha``."""
    p = pvalues.dropna().sort_values()
    m = len(p)
    reject = pd.Series(False, index=pvalues.index)
    for i, (name, value) in enumerate(p.items()):
        if value > alpha / (m - i):
            break
        reject[name] = True
    return reject


def mann_whitney(baseline: list[pd.DataFrame], target: pd.DataFrame, *, alpha: float) -> AnchorJudgement:
    """Per-counter two-sided Mann-Whitney U tests, Holm-corrected; fails when any counter is significant."""
    from scipy.stats import mannwhitneyu

    pooled = pd.concat(baseline, ignore_index=True)
    p = {}
    for c in target.columns:
        if c not in pooled.columns:
            continue
        x, y = target[c].dropna().to_numpy(dtype=float), pooled[c].dropna().to_numpy(dtype=float)
        if x.size == 0 or y.size == 0:
            continue
        if np.ptp(np.concatenate([x, y])) == 0:
            p[c] = 1.0                                  # all equal: no evidence of a change
            continue
        p[c] = float(mannwhitneyu(x, y, alternative="two-sided").pvalue)
    pvalues = pd.Series(p, dtype=float)
    reject = holm(pvalues, alpha)
    flagged = list(pvalues[reject].sort_values().index)
    return _judged(flagged, {c: 1.0 - v for c, v in pvalues.items()})


def median_threshold(baseline: list[pd.DataFrame], target: pd.DataFrame, *, change: float) -> AnchorJudgement:
    """Counters whose median moved by more than ``change`` of the baseline's level (median of run medians)."""
    level = pd.DataFrame([f.median() for f in baseline]).median()
    now = target.median()
    counters = [c for c in now.index if c in level.index and pd.notna(level[c]) and pd.notna(now[c])]
    rel = {}
    for c in counters:
        if level[c] != 0:
            rel[c] = abs(float(now[c] - level[c])) / abs(float(level[c]))
        else:
            rel[c] = 0.0 if now[c] == 0 else math.inf    # from nothing to something: any change is total
    rel_s = pd.Series(rel, dtype=float)
    flagged = list(rel_s[rel_s > change].sort_values(ascending=False).index)
    return _judged(flagged, {c: float(min(v, 1e6)) for c, v in rel_s.items()})


def judge_anchors(baseline: list[pd.DataFrame], target: pd.DataFrame, chart_threshold: float,
                  *, params: AnchorParams) -> dict[str, AnchorJudgement]:
    """Every anchor's judgement of one run."""
    return {
        "anchor_chart": plain_chart(baseline, target, chart_threshold, **params.chart_kw()),
        "anchor_mannwhitney": mann_whitney(baseline, target, alpha=params.alpha),
        "anchor_median": median_threshold(baseline, target, change=params.median_change),
    }
