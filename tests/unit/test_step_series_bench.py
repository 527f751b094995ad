"""The bench of one-value-per-commit series (bench/step_series.py): its series are what it says,
its scoring counts by hand, and the level-shift test at its defaults meets the bar on a small draw
of it (its steps found, within 5 commits; no change on series without)."""
from __future__ import annotations

import numpy as np

from bench import step_series as bench


def test_each_kind_is_what_it_says():
    rng = np.random.default_rng(0)
    many = bench.generate("many", rng)
    assert len(many.steps) >= 10 and all(b - a >= bench.MIN_GAP for a, b in zip(many.steps, many.steps[1:]))
    assert bench.generate("white", rng).steps == () and 60 <= bench.generate("short", rng).values.size < 120
    single = bench.generate("single", rng)
    (at,) = single.steps
    jump = np.median(single.values[at:at + bench.MIN_GAP]) - np.median(single.values[at - bench.MIN_GAP:at])
    assert 2.0 <= abs(jump) <= 7.0                                      # 3-6 noise sd, read back with noise


def test_a_found_change_matches_one_true_step_within_the_margin():
    assert bench.matched([10, 11, 40], (10, 30), margin=5) == 1             # 11 has no second step near it
    assert bench.matched([12, 36], (10, 30), margin=5) == 1                 # 36 is 6 from 30
    rows = bench.score([bench.Series("single", np.zeros(50), (20,)), bench.Series("white", np.zeros(50), ())],
                       lambda v: [22, 40], margin=5)
    assert (rows["single"]["recall"], rows["single"]["precision"]) == (1.0, 0.5)
    assert rows["white"]["false_per_series"] == 2.0


def test_the_level_shift_test_finds_the_steps_of_a_small_draw_and_nothing_on_series_without():
    """Four series of each kind (the bar of 0.8 per kind is the whole bench's, docs/results): over the
    steps of every kind at least 0.85 found, every kind at least half, and no change on the 32
    series without a step."""
    scores = bench.score(bench.bench_set([5], 4), bench.level_shift_detector(), margin=5)
    hits = sum(scores[k]["hits"] for k in bench.STEP_KINDS)
    steps = sum(scores[k]["steps"] for k in bench.STEP_KINDS)
    assert hits / steps >= 0.85 and all(scores[k]["recall"] >= 0.5 for k in bench.STEP_KINDS), scores
    assert sum(scores[k]["found"] for k in bench.NULL_KINDS) == 0
