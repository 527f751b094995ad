"""Locust ``--csv`` ``*_stats_history.csv``: one row per second per request name; ``N/A`` is a
missing sample.

Locust 2.x (docs.locust.io, "Retrieve test statistics in CSV format"): ``Requests/s``,
``Failures/s`` and the percentile columns describe the current moment (a sliding window of the
last seconds); the ``Total …`` columns are **cumulative since the test started**.  The response
time of an interval is therefore not ``Total Average Response Time`` (which would show a
regression half-way through a run as a slow, damped drift) but the change of
``count × average`` between two rows over the change of ``count`` (:func:`interval_mean`).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.importers.common import FormatError, samples_frame, slug


def interval_mean(total_average: pd.Series, total_count: pd.Series) -> pd.Series:
    """The mean response time of each interval from Locust's cumulative ``Total Average Response
    Time`` and ``Total Request Count``: ``Δ(count × average) / Δcount`` (the first row: its own
    average, since the start); NaN where no request ended in the interval."""
    avg = pd.to_numeric(total_average, errors="coerce").to_numpy(float)
    count = pd.to_numeric(total_count, errors="coerce").to_numpy(float)
    weighted = avg * count
    d_sum = np.diff(weighted, prepend=0.0)
    d_count = np.diff(count, prepend=0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(d_count > 0, d_sum / np.where(d_count > 0, d_count, 1.0), np.nan)
    return pd.Series(out, index=total_average.index)


def read_locust(path: Path, *, component: str, host: str, percentiles: list[float],
                label_percentiles: list[float], max_labels: int) -> pd.DataFrame:
    """Locust ``--csv`` ``*_stats_history.csv``: already one row per second per name; the
    ``Aggregated`` rows give the overall counters, the others the per-name ones. ``N/A``
    (no request yet) is a missing sample."""
    try:
        frame = pd.read_csv(path, na_values=["N/A", ""], keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path.name}: not a readable Locust CSV: {exc}") from exc
    need = ["Timestamp", "User Count", "Name", "Requests/s", "Failures/s"]
    if any(c not in frame.columns for c in need):
        raise FormatError(f"{path.name}: a Locust stats history needs columns {need}")
    ts = pd.to_numeric(frame["Timestamp"], errors="coerce")
    if ts.isna().any():
        raise FormatError(f"{path.name}: {int(ts.isna().sum())} row(s) without a numeric Timestamp")
    rows = []
    names = frame.loc[frame["Name"] != "Aggregated", "Name"].value_counts().index[:max_labels]
    for name, group in frame.groupby("Name", sort=False):
        overall = name == "Aggregated"
        if not overall and name not in names:
            continue
        prefix = "" if overall else f"{slug(name, 40)}_"
        t = ts[group.index]
        rps = pd.to_numeric(group["Requests/s"], errors="coerce")
        cols = {f"{prefix}throughput_rps": rps,
                f"{prefix}error_rate_pct": 100.0 * pd.to_numeric(group["Failures/s"], errors="coerce") / rps.where(rps > 0),
                f"{prefix}response_time_ms": interval_mean(group["Total Average Response Time"],
                                                           group["Total Request Count"])
                if {"Total Average Response Time", "Total Request Count"} <= set(group.columns) else None}
        for q in (percentiles if overall else label_percentiles):
            column = f"{q:g}%"
            if column in group.columns:
                cols[f"{prefix}response_time_p{q:g}_ms"] = pd.to_numeric(group[column], errors="coerce")
        if overall:
            cols["active_users"] = pd.to_numeric(group["User Count"], errors="coerce")
        for cname, series in cols.items():
            if series is not None:
                rows.append(pd.DataFrame({"host": host, "counter": f"{component}.{cname}", "ts": t.to_numpy(float),
                                          "value": series.to_numpy(float)}))
    if not rows:
        raise FormatError(f"{path.name}: no row")
    return samples_frame(rows)

