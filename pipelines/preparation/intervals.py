"""Intervals: the load phase of a run as equal intervals of counter medians, and load scaling.

Foo et al. 2015, phase 1 (seed 003): keep the planned load phase
(``started_at`` .. ``+ duration_s``), cut it into equal intervals and represent each
interval by the **median** of every counter in it.  Medians absorb clock skew and the
different sampling periods of the hosts.  The interval is ``normalize.interval_s``,
enlarged to the next multiple when a host samples more slowly than that, so that
every interval of every host holds at least one sample.

Load scaling (Nguyen 2017 §5.2, seed 004): when the run names a
``workload.load_counter``, each counter that follows the load linearly (Pearson
``|r| >= min_load_correlation`` over the run's intervals) is fitted ``c = a·l + b`` on
the run itself; the fits are stored with the run.  ``discretize`` then scales every
interval of every run to one reference load ``L`` of the system
(``c' = c · (a·L + b) / (a·l + b)``, :func:`pipelines.load_scaling.scale_to_load`, applied where a
run is read at that load), so load that fluctuates inside a run and differs between runs does not
look like a regression.  The load counter itself is
never scaled, so a run tested at another load still shows it.

Counters that never vary inside the run are kept here (a counter constant in one run
may vary in others); zero-variance counters are dropped where the training set is
known (``discretize``).  Counters missing in some runs are simply absent from those
runs' frames; later stages analyse each counter where present and report the others.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from pipelines.storage.run_records import NormalizedInfo, RunRecord


def sampling_period(ts: pd.Series) -> float:
    """Median step between consecutive samples (seconds); 0 for fewer than two samples."""
    values = np.sort(ts.dropna().to_numpy(dtype=float))
    return float(np.median(np.diff(values))) if values.size > 1 else 0.0


def choose_interval(periods: list[float], interval_s: float, *, duration_s: float, min_intervals: int) -> float:
    """``interval_s``, shortened so that a short run still has ``min_intervals`` intervals, then
    enlarged to its next multiple at or above the slowest host's sampling period (every interval
    of every host holds a sample).  A run sampled too slowly for ``min_intervals`` keeps the
    resolution it has: fewer intervals, one sampling period each."""
    base = float(interval_s)
    if min_intervals and duration_s > 0 and duration_s / base < min_intervals:
        base = duration_s / min_intervals
    slowest = max(periods, default=0.0)
    if slowest <= base:
        return base
    return float(base * math.ceil(slowest / base - 1e-9))


def interval_medians(host_frames: dict[str, pd.DataFrame], *, start: float, duration_s: float,
                     interval_s: float) -> pd.DataFrame:
    """Median of every counter per interval of the load phase, all hosts side by side.

    Parameters
    ----------
    host_frames
        host -> frame with a float ``ts`` column (epoch seconds) and one column per counter.
    start, duration_s
        The planned load phase; samples outside it (ramp-up/down) are dropped.
    interval_s
        Interval length in seconds.

    Returns
    -------
    DataFrame indexed by interval number ``0 .. ceil(duration/interval) - 1`` with one
    column per counter; an interval without a sample of a counter is NaN.
    """
    n = int(math.ceil(duration_s / interval_s - 1e-9))
    parts = []
    for _, frame in sorted(host_frames.items()):
        rel = frame["ts"].to_numpy(dtype=float) - start
        # a sample reports the period that ends at its timestamp: it belongs to the interval holding
        # its timestamp (a sample exactly at the end of the phase belongs to the last interval)
        idx = np.floor(np.where(rel == duration_s, rel - 1e-9, rel) / interval_s)
        keep = (rel >= 0) & (rel <= duration_s)
        counters = frame.drop(columns=["ts"]).loc[keep]
        med = counters.groupby(idx[keep].astype(int)).median()
        parts.append(med)
    if not parts:
        return pd.DataFrame(index=pd.RangeIndex(n, name="interval"))
    out = pd.concat(parts, axis=1).reindex(range(n))
    out.index.name = "interval"
    return out.astype(float)


def fit_load(frame: pd.DataFrame, load_counter: str, *, min_correlation: float) -> dict[str, list[float]]:
    """``[a, b]`` of ``c = a·l + b`` for every counter that follows the load (|r| >= min_correlation)."""
    if load_counter not in frame.columns:
        return {}
    fits: dict[str, list[float]] = {}
    load = frame[load_counter].to_numpy(dtype=float)
    load_missing = np.isnan(load)
    for counter in frame.columns:
        if counter == load_counter:
            continue
        values = frame[counter].to_numpy(dtype=float)
        both = ~(load_missing | np.isnan(values))          # the intervals where both were measured
        x, y = load[both], values[both]
        if x.size < 10 or pd.Series(y).std() == 0 or pd.Series(x).std() == 0:
            continue
        r = float(np.corrcoef(x, y)[0, 1])
        if abs(r) >= min_correlation:
            a, b = np.polyfit(x, y, 1)
            fits[counter] = [float(a), float(b)]
    return fits


def normalize_run(host_frames: dict[str, pd.DataFrame], meta: RunRecord, *, interval_s: float,
                  min_intervals: int, load_scaling: bool, min_load_correlation: float
                  ) -> tuple[pd.DataFrame, NormalizedInfo]:
    """Normalise one validated run; return the interval frame and what was decided."""
    start = pd.Timestamp(meta["started_at"]).timestamp()
    periods = {h: sampling_period(f["ts"]) for h, f in host_frames.items()}
    step = choose_interval(list(periods.values()), interval_s, duration_s=float(meta["duration_s"]),
                           min_intervals=min_intervals)
    frame = interval_medians(host_frames, start=start, duration_s=float(meta["duration_s"]), interval_s=step)
    fits: dict[str, list[float]] = {}
    load_counter = (meta.get("workload") or {}).get("load_counter")
    if load_scaling and load_counter:
        fits = fit_load(frame, load_counter, min_correlation=min_load_correlation)
    median_load = float(frame[load_counter].median()) if load_counter in frame.columns else None
    info: NormalizedInfo = {"interval_s": step, "n_intervals": int(len(frame)), "sampling_periods": periods,
            "counters": list(frame.columns), "load_counter": load_counter, "load_fits": fits,
            "median_load": median_load,
            "empty_intervals": {c: int(v) for c, v in frame.isna().sum().items() if v}}
    return frame, info


# --------------------------------------------------------------------------- I/O shell
