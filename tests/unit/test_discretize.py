"""Equal-width discretisation (Foo et al. 2015 phase 2)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from pipelines.preparation import bins


@pytest.mark.parametrize("u,base,k", [(1, 10, 1), (5, 10, 1), (11, 10, 2), (1000, 10, 6), (1920, 10, 6),
                                      (1920, math.e, 15), (100, 2, 13)])
def test_bin_count(u, base, k):
    # k = max(1, floor(2 log_b u)): 2 log10(11) = 2.08 -> 2; 2 ln(1920) = 15.1 -> 15; 2 log2(100) = 13.3 -> 13
    assert bins.bin_count(u, log_base=base) == k


def test_edges_pooled_over_training_runs_and_applied_with_clamping():
    a = pd.DataFrame({"c.x": [0.0, 1, 2, 3, 4, 5], "c.flat": [3.0] * 6})
    b = pd.DataFrame({"c.x": [6.0, 7, 8, 9, 10, np.nan], "c.flat": [3.0] * 6})
    edges = bins.learn_edges([a, b], log_base=10, open_edges=False, log_span=None)
    assert "c.flat" not in edges                                   # zero variance over the pool
    assert edges["c.x"]["unique"] == 11 and edges["c.x"]["k"] == 2
    assert edges["c.x"]["edges"] == [0.0, 5.0, 10.0]
    new = pd.DataFrame({"c.x": [-3.0, 0, 4.9, 5.0, 10, 12, np.nan], "c.flat": [3.0] * 7})
    binned = bins.apply_edges(new, edges)
    assert list(binned.columns) == ["c.x"]
    assert binned["c.x"].tolist()[:6] == [0, 0, 0, 1, 1, 1]       # outside the range -> edge bins
    assert binned["c.x"].isna().tolist() == [False] * 6 + [True]


def test_equal_width_not_equal_frequency():
    skewed = pd.DataFrame({"c.x": [0.0] * 95 + [90.0, 100, 100, 100, 100]})
    edges = bins.learn_edges([skewed], log_base=10, open_edges=False, log_span=None)          # u = 3 -> k = max(1, floor(0.95)) = 1
    assert edges["c.x"]["k"] == 1
    wide = pd.DataFrame({"c.x": np.r_[np.zeros(90), np.linspace(1, 100, 10)]})
    e = bins.learn_edges([wide], log_base=10, open_edges=False, log_span=None)["c.x"]         # u = 11 -> k = 2, width 50
    b = bins.apply_edges(wide, {"c.x": e})["c.x"]
    # 1, 12, 23, 34, 45 fall below 50 with the 90 zeros; 56 .. 100 above
    assert (b == 0).sum() == 95 and (b == 1).sum() == 5             # most values in one bin: EW, not EF


def test_open_edge_bins_take_values_beyond_the_training_range():
    a = pd.DataFrame({"c.x": [0.0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]})      # u = 11 -> k = 2 inner bins
    edges = bins.learn_edges([a], log_base=10, open_edges=True, log_span=None)["c.x"]
    assert edges["edges"] == [0.0, 5.0, 10.0] and edges["k"] == 4 and edges["open"] is True
    new = pd.DataFrame({"c.x": [-3.0, 0, 4.9, 5.0, 10, 10.5, np.nan]})
    b = bins.apply_edges(new, {"c.x": edges})["c.x"]
    # (-inf, 0) -> 0, [0, 5) -> 1, [5, 10] -> 2 (the maximum itself closes the last inner bin), (10, inf) -> 3
    assert b.tolist()[:6] == [0, 1, 1, 2, 2, 3] and b.isna().tolist()[-1]


def test_a_regression_at_the_top_of_the_pooled_range_is_seen_only_with_open_edge_bins():
    # lab A idles at 25-30 %, lab B at 52-58 %; B regresses to 97 %
    lab_a = pd.DataFrame({"c.cpu": np.linspace(25, 30, 40)})
    lab_b = pd.DataFrame({"c.cpu": np.linspace(52, 58, 40)})
    regressed = pd.DataFrame({"c.cpu": np.full(10, 97.0)})
    clamped = bins.learn_edges([lab_a, lab_b], log_base=10, open_edges=False, log_span=None)
    opened = bins.learn_edges([lab_a, lab_b], log_base=10, open_edges=True, log_span=None)
    top = clamped["c.cpu"]["k"] - 1
    assert set(bins.apply_edges(lab_b, clamped)["c.cpu"].tolist()) >= {top}
    assert set(bins.apply_edges(regressed, clamped)["c.cpu"].tolist()) == {top}        # same bin as normal B
    b_normal = set(bins.apply_edges(lab_b, opened)["c.cpu"].tolist())
    b_regressed = set(bins.apply_edges(regressed, opened)["c.cpu"].tolist())
    assert b_regressed == {opened["c.cpu"]["k"] - 1} and not (b_regressed & b_normal)


def test_right_skewed_counter_gets_log_spaced_edges():
    # 18 values: 1, nine 2s, 3..9, 101 -> u = 10 -> k = 2; median 2, so h = median - min = 1 and
    # (max - min) / h = 100 >= 10: edges exp(linspace(log 1, log 101, 3)) + min - h = 1, sqrt(101), 101
    x = pd.DataFrame({"c.q": [1.0] + [2.0] * 9 + [3.0, 4, 5, 6, 7, 8, 9, 101]})
    e = bins.learn_edges([x], log_base=10, log_span=10, open_edges=False)["c.q"]
    assert e["scale"] == "log" and e["k"] == 2
    assert e["edges"] == pytest.approx([1.0, math.sqrt(101), 101.0])
    assert bins.apply_edges(pd.DataFrame({"c.q": [2.0, 9.0, 11.0, 101]}), {"c.q": e})["c.q"].tolist() == [0, 0, 1, 1]
    # linear edges would be 1, 51, 101: tripling the ordinary level (2 -> 6) would stay in bin 0 either way,
    # but 2 -> 20 crosses an edge only on the log scale
    lin = bins.learn_edges([x], log_base=10, open_edges=False, log_span=None)["c.q"]
    assert lin["edges"] == [1.0, 51.0, 101.0] and "scale" not in lin
    assert bins.apply_edges(pd.DataFrame({"c.q": [2.0, 20.0]}), {"c.q": lin})["c.q"].tolist() == [0, 0]
    assert bins.apply_edges(pd.DataFrame({"c.q": [2.0, 20.0]}), {"c.q": e})["c.q"].tolist() == [0, 1]


def test_symmetric_counter_keeps_linear_edges_under_log_span():
    # min 0, median 5, max 10: range / (median - min) = 2 < 10 -> linear; a zero median height never logs
    x = pd.DataFrame({"c.x": np.arange(11.0), "c.idle": [0.0] * 9 + [1.0, 2.0]})
    e = bins.learn_edges([x], log_base=10, log_span=10, open_edges=False)
    assert "scale" not in e["c.x"] and e["c.x"]["edges"] == [0.0, 5.0, 10.0]
    assert "scale" not in e["c.idle"]


def _history(tree, runs: dict[str, str | None]) -> None:
    """Normalised frames and a valid index for ``runs`` (run id -> verdict) of one system."""
    from pipelines import config
    from pipelines.storage import atomic
    rng = np.random.default_rng(0)
    index = {}
    for i, (run_id, verdict) in enumerate(runs.items()):
        config.frame_path(run_id).parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"cpu": rng.uniform(10, 20 + i, 30), "io": rng.exponential(5.0, 30)}).to_parquet(
            config.frame_path(run_id))
        config.info_path(run_id).parent.mkdir(parents=True, exist_ok=True)
        atomic.write_json_atomic(config.info_path(run_id), {"run_id": run_id, "key": f"frame-{run_id}",
                                                             "interval_s": 10.0})
        index[run_id] = {"system": "s", "verdict": verdict, "started_at": f"2026-01-0{i + 1}T00:00:00Z",
                         "environment": {}, "version": str(i)}
    config.VALID_INDEX.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_json_atomic(config.VALID_INDEX, {"valid": index})


def test_the_edges_of_an_unchanged_history_are_kept_and_a_new_passed_run_learns_them_again(tree, capsys):
    from pipelines import config
    from pipelines.stages import discretize
    _history(tree, {"s-1": "pass", "s-2": "pass", "s-3": None})
    discretize.main()
    path = config.edges_path("s")
    first = (path.stat().st_ino, path.read_bytes())
    assert archive_of(path)["training_runs"] == ["s-1", "s-2"]
    _history(tree, {"s-1": "pass", "s-2": "pass", "s-3": None, "s-4": None})      # a new target: nothing to learn
    discretize.main()
    assert (path.stat().st_ino, path.read_bytes()) == first                        # not even rewritten
    assert "(unchanged, reused)" in capsys.readouterr().out
    _history(tree, {"s-1": "pass", "s-2": "pass", "s-3": None, "s-4": "pass"})    # a new passed run
    discretize.main()
    assert archive_of(path)["training_runs"] == ["s-1", "s-2", "s-4"]
    assert "(unchanged, reused)" not in capsys.readouterr().out


def archive_of(path):
    from pipelines.storage import atomic
    return atomic.read_json(path)
