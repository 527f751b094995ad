"""Changes per commit from a benchmark history (contract §3; Skia and Mono, seeds 001 and 002; PELT).

The history's input checks and traces, the detectors ``method`` names on every series
(:mod:`pipelines.commit_series.skia`, :mod:`pipelines.commit_series.mono`,
:mod:`pipelines.commit_series.change_points`), the contract's output rows and the scores against
labelled change points.  ``method``: ``skia+mono`` (both seeds' detectors, each row its own),
``mono+pelt`` (Mono's changes of level and PELT's changes of spread that Mono cannot see), one
of ``skia``, ``mono``, ``pelt``, ``level_shift`` (steps beyond the series' own course:
:mod:`pipelines.commit_series.level_shifts`) alone, or ``auto``: ``pelt`` on the commits' medians when
they have repeated runs, ``level_shift`` for one value per commit (the comparison in
docs/results/commit-series.md: with repeated runs PELT finds every simulated change and raises
0.5 changes per 100 commits on Django's history, where Mono raises 3.4; with one value per commit
a trend, a cycle or a random walk is a string of steps to PELT and to Mono, whose noise is the
series' own around its running median, and Skia's shuffled-commit null calls autocorrelated
noise one; the local test of ``level_shift`` holds them as the series' course).
Lower values are better unless a benchmark matches ``higher_is_better``; ``direction`` is
``regression`` or ``improvement``.  Output: ``reports/commits/changes.json`` (a list of
``{benchmark, config, commit, direction, magnitude_pct, method, evidence}``, regressions first,
the largest on top) and ``reports/commits/index.html``.  With no source configured the stage
writes an empty list and a page saying so.
"""
from __future__ import annotations

import fnmatch
import logging
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd

from pipelines.commit_series.change_points import despike, pelt_changes, pelt_params
from pipelines.commit_series.level_shifts import LevelShiftParams, level_shift_changes
from pipelines.commit_series.mono import MonoParams, commit_effect, mono_changes, mono_series, mono_summary
from pipelines.commit_series.skia import skia_changes, skia_params
from pipelines.commit_series.changes import ContractChange, F1Scores, SeriesChange, SeriesDetection, SkiaCluster

log = logging.getLogger("regresslab.commit_changes")
COLUMNS = ("commit", "commit_time", "benchmark", "config", "run", "value")


# --------------------------------------------------------------------------- pure core: input


def check_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The contract's columns, typed; rows without a value dropped.  ``ValueError`` names what is missing."""
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ValueError(f"commit series: missing column(s) {', '.join(missing)} (contract §3: "
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


# --------------------------------------------------------------------------- pure core: Mono


# --------------------------------------------------------------------------- pure core: output and scoring


def higher_is_better(benchmark: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(benchmark, p) for p in patterns)


def contract_rows(changes: list[SeriesChange], patterns: list[str]) -> list[ContractChange]:
    """The contract's list (§3): regressions first, the largest on top."""
    rows: list[ContractChange] = []
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


def f1_scores(detected: dict[str, list[int]], truth: dict[str, list[int]], *, margin: int) -> F1Scores:
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
    return F1Scores(precision=round(precision, 4), recall=round(recall, 4), f1=round(f1, 4),
                    f1_tcpd=round(float(np.mean(per_series)), 4) if per_series else None,
                    true_changes=tp + fn, detected=tp + fp)


def mono_all(frame: pd.DataFrame, commits: list[str], mo: MonoParams, *, progress=None
             ) -> tuple[list[SeriesChange], dict[str, pd.DataFrame], dict[str, dict[str, float | str | None]]]:
    """Mono on every series of ``frame``: its changes, each series' intervals and summary.
    A series of one value per commit is judged by its own noise (``mono.commit_effect``)
    whether or not ``commit_effect`` is asked for: its commits have no interval of their own;
    and its isolated outliers (``despike_sd``) are replaced by their running median first."""
    changes: list[SeriesChange] = []
    intervals: dict[str, pd.DataFrame] = {}
    summaries: dict[str, dict[str, float | str | None]] = {}
    groups = list(frame.assign(series=frame["benchmark"] + "|" + frame["config"]).groupby("series", sort=True))
    for i, (series, g) in enumerate(groups, 1):
        if mo.despike_sd and g["commit"].is_unique:          # one value per commit: no run to average
            order = {c: k for k, c in enumerate(commits)}          # an outlier out, as PELT does
            g = g.sort_values("commit", key=lambda c: c.map(order), kind="stable")
            g = g.assign(value=despike(g["value"].to_numpy(float), outlier_sd=mo.despike_sd))
        iv = mono_series(g, commits, warmup=mo.warmup, subsamples=mo.subsamples, share=mo.subsample_share,
                         alpha=mo.alpha, quantile=mo.quantile, seed=mo.seed)
        if mo.commit_effect or not np.isfinite(iv["half"]).any():
            iv = commit_effect(iv, alpha=mo.alpha, quantile=mo.quantile, window=mo.commit_effect_window)
        intervals[series] = iv
        summaries[series] = mono_summary(iv, mo.warmup)
        changes += [cast(SeriesChange, {"series": series, "method": "mono", **c,
                                        "evidence": {**c["evidence"], **summaries[series]}})
                    for c in mono_changes(iv, persist=mo.persist)]
        if progress:
            progress(i, len(groups), series)
    return changes, intervals, summaries


METHODS = ("auto", "level_shift", "skia+mono", "mono+pelt", "skia", "mono", "pelt", "level_shift+pelt")
DETECTORS = ("skia", "mono", "pelt", "level_shift")      # each one's changes under its name in detect_all's result


def ran(method: str) -> list[str]:
    """The detectors a resolved ``method`` runs."""
    return [d for d in DETECTORS if d in method.split("+")]


def changes_of(result: SeriesDetection, detector: str) -> list[SeriesChange]:
    """The changes of one of :data:`DETECTORS` in ``result`` (empty when it did not run)."""
    by_name = {"skia": result["skia"], "mono": result["mono"], "pelt": result["pelt"],
               "level_shift": result["level_shift"]}
    return by_name[detector]


def all_changes(result: SeriesDetection) -> list[SeriesChange]:
    """Every change of every detector that ran, in :data:`DETECTORS` order."""
    return [ch for d in DETECTORS for ch in changes_of(result, d)]


# what each detector needs of a series to judge it (docs/methods/commit-series.md)
NEEDS = {"mono": "repeated runs per commit (its intervals are of a commit's own runs)",
         "skia": "several series to cluster (a step is a cluster centroid's)",
         "pelt": "repeated runs per commit (its penalty rests on their spread)",
         "level_shift": "one value per commit is enough (its noise and course come from the series itself)"}


def repeated(frame: pd.DataFrame) -> pd.Series:
    """Per series (``benchmark|config``), whether most of its commits have repeated runs or measurements."""
    per_commit = frame.groupby(["benchmark", "config", "commit"]).size()
    median = per_commit.groupby(level=["benchmark", "config"]).median()
    return pd.Series((median > 1).to_numpy(), index=[f"{b}|{c}" for b, c in median.index])


def resolve_method(method: str, frame: pd.DataFrame) -> str:
    """``auto``: per series, what it can be judged by (:data:`NEEDS`): ``pelt`` on the series with
    repeated runs, ``level_shift`` on those with one value per commit; ``level_shift+pelt`` when the
    history holds both (the per-class table in docs/results/commit-series.md)."""
    if method not in METHODS:
        raise ValueError(f"commit_changes.method must be one of {', '.join(METHODS)}, not {method!r}")
    if method != "auto":
        return method
    kinds = set(repeated(frame).tolist())
    return "level_shift+pelt" if kinds == {True, False} else "pelt" if kinds == {True} else "level_shift"


def spread_changes(pelt: list[SeriesChange], level: list[SeriesChange], commits: list[str], *,
                   margin: int, variance_ratio: float) -> list[SeriesChange]:
    """PELT's changes of spread (its spread ratio at least ``variance_ratio`` either way) that no
    change of ``level`` already reports within ``margin`` commits of the same series."""
    pos = {c: i for i, c in enumerate(commits)}
    seen: dict[str, list[int]] = {}
    for ch in level:
        seen.setdefault(ch["series"], []).append(pos[ch["commit"]])
    out = []
    for ch in pelt:
        ratio = ch["evidence"]["spread_ratio"]
        assert isinstance(ratio, (int, float)), "a change of spread has its spread ratio"
        if (ratio >= variance_ratio or ratio <= 1.0 / variance_ratio) and \
                all(abs(pos[ch["commit"]] - p) > margin for p in seen.get(ch["series"], [])):
            out.append(ch)
    return out


def detect_all(frame: pd.DataFrame, params: dict[str, Any], *, progress=None) -> SeriesDetection:
    """The detectors of ``params["method"]`` on one history: each one's changes (empty when it did
    not run), Skia's clusters, Mono's intervals and summaries, and the method resolved."""
    frame = check_frame(frame)
    commits = commit_order(frame)
    table = trace_matrix(frame, commits)
    method = resolve_method(str(params.get("method", "skia+mono")), frame)
    skia: list[SeriesChange] = []
    clusters: list[SkiaCluster] = []
    mono: list[SeriesChange] = []
    pelt: list[SeriesChange] = []
    shifts: list[SeriesChange] = []
    intervals: dict[str, pd.DataFrame] = {}
    summaries: dict[str, dict[str, float | str | None]] = {}
    irregular: dict[str, float] = {}
    detectors = ran(method)
    rows = {"level_shift": table, "pelt": table}
    if method == "level_shift+pelt":            # auto on a mixed history: each series by what it can be judged by
        many = repeated(frame)
        rows = {"pelt": table[table.index.isin(many[many].index)], "level_shift": table[~table.index.isin(many[many].index)]}
    if "level_shift" in detectors:
        shifts, irregular = level_shift_changes(rows["level_shift"], LevelShiftParams.from_params(params["level_shift"]))
    if "skia" in detectors:
        skia, clusters = skia_changes(table, skia_params(params["skia"]))
    if "mono" in detectors:
        mono, intervals, summaries = mono_all(frame, commits, MonoParams.of(params["mono"]), progress=progress)
    if "pelt" in detectors:
        pp = pelt_params(params["pelt"])
        pelt = pelt_changes(rows["pelt"], **pp)
        if "mono" in detectors:
            pelt = spread_changes(pelt, mono, commits, margin=int(params["pelt"]["min_segment"]),
                                  variance_ratio=pp["variance_ratio"])
    return {"commits": commits, "table": table, "skia": skia, "mono": mono, "pelt": pelt, "level_shift": shifts,
            "clusters": clusters, "intervals": intervals, "summaries": summaries, "irregular": irregular,
            "method": method}


# --------------------------------------------------------------------------- I/O shell


def read_series(source: str | Path) -> pd.DataFrame:
    """A commit series file (CSV, CSV.gz or Parquet)."""
    path = Path(source)
    if path.suffix == ".parquet":
        return pd.read_parquet(path)
    return pd.read_csv(path, dtype={"commit": str, "benchmark": str, "config": str})


def score_against(result: SeriesDetection, labels: dict[str, Any], margin: int) -> dict[str, F1Scores]:
    """Precision, recall and F1 of each detector that ran, of what the night reported (``reported``,
    with the method), and of reporting no change, against labelled change commits."""
    pos = {c: i for i, c in enumerate(result["commits"])}
    truth = {s: [pos[c] for c in v["change_commits"] if c in pos] for s, v in labels["series"].items()}
    out: dict[str, F1Scores] = {}
    detectors = ran(result["method"])                     # a method that did not run is not scored
    for method in detectors:
        det: dict[str, list[int]] = {}
        for ch in changes_of(result, method):
            det.setdefault(ch["series"], []).append(pos[ch["commit"]])
        out[method] = f1_scores(det, truth, margin=margin)
    out["no_change"] = f1_scores({}, truth, margin=margin)
    n = max(len(result["commits"]), 1)
    det = {}
    for ch in all_changes(result):
        det.setdefault(ch["series"], []).append(pos[ch["commit"]])
    out["reported"] = f1_scores(det, truth, margin=margin)
    out["reported"]["method"] = result["method"]
    for method in detectors:
        per_100 = 100 * len(changes_of(result, method)) / n / max(len(truth), 1)
        out[method]["changes_per_100_commits"] = round(per_100, 3)
    return out
