"""Cause classifiers: gain, LOO by run, unknown-cause threshold, safe model files (Nguyen 2017 ch. 8)."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import skops.io as sio
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer

from pipelines.detectors.causes import features as cause_features
from pipelines.detectors.causes import prediction as cause_prediction
from pipelines.detectors.causes import training as cause_training
from pipelines.detectors.causes import classifiers as causes
from pipelines.evaluation import leave_one_out
from pipelines.storage import store


def test_random_predictor_accuracy_and_gain_by_hand():
    # 3 runs of a, 1 of b: r = (3/4)^2 + (1/4)^2 = 0.625; accuracy 0.75 -> gain 1.2
    r = causes.random_accuracy(["a", "a", "a", "b"])
    assert r == pytest.approx(0.625)
    assert causes.gain(0.75, r) == pytest.approx(1.2)
    # the thesis' Commercial 2: five causes of six runs -> r = 20 %
    assert causes.random_accuracy([c for c in "abcde" for _ in range(6)]) == pytest.approx(0.2)


def test_best_threshold_separates_known_from_unknown():
    assert causes.best_threshold(np.array([0.9, 0.8, 0.95]), np.array([0.4, 0.5])) == pytest.approx(0.8)
    assert causes.best_threshold(np.array([0.9]), np.array([])) == 0.0


def _toy_features(rng, causes=("none", "cpu", "db"), runs_per_cause=4, pairs=2):
    """Three causes that move different counters; a pair row per (run, baseline)."""
    rows = []
    shift = {"none": (0.0, 0.0), "cpu": (0.9, 0.0), "db": (0.0, 0.9)}
    for cause in causes:
        for i in range(runs_per_cause):
            for b in range(pairs):
                up_cpu, up_db = shift[cause]
                rows.append({"target": f"{cause}-{i}", "baseline": f"base-{b}", "system": "s", "cause": cause,
                             "lower:cpu": 0.0, "upper:cpu": up_cpu + rng.uniform(0, 0.05),
                             "lower:db": 0.0, "upper:db": up_db + rng.uniform(0, 0.05)})
    return pd.DataFrame(rows)


def test_loo_holds_out_every_row_of_the_run_and_learns_separable_causes():
    frame = _toy_features(np.random.default_rng(0))
    template = causes.learners()["random_forest"]
    proba = causes.loo_probabilities(template, frame, cause_features.feature_columns(frame))
    labels = causes.run_labels(frame)
    assert len(proba) == 12 and (proba.idxmax(axis=1) == labels.reindex(proba.index)).all()
    mask = causes.train_mask(frame, {"cpu-0"})
    assert not frame[mask]["target"].eq("cpu-0").any()
    assert causes.train_mask(frame.assign(baseline="cpu-0"), {"cpu-0"}).sum() == 0   # never as baseline either


def test_the_design_the_history_supports_is_chosen_and_a_tie_keeps_the_first():
    """The violation ratios of the toy runs carry the cause (cpu and db move different counters);
    their excursions are the same for every run, so a model of them alone can only guess.  In
    leave-one-run-out: ratios 12/12 right; excursions a constant, which a decision tree answers
    with the most frequent class of its training, never the held-out run's own (its class is the
    one a run short): 0/12."""
    frame = _toy_features(np.random.default_rng(0))
    frame = frame.assign(**{"below:a.cpu": 0.0, "above:a.cpu": 1.0, "below:a.db": 0.0, "above:a.db": 1.0})
    frame = frame.rename(columns={"lower:cpu": "lower:a.cpu", "upper:cpu": "upper:a.cpu",
                                  "lower:db": "lower:a.db", "upper:db": "upper:a.db"})
    template = causes.learners()["decision_tree"]
    chosen, scores = causes.choose_design(frame, [["shifts"], ["kinds"]], template, False)
    assert chosen == ["kinds"] and scores["kinds"] == {"accuracy": 1.0, "fault_nearest_accuracy": 1.0}
    assert scores["shifts"] == {"accuracy": 0.0, "fault_nearest_accuracy": 0.0}
    tie, _ = causes.choose_design(frame, [["counters"], ["kinds"]], template, False)
    assert tie == ["counters"]                                   # 12/12 both: the first listed
    assert causes.choose_design(frame, [["shifts"]], template, False) == (["shifts"], {})   # one: no LOO


def test_a_loo_bound_stops_only_a_loop_that_cannot_pass_by_hand():
    """(k − m + r) / (k + r): the best share a loop can still end with, rounded as figures are."""
    bound = causes.LooBound(0.75, None, ties_lose=False)
    assert not bound.hopeless(0, 0, 8)                  # at best 8/8
    assert not bound.hopeless(4, 2, 4)                  # at best 6/8 = 0.75: a tie, which may still win
    assert bound.hopeless(4, 3, 4)                      # at best 5/8 = 0.625 < 0.75
    assert causes.LooBound(0.75, None, ties_lose=True).hopeless(4, 2, 4)    # 0.75 ties, and ties lose
    assert causes.LooBound(1.0, None, ties_lose=True).hopeless(0, 0, 12)    # nothing passes a perfect score
    assert not causes.LooBound(1.0, None, ties_lose=True).hopeless(0, 0, 0)   # an empty loop is not judged


def test_a_design_that_cannot_pass_the_leader_is_not_measured_to_the_end_and_the_choice_is_the_same(monkeypatch):
    """The ratios name every toy run (12/12), so no later design can pass them: the excursions'
    leave-one-out is never started, and their figures say so (None).  Listed the other way round,
    the excursions (0/12) lead and the ratios are measured to the end and win, as without the
    bound.  With one process, a loop that becomes hopeless stops at the miss that makes it so."""
    from pipelines import parallel

    frame = _toy_features(np.random.default_rng(0))
    frame = frame.assign(**{"below:a.cpu": 0.0, "above:a.cpu": 1.0, "below:a.db": 0.0, "above:a.db": 1.0})
    frame = frame.rename(columns={"lower:cpu": "lower:a.cpu", "upper:cpu": "upper:a.cpu",
                                  "lower:db": "lower:a.db", "upper:db": "upper:a.db"})
    template = causes.learners()["decision_tree"]
    fits = []
    real_fit = causes.fit_rows
    monkeypatch.setattr(causes, "fit_rows", lambda *a, **k: fits.append(1) or real_fit(*a, **k))
    parallel.set_jobs(1)
    try:
        chosen, scores = causes.choose_design(frame, [["kinds"], ["shifts"]], template, False)
        assert chosen == ["kinds"] and scores["shifts"] == {"accuracy": None, "fault_nearest_accuracy": None}
        assert len(fits) == 12                                  # the ratios' 12 folds; the excursions' none
        fits.clear()
        chosen, scores = causes.choose_design(frame, [["shifts"], ["kinds"]], template, False)
        assert chosen == ["kinds"] and scores["kinds"]["accuracy"] == 1.0 and scores["shifts"]["accuracy"] == 0.0
        assert len(fits) == 24                                  # a leader that can be passed: both measured
        # a loop that misses every run, against a leader at 0.5: after k misses of 12, at best (12 - k) / 12,
        # below 0.5 from the 7th miss on; one process takes the runs in order, so it stops after 7 fits
        blind = frame.assign(**{"lower:a.cpu": 0.0, "upper:a.cpu": 0.0, "upper:a.db": 0.0})   # a constant
        labels = causes.run_labels(blind)
        fits.clear()
        bound = causes.LooBound(0.5, lambda r, p: p.idxmax() == labels[r], ties_lose=False)
        assert causes.loo_probabilities(template, blind, ["lower:a.cpu", "upper:a.cpu", "upper:a.db"],
                                        bound=bound) is None
        assert len(fits) == 7         # a constant: the majority of the other runs, never the held-out run's cause
    finally:
        parallel.set_jobs(None)


def test_a_learning_curve_stops_where_every_cause_gives_all_its_runs():
    """Four runs of each cause: from four runs per cause on, each trial trains on every run but the
    held-out one, the same as at four; the points up to four are the draws of a longer plan."""
    frame = _toy_features(np.random.default_rng(3))
    template = causes.learners()["decision_tree"]
    cols = cause_features.feature_columns(frame)
    long = causes.learning_curve(template, frame, cols, max_runs=6, repeats=3, seed=0)
    short = causes.learning_curve(template, frame, cols, max_runs=4, repeats=3, seed=0)
    assert [r["runs_per_cause"] for r in long] == [1, 2, 3, 4] and long == short


def test_held_out_cause_gets_a_low_probability_and_is_called_unknown():
    frame = _toy_features(np.random.default_rng(1))
    cols = cause_features.feature_columns(frame)
    template = causes.learners()["random_forest"]
    held = causes.held_out_cause_probabilities(template, frame, cols, ["cpu", "db"])
    assert set(held) == {"cpu", "db"} and all(len(s) == 4 for s in held.values())
    known = causes.loo_probabilities(template, frame, cols).max(axis=1)
    figures = causes.unknown_cause_figures(known, causes.run_labels(frame), held)
    assert set(figures["per_held_out_cause"]) == {"cpu", "db"}
    assert 0.0 <= figures["unknown_recall"] <= 1.0 and 0.0 < figures["tau"] <= 1.0


def test_train_system_fits_the_first_learner_and_the_comparison_reports_every_learner():
    frame = _toy_features(np.random.default_rng(2))
    params = causes.CauseParams.of({"learners": list(causes.learners()), "learning_curve_max_runs": 2,
                                    "learning_curve_repeats": 3, "learning_curve_learners": 1, "seed": 0,
                                    "feature_designs": [["counters"]], "design_learner": "random_forest",
                                    "balance_classes": True, "few_runs": 4, "learner_standard_errors": 0})
    out = cause_training.train_system(frame, params)
    assert list(out["learners"]) == ["random_forest"] == [out["best"]]      # the night's learner only
    assert "learning_curve" not in out
    assert out["random_accuracy"] == pytest.approx(1 / 3, abs=1e-4)
    # model selection, after the night: every learner, the night's row taken as it is
    compared = cause_training.compare_learners_of(frame, out["feature_blocks"], params, in_use=out["learners"])
    assert list(compared["learners"]) == list(causes.learners()) and compared["in_use"] == "random_forest"
    assert compared["learners"]["random_forest"] == out["learners"]["random_forest"]
    # the night's row, measured afresh by the comparison's own loop, is the row the night measured
    designed, columns = causes.design_frame(frame, out["feature_blocks"])
    again, _ = causes.compare_learners({"random_forest": causes.learners(0)["random_forest"]}, designed, columns,
                                       causes.run_labels(designed), True)
    assert again["random_forest"] == compared["learners"]["random_forest"]
    # standard errors 0: the most accurate learner, the first listed among ties
    top = max(v["accuracy"] for v in compared["learners"].values())
    assert compared["chosen"] == next(k for k, v in compared["learners"].items() if v["accuracy"] == top)
    assert [r["runs_per_cause"] for r in compared["learning_curve"]] == [1, 2]
    assert {r["learner"] for r in compared["learning_curve"]} == {compared["chosen"]}   # the best ranked first
    one = frame[frame["target"] == "db-0"]
    pred = cause_prediction.predict_cause(out["model"], one, out["columns"], out["classes"], tau=0.5,
                                        blocks=out["feature_blocks"], per_cause=out["per_cause"])
    assert pred["label"] == "db" and pred["fault"]["label"] == "db" and pred["known"]
    # four runs of each cause: every cause counts as learned from few runs (few_runs = 4)
    assert pred["fault"]["runs_of_cause"] == 4 and pred["fault"]["few_runs"] is True
    assert out["per_cause"]["db"] == {"runs": 4, "recall": out["per_cause"]["db"]["recall"], "few_runs": True}
    # the confusion matrix holds every LOO run once, truth by predicted
    assert sum(sum(r.values()) for r in out["confusion"].values()) == out["runs"] == 12
    assert out["fault_runs"] == 8 and 0.0 <= out["fault_nearest_accuracy"] <= 1.0
    # the classifier as a detector: fault score = 1 - P(none), the null = the normal runs'
    assert pred["fault_score"] == pytest.approx(1 - pred["none_probability"], abs=2e-4)
    assert sorted(out["null_fault_scores"]) == [f"none-{i}" for i in range(4)]
    assert all(out["null_fault_scores"][r] == out["loo_predictions"][r]["fault_score"] for r in out["null_fault_scores"])
    loo = leave_one_out.loo_classified({"loo_predictions": out["loo_predictions"]})
    assert set(loo) == set(out["loo_predictions"])
    assert len(loo["none-0"]["null_fault_scores"]) == 3 and len(loo["db-0"]["null_fault_scores"]) == 4
    assert sorted(loo["db-0"]["null_fault_scores"]) == sorted(out["null_fault_scores"].values())
    assert leave_one_out.loo_classified({"loo_predictions": {"r": {"truth": "none"}}}) == {}   # a model without fault scores


def test_balanced_weights_by_hand():
    """Three normal runs of two pairs, one fault run of one pair.  N = 4 runs, K = 2 causes:
    a normal run weighs 4 / (2 x 3) = 2/3, shared by its 2 pairs (1/3 each); the fault run
    4 / (2 x 1) = 2 on its one pair.  Sum 6 x 1/3 + 2 = 4 over 7 rows; rescaled to a mean of 1
    (x 7/4): 7/12 per normal pair and 7/2 for the fault pair, so each cause totals 3.5."""
    rows = [{"target": f"n{i}", "baseline": f"b{j}", "cause": "none"} for i in range(3) for j in range(2)]
    rows.append({"target": "f0", "baseline": "b0", "cause": "leak"})
    w = causes.balanced_weights(pd.DataFrame(rows))
    assert w[:6] == pytest.approx([7 / 12] * 6) and w[6] == pytest.approx(7 / 2)
    assert w[:6].sum() == pytest.approx(w[6:].sum()) and w.mean() == pytest.approx(1.0)


def test_balancing_changes_what_an_imbalanced_history_predicts():
    """Six normal runs and two of a fault, whose ratios overlap: a point halfway between the
    classes' centres is called normal by an unweighted logistic regression, and the fault
    when each cause weighs the same (the fault's two runs count as much as the six)."""
    rows = []
    for i, v in enumerate([0.0, 0.05, 0.1, 0.15, 0.2, 0.25]):
        rows.append({"target": f"n{i}", "baseline": "b", "system": "s", "cause": "none", "upper:x": v})
    for i, v in enumerate([0.55, 0.6]):
        rows.append({"target": f"f{i}", "baseline": "b", "system": "s", "cause": "leak", "upper:x": v})
    frame = pd.DataFrame(rows)
    template = causes.learners()["logistic_regression"]
    middle = pd.DataFrame({"upper:x": [0.4]})
    plain = causes.fit_rows(template, frame, ["upper:x"], balance=False)
    balanced = causes.fit_rows(template, frame, ["upper:x"], balance=True)
    p_plain = dict(zip(plain.classes_, plain.predict_proba(middle.to_numpy())[0]))
    p_bal = dict(zip(balanced.classes_, balanced.predict_proba(middle.to_numpy())[0]))
    assert p_bal["leak"] > p_plain["leak"]
    assert p_plain["leak"] < 0.5 < p_bal["leak"]


def test_kind_features_fold_a_counter_across_components_by_hand():
    frame = pd.DataFrame({"upper:a.cpu": [0.5, 0.0], "upper:b.cpu": [0.1, 0.2], "upper:b.mem": [0.3, np.nan],
                          "lower:a.cpu3": [0.0, 0.0], "lower:a.cpu12": [0.0, 1.0]})
    x = cause_features.design(frame, ["kinds"])
    # row 0: cpu over a, b = 0.5, 0.1 -> max .5 min .1 median .3; top component a (0.5 > 0.1 + 0.3)
    assert x.loc[0, "kind:upper:max:cpu"] == 0.5 and x.loc[0, "kind:upper:min:cpu"] == 0.1
    assert x.loc[0, "kind:upper:median:cpu"] == pytest.approx(0.3)
    assert x.loc[0, "kind:upper:top:cpu"] == 0.5 and np.isnan(x.loc[0, "kind:upper:top:mem"])
    # row 1: a sums 0.0, b sums 0.2 -> top b; digits fold: cpu3 and cpu12 are one kind cpuN
    assert x.loc[1, "kind:upper:top:cpu"] == 0.2 and x.loc[1, "kind:lower:max:cpuN"] == 1.0
    assert cause_features.counter_kind("procstat.cpu11_user_pct") == ("procstat", "cpuN_user_pct")
    assert cause_features.counter_kind("plain") == ("", "plain")
    both = cause_features.design(frame, ["counters", "kinds"])
    assert "upper:a.cpu" in both.columns and "kind:upper:max:cpu" in both.columns
    with pytest.raises(ValueError, match="feature_designs"):
        cause_features.design(frame, ["words"])


def test_shift_features_fold_the_excursions_by_kind_and_stay_out_of_the_ratio_blocks():
    ratios = pd.DataFrame({"lower": [0.0, 0.5], "upper": [0.5, 0.0], "below": [0.0, 3.0], "above": [np.e - 1, 0.0]},
                          index=["a.cpu", "b.cpu"])
    row = cause_features.pair_row(ratios)
    assert row["above:a.cpu"] == pytest.approx(1.0) and row["below:b.cpu"] == pytest.approx(math.log(4.0))
    frame = pd.DataFrame([row])
    x = cause_features.design(frame, ["shifts"])
    assert x.loc[0, "shift:above:max:cpu"] == pytest.approx(1.0) and x.loc[0, "shift:below:max:cpu"] == pytest.approx(math.log(4.0))
    assert x.loc[0, "shift:above:top:cpu"] == pytest.approx(1.0)   # a sums 1.0 above, b 0.0
    assert x.loc[0, "shift:below:top:cpu"] == pytest.approx(math.log(4.0))
    assert not any(c.startswith(("shift:", "below:", "above:")) for c in cause_features.design(frame, ["counters", "kinds"]))


def test_prediction_handles_counters_the_model_never_saw_or_the_run_lacks():
    frame = _toy_features(np.random.default_rng(3))
    cols = cause_features.feature_columns(frame)
    model = causes.fit_rows(causes.learners()["logistic_regression"], frame, cols)
    rows = frame[frame["target"] == "cpu-1"].drop(columns=["lower:db", "upper:db"]).assign(**{"upper:new": 0.5})
    pred = cause_prediction.predict_cause(model, rows, cols, sorted(frame["cause"].unique()), tau=0.0)
    assert pred["features_not_in_model"] == 1 and pred["label"] in {"none", "cpu", "db"}


def _shout(x):
    return x


def test_model_files_with_foreign_types_are_refused(tmp_path):
    safe = causes.fit_rows(causes.learners()["decision_tree"], _toy_features(np.random.default_rng(4)),
                                 ["upper:cpu", "upper:db"])
    sio.dump(safe, tmp_path / "ok.skops")
    assert store.load_model(tmp_path / "ok.skops").predict(np.array([[0.9, 0.0]]))[0] == "cpu"
    sio.dump(make_pipeline(FunctionTransformer(_shout)), tmp_path / "evil.skops")
    with pytest.raises(ValueError, match="refusing"):
        store.load_model(tmp_path / "evil.skops")


def test_a_model_of_the_fault_runs_alone_and_when_it_names_the_fault():
    """``fault_only_model`` learns ``P(cause | fault)`` from the fault runs alone, scored
    in leave-one-run-out on them; ``train_system`` keeps it only when that beats the full model's
    nearest fault (a tie keeps the full model, the simpler one).  A prediction with it names the
    fault with its probability given a fault: the mean over the run's pairs of the model's own
    probability, by hand here."""
    frame = _toy_features(np.random.default_rng(2))
    cols = cause_features.feature_columns(frame)
    labels = causes.run_labels(frame)
    template = causes.learners()["logistic_regression"]
    model, source, accuracy = causes.fault_only_model(template, frame, cols, labels, False)
    assert source == "faults_only" and accuracy == 1.0 and sorted(model.classes_) == ["cpu", "db"]
    none_only = frame[frame["cause"].isin(["none", "cpu"])]
    assert causes.fault_only_model(template, none_only, cols, labels, False) == (None, "all_runs", None)
    params = causes.CauseParams.of({"learners": ["logistic_regression"], "learning_curve_max_runs": 2,
                                    "learning_curve_repeats": 1, "learning_curve_learners": 1, "seed": 0,
                                    "feature_designs": [["counters"]], "design_learner": "random_forest",
                                    "balance_classes": False, "few_runs": 4, "learner_standard_errors": 1})
    out = cause_training.train_system(frame, params)
    # the full model names every fault (1.0): the faults-only model could at best tie, and a tie keeps
    # the full model, so its leave-one-out is not run at all
    assert out["fault_nearest_accuracy_all_runs"] == 1.0 and out["fault_nearest_accuracy_faults_only"] is None
    assert out["fault_model_from"] == "all_runs" and out["fault_model"] is None
    rows = frame[frame["target"] == "db-0"]
    pred = cause_prediction.predict_cause(out["model"], rows, out["columns"], out["classes"], tau=0.5,
                                        blocks=["counters"], fault_model=model)
    by_hand = model.predict_proba(rows[cols].to_numpy(dtype=float))[:, list(model.classes_).index("db")].mean()
    assert pred["fault"]["label"] == "db" and pred["fault"]["given_a_fault"] is True
    assert pred["fault"]["probability"] == pytest.approx(round(float(by_hand), 4))
    assert pred["label"] == "db" and pred["known"]          # the full model's own answer is unchanged


def test_choose_learner_keeps_the_first_unless_another_is_better_by_more_than_a_standard_error():
    # 20 runs, best 0.80: p' = (16 + 0.5) / 21 = 0.785714, se = sqrt(p'(1 - p') / 21) = 0.089541,
    # so anything at 0.80 - 0.089541 = 0.710459 or above is as good as the best
    order = ["random_forest", "logistic_regression", "mlp"]
    acc = {"random_forest": 0.75, "logistic_regression": 0.80, "mlp": 0.80}
    assert cause_training.choose_learner(acc, order, 20, 1.0) == "random_forest"
    assert cause_training.choose_learner(acc, order, 20, 0.0) == "logistic_regression"   # the best, first listed
    assert cause_training.choose_learner({**acc, "random_forest": 0.71}, order, 20, 1.0) == "logistic_regression"
    assert cause_training.choose_learner({**acc, "random_forest": 0.711}, order, 20, 1.0) == "random_forest"
    # a perfect score still has an error: 48 runs, p' = 48.5 / 49 = 0.989796, se = 0.014357, floor 0.985643;
    # one miss in 48 (0.979167) is below it
    perfect = {"random_forest": 47 / 48, "logistic_regression": 1.0}
    assert cause_training.choose_learner(perfect, order, 48, 1.0) == "logistic_regression"
    assert cause_training.choose_learner(perfect, order, 48, 1.6) == "random_forest"     # floor 0.977029
    with pytest.raises(ValueError):
        cause_training.choose_learner({}, order, 10, 1.0)


def test_a_feature_tables_rows_come_back_as_computed_with_what_they_lacked():
    """Two runs' rows: run x has counter a (one row's lower ratio NaN, but present), run y only b.
    Concatenated, x's rows show NaN under b and y's under a; kept with their keys and what they
    lacked, each row comes back as pair_row gave it: NaN where it had NaN, nothing where it had no
    feature, and a table built again from those rows equals the first."""
    x_rows = [{"lower:a": 0.1, "upper:a": 0.2}, {"lower:a": np.nan, "upper:a": 0.3}]
    y_rows = [{"lower:b": 0.5}]
    parts = []
    for target, rows, keys in (("x", x_rows, ["k1", "k2"]), ("y", y_rows, ["k3"])):
        part = pd.DataFrame([{"target": target, "baseline": "p", **r} for r in rows]).assign(system="s", cause="none")
        parts.append((part, keys, [sorted(set(cause_features.feature_columns(part)) - set(r)) for r in rows]))
    frame = pd.concat([p for p, _, _ in parts], ignore_index=True)
    frame = frame[cause_features.KEY_COLUMNS + cause_features.feature_columns(frame)]
    table = cause_features.with_pair_keys(frame, parts)
    assert table["absent_features"].tolist() == ['["lower:b"]', '["lower:b"]', '["lower:a", "upper:a"]']
    back = cause_features.rows_by_key(table)
    assert set(back) == {"k1", "k2", "k3"} and back["k1"] == {"lower:a": 0.1, "upper:a": 0.2}
    assert set(back["k2"]) == {"lower:a", "upper:a"} and math.isnan(back["k2"]["lower:a"])
    assert back["k3"] == {"lower:b": 0.5}
    again = pd.concat([pd.DataFrame([{"target": t, "baseline": "p", **back[k]} for k in keys])
                       .assign(system="s", cause="none") for t, keys in (("x", ["k1", "k2"]), ("y", ["k3"]))],
                      ignore_index=True)
    assert again[frame.columns].equals(frame)
    assert cause_features.rows_by_key(frame) == {}                  # a table without keys gives nothing to reuse


def test_the_counters_that_carried_a_prediction_by_hand():
    """The classifier's evidence: a counter whose violation ratio on the run lies 3 or more of the
    normal runs' deviations above their mean, on a side the predicted cause's runs raised.
    Normal runs n1, n2 (one pair row each): upper:orders.cpu 0.10, 0.20 (mean 0.15, sd 0.0707),
    upper:db.cpu 0.0, 0.0 (sd 0: the floor 0.05), lower:front.rps 0.1, 0.1.  Cause orders-cpu (f1,
    two pair rows 0.8, 0.6: mean 0.7) raises orders.cpu; cause db-lock (f2) raises db.cpu (0.5).
    Target rows: orders.cpu 0.45, 0.55 (mean 0.5: (0.5-0.15)/0.0707 = 4.95), db.cpu 0.3 ((0.3-0)/0.05
    = 6.0, but not raised by orders-cpu), front.rps 0.9 (not raised by any cause: not in the profile)."""
    frame = pd.DataFrame({
        "target": ["n1", "n2", "f1", "f1", "f2"], "baseline": ["n2", "n1", "n1", "n2", "n1"],
        "system": "shop", "cause": ["none", "none", "orders-cpu", "orders-cpu", "db-lock"],
        "upper:orders.cpu": [0.1, 0.2, 0.8, 0.6, 0.1], "upper:db.cpu": [0.0, 0.0, 0.0, 0.0, 0.5],
        "lower:front.rps": [0.1, 0.1, 0.1, 0.1, 0.1]})
    profile = cause_prediction.counter_profile(frame)
    assert profile["none_mean"] == {"upper:db.cpu": 0.0, "upper:orders.cpu": 0.15}
    assert profile["none_sd"]["upper:orders.cpu"] == pytest.approx(0.0707, abs=1e-4)
    assert profile["cause_mean"] == {"db-lock": {"upper:db.cpu": 0.5}, "orders-cpu": {"upper:orders.cpu": 0.7}}
    run = pd.DataFrame({"upper:orders.cpu": [0.45, 0.55], "upper:db.cpu": [0.3, 0.3], "lower:front.rps": [0.9, 0.9]})
    assert cause_prediction.evidence_counters(run, profile, "orders-cpu") == {"orders.cpu": pytest.approx(4.95, abs=0.01)}
    assert cause_prediction.evidence_counters(run, profile, "db-lock") == {"db.cpu": 6.0}
    calm = run.assign(**{"upper:orders.cpu": [0.3, 0.3]})           # (0.3-0.15)/0.0707 = 2.1 < 3
    assert cause_prediction.evidence_counters(calm, profile, "orders-cpu") == {}
    assert cause_prediction.evidence_counters(run, profile, None) == {} and cause_prediction.evidence_counters(run, {}, "db-lock") == {}


def test_the_counters_that_carried_a_prediction_come_in_order_of_distance_times_the_causes_raise():
    """Two counters the cause raises: cpu by 0.6 (normal 0.1 ± 0.1: mean 0.1, sd 0.1414 from 0.0, 0.2),
    latency by 0.2 (normal 0.0, sd 0: the floor 0.05).  The run: cpu 0.8 ((0.8-0.1)/0.1414 = 4.95,
    times 0.6 = 2.97), latency 0.5 ((0.5-0)/0.05 = 10, times 0.2 = 2.0): cpu first though its distance
    is the smaller; with latency at 1.0 (20 x 0.2 = 4.0) latency first."""
    frame = pd.DataFrame({"target": ["n1", "n2", "f1"], "baseline": ["n2", "n1", "n1"], "system": "s",
                          "cause": ["none", "none", "hot"], "upper:app.cpu": [0.0, 0.2, 0.7],
                          "upper:app.latency": [0.0, 0.0, 0.2]})
    profile = cause_prediction.counter_profile(frame)
    run = pd.DataFrame({"upper:app.cpu": [0.8], "upper:app.latency": [0.5]})
    got = cause_prediction.evidence_counters(run, profile, "hot")
    assert list(got) == ["app.cpu", "app.latency"]
    assert got["app.cpu"] == pytest.approx(4.95, abs=0.01) and got["app.latency"] == pytest.approx(10.0)
    assert list(cause_prediction.evidence_counters(run.assign(**{"upper:app.latency": [1.0]}), profile, "hot")) == [
        "app.latency", "app.cpu"]
