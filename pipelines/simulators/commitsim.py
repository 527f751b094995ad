"""commitsim: a benchmark history per commit with known change points (the example input of
``commit_changes``; the data contract §3).

What makes change detection on commit series hard, each present and labelled:

- **benchmarks that move together**: benchmarks come in groups (one subsystem each); a
  change at a commit moves every benchmark of its group by its own share (Skia, seed 001:
  "if I speed up rectangle drawing then all tests that use rectangles should get faster");
- **bimodal process runs** (seed 002, Fig. 1): each process run settles in one of two
  typical levels, so runs differ more than measurements inside a run (impact factor ≫ 1);
- **outliers**: rare measurements several times the typical duration;
- **auto-dependence** inside a run (AR(1) measurements, seed 002 §4.1) and a warm-up whose
  first measurements are slow;
- benchmarks with **no change** at all, and changes in both directions.

Writes ``benchmarks.csv.gz`` (one row per measurement: ``commit, commit_time, benchmark,
config, run, value``) and ``commit_labels.json`` (per ``benchmark|config``, the index and id
of every commit where its level changed).  Pure core (:func:`simulate`), thin shell.
"""
from __future__ import annotations

from dataclasses import dataclass

import hashlib
from datetime import datetime, timedelta, timezone
from typing import Any, TypedDict

import numpy as np
import pandas as pd

SHAPES = ("gaussian", "bimodal", "outliers", "autocorrelated")


def commit_times(n: int, start: str = "2026-01-01") -> list[str]:
    """The commit times of a simulated history: one every 6 hours from ``start`` (UTC)."""
    t0 = datetime.fromisoformat(start).replace(tzinfo=timezone.utc)
    return [(t0 + timedelta(hours=6 * i)).strftime("%Y-%m-%dT%H:%M:%S") for i in range(n)]


def commit_id(i: int, seed: int) -> str:
    return hashlib.sha1(f"commit-{seed}-{i}".encode()).hexdigest()[:12]


@dataclass(frozen=True)
class CommitHistory:
    """The simulated history's shape (``params.yaml: commitsim``).  ``changes_per_group`` is the
    (min, max) number of level changes of a group; each moves the level by a factor drawn between
    ``min_change`` and ``max_change`` (either direction); ``static_share`` of the benchmarks never
    change; change points are at least ``min_gap`` commits apart and from either end."""

    seed: int
    n_commits: int
    n_groups: int
    benchmarks_per_group: int
    runs: int
    measurements: int
    warmup: int
    changes_per_group: tuple[int, int]
    min_change: float
    max_change: float
    static_share: float
    min_gap: int
    start: str = "2026-01-01"

    @classmethod
    def from_params(cls, p: dict[str, Any], **override: Any) -> "CommitHistory":
        """The ``commitsim`` block of params.yaml (``override``: a field replaced, e.g. ``seed``)."""
        fields = {"seed": int(p["seed"]), "n_commits": int(p["n_commits"]), "n_groups": int(p["n_groups"]),
                  "benchmarks_per_group": int(p["benchmarks_per_group"]), "runs": int(p["runs"]),
                  "measurements": int(p["measurements"]), "warmup": int(p["warmup"]),
                  "changes_per_group": tuple(p["changes_per_group"]), "min_change": float(p["min_change"]),
                  "max_change": float(p["max_change"]), "static_share": float(p["static_share"]),
                  "min_gap": int(p["min_gap"])}
        return cls(**{**fields, **override})


# a simulated series' truth: its shape (the realistic histories' class too), its changes' positions and commits
SeriesTruth = TypedDict("SeriesTruth", {"shape": str, "class": str, "change_index": list[int],
                                        "change_commits": list[str]}, total=False)


class CommitLabels(TypedDict):
    """The labels of a simulated history (``labels.json``): the commits in order and each series' truth."""

    commits: list[str]
    series: dict[str, SeriesTruth]


def simulate(h: CommitHistory) -> tuple[pd.DataFrame, CommitLabels]:
    """The measurements and the truth of the history ``h`` (see the module doc)."""
    seed, n_commits, n_groups, benchmarks_per_group = h.seed, h.n_commits, h.n_groups, h.benchmarks_per_group
    runs, measurements, warmup, changes_per_group = h.runs, h.measurements, h.warmup, h.changes_per_group
    min_change, max_change, static_share, min_gap, start = h.min_change, h.max_change, h.static_share, h.min_gap, h.start
    rng = np.random.default_rng(seed)
    commits = [commit_id(i, seed) for i in range(n_commits)]
    times = commit_times(n_commits, start)
    frames: list[pd.DataFrame] = []
    truth: dict[str, SeriesTruth] = {}
    for g in range(n_groups):
        n_changes = int(rng.integers(changes_per_group[0], changes_per_group[1] + 1))
        points = _change_points(rng, n_commits, n_changes, gap=min_gap, tries=200)
        factors = [float(rng.uniform(min_change, max_change) * rng.choice([-1, 1])) for _ in points]
        for b in range(benchmarks_per_group):
            name = f"group{g}.bench{b}"
            shape = SHAPES[(g * benchmarks_per_group + b) % len(SHAPES)]
            static = rng.random() < static_share
            base = float(rng.uniform(1.0, 100.0))
            level = np.full(n_commits, base)
            moved = []
            if not static:
                share = float(rng.uniform(0.6, 1.4))        # each member moves by its own share
                for p, f in zip(points, factors):
                    level[p:] *= 1.0 + f * share
                    moved.append(p)
            noise = base * float(rng.uniform(0.01, 0.04))
            values = _measurements(rng, level, shape, noise, runs=runs, measurements=measurements, warmup=warmup)
            commit_idx = np.repeat(np.arange(n_commits), runs * (warmup + measurements))
            run_idx = np.tile(np.repeat(np.arange(runs), warmup + measurements), n_commits)
            frames.append(pd.DataFrame({"commit": np.array(commits)[commit_idx], "commit_time": np.array(times)[commit_idx],
                                        "benchmark": name, "config": "default", "run": run_idx,
                                        "value": np.round(values, 6)}))
            truth[f"{name}|default"] = {"shape": shape, "change_index": moved,
                                        "change_commits": [commits[p] for p in moved]}
    return pd.concat(frames, ignore_index=True), {"commits": commits, "series": truth}


def _measurements(rng, level: np.ndarray, shape: str, noise: float, *, runs: int, measurements: int,
                  warmup: int) -> np.ndarray:
    """Every measurement of one benchmark: commits × runs × (warm-up + measurements), flat."""
    n = warmup + measurements
    out = np.empty((len(level), runs, n))
    for i, mu in enumerate(level):
        for j in range(runs):
            run_mu = mu * (1.0 + rng.normal(0, 0.005))             # runs differ a little
            if shape == "bimodal":                                  # a run settles in one of two levels
                run_mu *= 1.0 + (0.06 if rng.random() < 0.4 else 0.0)
            e = rng.normal(0, noise, n)
            if shape == "autocorrelated":
                for k in range(1, n):
                    e[k] = 0.8 * e[k - 1] + 0.6 * e[k]
            x = run_mu + e
            if shape == "outliers":
                hit = rng.random(n) < 0.03
                x[hit] *= rng.uniform(3, 8, hit.sum())
            x[:warmup] *= np.linspace(1.5, 1.1, warmup) if warmup else 1.0   # slow first measurements
            out[i, j] = x
    return out.reshape(-1)


# --------------------------------------------------------------------------- one value per commit

CLASSES = ("quiet", "autocorrelated", "drift", "outliers", "heavy_tails", "seasonal", "steps", "variance",
           "trend", "curved_trend", "random_walk", "level_noise",
           "trend_steps", "seasonal_steps", "random_walk_steps", "heavy_tail_steps")
UNCHANGED = ("quiet", "autocorrelated", "drift", "outliers", "heavy_tails", "seasonal")


def realistic(*, seed: int, n_commits: int = 400, series_per_class: int = 6,
              classes: tuple[str, ...] = CLASSES) -> tuple[pd.DataFrame, CommitLabels]:
    """Histories as nightly benchmarks record them: **one value per commit** (no repeated runs),
    a class of series each, every one labelled.  Six classes have no change at all over hundreds
    of commits, only what real series do without a code change: ``quiet`` (independent noise),
    ``autocorrelated`` (AR(1) noise, φ 0.5-0.9: the machine's slow moods), ``drift`` (a random
    walk of the level, a few % over the history), ``outliers`` (isolated commits 1.5-4x slower, 2 %
    of them), ``heavy_tails`` (Student's t noise, 2.5 degrees of freedom), ``seasonal`` (a weekly
    or monthly cycle of 1-3 noise sd).  Two change: ``steps`` (1-3 level shifts of 3-15 noise sd
    over AR(1) noise, φ up to 0.5), ``variance`` (the noise sd grows 3-5x at one commit, the level
    kept).  What real histories do that no code change explains, as whole-history shapes:
    ``trend`` (the level grows or shrinks linearly by 5-2,000 noise sd over the history),
    ``curved_trend`` (the same amount along a saturating or accelerating curve), ``random_walk``
    (the level is the sum of its own increments: no level to return to), ``level_noise`` (a
    trending level whose noise grows with it, multiplicative noise); and four with 1-2 real steps
    of 4-15 noise sd on such a background: ``trend_steps``, ``seasonal_steps``,
    ``random_walk_steps`` (the step 6-15 increment sd), ``heavy_tail_steps``.  The noise sd is
    1-3 % of the level.  Same output as :func:`simulate`, with each series' ``class``."""
    rng = np.random.default_rng(seed)
    commits = [commit_id(i, 10_000 + seed) for i in range(n_commits)]
    times = commit_times(n_commits)
    frames: list[pd.DataFrame] = []
    truth: dict[str, SeriesTruth] = {}
    for cls in classes:
        for j in range(series_per_class):
            base = float(rng.uniform(1.0, 100.0))
            sd = base * float(rng.uniform(0.01, 0.03))
            values, points = _realistic_series(rng, cls, n_commits, base, sd)
            name = f"{cls}.s{j}"
            frames.append(pd.DataFrame({"commit": commits, "commit_time": times, "benchmark": name,
                                        "config": "default", "run": 0, "value": np.round(values, 6)}))
            truth[f"{name}|default"] = {"class": cls, "shape": cls, "change_index": points,
                                        "change_commits": [commits[p] for p in points]}
    return pd.concat(frames, ignore_index=True), {"commits": commits, "series": truth}


def _ar1(rng, n: int, phi: float, sd: float) -> np.ndarray:
    """AR(1) noise of marginal sd ``sd``."""
    e = rng.normal(0.0, sd * np.sqrt(1.0 - phi * phi), n)
    out = np.empty(n)
    out[0] = rng.normal(0.0, sd)
    for t in range(1, n):
        out[t] = phi * out[t - 1] + e[t]
    return out


def _change_points(rng, n: int, count: int, gap: int = 30, tries: int = 500) -> list[int]:
    """Up to ``count`` change points at least ``gap`` commits apart and from either end, sorted
    (``tries`` draws at most)."""
    points: list[int] = []
    for _ in range(tries):
        if len(points) == count:
            break
        c = int(rng.integers(gap, n - gap))
        if all(abs(c - p) >= gap for p in points):
            points.append(c)
    return sorted(points)


def _realistic_series(rng, cls: str, n: int, base: float, sd: float) -> tuple[np.ndarray, list[int]]:
    """One series of class ``cls`` and its change points."""
    level = np.full(n, base)
    points: list[int] = []
    if cls == "quiet":
        noise = rng.normal(0.0, sd, n)
    elif cls == "autocorrelated":
        noise = _ar1(rng, n, float(rng.uniform(0.5, 0.9)), sd)
    elif cls == "drift":
        level = base * (1.0 + np.cumsum(rng.normal(0.0, float(rng.uniform(0.02, 0.05)) / np.sqrt(n), n)))
        noise = rng.normal(0.0, sd, n)
    elif cls == "outliers":
        noise = rng.normal(0.0, sd, n)
        hit = rng.random(n) < 0.02
        level = np.where(hit, base * rng.uniform(1.5, 4.0, n), level)
    elif cls == "heavy_tails":
        noise = sd * rng.standard_t(2.5, n) / np.sqrt(2.5 / 0.5)
    elif cls == "seasonal":
        period = float(rng.choice([7 * 4, 30 * 4]))           # a week or a month of 6-hourly commits
        noise = rng.normal(0.0, sd, n) + float(rng.uniform(1.0, 3.0)) * sd * np.sin(2 * np.pi * np.arange(n) / period)
    elif cls == "steps":
        points = _change_points(rng, n, int(rng.integers(1, 4)))
        for p in points:
            level[p:] += float(rng.uniform(3.0, 15.0)) * sd * float(rng.choice([-1, 1]))
        noise = _ar1(rng, n, float(rng.uniform(0.0, 0.5)), sd)
    elif cls == "variance":
        points = _change_points(rng, n, 1)
        scale = np.where(np.arange(n) >= points[0], float(rng.uniform(3.0, 5.0)), 1.0)
        noise = rng.normal(0.0, sd, n) * scale
    elif cls in ("trend", "curved_trend", "level_noise", "trend_steps"):
        level = base + _trend(rng, n, sd, curved=cls == "curved_trend" or (cls != "trend" and rng.random() < 0.5))
        noise = rng.normal(0.0, sd, n)
        if cls == "level_noise":
            noise = noise * level / base
        if cls == "trend_steps":
            points = _add_steps(rng, level, sd, 4.0, 15.0)
    elif cls == "seasonal_steps":
        period = float(rng.choice([7 * 4, 30 * 4]))
        noise = rng.normal(0.0, sd, n) + float(rng.uniform(1.0, 3.0)) * sd * np.sin(2 * np.pi * np.arange(n) / period)
        points = _add_steps(rng, level, sd, 4.0, 15.0)
    elif cls in ("random_walk", "random_walk_steps"):
        step_sd = sd * float(rng.uniform(0.2, 0.6))             # the walk's increments
        level = base + np.cumsum(rng.normal(0.0, step_sd, n))
        noise = rng.normal(0.0, sd * 0.5, n)
        if cls == "random_walk_steps":
            points = _add_steps(rng, level, step_sd + sd * 0.5, 6.0, 15.0)
    elif cls == "heavy_tail_steps":
        noise = sd * rng.standard_t(2.5, n) / np.sqrt(2.5 / 0.5)
        points = _add_steps(rng, level, sd, 4.0, 15.0)
    else:
        raise ValueError(f"unknown class {cls!r} (one of {', '.join(CLASSES)})")
    return level + noise, points


def _trend(rng, n: int, sd: float, *, curved: bool) -> np.ndarray:
    """A change of level of 5-2,000 noise sd over the history (log-uniform: from a slow drift to a
    smooth curve the noise is invisible on), up or down: a straight line, or a saturating
    (1 - e^-x) or accelerating (x^2) curve."""
    total = float(np.exp(rng.uniform(np.log(5.0), np.log(2000.0)))) * sd * float(rng.choice([-1, 1]))
    x = np.arange(n) / max(n - 1, 1)
    if curved:
        shape = (1 - np.exp(-4 * x)) / (1 - np.exp(-4.0)) if rng.random() < 0.5 else x * x
    else:
        shape = x
    return total * shape


def _add_steps(rng, level: np.ndarray, sd: float, low: float, high: float) -> list[int]:
    """1-2 steps of ``low``-``high`` x ``sd`` either way added to ``level`` in place: their indices."""
    points = _change_points(rng, level.size, int(rng.integers(1, 3)))
    for p in points:
        level[p:] += float(rng.uniform(low, high)) * sd * float(rng.choice([-1, 1]))
    return points
