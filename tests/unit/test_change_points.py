"""PELT on one value per commit (pipelines/commit_series/change_points.py): the noise scale, the exact
search, the cleaning, and a null that autocorrelated series respect."""
from __future__ import annotations

import math

import numpy as np
import pytest

from pipelines.commit_series import change_points
from pipelines.commit_series import series as commit_series
from pipelines.simulators.commitsim import _ar1

KW = {"penalty": 8.0, "min_segment": 5, "outlier_sd": 5.0, "min_magnitude": 0.0, "variance_ratio": 2.0}


def test_robust_sd_of_first_differences_by_hand():
    # differences 1, 2, 3, 4: median 2.5, absolute deviations 1.5, 0.5, 0.5, 1.5: MAD 1
    assert change_points.robust_sd(np.array([0.0, 1.0, 3.0, 6.0, 10.0])) == pytest.approx(1.4826 / math.sqrt(2))
    # a level shift is one difference among many: it does not move the scale
    steady = np.tile([0.0, 1.0], 50)
    assert change_points.robust_sd(steady) == change_points.robust_sd(steady + np.r_[np.zeros(50), np.full(50, 30.0)])


def _exact(z: np.ndarray, penalty: float, size: int, floor: float = 1e-2) -> list[int]:
    """Optimal partitioning without pruning (Jackson et al. 2005): the reference PELT must equal."""
    n, pen = z.size, penalty * math.log(z.size)

    def cost(a: int, b: int) -> float:
        seg = z[a:b]
        return (b - a) * math.log(max(float(seg.var()), floor))
    best, last = [-pen] + [math.inf] * n, [0] * (n + 1)
    for t in range(size, n + 1):
        for s in [0, *range(size, t - size + 1)]:
            if t - s >= size and best[s] + cost(s, t) + pen < best[t]:
                best[t], last[t] = best[s] + cost(s, t) + pen, s
    out, t = [], n
    while t > 0:
        t = last[t]
        if t > 0:
            out.append(t)
    return sorted(out)


@pytest.mark.parametrize("seed", range(6))
def test_pelt_finds_the_exact_optimum(seed):
    rng = np.random.default_rng(seed)
    z = np.r_[rng.normal(0, 1, 25), rng.normal(2.5, 1, 20), rng.normal(2.5, 3, 15)]
    assert change_points.segment(z, penalty=2.0, min_segment=5) == _exact(z, 2.0, 5)


def test_a_step_and_a_change_of_spread_are_found_where_they_are():
    rng = np.random.default_rng(0)
    level = 100 + np.r_[np.zeros(150), np.full(150, 6.0)] + rng.normal(0, 1, 300)
    found = change_points.pelt_series(level, **KW)
    assert [c["index"] for c in found] == [150] and found[0]["magnitude"] == pytest.approx(0.06, abs=0.01)
    spread = 100 + rng.normal(0, 1, 300) * np.r_[np.ones(150), np.full(150, 4.0)]
    found = change_points.pelt_series(spread, **{**KW, "min_magnitude": 0.02})
    assert len(found) == 1 and abs(found[0]["index"] - 150) <= 5 and found[0]["evidence"]["spread_ratio"] > 2


def test_an_isolated_outlier_is_not_a_change():
    values = 100 + np.random.default_rng(1).normal(0, 1, 200)
    values[[50, 120]] = [400.0, 300.0]
    assert change_points.pelt_series(values, **KW) == []


def test_autocorrelated_noise_without_a_change_is_not_flagged_and_a_3_sd_step_is():
    """AR(1) noise, φ = 0.6, 400 commits: a change at most once in 100 series (the shuffle-based
    null flags such series because shuffling destroys the autocorrelation); a step of 3 noise sd
    at commit 200 is found within 5 commits in 95 of 100."""
    flagged = found = 0
    for seed in range(100):
        noise = _ar1(np.random.default_rng(seed), 400, 0.6, 1.0)
        flagged += bool(change_points.pelt_series(100 + noise, **KW))
        step = change_points.pelt_series(100 + noise + np.r_[np.zeros(200), np.full(200, 3.0)], **KW)
        found += any(abs(c["index"] - 200) <= 5 for c in step)
    assert flagged <= 1 and found >= 95


def test_a_small_change_is_dropped_unless_its_spread_changed():
    rng = np.random.default_rng(2)
    small = 100 + np.r_[np.zeros(150), np.full(150, 1.0)] + rng.normal(0, 0.1, 300)    # 1 %: 10 sd
    assert change_points.pelt_series(small, **KW)                                         # a change ...
    assert change_points.pelt_series(small, **{**KW, "min_magnitude": 0.02}) == []        # ... too small to matter


def test_spread_changes_keep_what_the_level_detector_did_not_report():
    commits = [f"c{i}" for i in range(100)]
    pelt = [{"series": "a", "commit": "c40", "evidence": {"spread_ratio": 3.0}},     # kept: a change of spread
            {"series": "a", "commit": "c70", "evidence": {"spread_ratio": 3.0}},     # Mono saw it at c72: dropped
            {"series": "a", "commit": "c20", "evidence": {"spread_ratio": 1.2}},     # a change of level only: dropped
            {"series": "b", "commit": "c10", "evidence": {"spread_ratio": 0.4}}]     # spread shrank 2.5x: kept
    mono = [{"series": "a", "commit": "c72"}]
    kept = commit_series.spread_changes(pelt, mono, commits, margin=5, variance_ratio=2.0)
    assert [(c["series"], c["commit"]) for c in kept] == [("a", "c40"), ("b", "c10")]


def test_auto_chooses_by_the_runs_per_commit():
    import pandas as pd
    one = pd.DataFrame({"benchmark": "b", "config": "d", "commit": ["c1", "c2", "c3"], "run": 0, "value": 1.0})
    many = pd.concat([one, one.assign(run=1)])
    assert commit_series.resolve_method("auto", one) == "level_shift"
    assert commit_series.resolve_method("auto", many) == "pelt"
    assert commit_series.resolve_method("pelt", many) == "pelt"
    with pytest.raises(ValueError, match="must be one of"):
        commit_series.resolve_method("otava", one)
