"""Skia: k-means of normalised traces over a window of commits and a step function per centroid.

Seed 001.  Every benchmark's series over a window of commits (the median of its
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
"""
from __future__ import annotations

from dataclasses import dataclass

import math
from typing import Any, TypedDict, cast

import numpy as np
import pandas as pd

from pipelines.commit_series.changes import ClusterEntry, SeriesChange, SkiaCluster


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
    seeds = [points[rng.integers(n)]]
    for _ in range(1, k):
        d2 = np.min(((points[:, None, :] - np.array(seeds)[None]) ** 2).sum(-1), axis=1)
        seeds.append(points[rng.choice(n, p=d2 / d2.sum())] if d2.sum() > 0 else points[rng.integers(n)])
    centres = np.array(seeds)
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


def block_permutation(n: int, block: int, rng: np.random.Generator) -> np.ndarray:
    """An order of ``n`` commits that shuffles blocks of ``block`` consecutive commits (1: every
    commit on its own)."""
    starts = np.arange(0, n, max(1, block))
    return np.concatenate([np.arange(s, min(s + block, n)) for s in rng.permutation(starts)])


def permutation_threshold(points: np.ndarray, k: int, *, seed: int, min_segment: int, permutations: int,
                          quantile: float, grouping: str = "kmeans", null_block: int = 1) -> float:
    """The ``quantile`` of the largest ``|R|`` when the window's commits are shuffled (one
    permutation for every trace, so traces keep moving together but no step stays a step):
    what ``|R|`` reaches by chance on this data, for the centroids (``kmeans``) or for single
    traces (``individual``).  ``interesting: auto`` uses it.  ``null_block`` commits move
    together (a block permutation, Künsch 1989): shuffling single commits destroys the
    autocorrelation and the slow moves real series have without any change, so they would look
    interesting; blocks keep them in the null."""
    rng = np.random.default_rng(seed)
    null = [largest_factor(points[:, block_permutation(points.shape[1], null_block, rng)], k, seed=seed,
                           min_segment=min_segment, grouping=grouping)
            for _ in range(permutations)]
    return float(np.quantile(null, quantile))


GROUPINGS = ("kmeans", "individual", "both")


@dataclass(frozen=True)
class SkiaParams:
    """``commit_changes.skia`` in params.yaml (seed 001): the window, k-means, the step fit's
    segments, the interesting threshold (a number, or ``auto``: the shuffled window's null), the
    members' rules, and the grouping (``kmeans``, ``individual``, ``both``)."""

    window: int = 100
    k: int = 0
    sd_floor: float = 0.001
    min_segment: int = 3
    interesting: float | str = "auto"
    seed: int = 0
    coalesce_traces: int = 20
    merge_margin: int = 3
    permutations: int = 20
    null_quantile: float = 0.99
    member_share: float = 0.5
    member_margin: int = 5
    grouping: str = "kmeans"
    null_block: int = 1


def skia_window(traces: pd.DataFrame, p: SkiaParams) -> list[SkiaCluster]:
    """Seed 001 on one window of commits (``traces``: series × commits): the interesting clusters
    with their members, step commit, R, and the traces nearest their centroid.

    ``grouping``: ``kmeans`` (the seed's clusters), ``individual`` (every trace its own cluster:
    its own best step, judged against the largest single-trace ``|R|`` of the shuffled window —
    Skia Perf's "individual" step fit) or ``both`` (the two lists; a series found by both keeps
    its larger ``|R|`` in :func:`skia_changes`)."""
    if p.grouping not in GROUPINGS:
        raise ValueError(f"commit_changes.skia.grouping must be one of {', '.join(GROUPINGS)}, not {p.grouping!r}")
    min_segment = p.min_segment
    if traces.shape[1] < 2 * min_segment or traces.empty:
        return []
    points = normalize_traces(traces.to_numpy(float), p.sd_floor)
    trace_fits = step_fits(points, min_segment=min_segment)       # each trace's own best step, once
    found = []
    if p.grouping in ("individual", "both"):
        found += individual_steps(traces, points, trace_fits, p)
    if p.grouping == "individual":
        return found
    k = p.k or int(math.ceil(math.sqrt(len(points) / 2)))
    labels, centres = kmeans(points, k, seed=p.seed)
    interesting = p.interesting
    if interesting == "auto":
        interesting = permutation_threshold(points, k, seed=p.seed, min_segment=min_segment,
                                            permutations=p.permutations, quantile=p.null_quantile,
                                            null_block=p.null_block)
    interesting = float(interesting)
    for c in sorted(set(labels)):
        members = np.flatnonzero(labels == c)
        fit = step_fit(centres[c], min_segment=min_segment)
        if fit["index"] < 0 or abs(fit["regression"]) < interesting:
            continue
        dist = ((points[members] - centres[c]) ** 2).sum(1)
        nearest = [traces.index[members[j]] for j in np.argsort(dist)[:p.coalesce_traces]]
        i = fit["index"]
        own = points[members, :i].mean(1) - points[members, i:].mean(1)      # each member's step there
        stepped = members[(np.sign(own) == np.sign(fit["step"])) & (np.abs(own) >= p.member_share * abs(fit["step"]))]
        at = {}
        for j in stepped:                        # where the member's own best step is, near the centroid's
            own_index = int(trace_fits["index"][j])
            if abs(own_index - i) <= p.member_margin:
                at[traces.index[j]] = traces.columns[own_index]
        if not at:
            continue
        found.append(cast(SkiaCluster, {"members": list(at), "member_commits": at, "cluster_size": len(members),
                      "commit": traces.columns[fit["index"]],
                      "index": fit["index"], "regression_factor": fit["regression"], "step": fit["step"],
                      "fit": fit["fit"], "nearest": sorted(nearest), "threshold": interesting, "grouping": "kmeans"}))
    return found


def individual_steps(traces: pd.DataFrame, points: np.ndarray, fits: dict[str, np.ndarray],
                     p: SkiaParams) -> list[SkiaCluster]:
    """Every trace of the window whose own best step (``fits``: :func:`step_fits` of ``points``)
    reaches ``interesting`` (``auto``: the ``null_quantile`` of the largest single-trace ``|R|``
    over shuffles of the window's commits), as a cluster of one."""
    interesting = p.interesting
    if interesting == "auto":
        interesting = permutation_threshold(points, 1, seed=p.seed, min_segment=p.min_segment,
                                            permutations=p.permutations, quantile=p.null_quantile,
                                            grouping="individual", null_block=p.null_block)
    threshold = float(interesting)
    out: list[SkiaCluster] = []
    for j in np.flatnonzero((fits["index"] >= 0) & (np.abs(fits["regression"]) >= threshold)):
        name, i = traces.index[j], int(fits["index"][j])
        out.append({"members": [name], "member_commits": {name: traces.columns[i]}, "cluster_size": 1,
                    "commit": traces.columns[i], "index": i, "regression_factor": float(fits["regression"][j]),
                    "step": float(fits["step"][j]), "fit": float(fits["fit"][j]), "nearest": [name],
                    "threshold": threshold, "grouping": "individual"})
    return out


def skia_params(sk: dict[str, Any]) -> SkiaParams:
    """:class:`SkiaParams` from the ``commit_changes.skia`` params."""
    return SkiaParams(window=int(sk["window"]), k=int(sk["k"]), sd_floor=float(sk["sd_floor"]),
                      min_segment=int(sk["min_segment"]), interesting=sk["interesting"], seed=int(sk["seed"]),
                      coalesce_traces=int(sk["coalesce_traces"]), merge_margin=int(sk["merge_margin"]),
                      permutations=int(sk["permutations"]), null_quantile=float(sk["null_quantile"]),
                      member_share=float(sk["member_share"]), member_margin=int(sk["member_margin"]),
                      grouping=sk["grouping"], null_block=int(sk.get("null_block", 1)))


def windows(n: int, size: int) -> list[tuple[int, int]]:
    """Windows of ``size`` commits overlapping by half, covering ``0..n``."""
    if n <= size:
        return [(0, n)]
    stride = max(1, size // 2)
    starts = list(range(0, n - size + 1, stride))
    if starts[-1] + size < n:
        starts.append(n - size)
    return [(s, s + size) for s in starts]


class MemberStep(TypedDict):
    """A series' step in one interesting cluster: the commit it stepped at, the cluster's regression
    factor and size (the larger factor wins between two steps within ``merge_margin`` commits)."""

    commit: str
    regression_factor: float
    cluster_size: int


def skia_changes(table: pd.DataFrame, p: SkiaParams) -> tuple[list[SeriesChange], list[SkiaCluster]]:
    """Skia over the whole history: (per-series changes, interesting clusters)."""
    window, merge_margin = p.window, p.merge_margin
    commits = list(table.columns)
    pos = {c: i for i, c in enumerate(commits)}
    per_series: dict[str, list[MemberStep]] = {}
    clusters = []
    for start, end in windows(len(commits), window):
        for cl in skia_window(table.iloc[:, start:end], p):
            clusters.append(cl)
            for s in cl["members"]:
                commit = cl["member_commits"][s]
                found = per_series.setdefault(s, [])
                twin = next((f for f in found if abs(pos[f["commit"]] - pos[commit]) <= merge_margin), None)
                entry: MemberStep = {"commit": commit, "regression_factor": cl["regression_factor"],
                                     "cluster_size": cl["cluster_size"]}
                if twin is None:
                    found.append(entry)
                elif abs(entry["regression_factor"]) > abs(twin["regression_factor"]):
                    found[found.index(twin)] = entry
    changes: list[SeriesChange] = []
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


def coalesce(known: list[ClusterEntry], found: list[SkiaCluster]) -> tuple[list[ClusterEntry], list[str]]:
    """Seed 001's cluster coalescing: a found interesting cluster whose nearest traces are all
    among a known cluster's nearest traces is that cluster (its triage status kept); the others
    are new.  Returns the updated registry and the ids of the new clusters."""
    registry = [ClusterEntry(**c) for c in known]
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


def triage_cluster(registry: list[ClusterEntry], cluster_id: str, status: str, *, by: str, at: str,
                   note: str | None = None) -> list[ClusterEntry]:
    """Seed 001's triage of an interesting cluster: ``positive`` (a real change), ``negative``
    (not one) or back to ``untriaged``, with who and when.  Returns the updated registry; a later
    night coalesces the same cluster into this entry and keeps its status, so it does not rise
    for triage again."""
    if status not in TRIAGE_STATUSES:
        raise ValueError(f"status must be one of {', '.join(TRIAGE_STATUSES)}, not {status!r}")
    ids = [c["id"] for c in registry]
    if cluster_id not in ids:
        raise ValueError(f"no interesting cluster {cluster_id!r} (known: {', '.join(ids[-10:]) or 'none'})")
    out = [ClusterEntry(**c) for c in registry]
    out[ids.index(cluster_id)].update({"status": status, "triaged_by": by, "triaged_at": at, "note": note})
    return out

