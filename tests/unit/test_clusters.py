"""clusters: seed 000's running example (Tables 1 and 2) and a broken correlation that
per-counter checks miss.  Every expected value is computed by hand or printed in the paper."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import ks_2samp

from pipelines import params_schema
from pipelines.detectors.clusters import models as cluster_models

# Table 1 of seed 000 (Shang et al. 2015): 8 counters, 8 observations, old and new version.
OLD = pd.DataFrame({
    "CPU Privileged": [29.17, 27.29, 29.90, 33.23, 31.43, 30.91, 31.15, 30.21],
    "CPU User": [33.02, 29.48, 28.23, 26.25, 26.95, 26.22, 26.04, 29.38],
    "IO read byte/sec": [0.0] * 8,
    "IO read op/sec": [0.0] * 8,
    "IO write byte/sec": [7808.09, 4481.75, 7787.79, 4715.79, 7349.50, 4499.50, 4641.17, 8319.15],
    "IO write op/sec": [180.36, 163.29, 174.36, 178.87, 188.47, 192.43, 187.91, 178.80],
    "Memory Working set": [144867, 144888, 146522, 145920, 145822, 145822, 144364, 144499],
    "Memory Private byte": [146203, 146625, 147763, 147681, 147583, 147587, 146153, 146305]}, dtype=float)
NEW = pd.DataFrame({
    "CPU Privileged": [29.38, 30.52, 30.21, 33.02, 31.77, 28.23, 29.48, 28.02],
    "CPU User": [26.98, 27.29, 31.04, 27.92, 27.08, 28.23, 32.29, 33.54],
    "IO read byte/sec": [175008.30, 176262.16, 177867.55, 178745.03, 181573.41, 174242.61, 165634.03, 163400.87],
    "IO read op/sec": [1611.37, 1628.83, 1655.19, 1649.85, 1654.89, 1615.44, 1514.00, 1526.93],
    "IO write byte/sec": [4364.58, 7908.74, 4514.13, 7588.77, 4887.06, 7767.46, 4262.85, 3961.54],
    "IO write op/sec": [190.99, 183.79, 188.82, 189.32, 189.58, 186.40, 179.88, 167.89],
    "Memory Working set": [144499, 144499, 144499, 144753, 144753, 145056, 146874, 144503],
    "Memory Private byte": [146326, 146350, 146379, 146649, 146682, 146981, 148759, 146383]}, dtype=float)
KEPT = ["CPU Privileged", "CPU User", "IO read byte/sec", "IO write byte/sec", "IO write op/sec",
        "Memory Private byte"]
# Table 2, lower triangle, rows and columns in KEPT order.
TABLE_2 = {("CPU User", "CPU Privileged"): 0.58,
           ("IO read byte/sec", "CPU Privileged"): 0.08, ("IO read byte/sec", "CPU User"): 0.80,
           ("IO write byte/sec", "CPU Privileged"): 0.90, ("IO write byte/sec", "CPU User"): 0.07,
           ("IO write byte/sec", "IO read byte/sec"): 0.15,
           ("IO write op/sec", "CPU Privileged"): 0.44, ("IO write op/sec", "CPU User"): 0.52,
           ("IO write op/sec", "IO read byte/sec"): 0.73, ("IO write op/sec", "IO write byte/sec"): 0.93,
           ("Memory Private byte", "CPU Privileged"): 0.84, ("Memory Private byte", "CPU User"): 0.06,
           ("Memory Private byte", "IO read byte/sec"): 0.14, ("Memory Private byte", "IO write byte/sec"): 0.12,
           ("Memory Private byte", "IO write op/sec"): 0.03}
PARAMS = dict(r2_threshold=0.9, max_clusters=20, error_threshold=0.30, error_floor=0.01)


def test_pearson_distance_of_both_versions_is_table_2():
    both = pd.concat([OLD, NEW], ignore_index=True)[KEPT]
    dist = cluster_models.pearson_distance(both)
    for (a, b), expected in TABLE_2.items():
        assert round(float(dist.loc[a, b]), 2) == expected, (a, b)
        assert dist.loc[a, b] == dist.loc[b, a]


def test_pearson_distance_is_equation_1_on_a_hand_case():
    # x = 1,2,3; y = 3,2,1 (rho = -1 -> d = 1); z = 1,2,4 (rho(x,z) = 0.9820 -> d = 0.0180)
    frame = pd.DataFrame({"x": [1.0, 2, 3], "y": [3.0, 2, 1], "z": [1.0, 2, 4]})
    dist = cluster_models.pearson_distance(frame)
    assert dist.loc["x", "y"] == pytest.approx(1.0)
    # rho(x, z) = cov/(sd sd) = (3/2) / (1 x sqrt(7/3)) = 0.98198
    assert 1.5 / np.sqrt(7 / 3) == pytest.approx(0.98198, abs=1e-5)
    assert dist.loc["x", "z"] == pytest.approx(1 - 0.98198, abs=1e-5)
    assert dist.loc["y", "z"] == pytest.approx(0.98198, abs=1e-5)      # rho < 0: |rho|


def test_redundancy_analysis_removes_the_counters_the_paper_names():
    both = pd.concat([OLD, NEW], ignore_index=True)
    removed = cluster_models.redundant_counters(both, r2_threshold=0.9)
    assert [c for c, _ in removed] == ["IO read op/sec", "Memory Working set"]
    # R^2 of Memory Working set on the rest, once IO read op/sec is gone, by least squares:
    rest = both.drop(columns=["IO read op/sec", "Memory Working set"])
    x = np.column_stack([np.ones(len(both)), rest.to_numpy()])
    y = both["Memory Working set"].to_numpy()
    res = y - x @ np.linalg.lstsq(x, y, rcond=None)[0]
    assert removed[1][1] == pytest.approx(1 - res.var() / y.var(), abs=1e-4)


def test_calinski_harabasz_from_distances_by_hand():
    # points on a line at 0, 1, 10, 11: clusters {0,1}, {10,11}
    pos = np.array([0.0, 1.0, 10.0, 11.0])
    dist = np.abs(pos[:, None] - pos[None, :])
    labels = np.array([1, 1, 2, 2])
    # W: each cluster (1^2 + 1^2)/(2*2) = 0.5, so 1;  T = (2 x (1+100+121+81+100+1))/(2*4) = 101
    # CH = ((101 - 1)/(2 - 1)) / (1/(4 - 2)) = 200, as between/within sums of squares give on the
    # line: B = 2(5^2) + 2(5^2) = 100, W = 4 x 0.5^2 = 1
    assert cluster_models.calinski_harabasz(dist, labels) == pytest.approx(200.0)


def test_the_running_example_gives_the_papers_clusters_targets_and_verdict():
    result = cluster_models.clustered_regression(OLD, NEW, cluster_models.ModelSettings(**PARAMS))
    groups = {frozenset(c["counters"]): c for c in result["clusters"]}
    assert set(groups) == {frozenset({"CPU Privileged", "IO read byte/sec"}),
                           frozenset({"IO write op/sec", "Memory Private byte"}),
                           frozenset({"CPU User", "IO write byte/sec"})}            # §4.2.3
    assert {c["target_counter"] for c in result["clusters"]} == {"IO read byte/sec", "IO write op/sec",
                                                                   "CPU User"}      # §4.3.1
    assert result["redundant_counters"].keys() == {"IO read op/sec", "Memory Working set"}
    assert result["calinski_harabasz"]["3"] == max(result["calinski_harabasz"].values())

    def simple_error(target, predictor):          # y = a + b x fitted on the old version, by hand;
        x, y = OLD[predictor].to_numpy(), OLD[target].to_numpy()      # mean |y - yhat| / mean |y|
        b = ((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum()
        a = y.mean() - b * x.mean()
        pred = a + b * NEW[predictor].to_numpy()
        return float(np.mean(np.abs(NEW[target].to_numpy() - pred)) / np.mean(np.abs(NEW[target].to_numpy())))

    errors = {c["target_counter"]: c["error"] for c in result["clusters"]}
    # old IO reads are all 0: the model predicts 0 and misses every byte read (the paper's 100 %)
    assert errors["IO read byte/sec"] == pytest.approx(1.0)
    assert errors["IO write op/sec"] == pytest.approx(simple_error("IO write op/sec", "Memory Private byte"), abs=1e-6)
    assert errors["CPU User"] == pytest.approx(simple_error("CPU User", "IO write byte/sec"), abs=1e-6)
    assert errors["IO write op/sec"] == pytest.approx(0.045, abs=0.001)          # the paper: 4 %
    assert errors["CPU User"] == pytest.approx(0.093, abs=0.001)                 # the paper: 2 %
    assert result["verdict"] == "fail" and result["max_prediction_error"] == pytest.approx(1.0)
    assert [c["regression"] for c in result["clusters"]] == [True, False, False]   # worst first
    flags, scores = cluster_models.flagged(result)
    assert flags == ["IO read byte/sec", "CPU Privileged"] and scores["CPU User"] == errors["CPU User"]


def test_a_broken_correlation_that_per_counter_checks_miss_is_caught():
    """Baseline: b follows a; c and d share a faster wave (with noise).  Target: b is a quarter
    period out of phase with a -- each counter keeps its distribution (KS, median and the
    baseline's range see nothing), but b no longer follows a, and the {a, b} model fails."""
    t = np.arange(96)
    rng = np.random.default_rng(3)
    sine = lambda period, phase=0.0: np.sin(2 * np.pi * t / period + phase)

    def run(phase_b: float) -> pd.DataFrame:
        shared = 100 * sine(48)                      # a slow load swing moves every counter a little
        noise = lambda sd: rng.normal(0, sd, t.size)
        return pd.DataFrame({"a": 1000 + shared + 600 * sine(24) + noise(5),
                             "b": 1000 + shared + 600 * sine(24, phase_b) + noise(5),
                             "c": 1000 + shared + 300 * sine(7) + noise(60),
                             "d": 1000 + shared + 300 * sine(7) + noise(60)})
    old, new = run(0.0), run(np.pi / 2)
    for col in old:                                       # per-counter checks: nothing to see
        assert ks_2samp(old[col], new[col]).pvalue > 0.5
        assert abs(new[col].median() / old[col].median() - 1) < 0.05
        assert new[col].between(old[col].min() - 20, old[col].max() + 20).mean() > 0.95
    result = cluster_models.clustered_regression(old, new, cluster_models.ModelSettings(**PARAMS))
    worst = result["clusters"][0]
    assert set(worst["counters"]) == {"a", "b"} and worst["regression"] and worst["error"] > 0.5
    assert result["verdict"] == "fail" and result["max_prediction_error"] == worst["error"]
    assert set(result["clusters"][1]["counters"]) == {"c", "d"} and result["clusters"][1]["error"] < 0.15
    same = cluster_models.clustered_regression(old, run(0.0), cluster_models.ModelSettings(**PARAMS))     # b still follows a
    assert same["verdict"] == "pass" and same["max_prediction_error"] < 0.15


def test_the_verdict_is_calibrated_on_the_normal_runs_unless_a_threshold_is_set():
    null = [0.10, 0.12, 0.11, 0.13, 0.12]
    from pipelines.stats import pvalues
    high = cluster_models.judge(0.50, null, false_alarm_rate=0.05, error_threshold=None)
    assert high["verdict"] == "fail" and high["cluster_threshold"] == 0.13
    assert high["p_value"] == pytest.approx(pvalues.calibrated_pvalue(0.50, null, resolution=cluster_models.RESOLUTION),
                                            abs=1e-6)
    assert cluster_models.judge(0.115, null, false_alarm_rate=0.05, error_threshold=None)["verdict"] == "pass"
    # the paper's fixed 30 %: an error of 0.2 passes whatever the normal runs did
    assert cluster_models.judge(0.20, null, false_alarm_rate=0.05, error_threshold=0.30)["verdict"] == "pass"
    assert cluster_models.judge(0.31, [], false_alarm_rate=0.05, error_threshold=0.30)["verdict"] == "fail"
    assert cluster_models.judge(0.9, [0.1], false_alarm_rate=0.05, error_threshold=None)["verdict"] is None


def test_a_run_judged_across_labs_is_decided_against_the_normal_runs_modelled_across_labs():
    """A new-lab run whose largest excess error is 0.2.  Same-lab null: 59 normal runs at 0 (no
    positive error): p = (0 + 1)/(59 + 1) = 1/60 <= 0.05, fail.  Normal runs modelled across labs
    as ``insufficient``: 9 at 0 and one at 0.5, k = 1 positive: p = (1 + 1)/(10 + 1) = 2/11, pass.
    A run of a lab its baseline shares keeps the same-lab null."""
    cluster = {"counters": ["a", "b"], "target_counter": "a", "error": 0.25, "excess_error": 0.2}
    same = {f"n{i}": 0.0 for i in range(59)}
    cross = {"insufficient": {**{f"n{i}": 0.0 for i in range(9)}, "n9": 0.5}, "adjusted": {}}
    params = cluster_models.ClusterParams.of({**params_schema.defaults()["clusters"], "false_alarm_rate": 0.05,
                                              "error_threshold": None})

    def result(status):
        return {"verdict": "pass", "max_excess_error": 0.2, "clusters": [cluster], "lab": {"status": status}}
    across = cluster_models.judge_matched(result("insufficient"), same, cross, params, "t")
    assert across["null"] == "cross_lab" and across["verdict"] == "pass"
    assert across["p_value"] == pytest.approx(2 / 11, abs=1e-6) and across["cluster_threshold"] == 0.5
    within = cluster_models.judge_matched(result("same_lab"), same, cross, params, "t")
    assert within["null"] == "same_lab" and within["verdict"] == "fail"
    assert within["p_value"] == pytest.approx(1 / 60, abs=1e-6) and within["flagged_counters"] == ["a", "b"]
    # 'adjusted' has no run modelled across labs here: the same-lab null judges it
    assert cluster_models.judge_matched(result("adjusted"), same, cross, params, "t")["null"] == "same_lab"


def test_constant_counters_and_more_counters_than_intervals():
    rng = np.random.default_rng(0)
    old = pd.DataFrame(rng.normal(100, 5, (6, 12)), columns=[f"k{i}" for i in range(12)]).assign(flat=1.0)
    new = old + rng.normal(0, 0.5, old.shape)
    new["flat"] = 1.0
    result = cluster_models.clustered_regression(old, new, cluster_models.ModelSettings(**PARAMS))
    assert result["constant_counters"] == ["flat"]
    assert all(np.isfinite(c["error"]) for c in result["clusters"])
    assert result["verdict"] == "pass"


def test_redundancy_updates_equal_a_fresh_inverse_at_every_removal():
    """The removals' R² come from rank-one updates of one inverse (pipelines/detectors/clusters/models.py); each
    must equal R²_j = 1 - 1/(C_S⁻¹)_jj computed afresh from the correlation matrix of the counters
    still in, and the counter removed must be the one with the largest of them."""
    rng = np.random.default_rng(3)
    base = rng.normal(size=(200, 4))
    cols = {f"c{i}": base[:, i % 4] * (1 + 0.1 * i) + rng.normal(0, 0.05 + 0.05 * (i % 3), 200) for i in range(12)}
    frame = pd.DataFrame(cols)
    removed = cluster_models.redundant_counters(frame, r2_threshold=0.9, ridge=1e-6)
    assert len(removed) >= 4                      # 12 counters from 4 sources: most are redundant
    still = list(frame.columns)
    corr = np.corrcoef(frame.to_numpy(), rowvar=False)
    for name, r2 in removed:
        idx = [frame.columns.get_loc(c) for c in still]
        inv = np.linalg.inv(corr[np.ix_(idx, idx)] + 1e-6 * np.eye(len(idx)))
        fresh = 1.0 - 1.0 / np.clip(np.diag(inv), 1.0, None)
        assert still[int(np.argmax(fresh))] == name
        assert r2 == pytest.approx(float(fresh.max()), abs=1e-6)
        still.remove(name)
    idx = [frame.columns.get_loc(c) for c in still]
    inv = np.linalg.inv(corr[np.ix_(idx, idx)] + 1e-6 * np.eye(len(idx)))
    assert (1.0 - 1.0 / np.clip(np.diag(inv), 1.0, None)).max() <= 0.9    # it stopped where it should


def test_distances_do_not_depend_on_how_the_correlations_are_summed():
    """numpy's matrix form and pandas' pairwise loop differ by ~1e-13; rounded to
    DISTANCE_DECIMALS they give the same distances, exactly symmetric, so the same merges."""
    rng = np.random.default_rng(5)
    base = rng.normal(size=(300, 2))
    frame = pd.DataFrame({f"c{i}": base[:, i % 2] * (1 + i) + rng.normal(0, 0.3, 300) for i in range(6)})
    rho = np.round(frame.corr().to_numpy(), cluster_models.DISTANCE_DECIMALS)   # pandas' pairwise form, by hand
    by_hand = np.where(rho >= 0, 1.0 - rho, np.abs(rho))
    np.fill_diagonal(by_hand, 0.0)
    dist = cluster_models.pearson_distance(frame).to_numpy()              # no gaps: numpy's form
    assert np.array_equal(dist, by_hand)
    assert np.array_equal(dist, dist.T)
    with_gap = frame.copy()
    with_gap.iloc[0, 0] = np.nan                                    # a gap: pandas' form, still symmetric
    assert np.array_equal(cluster_models.pearson_distance(with_gap).to_numpy(), cluster_models.pearson_distance(with_gap).to_numpy().T)


REDUNDANCY_PROBE = """
import json
import numpy as np, pandas as pd
from pipelines.detectors.clusters.models import redundant_counters
rng = np.random.default_rng(7)
mix = rng.normal(size=(600, 12)) @ rng.normal(size=(12, 40))       # 40 counters from 12 sources
cols = {f"c{i:02d}": mix[:, i] for i in range(40)}
cols.update({f"d{i:02d}": mix[:, i].copy() for i in range(0, 40, 4)})  # 10 exact copies (a p95 equal to its p99)
frame = pd.DataFrame(cols)
shuffled = frame.sample(frac=1.0, random_state=3)       # the same rows, summed in another order
print(json.dumps([redundant_counters(frame, r2_threshold=0.9), redundant_counters(shuffled, r2_threshold=0.9)]))
"""


def test_redundancy_removes_the_same_counters_whatever_path_this_machine_takes():
    """Two counters with the same signal have the same R² up to the inverse's rounding noise, which
    depends on the BLAS kernel, its threads and the order the rows are summed in; another machine
    once removed the other one.  Every kind of path this processor can take is tried, each in its
    own process (OpenBLAS and numpy read these variables when they load): one or two BLAS threads,
    the oldest and newest OpenBLAS kernels whose instructions the CPU has, numpy with its SIMD
    levels switched off, and the rows shuffled.  A kernel the CPU lacks is never forced (it would
    die of SIGILL): the test names what it left out here, and why."""
    import json
    import warnings

    from tests import machine_variants

    ran = machine_variants.run_everywhere(REDUNDANCY_PROBE)
    assert len(ran) >= 2                          # at least the default and one thread
    outputs = []
    for extra, path, printed in ran:
        assert machine_variants.took(extra, path), (extra, path)      # each variant took the path it asked for
        outputs += json.loads(printed)            # the rows in order, then shuffled
    assert all(out == outputs[0] for out in outputs[1:])
    removed = [name for name, _ in outputs[0]]
    for i in range(0, 40, 4):       # while both copies are in, their R² are equal: the earlier column goes first
        c, d = f"c{i:02d}", f"d{i:02d}"
        assert d not in removed or (c in removed and removed.index(c) < removed.index(d))
    assert any(f"d{i:02d}" in removed for i in range(0, 40, 4))     # the rule above was put to the test
    _, left_out = machine_variants.variants()
    if left_out:
        warnings.warn("not run on this processor: " + "; ".join(f"{k} ({why})" for k, why in left_out.items()),
                      stacklevel=1)


@pytest.mark.parametrize("eps", [1e-14, -1e-14])
def test_uncorrelated_counters_are_one_apart_whatever_the_sign_of_the_noise(eps):
    """Equation 1 jumps from 1 (ρ = +0) to 0 (ρ = -0).  x and y are orthogonal (ρ = 0 exactly by
    hand: products 1, -1, -1, 1); y + eps·x has ρ = eps·|x|/|y + eps·x| ≈ eps, the size of the
    rounding noise that differs between machines.  Rounded first, ρ is 0 both ways: distance 1.
    (Distances rounded after the formula gave 1.0 for +1e-14 and 0.0 for -1e-14.)"""
    x = np.array([1.0, -1.0, 1.0, -1.0])
    y = np.array([1.0, 1.0, -1.0, -1.0])
    assert float(np.dot(x, y)) == 0.0
    frame = pd.DataFrame({"x": x, "y": y + eps * x})
    assert 0 < abs(float(np.corrcoef(frame["x"], frame["y"])[0, 1])) < 1e-12
    dist = cluster_models.pearson_distance(frame)
    assert dist.loc["x", "y"] == 1.0 and dist.loc["y", "x"] == 1.0


def _select_by_every_p_value(old: pd.DataFrame, new: pd.DataFrame, counters: list[str]) -> tuple[str, float]:
    """§4.3.1 written out: scipy's p-value of every counter, the smallest (then the larger statistic, the first name)."""
    tests = []
    for c in counters:
        res = ks_2samp(old[c].to_numpy(float), new[c].to_numpy(float))
        tests.append((float(res.pvalue), -float(res.statistic), c))
    p, _, counter = min(tests)
    return counter, p


def test_the_ks_statistic_is_scipys_before_its_exact_method_rounds_it():
    rng = np.random.default_rng(3)
    for n1, n2 in [(7, 5), (40, 40), (300, 120)]:
        a = np.round(rng.normal(0, 1, n1), 1)           # rounded: ties within and across the samples
        b = np.round(rng.normal(0.3, 1, n2), 1)
        assert cluster_models.ks_statistic(a, b) == ks_2samp(a, b, method="asymp").statistic
        assert cluster_models.ks_statistic(a, b) == pytest.approx(ks_2samp(a, b).statistic, abs=1.0 / (n1 * n2))


def test_the_dependent_counter_is_the_one_every_p_value_picks_ties_included():
    rng = np.random.default_rng(11)
    for trial in range(30):
        n1, n2 = int(rng.integers(5, 60)), int(rng.integers(5, 60))
        decimals = int(rng.integers(0, 3))              # coarse values: many equal statistics and p-values
        cols = [f"c{i}" for i in range(int(rng.integers(1, 12)))]
        old = pd.DataFrame({c: np.round(rng.normal(0, 1, n1), decimals) for c in cols})
        new = pd.DataFrame({c: np.round(rng.normal(rng.choice([0.0, 0.5, 2.0]), 1, n2), decimals) for c in cols})
        new[cols[-1]] = new[cols[0]].to_numpy()[:n2] if len(cols) > 1 else new[cols[-1]]   # an exact tie of two counters
        assert cluster_models.select_target(old, new, cols) == _select_by_every_p_value(old, new, cols), trial


def test_with_gaps_every_counter_gets_its_p_value():
    old = pd.DataFrame({"a": [1.0, 2.0, np.nan, 4.0, 5.0], "b": [1.0, 2.0, 3.0, 4.0, 5.0]})
    new = pd.DataFrame({"a": [9.0, 8.0, 7.0, 6.0, 5.0], "b": [1.5, 2.5, 3.5, 4.5, 5.5]})
    got, want = cluster_models.select_target(old, new, ["a", "b"]), _select_by_every_p_value(old, new, ["a", "b"])
    assert got[0] == want[0] and np.array_equal(got[1], want[1], equal_nan=True)


def _runs(seed: int, means: tuple[float, ...]) -> list[pd.DataFrame]:
    """Runs of three counters that follow one factor, each run at its own level."""
    rng = np.random.default_rng(seed)
    out = []
    for level in means:
        f = rng.normal(size=50)
        out.append(pd.DataFrame({"a": level + f + rng.normal(0, 0.2, 50), "b": 2 * level - f + rng.normal(0, 0.5, 50),
                                 "c": level * 10 + rng.normal(0, 1, 50)}))
    return out


def test_the_pooled_correlation_is_numpys_of_the_stacked_runs():
    """Each run's own centred products plus n_r (mean_r - mean)(mean_r - mean)ᵀ: the correlation of
    the runs stacked, whatever their levels, for any subset and order of counters."""
    runs = _runs(11, (10.0, 50.0, 1000.0))
    parts = [cluster_models.Moments.of(r) for r in runs]
    stacked = pd.concat(runs, ignore_index=True)
    for cols in (["a", "b", "c"], ["c", "a"]):
        expected = np.corrcoef(stacked[cols].to_numpy(), rowvar=False)
        assert np.allclose(cluster_models.pooled_correlation(parts, cols), expected, rtol=0, atol=1e-12)
    # two runs of two intervals by hand: a = 1, 3 | 5, 7 and b = 2, 2 | 4, 8 -> means 4, 4;
    # centred a = -3 -1 1 3, b = -2 -2 0 4: sum ab = 6 + 2 + 0 + 12 = 20, sum aa = 20, sum bb = 24
    hand = [cluster_models.Moments.of(pd.DataFrame({"a": [1.0, 3.0], "b": [2.0, 2.0]})),
            cluster_models.Moments.of(pd.DataFrame({"a": [5.0, 7.0], "b": [4.0, 8.0]}))]
    assert cluster_models.pooled_correlation(hand, ["a", "b"])[0, 1] == pytest.approx(20 / np.sqrt(20 * 24), abs=1e-15)


def test_the_pooled_correlation_says_none_where_a_run_cannot_give_it():
    runs = _runs(12, (1.0, 2.0))
    gap = runs[1].copy()
    gap.iloc[3, 0] = np.nan
    assert cluster_models.pooled_correlation([cluster_models.Moments.of(runs[0]), cluster_models.Moments.of(gap)],
                                             ["a", "b"]) is None               # a gap in a counter asked for
    assert cluster_models.pooled_correlation([cluster_models.Moments.of(runs[0]), cluster_models.Moments.of(gap)],
                                             ["b", "c"]) is not None           # not in those asked for
    assert cluster_models.pooled_correlation([cluster_models.Moments.of(runs[0][["a", "b"]])], ["a", "c"]) is None
    flat = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [5.0, 5.0, 5.0]})
    assert cluster_models.pooled_correlation([cluster_models.Moments.of(flat)], ["a", "b"]) is None   # b never moves


def test_the_models_are_the_same_from_the_runs_moments():
    runs = _runs(13, (5.0, 5.5, 6.0, 5.2))
    old, new = pd.concat(runs[:3], ignore_index=True), runs[3]
    parts = [cluster_models.Moments.of(r) for r in runs]
    settings = cluster_models.ModelSettings(**PARAMS)
    plain = cluster_models.clustered_regression(old, new, settings)
    pooled = cluster_models.clustered_regression(old, new, settings,
                                                 correlation=lambda cols: cluster_models.pooled_correlation(parts, cols))
    assert pooled == plain


def test_a_frame_store_keeps_what_is_derived_within_its_budget():
    from pipelines.storage.store import FrameStore

    store = FrameStore(None, derived_budget=3 * 8 * 10)          # three arrays of ten floats
    calls: list[str] = []

    def make(name: str):
        def compute():
            calls.append(name)
            return np.zeros(10)
        return compute
    for name in ("r1", "r2", "r3"):
        store.derived(("m", name), make(name))
    store.derived(("m", "r1"), make("r1"))                       # kept: not computed again, now the newest used
    store.derived(("m", "r4"), make("r4"))                       # over the budget: r2, the least recently used, goes
    store.derived(("m", "r2"), make("r2"))
    assert calls == ["r1", "r2", "r3", "r4", "r2"]
    store.derived(("big",), lambda: np.zeros(100))               # larger than the budget: returned, not kept
    store.derived(("m", "r4"), make("r4"))
    assert calls[-1] == "r2"
