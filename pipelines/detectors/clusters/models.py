"""clusters: clustered regression models of a target against its baseline (Shang et al. 2015, seed 000).

One model of one counter (CPU, say) misses a regression that moves another (I/O reads) that
CPU does not predict.  The counters are instead grouped by how they move together, and each
group gets its own model:

1. **Reduce** (§4.1): drop counters with zero variance in both the baseline and the target;
   then redundancy analysis: a counter predictable from the others with R² over
   ``r2_threshold`` is redundant; the one with the highest R² goes first, and the analysis
   repeats until none is left.  R² of every counter at once is ``1 - 1/VIF``, the diagonal of
   the inverse correlation matrix, which a removal updates in O(p²) (``ridge`` keeps the
   matrix invertible when counters outnumber intervals).
2. **Cluster** (§4.2): Pearson distance ``d = 1 - ρ`` for ``ρ ≥ 0`` and ``|ρ|`` for ``ρ < 0``
   (Equation 1, as printed: Table 2 is computed with it, over the baseline's and the target's
   observations together), average-linkage hierarchical clustering, and the dendrogram cut at
   the number of clusters ``k`` (2 to ``n - 2``, at most ``max_clusters``) with the largest
   Calinski-Harabasz index, computed from the distances: ``W`` = Σ over clusters of the sum of
   squared within-cluster distances over twice the cluster's size, ``T`` the same over all
   counters, ``CH = ((T - W)/(k - 1)) / (W/(n - k))``.
3. **Model** (§4.3): in each cluster the target counter is the one whose baseline and target
   distributions differ most (smallest two-sample Kolmogorov-Smirnov p-value; ties by the
   larger statistic, then by name), modelled linearly on the cluster's other counters (least
   squares with an intercept, fitted on the baseline; a one-counter cluster predicts the
   baseline mean).
4. **Detect** (§4.4): the average prediction error on the target's intervals,
   ``mean |y - ŷ| / max(|y|, floor)`` (``floor`` = ``error_floor`` × the counter's mean
   absolute level over both runs, so a counter at 0 does not divide by zero); a cluster whose
   error is over ``error_threshold`` (30 %) is a regression, and the run's evidence is its
   largest error (§6, Tables 4-5).

The stage models every target against the passed runs of its baseline in the most similar
environment (``history.most_similar``, at most ``max_baseline_runs``), load-scaled like the
control charts' input; a target in a lab none of them used is moved by its lab's level first
(``labs``).  Two departures from the paper, both for real counters (docs/methods/clusters.md):
the error a model adds over its own fit on the baseline (``excess_error``) is the evidence, so
a cluster of noise is not a regression, and means drop their largest ``error_trim`` share, so
one spike in a flat counter is not a 100 % error.  The run's verdict is calibrated on the
history's normal runs (:func:`judge`) unless ``error_threshold`` fixes the paper's 30 %.  Pure core, then the I/O shell.
"""
from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Callable, cast

import numpy as np
import pandas as pd
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform
from scipy.stats import ks_2samp

from pipelines import parallel
from pipelines.progress import Progress
from pipelines.stats import pvalues
from pipelines.storage.run_records import ValidIndex
from pipelines.detectors.clusters.moments import Moments, pooled_correlation
from pipelines.storage.stage_files import ClusterResult, FittedCluster
from pipelines.systems import history, labs

log = logging.getLogger("regresslab.clusters")
DISTANCE_DECIMALS = 10      # pearson_distance's ρ: far above summation-order noise (1e-13), far below any real difference
R2_DECIMALS = 8             # redundant_counters: above the inverse's noise on near-singular matrices (ridge 1e-6: ~1e-10)
RESOLUTION = 1e-3     # the smallest prediction error worth telling apart (0.1 %), for the p-values' log scale


# --------------------------------------------------------------------------- pure core


@dataclass(frozen=True)
class ModelSettings:
    """What :func:`clustered_regression` needs of the ``clusters`` params block: the redundancy
    analysis' R² threshold and ridge, the largest cut of the dendrogram, and the prediction
    error's threshold, floor and trimmed share."""

    r2_threshold: float
    max_clusters: int
    error_threshold: float
    error_floor: float
    ridge: float = 1e-6
    error_trim: float = 0.0

    @classmethod
    def of(cls, params: Mapping[str, Any], error_threshold: float = float("inf")) -> "ModelSettings":
        """The settings of a ``clusters`` params block, with ``error_threshold`` (default: none, the
        result is judged afterwards against the normal runs)."""
        return cls(r2_threshold=float(params["r2_threshold"]), max_clusters=int(params["max_clusters"]),
                   error_threshold=error_threshold, error_floor=float(params["error_floor"]),
                   ridge=float(params["ridge"]), error_trim=float(params["error_trim"]))


@dataclass(frozen=True)
class ClusterParams:
    """The ``clusters`` params block, typed: the counters kept (present in ``min_counter_share`` of
    the intervals), the most similar passed runs a model is fitted on (``max_baseline_runs``), the
    verdict's rate (``false_alarm_rate``) or the paper's fixed ``error_threshold``, and the models'
    own :class:`ModelSettings`; ``block`` is the block as validated (the input keys hash it)."""

    min_counter_share: float
    max_baseline_runs: int
    false_alarm_rate: float
    error_threshold: float | None
    model: ModelSettings
    block: Mapping[str, Any] = field(compare=False, repr=False)

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "ClusterParams":
        fixed = block.get("error_threshold")
        return cls(min_counter_share=float(block["min_counter_share"]), max_baseline_runs=int(block["max_baseline_runs"]),
                   false_alarm_rate=float(block["false_alarm_rate"]), error_threshold=None if fixed is None else float(fixed),
                   model=ModelSettings.of(block), block=dict(block))


def pearson_distance(frame: pd.DataFrame, rho: np.ndarray | None = None) -> pd.DataFrame:
    """Equation 1 of seed 000 between every pair of columns: ``1 - ρ`` when ``ρ ≥ 0``, else ``|ρ|``.

    Without missing values (the frames :func:`complete_columns` makes) ``ρ`` is numpy's
    matrix product form (BLAS: 1.5 s for 900 counters × 10,000 intervals, where pandas' pairwise
    loop took 30 s); with gaps, pandas' pairwise-complete correlation.  The correlations are
    rounded to ``DISTANCE_DECIMALS`` before equation 1: two ways of summing (or two BLAS builds,
    or thread counts) differ by ~1e-13, and on real sets with near-equal distances (Nezha) that
    alone reordered the average-linkage merges; rounded, equal distances stay equal and ties go
    by column order.  Rounding ρ rather than the distance matters at ``ρ = 0``, where equation 1
    jumps from 1 to 0: two uncorrelated counters (``ρ`` of order 1e-17, either sign) were 1
    apart on one machine and 0 apart on another.  ``rho``: the frame's correlation matrix, when
    the caller has it (numpy's, of a frame without missing values)."""
    values = frame.to_numpy(dtype=float)
    if rho is not None:
        rho = np.triu(rho) + np.triu(rho, 1).T
    elif np.isnan(values).any():
        rho = frame.corr().to_numpy()
    else:
        with np.errstate(invalid="ignore", divide="ignore"):       # a constant column: NaN, as pandas gives
            rho = np.atleast_2d(np.corrcoef(values, rowvar=False))
        rho = np.triu(rho) + np.triu(rho, 1).T                    # exactly symmetric (BLAS may not be)
    rho = np.round(rho, DISTANCE_DECIMALS) + 0.0                 # + 0.0: no -0.0, whose sign would pick |ρ|
    dist = np.where(rho >= 0, 1.0 - rho, np.abs(rho))
    np.fill_diagonal(dist, 0.0)
    return pd.DataFrame(dist, index=frame.columns, columns=frame.columns)


def constant_counters(old: pd.DataFrame, new: pd.DataFrame) -> list[str]:
    """Counters with zero variance in both runs (§4.1)."""
    return sorted(c for c in old.columns if not (old[c].std(ddof=0) > 0) and not (new[c].std(ddof=0) > 0))


def varying(frame: pd.DataFrame) -> list[str]:
    """The counters of ``frame`` that vary (standard deviation above 0), in its column order."""
    return [c for c in frame.columns if frame[c].std(ddof=0) > 0]


def redundant_counters(frame: pd.DataFrame, *, r2_threshold: float, ridge: float = 1e-6,
                       correlated: tuple[list[str], np.ndarray | None] | None = None) -> list[tuple[str, float]]:
    """Redundancy analysis (§4.1): the counters removed, in order, each with its R² on the rest.

    ``R²_j = 1 - 1/(C⁻¹)_jj`` for the correlation matrix ``C`` (+ ``ridge`` on the diagonal) of
    the counters still in; the one with the largest R² over ``r2_threshold`` goes, and again.
    Removing counter ``k`` turns the inverse ``B`` of the rest into ``B - B[:, k] B[k, :] / B[k, k]``
    (the Schur complement).  Those updates are kept as a list of columns rather than applied to
    the whole matrix: ``B_t = B_0 - sum_i b_i b_iᵀ / b_i[k_i]``, so a removal costs one column of
    ``B_t`` (a matrix-vector product) and its diagonal an O(p) update, not an O(p²) rewrite of
    the matrix (at 2,000 counters that rewrite, a thousand times, took 45 s per run).

    The R² are rounded to ``R2_DECIMALS`` before the largest is taken: two counters that carry
    the same signal (Nezha's p95 and p99 latency of one service) have the same R² up to the
    inverse's rounding noise, which depends on the BLAS kernel and thread count, so another
    machine removed the other one and built other clusters; rounded, the tie goes by column
    order on every machine (checked with ``OPENBLAS_CORETYPE`` and ``NPY_DISABLE_CPU_FEATURES``,
    ``tests/unit/test_clusters.py``).  ``correlated``: the counters that vary (:func:`varying`) and
    numpy's correlation matrix of them, when the caller has them.
    """
    cols, corr = correlated if correlated is not None else (varying(frame), None)
    if len(cols) < 2:
        return []
    corr = np.nan_to_num(np.corrcoef(frame[cols].to_numpy(dtype=float), rowvar=False) if corr is None else corr)
    inv = np.linalg.inv(corr + ridge * np.eye(len(cols)))
    p = len(cols)
    diag = np.diag(inv).copy()
    taken = np.zeros((p, p))          # column t: B_t[:, k_t], the inverse's column when k_t left
    scale = np.zeros(p)               # 1 / B_t[k_t, k_t]
    alive = np.ones(p, dtype=bool)
    removed: list[tuple[str, float]] = []
    for t in range(p - 1):
        r2 = np.where(alive, np.round(1.0 - 1.0 / np.clip(diag, 1.0, None), R2_DECIMALS), -np.inf)
        k = int(np.argmax(r2))        # the first of equals, in column order (rounded: see the docstring)
        if r2[k] <= r2_threshold:
            break
        removed.append((cols[k], round(float(r2[k]), 6)))
        col = inv[:, k] - taken[:, :t] @ (taken[k, :t] * scale[:t])
        taken[:, t], scale[t] = col, 1.0 / col[k]
        diag -= col * col * scale[t]
        alive[k] = False
    return removed


def calinski_harabasz(distance: np.ndarray, labels: np.ndarray) -> float:
    """The Calinski-Harabasz index of a partition, from a distance matrix (see the module doc)."""
    n, ks = len(labels), np.unique(labels)
    k = len(ks)
    if k < 2 or k >= n:
        return float("nan")
    sq = distance ** 2
    total = sq.sum() / (2 * n)
    within = sum(sq[np.ix_(labels == c, labels == c)].sum() / (2 * int((labels == c).sum())) for c in ks)
    if within <= 0:
        return float("inf")
    return float(((total - within) / (k - 1)) / (within / (n - k)))


def cluster_counters(distance: pd.DataFrame, *, max_clusters: int) -> tuple[dict[str, int], dict[int, float]]:
    """Average-linkage clusters cut by Calinski-Harabasz (§4.2): counter -> cluster (1, 2, …, by
    first counter in column order) and the index of every ``k`` tried."""
    names = list(distance.columns)
    n = len(names)
    if n <= 3:
        return {c: 1 for c in names}, {}
    tree = linkage(squareform(distance.to_numpy(), checks=False), method="average")
    scores: dict[int, float] = {}
    best_k, best = 1, -np.inf
    for k in range(2, min(int(max_clusters), n - 2) + 1):
        labels = fcluster(tree, k, criterion="maxclust")
        if len(np.unique(labels)) != k:
            continue
        score = calinski_harabasz(distance.to_numpy(), labels)
        scores[k] = round(score, 6) if np.isfinite(score) else score
        if score > best:
            best_k, best = k, score
    labels = fcluster(tree, best_k, criterion="maxclust") if best_k > 1 else np.ones(n, dtype=int)
    renumber: dict[int, int] = {}
    for lab in labels:
        renumber.setdefault(int(lab), len(renumber) + 1)
    return {c: renumber[int(lab)] for c, lab in zip(names, labels)}, scores


def ks_statistic(a: np.ndarray, b: np.ndarray) -> float:
    """The two-sided two-sample Kolmogorov-Smirnov statistic, computed as ``scipy.stats.ks_2samp``
    computes it (both ECDFs at every observation, ``searchsorted(..., side="right") / n``): the
    same floats, before its exact method rounds them to its lattice."""
    a, b = np.sort(a), np.sort(b)
    both = np.concatenate([a, b])
    diffs = np.searchsorted(a, both, side="right") / len(a) - np.searchsorted(b, both, side="right") / len(b)
    return float(max(np.clip(-diffs.min(), 0, 1), diffs.max()))


def select_target(old: pd.DataFrame, new: pd.DataFrame, counters: list[str]) -> tuple[str, float]:
    """The cluster's dependent counter: smallest KS p-value between the runs (§4.3.1); equal
    p-values go to the larger statistic, then to the first name.

    Every counter of a cluster has the same two sample sizes (the frames have no gaps), and for
    fixed sizes the p-value is a non-increasing function of the statistic ``D``.  So the counter
    is among those of the largest ``D``; only they get scipy's p-value (its exact one costs
    ~2 ms per counter at 20,000 intervals, most of the stage's time when clusters hold
    hundreds of counters).  ``D`` within ``1e-12`` of the largest counts as equal: scipy's exact
    method rounds ``D`` to its lattice of ``1 / lcm(n1, n2)``, never finer than ``1e-8`` where
    it is used, so counters that scipy sees as equal are all kept."""
    values_old, values_new = old[counters].to_numpy(float), new[counters].to_numpy(float)
    if np.isnan(values_old).any() or np.isnan(values_new).any():
        candidates = list(counters)             # gaps: sizes differ by counter, no shortcut
    else:
        stats = np.array([ks_statistic(values_old[:, i], values_new[:, i]) for i in range(len(counters))])
        candidates = [c for c, d in zip(counters, stats) if d >= stats.max() - 1e-12]
    tests = []
    for c in candidates:
        with warnings.catch_warnings():          # ties: scipy falls back to the asymptotic p-value
            warnings.simplefilter("ignore", RuntimeWarning)
            res = ks_2samp(old[c].to_numpy(float), new[c].to_numpy(float))
        tests.append((float(res.pvalue), -float(res.statistic), c))
    p, _, counter = min(tests)
    return counter, p


def fit_model(old: pd.DataFrame, target: str, predictors: list[str]) -> tuple[float, dict[str, float]]:
    """Least squares of ``target`` on ``predictors`` with an intercept, on the baseline (§4.3.2)."""
    y = old[target].to_numpy(float)
    if not predictors:
        return float(y.mean()), {}
    x = np.column_stack([np.ones(len(old)), old[predictors].to_numpy(float)])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return float(coef[0]), {p: float(c) for p, c in zip(predictors, coef[1:])}


def trimmed_mean(values: np.ndarray, trim: float) -> float:
    """The mean of ``values`` without their ``floor(trim × n)`` largest."""
    drop = int(np.floor(trim * len(values)))
    kept = np.sort(values)[: len(values) - drop] if drop else values
    return float(np.mean(kept)) if len(kept) else 0.0


def prediction_error(new: pd.DataFrame, target: str, model: tuple[float, dict[str, float]], *,
                     floor: float, trim: float = 0.0) -> float:
    """Average prediction error on the target run relative to the counter's level (§4.4):
    ``mean |y - ŷ| / max(mean |y|, floor)``, each mean without its largest ``trim`` share, so
    one spike in a counter that was flat (a core's 0.5 % of system time in 1 of 10 intervals)
    is not a 100 % error."""
    intercept, coefs = model
    pred = intercept + sum(new[p].to_numpy(float) * c for p, c in coefs.items()) if coefs \
        else np.full(len(new), intercept)
    y = new[target].to_numpy(float)
    return trimmed_mean(np.abs(y - pred), trim) / max(trimmed_mean(np.abs(y), trim), floor)


def clustered_regression(old: pd.DataFrame, new: pd.DataFrame, settings: ModelSettings, *,
                         correlation: Callable[[list[str]], np.ndarray | None] | None = None) -> ClusterResult:
    """Seed 000's whole approach for one target (``new``) against its baseline (``old``).

    Both frames hold one row per interval and the same counters (no missing values).  Returns
    the verdict (``fail`` when the largest cluster error is over ``settings.error_threshold``), the
    largest error, every cluster (counters, target counter, KS p-value, error) worst first,
    the counters removed and why, and the Calinski-Harabasz index per ``k``.  ``correlation``:
    numpy's correlation matrix of the given counters over ``old`` and ``new`` stacked, when the
    caller has it from the runs' moments (:func:`pooled_correlation`), else None.
    """
    r2_threshold, max_clusters, error_threshold = settings.r2_threshold, settings.max_clusters, settings.error_threshold
    error_floor, ridge, error_trim = settings.error_floor, settings.ridge, settings.error_trim
    counters = [c for c in old.columns if c in new.columns]
    old, new = old[counters], new[counters]
    constant = constant_counters(old, new)
    both = pd.concat([old, new], ignore_index=True).drop(columns=constant)
    cols = varying(both)
    values = both[cols].to_numpy(dtype=float)
    rho = None                      # one correlation matrix for the redundancy analysis and the distances
    if len(cols) >= 2 and not np.isnan(values).any():
        rho = correlation(cols) if correlation is not None else None
        if rho is None:
            with np.errstate(invalid="ignore", divide="ignore"):
                rho = np.atleast_2d(np.corrcoef(values, rowvar=False))
    redundant = redundant_counters(both, r2_threshold=r2_threshold, ridge=ridge, correlated=(cols, rho))
    kept = [c for c in both.columns if c not in {r for r, _ in redundant}]
    if not kept:
        return {"verdict": None, "reason": "no counter varies in the baseline or the target", "max_prediction_error": None,
                "clusters": [], "constant_counters": constant, "redundant_counters": dict(redundant)}
    at = {c: i for i, c in enumerate(cols)}
    sub = rho[np.ix_([at[c] for c in kept], [at[c] for c in kept])] if rho is not None and all(c in at for c in kept) \
        else None
    distance = pearson_distance(both[kept], sub).fillna(1.0)
    membership, ch = cluster_counters(distance, max_clusters=max_clusters)
    clusters: list[FittedCluster] = []
    for label in sorted(set(membership.values())):
        members = [c for c in kept if membership[c] == label]
        target, p = select_target(old, new, members)
        predictors = [c for c in members if c != target]
        model = fit_model(old, target, predictors)
        level = float(np.mean(np.abs(both[target].to_numpy(float))))
        spread = float(old[target].std(ddof=0))
        floor = max(error_floor * level, spread, 1e-12)
        error = prediction_error(new, target, model, floor=floor, trim=error_trim)
        fit_error = prediction_error(old, target, model, floor=floor, trim=error_trim)
        excess = error - fit_error
        clusters.append({"counters": members, "target_counter": target, "ks_p_value": round(p, 8),
                         "error": round(error, 6), "baseline_error": round(fit_error, 6),
                         "excess_error": round(excess, 6), "regression": bool(excess > error_threshold),
                         "intercept": round(model[0], 8), "coefficients": {k: round(v, 8) for k, v in model[1].items()}})
    clusters.sort(key=lambda c: (-c["excess_error"], -c["error"], c["target_counter"]))
    max_error = max(c["error"] for c in clusters)
    max_excess = clusters[0]["excess_error"]
    return {"verdict": "fail" if max_excess > error_threshold else "pass", "max_prediction_error": max_error,
            "max_excess_error": max_excess,
            "error_threshold": error_threshold, "clusters": clusters, "constant_counters": constant,
            "redundant_counters": dict(redundant), "calinski_harabasz": {str(k): v for k, v in ch.items()}}


def flagged(result: ClusterResult) -> tuple[list[str], dict[str, float]]:
    """The counters of the clusters over the threshold (each cluster's target first) and every
    clustered counter's score (its cluster's error)."""
    flags: list[str] = []
    scores: dict[str, float] = {}
    for cluster in result.get("clusters") or []:
        for c in cluster["counters"]:
            scores[c] = cluster["error"]
        if cluster["regression"]:
            flags += [cluster["target_counter"]] + [c for c in cluster["counters"] if c != cluster["target_counter"]]
    return flags, scores


def complete_columns(frame: pd.DataFrame, *, min_share: float) -> pd.DataFrame:
    """The counters present in at least ``min_share`` of the intervals, gaps filled with the median."""
    share = frame.notna().mean()
    keep = frame.loc[:, share >= min_share]
    if not keep.isna().to_numpy().any():
        return keep
    return keep.fillna(keep.median())


def normal_pvalues(normal_scores: dict[str, float]) -> dict[str, float]:
    """Each normal run's p-value against the others' largest excess errors, as :func:`judge`
    computes a run's (the cluster models' record of false alarms, ``record``)."""
    return pvalues.loo_pvalues(normal_scores, lambda s, null: pvalues.calibrated_pvalue(s, null, resolution=RESOLUTION))


def judge(max_error: float, null: list[float], *, false_alarm_rate: float,
          error_threshold: float | None) -> dict[str, Any]:
    """The run verdict from its largest cluster error.  With a fixed ``error_threshold`` (the
    paper's 30 %), above it fails.  Otherwise (the default) the error becomes a p-value against
    the same error of the history's normal runs, each modelled against the others
    (``pvalues.calibrated_pvalue``: seed 000 §6 asks to calibrate the threshold on good runs),
    and the run fails at ``p <= false_alarm_rate``."""
    if error_threshold is not None:
        return {"verdict": "fail" if max_error > error_threshold else "pass", "p_value": None,
                "threshold_from": "params", "cluster_threshold": float(error_threshold)}
    if len(null) < 2:
        return {"verdict": None, "p_value": None, "threshold_from": "normal runs",
                "cluster_threshold": None, "reason": f"{len(null)} normal run(s) to calibrate on (2 needed)"}
    p = pvalues.calibrated_pvalue(max_error, list(null), resolution=RESOLUTION)
    return {"verdict": "fail" if p <= false_alarm_rate else "pass", "p_value": round(float(p), 6),
            "threshold_from": "normal runs", "cluster_threshold": round(float(max(null)), 6),
            "false_alarm_rate": false_alarm_rate, "normal_runs": len(null)}


# --------------------------------------------------------------------------- I/O shell


def model_runs(old_runs: list[str], run_id: str, frames, params: ClusterParams,
               lab: labs.LabShift | None = None) -> ClusterResult:
    """:func:`clustered_regression` of one run against the concatenated ``old_runs``, not judged
    (no error threshold: :func:`judge_result` judges it against the normal runs); a target in a lab that
    none of them used is first moved by its lab's level and its unstable counters left out
    (``labs.lab_shift``, as the control charts do)."""
    share = params.min_counter_share
    old = complete_columns(pd.concat([frames[b] for b in old_runs], ignore_index=True), min_share=share)
    shift = (lab or {}).get("shift")
    target = labs.shifted(frames[run_id], shift).reset_index(drop=True)
    new = complete_columns(target.drop(columns=labs.not_judged(lab) if lab else [], errors="ignore"), min_share=share)
    common = [c for c in old.columns if c in new.columns]
    moved = shift is not None and not shift.empty
    parts = [run_moments(frames, b) for b in old_runs] + [Moments.of(target) if moved else run_moments(frames, run_id)]
    return clustered_regression(old[common], new[common], params.model,
                                correlation=lambda cols: pooled_correlation(parts, cols))


def run_moments(frames, run_id: str) -> Moments:
    """A run's :class:`Moments` at the store's reference load, kept by the store while its budget
    allows (``FrameStore.derived``: a run enters the models of its ten most similar runs)."""
    return frames.derived(("moments", run_id), lambda: Moments.of(frames[run_id]))


def similar_runs(run_id: str, candidates: list[str], index: ValidIndex, limit: int) -> list[str]:
    return history.most_similar({b: index[b].get("environment") or {} for b in candidates if b != run_id},
                                index[run_id].get("environment") or {})[:limit]


def model_against(run_id: str, candidates: list[str], index: ValidIndex, frames, params: ClusterParams,
                  hist: history.HistoryParams, *, lab_runs: dict[str, str] | None = None,
                  environment_from: list[str] | None = None) -> ClusterResult:
    """One run's models against the most similar of ``candidates`` (moved by its lab's level
    when none of them shares its lab), not yet judged: :func:`judge_result` judges it.  ``lab_runs``
    (default: the system's verified runs) may teach its lab's level; ``environment_from``
    (default: the candidates) teaches which counters follow the environment
    (:func:`labs.cross_lab_null` judges a normal run by the other labs on a new-lab target's counters)."""
    similar = similar_runs(run_id, candidates, index, params.max_baseline_runs)
    out: ClusterResult = {"run_id": run_id, "system": index[run_id]["system"], "baseline_runs": similar}
    if not similar:
        return {**out, "verdict": None, "reason": "no passed run in the baseline", "max_prediction_error": None,
                "max_excess_error": None, "clusters": []}
    if lab_runs is None:
        lab_runs = hist.verdicts(index, index[run_id]["system"])
    teachers = [c for c in (candidates if environment_from is None else environment_from) if c != run_id]
    envs = {r: index[r].get("environment") or {} for r in [run_id, *candidates, *lab_runs, *teachers]}
    lab = labs.lab_for(run_id, similar, envs, lab_runs, lambda runs: frames.levels(runs, frames.reference),
                       labs.lab_params(hist), teachers)
    return {**out, "lab": labs.summary(lab), **model_runs(similar, run_id, frames, params, lab)}


def judge_result(result: ClusterResult, null: list[float], params: ClusterParams) -> ClusterResult:
    """A :func:`model_against` result judged (:func:`judge`) against the normal runs' largest
    excess errors ``null``, with its flagged counters and counter scores."""
    if result.get("verdict") is None:
        return {**result, "flagged_counters": [], "counter_scores": {}}
    excess = result["max_excess_error"]
    assert excess is not None, "a judged run's models have an excess error"
    decision = judge(excess, null, false_alarm_rate=params.false_alarm_rate, error_threshold=params.error_threshold)
    threshold = decision["cluster_threshold"] if decision["cluster_threshold"] is not None else float("inf")
    clusters: list[FittedCluster] = [{**c, "regression": bool(c["excess_error"] > threshold)}
                                     for c in result["clusters"]]
    out = cast(ClusterResult, {**result, **decision, "clusters": clusters,
                               "error_threshold": decision["cluster_threshold"]})
    flags, scores = flagged(out)
    if out["verdict"] == "fail" and not flags:            # failed on the calibrated p: the worst cluster
        worst = clusters[0]
        flags = [worst["target_counter"]] + [c for c in worst["counters"] if c != worst["target_counter"]]
    return {**out, "flagged_counters": flags if out["verdict"] == "fail" else [], "counter_scores": scores}


def normal_scores(passed: list[str], index: ValidIndex, frames, params: ClusterParams,
                  hist: history.HistoryParams) -> tuple[dict[str, float], dict[str, ClusterResult]]:
    """Every passed run modelled against the others (leave-one-out): its largest excess error
    (the null of the verdict) and its result."""
    progress = Progress(log, "clusters calibration", len(passed), what="normal runs")
    modelled = parallel.map_ordered(lambda r: model_against(r, [p for p in passed if p != r], index, frames,
                                                            params, hist), passed, progress=progress.each())
    results = dict(zip(passed, modelled))
    return {r: excess for r, res in results.items()
            if res.get("verdict") is not None and (excess := res["max_excess_error"]) is not None}, results


def cross_lab_scores(passed: list[str], index: ValidIndex, frames, params: ClusterParams,
                     hist: history.HistoryParams, lab_runs: dict[str, str]) -> dict[str, dict[str, float]]:
    """The largest excess errors of the normal runs modelled the way a target whose baseline does
    not share its lab is (:func:`labs.cross_lab_null`): against the other labs' passed runs, its
    lab's level learned or unknown, the counters that follow the environment learned from every
    lab.  Nothing when the passed runs share one lab."""
    lab_of = {r: labs.lab_key(index[r].get("environment")) for r in {*passed, *lab_runs}}
    progress = Progress(log, "clusters cross-lab calibration", 2 * len(labs.judged_across(passed, lab_of)),
                        what="normal-run models")

    def model_across(run_id: str, baseline: list[str], verified: dict[str, str]) -> tuple[str | None, float | None]:
        result = model_against(run_id, baseline, index, frames, params, hist, lab_runs=verified,
                               environment_from=passed)
        return (result.get("lab") or {}).get("status"), result.get("max_excess_error")
    null = labs.cross_lab_null(passed, lab_of, lab_runs, model_across,
                               mapper=lambda fn, jobs: parallel.map_ordered(fn, jobs, progress=progress.each()))
    return {status: {r: v for r, v in runs.items() if v is not None} for status, runs in null.items()}


def judge_matched(result: ClusterResult, null: dict[str, float], cross: dict[str, dict[str, float]] | None,
                   params: ClusterParams, run_id: str | None = None) -> ClusterResult:
    """:func:`judge_result` against the null of the run's situation (:func:`labs.matched_null`: the normal
    runs modelled across labs when its baseline is not of its lab), saying which (``null``)."""
    status = (result.get("lab") or {}).get("status") or "same_lab"
    matched, kind = labs.matched_null(status, null, cross, run_id)
    return {**judge_result(result, list(matched.values()), params), "null": kind}


def loo(verified: list[str], passed: list[str], index: ValidIndex, frames, params: ClusterParams,
        hist: history.HistoryParams) -> dict[str, ClusterResult]:
    """Leave-one-out of the clustered models on the verified runs (``evaluate``): each run
    against the other passed runs, judged against the other passed runs' scores — or, for a run
    whose baseline is not of its lab, against the passed runs modelled across labs (modelled only
    when such a run exists)."""
    null, results = normal_scores(passed, index, frames, params, hist)
    for r in verified:
        if r not in results:
            results[r] = model_against(r, passed, index, frames, params, hist)
    cross = None
    if any((results[r].get("lab") or {}).get("status") not in (None, "same_lab") for r in verified):
        cross = cross_lab_scores(passed, index, frames, params, hist,
                                 {r: v for r in verified if (v := index[r]["verdict"]) is not None})
    return {r: judge_matched(results[r], null, cross, params, r) for r in verified}
