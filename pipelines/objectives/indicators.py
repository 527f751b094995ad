"""The indicators' values of one run: each ``<aggregate>(<counter>)`` of ``sli.yaml`` over the run's
raw samples of that counter inside its load phase (``started_at`` to ``started_at + duration_s``,
contract §1), as validation kept them (a value impossible for its counter is a missing sample).

The percentiles are numpy's default (linear interpolation between the two nearest samples, as
k6's ``p(95)`` and Gatling's percentiles report them); ``median`` is ``p50``.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from pipelines.objectives.files import Indicator

PERCENTILES = {"median": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0}


def aggregate(samples: np.ndarray, how: str) -> float | None:
    """One aggregate of a counter's samples (NaN samples left out); None with no sample."""
    kept = samples[np.isfinite(samples)]
    if kept.size == 0:
        return None
    if how == "mean":
        return float(np.mean(kept))
    if how == "max":
        return float(np.max(kept))
    if how == "min":
        return float(np.min(kept))
    return float(np.percentile(kept, PERCENTILES[how]))


def load_phase_samples(frames: Mapping[str, pd.DataFrame], counter: str, *, start: float,
                       duration_s: float) -> np.ndarray | None:
    """The samples of ``counter`` (on whichever host measured it: counter names are unique across a
    run's hosts) whose time lies in ``[start, start + duration_s]``; None when no host measured it."""
    for frame in frames.values():
        if counter in frame.columns:
            ts = frame["ts"].to_numpy(dtype=float)
            inside = (ts >= start) & (ts <= start + duration_s)
            return frame[counter].to_numpy(dtype=float)[inside]
    return None


def indicator_values(frames: Mapping[str, pd.DataFrame], indicators: Mapping[str, Indicator], *, start: float,
                     duration_s: float) -> dict[str, float | None]:
    """Each indicator's value on the run whose host ``frames`` (a ``ts`` column in epoch seconds and
    one column per counter) are given; None where the run lacks the counter or has no sample of it
    in its load phase."""
    out: dict[str, float | None] = {}
    for name, indicator in indicators.items():
        samples = load_phase_samples(frames, indicator.counter, start=start, duration_s=duration_s)
        out[name] = None if samples is None else aggregate(samples, indicator.aggregate)
    return out
