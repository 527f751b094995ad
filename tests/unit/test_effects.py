"""Practical significance, by hand: a change counts only when it is large enough to matter."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from pipelines.stats import effects

KW = dict(window_share=0.2, min_window=3, floor_share=0.5)


def test_a_one_percent_change_is_set_aside_and_a_ten_percent_change_kept():
    # memory at 507 MiB in the references; this run's intervals 512 (1 %) or 557.7 (10 %) flat
    levels, peaks = pd.Series({"pod.memory_mi": 507.0}), pd.Series({"pod.memory_mi": 510.0})
    small = effects.effect_sizes(pd.DataFrame({"pod.memory_mi": [512.07] * 20}), levels, peaks, **KW)
    large = effects.effect_sizes(pd.DataFrame({"pod.memory_mi": [557.7] * 20}), levels, peaks, **KW)
    assert small["pod.memory_mi"] == pytest.approx(5.07 / 507)          # +1.0 %
    assert large["pod.memory_mi"] == pytest.approx(50.7 / 507)          # +10.0 %
    kept, aside = effects.split_by_effect(["pod.memory_mi"], small, 5.0)
    assert kept == [] and aside == {"pod.memory_mi": 1.0}
    assert effects.split_by_effect(["pod.memory_mi"], large, 5.0) == (["pod.memory_mi"], {})


def test_a_change_in_part_of_the_run_is_measured_in_its_strongest_window():
    # 10 intervals at level 100, four of them at 130 (a fault in 40 % of the run): the run's median is
    # still 100, the strongest window of max(3, ceil(0.2 x 10)) = 3 intervals has median 130: +30 %
    values = [100.0] * 3 + [130.0] * 4 + [100.0] * 3
    change = effects.effect_sizes(pd.DataFrame({"c": values}), pd.Series({"c": 100.0}), pd.Series({"c": 101.0}), **KW)
    assert effects.window_length(10, window_share=0.2, min_window=3) == 3
    assert change["c"] == pytest.approx(0.30)
    # a drop further than the rise wins, with its sign
    values = [100.0] * 3 + [130.0] * 3 + [40.0] * 3 + [100.0]
    change = effects.effect_sizes(pd.DataFrame({"c": values}), pd.Series({"c": 100.0}), pd.Series({"c": 101.0}), **KW)
    assert change["c"] == pytest.approx(-0.60)


def test_a_counter_idling_near_zero_is_measured_against_half_its_usual_peak():
    # a queue whose level is 0.2 and usual peak 4: the scale is max(0.2, 0.5 x 4) = 2, so a
    # move to 0.3 is +5 %, not +50 %
    assert effects.relative_change(0.3, 0.2, 4.0, floor_share=0.5) == pytest.approx(0.1 / 2.0)
    # a level far above half its peak is its own scale
    assert effects.relative_change(110.0, 100.0, 120.0, floor_share=0.5) == pytest.approx(0.10)
    # a counter that never moved from 0 and moves now has no floor; one that stays at 0 did not change
    assert effects.relative_change(0.01, 0.0, 0.0, floor_share=0.5) == math.inf
    assert effects.relative_change(0.0, 0.0, 0.0, floor_share=0.5) == 0.0
    assert math.isnan(effects.relative_change(float("nan"), 1.0, 1.0, floor_share=0.5))


def test_what_cannot_be_measured_is_not_set_aside():
    assert effects.is_significant(None, 5.0) and effects.is_significant(float("nan"), 5.0)
    assert effects.is_significant(math.inf, 5.0) and effects.is_significant(-0.05, 5.0)
    assert not effects.is_significant(0.0499, 5.0)
    # a counter the references lack, or that the run never recorded, gets no effect
    frame = pd.DataFrame({"a": [1.0, 1.0, 1.0], "b": [np.nan] * 3, "new": [5.0] * 3})
    out = effects.effect_sizes(frame, pd.Series({"a": 1.0, "b": 2.0}), pd.Series({"a": 1.0, "b": 2.0}), **KW)
    assert out == {"a": 0.0}


def _every_window(values: np.ndarray, level: float, width: int) -> float:
    """The strongest window written out: each window's median in turn, the furthest from ``level`` (the first of equals)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)          # an all-missing window's median is NaN
        medians = [float(np.nanmedian(values[i:i + width])) for i in range(len(values) - width + 1)]
    distances = [abs(m - level) for m in medians]
    return medians[distances.index(max(distances))]


@pytest.mark.parametrize("width", [1, 2, 3, 8, 25, 60])
def test_the_strongest_window_is_the_window_by_window_median_to_the_last_bit(width):
    rng = np.random.default_rng(width)
    for decimals in (0, 2, 9):                          # coarse values: equal medians, ties for the furthest
        values = np.round(rng.normal(100.0, 10.0, 60), decimals)
        values[20:35] += 25.0
        assert effects.strongest_window_median(values, 100.0, width) == _every_window(values, 100.0, width)
    gaps = np.round(rng.normal(100.0, 10.0, 60), 1)
    gaps[[3, 4, 40]] = np.nan                           # missing intervals: left out of their windows
    assert effects.strongest_window_median(gaps, 100.0, width) == _every_window(gaps, 100.0, width)


def test_the_significance_block_is_read_once_into_its_typed_record():
    """params.yaml gives whole numbers where floats are meant (``min_effect_pct: 5``): the record
    holds each threshold as its type, and the run against itself takes its share of them."""
    from pipelines.detectors.within_run import windows as within_run

    sig = effects.Significance.from_params({"min_effect_pct": 5, "floor_share": 0.5, "window_share": 0.2,
                                            "min_window": 3.0})
    assert sig == effects.Significance(min_effect_pct=5.0, floor_share=0.5, window_share=0.2, min_window=3)
    assert isinstance(sig.min_effect_pct, float) and isinstance(sig.min_window, int)
    assert within_run.contrast_params(sig) == {"window_share": 0.2, "min_window": 3}
    assert within_run.null_params(sig) == {"min_effect": 0.05, "floor_share": 0.5}
    with pytest.raises(KeyError):
        effects.Significance.from_params({"min_effect_pct": 5})
