"""Level shifts of one value per commit that the series' own course does not explain.

A nightly benchmark's history trends (a library grows, a cache warms over months), cycles
(weekly jobs on the machine), wanders (a random walk of the lab's state) and has heavy tails.
None of these is a change a team should triage, yet a segmentation that fits constant levels
calls each of them a string of steps.  Here a change is reported only where **the series after
it differs from what the series before it predicts**:

1. **Candidates** (``ruptures``, Truong, Oudre & Vayatis 2020): the series, isolated outliers
   (up to ``min_segment`` - 1 in a row) replaced by their running median
   (:func:`pipelines.commit_series.change_points.despike`) and
   scaled by its noise sd, is segmented by PELT with the least-squares cost
   (``ruptures.KernelCPD``, linear kernel, its C search) at a low penalty
   (``candidate_penalty`` x log n): every place a level may move is a candidate, a trend's
   staircase included.
2. **The local test.** Each candidate ``c`` is tested on the stretch between its neighbouring
   candidates (at most ``window`` commits either side): the regression ``y = a + b·x + q·x² +
   δ·[x ≥ 0] + e``, ``x`` the commits from ``c``, with AR(1) errors handled by one
   Cochrane-Orcutt step (``φ`` the lag-1 autocorrelation of the residuals, in [0, 0.98]): the
   stretch's trend and curvature and its autocorrelation are the null; ``δ`` is the step beyond
   them, ``t = δ / se(δ)``.  A random walk (``φ`` near 1) leaves one increment to judge the step,
   a cycle becomes autocorrelation, a trend a slope.
3. **Backward elimination.** From every candidate, while a candidate's ``|t|`` is below the
   critical value, the weakest is dropped and its neighbours are tested again on their wider
   stretches: what is left are steps that hold against every smooth course of the data around
   them.  The critical value is Student's ``t`` at ``alpha`` / (2 n) (a Bonferroni bound over the
   n places a step could have been found), times the series' **inflation**: the test run at every
   commit of the series on a fixed stretch (:func:`scan_t`, all at once) spreads as a standard
   normal where the local model holds; ``median |t| / 0.6745`` (at least 1) says how much wider the
   series' own course makes it.  It is measured with the candidates left taken out, as levels
   (:func:`piecewise_median`: a series of many steps is noise between them) and as local steps (a
   trend's course stays), the smaller kept.  A series whose inflation reaches
   ``abstain_inflation`` is too irregular to call: nothing is reported on it, and the page says so.
4. **A cycle** (:func:`seasonal_cycle`) in the series less its quadratic course and its steps, one
   that clears an F test over the periods tried and repeats from one half to the other, is taken
   out and the steps sought again (:func:`level_shifts`).
5. **Practical size**: a step smaller than ``min_magnitude`` of the level (Perfherder's alert
   threshold, as for PELT) or than ``min_sd`` times the series' noise sd (from its first
   differences) is not reported.

The measured table (docs/results/commit-series.md: per class of ``commitsim.realistic``, beside
"no change", PELT, Mono, Otava and MongoDB's E-Divisive) is why ``method: auto`` runs this on
one value per commit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import ruptures
from scipy import stats

from pipelines.commit_series.change_points import despike, robust_sd
from pipelines.commit_series.changes import IndexedChange, SeriesChange


@dataclass(frozen=True)
class LevelShiftParams:
    """``commit_changes.level_shifts`` in params.yaml."""

    alpha: float = 0.001
    window: int = 60
    min_segment: int = 5
    candidate_penalty: float = 2.0
    outlier_sd: float = 5.0
    min_magnitude: float = 0.02
    min_sd: float = 2.0
    abstain_inflation: float = 4.0
    cycle_alpha: float = 0.0001
    cycle_penalty: float = 25.0

    @classmethod
    def from_params(cls, p: dict[str, Any]) -> "LevelShiftParams":
        return cls(alpha=float(p["alpha"]), window=int(p["window"]), min_segment=int(p["min_segment"]),
                   candidate_penalty=float(p["candidate_penalty"]), outlier_sd=float(p["outlier_sd"]),
                   min_magnitude=float(p["min_magnitude"]), min_sd=float(p["min_sd"]),
                   abstain_inflation=float(p["abstain_inflation"]), cycle_alpha=float(p["cycle_alpha"]),
                   cycle_penalty=float(p["cycle_penalty"]))


@dataclass(frozen=True)
class SeriesShifts:
    """One series' level shifts, the spread of its step tests beyond chance (``inflation``), and
    whether it was too irregular to call (``inflation`` at least ``abstain_inflation``)."""

    changes: list[IndexedChange]
    inflation: float
    abstained: bool = False


@dataclass(frozen=True)
class StepTest:
    """The local test of a step at one commit: its size, ``t`` and the stretch's ``φ``."""

    delta: float
    t: float
    phi: float


def candidates(z: np.ndarray, *, penalty: float, min_segment: int) -> list[int]:
    """Where a least-squares segmentation of ``z`` (in noise sd) starts a new segment."""
    n = z.size
    if n < 2 * min_segment:
        return []
    algo = ruptures.KernelCPD(kernel="linear", min_size=min_segment, jump=1).fit(z.reshape(-1, 1))
    return [int(b) for b in algo.predict(pen=penalty * np.log(n)) if b < n]


def step_test(y: np.ndarray, c: int, lo: int, hi: int) -> StepTest | None:
    """The step at ``c`` beyond a quadratic course with AR(1) errors, on ``y[lo:hi]`` (see the
    module doc); ``None`` when the stretch is too short to tell (fewer than 4 values a side)."""
    if c - lo < 4 or hi - c < 4:
        return None
    seg = y[lo:hi]
    x = (np.arange(lo, hi) - c) / max(hi - lo, 1)
    design = np.column_stack([np.ones_like(x), x, x * x, (x >= 0).astype(float)])
    fit = _ols(design, seg)
    if fit is None:
        return None
    resid = seg - design @ fit[0]
    phi = 0.0
    a, b = resid[:-1], resid[1:]
    den = float(np.sqrt((a - a.mean()) @ (a - a.mean()) * ((b - b.mean()) @ (b - b.mean()))))
    if den > 0:
        phi = float(np.clip(((a - a.mean()) @ (b - b.mean())) / den, 0.0, 0.98))
    ys = seg[1:] - phi * seg[:-1]
    xs = design[1:] - phi * design[:-1]
    dof = ys.size - xs.shape[1]
    fit = _ols(xs, ys) if dof >= 2 else None
    if fit is None:
        return None
    coef, inv = fit
    resid = ys - xs @ coef
    s2 = float(resid @ resid) / dof
    se = float(np.sqrt(max(s2 * inv[3, 3], 0.0)))
    delta = float(coef[3])
    return StepTest(delta=delta, t=delta / se if se > 0 else 0.0, phi=phi)


def _ols(design: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Least squares through the normal equations (4 columns): the coefficients and (X'X)^-1."""
    try:
        inv = np.linalg.inv(design.T @ design)
    except np.linalg.LinAlgError:
        return None
    return inv @ (design.T @ y), inv


def critical_t(n: int, alpha: float, dof: int = 30) -> float:
    """Student's ``t`` at ``alpha / (2 n)``: a step anywhere in ``n`` commits found by chance."""
    return float(stats.t.isf(alpha / (2.0 * max(n, 1)), max(dof, 2)))


def scan_t(z: np.ndarray, window: int) -> np.ndarray:
    """:func:`step_test`'s ``t`` at every commit ``c`` whose stretch ``[c - w, c + w)`` lies in the
    series (``w`` = ``window``, or less on a short series), all at once: the stretches share one
    design, so both least-squares fits are a few matrix products over the stacked stretches."""
    n = z.size
    w = min(window, (n - 1) // 2)
    if w < 5:
        return np.empty(0)
    x = np.arange(-w, w) / (2 * w)
    d = np.column_stack([np.ones_like(x), x, x * x, (x >= 0).astype(float)])
    ys = np.lib.stride_tricks.sliding_window_view(z, 2 * w)              # stretches x 2w
    coef = ys @ d @ np.linalg.inv(d.T @ d)                              # stretches x 4
    r = ys - coef @ d.T
    a, b = r[:, :-1] - r[:, :-1].mean(1, keepdims=True), r[:, 1:] - r[:, 1:].mean(1, keepdims=True)
    den = np.sqrt((a * a).sum(1) * (b * b).sum(1))
    phi = np.clip(np.divide((a * b).sum(1), den, out=np.zeros_like(den), where=den > 0), 0.0, 0.98)
    d1, d0 = d[1:], d[:-1]
    p_ = phi[:, None, None]
    xtx = d1.T @ d1 - p_ * (d1.T @ d0 + d0.T @ d1) + p_ * p_ * (d0.T @ d0)
    y1, y0 = ys[:, 1:], ys[:, :-1]
    q = phi[:, None]
    xty = y1 @ d1 - q * (y1 @ d0) - q * (y0 @ d1) + q * q * (y0 @ d0)
    inv = np.linalg.inv(xtx)
    beta = np.einsum("sij,sj->si", inv, xty)
    yy = (y1 * y1).sum(1) - 2 * phi * (y1 * y0).sum(1) + phi * phi * (y0 * y0).sum(1)
    dof = 2 * w - 1 - 4
    s2 = np.maximum(yy - (beta * xty).sum(1), 0.0) / dof
    se = np.sqrt(s2 * inv[:, 3, 3])
    return np.divide(beta[:, 3], se, out=np.zeros_like(se), where=se > 0)


INFLATION_QUANTILE = 0.5
ABS_NORMAL_QUANTILE = float(stats.norm.isf((1 - INFLATION_QUANTILE) / 2))   # that quantile of |N(0, 1)|


def scan_inflation(z: np.ndarray, window: int) -> float:
    """How far the step test's ``t`` spreads over the series' own commits beyond a standard
    normal's: ``median |t| / 0.6745`` of :func:`scan_t`, at least 1.  A series whose course the
    local model does not capture (a cycle, a walk, long memory) has wide ``t`` everywhere; a
    real step only near it."""
    ts = np.abs(scan_t(z, window))
    if ts.size < 5:
        return 1.0
    return max(1.0, float(np.quantile(ts, INFLATION_QUANTILE)) / ABS_NORMAL_QUANTILE)


def _bounds(k: int, pts: list[int], n: int, window: int) -> tuple[int, int]:
    """The stretch candidate ``k`` is tested on: to its neighbours, at most ``window`` either side."""
    lo = pts[k - 1] if k > 0 else 0
    hi = pts[k + 1] if k + 1 < len(pts) else n
    return max(lo, pts[k] - window), min(hi, pts[k] + window)


def _steps(n: int, pts: list[int], tests: list[StepTest]) -> np.ndarray:
    """The accepted steps as a series: each one's ``δ`` from its commit on."""
    out = np.zeros(n)
    for c, test in zip(pts, tests):
        out[c:] += test.delta
    return out


FAR_BELOW = 0.5      # candidates this far below the critical value are dropped together, not one at a time


def piecewise_median(z: np.ndarray, pts: list[int]) -> np.ndarray:
    """The series' median between consecutive steps ``pts``: its level if the steps were all it did."""
    out = np.empty_like(z)
    edges = [0, *sorted(pts), z.size]
    for a, b in zip(edges, edges[1:]):
        out[a:b] = np.median(z[a:b])
    return out


def select(z: np.ndarray, cands: list[int], base: float, window: int
           ) -> tuple[list[int], list[StepTest], float]:
    """The steps that hold (see the module doc), their tests and the series' inflation.  Backward
    from every candidate: each tested on its stretch between its neighbours, the weakest dropped
    while its ``|t|`` is below ``base`` x the inflation of the series with the candidates left taken
    out.  Taken out two ways, the smaller inflation kept: their levels (the median between steps: a
    series of many steps is flat between them) and their local steps (a trend's course stays, and
    the local test holds it).  A real step taken out leaves noise; a cycle or a walk stays wide
    either way."""
    n = z.size
    pts = sorted(cands)
    while True:
        tests = [step_test(z, c, *_bounds(k, pts, n, window)) for k, c in enumerate(pts)]
        judged = [(c, t) for c, t in zip(pts, tests) if t is not None]
        pts, kept = [c for c, _ in judged], [t for _, t in judged]
        if not pts:
            return [], [], scan_inflation(z, window)
        inflation = min(scan_inflation(z - piecewise_median(z, pts), window),
                        scan_inflation(z - _steps(n, pts, kept), window))
        scores = [abs(t.t) for t in kept]
        weakest = int(np.argmin(scores))
        if scores[weakest] >= base * inflation:
            return pts, kept, inflation
        far_below = {c for c, sc in zip(pts, scores) if sc < FAR_BELOW * base * inflation}
        if len(far_below) > 1:             # noise candidates, all at once: none of them moves the others much
            pts = [c for c in pts if c not in far_below]
        else:
            pts.pop(weakest)


CYCLE_PERIODS = 240          # periods tried, log-spaced from 3 commits to a third of the series
CYCLE_HARMONICS = 2


def cycle_design(n: int, periods: np.ndarray) -> np.ndarray:
    """The sines and cosines of a cycle of each of ``periods`` commits and its harmonics, over ``n``
    commits: periods x n x (2 x harmonics)."""
    angle = 2 * np.pi * np.arange(n)[None, :, None] * np.arange(1, CYCLE_HARMONICS + 1)[None, None, :] \
        / np.asarray(periods, dtype=float).reshape(-1, 1, 1)
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=2)


def seasonal_cycle(r: np.ndarray, alpha: float) -> tuple[float, np.ndarray] | None:
    """A cycle in ``r`` (a series with its steps and a quadratic course taken out): the period from
    3 commits to a third of the series whose two harmonics explain the most (least squares, every
    period at once), kept when its F test clears ``alpha`` over the periods tried (Bonferroni) and it
    :func:`repeats`; its period and course."""
    n = r.size
    if n < 40:
        return None
    periods = np.unique(np.round(np.geomspace(3.0, n / 3.0, CYCLE_PERIODS), 2))
    designs = cycle_design(n, periods)                                           # periods x n x 4
    gram = np.matmul(designs.transpose(0, 2, 1), designs)
    coef = np.matmul(np.linalg.pinv(gram), np.matmul(r, designs)[..., None])    # a harmonic may alias
    courses = np.matmul(designs, coef)[..., 0]
    resid = ((r[None, :] - courses) ** 2).sum(1)
    k = designs.shape[2]
    ss_total = float(r @ r)
    f_stat = np.where(resid > 0, ((ss_total - resid) / k) / (np.maximum(resid, 1e-300) / max(n - k - 3, 1)), np.inf)
    best = int(np.argmax(f_stat))
    p_value = float(stats.f.sf(f_stat[best], k, n - k - 3)) * CYCLE_PERIODS
    period = float(periods[best])
    if p_value >= alpha or not repeats(r, period, alpha):
        return None
    return period, courses[best]


def repeats(r: np.ndarray, period: float, alpha: float) -> bool:
    """Whether a cycle of ``period`` fitted on one half of ``r`` predicts the other half, both ways
    (one-sided ``t`` of the other half on the prediction, at ``alpha``): a cycle repeats; a slow
    wander that one period happens to follow in one stretch does not."""
    n = r.size
    design = cycle_design(n, np.array([period]))[0]
    half = n // 2
    for fit, test in ((slice(0, half), slice(half, n)), (slice(half, n), slice(0, half))):
        coef, *_ = np.linalg.lstsq(design[fit], r[fit], rcond=None)
        pred, seen = design[test] @ coef, r[test]
        sxx = float(pred @ pred)
        if sxx <= 0:
            return False
        slope = float(pred @ seen) / sxx
        resid = seen - slope * pred
        se = float(np.sqrt((resid @ resid) / max(seen.size - 1, 1) / sxx))
        if se <= 0 or stats.t.sf(slope / se, max(seen.size - 1, 1)) >= alpha:
            return False
    return True


def without_course(z: np.ndarray, steps: list[int]) -> np.ndarray:
    """``z`` less its least-squares quadratic course and ``steps``: what a cycle would be left in."""
    n = z.size
    t = np.arange(n) / n
    design = np.column_stack([np.ones(n), t, t * t, *[(np.arange(n) >= c).astype(float) for c in steps]])
    coef, *_ = np.linalg.lstsq(design, z, rcond=None)
    return z - design @ coef


CYCLE_ROUNDS = 3


def level_shifts(values: np.ndarray, p: LevelShiftParams) -> SeriesShifts:
    """The level shifts of one series (see the module doc): each one's index, relative change of
    level and the test's evidence; none when the series is too irregular to call.  A seasonal
    cycle (:func:`seasonal_cycle`) around the steps found is taken out and the steps sought again,
    at most :data:`CYCLE_ROUNDS` times, until they no longer change: a weekly job's cycle is the
    series' course, not a string of steps, and it hides the steps beside it."""
    y = np.asarray(values, dtype=float)
    if np.isfinite(y).sum() < 2 * p.min_segment:
        return SeriesShifts([], 1.0)
    y = pd.Series(y).interpolate(limit_direction="both").to_numpy(float)
    y = despike(y, outlier_sd=p.outlier_sd, window=2 * p.min_segment - 1)
    scale = robust_sd(y)
    if scale <= 0:
        return SeriesShifts([], 1.0)
    found = shifts_of(y, scale, p)
    if found.abstained:
        return found
    z = (y - np.median(y)) / scale
    rough = candidates(z, penalty=p.cycle_penalty, min_segment=p.min_segment)
    for _ in range(CYCLE_ROUNDS):
        cycle = seasonal_cycle(without_course(z, [c["index"] for c in found.changes] or rough), p.cycle_alpha)
        if cycle is None:
            return found
        again = shifts_of(y - cycle[1] * scale, scale, p, period=cycle[0])
        if [c["index"] for c in again.changes] == [c["index"] for c in found.changes]:
            return again
        found = again
    return found


def shifts_of(y: np.ndarray, scale: float, p: LevelShiftParams, period: float | None = None) -> SeriesShifts:
    """The level shifts of ``y`` (cleaned, its noise sd ``scale``; ``period``: of the cycle taken
    out of it, for the evidence)."""
    n = y.size
    z = (y - np.median(y)) / scale
    edge = 2 * p.min_segment                          # a step needs this many commits either side to be told
    cands = [c for c in candidates(z, penalty=p.candidate_penalty, min_segment=p.min_segment) if edge <= c <= n - edge]
    if not cands:
        return SeriesShifts([], 1.0)
    base = critical_t(n, p.alpha)
    pts, tests, inflation = select(z, cands, base, p.window)
    crit = base * inflation
    if inflation >= p.abstain_inflation:
        return SeriesShifts([], inflation, abstained=True)
    out: list[IndexedChange] = []
    for k, c in enumerate(pts):
        lo, hi = _bounds(k, pts, n, p.window)
        test = tests[k]
        old = float(np.median(y[lo:c]))
        new = float(np.median(y[c:hi]))
        step = test.delta * scale
        magnitude = step / abs(old) if old else 0.0
        if abs(magnitude) < p.min_magnitude or abs(test.delta) < p.min_sd:
            continue
        out.append({"index": int(c), "magnitude": float(magnitude),
                    "evidence": {"previous_level": round(old, 6), "new_level": round(new, 6),
                                 "step": round(step, 6), "t": round(test.t, 2), "critical_t": round(crit, 2),
                                 "phi": round(test.phi, 3), "inflation": round(inflation, 2),
                                 "window": [int(lo), int(hi)],
                                 **({"cycle_period": round(period, 2)} if period is not None else {})}})
    return SeriesShifts(out, inflation)


def level_shift_changes(table: pd.DataFrame, p: LevelShiftParams
                        ) -> tuple[list[SeriesChange], dict[str, float]]:
    """Every series of ``table`` (series × commits, one value each): the changes as
    ``commit_series`` rows (``series``, ``commit``, ``previous``, ``magnitude``, ``method``,
    ``evidence``), and the series too irregular to call, with their inflation."""
    commits = list(table.columns)
    out: list[SeriesChange] = []
    irregular: dict[str, float] = {}
    for series, row in table.iterrows():
        found = level_shifts(row.to_numpy(float), p)
        if found.abstained:
            irregular[str(series)] = round(found.inflation, 2)
        for ch in found.changes:
            out.append({"series": str(series), "commit": commits[ch["index"]], "previous": commits[ch["index"] - 1],
                        "magnitude": ch["magnitude"], "method": "level_shift", "evidence": ch["evidence"]})
    return out, irregular
