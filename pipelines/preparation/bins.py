"""discretize: equal-width bins per counter, learned over the training runs together.

Foo et al. 2015, phase 2 (seed 003): ``k = max(1, 2·log(u))`` bins of
equal width between the smallest and largest value of a counter over all training
runs pooled (``u`` = its number of unique values there).  The paper does not name the
logarithm's base; it is ``discretize.log_base`` (default 10: with the natural log a
counter with 1,920 distinct values gets 15 bins and on a roughly normal counter no bin
reaches support 0.3, so almost no rule survives: docs/results/rules.md).
``k`` is ``floor(2·log_b(u))``.  A counter with a single value over the training runs
(zero variance) gets no edges and is not analysed.

"Values of a new run outside the range fall into the edge bins."  Two measured changes
(docs/results/rules.md), both params:

* ``open_edge_bins``: the edge bins are *open* bins beyond the training range,
  ``(-inf, lo)`` and ``(hi, +inf)``, next to the ``k`` inner bins.  Clamping into the
  outermost inner bin made every regression of a counter that already sat at the top
  (or bottom) of the pooled range invisible: a lab whose CPU idles at 54 % — the top
  bin of the range pooled over all labs — stayed in that bin at 97 %.
* ``log_span``: a right-skewed counter — whose pooled range is at least ``log_span``
  times the height of its median above its minimum — gets bins of equal width in
  ``log(x - lo + h)`` (``h`` = median - lo).  Linear bins over a range set by a nightly
  batch (PostgreSQL CPU 3 % most of the run, 54 % during the batch) put the whole
  ordinary level into bin 0, so tripling it went unseen; the shifted log keeps a
  resolution of about ``h`` at the ordinary level and a relative one above it
  (a started-log transform; the edges are stored in the counter's own units).
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, cast

import numpy as np
import pandas as pd

from pipelines import config
from pipelines.storage.stage_files import CounterBins, Edges

log = logging.getLogger("regresslab.discretize")


# --------------------------------------------------------------------------- pure core


def bin_count(unique: int, *, log_base: float) -> int:
    """``k = max(1, floor(2·log_base(u)))``."""
    if unique <= 1:
        return 1
    return max(1, int(math.floor(2.0 * math.log(unique) / math.log(log_base) + 1e-12)))


def learn_edges(frames: list[pd.DataFrame], *, log_base: float, open_edges: bool,
                log_span: float | None) -> Edges:
    """Equal-width edges per counter over all training frames pooled.

    Returns counter -> ``{"edges": [k+1 floats], "k": k, "unique": u}``; counters with
    zero variance over the pool are left out.  With ``open_edges`` two open edge bins
    flank the ``k`` inner ones: ``"k": k + 2, "open": true``.  Right-skewed counters
    (see the module docstring; ``log_span`` None = never) get ``"scale": "log"`` and
    log-spaced edges.
    """
    pooled = pd.concat(frames, axis=0, ignore_index=True) if frames else pd.DataFrame()
    out: Edges = {}
    for counter in sorted(pooled.columns):
        values = pooled[counter].dropna().to_numpy(dtype=float)
        if values.size == 0:
            continue
        lo, hi = float(values.min()), float(values.max())
        if hi <= lo:
            continue                               # zero variance: nothing to learn
        u = int(np.unique(values).size)
        k = bin_count(u, log_base=log_base)
        height = float(np.median(values)) - lo    # the ordinary level above the floor
        if log_span and height > 0 and (hi - lo) / height >= log_span:
            edges = np.exp(np.linspace(math.log(height), math.log(hi - lo + height), k + 1)) + lo - height
            edges[0], edges[-1] = lo, hi           # exact ends despite rounding
            spec = {"edges": edges.tolist(), "k": k, "unique": u, "scale": "log"}
        else:
            spec = {"edges": np.linspace(lo, hi, k + 1).tolist(), "k": k, "unique": u}
        if open_edges:
            spec.update(k=k + 2, open=True)
        out[counter] = cast(CounterBins, spec)
    return out


@dataclass(frozen=True)
class DiscretizeParams:
    """The ``discretize`` block, typed (:func:`learn_edges`' ``log_base``, ``open_edges`` and
    ``log_span``); ``block`` is the block as validated (the edges' input key hashes it)."""

    log_base: float
    open_edge_bins: bool
    log_span: float | None
    block: Mapping[str, Any] = field(compare=False, repr=False)

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "DiscretizeParams":
        span = block.get("log_span")
        return cls(log_base=float(block["log_base"]), open_edge_bins=bool(block["open_edge_bins"]),
                   log_span=None if span is None else float(span), block=dict(block))

    @classmethod
    def load(cls) -> "DiscretizeParams":
        """The project's ``discretize`` block (``config.load_params``), typed: the stages' one loading site."""
        return cls.of(config.load_params("discretize"))


def edges_for(frames: list[pd.DataFrame], params: DiscretizeParams) -> Edges:
    """:func:`learn_edges` with the ``discretize`` block of params.yaml."""
    return learn_edges(frames, log_base=params.log_base, open_edges=params.open_edge_bins, log_span=params.log_span)


def apply_edges(frame: pd.DataFrame, edges: Edges) -> pd.DataFrame:
    """Bin index (0..k-1) of every value; values outside the range fall into the edge bins
    (the open ones ``0`` and ``k - 1`` when the edges have them, else the outermost inner bins).

    Counters without edges are left out; a missing value stays missing (``<NA>``).
    """
    cols = {}
    for counter, spec in edges.items():
        if counter not in frame.columns:
            continue
        values = frame[counter].to_numpy(dtype=float)
        if spec.get("open"):
            e = np.asarray(spec["edges"], dtype=float)
            bins = np.searchsorted(e, values, side="right")       # below lo -> 0, above hi -> k + 1
            bins = np.where(values == e[-1], len(e) - 1, bins)    # hi itself closes the last inner bin
        else:
            inner = np.asarray(spec["edges"][1:-1], dtype=float)
            bins = np.searchsorted(inner, values, side="right")  # a value on an edge opens the upper bin
        missing = np.isnan(values)
        # the bins with their missing mask, as one nullable array (no frame-wide mask afterwards)
        cols[counter] = pd.arrays.IntegerArray(np.where(missing, 0, bins).astype("int64"), missing)
    return pd.DataFrame(cols, index=frame.index)


def edges_digest(edges: Edges) -> str:
    return hashlib.sha256(json.dumps(edges, sort_keys=True).encode()).hexdigest()


# --------------------------------------------------------------------------- I/O shell
