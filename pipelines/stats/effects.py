"""Practical significance: is a counter's change large enough to matter?

A detector says whether a change is *unusual* — beyond what the history's normal runs do.  That
is not enough: over a day, a pod's memory creeps up 1.6 %, real and unusual, and no performance
engineer calls it a regression.  Tools people use put a floor under the size of a change
(Apache Otava's ``min_magnitude``, Perfherder's alert threshold, Conbench's threshold): a counter
counts as regressed only when its change is also at least ``min_effect_pct`` of its level.

The change is the median's: the run's median against the level of its reference runs (the
median of their run medians), or, when it moved further, the median of the run's strongest
window (``window_share`` of its intervals, at least ``min_window``), so that a regression in
part of a run is measured where it is.  It is relative to the level, or, for a counter whose
level is near zero (idle most of the time), to ``floor_share`` of its usual peak (the median of
the reference runs' 95th percentiles of ``|x|``): a queue that idles at 0 and peaks at 4 is
measured against 2, not against 0.  A counter that never moved from 0 in the references and
moves now has no floor: any change is large.  Pure; the thresholds are :class:`Significance`.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pipelines import config


@dataclass(frozen=True)
class Significance:
    """The ``significance`` params block: when a change is large enough to matter (above)."""

    min_effect_pct: float
    floor_share: float
    window_share: float
    min_window: int

    @classmethod
    def from_params(cls, block: Mapping[str, Any]) -> "Significance":
        """The typed block of ``params.yaml: significance`` (checked by ``params_schema``)."""
        return cls(min_effect_pct=float(block["min_effect_pct"]), floor_share=float(block["floor_share"]),
                   window_share=float(block["window_share"]), min_window=int(block["min_window"]))

    @classmethod
    def load(cls) -> "Significance":
        """The project's ``significance`` block (``config.load_params``), typed: the one loading
        site of the stages, the compare pages and the benches."""
        return cls.from_params(config.load_params("significance"))


def window_length(n_intervals: int, *, window_share: float, min_window: int) -> int:
    """The strongest window's length: ``window_share`` of the intervals, at least ``min_window``,
    at most all of them."""
    return max(1, min(n_intervals, max(int(min_window), math.ceil(window_share * n_intervals))))


def strongest_window_median(values: np.ndarray, level: float, width: int) -> float:
    """The median of the ``width`` consecutive intervals whose median lies furthest from ``level``
    (missing intervals left out); NaN when no window has a value."""
    x = np.asarray(values, dtype=float)
    if x.size == 0 or width <= 0:
        return float("nan")
    width = min(width, x.size)
    if np.isfinite(x).all():
        # a running median (pandas' skiplist, O(n log w)): the same floats as the median of every
        # window, whose copy and partition per window cost O(n w), and numpy's nanmedian of rows
        # shorter than 600 goes through masked arrays (10 s per 2,000-counter run at w = 384)
        medians = pd.Series(x).rolling(width).median().to_numpy()[width - 1:]
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)      # an all-missing window's median is NaN
            medians = np.nanmedian(np.lib.stride_tricks.sliding_window_view(x, width), axis=1)
    if not np.isfinite(medians).any():
        return float("nan")
    return float(medians[np.nanargmax(np.abs(medians - level))])


def relative_change(target: float, level: float, peak: float, *, floor_share: float) -> float:
    """``(target - level) / max(|level|, floor_share * peak)``; ``±inf`` when that scale is 0 and the
    target moved, 0 when it did not, NaN when either value is missing."""
    if not (np.isfinite(target) and np.isfinite(level)):
        return float("nan")
    scale = max(abs(level), floor_share * abs(peak) if np.isfinite(peak) else 0.0)
    delta = target - level
    if scale == 0.0:
        return 0.0 if delta == 0.0 else math.copysign(math.inf, delta)
    return delta / scale


def effect_sizes(target: pd.DataFrame, levels: pd.Series, peaks: pd.Series, *, window_share: float,
                 min_window: int, floor_share: float) -> dict[str, float]:
    """Per counter of ``target`` with a reference level: its signed relative change, the larger
    in size of the whole run's median and of its strongest window's (:func:`relative_change`).

    ``levels`` and ``peaks`` are the reference runs' level (median of their medians) and usual
    peak (median of their 95th percentiles of ``|x|``) per counter."""
    width = window_length(len(target), window_share=window_share, min_window=min_window)
    out: dict[str, float] = {}
    for c in target.columns:
        if c not in levels.index or not np.isfinite(levels[c]):
            continue
        values = target[c].to_numpy(dtype=float)
        if not np.isfinite(values).any():
            continue
        level, peak = float(levels[c]), float(peaks.get(c, np.nan))
        whole = relative_change(float(np.nanmedian(values)), level, peak, floor_share=floor_share)
        window = relative_change(strongest_window_median(values, level, width), level, peak, floor_share=floor_share)
        out[c] = whole if not np.isfinite(window) or abs(whole) >= abs(window) else window
    return out


def is_significant(change: float | None, min_effect_pct: float) -> bool:
    """Whether a relative change is large enough to matter (a counter with no measured change is
    not set aside: nothing says it is small)."""
    if change is None or (isinstance(change, float) and math.isnan(change)):
        return True
    return abs(change) * 100.0 >= min_effect_pct


def measured_and_mattering(counters: list[str], effects: dict[str, float], min_effect_pct: float) -> list[str]:
    """The counters whose change was measured and matters, in order: :func:`split_by_effect`'s kept
    ones, less those with no measured change (which it keeps, as it cannot set them aside)."""
    return split_by_effect([c for c in counters if effects.get(c) is not None], effects, min_effect_pct)[0]


def split_by_effect(counters: list[str], effects: dict[str, float], min_effect_pct: float
                    ) -> tuple[list[str], dict[str, float]]:
    """(the counters whose change matters, in order; the others with their change in %)."""
    kept, small = [], {}
    for c in counters:
        change = effects.get(c)
        if change is None or is_significant(change, min_effect_pct):
            kept.append(c)
        else:
            small[c] = round(100.0 * change, 2)
    return kept, small
