"""bench/audit_labels.py: which counters' run median lies outside every normal history interval."""
from __future__ import annotations

import math

import pandas as pd

from bench.audit_labels import beyond_history


def test_a_median_outside_every_history_interval_is_listed_in_widths_of_the_range():
    history = [pd.DataFrame({"a": [1.0, 2.0, 4.0], "b": [10.0, 12.0, 11.0], "c": [0.5, 0.0, 1.0]}),
               pd.DataFrame({"a": [2.0, 3.0, 2.0], "b": [8.0, 9.0, 10.0], "c": [1.0, 2.0, 0.0]})]
    # a: range [1, 4] (width 3), median 6 -> (6 - 4) / 3.  b: range [8, 12] (width 4), median 2
    # -> (8 - 2) / 4 = 1.5.  c: range [0, 2], median 1 -> inside.  d: not in the history -> not judged.
    run = pd.DataFrame({"a": [5.0, 6.0, 7.0], "b": [1.0, 2.0, 3.0], "c": [1.0, 1.0, 9.0], "d": [1e9, 1e9, 1e9]})
    out = beyond_history(run, history)
    assert list(out) == ["b", "a"]                                    # furthest first
    assert out["b"] == 1.5 and math.isclose(out["a"], 2 / 3)


def test_a_spike_is_not_a_level_and_a_constant_history_gives_infinity():
    history = [pd.DataFrame({"x": [0.0, 0.0, 0.0], "y": [1.0, 1.0, 2.0]})]
    # x: constant 0 in the history, median 0.5 -> inf.  y: one interval of 100 (a spike) leaves the
    # median (1.0) inside [1, 2].
    run = pd.DataFrame({"x": [0.5, 0.5, 0.5], "y": [1.0, 100.0, 1.0]})
    out = beyond_history(run, history)
    assert set(out) == {"x"} and math.isinf(out["x"])
