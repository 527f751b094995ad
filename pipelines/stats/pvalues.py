"""pvalues: a detector's run score judged against the scores of the history's normal runs.

Every detector turns its run score into a p-value against
its own null distribution, learned from the history's normal runs each judged against the
others (leave-one-out, as Nguyen 2017 §7.5.3 does for its threshold, seed 004), and the
detectors are combined with one parameter, the target false-alarm rate per run.  Used by
``control_charts`` (run and strongest-window scores), ``detect`` (the stacking score) and
``headline`` (the run's decision).  Pure.
"""
from __future__ import annotations

import math
from typing import Callable, Mapping

import numpy as np


def calibrated_pvalue(score: float, null: list[float], *, resolution: float) -> float:
    """How likely a normal run scores at least ``score``, from the normal runs' scores ``null``.

    Scores are non-negative and many normal runs score exactly 0 (no violation, no flagged
    rule), so the null is a point mass at 0 plus a continuous part — a *hurdle* model:
    ``P(S >= s) = P(S > 0) · P(S >= s | S > 0)`` for ``s > 0``.  ``P(S > 0)`` is
    ``(k + 1) / (n + 1)`` with ``k`` of the ``n`` normal scores above 0 (the new run may be the
    first positive one: the same +1 as a rank p-value).  The positive part is compared on
    ``log(score + resolution)`` (skewed ratios; ``resolution`` is the smallest non-zero score,
    1/intervals for a ratio): location and scale are the mean and the standard deviation of
    the logs, and the tail is Student's t with ``k - 1`` degrees of freedom on the prediction
    scale ``s·sqrt(1 + 1/k)`` — the textbook prediction interval for one new run judged from
    ``k``, the small-sample correction.  On the log scale one odd normal run widens the scale
    but does not become the threshold, as the maximum does (Nguyen 2017 §7.5.3: one odd normal
    run silences every fault below it).  A robust scale (median/MAD) was measured and dropped:
    it ignores the odd normal runs, so the next odd normal run fails (10 of 176 normal runs of
    the four labelled sets in leave-one-out against 7, with a target rate of 5 %).  When every
    positive score is the same, the empirical ``1/(k + 1)`` for a higher score.  With fewer than
    2 positive scores the tail cannot be fitted and ``P(S > 0)`` alone is returned.  A score of
    0 has p = 1.  NaN with fewer than 2 normal runs.

    The fitted tail is never trusted below what was seen: the p-value is at least the share
    ``m / (n + 1)`` of normal runs that scored ``score`` or more.  A tail fitted to ten points
    can call a run extreme that a normal run of the history already exceeded (in the example
    lab, a normal target scored below the largest normal score and got p = 0.02 from the fit
    alone); the floor vanishes for a run above every normal score, so a fault above one odd
    normal run is judged by the fit, and with a 40-run history a fault below it can still
    fail (1/41 per test).  (Measured without it on the four labelled sets: 16 of 24 normal
    Nezha targets failed instead of 0, the other sets unchanged.)
    """
    from scipy.stats import t as student

    values = np.asarray(list(null), dtype=float)
    n = values.size
    if n < 2 or not np.isfinite(score):
        return float("nan")
    if score <= 0:
        return 1.0
    floor = float(np.sum(values >= score)) / (n + 1)
    positive = values[values > 0]
    k = positive.size
    share = (k + 1) / (n + 1) if k < n else 1.0
    if k < 2:
        return float(max(share, floor))
    logs = np.log(positive + resolution)
    y = math.log(score + resolution)
    m = float(logs.mean())
    s = float(logs.std(ddof=1))
    if s <= 0:
        return float(max(floor, share * (1.0 if y <= m else 1.0 / (k + 1))))
    return float(max(floor, share * student.sf((y - m) / (s * math.sqrt(1.0 + 1.0 / k)), df=k - 1)))


COMBINATIONS = ("simes", "bonferroni")


def combined_pvalue(pvalues: list[float], method: str = "bonferroni", weights: list[float] | None = None) -> float:
    """One p-value from several tests of the same run (NaN ones left out; NaN when none is left).

    ``bonferroni``: ``m · min p``, valid whatever the dependence between the tests.
    ``simes``: ``min_i m · p_(i) / i`` over the sorted p-values (Simes 1986).  It is never larger
    than Bonferroni's (``i = 1`` is Bonferroni's term), so two or more detectors that each see
    part of a fault add up, where Bonferroni hears only the strongest.  It keeps the level when
    the tests are positively dependent (PRDS: Sarkar 1998, Benjamini & Yekutieli 2001), which is
    the case of detectors that all score how far the same run is from the same normal runs:
    a run that looks odd to one looks, if anything, odder to the others.  Under arbitrary
    (negative) dependence its level can exceed the nominal one; Bonferroni's cannot.

    ``weights`` (one per p-value, positive) give the tests unequal shares of the rate: each p-value
    is divided by its weight, the weights scaled to a mean of 1, before either rule (the weighted
    Bonferroni and Simes procedures: Benjamini & Hochberg 1997, Genovese, Roeder & Wasserman
    2006); the level holds as long as the weights do not depend on the p-values combined.
    """
    if weights is not None:
        pairs = [(p, w) for p, w in zip(pvalues, weights) if np.isfinite(p)]
        mean = float(np.mean([w for _, w in pairs])) if pairs else 1.0
        pvalues = [p * mean / w for p, w in pairs]
    finite = sorted(p for p in pvalues if np.isfinite(p))
    if not finite:
        return float("nan")
    m = len(finite)
    if method == "bonferroni":
        return float(min(1.0, m * finite[0]))
    if method == "simes":
        return float(min(1.0, min(m * p / i for i, p in enumerate(finite, 1))))
    raise ValueError(f"the combination must be one of {', '.join(COMBINATIONS)}, not {method!r}")


def loo_pvalues(scores: Mapping[str, float], pvalue: Callable[[float, list[float]], float]) -> dict[str, float]:
    """Each normal run's p-value against the scores of the others (leave-one-out): the detector's
    verdicts on the history's normal runs.  ``pvalue(score, null)`` is the detector's own; runs
    whose p-value cannot be computed (too few others) are left out."""
    out = {}
    for run, score in scores.items():
        p = pvalue(float(score), [float(v) for r, v in scores.items() if r != run])
        if p is not None and np.isfinite(p):
            out[run] = round(float(p), 6)
    return out
