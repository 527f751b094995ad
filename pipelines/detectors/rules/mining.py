"""mine_rules: one association-rule model per prior passed run (mlxtend).

Foo et al. 2015, phase 3 (seed 003): every interval of a run is a
transaction of ``counter=bin`` items; rules with support >= ``min_support`` (0.3) and
confidence >= ``min_confidence`` (0.9) form the run's model.

Rule explosion is the real problem at support 0.3: a counter that sits in one bin for
most of a run is an item of support ~1, and every pair of such items is a rule of
confidence ~1 that says nothing the consequent's own frequency does not say.  With
``n`` such counters that is ``n²`` rules (millions at 2,000 counters).  We keep what
those rules detect and drop the explosion:

* every counter gets one *stationarity rule* ``∅ → {counter ∈ [lo..hi]}``: its usual
  range, the narrowest run of adjacent bins that holds at least ``min_confidence`` of
  the run's intervals (adjacent bins merged into one item as in quantitative
  association rules, Srikant & Agrawal 1996).  Its confidence is the range's support.
  A regression that moves the counter out of its range breaks it exactly as it breaks
  every trivial rule ``X → {counter=bin}`` (whose confidence is at least the item's
  support anyway), and a counter that straddles a bin edge still gets a rule.  A range
  spanning every bin can never break and is not kept;
* rules between the other frequent items are mined with mlxtend (``fpgrowth`` or
  ``apriori`` + ``association_rules``), itemsets bounded to ``max_len`` items and
  **single-item consequents** (a rule flags the counter of its consequent);
* at most ``max_mined_items`` of those items go to mlxtend (the most frequent first):
  with load-following counters spread over several bins the candidate pairs and
  triples grow with the square and cube of the item count, so this bound is what keeps
  2,000 counters within a minute and a few GB (``bench/bench_rules.py``).  Counters left
  out still have their stationarity rule, so every counter stays judged;
* at most ``max_rules_per_consequent`` rules per consequent are kept (highest
  confidence, then lift, then support).

Models are cached by the content of their inputs (normalised run, the bin edges of
its counters, the mining params): a night with one new archive re-mines nothing else
unless the edges moved.
"""
from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np
import pandas as pd

from pipelines import config
from pipelines.preparation import bins
from pipelines.storage import atomic, store

log = logging.getLogger("regresslab.mine_rules")
CODE_VERSION = 2
RULE_COLUMNS = ["premise", "consequent", "support", "confidence", "lift"]


@dataclass(frozen=True)
class MiningParams:
    """The ``mine_rules`` block, typed: the rules' ``min_support`` and ``min_confidence``, their
    itemsets' ``max_len``, the miner (``algorithm``: apriori or fpgrowth), and the bounds on the
    rules kept per consequent and the items given to mlxtend (None: no bound); ``block`` is the
    block as validated (the models' file names and the input keys hash it)."""

    algorithm: str
    min_support: float
    min_confidence: float
    max_len: int
    max_rules_per_consequent: int | None
    max_mined_items: int | None
    block: Mapping[str, Any] = field(compare=False, repr=False)

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "MiningParams":
        def bound(key: str) -> int | None:
            return None if block.get(key) is None else int(block[key])
        return cls(algorithm=str(block["algorithm"]), min_support=float(block["min_support"]),
                   min_confidence=float(block["min_confidence"]), max_len=int(block["max_len"]),
                   max_rules_per_consequent=bound("max_rules_per_consequent"),
                   max_mined_items=bound("max_mined_items"), block=dict(block))

    @classmethod
    def load(cls) -> "MiningParams":
        """The project's ``mine_rules`` block (``config.load_params``), typed: the stages' one loading site."""
        return cls.of(config.load_params("mine_rules"))


# --------------------------------------------------------------------------- pure core


def item(counter: str, bin_: int) -> str:
    return f"{counter}={int(bin_)}"


def counter_of(item_name: str) -> str:
    return item_name.rsplit("=", 1)[0]


ONE_HOT_CELLS = 1 << 23    # values one_hot converts to floats at a time (64 MiB): a run at once, a pooled history in slices


def one_hot(binned: pd.DataFrame) -> pd.DataFrame:
    """Transactions as a boolean frame: one column per ``counter=bin`` item that occurs."""
    # one boolean block, not one per item (thousands of items at 2,000 counters), filled a slice of
    # counters at a time: a pooled history's bins are never copied whole (76,800 intervals x 2,000
    # counters would be 1.2 GB as floats, and a list of the items' columns as much again)
    width = max(1, ONE_HOT_CELLS // max(1, len(binned)))
    slices = [list(binned.columns[i:i + width]) for i in range(0, binned.shape[1], width)]

    def values(counters: list[str]) -> np.ndarray:
        return binned[counters].to_numpy(dtype=float, na_value=np.nan)

    def bins_of(arr: np.ndarray) -> list[np.ndarray]:
        return [np.unique(col[~np.isnan(col)]) for col in arr.T]

    found = [bins_of(values(counters)) for counters in slices]      # per slice, each counter's bins
    names = [item(counter, b) for counters, bins_ in zip(slices, found) for counter, seen in zip(counters, bins_)
             for b in seen]
    matrix = np.empty((len(binned), len(names)), dtype=bool, order="F")      # contiguous columns to fill
    at = 0
    for counters, bins_ in zip(slices, found):
        arr = values(counters)
        for j, seen in enumerate(bins_):
            for b in seen:
                matrix[:, at] = arr[:, j] == b
                at += 1
    return pd.DataFrame(matrix, index=binned.index, columns=names)


def usual_ranges(binned: pd.DataFrame, bins: dict[str, int], *, min_confidence: float) -> dict[str, float]:
    """Per counter, the narrowest run of adjacent bins holding >= ``min_confidence`` of the
    observed intervals, as an item ``counter=lo..hi`` (or ``counter=b``) -> its support.

    Ties in width go to the range with the larger support, then the lower bins.  Counters
    whose range would span all their ``bins[counter]`` bins get none (it could never break).
    """
    out: dict[str, float] = {}
    for counter in binned.columns:
        col = binned[counter].dropna().to_numpy(dtype=int)
        k = int(bins.get(counter, col.max() + 1 if col.size else 1))
        if col.size == 0 or k <= 1:
            continue
        counts = np.bincount(col, minlength=k)
        best = None
        for width in range(1, k):
            sums = np.convolve(counts, np.ones(width, dtype=int), mode="valid")
            lo = int(np.argmax(sums))
            if sums[lo] >= min_confidence * col.size:
                best = (lo, lo + width - 1, sums[lo] / col.size)
                break
        if best is not None:
            lo, hi, sup = best
            out[range_item(counter, lo, hi)] = float(sup)
    return out


def range_item(counter: str, lo: int, hi: int) -> str:
    return item(counter, lo) if lo == hi else f"{counter}={int(lo)}..{int(hi)}"


def mine_rules(onehot: pd.DataFrame, *, min_support: float, min_confidence: float, max_len: int,
               algorithm: str, max_rules_per_consequent: int | None, max_mined_items: int | None,
               stationarity: dict[str, float] | None = None) -> pd.DataFrame:
    """Rules of one model; columns ``premise`` (tuple of items), ``consequent`` (item),
    ``support``, ``confidence``, ``lift``.  ``stationarity`` (from :func:`usual_ranges`)
    adds the empty-premise rules.

    Supports are over the transactions in which the items' counters were observed
    together (all of them here: an interval without a value of a counter has no item
    of it, which can only lower support).
    """
    from mlxtend.frequent_patterns import apriori, association_rules, fpgrowth

    n = len(onehot)
    if n == 0 or onehot.shape[1] == 0:
        return pd.DataFrame(columns=RULE_COLUMNS)
    support = onehot.mean(axis=0)
    frequent = support[support >= min_support]
    dominant = frequent[frequent >= min_confidence]
    rows = [((), name, float(s), float(s), 1.0) for name, s in (stationarity or {}).items()]
    other = [c for c in frequent.index if c not in dominant.index]
    if max_mined_items is not None and len(other) > max_mined_items:
        other = sorted(other, key=lambda c: (-support[c], c))[:max_mined_items]
    if len(other) >= 2 and max_len >= 2:
        miner = fpgrowth if algorithm == "fpgrowth" else apriori
        itemsets = miner(onehot[other], min_support=min_support, use_colnames=True, max_len=max_len)
        itemsets = itemsets[itemsets["itemsets"].map(len) >= 2]
        if len(itemsets):
            # association_rules needs the supports of every sub-itemset: add the 1-itemsets back
            singles = pd.DataFrame({"support": support[other].values,
                                    "itemsets": [frozenset([c]) for c in other]})
            full = pd.concat([singles, itemsets], ignore_index=True)
            rules = association_rules(full, num_itemsets=n, metric="confidence", min_threshold=min_confidence)
            rules = rules[rules["consequents"].map(len) == 1]
            for ante, cons, s, c, lift in zip(rules["antecedents"], rules["consequents"], rules["support"],
                                              rules["confidence"], rules["lift"]):
                premise = tuple(sorted(ante))
                if {counter_of(i) for i in premise} & {counter_of(next(iter(cons)))}:
                    continue
                rows.append((premise, next(iter(cons)), float(s), float(c), float(lift)))
    out = pd.DataFrame(rows, columns=RULE_COLUMNS)
    if len(out) and max_rules_per_consequent:
        out = (out.sort_values(["consequent", "confidence", "lift", "support"], ascending=[True, False, False, False])
               .groupby("consequent", sort=False).head(max_rules_per_consequent).reset_index(drop=True))
    return out


def mine_model(binned: pd.DataFrame, edges: bins.Edges, params: MiningParams) -> pd.DataFrame:
    """One run's (or a pooled history's) model: stationarity rules plus mined rules."""
    return mine_rules(one_hot(binned), min_support=params.min_support, min_confidence=params.min_confidence,
                      max_len=params.max_len, algorithm=params.algorithm,
                      max_rules_per_consequent=params.max_rules_per_consequent,
                      max_mined_items=params.max_mined_items,
                      stationarity=usual_ranges(binned, {c: e["k"] for c, e in edges.items()},
                                                min_confidence=params.min_confidence))


def model_key(run_key: str, edges: bins.Edges, params: MiningParams,
              reference: float | None = None) -> str:
    blob = json.dumps({"run": run_key, "edges": bins.edges_digest(edges), "params": dict(params.block),
                       "reference_load": reference, "code": CODE_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def rules_to_frame(rules: pd.DataFrame) -> pd.DataFrame:
    """Storable form: the premise as a '&'-joined string (items never contain '&')."""
    return rules.assign(premise=rules["premise"].map(lambda p: "&".join(p)))


def rules_from_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """The rules of :func:`rules_to_frame` again; the consequents as plain Python strings (a
    Parquet string column iterates element by element through Arrow, and detection lists
    them for every model and run)."""
    return frame.assign(premise=frame["premise"].map(lambda s: tuple(s.split("&")) if s else ()),
                        consequent=frame["consequent"].astype(object))


# --------------------------------------------------------------------------- I/O shell


def model_path(run_id: str, edges: bins.Edges, params: MiningParams, directory,
               reference: float | None = None) -> tuple:
    """Where the model of ``run_id`` under ``edges`` is cached, and the edges of its own counters."""
    info = store.read_info(run_id)
    own_edges = {c: edges[c] for c in info["counters"] if c in edges}
    key = model_key(info["key"], own_edges, params, reference)
    return directory / f"{config.identifier(run_id, 'run_id')}.{key[:16]}.parquet", own_edges


def mine_for_run(run_id: str, edges: bins.Edges, params: MiningParams,
                 directory, reference: float | None = None) -> pd.DataFrame:
    """The model of one run under ``edges`` (and the reference load of its system), from the
    cache when its inputs are unchanged."""
    path, own_edges = model_path(run_id, edges, params, directory, reference)
    if path.exists():
        return rules_from_frame(pd.read_parquet(path))
    frame = store.load_scaled(run_id, reference)
    rules = mine_model(bins.apply_edges(frame, own_edges), own_edges, params)
    atomic.write_parquet_atomic(path, rules_to_frame(rules))
    return rules
