"""Evidence from a few normal runs that sees a whole-run shift: a null borrowed across counters.

    python bench/robustness.py --out build/robustness --tag base      # once: the split trees
    python bench/borrowed_null.py build/robustness                     # small-2/4/8 and given
    python bench/borrowed_null.py build/robustness --effects 0.05 1.0 --splits small-4 given

With ``n`` normal runs a detector that scores a run against the same score of those runs cannot
show a p-value below ``1/(n + 1)``, and the one detector whose null needs no other run (the run
against itself) is blind to a run changed throughout.  The classical way out for many measures and
few replicates is to borrow: each counter's run-to-run variance is shrunk towards a prior fitted
across all the counters (the moderated t of Smyth 2004, "Linear models and empirical Bayes methods
for assessing differential expression", the ``limma`` method), so that a counter's test has
``d0 + n - 1`` degrees of freedom instead of ``n - 1``, and a whole-run shift of a quiet counter
becomes significant from four runs.

This measures that evidence on the protocol's stored trees (nothing is re-run; each split's own
history and targets): per system, each counter's run median on a log scale (``|x|`` floored at
``significance.floor_share`` of the normal runs' 95th percentile, as the practical significance
floors a counter idling near zero), the target's prediction t against the history's normal runs
with the moderated variance, two-sided, counted only when the change is at least the effect given
(``--effects``; the project's ``min_effect_pct`` is 5 %), Bonferroni over the counters; a run fails
at 5 %.  Beside it, each history normal run judged the same way against the others (its
leave-one-out record).  Prints normal targets failed and faults caught per set and split.

The prior is fitted by the method of moments of Smyth (2004, section 6.2) on ``log s²``
(``digamma``/``trigamma``); no Python package the project uses provides it, and this is measurement
code for a variant not adopted (docs/results/robustness.md).
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import optimize, special, stats

RATE = 0.05


def prior(s2: np.ndarray, d: int) -> tuple[float, float]:
    """``(d0, s0²)``: the scaled inverse-χ² prior of the variances ``s2`` (each on ``d`` degrees of
    freedom) by Smyth's method of moments; ``d0`` is ``inf`` when the ``s2`` vary no more than
    sampling explains (every counter shares one variance)."""
    s2 = s2[np.isfinite(s2) & (s2 > 0)]
    if len(s2) < 3:
        return 0.0, float(np.median(s2)) if len(s2) else 1.0
    e = np.log(s2) - special.digamma(d / 2) + np.log(d / 2)
    excess = e.var(ddof=1) - special.polygamma(1, d / 2)
    if excess <= 0:
        return float("inf"), float(np.exp(e.mean()))
    half = optimize.brentq(lambda x: special.polygamma(1, x) - excess, 1e-8, 1e7)
    d0 = 2 * half
    return d0, float(np.exp(e.mean() + special.digamma(d0 / 2) - np.log(d0 / 2)))


def log_levels(medians: pd.DataFrame, normals: pd.DataFrame, floor_share: float) -> pd.DataFrame:
    floor = (floor_share * normals.abs().quantile(0.95)).replace(0, np.nan)
    return np.log(medians.abs().clip(lower=floor, axis=1))


def run_pvalue(target: pd.Series, normals: pd.DataFrame, min_effect: float, floor_share: float) -> float | None:
    """The target's Bonferroni p-value over its counters' moderated prediction t against ``normals``."""
    n = len(normals)
    if n < 2:
        return None
    cols = normals.columns.intersection(target.index)
    y = log_levels(normals[cols], normals[cols], floor_share)
    yt = log_levels(target[cols].to_frame().T, normals[cols], floor_share).iloc[0]
    ok = (y.notna().all() & yt.notna()).to_numpy()
    y, yt = y.loc[:, ok], yt[ok]
    if y.shape[1] == 0:
        return None
    s2 = y.var(ddof=1).to_numpy()
    d0, s02 = prior(s2, n - 1)
    if np.isinf(d0):
        moderated, df = np.full_like(s2, s02), np.inf
    else:
        moderated, df = (d0 * s02 + (n - 1) * s2) / (d0 + n - 1), d0 + n - 1
    moderated = np.where(moderated > 0, moderated, np.nan)     # a counter no normal run moved: not judged
    diff = yt.to_numpy() - y.mean().to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        t = diff / np.sqrt(moderated * (1 + 1 / n))
    p = np.where(np.abs(np.expm1(diff)) >= min_effect, 2 * stats.t.sf(np.abs(t), df), 1.0)
    p = np.where(np.isfinite(p), p, 1.0)
    return float(min(1.0, len(p) * p.min()))


def score_split(tree: Path, set_name: str, split: str, min_effect: float) -> dict[str, int] | None:
    root = tree / set_name / split
    if not (root / "labels.json").exists():
        return None
    valid = json.loads((root / "data/interim/valid_runs.json").read_text())["valid"]
    labels = json.loads((root / "labels.json").read_text())
    floor_share = float(yaml.safe_load((root / "params.yaml").read_text())["significance"]["floor_share"])

    @lru_cache(maxsize=None)
    def median(run: str) -> pd.Series:
        return pd.read_parquet(tree / set_name / "base/data/interim/normalized" / f"{run}.parquet").median()

    by_system: dict[str, list[str]] = {}
    for run, meta in valid.items():
        if run not in labels and meta.get("verdict") == "pass":
            by_system.setdefault(meta["system"], []).append(run)
    frames = {system: pd.DataFrame({r: median(r) for r in runs}).T for system, runs in by_system.items()}
    out = dict.fromkeys(("normal", "normal_failed", "faults", "caught", "loo", "loo_failed"), 0)
    for frame in frames.values():
        if len(frame) < 3:
            continue
        for run in frame.index:
            p = run_pvalue(frame.loc[run], frame.drop(index=run), min_effect, floor_share)
            out["loo"] += 1
            out["loo_failed"] += p is not None and p <= RATE
    for target, label in labels.items():
        frame = frames.get(valid[target]["system"])
        p = (run_pvalue(median(target), frame, min_effect, floor_share)
             if frame is not None and len(frame) >= 2 else None)
        failed = p is not None and p <= RATE
        key = ("normal", "normal_failed") if label["verdict"] == "pass" else ("faults", "caught")
        out[key[0]] += 1
        out[key[1]] += failed
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tree", type=Path)
    parser.add_argument("--sets", nargs="*", default=["example", "hpc", "nezha", "smd", "trainticket"])
    parser.add_argument("--splits", nargs="*", default=["small-2", "small-4", "small-8", "given"])
    parser.add_argument("--effects", nargs="*", type=float, default=[0.05, 1.0])
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    print("| least change | set | split | normal targets failed | faults caught | history's normal runs failed (leave-one-out) |")
    print("|---|---|---|---|---|---|")
    for effect in args.effects:
        for set_name in args.sets:
            for split in args.splits:
                row = score_split(args.tree, set_name, split, effect)
                if row is None:
                    continue
                print(f"| {effect:.0%} | {set_name} | {split} | {row['normal_failed']}/{row['normal']} | "
                      f"{row['caught']}/{row['faults']} | {row['loo_failed']}/{row['loo']} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
