"""Series of one value per commit with known steps, and how a detector does on them, per kind.

    python -m bench.step_series                      # the level-shift test at its defaults, seeds 1-3
    python -m bench.step_series --seeds 1 2 3 --series 20 --json out.json

Each kind is a way a nightly benchmark's history looks: a single clear step, many steps (a
series with a jump every few tens of commits), a step on a trend, on a weekly or monthly cycle,
among outliers, under heavy tails, on autocorrelated noise, and short histories; and eight kinds
with no step at all (white and autocorrelated noise, a trend, a curved trend, a cycle, outliers,
heavy tails, a short series).  A step is a shift of ``3``-``10`` noise sd that holds for tens of
commits (at least ``MIN_GAP``).  Scored per kind: a detected change counts when it lies within
``--margin`` commits (5) of a true step not matched yet; recall over the true steps, precision over
the changes reported, and on the kinds with no step the false changes per series.

Nothing here comes from a labelled change-point benchmark: the kinds, their sizes and their noise
are this file's own, fixed before any detector was run on them.
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

MIN_GAP = 20                # commits between two steps (a step holds for tens of commits)
STEP_KINDS = ("single", "many", "trend", "cycle", "outliers", "heavy_tails", "autocorrelated", "short")
NULL_KINDS = ("white", "null_autocorrelated", "null_trend", "null_curved", "null_cycle", "null_outliers",
              "null_heavy_tails", "null_short")


@dataclass(frozen=True)
class Series:
    """One generated series: its kind, values and the indices where its level steps (the first
    commit at the new level)."""

    kind: str
    values: np.ndarray
    steps: tuple[int, ...]


def _positions(rng: np.random.Generator, n: int, k: int) -> list[int]:
    """Up to ``k`` step positions at least :data:`MIN_GAP` apart and from either end: gaps drawn
    between ``MIN_GAP`` and twice as long (``many``) or the positions drawn at random and kept
    when far enough apart."""
    if k > 2:
        pts, at = [], int(rng.integers(MIN_GAP, 2 * MIN_GAP))
        while at <= n - MIN_GAP and len(pts) < k:
            pts.append(at)
            at += int(rng.integers(MIN_GAP, 2 * MIN_GAP))
        return pts
    for _ in range(1000):
        pts = sorted(int(p) for p in rng.integers(MIN_GAP, n - MIN_GAP, size=k))
        if all(b - a >= MIN_GAP for a, b in zip(pts, pts[1:])):
            return pts
    return [n // 2]


def _levels(rng: np.random.Generator, n: int, pts: list[int], low: float, high: float) -> np.ndarray:
    """A piecewise-constant level: a step of ``low``-``high`` sd, either sign, at each of ``pts``."""
    level = np.zeros(n)
    for p in pts:
        level[p:] += rng.uniform(low, high) * rng.choice([-1.0, 1.0])
    return level


def _ar(rng: np.random.Generator, n: int, phi: float) -> np.ndarray:
    """AR(1) noise of unit marginal sd."""
    e = rng.normal(0.0, np.sqrt(1 - phi * phi), n)
    out = np.empty(n)
    out[0] = rng.normal()
    for i in range(1, n):
        out[i] = phi * out[i - 1] + e[i]
    return out


def _cycle(rng: np.random.Generator, n: int) -> np.ndarray:
    period = rng.choice([7.0, 14.0, 30.0, 60.0])
    return rng.uniform(1.0, 2.5) * np.sin(2 * np.pi * np.arange(n) / period + rng.uniform(0, 2 * np.pi))


def _outliers(rng: np.random.Generator, n: int) -> np.ndarray:
    out = np.zeros(n)
    hit = rng.random(n) < 0.02
    out[hit] = rng.uniform(8.0, 15.0, hit.sum()) * rng.choice([-1.0, 1.0], hit.sum())
    return out


def _trend(rng: np.random.Generator, n: int, curved: bool = False) -> np.ndarray:
    x = np.arange(n) / n
    total = np.exp(rng.uniform(np.log(5.0), np.log(60.0))) * rng.choice([-1.0, 1.0])
    return total * (np.sqrt(x) if curved else x)


def generate(kind: str, rng: np.random.Generator) -> Series:
    """One series of ``kind`` (module docstring), around a level of 100 with noise sd 1."""
    n = int(rng.integers(60, 120)) if kind in ("short", "null_short") else int(rng.integers(200, 600))
    noise = rng.normal(0.0, 1.0, n)
    pts: list[int] = []
    extra = np.zeros(n)
    if kind in STEP_KINDS:
        k = n if kind == "many" else int(rng.integers(1, 3)) if kind not in ("single", "short") else 1
        pts = _positions(rng, n, k)
    low, high = (4.0, 10.0) if kind == "many" else (3.0, 6.0) if kind in ("single", "short") else (4.0, 8.0)
    if kind in ("trend", "null_trend"):
        extra = _trend(rng, n)
    elif kind == "null_curved":
        extra = _trend(rng, n, curved=True)
    elif kind in ("cycle", "null_cycle"):
        extra = _cycle(rng, n)
    elif kind in ("outliers", "null_outliers"):
        extra = _outliers(rng, n)
    if kind in ("heavy_tails", "null_heavy_tails"):
        noise = rng.standard_t(3, n) / np.sqrt(3.0)
    elif kind in ("autocorrelated", "null_autocorrelated"):
        noise = _ar(rng, n, float(rng.uniform(0.3, 0.7)))
    values = 100.0 + noise + extra + (_levels(rng, n, pts, low, high) if pts else 0.0)
    return Series(kind, values, tuple(pts))


def bench_set(seeds: list[int], per_kind: int) -> list[Series]:
    """``per_kind`` series of every kind for each seed, in a fixed order."""
    out = []
    for seed in seeds:
        rng = np.random.default_rng(seed)
        for kind in (*STEP_KINDS, *NULL_KINDS):
            out += [generate(kind, rng) for _ in range(per_kind)]
    return out


def matched(found: list[int], truth: tuple[int, ...], margin: int) -> int:
    """True steps matched by a found change within ``margin`` commits (each matched once, nearest first)."""
    left = sorted(truth)
    hits = 0
    for f in sorted(found):
        near = [t for t in left if abs(t - f) <= margin]
        if near:
            left.remove(min(near, key=lambda t: abs(t - f)))
            hits += 1
    return hits


def score(series: list[Series], detect: Callable[[np.ndarray], list[int]], margin: int) -> dict[str, dict]:
    """Per kind: true steps, found changes, hits, recall, precision, false changes per series."""
    out: dict[str, dict] = {}
    for s in series:
        found = detect(s.values)
        row = out.setdefault(s.kind, {"series": 0, "steps": 0, "found": 0, "hits": 0})
        row["series"] += 1
        row["steps"] += len(s.steps)
        row["found"] += len(found)
        row["hits"] += matched(found, s.steps, margin)
    for row in out.values():
        row["recall"] = round(row["hits"] / row["steps"], 3) if row["steps"] else None
        row["precision"] = round(row["hits"] / row["found"], 3) if row["found"] else None
        row["false_per_series"] = round((row["found"] - row["hits"]) / row["series"], 3)
    return out


def level_shift_detector(params: dict | None = None) -> Callable[[np.ndarray], list[int]]:
    """The level-shift test of the commit-series stage, at ``params`` (default: the project's)."""
    from pipelines import params_schema
    from pipelines.commit_series.level_shifts import LevelShiftParams, level_shifts

    p = LevelShiftParams.from_params(params or params_schema.defaults()["commit_changes"]["level_shift"])
    return lambda values: [c["index"] for c in level_shifts(values, p).changes]


def table(scores: dict[str, dict]) -> list[str]:
    lines = ["| kind | series | true steps | found | recall (within the margin) | precision | false changes per series |",
             "|---|---|---|---|---|---|---|"]
    for kind in (*STEP_KINDS, *NULL_KINDS):
        r = scores[kind]
        lines.append(f"| {kind} | {r['series']} | {r['steps']} | {r['found']} | "
                     f"{'—' if r['recall'] is None else format(r['recall'], '.3f')} | "
                     f"{'—' if r['precision'] is None else format(r['precision'], '.3f')} | {r['false_per_series']:.3f} |")
    nulls = [scores[k] for k in NULL_KINDS]
    lines.append(f"\nno-step series: {sum(r['found'] for r in nulls)} false change(s) over "
                 f"{sum(r['series'] for r in nulls)} series")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--series", type=int, default=20, help="series per kind and seed")
    parser.add_argument("--margin", type=int, default=5)
    parser.add_argument("--json", help="write the scores here")
    args = parser.parse_args(argv)
    series = bench_set(args.seeds, args.series)
    started = time.perf_counter()
    scores = score(series, level_shift_detector(), args.margin)
    print("\n".join(table(scores)))
    print(f"\n{len(series)} series in {time.perf_counter() - started:.1f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(scores, fh, indent=1)


if __name__ == "__main__":
    main()
