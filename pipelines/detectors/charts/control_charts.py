"""control_charts: per-counter control charts of the target against its baseline, violation ratios.

Nguyen 2017 (seed 004):

* **control limits** (§3.2.1): centre line = baseline median; limits = the baseline's
  ``lower_pct``/``upper_pct`` percentiles (1st/99th by default) or mean ± ``sigma``·sd,
  over the whole run (``scope: run``) or per interval position (``scope: interval``);
* **violation ratios** (§3.2.2, Table 3.3): lower = share of the target's points below
  the LCL, upper = share above the UCL, average = (lower+upper)/2, sum = lower+upper;
* **load scaling** (§5.2): the frames are the load-scaled intervals of ``discretize``
  (every run scaled to the system's reference load with its own ``c = a·l + b`` fits);
* **multimodal filtering** (§5.3): when the baseline density of a counter has two modes
  split by a deep local minimum, the samples of the secondary (minor) mode are dropped.
  The thesis drops the left (idle) mode; we drop the *minor* one, which is its left mode
  there and the right one for a periodic batch job.  From the target we drop at most the
  baseline's share of minor-mode points (the farthest from the cut first), so a target
  that spends *more* time in that region still shows it instead of having it filtered away;
* **load-independent counters** (§5.4): counters whose violation ratio exceeds
  ``load_independent_ratio`` (10 %) in most pairs of normal runs of one version are
  listed and left out of the verdict (a pair is the same test run again: same version
  and same environment);
* **run verdict** (§7.5.2-7.5.3): mean average-violation ratio of the top
  ``top_fraction`` (50 %) counters; fail above a threshold that defaults to the maximum
  of that score over normal runs of the history, each charted against the others.

The baseline of a target is the passed runs of its history whose environment is most
like its own (``history.most_similar``), the newest ``max_baseline_runs`` of them: a lab
with another CPU or database version moves counters for reasons that are not regressions,
and pooling it would widen every limit.  When none of them shares the target's lab, the
target is first moved by its lab's level and the counters that wander between that lab's
runs are left out (``labs``); with too few runs of the lab to learn from, the result says
"insufficient baseline".  A counter is *flagged* when its sum ratio is above both its own
maximum over the normal runs of the history and ``counter_flag_floor``.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np
import pandas as pd

from pipelines import config
from pipelines.detectors.charts.modes import find_modes, without_minor_modes
from pipelines.stats import pvalues
from pipelines.storage.run_records import ValidIndex
from pipelines.detectors.charts.files import ChartCalibration, ChartResult, ChartSeries, MinorMode
from pipelines.systems import labs

log = logging.getLogger("regresslab.control_charts")
RATIO_COLUMNS = ["lower", "upper", "average", "sum"]


# --------------------------------------------------------------------------- pure core


@dataclass
class Limits:
    """Centre line and control limits, one row (``scope: run``) or one row per interval position."""

    cl: pd.DataFrame
    lcl: pd.DataFrame
    ucl: pd.DataFrame
    scope: str


def control_limits(frames: list[pd.DataFrame], *, method: str, lower_pct: float, upper_pct: float, sigma: float,
                   scope: str) -> Limits:
    """Control limits of every counter from the baseline runs' intervals (Nguyen 2017 §3.2.1).

    Parameters
    ----------
    frames
        Baseline runs, each indexed by interval position with one column per counter.
    method
        ``percentile`` (LCL/UCL = ``lower_pct``/``upper_pct`` percentiles) or ``sigma``
        (mean ± ``sigma`` standard deviations).  The centre line is the median.
    scope
        ``run``: one set of limits from all intervals pooled; ``interval``: limits per
        interval position across the baseline runs.
    """
    if method not in ("percentile", "sigma"):
        raise ValueError(f"control_charts.method must be 'percentile' or 'sigma', not {method!r}")
    if scope not in ("run", "interval"):
        raise ValueError(f"control_charts.scope must be 'run' or 'interval', not {scope!r}")
    if not frames:
        raise ValueError("control limits need at least one baseline run")
    if scope == "run":
        pooled = pd.concat(frames, axis=0, ignore_index=True)
        grouped = pooled.groupby(np.zeros(len(pooled), dtype=int))
    else:
        grouped = pd.concat(frames, axis=0).groupby(level=0)
    cl = grouped.median()
    if method == "percentile":
        lcl, ucl = grouped.quantile(lower_pct / 100.0), grouped.quantile(upper_pct / 100.0)
    else:
        mean, sd = grouped.mean(), grouped.std(ddof=1).fillna(0.0)
        lcl, ucl = mean - sigma * sd, mean + sigma * sd
    return Limits(cl, lcl, ucl, scope)


def _broadcast(limit: pd.DataFrame, target: pd.DataFrame, scope: str) -> np.ndarray:
    cols = list(target.columns)
    if scope == "run":
        row = limit.reindex(columns=cols).iloc[0].to_numpy(dtype=float)
        return np.broadcast_to(row, target.shape)
    return limit.reindex(index=target.index, columns=cols).to_numpy(dtype=float)


def violation_ratios(target: pd.DataFrame, limits: Limits, *, window_share: float | None = None,
                     excursions_too: bool = False) -> pd.DataFrame:
    """Lower, upper, average and sum violation ratio per counter (Nguyen 2017 §3.2.2, Table 3.3).

    Ratios are shares in [0, 1] of the target's points that have limits; a counter the
    baseline or the target lacks gets NaN ratios (``n`` = 0).  With ``window_share``, the
    ``window`` column is the sum ratio of the strongest window of consecutive intervals
    (:func:`window_ratio`): a regression that covers part of the run is not diluted by the rest.
    With ``excursions_too`` (the cause features), ``below`` and ``above`` are the strongest
    window's mean distance below the LCL and above the UCL in band widths (:func:`excursions`).
    """
    counters = [c for c in target.columns if c in limits.lcl.columns]
    t = target[counters].to_numpy(dtype=float)
    lo, hi = _broadcast(limits.lcl, target[counters], limits.scope), _broadcast(limits.ucl, target[counters], limits.scope)
    rows = slice(0, 1) if limits.scope == "run" else slice(None)     # a run-wide band is one row
    comparable = ~(np.isnan(t) | np.isnan(lo[rows]) | np.isnan(hi[rows]))
    n = comparable.sum(axis=0)
    with np.errstate(invalid="ignore"):
        below = (comparable & (t < lo)).sum(axis=0)
        above = (comparable & (t > hi)).sum(axis=0)
        lower = np.where(n > 0, below / np.maximum(n, 1), np.nan)
        upper = np.where(n > 0, above / np.maximum(n, 1), np.nan)
    out = pd.DataFrame({"lower": lower, "upper": upper}, index=pd.Index(counters, name="counter"))
    out["average"] = (out["lower"] + out["upper"]) / 2.0
    out["sum"] = out["lower"] + out["upper"]
    out["n"] = n
    if window_share is not None:
        with np.errstate(invalid="ignore"):
            violated = np.where(comparable, (t < lo) | (t > hi), np.nan)
        if excursions_too:      # the band of a run-wide limit is one row: broadcast it, not n copies
            below, above = excursions(t, lo[rows], hi[rows], comparable)
            out["window"], out["below"], out["above"] = strongest_windows([violated, below, above], comparable,
                                                                          window_share=window_share)
        else:
            out["window"] = strongest_windows([violated], comparable, window_share=window_share)[0]
    return out


def excursions(t: np.ndarray, lo: np.ndarray, hi: np.ndarray, comparable: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """How far each point lies below the LCL and above the UCL, in widths of its control band
    (``UCL - LCL``; 0 inside, NaN without a comparable point): a violation ratio says *that* a
    counter left its band, this says *how far*, with its direction (the direction and
    size of each counter's change).  A band narrower than 1 % of the counter's level (a counter
    nearly constant in the baseline) counts as 1 % wide, or 1e-9 at level 0, so a move off a
    constant is large but finite.  ``lo`` and ``hi`` have a row per interval or one for the run.
    """
    with np.errstate(invalid="ignore"):
        width = np.fmax(hi - lo, np.fmax(0.01 * np.fmax(np.abs(lo), np.abs(hi)), 1e-9))
        below, above = np.subtract(lo, t), np.subtract(t, hi)      # in place from here: no temporaries
        for out in (below, above):
            np.fmax(out, 0.0, out=out)
            np.divide(out, width, out=out)
            out[~comparable] = np.nan
    return below, above


def window_width(n_intervals: int, window_share: float) -> int:
    """Intervals in a window: ``ceil(window_share · n)``, at least 2 (one interval is noise), at most n."""
    return int(min(max(n_intervals, 1), max(2, math.ceil(window_share * n_intervals - 1e-9))))


def window_ratio(violated: np.ndarray, *, window_share: float) -> np.ndarray:
    """Per column, the largest share of violated points over windows of consecutive intervals.

    ``violated`` is (intervals x counters): 1 outside the limits, 0 inside, NaN without a
    comparable point; a window counts its comparable points only (at least half of it).  Any
    other non-negative per-point value (:func:`excursions`) gives its strongest window's mean.
    The width is :func:`window_width`; a run shorter than a window is one window.
    """
    values = np.asarray(violated, dtype=float)
    values = values[:, None] if values.ndim == 1 else values
    return strongest_windows([values], ~np.isnan(values), window_share=window_share)[0]


def strongest_windows(arrays: list[np.ndarray], seen: np.ndarray, *, window_share: float) -> list[np.ndarray]:
    """:func:`window_ratio` of several (intervals x counters) arrays that share their comparable
    points ``seen``, counting the points of each window once for all of them: running sums over
    whole windows (``ceil(window_share·n)`` intervals, at least half of them comparable), then
    the largest mean per column (NaN for a column no window can judge).

    In a column whose every point is comparable every window counts ``width`` points, so the
    largest mean is the largest window sum divided by ``width`` once: division by a positive
    constant keeps the order and rounds each sum alike, so it is the same number as the
    largest of the means, with a quarter of the passes over the arrays.  Columns are
    independent, so those columns are computed so and the others as below."""
    n, m = seen.shape
    width = window_width(n, window_share)
    if n == 0:
        return [np.full(m, np.nan) for _ in arrays]
    full = seen.all(axis=0)
    if full.all():
        return [window_sums_max(values, width) / float(width) for values in arrays]
    if full.any():
        out = [np.empty(m) for _ in arrays]
        rest = strongest_windows([values[:, ~full] for values in arrays], seen[:, ~full], window_share=window_share)
        for target, values, other in zip(out, arrays, rest):
            target[full] = window_sums_max(values[:, full], width) / float(width)
            target[~full] = other
        return out
    zero = np.zeros((1, m))
    counts = np.concatenate([zero, np.cumsum(seen, axis=0, dtype=float)])
    counts = counts[width:] - counts[:-width]
    judged = counts >= max(1, width // 2)
    judgeable = judged.any(axis=0)
    out = []
    for values in arrays:
        sums = np.concatenate([zero, np.cumsum(np.where(seen, values, 0.0), axis=0)])
        with np.errstate(invalid="ignore", divide="ignore"):
            means = np.where(judged, (sums[width:] - sums[:-width]) / counts, -np.inf)
        best = means.max(axis=0)
        out.append(np.where(judgeable, best, np.nan))
    return out


def window_sums_max(values: np.ndarray, width: int) -> np.ndarray:
    """Per column, the largest sum of ``width`` consecutive rows of ``values`` (no NaN): running
    sums from a zero row, as :func:`strongest_windows` forms them, the zero row left implicit
    (no concatenated copy of the sums)."""
    sums = np.cumsum(values, axis=0, dtype=float)
    best = sums[width - 1].copy()                      # the first window: its running sum less 0
    if len(sums) > width:
        best = np.maximum(best, (sums[width:] - sums[:-width]).max(axis=0))
    return best


def baseline_limits(baseline: list[pd.DataFrame], modes: dict[str, MinorMode], *, method: str,
                    lower_pct: float, upper_pct: float, sigma: float, scope: str) -> Limits:
    """The control limits of ``baseline`` without its counters' minor modes (:func:`chart`'s first half)."""
    return control_limits([without_minor_modes(f, modes, baseline=True) for f in baseline], method=method,
                          lower_pct=lower_pct, upper_pct=upper_pct, sigma=sigma, scope=scope)


class LimitSettings(TypedDict):
    """How a baseline's control limits are set (:func:`control_limits`' keywords)."""

    method: str
    lower_pct: float
    upper_pct: float
    sigma: float
    scope: str


@dataclass(frozen=True)
class ChartParams:
    """How a target is charted (of the ``control_charts`` block, :class:`ControlChartParams`): the limits
    (``method`` percentile or sigma, ``lower_pct``/``upper_pct`` or ``sigma``, ``scope`` run or
    interval), the multimodal filter (``max_dip``, ``min_mode_share``), and the strongest window's
    share of the run (``window_share``)."""

    method: str
    lower_pct: float
    upper_pct: float
    sigma: float
    scope: str
    multimodal_filter: bool
    max_dip: float
    min_mode_share: float
    window_share: float

    def limit_kw(self) -> LimitSettings:
        """The keyword arguments of :func:`baseline_limits`."""
        return LimitSettings(method=self.method, lower_pct=self.lower_pct, upper_pct=self.upper_pct, sigma=self.sigma,
                             scope=self.scope)

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "ChartParams":
        """The charting settings of the ``control_charts`` block."""
        return cls(method=block["method"], lower_pct=float(block["lower_pct"]), upper_pct=float(block["upper_pct"]),
                   sigma=float(block["sigma"]), scope=block["scope"], multimodal_filter=bool(block["multimodal_filter"]),
                   max_dip=float(block["multimodal_max_dip"]), min_mode_share=float(block["multimodal_min_share"]),
                   window_share=float(block["window_share"]))


@dataclass(frozen=True)
class ControlChartParams:
    """The ``control_charts`` block, typed: how a chart is drawn (:class:`ChartParams`), the
    newest similar passed runs a target is charted against (``max_baseline_runs``, all when
    None), the load-independent filter (a counter over ``load_independent_ratio`` in more than
    ``load_independent_share`` of the repeat pairs, at most ``max_filtered_share`` of the
    counters set aside), the run score's ``top_fraction``, the verdict's ``false_alarm_rate`` or
    the paper's fixed ``threshold``, the counters' ``counter_flag_floor``, the charts a page
    plots (``plot_top``); ``block`` is the block as validated (the input keys hash it)."""

    chart: ChartParams
    max_baseline_runs: int | None
    load_independent_ratio: float
    load_independent_share: float
    max_filtered_share: float
    top_fraction: float
    false_alarm_rate: float
    threshold: float | None
    counter_flag_floor: float
    plot_top: int
    block: Mapping[str, Any] = field(compare=False, repr=False)

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "ControlChartParams":
        runs, fixed = block["max_baseline_runs"], block["threshold"]
        return cls(chart=ChartParams.of(block), max_baseline_runs=None if runs is None else int(runs),
                   load_independent_ratio=float(block["load_independent_ratio"]),
                   load_independent_share=float(block["load_independent_share"]),
                   max_filtered_share=float(block["max_filtered_share"]), top_fraction=float(block["top_fraction"]),
                   false_alarm_rate=float(block["false_alarm_rate"]), threshold=None if fixed is None else float(fixed),
                   counter_flag_floor=float(block["counter_flag_floor"]), plot_top=int(block["plot_top"]),
                   block=dict(block))

    @classmethod
    def load(cls) -> "ControlChartParams":
        """The project's ``control_charts`` block (``config.load_params``), typed: the stages' one loading site."""
        return cls.of(config.load_params("control_charts"))

    def judge_kw(self) -> dict[str, float]:
        """The keyword arguments of :func:`judge`."""
        return {"top_fraction": self.top_fraction, "counter_flag_floor": self.counter_flag_floor,
                "false_alarm_rate": self.false_alarm_rate}


def chart(baseline: list[pd.DataFrame], target: pd.DataFrame, p: ChartParams, *,
          modes: dict[str, MinorMode] | None = None, excursions_too: bool = False,
          limits: Limits | None = None) -> tuple[pd.DataFrame, Limits, dict[str, MinorMode]]:
    """Control charts of every counter of ``target`` against ``baseline`` (both load-scaled).

    ``modes`` (from :func:`find_modes` on the same baseline) saves finding them again, and
    ``limits`` (:func:`baseline_limits` of the same baseline and modes) computing them again.
    Returns the violation ratios, the limits and, per filtered counter, its minor mode.
    """
    if not p.multimodal_filter:
        modes = {}
    elif modes is None:
        modes = find_modes(baseline, max_dip=p.max_dip, min_mode_share=p.min_mode_share)
    if limits is None:
        limits = baseline_limits(baseline, modes, **p.limit_kw())
    target = without_minor_modes(target, modes, baseline=False)
    return violation_ratios(target, limits, window_share=p.window_share, excursions_too=excursions_too), limits, modes


class Charter:
    """:func:`chart` over named runs, finding the modes and the limits of each baseline set once (a
    run is the baseline of about 10 pairs in ``features``).  Whole-run limits are a row per counter
    and are kept; per-interval limits (``scope: interval``) would be a frame per baseline set, and
    are recomputed."""

    def __init__(self, frames, p: ChartParams):
        self.frames, self.p = frames, p
        self._modes: dict[tuple[str, ...], dict] = {}            # baseline set -> its minor modes
        self._limits: dict[tuple[str, ...], pd.DataFrame] = {}   # baseline set -> its whole-run limits

    def __call__(self, baseline: list[str], target: str, shift: pd.Series | None = None, *,
                 excursions_too: bool = False):
        """Chart ``target`` (moved by ``-shift``, :func:`labs.shifted`) against ``baseline``
        (``excursions_too``: with the excursions, :func:`violation_ratios`)."""
        key = tuple(sorted(baseline))
        if key not in self._modes:
            self._modes[key] = (find_modes([self.frames[b] for b in key], max_dip=self.p.max_dip,
                                           min_mode_share=self.p.min_mode_share)
                                if self.p.multimodal_filter else {})
        limits = self._limits.get(key)
        if limits is None:
            limits = baseline_limits([self.frames[b] for b in key], self._modes[key], **self.p.limit_kw())
            if self.p.scope == "run":     # one row per counter; per-interval limits are kept by no one
                self._limits[key] = limits
        return chart([], labs.shifted(self.frames[target], shift), self.p, modes=self._modes[key],
                     limits=limits, excursions_too=excursions_too)

    def lab(self, target: str, baseline: list[str], index: ValidIndex, lab_runs: dict[str, str],
            lab_kw: labs.LabParams, candidates: Sequence[str] = ()) -> labs.LabShift:
        """:func:`labs.lab_shift` of ``target`` against ``baseline`` (levels at the store's reference).

        With an insufficient baseline, the counters whose level differs between the labs of
        ``candidates`` (the passed history, :func:`labs.environment_dependent`) are not judged
        either: another lab's runs say nothing about them (detect's rules abstain on them too)."""
        envs = {r: index[r].get("environment") or {} for r in [target, *baseline, *lab_runs, *candidates]}
        return labs.lab_for(target, baseline, envs, lab_runs,
                            lambda runs: self.frames.levels(runs, self.frames.reference), lab_kw, candidates)


def top_ratio_mean(average: pd.Series, *, top_fraction: float, exclude=()) -> float:
    """Mean average-violation ratio of the top ``top_fraction`` counters (Nguyen 2017 §7.5.2)."""
    a = average.drop(list(exclude), errors="ignore").dropna().sort_values(ascending=False)
    if a.empty:
        return 0.0
    k = max(1, int(math.ceil(top_fraction * len(a))))
    return float(a.iloc[:k].mean())


def judge(ratios: pd.DataFrame, calibration: ChartCalibration, *, top_fraction: float,
          counter_flag_floor: float, false_alarm_rate: float) -> ChartResult:
    """Run verdict, score, p-value and flagged counters of one target from its violation ratios.

    Two scores, each turned into a p-value against its null distribution from the history's
    normal runs (:func:`pvalues.calibrated_pvalue`): the run score (Nguyen 2017 §7.5.2) and the
    strongest-window score (a regression covering part of the run).  The run fails when their
    Bonferroni-combined p-value is at most ``false_alarm_rate``, the one parameter of the
    decision: the share of normal runs allowed to fail.  A fixed ``threshold`` in the
    calibration (``params.threshold`` set) decides instead.  Counters over their limit (whole
    run or window: above their own normal maximum and ``counter_flag_floor``) are flagged only
    when the run fails (a passing run lists them as ``counters_over_limit``, for the report).

    ``counter_scores`` rank the counters: ``r / (1 + r)`` with ``r`` the strongest
    window's violation ratio over the counter's flag limit (its largest window ratio among the
    normal runs, at least ``counter_flag_floor``); 1/2 at the limit, in [0, 1).  A counter often
    violated in normal runs counts for less than a quiet one violated as much, and a regression
    in part of the run is not diluted by the rest.  (Capping ``r`` at 1 would tie every counter
    over its limit.)
    """
    independent = set(calibration["load_independent"])
    score = top_ratio_mean(ratios["average"], top_fraction=top_fraction, exclude=independent)
    window = top_ratio_mean(ratios["window"], top_fraction=top_fraction, exclude=independent)
    resolution = 1.0 / max(1.0, float(ratios["n"].max()) if len(ratios) else 1.0)
    p_run = pvalues.calibrated_pvalue(score, list(calibration["normal_scores"].values()), resolution=resolution)
    p_window = pvalues.calibrated_pvalue(window, list(calibration["window_scores"].values()), resolution=resolution)
    p = pvalues.combined_pvalue([p_run, p_window])
    if calibration["threshold_from"] == "params" or not np.isfinite(p):
        failed = score > calibration["threshold"]
    else:
        failed = p <= false_alarm_rate
    limit = pd.Series(calibration["counter_normal_max"], dtype=float).reindex(ratios.index).fillna(0.0)
    window_limit = pd.Series(calibration["counter_window_max"], dtype=float).reindex(ratios.index).fillna(0.0)
    over = ratios[((ratios["sum"] > limit.clip(lower=counter_flag_floor))
                   | (ratios["window"] > window_limit.clip(lower=counter_flag_floor)))
                  & ~ratios.index.isin(list(independent))]
    over_limit = list(over.sort_values(["average", "window", "sum"], ascending=False).index)
    verdict = "fail" if failed else "pass"
    r = (ratios["window"] / window_limit.clip(lower=counter_flag_floor)).dropna()
    evidence = r / (1.0 + r)

    def rounded(x: float) -> float | None:
        return round(float(x), 6) if np.isfinite(x) else None
    return {"verdict": verdict, "violation_ratio": round(score, 4), "window_ratio": round(window, 4),
            "p_value": rounded(p), "p_run": rounded(p_run), "p_window": rounded(p_window),
            "false_alarm_rate": false_alarm_rate, "threshold": round(float(calibration["threshold"]), 4),
            "flagged_counters": over_limit if verdict == "fail" else [], "counters_over_limit": over_limit,
            "load_independent_counters": sorted(independent & set(ratios.index)),
            "load_independent_skipped": calibration.get("load_independent_skipped"),
            "counter_scores": {c: round(float(v), 4) for c, v in evidence.items()}}


def chart_series(ratios: pd.DataFrame, limits: Limits, target: pd.DataFrame, *, top: int) -> dict[str, ChartSeries]:
    """Baseline band and target points of the ``top`` counters by average ratio, for the report's plots."""
    out = {}
    for counter in ratios.sort_values(["average", "sum"], ascending=False).index[:top]:
        def col(frame: pd.DataFrame) -> list:
            if counter not in frame.columns:
                return []
            s = frame[counter]
            if limits.scope == "run":
                s = pd.Series(float(s.iloc[0]), index=target.index)
            return [None if pd.isna(x) else round(float(x), 6) for x in s.reindex(target.index)]
        out[counter] = ChartSeries(cl=col(limits.cl), lcl=col(limits.lcl), ucl=col(limits.ucl),
                                   target=[None if pd.isna(x) else round(float(x), 6) for x in target[counter]])
    return out


