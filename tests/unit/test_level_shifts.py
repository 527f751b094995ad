"""Level shifts beyond a series' own course (pipelines/commit_series/level_shifts.py), on series built by hand."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from pipelines.commit_series import level_shifts as ls
from pipelines.commit_series.level_shifts import LevelShiftParams, level_shifts

P = LevelShiftParams()


def test_a_linear_trend_of_800_commits_is_no_change():
    """The level grows by 40 noise sd over 800 commits, smoothly: a constant-level segmentation
    sees a staircase; the local test sees a slope, and nothing is reported."""
    rng = np.random.default_rng(0)
    y = 100 + 0.05 * np.arange(800) + rng.normal(0, 1, 800)
    assert ls.candidates((y - y.mean()) / 1.0, penalty=2, min_segment=5)      # the staircase is there ...
    found = level_shifts(y, P)
    assert found.changes == [] and not found.abstained                      # ... and none of it is a step


def test_a_3_sd_step_in_noise_is_found_where_it_is():
    """Noise of sd 1 around 100, the level 3 higher from commit 400: one change there, of 3 %."""
    rng = np.random.default_rng(0)
    y = 100 + rng.normal(0, 1, 800)
    y[400:] += 3
    found = level_shifts(y, P).changes
    assert len(found) == 1
    assert abs(found[0]["index"] - 400) <= 2
    assert found[0]["magnitude"] == pytest.approx(0.03, abs=0.01)
    assert found[0]["evidence"]["t"] >= found[0]["evidence"]["critical_t"]


def test_a_step_on_a_curved_trend_is_found_and_the_curve_is_not():
    rng = np.random.default_rng(1)
    x = np.arange(500) / 499
    y = 200 + 60 * x * x + rng.normal(0, 1, 500)          # accelerating by 60 sd
    y[300:] -= 8                                          # an 8-sd improvement at 300
    found = level_shifts(y, P).changes
    assert [abs(c["index"] - 300) <= 2 for c in found] == [True]
    assert found[0]["magnitude"] == pytest.approx(-8 / np.median(y[240:300]), abs=0.01)


def test_a_random_walk_is_not_a_string_of_changes():
    """A level that is the sum of its own increments (sd 0.5) under noise of sd 0.5 wanders by
    about 14 increments over 800 commits: no step the walk itself does not explain."""
    for seed in range(3):
        rng = np.random.default_rng(seed)
        y = 100 + np.cumsum(rng.normal(0, 0.5, 800)) + rng.normal(0, 0.5, 800)
        found = level_shifts(y, P)
        assert found.changes == []
        assert found.inflation > 1.2                       # the walk widens the step test beyond chance


def test_the_scan_is_the_step_test_at_every_commit():
    rng = np.random.default_rng(2)
    z = np.cumsum(rng.normal(0, 0.3, 300)) + rng.normal(0, 1, 300)
    scan = ls.scan_t(z, 60)
    assert scan.size == 300 - 120 + 1
    for c in (60, 150, 240):
        assert scan[c - 60] == pytest.approx(ls.step_test(z, c, c - 60, c + 60).t, rel=1e-9)


def test_the_step_test_recovers_a_step_beyond_a_line():
    """y = 1 + 2 x + 5 [x >= 0] plus a small alternating error: the fitted step is 5; with no
    autocorrelation left (the error alternates, so its lag-1 correlation is negative: φ = 0)."""
    i = np.arange(100)
    y = 1 + 2 * (i - 50) / 100 + 5 * (i >= 50) + 0.01 * (-1) ** i
    test = ls.step_test(y, 50, 0, 100)
    assert test.delta == pytest.approx(5, abs=0.01) and test.phi == 0.0 and abs(test.t) > 100
    assert ls.step_test(y, 50, 47, 100) is None          # 3 values before: too few to tell


def test_the_critical_value_is_bonferroni_over_the_commits():
    assert ls.critical_t(500, 0.001, dof=30) == pytest.approx(stats.t.isf(0.001 / 1000, 30))


def test_a_series_too_irregular_to_call_says_so():
    """A cycle of 8 noise sd and 200 commits: the step test spreads more than 4 times wider than
    chance over the series, so nothing is called on it."""
    rng = np.random.default_rng(0)
    y = 100 + 8 * np.sin(2 * np.pi * np.arange(800) / 200) + rng.normal(0, 1, 800)
    found = level_shifts(y, P)
    assert found.abstained and found.changes == [] and found.inflation >= P.abstain_inflation
    assert not level_shifts(y, LevelShiftParams(abstain_inflation=100)).abstained


def test_flat_and_short_series_have_no_change():
    assert level_shifts(np.full(300, 7.0), P).changes == []
    assert level_shifts(np.array([1.0, 2.0, 3.0]), P).changes == []


def test_a_series_of_twenty_jumps_gets_twenty():
    """Twenty steps of 5 noise sd, alternating up and down, every 25 commits of white noise: each is
    found within 2 commits of where it is, and nothing else (the backward selection takes out all
    candidates' levels before it measures how wide the series' own course spreads the test)."""
    rng = np.random.default_rng(4)
    at = [25 * (k + 1) for k in range(20)]
    level = np.zeros(525)
    for k, c in enumerate(at):
        level[c:] += 5.0 if k % 2 == 0 else -5.0
    found = [c["index"] for c in level_shifts(100.0 + level + rng.normal(0, 1, 525), LevelShiftParams()).changes]
    assert len(found) == 20 and all(abs(f - t) <= 2 for f, t in zip(sorted(found), at))


def test_a_step_beside_a_weekly_cycle_is_found_and_the_cycle_is_not():
    """A cycle of period 14 and amplitude 2 sd around a 5-sd step at commit 180 of 400: the cycle is
    taken out (its period in the evidence) and the step found; the same cycle without the step, and
    a slow wander of the level that one period follows for a while, are no change."""
    rng = np.random.default_rng(9)
    x = np.arange(400)
    cycle = 2.0 * np.sin(2 * np.pi * x / 14.0)
    step = np.where(x >= 180, 5.0, 0.0)
    (found,) = level_shifts(100 + cycle + step + rng.normal(0, 1, 400), LevelShiftParams()).changes
    assert abs(found["index"] - 180) <= 2 and found["evidence"]["cycle_period"] == pytest.approx(14.0, abs=0.3)
    assert level_shifts(100 + cycle + rng.normal(0, 1, 400), LevelShiftParams()).changes == []
    wander = 3.0 * np.sin(2 * np.pi * x / 380.0) + 2.0 * np.sin(2 * np.pi * x / 170.0 + 1.0)
    assert level_shifts(100 + wander + rng.normal(0, 1, 400), LevelShiftParams()).changes == []


def test_the_cycle_search_needs_a_cycle_that_repeats():
    """A cycle found in one half predicts the other (``repeats``): a sinusoid does; noise whose best
    period explains a little by chance does not clear the F test over the periods tried."""
    rng = np.random.default_rng(2)
    x = np.arange(300)
    period, course = ls.seasonal_cycle(1.5 * np.sin(2 * np.pi * x / 30.0) + rng.normal(0, 1, 300), 1e-4)
    assert period == pytest.approx(30.0, abs=0.5) and np.corrcoef(course, np.sin(2 * np.pi * x / 30.0))[0, 1] > 0.9
    assert ls.seasonal_cycle(rng.normal(0, 1, 300), 1e-4) is None
    assert ls.repeats(np.sin(2 * np.pi * x / 30.0) + rng.normal(0, 0.5, 300), 30.0, 1e-4)
