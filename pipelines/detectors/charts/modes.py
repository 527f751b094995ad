"""A baseline counter with two modes (Nguyen 2017, seed 004, §5.3, multimodal filtering): where the
density of a counter over the baseline has two modes split by a deep local minimum, the samples of
the minor one are dropped (the thesis drops the left, idle mode; this drops the minor one, the right
one for a periodic batch job), and from a target at most the baseline's share of them, the farthest
from the cut first, so a target that spends more time there still shows it.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from pipelines.detectors.charts.files import MinorMode


def density(values: np.ndarray, *, grid: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian kernel density on a grid (Scott's bandwidth), by binning and convolution."""
    v = values
    bw = 1.06 * v.std(ddof=1) * v.size ** (-1 / 5)
    xs = np.linspace(v.min() - 3 * bw, v.max() + 3 * bw, grid)
    step = xs[1] - xs[0]
    counts = np.bincount(np.clip(np.round((v - xs[0]) / step).astype(int), 0, grid - 1), minlength=grid)
    half = int(np.ceil(4 * bw / step))
    kernel = np.exp(-0.5 * (np.arange(-half, half + 1) * step / bw) ** 2)
    d = np.convolve(counts, kernel, mode="full")[half:half + grid]
    return xs, d / (d.sum() * step)

def local_maxima(x: np.ndarray) -> np.ndarray:
    """The indices of the local maxima of ``x``: what ``scipy.signal.find_peaks(x)`` gives with
    no condition (a value above both neighbours; a flat top above both sides gives its middle,
    rounded down; never the first or last value).  scipy.signal costs more to import (0.6 s)
    than a stage spends on its density peaks."""
    x = np.asarray(x, dtype=float)
    if x.size < 3:
        return np.zeros(0, dtype=np.intp)
    ends = np.flatnonzero(x[1:] != x[:-1])             # the last index of each run of equal values
    starts = np.r_[0, ends + 1]
    ends = np.r_[ends, x.size - 1]
    level = x[starts]
    k = np.arange(1, level.size - 1)
    top = k[(level[k - 1] < level[k]) & (level[k + 1] < level[k])]
    return ((starts[top] + ends[top]) // 2).astype(np.intp)

def minor_mode(values: np.ndarray, *, max_dip: float, min_share: float, grid: int = 512
               ) -> tuple[float, str, float] | None:
    """The secondary mode of a bimodal counter (Nguyen 2017 §5.3), or None.

    The density (Gaussian kernel, Scott's bandwidth) must have two peaks with a local
    minimum between the two highest that is at most ``max_dip`` times the lower peak,
    and the smaller side must hold at least ``min_share`` of the values.  Returns
    ``(cut, side, share)``: the minimum's position, ``"low"`` or ``"high"`` for the
    minor side, and its share.
    """
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size < 20 or np.ptp(v) == 0 or np.unique(v).size < 5:
        return None
    xs, d = density(v, grid=grid)
    peaks = local_maxima(d)
    if len(peaks) < 2:
        return None
    p1, p2 = sorted(peaks[np.argsort(d[peaks])[-2:]])
    j = p1 + int(np.argmin(d[p1:p2 + 1]))
    if d[j] > max_dip * min(d[p1], d[p2]):
        return None
    cut = float(xs[j])
    share_low = float(np.mean(v < cut))
    side, share = ("low", share_low) if share_low < 0.5 else ("high", 1.0 - share_low)
    if share < min_share:
        return None
    return cut, side, share

def drop_minor_mode(values: pd.Series, cut: float, side: str, share: float) -> pd.Series:
    """``values`` without at most ``share`` of its points on the minor side, farthest from the cut first."""
    v = values.to_numpy(dtype=float)
    depth = (cut - v) if side == "low" else (v - cut)
    minor = depth > 0                                # NaN compares False
    n_drop = min(int(minor.sum()), int(round(share * np.count_nonzero(~np.isnan(v)))))
    if n_drop == 0:
        return values
    order = np.argsort(np.where(minor, -depth, np.inf), kind="stable")[:n_drop]
    out = v.copy()
    out[order] = np.nan
    return pd.Series(out, index=values.index, name=values.name)

def find_modes(baseline: list[pd.DataFrame], *, max_dip: float, min_mode_share: float
               ) -> dict[str, MinorMode]:
    """Per bimodal counter of the pooled baseline, its minor mode (``cut``, ``side``, ``share``)."""
    counters = sorted({c for f in baseline for c in f.columns})
    modes = {}
    for counter in counters:
        pooled = np.concatenate([f[counter].to_numpy(dtype=float) for f in baseline if counter in f.columns])
        found = minor_mode(pooled, max_dip=max_dip, min_share=min_mode_share)
        if found is not None:
            cut, side, share = found
            modes[counter] = MinorMode(cut=cut, side=side, share=share)
    return modes

def without_minor_modes(frame: pd.DataFrame, modes: dict[str, MinorMode], *, baseline: bool) -> pd.DataFrame:
    """``frame`` with each bimodal counter's minor mode dropped (:func:`drop_minor_mode`): all of
    it from a baseline run, at most the mode's baseline share from the target."""
    if not modes:
        return frame
    frame = frame.copy()
    for counter, m in modes.items():
        if counter in frame.columns:
            frame[counter] = drop_minor_mode(frame[counter], m["cut"], m["side"], 1.0 if baseline else m["share"])
    return frame
