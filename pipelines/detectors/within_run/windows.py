"""within_run: the run against itself — a change inside the run, whatever the lab.

The other detectors compare a target with other runs, so everything that moves between runs for
reasons that are not regressions (another lab, another day, pods placed on other nodes, memory
that creeps over hours) shows in them as a change, and their p-values are only as good as the
null they are judged against.  A fault that starts or ends inside the run (an injected
fault, a leak that begins, a queue that builds) also shows *within* the run: part of the run
differs from the rest of it.  That contrast is the same in any lab, so its null — the same
contrast in the history's normal runs — holds for a run of a lab the history has never seen.

Nguyen 2017 §3.2 (seed 004) charts a target against a baseline's limits and also looks at the
strongest window (``charts.window_ratio``); here the baseline is the rest of the run itself:

* **the contrast** of a counter (:func:`window_contrasts`, :func:`change_of`): the median of its
  strongest window — ``window_share`` of the run's intervals, at least ``min_window``, the
  consecutive intervals whose median lies furthest from the run's median (:func:`window_starts`)
  — against the median of the rest of the run, relative to that rest's level, or, for a counter
  idling near zero, to ``floor_share`` of its usual peak (the rest's 95th percentile of ``|x|``;
  for a rest that never left 0, the largest the normal runs showed, so that a counter at 0 that
  ticks to its smallest step in one window — as it does in some normal runs — is not an infinite
  change: ``effects.relative_change``);
* **its limit**: the largest contrast of that counter among the history's normal runs — a
  counter whose normal runs wander within the run (a periodic job, a garbage collector) needs
  a larger contrast to count than a quiet one;
* **the run score** (:func:`largest_ratio`): the largest contrast over its limit, among the
  counters whose contrast also matters (at least ``min_effect``, ``significance.min_effect_pct``:
  practical significance, as every detector's flags); 0 when no counter moved that much;
* **the p-value**: the score against the same score of each normal run, its limits learned from
  the other normal runs (leave-one-out), by ``pvalues.calibrated_pvalue``.

A run that is changed throughout (a whole-run regression, another lab) has no contrast: this
detector cannot see it and says so with a high p-value; the detectors that compare runs do.
Pure: frames and dicts in, dicts out.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import pandas as pd

from pipelines.stats import effects, pvalues
from pipelines.systems.counter_kinds import counter_metric
from pipelines.detectors.charts.files import LimitsRecord, WindowChange, WithinRunCalibration, WithinRunResult

CHANGE_CAP = 1000.0       # |contrast| at most 100,000 %: a counter that left exactly 0 is large, not infinite
RESOLUTION = 0.01         # run scores closer than this are not told apart (the p-values' log scale)
LIMITS_BY = ("counter", "metric")   # a counter's limit: its own largest normal change, or its metric's in any component
FORWARD_MIN = 5           # forward in time, a normal run is judged once this many runs came before it


@dataclass(frozen=True)
class Contrast:
    """One counter's strongest window against the rest of its run: the window (intervals ``start``
    .. ``start + width - 1``), its median, the rest's median and the rest's 95th percentile of
    ``|x|`` (``rest_peak``)."""
    start: int
    width: int
    window_median: float
    rest_median: float
    rest_peak: float


def change_of(contrast: Contrast, peak: float | None, *, floor_share: float) -> float:
    """The signed relative change of a :class:`Contrast` (0.10 = +10 %): window against rest, over
    the rest's level or ``floor_share`` of its usual peak (the rest's own; ``peak``, the normal
    runs', when the rest never left 0), capped at ``CHANGE_CAP``."""
    usual = contrast.rest_peak if contrast.rest_peak > 0 else \
        (peak if peak is not None and np.isfinite(peak) else 0.0)
    change = effects.relative_change(contrast.window_median, contrast.rest_median, usual, floor_share=floor_share)
    return float(np.clip(change, -CHANGE_CAP, CHANGE_CAP))


def window_contrasts(frame: pd.DataFrame, *, window_share: float, min_window: int) -> dict[str, Contrast]:
    """Every counter's :class:`Contrast` (see the module docstring).  A counter needs at least
    ``min_window`` values outside its window; a run shorter than one window and ``min_window``
    more intervals has no contrast at all (empty)."""
    n = len(frame)
    width = effects.window_length(n, window_share=window_share, min_window=min_window)
    if n < width + min_window or frame.shape[1] == 0:
        return {}
    x = np.array(frame.to_numpy(dtype=float), copy=True)      # never a view of the caller's frame
    x[~np.isfinite(x)] = np.nan
    starts = window_starts(n, width)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)          # a counter with no value has no median
        overall = median_of(x)
        windows = np.stack([median_of(x[k:k + width]) for k in starts])
        means = np.stack([np.nanmean(x[k:k + width], axis=0) for k in starts])
    seen = np.stack([np.isfinite(x[k:k + width]).sum(axis=0) for k in starts])
    windows[seen < math.ceil(width / 2)] = np.nan                 # a window needs half its intervals
    distance = np.abs(windows - overall)
    distance[~np.isfinite(distance)] = -1.0
    # windows whose medians tie (a window half over the change) are told apart by their means
    tied = distance >= distance.max(axis=0) - 1e-12 * (1.0 + np.abs(np.nan_to_num(overall)))
    best = np.argmax(np.where(tied, np.nan_to_num(np.abs(means - overall), nan=0.0), -1.0), axis=0)
    out: dict[str, Contrast] = {}
    for i in np.unique(best):                 # the counters whose strongest window starts at starts[i], at once
        k = starts[int(i)]
        cols = np.flatnonzero((best == i) & (distance[i] >= 0) & np.isfinite(windows[i]))
        rest = np.delete(x[:, cols], np.s_[k:k + width], axis=0)
        counted = np.isfinite(rest).sum(axis=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            levels = median_of(rest)
            peaks = np.nanquantile(np.abs(rest), 0.95, axis=0) if np.isnan(rest).any() else \
                np.quantile(np.abs(rest), 0.95, axis=0)
        for j, col in enumerate(cols):
            if counted[j] < min_window:
                continue
            out[str(frame.columns[col])] = Contrast(start=k, width=width, window_median=float(windows[i, col]),
                                                    rest_median=float(levels[j]), rest_peak=float(peaks[j]))
    return {str(c): out[str(c)] for c in frame.columns if str(c) in out}      # in the frame's order


def median_of(block: np.ndarray) -> np.ndarray:
    """Each column's median, missing values left out (numpy's plain median when none is missing:
    many times faster than its NaN-aware one on long blocks)."""
    return np.nanmedian(block, axis=0) if np.isnan(block).any() else np.median(block, axis=0)


def window_starts(n: int, width: int) -> list[int]:
    """Where the windows of ``width`` intervals start: every interval for a short window, every
    quarter of a window for a long one (an 8-hour run at 15 s has 1,920 intervals and windows of
    384: 21 windows instead of 1,537, the strongest found within a quarter of its width), and
    always the last one."""
    step = max(1, width // 4)
    starts = list(range(0, n - width + 1, step))
    return starts if starts[-1] == n - width else [*starts, n - width]


class ContrastParams(TypedDict):
    """The keyword arguments of :func:`window_contrasts`: a run's window."""

    window_share: float
    min_window: int


class NullParams(TypedDict):
    """The keyword arguments of :func:`calibrate` from the ``significance`` block."""

    min_effect: float
    floor_share: float


def contrast_params(significance: effects.Significance) -> ContrastParams:
    """The keyword arguments of :func:`window_contrasts` from the ``significance`` params block (one
    definition of a run's window for the effects and this detector)."""
    return {"window_share": significance.window_share, "min_window": significance.min_window}


def null_params(significance: effects.Significance) -> NullParams:
    """The keyword arguments of :func:`calibrate` from the ``significance`` params block:
    ``min_effect_pct`` as a share, and ``floor_share``."""
    return {"min_effect": significance.min_effect_pct / 100.0, "floor_share": significance.floor_share}


def changes_of(contrasts: dict[str, Contrast], peaks: dict[str, float], *, floor_share: float) -> dict[str, float]:
    """Counter -> signed change (:func:`change_of`, ``peaks`` the normal runs' usual peaks)."""
    return {c: change_of(v, peaks.get(c), floor_share=floor_share) for c, v in contrasts.items()}


def usual_peaks(contrasts: dict[str, dict[str, Contrast]]) -> dict[str, float]:
    """Per counter, the largest ``rest_peak`` of the normal runs ``contrasts``: how high the counter
    goes in some normal run (a counter that idles at 0 and ticks to 0.025 % now and then has a
    peak of 0.025; one that never left 0 has none)."""
    peaks: dict[str, float] = {}
    for run in contrasts.values():
        for c, v in run.items():
            peaks[c] = max(peaks.get(c, 0.0), v.rest_peak)
    return {c: round(v, 9) for c, v in sorted(peaks.items())}


def counter_limits(changes: dict[str, dict[str, float]]) -> dict[str, list]:
    """Per counter, over the normal runs ``changes`` (run -> counter -> change): the largest
    ``|change|``, the run that holds it and the second largest — enough to give the limit
    without any one run (:func:`limits_without`)."""
    top: dict[str, list] = {}
    for run in sorted(changes):
        for counter, change in changes[run].items():
            a = abs(change)
            best = top.get(counter)
            if best is None:
                top[counter] = [a, run, 0.0]
            elif a > best[0]:
                top[counter] = [a, run, best[0]]
            elif a > best[2]:
                best[2] = a
    return top


def limits_without(limits: dict[str, list], run_id: str | None) -> dict[str, float]:
    """Each counter's limit: its largest normal ``|change|``, without ``run_id``'s own."""
    return {c: (second if holder == run_id else largest) for c, (largest, holder, second) in limits.items()}


def counter_ratios(changes: dict[str, float], limits: dict[str, float], *, min_effect: float) -> dict[str, float]:
    """Per counter whose change matters (``|change| >= min_effect``): ``|change|`` over its limit,
    the limit never below ``min_effect`` (a counter the normal runs never moved, or a counter they
    do not have, is measured against the smallest change that matters)."""
    return {c: abs(v) / max(limits.get(c, 0.0), min_effect) for c, v in changes.items() if abs(v) >= min_effect}


def largest_ratio(changes: dict[str, float], limits: dict[str, float], *, min_effect: float) -> float:
    """The largest :func:`counter_ratios` of the run; 0 when no counter's change matters."""
    return max(counter_ratios(changes, limits, min_effect=min_effect).values(), default=0.0)


def metric_maxima(changes: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """run -> counter -> change  =>  run -> metric -> the largest ``|change|`` of that metric in the run,
    over its components (``counter_kinds.counter_metric``)."""
    out: dict[str, dict[str, float]] = {}
    for run, counters in changes.items():
        largest: dict[str, float] = {}
        for counter, change in counters.items():
            metric = counter_metric(counter)
            largest[metric] = max(largest.get(metric, 0.0), abs(change))
        out[run] = largest
    return out


def run_limits(calibration: WithinRunCalibration, changes: dict[str, float], leave_out: str | None,
               limits_by: str) -> dict[str, float]:
    """Each counter's limit (:func:`limits_without` ``leave_out``): its own largest normal change
    (``counter``), or the largest normal change of its metric in any component (``metric``)."""
    if limits_by == "counter":
        return limits_without(calibration["limits"], leave_out)
    metric = limits_without(calibration["metric_limits"], leave_out)
    return {c: metric.get(counter_metric(c), 0.0) for c in changes}


def forward_failures(changes: dict[str, dict[str, float]], runs: list[str], limits_by: str, *, min_effect: float,
                     false_alarm_rate: float) -> dict[str, bool]:
    """Each normal run from the ``FORWARD_MIN``-th on (``runs`` oldest first) judged as a later target
    is: by the limits and the leave-one-out null of the runs before it alone; run -> failed.  A
    variant whose limits hold within the history but not forward in time (a slow drift the
    leave-one-out null absorbs) shows it here."""
    keyed = {r: changes[r] for r in runs} if limits_by == "counter" else metric_maxima({r: changes[r] for r in runs})
    names = sorted({k for r in runs for k in keyed[r]})
    at = {k: i for i, k in enumerate(names)}
    size = np.zeros((len(runs), len(names)))            # |change| per run and key (0: absent, never a limit)
    for i, r in enumerate(runs):
        for k, v in keyed[r].items():
            size[i, at[k]] = abs(v)
    own = [np.array([at[counter_metric(c)] if limits_by == "metric" else at[c] for c in changes[r]], dtype=int)
           for r in runs]
    magnitude = [np.abs(np.array(list(changes[r].values()), dtype=float)) for r in runs]

    def score(i: int, limits: np.ndarray) -> float:
        values, limit = magnitude[i], np.maximum(limits[own[i]] if len(own[i]) else np.zeros(0), min_effect)
        mattered = values >= min_effect
        return float(np.max(values[mattered] / limit[mattered])) if mattered.any() else 0.0

    out: dict[str, bool] = {}
    for i in range(FORWARD_MIN, len(runs)):
        before = size[:i]
        order = np.argsort(-before, axis=0, kind="stable")
        top, second = before[order[0], np.arange(len(names))], before[order[1], np.arange(len(names))]
        null = [score(q, np.where(order[0] == q, second, top)) for q in range(i)]
        p = pvalues.calibrated_pvalue(score(i, top), null, resolution=RESOLUTION)
        out[runs[i]] = bool(p <= false_alarm_rate)
    return out


def calibrate(contrasts: dict[str, dict[str, Contrast]], *, min_effect: float, floor_share: float,
              false_alarm_rate: float | None = None) -> WithinRunCalibration:
    """The null of the normal runs ``contrasts`` (run -> counter -> :class:`Contrast`, oldest first):
    each counter's usual peak (:func:`usual_peaks`), its limits (:func:`counter_limits`) and those of
    its metric over the components (``metric_limits``), and under each (``LIMITS_BY``) each run's
    score against the limits of the others (``scores``, their p-values ``normal_pvalues_by``: the
    record of its false alarms) and, given the ``false_alarm_rate``, each
    later run judged by the runs before it (``forward``, :func:`forward_failures`).  The limits
    used are the counter's own (``limits_by``) until :func:`choose_limits` reads the record."""
    peaks = usual_peaks(contrasts)
    changes = {r: changes_of(v, peaks, floor_share=floor_share) for r, v in contrasts.items()}
    limits = counter_limits(changes)
    calibration: WithinRunCalibration = {"peaks": peaks, "limits": limits, "metric_limits": counter_limits(metric_maxima(changes)),
                                   "min_effect": min_effect, "floor_share": floor_share}
    scores = {by: {r: round(largest_ratio(changes[r], run_limits(calibration, changes[r], r, by), min_effect=min_effect), 6)
                   for r in sorted(changes)} for by in LIMITS_BY}
    forward = {} if false_alarm_rate is None else \
        {by: forward_failures(changes, list(contrasts), by, min_effect=min_effect, false_alarm_rate=false_alarm_rate)
         for by in LIMITS_BY}
    pvalues_by = {by: normal_pvalues(scores[by]) for by in LIMITS_BY}
    return {**calibration, "scores": scores, "normal_pvalues_by": pvalues_by, "forward": forward,
            "limits_by": "counter", "normal_scores": scores["counter"], "normal_pvalues": pvalues_by["counter"]}


def choose_limits(calibration: WithinRunCalibration, fault_pvalues: dict[str, dict[str, float]], *,
                  false_alarm_rate: float, leave_out: str | None = None) -> WithinRunCalibration:
    """The limits this system's record supports (``fault_pvalues``: limits -> verified fault -> its
    p-value; ``leave_out``: a run judged in leave-one-out, whose own verdict never counts).  A
    counter's metric in every component sets its limit instead of the counter alone when, on the
    history, that catches more faults net of the normal runs it fails (each judged by the others)
    *and* fails no more normal runs forward in time (:func:`forward_failures`): a system whose
    requests time out now here, now there (TrainTicket) has normal runs with one wild latency each,
    in whichever service, and a target with one more must not fail for it.  Otherwise, and without
    a forward record, each counter's own.  The calibration with ``limits_by``, its ``normal_scores``,
    ``normal_pvalues`` and ``fault_pvalues`` those of the chosen limits, and the record of each
    (``limits_record``)."""
    rec: dict[str, LimitsRecord] = {}
    for by in LIMITS_BY:
        normal = {r: p for r, p in calibration["normal_pvalues_by"][by].items() if r != leave_out}
        faults = {r: p for r, p in (fault_pvalues.get(by) or {}).items() if r != leave_out}
        forward = {r: f for r, f in (calibration.get("forward") or {}).get(by, {}).items() if r != leave_out}
        rec[by] = {"normal_failed": sum(p <= false_alarm_rate for p in normal.values()), "normal_runs": len(normal),
                   "faults_caught": sum(p <= false_alarm_rate for p in faults.values()), "faults": len(faults),
                   "forward_failed": sum(forward.values()), "forward_judged": len(forward)}
    own, metric = rec["counter"], rec["metric"]
    better = metric["faults_caught"] - metric["normal_failed"] > own["faults_caught"] - own["normal_failed"]
    holds = bool(calibration.get("forward")) and metric["forward_failed"] <= own["forward_failed"]
    by = "metric" if better and holds else "counter"
    return {**calibration, "limits_by": by, "normal_scores": calibration["scores"][by],
            "normal_pvalues": calibration["normal_pvalues_by"][by],
            "fault_pvalues": dict(fault_pvalues.get(by) or {}), "limits_record": rec}


def normal_pvalues(normal_scores: dict[str, float]) -> dict[str, float]:
    """Each normal run's p-value against the others' scores, as :func:`judge` computes a run's (its
    record's false alarms, ``record``)."""
    return pvalues.loo_pvalues(normal_scores, lambda s, null: pvalues.calibrated_pvalue(s, null, resolution=RESOLUTION))


def judge(contrasts: dict[str, Contrast], calibration: WithinRunCalibration, *, false_alarm_rate: float,
          leave_out: str | None = None, top: int = 20) -> WithinRunResult:
    """A run's within-run evidence against ``calibration`` (:func:`calibrate`, its ``limits_by``;
    ``leave_out``: the run is one of its normal runs, judged by the others).  The verdict fails at
    ``p <= false_alarm_rate``; the flagged counters are those beyond their limit (ratio > 1) whose
    change matters, most extreme first, with their windows (``changes``, the ``top`` first);
    ``counter_scores`` are ``r / (1 + r)`` of those ratios; ``limits_p_values`` the run's p-value
    under each of ``LIMITS_BY`` (the record of a verified fault, :func:`choose_limits`).  No verdict
    with fewer than 2 normal runs to calibrate on, or a run too short to contrast."""
    min_effect = float(calibration["min_effect"])
    by = calibration["limits_by"]
    nulls = {b: [v for r, v in normal.items() if r != leave_out] for b, normal in calibration["scores"].items()}
    null = nulls[by]
    out: WithinRunResult = {"verdict": None, "score": None, "p_value": None, "normal_runs": len(null),
                           "flagged_counters": [], "counter_scores": {}, "changes": {}, "limits_by": by}
    if len(null) < 2:
        return {**out, "reason": f"{len(null)} normal run(s) to calibrate on (2 needed)"}
    if not contrasts:
        return {**out, "reason": "the run is too short to compare a window of it with the rest"}
    changes = changes_of(contrasts, calibration["peaks"], floor_share=float(calibration["floor_share"]))
    ratios_by = {b: counter_ratios(changes, run_limits(calibration, changes, leave_out, b), min_effect=min_effect)
                 for b in nulls}
    p_by = {b: round(float(pvalues.calibrated_pvalue(max(r.values(), default=0.0), nulls[b], resolution=RESOLUTION)), 6)
            for b, r in ratios_by.items()}
    ratios = ratios_by[by]
    score = max(ratios.values(), default=0.0)
    failed = bool(p_by[by] <= false_alarm_rate)
    beyond = sorted((c for c, r in ratios.items() if r > 1.0), key=lambda c: (-ratios[c], c))
    shown: dict[str, WindowChange] = {c: {"change_pct": round(100.0 * changes[c], 2), "ratio": round(ratios[c], 4),
                 "window": [contrasts[c].start, contrasts[c].start + contrasts[c].width - 1],
                 "window_median": round(contrasts[c].window_median, 6), "rest_median": round(contrasts[c].rest_median, 6)}
             for c in beyond[:top]}
    return {**out, "verdict": "fail" if failed else "pass", "score": round(score, 4), "p_value": p_by[by],
            "false_alarm_rate": false_alarm_rate, "flagged_counters": beyond if failed else [],
            "counters_beyond_limit": beyond, "changes": shown,
            "counter_scores": {c: round(r / (1.0 + r), 4) for c, r in sorted(ratios.items())},
            "limits_p_values": p_by}
