"""normalize: the load phase of each validated run as equal intervals of counter medians.

Foo et al. 2015, phase 1 (seed 003; METHODS.md §A): keep the planned load phase
(``started_at`` .. ``+ duration_s``), cut it into equal intervals and represent each
interval by the **median** of every counter in it.  Medians absorb clock skew and the
different sampling periods of the hosts.  The interval is ``normalize.interval_s``,
enlarged to the next multiple when a host samples more slowly than that, so that
every interval of every host holds at least one sample.

Load scaling (Nguyen 2017 §5.2, seed 004; METHODS.md §A): when the run names a
``workload.load_counter``, each counter that follows the load linearly (Pearson
``|r| >= min_load_correlation`` over the run's intervals) is fitted ``c = a·l + b`` on
the run itself; the fits are stored with the run.  ``discretize`` then scales every
interval of every run to one reference load ``L`` of the system
(``c' = c · (a·L + b) / (a·l + b)``), so load that fluctuates inside a run and
differs between runs does not look like a regression.  The load counter itself is
never scaled, so a run tested at another load still shows it.

Counters that never vary inside the run are kept here (a counter constant in one run
may vary in others); zero-variance counters are dropped where the training set is
known (``discretize``).  Counters missing in some runs are simply absent from those
runs' frames; later stages analyse each counter where present and report the others.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
from typing import Any

import numpy as np
import pandas as pd

from pipelines import archive, config, locks
from pipelines.progress import Progress

log = logging.getLogger("regresslab.normalize")
CODE_VERSION = 2


# --------------------------------------------------------------------------- pure core


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
    for counter in frame.columns:
        if counter == load_counter:
            continue
        both = frame[[load_counter, counter]].dropna()
        if len(both) < 10 or both[counter].std() == 0 or both[load_counter].std() == 0:
            continue
        r = float(np.corrcoef(both[load_counter], both[counter])[0, 1])
        if abs(r) >= min_correlation:
            a, b = np.polyfit(both[load_counter], both[counter], 1)
            fits[counter] = [float(a), float(b)]
    return fits


def scale_to_load(frame: pd.DataFrame, load_counter: str | None, fits: dict[str, list[float]],
                  reference_load: float | None) -> pd.DataFrame:
    """``c' = c · (a·L + b) / (a·l + b)`` per fitted counter (Nguyen 2017 eq. 5.2).

    Counters whose prediction is not positive at ``L`` or at some interval's load are
    left as they are (a ratio of non-positive predictions means nothing).
    """
    if not load_counter or load_counter not in frame.columns or reference_load is None or not fits:
        return frame
    load = frame[load_counter]
    out = frame.copy()
    for counter, (a, b) in fits.items():
        if counter not in frame.columns:
            continue
        predicted = a * load + b
        at_ref = a * reference_load + b
        if at_ref <= 0 or (predicted.dropna() <= 0).any():
            continue
        out[counter] = frame[counter] * at_ref / predicted
    return out


def normalize_run(host_frames: dict[str, pd.DataFrame], meta: dict[str, Any], *, interval_s: float,
                  min_intervals: int, load_scaling: bool, min_load_correlation: float
                  ) -> tuple[pd.DataFrame, dict[str, Any]]:
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
    info = {"interval_s": step, "n_intervals": int(len(frame)), "sampling_periods": periods,
            "counters": list(frame.columns), "load_counter": load_counter, "load_fits": fits,
            "median_load": median_load,
            "empty_intervals": {c: int(v) for c, v in frame.isna().sum().items() if v}}
    return frame, info


# --------------------------------------------------------------------------- I/O shell


def run_key(validation_key: str, params: dict[str, Any]) -> str:
    blob = json.dumps({"v": validation_key, "p": params, "code": CODE_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def load_valid_run(run_id: str) -> tuple[dict[str, pd.DataFrame], dict[str, Any]]:
    """A validated run's host frames and metadata (only this stage reads them)."""
    run_dir = config.valid_dir(run_id)
    meta = archive.read_json(run_dir / "meta.json")
    frames = {h: pd.read_parquet(run_dir / f"{h}.parquet") for h in meta["_hosts"]}
    return frames, meta


def normalize_one(run_id: str, params: dict[str, Any]) -> dict[str, Any]:
    """Normalise one validated run unless its cached result is current; return its index row."""
    key = expected_key(run_id, params)
    if is_current(run_id, key):
        return archive.read_json(config.info_path(run_id))
    frames, meta = load_valid_run(run_id)
    frame, info = normalize_run(frames, meta, interval_s=float(params["interval_s"]),
                                min_intervals=int(params["min_intervals"]), load_scaling=bool(params["load_scaling"]),
                                min_load_correlation=float(params["min_load_correlation"]))
    info.update({"key": key, "run_id": run_id, "system": meta["system"]})
    archive.write_parquet_atomic(config.frame_path(run_id), frame)
    archive.write_json_atomic(config.info_path(run_id), info)
    return info


def expected_key(run_id: str, params: dict[str, Any]) -> str:
    """The cache key a normalised run must carry: its validation's key and the params."""
    return run_key(archive.read_json(config.valid_dir(run_id) / "meta.json")["_validation_key"], params)


def is_current(run_id: str, key: str) -> bool:
    """Whether the run's normalised frame exists and was made under ``key``."""
    info_file = config.info_path(run_id)
    return config.frame_path(run_id).exists() and info_file.exists() and archive.read_json(info_file).get("key") == key


def pending_runs() -> list[str]:
    """Validated runs not normalised yet (or normalised under other params): tonight's fan-out."""
    params = config.load_params("normalize")
    index = archive.read_valid_index()
    return [r for r in sorted(index, key=lambda r: (index[r]["started_at"], r))
            if not is_current(r, expected_key(r, params))]


@locks.holding("normalize", shared=True)
def run_one(run_id: str) -> dict[str, Any]:
    """Normalise one validated run (the per-run task of the nightly DAG)."""
    return normalize_one(run_id, config.load_params("normalize"))


@locks.holding("normalize")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("normalize")
    index = archive.read_valid_index()
    config.NORMALIZED.mkdir(parents=True, exist_ok=True)
    progress = Progress(log, "normalize", len(index), every=25)
    rows = {}
    for i, run_id in enumerate(sorted(index), 1):
        rows[run_id] = {k: v for k, v in normalize_one(run_id, params).items() if k != "counters"}
        progress.step(i)
    for stale in config.NORMALIZED.glob("*.parquet"):
        if stale.stem not in index:      # a run quarantined after a suite change
            stale.unlink()
            stale.with_suffix(".json").unlink(missing_ok=True)
    archive.write_json_atomic(config.NORMALIZED_INDEX, rows)
    print(f"[normalize] {len(rows)} runs normalised")


if __name__ == "__main__":
    main()
