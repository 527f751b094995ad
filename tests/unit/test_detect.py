"""Confidence change, environment weights, bagging and stacking (Foo et al. 2015 worked examples)."""
from __future__ import annotations

import math
import statistics

import numpy as np
import pandas as pd
import pytest

from pipelines.systems import history, labs
from pipelines.detectors.rules import detection as rule_detection
from pipelines.detectors.rules import ensemble as rule_ensemble
from pipelines.detectors.rules import mining as rule_mining
from pipelines.detectors.rules import verdict as rule_verdict


def test_confidence_change_from_0_9_to_0_2():
    # V_h = (0.9, 0.1), V_n = (0.2, 0.8): cos = 0.26 / (sqrt(0.82) sqrt(0.68)) = 0.348186 -> Δ = 0.651814
    assert rule_ensemble.confidence_change(0.9, 0.2) == pytest.approx(0.651814, abs=1e-6)
    assert rule_ensemble.confidence_change(0.9, 0.9) == pytest.approx(0.0, abs=1e-12)
    # the premise holds and the consequent never does: Δ = 1 - 0.1 / sqrt(0.82) = 1 - 0.110432 = 0.889568
    assert rule_ensemble.confidence_change(0.9, 0.0) == pytest.approx(0.889568, abs=1e-6)


def test_table_iii_environment_weights_give_0_55():
    # T1 vs T5 share CPU, memory, database (1,1,1,0); T2 vs T5 share CPU and architecture (1,0,0,1)
    t5 = {"cpu": "2GHz x2", "memory": "2GB", "db": "1", "arch": "64"}
    t1 = {"cpu": "2GHz x2", "memory": "2GB", "db": "1", "arch": "32"}
    t2 = {"cpu": "2GHz x2", "memory": "1GB", "db": "2", "arch": "64"}
    w = rule_ensemble.environment_weights([t1, t2], t5)
    assert w[0] == pytest.approx(math.sqrt(3) / (math.sqrt(3) + math.sqrt(2)))
    assert round(w[0], 2) == 0.55 and w.sum() == pytest.approx(1.0)


def test_environment_weights_with_nothing_in_common_are_equal():
    assert rule_ensemble.environment_weights([{"a": 1}, {"a": 2}], {"a": 3}).tolist() == [0.5, 0.5]


TABLE_I = pd.DataFrame(
    [[1, 1, 0, 0], [0, 1, 1, 0], [0, 1, 1, 0], [0, 0, 0, 1]],
    index=["R1", "R2", "R3", "R4"], columns=["cpu", "throughput", "memory", "db_tx"], dtype=float)


def test_table_i_to_ii_bagging_flags_throughput_and_memory():
    votes, flagged = rule_ensemble.bagging(TABLE_I)
    assert votes.to_dict() == {"cpu": 1, "throughput": 3, "memory": 2, "db_tx": 1}   # Table II
    assert sorted(flagged) == ["memory", "throughput"]


def test_stacking_weighs_models():
    w = np.array([0.4, 0.1, 0.1, 0.4])
    s, flagged = rule_ensemble.stacking(TABLE_I, w, threshold=0.5)
    assert s.to_dict() == pytest.approx({"cpu": 0.4, "throughput": 0.6, "memory": 0.2, "db_tx": 0.4})
    assert flagged == ["throughput"]
    s_eq, flagged_eq = rule_ensemble.stacking(TABLE_I, np.full(4, 0.25), threshold=0.5)
    assert s_eq["memory"] == 0.5 and flagged_eq == ["throughput"]             # s must exceed 0.5


def test_abstaining_models_are_left_out_of_the_vote():
    flags = TABLE_I.copy()
    flags.loc[["R1", "R4"], "memory"] = np.nan          # two models never saw the memory counter
    votes, flagged = rule_ensemble.bagging(flags)
    assert "memory" in flagged                           # 2 of the 2 models that judged it
    s, _ = rule_ensemble.stacking(flags, np.array([0.4, 0.1, 0.1, 0.4]), threshold=0.5)
    assert s["memory"] == pytest.approx(1.0)


def enc(**cols):
    return rule_ensemble.Encoded.of(pd.DataFrame({k: pd.array(v, dtype="Int64") for k, v in cols.items()}))


def rules(*rows):
    return pd.DataFrame(rows, columns=["premise", "consequent", "support", "confidence", "lift"])


def test_rule_evaluation_on_the_target():
    target = enc(**{"app.load": [1] * 10 + [0] * 10, "x.cpu": [1, 1, 0, 0, 0, 0, 0, 0, 0, 0] + [0] * 10})
    r = rules((("app.load=1",), "x.cpu=1", 0.5, 0.9, 1.5),        # premise holds 10 times, consequent 2: conf 0.2
              (("app.load=2",), "x.cpu=1", 0.4, 0.95, 1.5),       # premise never holds: no evidence
              ((), "x.cpu=0..1", 1.0, 1.0, 1.0))                  # a range: always true
    ev = rule_ensemble.evaluate_rules(r, target, delta_threshold=0.1, min_premise_intervals=10).rules
    assert ev["n_premise"].tolist() == [10, 0, 20]
    assert ev.loc[0, "conf_new"] == pytest.approx(0.2)
    assert ev.loc[0, "delta"] == pytest.approx(0.651814, abs=1e-6) and bool(ev.loc[0, "violated"])
    assert np.isnan(ev.loc[1, "delta"]) and not ev.loc[1, "violated"]
    assert ev.loc[2, "delta"] == pytest.approx(0.0, abs=1e-12)


def test_too_few_premise_intervals_give_no_evidence():
    target = enc(**{"app.load": [1] * 4 + [0] * 16, "x.cpu": [0] * 20})
    r = rules((("app.load=1",), "x.cpu=1", 0.5, 0.9, 1.5))
    ev = rule_ensemble.evaluate_rules(r, target, delta_threshold=0.1, min_premise_intervals=10).rules
    assert ev.loc[0, "n_premise"] == 4 and not ev.loc[0, "violated"]


def test_unobserved_counters_do_not_count():
    target = enc(**{"app.load": [1] * 12, "x.cpu": [1] * 6 + [None] * 6})
    r = rules((("app.load=1",), "x.cpu=1", 0.5, 0.9, 1.5))
    ev = rule_ensemble.evaluate_rules(r, target, delta_threshold=0.1, min_premise_intervals=5).rules
    assert ev.loc[0, "n_premise"] == 6 and ev.loc[0, "conf_new"] == 1.0


def test_pruning_drops_rules_a_good_reference_run_breaks_and_the_model_abstains():
    r = rules(((), "x.cpu=1", 1.0, 1.0, 1.0), ((), "x.mem=0", 1.0, 1.0, 1.0))
    model = rule_ensemble.Model("m1", r, {"cpu": "slow"}, frozenset({"x.cpu", "x.mem"}))
    good_ref = enc(**{"x.cpu": [2] * 12, "x.mem": [0] * 12})      # the target's environment: cpu in bin 2
    pruned, dropped = rule_ensemble.prune_models([model], ["ref"], {"ref": good_ref}.__getitem__, delta_threshold=0.1,
                                                min_premise_intervals=10)
    assert dropped == {"m1": 1}
    assert pruned[0].rules["consequent"].tolist() == ["x.mem=0"]
    assert pruned[0].judges == frozenset({"x.mem"})
    flags, _ = rule_ensemble.model_flags(rule_ensemble.evaluate_rules(pruned[0].rules, good_ref, delta_threshold=0.1,
                                                        min_premise_intervals=10), ["x.cpu", "x.mem"], pruned[0].judges)
    assert np.isnan(flags["x.cpu"]) and flags["x.mem"] == 0.0


def test_pruning_on_two_processes_equals_pruning_in_this_one_and_fills_the_memo():
    from pipelines import parallel
    stationary = rules(((), "x.cpu=1", 1.0, 1.0, 1.0), ((), "x.mem=0", 1.0, 1.0, 1.0), ((), "x.io=1", 1.0, 1.0, 1.0))
    models = [rule_ensemble.Model(m, stationary, {}, None) for m in ("m1", "m2", "m3")]
    refs = {"m1": enc(**{"x.cpu": [1] * 12, "x.mem": [1] * 12, "x.io": [1] * 12}),      # breaks x.mem=0
            "m2": enc(**{"x.cpu": [2] * 12, "x.mem": [0] * 12, "x.io": [1] * 12}),      # breaks x.cpu=1
            "r9": enc(**{"x.cpu": [1] * 12, "x.mem": [0] * 12, "x.io": [0] * 12})}      # breaks x.io=1
    kw = dict(delta_threshold=0.1, min_premise_intervals=10)
    parallel.set_jobs(1)
    try:
        want, want_dropped = rule_ensemble.prune_models(models, list(refs), refs.__getitem__, **kw)
    finally:
        parallel.set_jobs(None)
    # m1 is never pruned by its own run: m2 and r9 drop x.cpu and x.io; m2 by m1 and r9: x.mem and x.io
    assert want_dropped == {"m1": 2, "m2": 2, "m3": 3}
    assert want[0].rules["consequent"].tolist() == ["x.mem=0"] and want[1].rules["consequent"].tolist() == ["x.cpu=1"]
    memo, encoded = {}, []
    parallel.set_jobs(2)
    try:
        got, got_dropped = rule_ensemble.prune_models(models, list(refs), lambda r: encoded.append(r) or refs[r],
                                                      memo=memo, memo_tag="e", **kw)
    finally:
        parallel.set_jobs(None)
    assert got_dropped == want_dropped
    assert all(g.rules.equals(w.rules) and g.judges == w.judges for g, w in zip(got, want))
    assert sorted(memo) == sorted(("e", m.run_id, r) for m in models for r in refs if r != m.run_id)
    parallel.set_jobs(1)                                     # in this process: the encodings are seen here
    try:
        rule_ensemble.prune_models(models, list(refs), lambda r: encoded.append(r) or refs[r], memo={}, memo_tag="e",
                                   **kw)
        assert encoded == ["m1", "m2", "r9"]                 # each reference once, for all the models
        encoded.clear()
        again, _ = rule_ensemble.prune_models(models, list(refs), lambda r: encoded.append(r) or refs[r], memo=memo,
                                              memo_tag="e", **kw)
    finally:
        parallel.set_jobs(None)
    assert encoded == [] and all(a.rules.equals(w.rules) for a, w in zip(again, want))   # every pair known


def test_reference_runs_are_the_most_similar_environments():
    envs = {"a": {"cpu": 1, "mem": 8}, "b": {"cpu": 1, "mem": 16}, "c": {"cpu": 2, "mem": 16}}
    assert history.most_similar(envs, {"cpu": 1, "mem": 16}) == ["b"]
    assert sorted(history.most_similar(envs, {"cpu": 3, "mem": 8, "os": "x"})) == ["a"]
    assert sorted(history.most_similar(envs, {"cpu": 9})) == ["a", "b", "c"]


def test_detect_run_end_to_end_on_a_shifted_counter():
    n = 20
    history = pd.DataFrame({"app.load": pd.array([1] * n, dtype="Int64"), "x.cpu": pd.array([1] * n, dtype="Int64"),
                            "x.mem": pd.array([0] * n, dtype="Int64")})
    target = history.assign(**{"x.cpu": pd.array([3] * 15 + [1] * 5, dtype="Int64")})
    r = rules(((), "x.cpu=1", 1.0, 1.0, 1.0), ((), "x.mem=0", 1.0, 1.0, 1.0))
    models = [rule_ensemble.Model(f"m{i}", r, {"cpu": "a"}) for i in range(3)]
    res = rule_ensemble.detect_run(target, {"cpu": "a"}, models, r, delta_threshold=0.1, min_premise_intervals=10,
                            stacking_threshold=0.5)
    assert res["stacking"] == ["x.cpu"] and res["bagging"] == ["x.cpu"] and res["single"] == ["x.cpu"]
    assert res["severity"]["x.cpu"] == pytest.approx(15 / 20)
    assert res["intervals"]["x.cpu"] == list(range(15))
    # Δ of conf 1.0 -> 0.25: 1 - 0.25 / sqrt(0.25^2 + 0.75^2) = 0.683772
    assert res["counter_scores"]["x.cpu"] == pytest.approx(0.683772, abs=1e-6)
    assert res["counter_scores"]["x.mem"] == 0.0


def test_change_magnitude_is_the_median_distance_outside_the_band():
    values = np.array([10.0, 10, 12, 13, 30])
    # violation intervals 2, 3: distances from [9, 11] are 1 and 2 -> median 1.5; scale max(|10|, 11 - 9) = 10
    assert rule_verdict.change_magnitude(values, [2, 3], 9.0, 10.0, 11.0) == pytest.approx(0.15)
    # a burst: interval 4 only -> (30 - 11) / 10
    assert rule_verdict.change_magnitude(values, [4], 9.0, 10.0, 11.0) == pytest.approx(1.9)
    # inside the band: 0, whatever broke the rule
    assert rule_verdict.change_magnitude(values, [0, 1], 9.0, 10.0, 11.0) == 0.0
    # a counter idling near 0: the band width (0.002), not the level (0.001), is the scale
    assert rule_verdict.change_magnitude(np.array([0.003]), [0], 0.0, 0.001, 0.002) == pytest.approx(0.5)
    assert math.isnan(rule_verdict.change_magnitude(np.array([np.nan]), [0], 0.0, 0.0, 0.0))


def test_practical_filter_unflags_small_changes_in_every_combiner():
    flagged = {"single": ["a", "b"], "bagging": ["a", "b", "c"], "stacking": ["b", "c"]}
    kept, small = rule_verdict.practical_filter(flagged, {"a": 0.01, "b": 0.3, "c": float("nan")}, 0.02)
    assert small == {"a": 0.01}
    assert kept == {"single": ["b"], "bagging": ["b", "c"], "stacking": ["b", "c"]}   # NaN: nothing to measure, kept
    assert flagged["single"] == ["a", "b"]                                               # the input is left alone


def test_environment_dependent_counters_by_kruskal_wallis():
    # two labs of four runs; "lab" separates them completely: ranks 1-4 vs 5-8,
    # H = 12 / (8 * 9) * (10² / 4 + 26² / 4) - 3 * 9 = 5.3333, p = chi2(1).sf(5.3333) = 0.02092
    env = ["A"] * 4 + ["B"] * 4
    levels = pd.DataFrame({
        "c.lab": [10.0, 10.1, 9.9, 10.2, 20.0, 20.2, 19.8, 20.1],
        "c.same": [5.0, 5.3, 4.9, 5.1, 5.2, 4.8, 5.05, 5.15],         # interleaved: no lab effect
        "c.tiny": [100.0, 100.1, 100.05, 100.15, 100.6, 100.7, 100.65, 100.8],  # separated but 0.6 % apart
    })
    dep = labs.environment_dependent(levels, env, alpha=0.05, min_rel_change=0.02)
    assert set(dep) == {"c.lab"} and dep["c.lab"] == pytest.approx(0.02092, abs=1e-5)
    assert labs.environment_dependent(levels, env, alpha=0.01, min_rel_change=0.02) == {}
    assert labs.environment_dependent(levels, ["A"] * 8, alpha=0.05, min_rel_change=0.0) == {}   # one lab: untestable
    # a third lab whose runs never measured c.lab leaves it two groups (the same H and p); a counter
    # only lab A measured has one group: untestable
    gaps = pd.concat([levels, pd.DataFrame({"c.lab": [np.nan] * 2, "c.same": [5.0, 5.1], "c.tiny": [100.0] * 2},
                                           index=[8, 9])])
    gaps["c.only_a"] = [1.0, 2.0, 3.0, 4.0] + [np.nan] * 6
    dep = labs.environment_dependent(gaps, env + ["C", "C"], alpha=0.05, min_rel_change=0.02)
    assert set(dep) == {"c.lab"} and dep["c.lab"] == pytest.approx(0.02092, abs=1e-5)


def test_stacking_score_sums_s_over_the_counters_the_practical_filter_kept():
    result = {"s": pd.Series({"a": 0.9, "b": 0.3, "c": 0.6}), "small_changes": {"c": 0.01}}
    assert rule_verdict.stacking_score(result) == pytest.approx(0.9 + 0.3)


def test_stacking_pvalue_by_hand():
    """null 1, 2, 3 with 4 models (resolution 1/4): logs ln 1.25, ln 2.25, ln 3.25, their mean and
    standard deviation; a score of 3.5 -> ln 3.75, above every normal score (no floor);
    t = (ln 3.75 - mean) / (sd sqrt(1 + 1/3)); Student t with 2 df: sf(t) = 1/2 - t / (2 sqrt(t² + 2))."""
    logs = [math.log(1.25), math.log(2.25), math.log(3.25)]
    t = (math.log(3.75) - statistics.mean(logs)) / (statistics.stdev(logs) * math.sqrt(4 / 3))
    expected = 0.5 - t / (2 * math.sqrt(t * t + 2))
    assert rule_verdict.stacking_pvalue(3.5, [1.0, 2.0, 3.0], 4) == pytest.approx(expected, rel=1e-9)
    # 1.2 lies below two of the three normal scores: p >= 2/4 whatever the fit says
    assert rule_verdict.stacking_pvalue(1.2, [1.0, 2.0, 3.0], 4) >= 0.5
    result = {"s": pd.Series({"a": 2.0, "b": 1.5}), "small_changes": {}, "weights": {"m1": 0.5, "m2": 0.5, "m3": 0, "m4": 0}}
    evidence = rule_verdict.stacking_evidence(result, [1.0, 2.0, 3.0])
    assert evidence == {"score": 3.5, "p_value": round(expected, 6), "normal_runs": 3}
    assert rule_verdict.stacking_evidence(result, [])["p_value"] is None


def test_pruning_masks_are_kept_for_the_next_night_under_their_runs_edges_params_and_code(tree):
    from pipelines import config
    from pipelines.storage import atomic, store
    for r in ("s-1", "s-2", "s-3"):
        config.info_path(r).parent.mkdir(parents=True, exist_ok=True)
        atomic.write_json_atomic(config.info_path(r), {"run_id": r, "key": f"frame-{r}"})
    index = {r: {"system": "s", "verdict": "pass", "started_at": f"2026-01-0{i}T00:00:00Z"}
             for i, r in enumerate(("s-1", "s-2", "s-3"), 1)}

    def ctx(params):
        return rule_detection.DetectContext(index=index, edges={"x.cpu": {"edges": [0.0, 1.0], "k": 1}}, reference=1.0,
                                           params=rule_detection.DetectParams.of(params),
                                           mine_params=rule_mining.MiningParams.of({"algorithm": "apriori", "min_support": 0.1,
                                                                                      "min_confidence": 0.9, "max_len": 2}),
                                           models_dir=tree,
                                           single_dir=tree, cache=rule_detection.DetectCache(store.FrameStore(1.0)),
                                           lab_kw={}, significance={})
    params = {"delta_threshold": 0.1, "min_premise_intervals": 10, "stacking_threshold": 0.5,
              "prune_unstable_rules": True, "new_environment_abstain": True, "min_rel_change": 0.02,
              "change_band_pct": [5, 95]}
    night = ctx(params)
    masks = {("s-1", "s-2"): np.array([True, False, True]), ("s-2", "s-1"): np.array([False, False]),
             ("s-3", "s-1"): np.array([], dtype=bool)}
    for (m, r), mask in masks.items():
        night.cache.unstable[(night.tag, m, r)] = mask
    night.cache.unstable[(night.tag, "s-1", "s-9")] = np.array([True])          # a run outside the passed runs
    night.cache.unstable[("other-edges", "s-1", "s-2")] = np.array([True])      # another night's edges
    passed = ["s-1", "s-2", "s-3"]
    assert rule_detection.save_pruning("s", night, passed) == 3
    nxt = ctx(params)
    assert rule_detection.load_pruning("s", nxt, passed) == 3
    assert set(nxt.cache.unstable) == {(nxt.tag, m, r) for m, r in masks}
    assert all(np.array_equal(nxt.cache.unstable[(nxt.tag, m, r)], mask) for (m, r), mask in masks.items())
    # another threshold, another passed run, a renormalised frame: the masks are not those
    assert rule_detection.load_pruning("s", ctx({**params, "delta_threshold": 0.2}), passed) == 0
    assert rule_detection.load_pruning("s", ctx(params), ["s-1", "s-2"]) == 0
    atomic.write_json_atomic(config.info_path("s-2"), {"run_id": "s-2", "key": "frame-s-2-again"})
    assert rule_detection.load_pruning("s", ctx(params), passed) == 0
    config.pruning_masks_path("s").write_bytes(b"not an npz")                   # torn: computed again
    assert rule_detection.load_pruning("s", ctx(params), passed) == 0


def test_run_levels_are_kept_for_the_next_night_and_a_band_reads_only_its_counters(tree):
    """Three runs written as normalize writes them, one with a load-scaled counter: the levels and
    peaks the store computes are written and read back equal (values, counters, order, dtype) in
    a new store under the same key, refused under another; a run's columns read alone equal those
    columns of the whole run at the reference (the load counter scales them, read or not)."""
    from pipelines import config
    from pipelines.storage import atomic, store
    rng = np.random.default_rng(3)
    runs = ["s-1", "s-2", "s-3"]
    for i, r in enumerate(runs):
        load = 100.0 + 10 * i + rng.normal(0, 1, 40)
        frame = pd.DataFrame({"h.load": load, "h.cpu": 0.5 * load + rng.normal(0, 1, 40),
                              "h.mem": rng.normal(50, 5, 40), **({"h.extra": np.arange(40.0)} if i == 2 else {})})
        frame.loc[3, "h.mem"] = np.nan
        config.frame_path(r).parent.mkdir(parents=True, exist_ok=True)
        atomic.write_parquet_atomic(config.frame_path(r), frame)
        atomic.write_json_atomic(config.info_path(r), {"run_id": r, "key": f"frame-{r}", "load_counter": "h.load",
                                                       "load_fits": {"h.cpu": [0.5, 0.0]}})
    night = store.FrameStore(110.0)
    levels, peaks = night.levels(runs, 110.0), night.peaks(runs, 110.0)
    path = tree / "s.levels.npz"
    assert night.save_summaries(path, runs[:2] + ["s-9"], "key-1") == 4        # s-3 not asked, s-9 not held
    assert night.save_summaries(path, runs, "key-1") == 6
    nxt = store.FrameStore(110.0)
    assert nxt.load_summaries(path, "key-2") == 0 and not nxt._levels
    assert nxt.load_summaries(path, "key-1") == 6
    for r in runs:          # read back, not computed: no frame was read
        assert r not in nxt._normalized
    pd.testing.assert_frame_equal(nxt.levels(runs, 110.0), levels)
    pd.testing.assert_frame_equal(nxt.peaks(runs, 110.0), peaks)
    assert list(nxt.levels(["s-3"], 110.0).columns) == ["h.load", "h.cpu", "h.mem", "h.extra"]
    assert not nxt._normalized
    path.write_bytes(b"torn")
    assert store.FrameStore(110.0).load_summaries(path, "key-1") == 0
    # the scaled counter by hand: x * (0.5 * 110) / (0.5 * load)
    whole = store.FrameStore(110.0)["s-2"]
    assert whole["h.cpu"].to_numpy() == pytest.approx(
        atomic.read_parquet(config.frame_path("s-2"))["h.cpu"].to_numpy() * 110.0 / load_of("s-2"))
    for cols in (["h.cpu"], ["h.mem", "h.cpu", "h.gone"], ["h.load"]):
        alone = store.FrameStore(110.0).columns_at("s-2", 110.0, cols)
        pd.testing.assert_frame_equal(alone, whole[[c for c in cols if c != "h.gone"]])
        assert list(alone.columns) == [c for c in cols if c != "h.gone"]


def load_of(run_id: str) -> np.ndarray:
    from pipelines import config
    from pipelines.storage import atomic
    return atomic.read_parquet(config.frame_path(run_id))["h.load"].to_numpy()


def test_a_frame_read_in_part_gives_the_columns_it_has_each_once_in_the_order_asked(tree):
    from pipelines.storage import atomic
    path = tree / "f.parquet"
    atomic.write_parquet_atomic(path, pd.DataFrame({"a": [1.0, 2.0], "b": [3.0, 4.0], "c": [5.0, 6.0]}))
    part = atomic.read_parquet(path, columns=["c", "gone", "a", "c"])
    assert list(part.columns) == ["c", "a"] and part["c"].tolist() == [5.0, 6.0] and part["a"].tolist() == [1.0, 2.0]
    assert list(atomic.read_parquet(path, columns=[]).columns) == [] and len(atomic.read_parquet(path, columns=[])) == 2
    pd.testing.assert_frame_equal(atomic.read_parquet(path), pd.read_parquet(path))
