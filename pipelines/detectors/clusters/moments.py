"""One run's moments and the correlation matrix of several runs pooled from them (the cluster
models' Pearson distances, Shang et al. 2015 §4.2, seed 000): each run's cross-products computed
once and reused by every model it enters, where ``np.corrcoef`` of the stacked runs computes them
again in each.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Moments:
    """One run's sufficient statistics for correlations over several runs: its intervals ``n``,
    each counter's mean, the centred cross-products ``(X - mean)ᵀ(X - mean)``, and which counters
    have no gap (``complete``).  ``columns`` maps a counter to its row of them."""

    n: int
    mean: np.ndarray
    gram: np.ndarray
    complete: np.ndarray
    columns: dict[str, int]

    @classmethod
    def of(cls, frame: pd.DataFrame) -> "Moments":
        values = frame.to_numpy(dtype=float)
        mean = values.mean(axis=0)
        centred = values - mean
        return cls(n=len(values), mean=mean, gram=centred.T @ centred,
                   complete=~np.isnan(values).any(axis=0), columns={str(c): i for i, c in enumerate(frame.columns)})

    @property
    def nbytes(self) -> int:
        return int(self.gram.nbytes + self.mean.nbytes + self.complete.nbytes)


def pooled_correlation(parts: list[Moments], cols: list[str]) -> np.ndarray | None:
    """numpy's correlation matrix (``np.corrcoef``) of ``cols`` over the runs of ``parts`` stacked,
    from each run's moments: the centred cross-products of the stack are the runs' own plus
    ``n_r (mean_r - mean)(mean_r - mean)ᵀ`` (Chan, Golub and LeVeque's pairwise update), then scaled
    as ``np.corrcoef`` scales them.  A run's moments serve every model it enters (the calibration
    models each normal run against its ten most similar others), where ``np.corrcoef`` of the stack
    computes each run's products again in every model.  The floats differ from ``np.corrcoef``'s by
    summation order (~1e-15), below the rounding the models apply before they compare
    (``DISTANCE_DECIMALS``, ``R2_DECIMALS``).  None when a run lacks a counter, has a gap in one,
    or a counter does not vary over the stack (the caller computes ``np.corrcoef`` then)."""
    if not parts or len(cols) < 2:
        return None
    rows = []
    for part in parts:
        idx = [part.columns.get(c) for c in cols]
        if any(i is None for i in idx):
            return None
        idx_arr = np.asarray(idx)
        if not part.complete[idx_arr].all():
            return None
        rows.append(idx_arr)
    counts = np.array([part.n for part in parts], dtype=float)
    total = counts.sum()
    means = np.stack([part.mean[sel] for part, sel in zip(parts, rows)])
    grand = counts @ means / total
    shift = (means - grand) * np.sqrt(counts)[:, None]
    products = shift.T @ shift
    for part, sel in zip(parts, rows):
        if len(sel) == len(part.columns) and (sel == np.arange(len(sel))).all():
            products += part.gram                       # every counter of the run, in its order: no copy
        else:
            products += part.gram.take(sel, axis=0).take(sel, axis=1)
    cov = products / (total - 1.0)
    d = np.diag(cov)
    if not (np.isfinite(d).all() and (d > 0).all()):
        return None
    stddev = np.sqrt(d)
    cov /= stddev[:, None]
    cov /= stddev[None, :]
    np.clip(cov, -1, 1, out=cov)
    return cov
