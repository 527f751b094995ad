"""features: violation ratios of (target, baseline) pairs, the training data of the cause classifiers.

Nguyen 2017 ch. 8 (seed 004): every run is reduced to the lower and upper
violation ratio of each counter on the control charts of a baseline run (§3.2.2), one row
per (target, baseline) pair, labelled with the verified cause (``none`` for a passed run).

The baselines of a run are the passed runs of its history with the most similar
environment (``history.most_similar``), each charted alone as in the thesis; a run none of
them shares a lab with is first moved by its lab's level (``labs``), as in the nightly
charts.  A passed run is never its own baseline.  A counter absent from the target or the baseline has
NaN ratios: the classifiers impute them and see a missing-value indicator, so absence
is a feature, not a silent zero.  Columns are ``lower:<counter>`` and ``upper:<counter>``, and
``below:<counter>`` and ``above:<counter>``: how far the counter went below and above its band
in its strongest window, in band widths (``charts.excursions``, ``log1p``).

What the classifiers see (:func:`design`, ``train_causes.feature_designs``) is built from
those rows.  ``counters`` is the ratios themselves, one column per counter, as in the thesis.
``kinds`` folds the counters of one *kind* across components: a counter's kind is
its name without the component prefix and with digit runs folded (``cartservice.cpu_usage_m``
and ``adservice.cpu_usage_m`` are ``cpu_usage_m``; ``procstat.cpu11_user_pct`` is
``cpuN_user_pct``), and per kind and side the features are the largest, smallest and median
ratio over its instances, and the ratio of the *most deviating component* (the one whose
counters' ratios sum highest).  A fault in one service of a shop then looks the same whichever
service it hits: with a handful of runs per cause the per-counter columns cannot learn that
a CPU fault in ``cartservice`` resembles one in ``adservice``.  ``shifts`` folds the excursions the same way: a violation ratio says that a
counter left its band, an excursion how far and which way (the direction and size of
each counter's change).  Which blocks a system's classifiers see is chosen on its own history
(``causes.choose_design``); ``bench/compare_cause_features.py`` prints every choice's
figures on the labelled sets.
"""
from __future__ import annotations

import hashlib
import json
import logging

import numpy as np
import pandas as pd

from pipelines.detectors.charts import calibration as chart_calibration
from pipelines.detectors.charts import control_charts as charts
from pipelines.systems.counter_kinds import counter_kind
from pipelines.storage.run_records import Environment

log = logging.getLogger("regresslab.features")
KEY_COLUMNS = ["target", "baseline", "system", "cause"]


# --------------------------------------------------------------------------- pure core


def pair_row(ratios: pd.DataFrame) -> dict[str, float]:
    """One feature row from the control charts of a pair: each counter's lower and upper violation
    ratio (the thesis' features), and how far below and above its band it went in its strongest
    window (``charts.excursions``: band widths, ``log1p``-compressed, since a fault moves
    one counter 2 widths and another 2,000)."""
    row = {f"lower:{c}": v for c, v in ratios["lower"].items()}
    row.update({f"upper:{c}": v for c, v in ratios["upper"].items()})
    row.update({f"below:{c}": v for c, v in np.log1p(ratios["below"]).items()})
    row.update({f"above:{c}": v for c, v in np.log1p(ratios["above"]).items()})
    return row


def pair_features(charter: charts.Charter, target: str, baselines: list[str],
                  shift: pd.Series | None = None) -> pd.DataFrame:
    """Feature rows of ``target`` (moved by ``-shift`` into the baselines' lab, ``labs``) against
    each of ``baselines`` (charted one at a time)."""
    return rows_frame(target, baselines, pair_rows(charter, target, baselines, shift))


def rows_frame(target: str, baselines: list[str], rows: list[dict[str, float]]) -> pd.DataFrame:
    """The table of ``target``'s pairs: a row per baseline, its features those of ``rows``."""
    return pd.DataFrame([{"target": target, "baseline": b, **row} for b, row in zip(baselines, rows)])


def pair_rows(charter: charts.Charter, target: str, baselines: list[str], shift: pd.Series | None = None,
              known: dict[str, dict[str, float]] | None = None) -> list[dict[str, float]]:
    """:func:`pair_row` of ``target`` against each of ``baselines``; ``known``: baseline -> its row
    already computed (:func:`rows_by_key`), not charted again."""
    rows = []
    for b in baselines:
        if known and b in known:
            rows.append(known[b])
        else:
            ratios, _, _ = charter([b], target, shift, excursions_too=True)
            rows.append(pair_row(ratios))
    return rows


# A feature table keeps, beside each row, the key of what its pair was computed from and the
# features the row did not have (a counter one of the two runs lacks): the next table reuses the
# rows whose key it meets, rebuilt exactly as :func:`pair_row` gave them.
PAIR_KEY, ABSENT = "pair_key", "absent_features"


def shift_digest(shift: pd.Series | None) -> str | None:
    """What identifies a lab shift in a pair's key: its counters and values (exact reprs)."""
    if shift is None or shift.empty:
        return None
    return hashlib.sha256(repr(sorted((str(k), float(v)) for k, v in shift.items())).encode()).hexdigest()


def rows_by_key(frame: pd.DataFrame | None) -> dict[str, dict[str, float]]:
    """The rows of a feature table written with :data:`PAIR_KEY` and :data:`ABSENT`, by pair key:
    each row's features, those it did not have left out (not NaN).  Nothing from a table without them."""
    if frame is None or PAIR_KEY not in frame.columns or ABSENT not in frame.columns:
        return {}
    cols = feature_columns(frame)
    values = frame[cols].to_numpy(dtype=float)
    out = {}
    for i, (key, absent) in enumerate(zip(frame[PAIR_KEY], frame[ABSENT])):
        skip = set(json.loads(absent)) if absent else set()
        out[str(key)] = {c: v for c, v in zip(cols, values[i].tolist()) if c not in skip}
    return out


def with_pair_keys(frame: pd.DataFrame, parts: list[tuple[pd.DataFrame, list[str], list[list[str]]]]) -> pd.DataFrame:
    """``frame`` (the concatenated ``parts``, in order) with each row's pair key and the features it
    lacks: ``parts`` are (part, its rows' keys, its rows' absent features within the part), and a
    row also lacks every feature of the table its part had not."""
    columns = set(feature_columns(frame))
    keys: list[str] = []
    absent: list[str] = []          # each row's absent features, as JSON
    for part, part_keys, part_absent in parts:
        missing = columns - set(feature_columns(part))
        keys.extend(part_keys)
        absent.extend(json.dumps(sorted(missing | set(a))) for a in part_absent)
    return pd.concat([frame, pd.DataFrame({PAIR_KEY: keys, ABSENT: absent}, index=frame.index)], axis=1)


def pair_baselines(run_id: str, passed: list[str], envs: dict[str, Environment],
                   max_runs: int | None) -> list[str]:
    """The passed runs (never the run itself) whose environment is most like the run's, the
    newest ``max_runs`` of them (``passed`` is oldest first)."""
    others = [r for r in passed if r != run_id]
    return sorted(chart_calibration.chart_baseline({r: envs[r] for r in others}, envs[run_id], max_runs))


RATIO_SIDES, SHIFT_SIDES = ("lower", "upper"), ("below", "above")


FEATURE_PREFIXES = tuple(s + ":" for s in RATIO_SIDES + SHIFT_SIDES)


def feature_columns(frame: pd.DataFrame) -> list[str]:
    return sorted(c for c in frame.columns if c.startswith(FEATURE_PREFIXES))


BLOCKS = ("counters", "kinds", "shifts")


def kind_features(frame: pd.DataFrame, sides: tuple[str, ...] = RATIO_SIDES) -> pd.DataFrame:
    """The ``kinds`` block of :func:`design` (``sides`` lower/upper: the violation ratios) and the
    ``shifts`` block (below/above: the excursions): per side and counter kind, the max, min and
    median of the values over the kind's instances, and the value of the most deviating component
    (largest sum of that side's values; NaN when it has no counter of the kind).
    Columns ``<side>:<stat>:<kind>``, stat in max/min/median/top."""
    out: dict[str, pd.Series] = {}
    for side in sides:
        cols = [c for c in feature_columns(frame) if c.startswith(side + ":")]
        if not cols:
            continue
        x = frame[cols].astype(float)
        parts = [counter_kind(c[len(side) + 1:]) for c in cols]
        comps = pd.Series([p[0] for p in parts], index=cols)
        kinds = pd.Series([p[1] for p in parts], index=cols)
        totals = x.fillna(0.0).T.groupby(comps).sum().T               # rows x components
        top = totals.idxmax(axis=1)
        for kind, members in kinds.groupby(kinds).groups.items():
            members = list(members)
            block = x[members]
            out[f"{side}:max:{kind}"] = block.max(axis=1)
            out[f"{side}:min:{kind}"] = block.min(axis=1)
            out[f"{side}:median:{kind}"] = block.median(axis=1)
            of_component = dict(zip(comps[members], members))
            out[f"{side}:top:{kind}"] = pd.Series(
                [x.at[i, of_component[t]] if t in of_component else np.nan for i, t in top.items()], index=x.index)
    return pd.DataFrame(out, index=frame.index)


def design(frame: pd.DataFrame, blocks: list[str]) -> pd.DataFrame:
    """What the cause classifiers see of feature rows: the ``blocks`` (``counters``, ``kinds``,
    ``shifts``) side by side, columns sorted.  Pure: the same rows give the same columns in training and prediction."""
    unknown = sorted(set(blocks) - set(BLOCKS))
    if unknown or not blocks:
        raise ValueError(f"a train_causes.feature_designs entry must be a non-empty subset of {list(BLOCKS)}, "
                         f"got {blocks}")
    parts = []
    if "counters" in blocks:
        ratios = tuple(side + ":" for side in RATIO_SIDES)
        parts.append(frame[[c for c in feature_columns(frame) if c.startswith(ratios)]].astype(float))
    for block, prefix, sides in (("kinds", "kind:", RATIO_SIDES), ("shifts", "shift:", SHIFT_SIDES)):
        if block in blocks:
            folded = kind_features(frame, sides)
            folded.columns = [prefix + c for c in folded.columns]
            parts.append(folded)
    out = pd.concat(parts, axis=1)
    return out[sorted(out.columns)]


def frame_digest(frame: pd.DataFrame) -> str:
    """A content hash of a feature table (stable across row order)."""
    ordered = frame.sort_values(["target", "baseline"]).reset_index(drop=True)
    ordered = ordered[KEY_COLUMNS + feature_columns(ordered)]
    return hashlib.sha256(pd.util.hash_pandas_object(ordered, index=True).to_numpy().tobytes()
                          + ",".join(ordered.columns).encode()).hexdigest()


# --------------------------------------------------------------------------- I/O shell
