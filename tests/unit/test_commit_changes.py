"""commit_changes: Skia's step fit and regression factor (seed 001), Mono's intervals (seed 002),
the change-point F1, and the contract's rows.  Expected values computed by hand."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as student

from pipelines.commit_series import series as commit_series
from pipelines.commit_series import mono
from pipelines.commit_series import skia
from pipelines.simulators import commitsim


def test_normalize_traces_scales_only_above_the_floor():
    traces = np.array([[1.0, 3.0, 1.0, 3.0],          # mean 2, sd 1 -> -1, 1, -1, 1
                       [5.0, 5.0005, 5.0, 5.0005]])    # sd 0.00025 < floor: only centred
    out = skia.normalize_traces(traces, sd_floor=0.001)
    assert out[0] == pytest.approx([-1, 1, -1, 1])
    assert out[1] == pytest.approx([-0.00025, 0.00025, -0.00025, 0.00025])


def test_step_fit_finds_the_step_and_its_regression_factor():
    # 0 0 0 1 1 1 with a bump: best split at 3; left mean 0.1/3... computed by hand below
    c = np.array([0.0, 0.0, 0.3, 1.0, 1.0, 1.0])
    fit = skia.step_fit(c, min_segment=2)
    assert fit["index"] == 3
    left, right = 0.1, 1.0                          # means of [0, 0, .3] and [1, 1, 1]
    mse = ((0 - .1) ** 2 + (0 - .1) ** 2 + (.3 - .1) ** 2) / 6   # = 0.06 / 6 = 0.01
    assert fit["step"] == pytest.approx(left - right) and fit["fit"] == pytest.approx(mse)
    assert fit["regression"] == pytest.approx(-0.9 / 0.01)      # R = step / fit = -90: a step up
    assert skia.step_fit(np.ones(3), min_segment=2)["index"] == -1    # too short to split


def test_step_fits_of_many_rows_are_each_rows_step_fit():
    """The vectorised fit gives, row by row, what the hand-computed case above gives: the same
    split, step, fit and R."""
    rows = np.array([[0.0, 0.0, 0.3, 1.0, 1.0, 1.0],
                     [1.0, 1.0, 1.0, 0.0, 0.0, 0.0],         # a step down at 3: fit 0, R = 1 / 1e-9
                     [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]])        # no step: see below
    fits = skia.step_fits(rows, min_segment=2)
    assert list(fits["index"]) == [3, 3, 3]
    assert fits["step"][0] == pytest.approx(-0.9) and fits["fit"][0] == pytest.approx(0.01)
    assert fits["regression"][1] == pytest.approx(1.0 / 1e-9)
    # row 3: split 2 leaves six errors of .5 (SSE 1.5, fit .25); split 3 means 1/3 and 2/3, SSE
    # 2 x (1/9 + 4/9 + 1/9) = 4/3, fit 4/3 / 6 = 2/9 (better); split 4 mirrors split 2
    assert fits["step"][2] == pytest.approx(-1 / 3) and fits["fit"][2] == pytest.approx(2 / 9)
    for row, i in zip(rows, fits["index"]):
        assert skia.step_fit(row, min_segment=2)["index"] == i


def test_individual_grouping_finds_one_trace_that_stepped_among_flat_ones():
    """Seven flat traces and one that steps: k-means (k = 2) puts the stepping trace with flat
    ones, whose centroid barely steps; its own step fit (grouping: individual) is far above what a
    single trace reaches when the window's commits are shuffled."""
    rng = np.random.default_rng(1)
    n = 40
    flat = [np.full(n, 5.0) + rng.normal(0, 0.05, n) for _ in range(7)]
    step = np.r_[np.full(25, 10.0), np.full(15, 12.0)] + rng.normal(0, 0.05, n)
    table = pd.DataFrame(flat + [step], index=[f"flat{i}|c" for i in range(7)] + ["step|c"],
                         columns=[f"k{i:02d}" for i in range(n)])
    kw = dict(window=40, k=2, sd_floor=0.001, min_segment=3, interesting="auto", seed=0, coalesce_traces=20,
              merge_margin=3, permutations=20, null_quantile=0.99)
    alone, clusters = commit_series.skia_changes(table, skia.SkiaParams(grouping="individual", **kw))
    assert [(c["series"], c["commit"]) for c in alone] == [("step|c", "k25")]
    assert alone[0]["magnitude"] == pytest.approx(0.2, abs=0.01) and clusters[0]["cluster_size"] == 1
    both, _ = commit_series.skia_changes(table, skia.SkiaParams(grouping="both", **kw))
    assert ("step|c", "k25") in {(c["series"], c["commit"]) for c in both}
    with pytest.raises(ValueError, match="grouping"):
        commit_series.skia_changes(table, skia.SkiaParams(grouping="each", **kw))


def test_skia_finds_the_group_that_moved_and_not_the_flat_one():
    rng = np.random.default_rng(0)
    n = 40
    up = [np.r_[np.full(20, 10.0), np.full(20, 11.0)] + rng.normal(0, 0.05, n) for _ in range(4)]
    flat = [np.full(n, 5.0) + rng.normal(0, 0.05, n) for _ in range(4)]
    table = pd.DataFrame(up + flat, index=[f"up{i}|c" for i in range(4)] + [f"flat{i}|c" for i in range(4)],
                         columns=[f"k{i:02d}" for i in range(n)])
    changes, clusters = commit_series.skia_changes(table, skia.SkiaParams(
        window=40, k=2, sd_floor=0.001, min_segment=3, interesting="auto", seed=0, coalesce_traces=20, merge_margin=3,
        permutations=20, null_quantile=0.99))
    assert {c["series"] for c in changes} == {f"up{i}|c" for i in range(4)}
    assert {c["commit"] for c in changes} == {"k20"}
    assert all(c["magnitude"] == pytest.approx(0.1, abs=0.01) for c in changes)     # 10 -> 11
    assert len(clusters) == 1 and abs(clusters[0]["regression_factor"]) > clusters[0]["threshold"]
    # with the seed's fixed 150 on 8 traces, the same step is not interesting
    none, _ = commit_series.skia_changes(table, skia.SkiaParams(
        window=40, k=2, sd_floor=0.001, min_segment=3, interesting=1e9, seed=0, coalesce_traces=20, merge_margin=3))
    assert none == []


def test_coalescing_keeps_a_known_cluster_and_raises_a_new_one():
    known = [{"id": "c0001", "commit": "k20", "nearest": ["a|c", "b|c", "x|c"], "size": 3,
              "regression_factor": -200.0, "status": "triaged", "seen": 1}]
    found = [{"commit": "k20", "nearest": ["a|c", "b|c"], "members": ["a|c", "b|c"], "regression_factor": -300.0},
             {"commit": "k31", "nearest": ["d|c"], "members": ["d|c"], "regression_factor": 180.0}]
    registry, new = skia.coalesce(known, found)
    assert new == ["c0002"] and registry[0]["status"] == "triaged" and registry[0]["seen"] == 2
    assert registry[0]["regression_factor"] == -300.0 and registry[1]["status"] == "untriaged"


def test_triage_sets_a_clusters_status_and_refuses_what_it_does_not_know():
    registry = [{"id": "c0001", "commit": "k20", "nearest": ["a|c"], "status": "untriaged"},
                {"id": "c0002", "commit": "k31", "nearest": ["d|c"], "status": "untriaged"}]
    out = skia.triage_cluster(registry, "c0002", "positive", by="ana", at="2026-11-23T04:00:00+00:00", note="real")
    assert out[1] == {**registry[1], "status": "positive", "triaged_by": "ana",
                      "triaged_at": "2026-11-23T04:00:00+00:00", "note": "real"}
    assert out[0] == registry[0] and registry[1]["status"] == "untriaged"      # the input is not changed
    with pytest.raises(ValueError, match="no interesting cluster 'c0009'"):
        skia.triage_cluster(registry, "c0009", "positive", by="ana", at="t")
    with pytest.raises(ValueError, match="status must be"):
        skia.triage_cluster(registry, "c0001", "maybe", by="ana", at="t")


def test_mono_interval_is_the_random_effects_formula():
    means = np.array([10.0, 12.0, 11.0])              # M_j; mean 11, S2_rho = (1 + 1 + 0)/2 = 1
    variances = np.array([4.0, 2.0, 3.0])             # S2_sigma = 3
    n = 8
    iv = mono.mono_interval(means, variances, n, alpha=0.01, quantile="normal")
    u = 2.5758293035489004                            # standard normal 0.995 quantile
    assert iv["centre"] == 11.0 and iv["s2_rho"] == pytest.approx(1.0) and iv["s2_sigma"] == pytest.approx(3.0)
    assert iv["half"] == pytest.approx(u * math.sqrt((8 * 1.0 + 3.0) / (3 * 8)))
    t = mono.mono_interval(means, variances, n, alpha=0.01, quantile="student")
    assert t["half"] == pytest.approx(student.ppf(0.995, 2) * math.sqrt(11 / 24))


def test_run_statistics_drop_the_warm_up_and_keep_constant_runs_exact():
    rng = np.random.default_rng(0)
    runs = [np.array([100.0, 50.0, 5.0, 5.0, 5.0, 5.0]), np.array([90.0, 40.0, 7.0, 7.0, 7.0, 7.0])]
    means, variances, n = mono.run_statistics(runs, warmup=2, subsamples=50, share=0.75, rng=rng)
    assert list(means) == [5.0, 7.0] and list(variances) == [0.0, 0.0] and n == 3     # ceil(0.75 x 4)
    single, var1, n1 = mono.run_statistics([np.array([3.0]), np.array([4.0])], warmup=3, subsamples=10, share=0.75,
                                         rng=rng)
    assert list(single) == [3.0, 4.0] and list(var1) == [0.0, 0.0] and n1 == 1


def _intervals(centres, halves):
    return pd.DataFrame({"commit": [f"k{i}" for i in range(len(centres))], "centre": centres, "half": halves,
                         "runs": 5, "s2_rho": 0.0, "s2_sigma": 0.0, "n": 1})


def test_a_change_is_non_overlapping_intervals_that_hold():
    iv = _intervals([10.0, 10.1, 12.0, 12.1, 12.0], [0.3] * 5)
    changes = commit_series.mono_changes(iv, persist=2)
    assert [c["commit"] for c in changes] == ["k2"]             # |12.0 - 10.1| = 1.9 > 0.6
    assert changes[0]["magnitude"] == pytest.approx((12.0 - 10.1) / 10.1)
    spike = _intervals([10.0, 10.0, 12.0, 10.0, 10.0], [0.3] * 5)
    assert [c["commit"] for c in commit_series.mono_changes(spike, persist=1)] == ["k2", "k3"]    # the paper's rule
    assert commit_series.mono_changes(spike, persist=2) == []               # one slow commit, undone by the next


def test_commit_effect_adds_the_variance_between_commits():
    # centres alternate 10 +- 1 around a flat running median of 10; own intervals 0.1 wide
    centres = [10 + (1 if i % 2 else -1) for i in range(21)]
    iv = _intervals(centres, [0.1] * 21)
    out = commit_series.commit_effect(iv, alpha=0.01, quantile="normal", window=11)
    u = 2.5758293035489004
    # residuals are all +-1 (median 10): MAD = 1 -> tau^2 = 1.4826^2 - (0.1/u)^2
    tau2 = 1.4826 ** 2 - (0.1 / u) ** 2
    assert out["tau2"].iloc[0] == pytest.approx(tau2)
    assert out["half"].iloc[0] == pytest.approx(u * math.sqrt((0.1 / u) ** 2 + tau2))
    assert commit_series.mono_changes(out, persist=1) == []                 # +-1 is now within the intervals


def test_f1_with_and_without_the_series_start():
    truth = {"a": [50], "b": [], "c": [20, 80]}
    detected = {"a": [52], "b": [10], "c": [20]}
    m = commit_series.f1_scores(detected, truth, margin=5)
    # pooled: tp 2 (a:52~50, c:20), fp 1 (b:10), fn 1 (c:80) -> p 2/3, r 2/3, f1 2/3
    assert (m["precision"], m["recall"], m["f1"]) == (pytest.approx(0.6667, abs=1e-4),) * 3
    # start counted: a: p 2/2 r 2/2 -> 1; b: p 1/2 r 1/1 -> 2/3; c: p 2/2 r 2/3 -> 0.8
    assert m["f1_tcpd"] == pytest.approx((1 + 2 / 3 + 0.8) / 3, abs=1e-4)
    nothing = commit_series.f1_scores({}, truth, margin=5)                  # the no-change detector
    assert nothing["f1_tcpd"] == pytest.approx((2 / 3 + 1 + 0.5) / 3, abs=1e-4)     # 2/(2+c) per series


def test_contract_rows_put_regressions_first_and_respect_higher_is_better():
    changes = [{"series": "t.latency|py3", "commit": "k1", "magnitude": 0.05, "method": "mono", "evidence": {}},
               {"series": "t.throughput|py3", "commit": "k2", "magnitude": -0.20, "method": "skia", "evidence": {}},
               {"series": "t.latency|py3", "commit": "k3", "magnitude": -0.30, "method": "mono", "evidence": {}}]
    rows = commit_series.contract_rows(changes, ["*.throughput"])
    assert [(r["benchmark"], r["direction"], r["magnitude_pct"]) for r in rows] == [
        ("t.throughput", "regression", -20.0), ("t.latency", "regression", 5.0), ("t.latency", "improvement", -30.0)]
    assert set(rows[0]) == {"benchmark", "config", "commit", "direction", "magnitude_pct", "method", "evidence"}


def test_a_frame_without_the_contracts_columns_is_refused_by_name():
    with pytest.raises(ValueError, match="missing column.*run"):
        commit_series.check_frame(pd.DataFrame({"commit": ["a"], "commit_time": ["t"], "benchmark": ["b"], "config": ["c"],
                                     "value": [1.0]}))


def test_the_simulated_history_has_the_changes_it_labels():
    frame, truth = commitsim.simulate(commitsim.CommitHistory(seed=3, n_commits=60, n_groups=2, benchmarks_per_group=2, runs=3,
                                      measurements=6, warmup=2, changes_per_group=(1, 1), min_change=0.2,
                                      max_change=0.3, static_share=0.0, min_gap=10))
    assert list(frame.columns) == list(commit_series.COLUMNS) and len(frame) == 60 * 4 * 3 * 8
    table = commit_series.trace_matrix(commit_series.check_frame(frame), commit_series.commit_order(frame))
    for series, t in truth["series"].items():
        (p,) = t["change_index"]
        row = table.loc[series].to_numpy()
        assert abs(np.median(row[p:]) / np.median(row[:p]) - 1) >= 0.2 * 0.6 * 0.9   # factor x the member's share


def test_the_vectorised_series_gives_the_formula_of_mono_interval():
    """Runs of one length go through one bootstrap array; each commit's interval must still be
    mono_interval's formula on that commit's run statistics (constant runs: exact means, 0 variance)."""
    rows = []
    for c, level in (("k0", 10.0), ("k1", 10.0), ("k2", 13.0)):
        for run, offset in enumerate((0.0, 0.4, -0.4)):
            rows += [{"commit": c, "commit_time": c, "benchmark": "b", "config": "x", "run": run,
                      "value": v} for v in (99.0, level + offset, level + offset, level + offset)]
    frame = pd.DataFrame(rows)
    iv = commit_series.mono_series(frame, ["k0", "k1", "k2"], warmup=1, subsamples=20, share=0.75, alpha=0.01,
                        quantile="normal", seed=0)
    expected = mono.mono_interval(np.array([10.0, 10.4, 9.6]), np.zeros(3), 3, alpha=0.01, quantile="normal")
    assert iv["centre"].tolist() == pytest.approx([10.0, 10.0, 13.0])
    assert iv["half"].iloc[0] == pytest.approx(expected["half"])          # u sqrt(3 x 0.16 / 9)
    assert [c["commit"] for c in commit_series.mono_changes(iv, persist=1)] == ["k2"]


def _one_value_per_commit(values: np.ndarray) -> pd.DataFrame:
    n = len(values)
    return pd.DataFrame({"commit": [f"c{i:04d}" for i in range(n)],
                         "commit_time": pd.date_range("2026-01-01", periods=n, freq="6h").strftime("%Y-%m-%dT%H:%M:%S"),
                         "benchmark": "b", "config": "default", "run": 0, "value": values})


MONO = {"warmup": 0, "subsamples": 10, "subsample_share": 0.75, "alpha": 0.01, "quantile": "normal", "despike_sd": 0,
        "commit_effect": False, "commit_effect_window": 11, "persist": 2, "seed": 0}


def test_one_value_per_commit_is_judged_by_the_series_own_noise():
    rng = np.random.default_rng(3)
    values = np.r_[np.full(60, 100.0), np.full(60, 110.0)] + rng.normal(0, 0.5, 120)
    frame = _one_value_per_commit(values)
    commits = list(frame["commit"])
    changes, intervals, summaries = commit_series.mono_all(frame, commits, mono.MonoParams.of(MONO))
    iv = intervals["b|default"]
    # the half-length by hand: u * 1.4826 * MAD of the values around their running median (11 commits)
    s = pd.Series(values)
    resid = (s - s.rolling(11, center=True, min_periods=1).median()).to_numpy()
    half = 2.5758293035489 * 1.4826 * np.median(np.abs(resid - np.median(resid)))
    assert iv["half"].to_numpy() == pytest.approx(np.full(120, half), rel=1e-6)
    assert set(iv["noise"]) == {"series"} and summaries["b|default"]["noise_from"] == "series"
    # a step of 20 sigma, where 2 x half is about 5.2 sigma: found at its commit and nowhere else
    assert [c["commit"] for c in changes] == ["c0060"]


def test_one_value_per_commit_without_a_change_raises_nothing():
    for seed in range(10):
        values = 100.0 + np.random.default_rng(seed).normal(0, 1.0, 300)
        frame = _one_value_per_commit(values)
        assert commit_series.mono_all(frame, list(frame["commit"]), mono.MonoParams.of(MONO))[0] == []


def test_a_flat_series_is_drawn_with_finite_coordinates():
    import warnings

    from pipelines.reporting.commit_pages import series_svg
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        svg = series_svg(np.full(50, 5.0), np.full(50, -np.inf), np.full(50, np.inf), [10])
        zero = series_svg(np.zeros(50), None, None, [])
    assert "nan" not in svg.lower() and "inf" not in svg.lower() and "nan" not in zero.lower()
    assert 'points="4.0,45.0' in zero                      # 90 px high: the middle is y = 45


def test_a_block_permutation_keeps_each_block_whole():
    for seed in range(5):
        order = list(skia.block_permutation(7, 3, np.random.default_rng(seed)))
        chunks, i = [], 0
        while i < len(order):                   # each block starts at a multiple of 3 and runs whole
            start = order[i]
            assert start % 3 == 0
            chunk = list(range(start, min(start + 3, 7)))
            assert order[i:i + len(chunk)] == chunk
            chunks.append(start)
            i += len(chunk)
        assert sorted(chunks) == [0, 3, 6]
    assert sorted(skia.block_permutation(5, 1, np.random.default_rng(1))) == [0, 1, 2, 3, 4]
