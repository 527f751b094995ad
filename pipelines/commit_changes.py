"""commit_changes: which commit changed which benchmark, from a benchmark history per commit
(DATA_CONTRACT.md §3; METHODS.md §F).  Two detectors, side by side:

**Skia** (seed 001).  Every benchmark's series over a window of commits (the median of its
measurements at each commit; a commit without results takes its neighbours' value) is
*normalised* to mean 0 and standard deviation 1 -- unless its standard deviation is under
``sd_floor``, then it is only centred ("blowing that up ... would introduce nothing but
noise").  k-means groups the normalised traces by shape (``k``; 0 = ``ceil(sqrt(n/2))``), and
the centroid of each cluster gets its best step function: for every split ``i`` (at least
``min_segment`` commits each side) the step function is the two sides' means, ``fit`` its
mean squared error on the centroid and ``step`` the left mean minus the right; the split with
the smallest ``fit`` wins.  The regression factor is ``R = step / fit``; a cluster with
``|R| ≥ interesting`` is interesting.  The seed's 150 was "chosen after observing the system"
(tens of thousands of traces, whose centroids are smooth); on a few dozen series a real step
gives ``|R|`` of 10-70 and none reaches it.  ``interesting: auto`` (the default) therefore
learns the cut from the window itself: the ``null_quantile`` (99 %) of the largest ``|R|``
over ``permutations`` shuffles of its commits (:func:`permutation_threshold`); a number
(150) restores the fixed cut.  A trace of an interesting cluster is reported changed at the
commit of the step when its own step there goes the centroid's way by at least ``member_share``
of the centroid's and its own best step lies within ``member_margin`` commits of the centroid's
(it is then reported at its own step): k-means puts a flat trace, or one that moved elsewhere
in the window, beside the group it is nearest to, and the seed triages clusters, not traces.  Long histories are cut into windows of ``window`` commits overlapping by
half, so each change is seen whole in one of them; the same change seen twice (within
``merge_margin`` commits) keeps its largest ``|R|``.  Interesting clusters are *coalesced*
with the ones already known (``data/processed/commit_clusters.json``, kept between nights):
one whose ``coalesce_traces`` (20) traces nearest the centroid are all in a known cluster's
is that cluster, so only new ones rise for triage.

**Mono** (seed 002).  Per benchmark, config and commit, with ``m`` process runs of ``k``
measurements after ``warmup``: per run, ``subsamples`` (100) bootstrap sub-selections of
``ceil(subsample_share · k)`` measurements (with replacement) give ``M_j``, the median of
their means, and ``S²σj``, the median of their variances (another set); the result is
``M̄ = mean M_j``; ``S²ρ = var(M_j)`` (m − 1), ``S²σ = mean S²σj``; the half-length of the
``1 − alpha`` (99 %) confidence interval is ``l = u·sqrt((n·S²ρ + S²σ)/(m·n))``.  A change is
reported where the intervals of consecutive commits do not overlap; its magnitude is
``(M̄_new − M̄_old)/M̄_old``.  Per benchmark: the impact factor ``S_ρ/S_σ`` (between-run over
within-run spread) and ``n_opt = sqrt(w·S²σ/S²ρ)``.  ``quantile: normal`` (the default) is the
paper's ``u``; ``student`` takes Student's t with ``m − 1`` degrees of freedom (wider with few
runs: on the example it missed a third more changes and removed no false one once
``persist`` holds).  Two departures for real histories, each a parameter: ``commit_effect``
widens the intervals by the variance between commits (:func:`commit_effect`), and ``persist``
asks both levels to hold for that many commits (:func:`mono_changes`).

Lower values are better unless a benchmark matches ``higher_is_better``; ``direction`` is
``regression`` or ``improvement``.  Output: ``reports/commits/changes.json`` (a list of
``{benchmark, config, commit, direction, magnitude_pct, method, evidence}``, regressions first,
the largest on top) and ``reports/commits/index.html``.  With no source configured the stage
writes an empty list and a page saying so.  Pure core first, then the I/O shell.
"""
from __future__ import annotations

import fnmatch
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm, t as student

from pipelines import archive, config, locks
from pipelines.progress import Progress

log = logging.getLogger("regresslab.commit_changes")
COLUMNS = ("commit", "commit_time", "benchmark", "config", "run", "value")


# --------------------------------------------------------------------------- pure core: input


def check_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The contract's columns, typed; rows without a value dropped.  ``ValueError`` names what is missing."""
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"commit series: missing column(s) {', '.join(missing)} (DATA_CONTRACT.md §3: "
                         f"{', '.join(COLUMNS)})")
    out = frame[list(COLUMNS)].copy()
    out["value"] = pd.to_numeric(out["value"], errors="coerce")
    out = out[np.isfinite(out["value"])]
    for c in ("commit", "benchmark", "config"):
        out[c] = out[c].astype(str)
    return out


def commit_order(frame: pd.DataFrame) -> list[str]:
    """Commits by commit time (then first appearance)."""
    first = frame.drop_duplicates("commit")[["commit", "commit_time"]].reset_index(drop=True)
    first["pos"] = np.arange(len(first))
    return list(first.sort_values(["commit_time", "pos"], kind="stable")["commit"])


def trace_matrix(frame: pd.DataFrame, commits: list[str]) -> pd.DataFrame:
    """One row per ``benchmark|config``, one column per commit: the median of its measurements
    (gaps filled from the neighbours, then the ends)."""
    key = frame["benchmark"] + "|" + frame["config"]
    table = frame.assign(series=key).groupby(["series", "commit"])["value"].median().unstack("commit")
    table = table.reindex(columns=commits)
    return table.interpolate(axis=1, limit_direction="both")


# --------------------------------------------------------------------------- pure core: Skia


def normalize_traces(traces: np.ndarray, sd_floor: float) -> np.ndarray:
    """Mean 0, standard deviation 1 per row; rows with a standard deviation under ``sd_floor``
    are only centred (seed 001, "Normalized Traces")."""
    centred = traces - traces.mean(axis=1, keepdims=True)
    sd = traces.std(axis=1, keepdims=True)
    return np.where(sd >= sd_floor, centred / np.where(sd > 0, sd, 1.0), centred)


def step_fits(points: np.ndarray, *, min_segment: int, fit_floor: float = 1e-9) -> dict[str, np.ndarray]:
    """The best step function of every row of ``points`` at once: per row the split ``index``
    (-1 when the row is shorter than two segments), ``step`` (left mean − right mean), ``fit``
    (the step function's mean squared error) and ``regression`` = ``step / fit`` (seed 001,
    "Regression Factor").  Every split with at least ``min_segment`` commits on each side is
    tried, from cumulative sums; the first of equal fits wins."""
    points = np.atleast_2d(np.asarray(points, dtype=float))
    rows, n = points.shape
    if n < 2 * min_segment or rows == 0:
        return {"index": np.full(rows, -1), "step": np.zeros(rows), "fit": np.full(rows, np.inf),
                "regression": np.zeros(rows)}
    csum, csq = np.cumsum(points, axis=1), np.cumsum(points ** 2, axis=1)
    splits = np.arange(min_segment, n - min_segment + 1)
    left_sum, left_sq = csum[:, splits - 1], csq[:, splits - 1]
    right_sum, right_sq = csum[:, -1:] - left_sum, csq[:, -1:] - left_sq
    left_n, right_n = splits, n - splits
    sse = (left_sq - left_sum ** 2 / left_n) + (right_sq - right_sum ** 2 / right_n)
    mse = np.maximum(sse / n, 0.0)
    best = mse.argmin(axis=1)
    at = np.arange(rows)
    step = left_sum[at, best] / left_n[best] - right_sum[at, best] / right_n[best]
    fit = mse[at, best]
    return {"index": splits[best], "step": step, "fit": fit, "regression": step / np.maximum(fit, fit_floor)}


def step_fit(centroid: np.ndarray, *, min_segment: int, fit_floor: float = 1e-9) -> dict[str, float]:
    """The best step function of one centroid (:func:`step_fits` of one row): split, ``step``,
    ``fit`` and ``R = step / fit``."""
    one = step_fits(np.asarray(centroid, dtype=float)[None, :], min_segment=min_segment, fit_floor=fit_floor)
    return {"index": int(one["index"][0]), "step": float(one["step"][0]), "fit": float(one["fit"][0]),
            "regression": float(one["regression"][0])}


def kmeans(points: np.ndarray, k: int, *, seed: int, iterations: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd's k-means with k-means++ seeding (deterministic for ``seed``): labels and centroids."""
    rng = np.random.default_rng(seed)
    n = len(points)
    k = max(1, min(k, n))
    centres = [points[rng.integers(n)]]
    for _ in range(1, k):
        d2 = np.min(((points[:, None, :] - np.array(centres)[None]) ** 2).sum(-1), axis=1)
        centres.append(points[rng.choice(n, p=d2 / d2.sum())] if d2.sum() > 0 else points[rng.integers(n)])
    centres = np.array(centres)
    labels = np.zeros(n, dtype=int)
    for _ in range(iterations):
        labels_new = ((points[:, None, :] - centres[None]) ** 2).sum(-1).argmin(1)
        for c in range(k):
            if (labels_new == c).any():
                centres[c] = points[labels_new == c].mean(0)
        if (labels_new == labels).all() and _ > 0:
            break
        labels = labels_new
    return labels, centres


def largest_factor(points: np.ndarray, k: int, *, seed: int, min_segment: int, grouping: str = "kmeans") -> float:
    """The largest ``|R|`` over the k-means clusters' centroids of ``points`` (normalised traces), or
    over the traces themselves (``grouping: individual``)."""
    if grouping == "individual":
        return float(np.abs(step_fits(points, min_segment=min_segment)["regression"]).max())
    labels, centres = kmeans(points, k, seed=seed)
    return max(abs(step_fit(centres[c], min_segment=min_segment)["regression"]) for c in sorted(set(labels)))


def permutation_threshold(points: np.ndarray, k: int, *, seed: int, min_segment: int, permutations: int,
                          quantile: float, grouping: str = "kmeans") -> float:
    """The ``quantile`` of the largest ``|R|`` when the window's commits are shuffled (one
    permutation for every trace, so traces keep moving together but no step stays a step):
    what ``|R|`` reaches by chance on this data, for the centroids (``kmeans``) or for single
    traces (``individual``).  ``interesting: auto`` uses it."""
    rng = np.random.default_rng(seed)
    null = [largest_factor(points[:, rng.permutation(points.shape[1])], k, seed=seed, min_segment=min_segment,
                           grouping=grouping)
            for _ in range(permutations)]
    return float(np.quantile(null, quantile))


GROUPINGS = ("kmeans", "individual", "both")


def skia_window(traces: pd.DataFrame, *, k: int, sd_floor: float, min_segment: int, interesting: float | str,
                seed: int, coalesce_traces: int, permutations: int = 20, null_quantile: float = 0.99,
                member_share: float = 0.5, member_margin: int = 5, grouping: str = "kmeans") -> list[dict[str, Any]]:
    """Seed 001 on one window of commits (``traces``: series × commits): the interesting clusters
    with their members, step commit, R, and the traces nearest their centroid.

    ``grouping``: ``kmeans`` (the seed's clusters), ``individual`` (every trace its own cluster:
    its own best step, judged against the largest single-trace ``|R|`` of the shuffled window —
    Skia Perf's "individual" step fit) or ``both`` (the two lists; a series found by both keeps
    its larger ``|R|`` in :func:`skia_changes`)."""
    if grouping not in GROUPINGS:
        raise ValueError(f"commit_changes.skia.grouping must be one of {', '.join(GROUPINGS)}, not {grouping!r}")
    if traces.shape[1] < 2 * min_segment or traces.empty:
        return []
    points = normalize_traces(traces.to_numpy(float), sd_floor)
    trace_fits = step_fits(points, min_segment=min_segment)       # each trace's own best step, once
    found = []
    if grouping in ("individual", "both"):
        found += individual_steps(traces, points, trace_fits, min_segment=min_segment, interesting=interesting,
                                  seed=seed, permutations=permutations, null_quantile=null_quantile)
    if grouping == "individual":
        return found
    k = k or int(math.ceil(math.sqrt(len(points) / 2)))
    labels, centres = kmeans(points, k, seed=seed)
    if interesting == "auto":
        interesting = permutation_threshold(points, k, seed=seed, min_segment=min_segment,
                                            permutations=permutations, quantile=null_quantile)
    interesting = float(interesting)
    for c in sorted(set(labels)):
        members = np.flatnonzero(labels == c)
        fit = step_fit(centres[c], min_segment=min_segment)
        if fit["index"] < 0 or abs(fit["regression"]) < interesting:
            continue
        dist = ((points[members] - centres[c]) ** 2).sum(1)
        nearest = [traces.index[members[j]] for j in np.argsort(dist)[:coalesce_traces]]
        i = fit["index"]
        own = points[members, :i].mean(1) - points[members, i:].mean(1)      # each member's step there
        stepped = members[(np.sign(own) == np.sign(fit["step"])) & (np.abs(own) >= member_share * abs(fit["step"]))]
        at = {}
        for j in stepped:                        # where the member's own best step is, near the centroid's
            own_index = int(trace_fits["index"][j])
            if abs(own_index - i) <= member_margin:
                at[traces.index[j]] = traces.columns[own_index]
        if not at:
            continue
        found.append({"members": list(at), "member_commits": at, "cluster_size": len(members),
                      "commit": traces.columns[fit["index"]],
                      "index": fit["index"], "regression_factor": fit["regression"], "step": fit["step"],
                      "fit": fit["fit"], "nearest": sorted(nearest), "threshold": interesting, "grouping": "kmeans"})
    return found


def individual_steps(traces: pd.DataFrame, points: np.ndarray, fits: dict[str, np.ndarray], *, min_segment: int,
                     interesting: float | str, seed: int, permutations: int,
                     null_quantile: float) -> list[dict[str, Any]]:
    """Every trace of the window whose own best step (``fits``: :func:`step_fits` of ``points``)
    reaches ``interesting`` (``auto``: the ``null_quantile`` of the largest single-trace ``|R|``
    over shuffles of the window's commits), as a cluster of one."""
    if interesting == "auto":
        interesting = permutation_threshold(points, 1, seed=seed, min_segment=min_segment, permutations=permutations,
                                            quantile=null_quantile, grouping="individual")
    threshold = float(interesting)
    out = []
    for j in np.flatnonzero((fits["index"] >= 0) & (np.abs(fits["regression"]) >= threshold)):
        name, i = traces.index[j], int(fits["index"][j])
        out.append({"members": [name], "member_commits": {name: traces.columns[i]}, "cluster_size": 1,
                    "commit": traces.columns[i], "index": i, "regression_factor": float(fits["regression"][j]),
                    "step": float(fits["step"][j]), "fit": float(fits["fit"][j]), "nearest": [name],
                    "threshold": threshold, "grouping": "individual"})
    return out


def skia_params(sk: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of :func:`skia_changes` from the ``commit_changes.skia`` params."""
    return {"window": int(sk["window"]), "k": int(sk["k"]), "sd_floor": float(sk["sd_floor"]),
            "min_segment": int(sk["min_segment"]), "interesting": sk["interesting"], "seed": int(sk["seed"]),
            "coalesce_traces": int(sk["coalesce_traces"]), "merge_margin": int(sk["merge_margin"]),
            "permutations": int(sk["permutations"]), "null_quantile": float(sk["null_quantile"]),
            "member_share": float(sk["member_share"]), "member_margin": int(sk["member_margin"]),
            "grouping": sk["grouping"]}


def windows(n: int, size: int) -> list[tuple[int, int]]:
    """Windows of ``size`` commits overlapping by half, covering ``0..n``."""
    if n <= size:
        return [(0, n)]
    stride = max(1, size // 2)
    starts = list(range(0, n - size + 1, stride))
    if starts[-1] + size < n:
        starts.append(n - size)
    return [(s, s + size) for s in starts]


def skia_changes(table: pd.DataFrame, *, window: int, k: int, sd_floor: float, min_segment: int,
                 interesting: float | str, seed: int, coalesce_traces: int, merge_margin: int,
                 permutations: int = 20, null_quantile: float = 0.99, member_share: float = 0.5,
                 member_margin: int = 5, grouping: str = "kmeans") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Skia over the whole history: (per-series changes, interesting clusters)."""
    commits = list(table.columns)
    pos = {c: i for i, c in enumerate(commits)}
    per_series: dict[str, list[dict[str, Any]]] = {}
    clusters = []
    for start, end in windows(len(commits), window):
        for cl in skia_window(table.iloc[:, start:end], k=k, sd_floor=sd_floor, min_segment=min_segment,
                              interesting=interesting, seed=seed, coalesce_traces=coalesce_traces,
                              permutations=permutations, null_quantile=null_quantile,
                              member_share=member_share, member_margin=member_margin, grouping=grouping):
            clusters.append(cl)
            for s in cl["members"]:
                commit = cl["member_commits"][s]
                found = per_series.setdefault(s, [])
                twin = next((f for f in found if abs(pos[f["commit"]] - pos[commit]) <= merge_margin), None)
                entry = {"commit": commit, "regression_factor": cl["regression_factor"],
                         "cluster_size": cl["cluster_size"]}
                if twin is None:
                    found.append(entry)
                elif abs(entry["regression_factor"]) > abs(twin["regression_factor"]):
                    found[found.index(twin)] = entry
    changes = []
    for s, found in per_series.items():
        row = table.loc[s].to_numpy(float)
        for f in found:
            i = pos[f["commit"]]
            before = row[max(0, i - window // 2):i]
            after = row[i:i + window // 2]
            magnitude = (np.median(after) - np.median(before)) / abs(np.median(before)) if np.median(before) else 0.0
            changes.append({"series": s, "commit": f["commit"], "magnitude": float(magnitude), "method": "skia",
                            "evidence": {"regression_factor": round(f["regression_factor"], 3),
                                         "cluster_size": f["cluster_size"]}})
    return changes, clusters


def coalesce(known: list[dict[str, Any]], found: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Seed 001's cluster coalescing: a found interesting cluster whose nearest traces are all
    among a known cluster's nearest traces is that cluster (its triage status kept); the others
    are new.  Returns the updated registry and the ids of the new clusters."""
    registry = [dict(c) for c in known]
    new_ids = []
    for cl in found:
        same = next((c for c in registry if set(cl["nearest"]) <= set(c["nearest"])
                     and c.get("commit") == cl["commit"]), None)
        if same is not None:
            same["seen"] = int(same.get("seen", 1)) + 1
            same["regression_factor"] = max(same["regression_factor"], cl["regression_factor"], key=abs)
            continue
        cid = f"c{len(registry) + 1:04d}"
        registry.append({"id": cid, "commit": cl["commit"], "nearest": cl["nearest"], "size": len(cl["members"]),
                         "regression_factor": round(cl["regression_factor"], 3), "status": "untriaged", "seen": 1})
        new_ids.append(cid)
    return registry, new_ids


TRIAGE_STATUSES = ("positive", "negative", "untriaged")


def triage_cluster(registry: list[dict[str, Any]], cluster_id: str, status: str, *, by: str, at: str,
                   note: str | None = None) -> list[dict[str, Any]]:
    """Seed 001's triage of an interesting cluster: ``positive`` (a real change), ``negative``
    (not one) or back to ``untriaged``, with who and when.  Returns the updated registry; a later
    night coalesces the same cluster into this entry and keeps its status, so it does not rise
    for triage again."""
    if status not in TRIAGE_STATUSES:
        raise ValueError(f"status must be one of {', '.join(TRIAGE_STATUSES)}, not {status!r}")
    ids = [c["id"] for c in registry]
    if cluster_id not in ids:
        raise ValueError(f"no interesting cluster {cluster_id!r} (known: {', '.join(ids[-10:]) or 'none'})")
    out = [dict(c) for c in registry]
    out[ids.index(cluster_id)].update({"status": status, "triaged_by": by, "triaged_at": at, "note": note})
    return out


# --------------------------------------------------------------------------- pure core: Mono


def run_statistics(runs: list[np.ndarray], *, warmup: int, subsamples: int, share: float,
                   rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """Per process run (seed 002 §4.2): ``M_j`` (median of bootstrap sub-selection means) and
    ``S²σj`` (median of another set's variances), after dropping ``warmup`` measurements; and
    the sub-selection size ``n``."""
    kept = [r[warmup:] if len(r) > warmup else r for r in runs]
    k = min(len(r) for r in kept)
    n = max(1, int(math.ceil(share * k)))
    means, variances = [], []
    for r in kept:
        if len(r) == 1:
            means.append(float(r[0]))
            variances.append(0.0)
            continue
        a = r[rng.integers(0, len(r), (subsamples, n))]
        b = r[rng.integers(0, len(r), (subsamples, n))]
        means.append(float(np.median(a.mean(1))))
        variances.append(float(np.median(b.var(1, ddof=1))) if n > 1 else 0.0)
    return np.array(means), np.array(variances), n


def mono_interval(means: np.ndarray, variances: np.ndarray, n: int, *, alpha: float,
                  quantile: str) -> dict[str, float]:
    """The result ``M̄``, ``S²ρ``, ``S²σ`` and the half-length ``l`` of the ``1 − alpha`` interval."""
    m = len(means)
    centre = float(means.mean())
    s2_rho = float(means.var(ddof=1)) if m > 1 else 0.0
    s2_sigma = float(variances.mean())
    if quantile == "student" and m > 1:
        u = float(student.ppf(1 - alpha / 2, df=m - 1))
    else:
        u = float(norm.ppf(1 - alpha / 2))
    half = u * math.sqrt(max(n * s2_rho + s2_sigma, 0.0) / (m * n)) if m > 1 or s2_sigma > 0 else float("inf")
    return {"centre": centre, "half": half, "s2_rho": s2_rho, "s2_sigma": s2_sigma, "runs": m, "n": n}


def balanced_run_statistics(values: np.ndarray, *, warmup: int, subsamples: int, share: float,
                            rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`run_statistics` for many runs of one length at once (``values``: runs × measurements),
    the bootstrap drawn for all of them in one array."""
    kept = values[:, warmup:] if values.shape[1] > warmup else values
    k = kept.shape[1]
    n = max(1, int(math.ceil(share * k)))
    if k == 1:
        return kept[:, 0].astype(float), np.zeros(len(kept)), n
    rows = np.arange(len(kept))[:, None, None]
    a = kept[rows, rng.integers(0, k, (len(kept), subsamples, n))]
    b = kept[rows, rng.integers(0, k, (len(kept), subsamples, n))]
    means = np.median(a.mean(2), axis=1)
    variances = np.median(b.var(2, ddof=1), axis=1) if n > 1 else np.zeros(len(kept))
    return means, variances, n


def mono_series(frame: pd.DataFrame, commits: list[str], *, warmup: int, subsamples: int, share: float,
                alpha: float, quantile: str, seed: int) -> pd.DataFrame:
    """The Mono interval of one series at every commit it has results for (commit order).

    When every process run of the series has as many measurements (the usual case), all runs
    are bootstrapped in one array; otherwise commit by commit (:func:`run_statistics`)."""
    rng = np.random.default_rng(seed)
    sizes = frame.groupby(["commit", "run"], sort=False).size()
    if sizes.nunique() == 1:
        ordered = frame.assign(_i=np.arange(len(frame))).sort_values(["commit", "run", "_i"], kind="stable")
        k = int(sizes.iloc[0])
        values = ordered["value"].to_numpy(float).reshape(-1, k)
        keys = ordered[["commit", "run"]].iloc[::k].reset_index(drop=True)
        means, variances, n = balanced_run_statistics(values, warmup=warmup, subsamples=subsamples, share=share,
                                                      rng=rng)
        agg = keys.assign(m=means, v=variances).groupby("commit", sort=False).agg(
            centre=("m", "mean"), s2_rho=("m", "var"), s2_sigma=("v", "mean"), runs=("m", "size"))
        m = agg["runs"].to_numpy()
        s2_rho = agg["s2_rho"].fillna(0.0).to_numpy()
        s2_sigma = agg["s2_sigma"].to_numpy()
        if quantile == "student":
            u = np.where(m > 1, student.ppf(1 - alpha / 2, df=np.maximum(m - 1, 1)), norm.ppf(1 - alpha / 2))
        else:
            u = np.full(len(m), norm.ppf(1 - alpha / 2))
        judged = (m > 1) | (s2_sigma > 0)
        half = np.where(judged, u * np.sqrt(np.maximum(n * s2_rho + s2_sigma, 0.0) / (m * n)), np.inf)
        out = pd.DataFrame({"commit": agg.index, "centre": agg["centre"].to_numpy(), "half": half, "s2_rho": s2_rho,
                            "s2_sigma": s2_sigma, "runs": m, "n": n})
        order = {c: i for i, c in enumerate(commits)}
        return out.assign(pos=out["commit"].map(order)).sort_values("pos").reset_index(drop=True)
    rows = []
    for commit, g in frame.groupby("commit", sort=False):
        runs = [grp["value"].to_numpy(float) for _, grp in g.groupby("run", sort=True)]
        means, variances, n = run_statistics(runs, warmup=warmup, subsamples=subsamples, share=share, rng=rng)
        rows.append({"commit": commit, **mono_interval(means, variances, n, alpha=alpha, quantile=quantile)})
    out = pd.DataFrame(rows)
    order = {c: i for i, c in enumerate(commits)}
    return out.assign(pos=out["commit"].map(order)).sort_values("pos").reset_index(drop=True)


def commit_effect(intervals: pd.DataFrame, *, alpha: float, quantile: str, window: int) -> pd.DataFrame:
    """Widen each interval by the variance commits show beyond their own runs' (``τ²``).

    Seed 002's interval covers the variance of process runs around a commit's mean.  On a
    real history the commits' means also move from commit to commit with no code change (the
    machine, the build, the session: runs of one commit are measured together), and that
    variance is in no interval: on Django's 903 commits, a quarter of consecutive pairs had
    non-overlapping intervals.  The paper's own random-effects argument, one level up: ``τ²``
    is the robust variance of the centres around their running median (``window`` commits;
    ``(1.4826·MAD)²``) minus the median variance of a centre's estimate ``(l/u)²``, never below
    0, and each half-length becomes ``u·sqrt((l/u)² + τ²)``."""
    if len(intervals) < 3:
        return intervals.assign(tau2=0.0)
    m = intervals["runs"].clip(lower=2).to_numpy()
    u = student.ppf(1 - alpha / 2, df=m - 1) if quantile == "student" else np.full(len(m), norm.ppf(1 - alpha / 2))
    own = (intervals["half"].to_numpy(float) / u) ** 2
    centre = intervals["centre"]
    resid = (centre - centre.rolling(window, center=True, min_periods=1).median()).to_numpy(float)
    mad = float(np.median(np.abs(resid - np.median(resid))))
    tau2 = max(0.0, (1.4826 * mad) ** 2 - float(np.nanmedian(own[np.isfinite(own)])) if np.isfinite(own).any() else 0.0)
    return intervals.assign(half=u * np.sqrt(own + tau2), tau2=tau2)


def mono_changes(intervals: pd.DataFrame, *, persist: int = 1) -> list[dict[str, Any]]:
    """Consecutive commits whose intervals do not overlap (seed 002 §5), each level holding for
    ``persist`` commits: every one of the ``persist`` commits up to the old one and every one of
    the ``persist`` commits from the new one are apart the same way, without overlap (one slow
    commit that the next one undoes is a noisy measurement, not two changes; 1 = the paper's rule)."""
    out = []
    rows = list(intervals.itertuples())
    for t in range(1, len(rows)):
        prev, cur = rows[t - 1], rows[t]
        if not (np.isfinite(prev.half) and np.isfinite(cur.half)):
            continue
        sign = np.sign(cur.centre - prev.centre)
        held = all(np.sign(b.centre - a.centre) == sign and abs(b.centre - a.centre) > a.half + b.half
                   for a in rows[max(0, t - persist):t] for b in rows[t:t + persist])
        if held:
            magnitude = (cur.centre - prev.centre) / abs(prev.centre) if prev.centre else 0.0
            out.append({"commit": cur.commit, "previous": prev.commit, "magnitude": float(magnitude),
                        "evidence": {"previous": [round(prev.centre, 6), round(prev.half, 6)],
                                     "new": [round(cur.centre, 6), round(cur.half, 6)]}})
    return out


def mono_summary(intervals: pd.DataFrame, warmup: int) -> dict[str, float | None]:
    """Per series: the impact factor ``S_ρ/S_σ`` and ``n_opt = sqrt(w·S²σ/S²ρ)`` (medians over commits)."""
    s2r, s2s = float(intervals["s2_rho"].median()), float(intervals["s2_sigma"].median())
    return {"impact_factor": round(math.sqrt(s2r / s2s), 4) if s2s > 0 else None,
            "n_opt": round(math.sqrt(warmup * s2s / s2r), 2) if s2r > 0 and warmup > 0 else None}


# --------------------------------------------------------------------------- pure core: output and scoring


def higher_is_better(benchmark: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(benchmark, p) for p in patterns)


def contract_rows(changes: list[dict[str, Any]], patterns: list[str]) -> list[dict[str, Any]]:
    """The contract's list (§3): regressions first, the largest on top."""
    rows = []
    for ch in changes:
        benchmark, cfg = ch["series"].rsplit("|", 1)
        up = ch["magnitude"] > 0
        worse = up != higher_is_better(benchmark, patterns)
        rows.append({"benchmark": benchmark, "config": cfg, "commit": ch["commit"],
                     "direction": "regression" if worse else "improvement",
                     "magnitude_pct": round(100 * ch["magnitude"], 3), "method": ch["method"],
                     "evidence": ch["evidence"]})
    return sorted(rows, key=lambda r: (r["direction"] != "regression", -abs(r["magnitude_pct"]), r["benchmark"],
                                       r["method"], r["commit"]))


def f1_scores(detected: dict[str, list[int]], truth: dict[str, list[int]], *, margin: int) -> dict[str, float]:
    """Change-point F1 over series, each detection matching at most one true change within
    ``margin`` commits.  ``f1_tcpd``: the convention of change-point benchmarks (van den Burg &
    Williams 2020): the series start counts as a change point in both sets, F1 per series,
    averaged; ``precision``/``recall``/``f1``: pooled counts without the start."""
    tp = fp = fn = 0
    per_series = []
    for s, true in truth.items():
        pred = sorted(set(detected.get(s, [])))
        hit, used = 0, set()
        for p in pred:
            match = next((t for t in true if abs(t - p) <= margin and t not in used), None)
            if match is not None:
                used.add(match)
                hit += 1
        tp, fp, fn = tp + hit, fp + len(pred) - hit, fn + len(true) - hit
        prec = (hit + 1) / (len(pred) + 1)
        rec = (hit + 1) / (len(true) + 1)
        per_series.append(2 * prec * rec / (prec + rec))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4),
            "f1_tcpd": round(float(np.mean(per_series)), 4) if per_series else None,
            "true_changes": tp + fn, "detected": tp + fp}


def detect_all(frame: pd.DataFrame, params: dict[str, Any], *, progress=None) -> dict[str, Any]:
    """Both detectors on one history; the contract's rows, Skia's clusters, Mono's intervals."""
    frame = check_frame(frame)
    commits = commit_order(frame)
    table = trace_matrix(frame, commits)
    sk, mo = params["skia"], params["mono"]
    skia, clusters = skia_changes(table, **skia_params(sk))
    mono, intervals, summaries = [], {}, {}
    groups = list(frame.assign(series=frame["benchmark"] + "|" + frame["config"]).groupby("series", sort=True))
    for i, (series, g) in enumerate(groups, 1):
        iv = mono_series(g, commits, warmup=int(mo["warmup"]), subsamples=int(mo["subsamples"]),
                         share=float(mo["subsample_share"]), alpha=float(mo["alpha"]), quantile=mo["quantile"],
                         seed=int(mo["seed"]))
        if mo["commit_effect"]:
            iv = commit_effect(iv, alpha=float(mo["alpha"]), quantile=mo["quantile"],
                               window=int(mo["commit_effect_window"]))
        intervals[series] = iv
        summaries[series] = mono_summary(iv, int(mo["warmup"]))
        mono += [{"series": series, "method": "mono", **c,
                  "evidence": {**c["evidence"], **summaries[series]}}
                 for c in mono_changes(iv, persist=int(mo["persist"]))]
        if progress:
            progress(i, len(groups), series)
    return {"commits": commits, "table": table, "skia": skia, "mono": mono, "clusters": clusters,
            "intervals": intervals, "summaries": summaries}


# --------------------------------------------------------------------------- I/O shell


def read_series(source: str | Path) -> pd.DataFrame:
    """A commit series file (CSV, CSV.gz or Parquet)."""
    path = Path(source)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, dtype={"commit": str, "benchmark": str, "config": str})


def series_svg(values: np.ndarray, lows: np.ndarray | None, highs: np.ndarray | None, marks: list[int],
               *, width: int = 560, height: int = 90) -> str:
    """An inline SVG of one series: the Mono interval as a band, the per-commit result as a line,
    detected changes as red ticks (text-free: nothing from the input is written into it)."""
    lo = np.nanmin(lows if lows is not None else values)
    hi = np.nanmax(highs if highs is not None else values)
    span = hi - lo if hi > lo else 1.0
    n = max(len(values) - 1, 1)
    x = lambda i: 4 + (width - 8) * i / n                      # noqa: E731
    y = lambda v: height - 4 - (height - 8) * (v - lo) / span  # noqa: E731
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    if lows is not None and highs is not None:
        top = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(highs) if np.isfinite(v))
        bottom = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in reversed(list(enumerate(lows))) if np.isfinite(v))
        parts.append(f'<polygon points="{top} {bottom}" fill="#cfd8e3" stroke="none"/>')
    line = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(values) if np.isfinite(v))
    parts.append(f'<polyline points="{line}" fill="none" stroke="#2b5b8a" stroke-width="1.2"/>')
    for i in marks:
        parts.append(f'<line x1="{x(i):.1f}" x2="{x(i):.1f}" y1="2" y2="{height - 2}" stroke="#c0392b" stroke-width="1.5"/>')
    parts.append("</svg>")
    return "".join(parts)


def render_page(rows: list[dict[str, Any]], result: dict[str, Any] | None, *, source: str | None,
                new_clusters: list[dict[str, Any]], metrics: dict[str, Any] | None, top_series: int,
                problem: str | None = None) -> str:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(config.TEMPLATES), autoescape=select_autoescape(["html", "j2"]))
    series = []
    if result is not None:
        pos = {c: i for i, c in enumerate(result["commits"])}
        order = list(dict.fromkeys(f"{r['benchmark']}|{r['config']}" for r in rows))[:top_series]
        for s in order:
            iv = result["intervals"].get(s)
            values = result["table"].loc[s].to_numpy(float) if s in result["table"].index else np.array([])
            lows = highs = None
            if iv is not None and len(iv):
                full = iv.set_index("commit").reindex(result["commits"])
                values = full["centre"].to_numpy(float)
                lows, highs = (full["centre"] - full["half"]).to_numpy(float), (full["centre"] + full["half"]).to_numpy(float)
            marks = sorted({pos[r["commit"]] for r in rows if f"{r['benchmark']}|{r['config']}" == s})
            svg = series_svg(values, lows, highs, marks) if len(values) else None
            found = [r for r in rows if f"{r['benchmark']}|{r['config']}" == s]
            series.append({"name": s, "svg": svg, "changes": found, "summary": result["summaries"].get(s, {})})
    import base64
    for item in series:
        if item["svg"]:
            item["svg"] = "data:image/svg+xml;base64," + base64.b64encode(item["svg"].encode()).decode()
    return env.get_template("commits.html.j2").render(
        rows=rows, series=series, source=source, new_clusters=new_clusters, metrics=metrics, problem=problem,
        regressions=sum(r["direction"] == "regression" for r in rows),
        commits=len(result["commits"]) if result else 0,
        benchmarks=len(result["table"]) if result else 0)


def score_against(result: dict[str, Any], labels: dict[str, Any], margin: int) -> dict[str, Any]:
    """Precision, recall and F1 of each detector (and of reporting no change) against labelled change commits."""
    pos = {c: i for i, c in enumerate(result["commits"])}
    truth = {s: [pos[c] for c in v["change_commits"] if c in pos] for s, v in labels["series"].items()}
    out = {}
    for method in ("skia", "mono"):
        det: dict[str, list[int]] = {}
        for ch in result[method]:
            det.setdefault(ch["series"], []).append(pos[ch["commit"]])
        out[method] = f1_scores(det, truth, margin=margin)
    out["no_change"] = f1_scores({}, truth, margin=margin)
    n = max(len(result["commits"]), 1)
    for method in ("skia", "mono"):
        out[method]["changes_per_100_commits"] = round(100 * len(result[method]) / n / max(len(truth), 1), 3)
    return out


@locks.holding("commit_changes")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("commit_changes")
    config.ensure_dirs(config.COMMIT_REPORTS)
    source = params.get("source")
    metrics_path = config.METRICS / "commit_changes.json"
    if not config.COMMIT_CLUSTERS.exists():          # every output DVC expects, whatever happens below
        archive.write_json_atomic(config.COMMIT_CLUSTERS, [])
    if not source:
        archive.write_json_atomic(config.COMMIT_REPORTS / "changes.json", [])
        archive.write_text_atomic(config.COMMIT_REPORTS / "index.html",
                                  render_page([], None, source=None, new_clusters=[], metrics=None, top_series=0))
        archive.write_json_atomic(metrics_path, {})
        print("[commit_changes] no commit series configured (commit_changes.source): nothing to do")
        return
    path = Path(source) if Path(source).is_absolute() else config.ROOT / source
    try:
        frame = check_frame(read_series(path))
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        # a missing or unreadable series must not stop the night: the page says what is wrong
        problem = f"{type(exc).__name__}: {exc}"[:500]
        log.error("commit_changes: cannot read the commit series %s: %s", path, problem)
        archive.write_json_atomic(config.COMMIT_REPORTS / "changes.json", [])
        archive.write_text_atomic(config.COMMIT_REPORTS / "index.html",
                                  render_page([], None, source=str(source), new_clusters=[], metrics=None,
                                              top_series=0, problem=problem))
        archive.write_json_atomic(metrics_path, {})
        return
    n_series = int(frame[["benchmark", "config"]].drop_duplicates().shape[0])
    prog = Progress(log, "commit_changes mono", n_series, what="series", every=max(1, n_series // 20))
    result = detect_all(frame, params, progress=lambda i, n, s: prog.step(i, s))
    rows = contract_rows(result["skia"] + result["mono"], list(params["higher_is_better"]))
    known = archive.read_json(config.COMMIT_CLUSTERS) if config.COMMIT_CLUSTERS.exists() else []
    registry, new_ids = coalesce(known, result["clusters"])
    archive.write_json_atomic(config.COMMIT_CLUSTERS, registry)
    metrics = None
    labels_file = params.get("labels")
    if labels_file:
        lpath = Path(labels_file) if Path(labels_file).is_absolute() else config.ROOT / labels_file
        if lpath.exists():
            metrics = score_against(result, archive.read_json(lpath), int(params["match_margin"]))
    archive.write_json_atomic(config.COMMIT_REPORTS / "changes.json", rows)
    archive.write_text_atomic(config.COMMIT_REPORTS / "index.html",
                              render_page(rows, result, source=str(source),
                                          new_clusters=[c for c in registry if c["id"] in new_ids],
                                          metrics=metrics, top_series=int(params["page_series"])))
    archive.write_json_atomic(metrics_path, metrics or {})
    print(f"[commit_changes] {len(result['table'])} series x {len(result['commits'])} commits: "
          f"skia {len(result['skia'])} change(s) in {len(result['clusters'])} interesting cluster(s) "
          f"({len(new_ids)} new), mono {len(result['mono'])}; {sum(r['direction'] == 'regression' for r in rows)} "
          f"regression(s) -> {config.COMMIT_REPORTS / 'index.html'}")
    if metrics:
        print(f"[commit_changes] against the labels: {metrics}")


@locks.holding("commit_changes triage")
def triage_main(argv: list[str]) -> None:
    """``python -m pipelines.commit_changes triage CLUSTER --status positive|negative|untriaged --by NAME``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m pipelines.commit_changes triage",
                                     description="Triage an interesting Skia cluster of the commit page.")
    parser.add_argument("cluster", help="the cluster's id on the commit page, e.g. c0003")
    parser.add_argument("--status", required=True, choices=TRIAGE_STATUSES)
    parser.add_argument("--by", required=True, help="who triaged it")
    parser.add_argument("--note", default=None)
    args = parser.parse_args(argv)
    known = archive.read_json(config.COMMIT_CLUSTERS) if config.COMMIT_CLUSTERS.exists() else []
    try:
        registry = triage_cluster(known, args.cluster, args.status, by=args.by, note=args.note,
                                  at=pd.Timestamp.now(tz="UTC").isoformat(timespec="seconds"))
    except ValueError as exc:
        parser.error(str(exc))
    archive.write_json_atomic(config.COMMIT_CLUSTERS, registry)
    print(f"[commit_changes] cluster {args.cluster}: {args.status} (by {args.by})")


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["triage"]:
        triage_main(sys.argv[2:])
    else:
        main()
