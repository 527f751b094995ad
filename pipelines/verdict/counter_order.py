"""counter_order: which ranking orders a failed run's counters, chosen by its record on the system.

Each ranking of a failed run's counters is right somewhere, as each detector is: the detectors'
own evidence where the fault's counter moves most against their models (the example's labs,
Nezha's CPU faults), a plain robust distance from the passed runs where the detectors' strongest
counters are the fault's echoes in other components (TrainTicket's timeouts).  So the order is
chosen as the verdict is, by its **record on the system's own verified faults** that name
counters (``regressed_counters``, contract §1), each replayed in leave-one-out:

* ``detectors``: the order the page shows by default (the deciders' flags with the cause's
  signature first, ``cause_signatures.explain_order``).  On a history run it is replayed by its
  replayable part, the control charts' evidence: the counters by their violation ratios against the
  run's baselines (the ``features`` table the cause classifier learns from, Nguyen 2017 ch. 8,
  seed 004), with the signature of the run's own cause, its label left out;
* ``robust``: every counter by its distance from the passed runs' medians in units of their spread
  (``|median − m| / max(1.4826 MAD, 5 % |m|)``, the robust score of BARO's RobustScorer), with the
  same signature first.

**The anchor leads with the deciders.** The detectors' order names what decided, but its fourth and
fifth places hold more of the same evidence (the same detector's next counters, often one
component's echoes), while the plain robust anchor (BARO's RobustScorer, Pham et al. 2024: each
counter's largest distance over the run's intervals from the passed runs' pooled median, in units
of their interquartile range: :func:`anchor_distance`) is right where the detectors' strongest
counters are not the fault's (SMD's servers, Nezha's CPU faults) and wrong where every run moves
(TrainTicket's timeouts).  So the detectors' order keeps the first places and the anchor's
farthest counters whose change matters fill the last ``report.anchor_places`` (2) of the five
(:func:`with_anchor`); every
flagged counter stays listed after them.  The records weigh the two sources of evidence, the
detectors' and the robust distance's, each as replayed above; the fill is a rule of the page, not
a third ranking (replaying it in the detectors' record too was measured and is worse on Nezha:
``docs/results/robustness.md``, "Which ranking orders the counters").

Each record is the share of those faults with a named counter among the first five, then first;
``robust`` orders the run only when its record is the better (more in five, then more first).
With no such fault, or a tie, the detectors' order stays: it is the better of the two on the
example and on Nezha, and the record cannot tell where it is not (measured in
``docs/results/robustness.md``, "Which ranking orders the counters").  Counters are explanation,
not evidence: the verdict never depends on the order.

Pure: medians, features and labels in; orders and records out.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipelines.verdict.cause_signatures import FaultLabel, explain_order, signature

RANKINGS = ("detectors", "robust")
IN_FIVE = 5
MAD_SCALE = 1.4826              # a MAD in units of a normal standard deviation
RELATIVE_FLOOR = 0.05           # the spread is at least 5 % of the level (a counter that never moved)


def robust_distance(run: pd.Series, passed: pd.DataFrame) -> pd.Series:
    """Each counter's ``|run − m| / s``: ``m`` the median of the passed runs' medians, ``s`` their
    MAD in standard-deviation units, at least ``RELATIVE_FLOOR`` of ``|m|`` (and above 0)."""
    level = passed.median()
    spread = np.maximum((passed - level).abs().median().fillna(0.0) * MAD_SCALE, RELATIVE_FLOOR * level.abs() + 1e-9)
    out = ((run.reindex(level.index) - level) / spread).abs()
    return out.replace([np.inf, -np.inf], np.nan).dropna()


def robust_order(run: pd.Series, passed: pd.DataFrame) -> list[str]:
    """The counters by :func:`robust_distance`, largest first (ties by name)."""
    distance = robust_distance(run, passed)
    return [c for c, _ in sorted(distance.items(), key=lambda kv: (-kv[1], kv[0]))]


def anchor_distance(run: pd.DataFrame, passed: pd.DataFrame) -> pd.Series:
    """BARO's RobustScorer: each counter's largest ``|x − median| / IQR`` over the run's intervals, the
    median and interquartile range of the passed runs' intervals pooled (scikit-learn's
    ``RobustScaler``, which counts a zero range as 1); counters with no value on either side left out."""
    from sklearn.preprocessing import RobustScaler

    cols = [c for c in run.columns if c in passed.columns and passed[c].notna().any() and run[c].notna().any()]
    if not cols or passed.empty or run.empty:
        return pd.Series(dtype=float)
    fill = passed[cols].median()
    scaler = RobustScaler().fit(passed[cols].fillna(fill).to_numpy(dtype=float))
    scaled = np.abs(scaler.transform(run[cols].fillna(fill).to_numpy(dtype=float)))
    return pd.Series(scaled.max(axis=0), index=cols)


def anchor_order(run: pd.DataFrame, passed: pd.DataFrame) -> list[str]:
    """The counters by :func:`anchor_distance`, largest first (ties by name)."""
    distance = anchor_distance(run, passed)
    return [c for c, _ in sorted(distance.items(), key=lambda kv: (-kv[1], kv[0]))]


def with_anchor(detectors: list[str], anchor: list[str], *, lead: int, five: int = IN_FIVE) -> list[str]:
    """The detectors' first ``lead`` counters, then the anchor's first counters not among them up to
    ``five``, then the rest of the detectors' order (every counter once)."""
    head = list(dict.fromkeys(detectors))[:lead]
    fill = [c for c in dict.fromkeys(anchor) if c not in head][:max(0, five - len(head))]
    return list(dict.fromkeys(head + fill + list(detectors)))


def violation_order(features: pd.DataFrame, run: str) -> list[str]:
    """The control charts' evidence on ``run``: its counters by their largest mean violation ratio
    (``lower:``/``upper:``) over its pair rows in ``features``, those above 0 (ties by name)."""
    rows = features[features["target"] == run]
    cols = [c for c in features.columns if c.startswith(("lower:", "upper:"))]
    if rows.empty or not cols:
        return []
    ratios = rows[cols].astype(float).mean()
    by_counter: dict[str, float] = {}
    for col, value in ratios.items():
        counter = col.split(":", 1)[1]
        by_counter[counter] = max(by_counter.get(counter, 0.0), float(value))
    return [c for c, v in sorted(by_counter.items(), key=lambda kv: (-kv[1], kv[0])) if v > 0]


@dataclass(frozen=True)
class RankingRecord:
    """A ranking's record on a system's verified faults that name counters."""
    ranking: str
    faults: int
    first: int
    in_five: int

    def key(self) -> tuple[float, float]:
        return (self.in_five / self.faults, self.first / self.faults) if self.faults else (0.0, 0.0)

    def sentence(self) -> str:
        return f"on this system's {self.faults} labelled fault(s): first {self.first}, in five {self.in_five}"

    def to_json(self) -> dict:
        return {"faults": self.faults, "first": self.first, "in_five": self.in_five, "sentence": self.sentence()}


def position(order: list[str], named: set[str]) -> int | None:
    """Where the first counter of ``named`` comes in ``order`` (0 = first), None when it does not."""
    return next((i for i, c in enumerate(order) if c in named), None)


def records(labels: Mapping[str, FaultLabel], medians: pd.DataFrame, features: pd.DataFrame | None,
            passed_of: Mapping[str, list[str]]) -> dict[str, RankingRecord]:
    """Each ranking's record on the faults of ``labels`` that ``features`` holds (a fault the charts
    never judged has no replayable detectors' order) and whose median ``medians`` holds:
    ``passed_of[run]`` the passed runs its robust distance is measured from (its lab's, or every
    one's).  Each fault is ordered with the signature of its own cause without its own label."""
    hits: dict[str, list[int | None]] = {name: [] for name in RANKINGS}
    judged = set(features["target"]) if features is not None and "target" in features else set()
    for run, label in sorted(labels.items()):
        passed = [r for r in passed_of.get(run, []) if r in medians.index and r != run]
        if run not in judged or run not in medians.index or not passed:
            continue
        named = set(label.counters)
        sig = signature(labels, label.cause, leave_out=run)
        hits["detectors"].append(position(explain_order(violation_order(features, run), sig), named))
        hits["robust"].append(position(explain_order(robust_order(medians.loc[run], medians.loc[passed]), sig),
                                       named))
    return {name: RankingRecord(name, len(v), sum(p == 0 for p in v), sum(p is not None and p < IN_FIVE for p in v))
            for name, v in hits.items()}


def choose(recorded: Mapping[str, RankingRecord]) -> str:
    """``robust`` when its record is the better (more faults with a named counter in five, then
    first), else ``detectors`` (the default: no record, or a tie)."""
    robust, detectors = recorded.get("robust"), recorded.get("detectors")
    if robust is None or detectors is None or not robust.faults:
        return "detectors"
    return "robust" if robust.key() > detectors.key() else "detectors"
