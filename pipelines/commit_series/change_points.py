"""Change points of one value per commit: penalised segmentation (PELT) of a cleaned series.

The peers a performance team runs are built on the change-point literature (Apache Otava and
MongoDB on E-Divisive, Matteson & James 2014); this is its other classic, the penalised
search: the segmentation that minimises the segments' cost plus a penalty per change, found
exactly by PELT (Killick, Fearnhead & Eckley 2012; the cost as ``ruptures``' ``normal`` model,
Truong, Oudre & Vayatis 2020, computed here from cumulative sums: 900 commits in milliseconds).
The cost is the Gaussian likelihood of each segment's mean **and variance** (``model: normal``),
so a change of spread is a change as well as a change of level.

Real histories break the textbook's independent Gaussian noise, and each departure is dealt
with before the search, from the series alone:

- **isolated outliers** (one slow commit): a value more than ``outlier_sd`` robust sd from its
  running median (5 commits) is replaced by that median;
- **autocorrelation** (the machine's slow moods, which a shuffle-based null takes for changes):
  the series is pre-whitened, ``z_t = y_t - φ·y_{t-1}``, with ``φ`` the lag-1 autocorrelation of
  the residuals around a running median (``min_segment`` x 4 + 1 commits), clipped to [0, 0.95];
  a level step ``δ`` stays a step of ``δ(1 - φ)`` against white noise of sd ``σ√(1 - φ²)``;
- **scale**: the cleaned series is divided by its robust sd (1.4826 MAD of first differences
  / √2), so the penalty means the same on every series.

The penalty is ``penalty`` x log(n) per change (BIC's for a change of mean and variance is
3 log n on this likelihood).  Last, **practical significance**: a change whose levels (the
medians of the segments on either side) differ by less than ``min_magnitude`` of the level is
dropped, as Otava's ``min_magnitude`` and Perfherder's alert threshold do, unless the spread
changed by ``variance_ratio`` or more.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from pipelines.commit_series.changes import IndexedChange, SeriesChange

MAD_SD = 1.4826


def robust_sd(values: np.ndarray) -> float:
    """The sd of the noise from first differences (1.4826 MAD / √2): a level shift is one large
    difference among many, so it does not inflate it."""
    d = np.diff(values)
    if d.size == 0:
        return 0.0
    return float(MAD_SD * np.median(np.abs(d - np.median(d))) / np.sqrt(2.0))


def running_median(values: np.ndarray, window: int) -> np.ndarray:
    return pd.Series(values).rolling(window, center=True, min_periods=1).median().to_numpy(float)


def despike(values: np.ndarray, *, outlier_sd: float, window: int = 5) -> np.ndarray:
    """The series with each value more than ``outlier_sd`` robust sd from its running median
    (``window`` commits) replaced by that median: an isolated slow commit (or up to ``window``
    // 2 in a row) is not a level."""
    y = np.asarray(values, dtype=float).copy()
    sd = robust_sd(y)
    if sd <= 0:
        return y
    near = running_median(y, window)
    far = np.abs(y - near) > outlier_sd * sd
    y[far] = near[far]
    return y


def clean(values: np.ndarray, *, outlier_sd: float, min_segment: int) -> tuple[np.ndarray, float, float]:
    """The series with isolated outliers replaced (:func:`despike`) and pre-whitened, in units of
    its noise sd; the ``φ`` and the sd used."""
    sd = robust_sd(np.asarray(values, dtype=float))
    if sd <= 0:
        return np.zeros(len(values)), 0.0, 0.0
    y = despike(values, outlier_sd=outlier_sd)
    resid = y - running_median(y, 4 * min_segment + 1)
    phi = 0.0
    if resid.size > 3 and np.std(resid[:-1]) > 0 and np.std(resid[1:]) > 0:
        phi = float(np.clip(np.corrcoef(resid[:-1], resid[1:])[0, 1], 0.0, 0.95))
    z = y[1:] - phi * y[:-1]
    z = np.r_[z[0], z]                                 # keep one value per commit
    scale = robust_sd(z) or sd
    return (z - np.median(z)) / scale, phi, scale


def segment(z: np.ndarray, *, penalty: float, min_segment: int, var_floor: float = 1e-2) -> list[int]:
    """PELT (Killick et al. 2012) with the Gaussian mean-and-variance cost ``m·log σ̂²`` of a
    segment of ``m`` values (``σ̂²`` at least ``var_floor``: ``z`` is in units of the noise sd, so
    a constant stretch costs as a quiet one, not minus infinity), each cost O(1) from cumulative
    sums: the indices where a new segment starts."""
    n = z.size
    size = max(2, min_segment)
    if n < 2 * size:
        return []
    pen = penalty * np.log(n)
    s1 = np.r_[0.0, np.cumsum(z)]
    s2 = np.r_[0.0, np.cumsum(z * z)]

    def cost(starts: np.ndarray, end: int) -> np.ndarray:
        m = end - starts
        mean = (s1[end] - s1[starts]) / m
        var = np.maximum((s2[end] - s2[starts]) / m - mean * mean, var_floor)
        return m * np.log(var)

    best = np.full(n + 1, np.inf)
    best[0] = -pen
    last = np.zeros(n + 1, dtype=int)
    alive = np.array([0])
    for t in range(size, n + 1):
        cand = alive[t - alive >= size]
        if cand.size == 0:
            continue
        fit = best[cand] + cost(cand, t)
        k = int(np.argmin(fit))
        best[t], last[t] = fit[k] + pen, cand[k]
        parts = [alive[t - alive < size], cand[fit <= best[t]]]   # too close to t yet; not pruned (never optimal again)
        if t + size <= n:
            parts.append(np.array([t]))
        alive = np.concatenate(parts)
    bounds, t = [], n
    while t > 0:
        t = int(last[t])
        if t > 0:
            bounds.append(t)
    return sorted(bounds)


def pelt_series(values: np.ndarray, *, penalty: float, min_segment: int, outlier_sd: float,
                min_magnitude: float, variance_ratio: float) -> list[IndexedChange]:
    """The changes of one series: index, relative change of level, spread ratio, and the ``φ``
    used (see the module doc)."""
    y = np.asarray(values, dtype=float)
    finite = np.isfinite(y)
    if finite.sum() < 2 * min_segment:
        return []
    y = pd.Series(y).interpolate(limit_direction="both").to_numpy(float)
    z, phi, _ = clean(y, outlier_sd=outlier_sd, min_segment=min_segment)
    if not np.any(z):
        return []
    bounds = segment(z, penalty=penalty, min_segment=min_segment)
    edges = [0, *bounds, y.size]
    out: list[IndexedChange] = []
    for i, b in enumerate(bounds):
        before, after = y[edges[i]:b], y[b:edges[i + 2]]
        old, new = float(np.median(before)), float(np.median(after))
        magnitude = (new - old) / abs(old) if old else 0.0
        spread = robust_sd(after) / max(robust_sd(before), 1e-12)
        if abs(magnitude) < min_magnitude and not (spread >= variance_ratio or spread <= 1.0 / variance_ratio):
            continue
        out.append({"index": int(b), "magnitude": float(magnitude),
                    "evidence": {"previous_level": round(old, 6), "new_level": round(new, 6),
                                 "spread_ratio": round(float(spread), 3), "phi": round(phi, 3)}})
    return out


def pelt_changes(table: pd.DataFrame, *, penalty: float, min_segment: int, outlier_sd: float,
                 min_magnitude: float, variance_ratio: float) -> list[SeriesChange]:
    """Every series of ``table`` (series × commits, one value each): the changes as
    ``commit_series`` rows (``series``, ``commit``, ``previous``, ``magnitude``, ``method``, ``evidence``)."""
    commits = list(table.columns)
    out: list[SeriesChange] = []
    for series, row in table.iterrows():
        for ch in pelt_series(row.to_numpy(float), penalty=penalty, min_segment=min_segment,
                              outlier_sd=outlier_sd, min_magnitude=min_magnitude, variance_ratio=variance_ratio):
            out.append({"series": series, "commit": commits[ch["index"]], "previous": commits[ch["index"] - 1],
                        "magnitude": ch["magnitude"], "method": "pelt", "evidence": ch["evidence"]})
    return out


class PeltSettings(TypedDict):
    """The ``commit_changes.pelt`` block as :func:`pelt_changes`' keywords."""

    penalty: float
    min_segment: int
    outlier_sd: float
    min_magnitude: float
    variance_ratio: float


def pelt_params(p: Mapping[str, Any]) -> PeltSettings:
    return {"penalty": float(p["penalty"]), "min_segment": int(p["min_segment"]), "outlier_sd": float(p["outlier_sd"]),
            "min_magnitude": float(p["min_magnitude"]), "variance_ratio": float(p["variance_ratio"])}
