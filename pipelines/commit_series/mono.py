"""Mono: bootstrap sub-selections of repeated process runs, and confidence intervals per commit.

Seed 002.  Per benchmark, config and commit, with ``m`` process runs of ``k``
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
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm
from scipy.stats import t as student

from pipelines.commit_series.changes import SeriesChange


@dataclass(frozen=True)
class MonoParams:
    """The ``commit_changes.mono`` block, typed: the ``warmup`` measurements dropped from each run,
    the bootstrap's ``subsamples`` of ``subsample_share`` of a run, the intervals' ``alpha`` and
    ``quantile`` (``normal`` or ``student``), whether intervals widen by the commits' own variance
    (``commit_effect``, over ``commit_effect_window`` commits), the commits a new level must hold
    (``persist``), the outliers of a one-value-per-commit series (``despike_sd``; 0 keeps them)
    and the ``seed``."""

    warmup: int
    subsamples: int
    subsample_share: float
    alpha: float
    quantile: str
    commit_effect: bool
    commit_effect_window: int
    persist: int
    despike_sd: float
    seed: int

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "MonoParams":
        return cls(warmup=int(block["warmup"]), subsamples=int(block["subsamples"]),
                   subsample_share=float(block["subsample_share"]), alpha=float(block["alpha"]),
                   quantile=str(block["quantile"]), commit_effect=bool(block["commit_effect"]),
                   commit_effect_window=int(block["commit_effect_window"]), persist=int(block["persist"]),
                   despike_sd=float(block.get("despike_sd") or 0.0), seed=int(block["seed"]))


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
    order = {c: i for i, c in enumerate(commits)}
    if frame["commit"].is_unique:              # one value per commit: no run to bootstrap, no interval of its own
        out = pd.DataFrame({"commit": frame["commit"].to_numpy(), "centre": frame["value"].to_numpy(float),
                            "half": np.inf, "s2_rho": 0.0, "s2_sigma": 0.0, "runs": 1, "n": 1})
        return out.assign(pos=out["commit"].map(order)).sort_values("pos").reset_index(drop=True)
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
    0, and each half-length becomes ``u·sqrt((l/u)² + τ²)``.

    A commit measured once (one run of one measurement after warm-up: no variance of its own,
    ``l`` infinite) has ``(l/u)² = 0`` here, so a history of one value per commit — the common
    nightly benchmark — is judged by the noise of the series itself: ``τ²`` is then the whole
    robust variance around the running median (a level shift moves the median with it, so the
    step does not inflate it).  ``noise`` says which: ``runs`` or ``series``."""
    if len(intervals) < 3:
        return intervals.assign(tau2=0.0, noise="runs")
    m = intervals["runs"].clip(lower=2).to_numpy()
    u = student.ppf(1 - alpha / 2, df=m - 1) if quantile == "student" else np.full(len(m), norm.ppf(1 - alpha / 2))
    own = (intervals["half"].to_numpy(float) / u) ** 2
    measured = np.isfinite(own)
    own = np.where(measured, own, 0.0)
    centre = intervals["centre"]
    resid = (centre - centre.rolling(window, center=True, min_periods=1).median()).to_numpy(float)
    mad = float(np.median(np.abs(resid - np.median(resid))))
    tau2 = max(0.0, (1.4826 * mad) ** 2 - (float(np.median(own[measured])) if measured.any() else 0.0))
    return intervals.assign(half=u * np.sqrt(own + tau2), tau2=tau2, noise=np.where(measured, "runs", "series"))


def mono_changes(intervals: pd.DataFrame, *, persist: int = 1) -> list[SeriesChange]:
    """Consecutive commits whose intervals do not overlap (seed 002 §5), each level holding for
    ``persist`` commits: every one of the ``persist`` commits up to the old one and every one of
    the ``persist`` commits from the new one are apart the same way, without overlap (one slow
    commit that the next one undoes is a noisy measurement, not two changes; 1 = the paper's rule)."""
    out: list[SeriesChange] = []
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


def mono_summary(intervals: pd.DataFrame, warmup: int) -> dict[str, float | str | None]:
    """Per series: the impact factor ``S_ρ/S_σ`` and ``n_opt = sqrt(w·S²σ/S²ρ)`` (medians over commits)."""
    s2r, s2s = float(intervals["s2_rho"].median()), float(intervals["s2_sigma"].median())
    from_series = "noise" in intervals and bool((intervals["noise"] == "series").mean() > 0.5)
    return {"impact_factor": round(math.sqrt(s2r / s2s), 4) if s2s > 0 else None,
            "n_opt": round(math.sqrt(warmup * s2s / s2r), 2) if s2r > 0 and warmup > 0 else None,
            "noise_from": "series" if from_series else "runs"}

