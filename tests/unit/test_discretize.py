"""Equal-width discretisation (Foo et al. 2015 phase 2)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipelines import discretize


@pytest.mark.parametrize("u,base,k", [(1, 10, 1), (5, 10, 1), (11, 10, 2), (1000, 10, 6), (1920, 10, 6),
                                      (1920, math.e, 15), (100, 2, 13)])
def test_bin_count(u, base, k):
    # k = max(1, floor(2 log_b u)): 2 log10(11) = 2.08 -> 2; 2 ln(1920) = 15.1 -> 15; 2 log2(100) = 13.3 -> 13
    assert discretize.bin_count(u, log_base=base) == k


def test_edges_pooled_over_training_runs_and_applied_with_clamping():
    a = pd.DataFrame({"c.x": [0.0, 1, 2, 3, 4, 5], "c.flat": [3.0] * 6})
    b = pd.DataFrame({"c.x": [6.0, 7, 8, 9, 10, np.nan], "c.flat": [3.0] * 6})
    edges = discretize.learn_edges([a, b], log_base=10)
    assert "c.flat" not in edges                                   # zero variance over the pool
    assert edges["c.x"]["unique"] == 11 and edges["c.x"]["k"] == 2
    assert edges["c.x"]["edges"] == [0.0, 5.0, 10.0]
    new = pd.DataFrame({"c.x": [-3.0, 0, 4.9, 5.0, 10, 12, np.nan], "c.flat": [3.0] * 7})
    binned = discretize.apply_edges(new, edges)
    assert list(binned.columns) == ["c.x"]
    assert binned["c.x"].tolist()[:6] == [0, 0, 0, 1, 1, 1]       # outside the range -> edge bins
    assert binned["c.x"].isna().tolist() == [False] * 6 + [True]


def test_equal_width_not_equal_frequency():
    skewed = pd.DataFrame({"c.x": [0.0] * 95 + [90.0, 100, 100, 100, 100]})
    edges = discretize.learn_edges([skewed], log_base=10)          # u = 3 -> k = max(1, floor(0.95)) = 1
    assert edges["c.x"]["k"] == 1
    wide = pd.DataFrame({"c.x": np.r_[np.zeros(90), np.linspace(1, 100, 10)]})
    e = discretize.learn_edges([wide], log_base=10)["c.x"]         # u = 11 -> k = 2, width 50
    b = discretize.apply_edges(wide, {"c.x": e})["c.x"]
    # 1, 12, 23, 34, 45 fall below 50 with the 90 zeros; 56 .. 100 above
    assert (b == 0).sum() == 95 and (b == 1).sum() == 5             # most values in one bin: EW, not EF
