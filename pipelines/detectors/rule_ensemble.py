"""detect: confidence change of every rule on the target run, combined by three ensembles.

Foo et al. 2015 (seed 003):

* **confidence change** (phase 3): ``Δ = 1 - cos(V_hist, V_new)`` with
  ``V = (conf, 1 - conf)``; 0 = unchanged, 1 = the premise holds and the consequent
  never does.  A rule whose premise holds in fewer than ``min_premise_intervals``
  intervals of the target gives no evidence (the paper: a premise that never holds
  gives none; a confidence estimated from a handful of intervals is noise).  A rule
  with ``Δ > delta_threshold`` is violated and flags the counter of its consequent.
* **single model**: all prior runs pooled into one rule set (the 2010 baseline);
* **bagging** (phase 4): a counter is flagged when at least half of the per-run
  models flag it;
* **stacking** (phase 4): ``s(x) = Σ w_i R_i(x)``, ``w_i = l_i / Σ l_j``,
  ``l_i = sqrt(#environment components equal between prior run i and the target)``;
  flagged where ``s > stacking_threshold`` (0.5);
* **severity** (phase 5): the share of the target's intervals in which the counter
  takes part in a violated rule; flagged counters are ranked by ``s`` (stacking) or
  votes (bagging), then severity.

Two additions, each a param of ``detect`` and measured in docs/results/rules.md:

* **practical change** (``min_rel_change``): a rule model flags a counter that crossed
  a bin edge however small the move (a 2.7 % rise of a thread count in a narrow range
  crosses two bins).  A flagged counter stays flagged only when, over the intervals in
  which its rules were violated, its median distance from the band of the target
  lab's passed runs (5th-95th percentiles, ``change_band_pct``) is at least
  ``min_rel_change`` of its level (:func:`change_magnitude`); the others are listed in the verdict file's
  ``details.below_min_rel_change``.  A whole-run shift scores about its size less half
  the band, a burst its height, noise that happened to break a rule about 0.
* **new environment** (``new_environment_abstain``): stacking weighs the models by
  environment similarity, but when no prior run ran in the target's environment every
  model describes another lab.  Counters whose level differs between the labs of the
  history (Kruskal-Wallis over the labs' run medians, ``p < history.lab_environment_alpha``, by at
  least ``min_rel_change``) cannot be judged there; every model abstains on them and
  the verdict file lists them under ``details.not_analysed``.  A component that never
  varied in the history (one CPU model only) cannot be tested this way — the report's
  "New lab environment" warning says so.

Writes ``data/processed/detections/<run_id>.json``, shaped like the verdict file of
the data contract §2; the ``report`` stage merges it with the control charts and the
cause into ``reports/runs/<run_id>.json``.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, TypedDict

import numpy as np
import pandas as pd
import scipy.stats  # noqa: F401 -- labs' and pvalues' tests, imported once before the analyses fork, not in each process

from pipelines import config, parallel
from pipelines.stats import effects, pvalues
from pipelines.systems import history, labs
from pipelines.detectors import rule_mining
from pipelines.preparation import bins
from pipelines.progress import Progress
from pipelines.storage import atomic, memo, store
from pipelines.storage.run_records import Environment, RunRecord, ValidIndex
from pipelines.storage.stage_files import Calibration, EdgesFile, RuleDetection

log = logging.getLogger("regresslab.detect")


# --------------------------------------------------------------------------- pure core


def confidence_change(conf_hist, conf_new):
    """``Δ = 1 - cos((c_h, 1-c_h), (c_n, 1-c_n))`` (Foo et al. 2015, phase 3), elementwise."""
    ch = np.asarray(conf_hist, dtype=float)
    cn = np.asarray(conf_new, dtype=float)
    dot = ch * cn + (1 - ch) * (1 - cn)
    norm = np.sqrt(ch ** 2 + (1 - ch) ** 2) * np.sqrt(cn ** 2 + (1 - cn) ** 2)
    return np.clip(1.0 - dot / norm, 0.0, 1.0)


def environment_weights(prior_envs: list[Environment], target_env: Environment) -> np.ndarray:
    """Stacking weights ``w_i = l_i / Σ l_j``, ``l_i = sqrt(#equal components)`` (Foo et al. 2015).

    A component counts as equal when both environments have the key with the same
    value.  When no prior run shares any component, every model weighs the same.
    """
    lengths = np.array([math.sqrt(sum(1 for k, v in target_env.items() if k in env and env[k] == v))
                        for env in prior_envs], dtype=float)
    if lengths.sum() == 0:
        return np.full(len(prior_envs), 1.0 / max(1, len(prior_envs)))
    return lengths / lengths.sum()


def bagging(flags: pd.DataFrame) -> tuple[pd.Series, list[str]]:
    """Votes per counter and the counters flagged by at least half of the models that judged them.

    ``flags`` has one row per model and one column per counter: 1 (flagged), 0 (not
    flagged) or NaN (the model has no rule on the counter with evidence in the target:
    it abstains, e.g. the counter did not exist in its run).  With no abstention this is
    the paper's majority vote.
    """
    votes = flags.sum(axis=0, skipna=True)
    judged = flags.notna().sum(axis=0)
    flagged = votes[(judged > 0) & (votes >= judged / 2.0)]
    return votes, list(flagged.index)


def stacking(flags: pd.DataFrame, weights: np.ndarray, *, threshold: float) -> tuple[pd.Series, list[str]]:
    """``s(x) = Σ w_i R_i(x)`` per counter, the weights renormalised over the models that judged
    ``x`` (abstaining models are left out), and the counters with ``s > threshold``."""
    w = np.asarray(weights, dtype=float)[:, None]
    judged = flags.notna().to_numpy()
    r = np.nan_to_num(flags.to_numpy(dtype=float))
    with np.errstate(invalid="ignore", divide="ignore"):
        s = (w * r).sum(axis=0) / (w * judged).sum(axis=0)
    s = pd.Series(np.nan_to_num(s), index=flags.columns)
    return s, list(s[s > threshold].index)


@dataclass
class RuleEvidence:
    """The rules of one model evaluated on the target."""

    rules: pd.DataFrame          # the model's rules + n_premise, conf_new, delta, violated
    violations: np.ndarray       # (intervals x rules) bool: premise held and consequent did not


@dataclass
class Encoded:
    """A binned run as item and observation matrices, built once and reused for every model.

    Two sentinel columns end each matrix: all-False (an item or counter the run lacks)
    and all-True (an empty premise slot).  The matrices are column-major: every rule
    evaluation gathers thousands of columns, which is 40x faster from contiguous columns.
    The bins themselves are not kept: a range item ``counter=lo..hi`` is the union of the
    run's ``counter=b`` items for b in lo..hi (bins are integers), so a run costs its boolean
    matrices alone (at 2,000 counters and 1,920 intervals 23 MB, not 54 MB with the bins as floats).
    """

    n: int
    items: np.ndarray
    item_index: dict[str, int]
    observed: np.ndarray
    counter_index: dict[str, int]

    @classmethod
    def of(cls, binned: pd.DataFrame) -> "Encoded":
        onehot = rule_mining.one_hot(binned)
        n = len(binned)
        pad = [np.zeros((n, 1), bool), np.ones((n, 1), bool)]
        return cls(n, np.asfortranarray(np.concatenate([onehot.to_numpy(dtype=bool), *pad], axis=1)),
                   {name: i for i, name in enumerate(onehot.columns)},
                   np.asfortranarray(np.concatenate([binned.notna().to_numpy(dtype=bool), *pad], axis=1)),
                   {name: i for i, name in enumerate(binned.columns)})

    def add_range_items(self, names) -> None:
        """Add columns for ``counter=lo..hi`` items not seen yet (the sentinels stay last): an
        interval holds the item when its bin is one of lo..hi (never when it is missing)."""
        new = [x for x in dict.fromkeys(names) if x is not None and ".." in x and x not in self.item_index]
        if not new:
            return
        cols = []
        for name in new:
            counter, span = name.rsplit("=", 1)
            lo, hi = (int(v) for v in span.split(".."))
            held = [self.item_index[b] for b in (rule_mining.item(counter, k) for k in range(lo, hi + 1))
                    if b in self.item_index]
            cols.append(self.items[:, held].any(axis=1) if held else np.zeros(self.n, dtype=bool))
        first = self.items.shape[1] - 2
        grown = np.empty((self.n, first + len(cols) + 2), dtype=bool, order="F")   # one copy, column-major
        grown[:, :first] = self.items[:, :first]
        grown[:, first:first + len(cols)] = np.column_stack(cols)
        grown[:, -2:] = self.items[:, -2:]
        self.items = grown
        for i, name in enumerate(new):
            self.item_index[name] = first + i

    def item_col(self, name: str | None) -> int:
        return -1 if name is None else self.item_index.get(name, -2)

    def counter_col(self, name: str | None) -> int:
        return -1 if name is None else self.counter_index.get(rule_mining.counter_of(name), -2)


@dataclass
class Model:
    """The rule model of one prior run and the counters it can judge.

    ``judges`` is None (every counter) or the counters the model may vote on: those its
    run recorded, less those whose every rule was pruned as environment-specific.  On the
    other counters the model abstains.
    """

    run_id: str
    rules: pd.DataFrame
    environment: Environment
    judges: frozenset[str] | None = None


def rule_items(rules: pd.DataFrame) -> list[str]:
    """Every item a rule set names: its consequents, then its premises' items."""
    return [*rules["consequent"], *(x for p in rules["premise"] for x in p)]


def evaluate_rules(rules: pd.DataFrame, target: pd.DataFrame | Encoded, *, delta_threshold: float,
                   min_premise_intervals: int) -> RuleEvidence:
    """Confidence of every rule on the target's intervals, its change and its violations.

    An empty premise (a stationarity rule) holds wherever the consequent's counter was
    observed.  Intervals where a counter of the rule was not observed do not count.
    """
    enc = target if isinstance(target, Encoded) else Encoded.of(target)
    n = enc.n
    if len(rules) == 0:
        empty = rules.assign(n_premise=0, conf_new=np.nan, delta=np.nan, violated=False)
        return RuleEvidence(empty, np.zeros((n, 0), dtype=bool))
    width = max(1, int(rules["premise"].map(len).max()))
    premises = [tuple(p) + (None,) * (width - len(p)) for p in rules["premise"]]
    enc.add_range_items(rule_items(rules))
    holds = np.ones((n, len(rules)), dtype=bool, order="F")     # column-major, as the gathered columns
    for pos in range(width):
        names = [p[pos] for p in premises]
        holds &= enc.items[:, [enc.item_col(x) for x in names]]
        holds &= enc.observed[:, [enc.counter_col(x) for x in names]]
    consequents = list(rules["consequent"])
    holds &= enc.observed[:, [enc.counter_col(c) for c in consequents]]
    cons = enc.items[:, [enc.item_col(c) for c in consequents]]
    n_premise = holds.sum(axis=0)
    n_both = (holds & cons).sum(axis=0)
    conf_new = np.where(n_premise > 0, n_both / np.maximum(n_premise, 1), np.nan)
    evidence = n_premise >= min_premise_intervals
    delta = np.where(evidence, confidence_change(rules["confidence"].to_numpy(), np.nan_to_num(conf_new)), np.nan)
    violated = evidence & (np.nan_to_num(delta) > delta_threshold)
    out = rules.assign(n_premise=n_premise, conf_new=conf_new, delta=delta, violated=violated)
    return RuleEvidence(out.reset_index(drop=True), holds & ~cons & violated[None, :])


def model_flags(evidence: RuleEvidence, counters: list[str], judges: frozenset[str] | None = None
                ) -> tuple[pd.Series, pd.Series]:
    """Per counter: 1 when a violated rule of this model has it as consequent, 0 when not,
    NaN where the model abstains (outside ``judges``); and the counter's largest Δ."""
    r = evidence.rules
    target_counter = r["consequent"].map(rule_mining.counter_of)
    hit = set(target_counter[r["violated"]])
    flagged = pd.Series([np.nan if judges is not None and c not in judges else float(c in hit)
                         for c in counters], index=counters)
    max_delta = r.assign(counter=target_counter).groupby("counter")["delta"].max()
    return flagged, max_delta.reindex(counters).fillna(0.0)


def unstable_rules(rules: pd.DataFrame, references: list[Encoded], *, delta_threshold: float,
                   min_premise_intervals: int) -> np.ndarray:
    """Rules violated on at least one known-good reference run (boolean mask over ``rules``).

    A rule that a passed run of the target's environment breaks describes the prior
    run's environment, not the system's behaviour: it cannot be evidence of a regression.
    """
    bad = np.zeros(len(rules), dtype=bool)
    for ref in references:
        bad |= evaluate_rules(rules, ref, delta_threshold=delta_threshold,
                              min_premise_intervals=min_premise_intervals).rules["violated"].to_numpy()
    return bad


def severity_of(evidences: list[RuleEvidence], counters: list[str], n_intervals: int) -> tuple[pd.Series, dict]:
    """Share of intervals in which each counter is the consequent of a violated rule, and those intervals."""
    mask = {c: np.zeros(n_intervals, dtype=bool) for c in counters}
    for ev in evidences:
        r = ev.rules
        for j in np.flatnonzero(r["violated"].to_numpy()):
            c = rule_mining.counter_of(r["consequent"].iat[j])
            if c in mask:
                mask[c] |= ev.violations[:, j]
    sev = pd.Series({c: float(m.mean()) if n_intervals else 0.0 for c, m in mask.items()})
    return sev, {c: np.flatnonzero(m).tolist() for c, m in mask.items() if m.any()}


def rank_counters(flagged: list[str], primary: pd.Series, severity: pd.Series) -> list[str]:
    """Flagged counters by the ensemble score (s or votes), then severity (Foo et al. 2015, phase 5)."""
    return sorted(flagged, key=lambda c: (-float(primary.get(c, 0)), -float(severity.get(c, 0)), c))


def fill_unstable(models: list[Model], references: list[str], encode: Callable[[str], Encoded], memo: dict, *,
                  memo_tag: str, delta_threshold: float, min_premise_intervals: int,
                  progress: Callable[[int, Any, Any], None] | None = None) -> None:
    """The mask of :func:`unstable_rules` of every (model, reference run) pair that ``memo`` lacks
    (never a model and its own run), into ``memo`` under ``(memo_tag, model run, reference)``.

    The work is split by reference, on the stage's processes (``parallel``; serially inside a
    worker, where a batch of targets already fills the cores): a piece of work encodes its
    reference once and evaluates every model on it, and only the masks travel back."""
    refs = sorted(references)

    def missing(r: str) -> list[Model]:
        return [m for m in models if m.run_id != r and (memo_tag, m.run_id, r) not in memo]

    def masks_of(r: str) -> list[tuple[str, np.ndarray]]:
        ref = encode(r)
        return [(m.run_id, unstable_rules(m.rules, [ref], delta_threshold=delta_threshold,
                                          min_premise_intervals=min_premise_intervals)) for m in missing(r)]
    todo = [r for r in refs if missing(r)]
    for r, masks in zip(todo, parallel.map_ordered(masks_of, todo, progress=progress)):
        for run_id, mask in masks:
            memo[(memo_tag, run_id, r)] = mask


def prune_models(models: list[Model], references: list[str], encode: Callable[[str], Encoded], *,
                 delta_threshold: float, min_premise_intervals: int, memo: dict | None = None,
                 memo_tag: str = "") -> tuple[list[Model], dict[str, int]]:
    """Drop from each model the rules that known-good reference runs break (never its own run).

    A counter whose every rule was dropped leaves the model's ``judges``: the model
    describes that counter only for its own environment and abstains on it.  ``memo``
    caches the mask of each (model, reference run) pair across targets — the reference sets
    of the targets (and of the stacking calibration, one per held-out run) overlap, so each
    pair is evaluated once; ``memo_tag`` must identify the bin edges.  ``encode`` gives a
    reference run encoded; the pairs ``memo`` lacks are evaluated by :func:`fill_unstable` (on
    every core for the one new target of a second night, whose pruning is most of its time).
    An OR of masks does not depend on their order.
    """
    memo = {} if memo is None else memo
    refs = sorted(references)
    fill_unstable(models, refs, encode, memo, memo_tag=memo_tag, delta_threshold=delta_threshold,
                  min_premise_intervals=min_premise_intervals)
    pruned, dropped = [], {}
    for m in models:
        bad = np.zeros(len(m.rules), dtype=bool)
        for r in refs:
            if r != m.run_id:
                bad |= memo[(memo_tag, m.run_id, r)]
        before = {rule_mining.counter_of(c) for c in m.rules["consequent"]}
        kept = m.rules[~bad].reset_index(drop=True)
        gone = before - {rule_mining.counter_of(c) for c in kept["consequent"]}
        judges = (m.judges if m.judges is not None else frozenset(before)) - gone
        pruned.append(Model(m.run_id, kept, m.environment, judges))
        dropped[m.run_id] = int(bad.sum())
    return pruned, dropped


class ViolatedRule(TypedDict):
    """A rule of a baseline run's model the target broke: its premise and consequent items, its
    confidence in that run's history and in the target, the drop, and the target's intervals that
    met the premise."""

    model: str
    premise: list[str]
    consequent: str
    confidence_history: float
    confidence_new: float
    delta: float
    premise_intervals: int


class RulesResult(TypedDict, total=False):
    """What the three combiners found on one target (:func:`detect_run`, then :func:`analyse`): the
    flagged counters of the pooled model (``single``), ``bagging`` and ``stacking``, most severe
    first; the models' ``weights`` (environment similarity), each counter's bagging ``votes``, the
    number of models that ``judged`` it, its stacking share ``s``, ``severity``, violation
    ``intervals`` and score; the rules broken; then the pruned rules per model, the counters left
    to the environment, every counter's relative change (``effects``) and the flagged counters set
    aside as too small (``small_effects`` in %, ``small_changes`` as a magnitude)."""

    n_intervals: int
    weights: dict[str, float]
    votes: pd.Series
    judged: pd.Series
    s: pd.Series
    severity: pd.Series
    intervals: dict[str, list[int]]
    single: list[str]
    bagging: list[str]
    stacking: list[str]
    counter_scores: pd.Series
    violated_rules: dict[str, list[ViolatedRule]]
    pruned_rules: dict[str, int]
    environment_dependent: dict[str, float]
    effects: dict[str, float]
    small_effects: dict[str, float]
    small_changes: dict[str, float]


class StackingEvidence(TypedDict):
    """What stacking's calibration adds to its verdict: the run's stacking score, its p-value
    against the normal runs' (None without a null) and how many normal runs that null holds."""

    score: float
    p_value: float | None
    normal_runs: int


def detect_run(binned: pd.DataFrame, target_env: Environment, models: list[Model],
               single: pd.DataFrame | None, *, delta_threshold: float, min_premise_intervals: int,
               stacking_threshold: float, max_rules_reported: int = 5) -> RulesResult:
    """Run the three combiners on one target; everything the verdict file and the report need.

    ``models`` are the prior runs' models, already pruned when pruning is on; ``single``
    is the pooled model (or None).
    """
    counters = list(binned.columns)
    n = len(binned)
    ids = [m.run_id for m in models]
    enc = Encoded.of(binned)
    # every model's range items at once: one growth of the matrix instead of one per model
    enc.add_range_items([x for r in [*(m.rules for m in models), *([single] if single is not None else [])]
                         for x in rule_items(r)])
    evidences, flag_rows, delta_rows = [], [], []
    for m in models:
        ev = evaluate_rules(m.rules, enc, delta_threshold=delta_threshold,
                            min_premise_intervals=min_premise_intervals)
        f, d = model_flags(ev, counters, m.judges)
        evidences.append(ev)
        flag_rows.append(f)
        delta_rows.append(d)
    flags = pd.DataFrame(flag_rows, index=ids, columns=counters, dtype=float)
    deltas = pd.DataFrame(delta_rows, index=ids, columns=counters, dtype=float).where(flags.notna())
    weights = environment_weights([m.environment for m in models], target_env) if models else np.zeros(0)
    votes, bag = bagging(flags)
    s, stack = stacking(flags, weights, threshold=stacking_threshold)
    # counter score: the confidence change of the counter's rules, averaged with the stacking weights
    score, _ = stacking(deltas, weights, threshold=1.0)
    severity, intervals = severity_of(evidences, counters, n)
    result: RulesResult = {"n_intervals": n, "weights": dict(zip(ids, map(float, weights))),
                              "votes": votes, "judged": flags.notna().sum(axis=0), "s": s,
                              "severity": severity, "intervals": intervals}
    result["single"] = []
    if single is not None:
        ev = evaluate_rules(single, enc, delta_threshold=delta_threshold, min_premise_intervals=min_premise_intervals)
        f1, _ = model_flags(ev, counters)
        sev1, _ = severity_of([ev], counters, n)
        result["single"] = rank_counters(list(f1[f1 == 1].index), sev1, sev1)
    result["bagging"] = rank_counters(bag, votes, severity)
    result["stacking"] = rank_counters(stack, s, severity)
    result["counter_scores"] = score.clip(0, 1)
    rules_out: dict[str, list[ViolatedRule]] = {}
    violated = [ev.rules[ev.rules["violated"]].assign(model=run_id) for run_id, ev in zip(ids, evidences)]
    allv = pd.concat(violated, ignore_index=True) if violated else pd.DataFrame()
    if len(allv):
        allv = allv.assign(counter=allv["consequent"].map(rule_mining.counter_of))
        for c in result["stacking"] + [x for x in result["bagging"] if x not in result["stacking"]]:
            top = allv[allv["counter"] == c].sort_values("delta", ascending=False).head(max_rules_reported)
            rules_out[c] = [{"model": m, "premise": list(p), "consequent": q, "confidence_history": round(float(ch), 4),
                             "confidence_new": round(float(cn), 4), "delta": round(float(d), 4),
                             "premise_intervals": int(npz)}
                            for m, p, q, ch, cn, d, npz in zip(top["model"], top["premise"], top["consequent"],
                                                               top["confidence"], top["conf_new"], top["delta"],
                                                               top["n_premise"])]
    result["violated_rules"] = rules_out
    return result


def change_magnitude(values: np.ndarray, intervals: list[int] | None, low: float, level: float,
                     high: float) -> float:
    """How far a counter is from its usual band where its rules were violated.

    The median over the violation intervals of the distance of the value from the
    reference runs' band ``[low, high]`` (their 5th and 95th percentiles; 0 inside it),
    relative to ``max(|level|, high - low)`` (``level`` = their median; the spread keeps a
    counter that idles near 0 from turning a tiny absolute move into a huge relative
    one).  A counter that moved as a whole scores about its shift less half the band; a
    burst scores its height; ordinary noise that happened to break a rule scores ~0.
    NaN when there is nothing to measure.
    """
    x = np.asarray(values, dtype=float)
    if intervals:
        x = x[np.asarray(intervals, dtype=int)]
    x = x[~np.isnan(x)]
    scale = max(abs(level), high - low)
    if x.size == 0 or not np.isfinite(scale) or scale <= 0:
        return float("nan")
    return float(np.median(np.maximum(low - x, 0) + np.maximum(x - high, 0)) / scale)


def practical_filter(flagged: dict[str, list[str]], magnitude: dict[str, float], min_rel_change: float
                     ) -> tuple[dict[str, list[str]], dict[str, float]]:
    """The combiners' flagged counters without those that moved less than ``min_rel_change``.

    A rule model sees a counter that moved from one bin to the next as regressed however
    small the move; an analyst does not call a 2 % move a regression.  ``flagged`` maps a
    combiner to its counters; returns the same without the small changes, and those
    counters with their magnitude (a NaN magnitude — nothing to measure — keeps the flag).
    """
    small = {c: m for c, m in magnitude.items() if np.isfinite(m) and m < min_rel_change}
    return {k: [c for c in v if c not in small] for k, v in flagged.items()}, small


def verdict_document(run_id: str, meta: RunRecord, result: RulesResult, *, interval_s: float,
                     not_analysed: dict[str, list[str]]) -> RuleDetection:
    """The per-run verdict file (contract §2), headline from stacking."""
    scores = result["counter_scores"]
    stack = result["stacking"]
    verdict = "fail" if stack else "pass"
    return {
        "schema_version": 1,
        "run_id": run_id,
        "system": meta["system"],
        "verdict": verdict,
        "score": round(float(scores.max()) if len(scores) else 0.0, 4),
        "flagged_counters": stack,
        "counter_scores": {c: round(float(v), 4) for c, v in scores.sort_values(ascending=False).items()},
        "cause": {"label": None, "probability": None, "known": False},
        "baseline_runs": [{"run_id": r, "weight": round(w, 4)} for r, w in result["weights"].items()],
        "methods": {
            "association_rules_stacking": {"verdict": verdict, "flagged_counters": stack},
            "association_rules_bagging": {"verdict": "fail" if result["bagging"] else "pass",
                                          "flagged_counters": result["bagging"]},
            "association_rules_single": {"verdict": "fail" if result["single"] else "pass",
                                         "flagged_counters": result["single"]},
        },
        "details": {
            "interval_s": interval_s,
            "n_intervals": result["n_intervals"],
            "stacking_score": {c: round(float(result["s"][c]), 4) for c in result["s"].index if result["s"][c] > 0},
            "bagging_votes": {c: int(result["votes"][c]) for c in result["votes"].index if result["votes"][c] > 0},
            # flagged order (stacking's, then bagging's others): a set here made the file's bytes depend on
            # the process's hash seed
            "severity": {c: round(float(result["severity"][c]), 4)
                         for c in dict.fromkeys(stack + result["bagging"])},
            "violated_rules": result["violated_rules"],
            "violation_intervals": {c: v for c, v in result["intervals"].items()
                                    if c in set(stack) | set(result["bagging"])},
            "not_analysed": not_analysed,
            # flagged by the rules but moved less than detect.min_rel_change: counter -> magnitude
            "below_min_rel_change": {c: round(float(m), 4) for c, m in
                                     sorted((result.get("small_changes") or {}).items())},
            # flagged by the rules but changed less than significance.min_effect_pct: counter -> change in %
            "below_min_effect": dict(sorted((result.get("small_effects") or {}).items())),
            # every counter's relative change against the reference runs (the headline's practical test)
            # (null: not measurable, or moved off a level of exactly 0)
            "effects": {c: round(float(v), 4) if np.isfinite(v) else None
                        for c, v in sorted((result.get("effects") or {}).items())},
        },
    }


def split_counters(frame: pd.DataFrame, edges: bins.Edges, model_counters: set[str]) -> dict[str, list[str]]:
    """Counters of the target that cannot be analysed, and counters the history has but the target lacks."""
    present = set(frame.columns[frame.notna().any()])
    return {
        "new_in_target": sorted(present - set(edges) - model_counters),
        "no_variance_in_history": sorted((present & model_counters) - set(edges)),
        "missing_in_target": sorted(set(edges) - present),
    }


def stacking_score(result: RulesResult) -> float:
    """A run's stacking evidence: ``Σ_c s(c)``, the expected number of counters the weighted
    models flag, over the counters the practical-change filter kept (a score that
    :func:`pvalues.calibrated_pvalue` can judge against the history's normal runs; the
    largest ``s`` alone saturates at 1)."""
    s = result["s"].drop([*(result.get("small_changes") or {}), *(result.get("small_effects") or {})],
                         errors="ignore")
    return float(s.clip(lower=0).sum())


def stacking_pvalue(score: float, null: list[float], n_models: int) -> float:
    """The stacking score's p-value against the normal runs' scores (resolution: one model's share)."""
    return pvalues.calibrated_pvalue(score, null, resolution=1.0 / max(1, n_models))


def normal_pvalues(normal_scores: dict[str, float]) -> dict[str, float]:
    """Each normal run's stacking p-value against the others' scores (each judged by the models of
    all the others but itself: one model fewer than the runs), the record's false alarms
    (``record``)."""
    models = max(1, len(normal_scores) - 1)
    return pvalues.loo_pvalues(normal_scores, lambda s, null: stacking_pvalue(s, null, models))


def stacking_evidence(result: RulesResult, null: list[float] | None) -> StackingEvidence:
    """What the verdict file's ``association_rules_stacking`` gains from the calibration."""
    score = stacking_score(result)
    p = stacking_pvalue(score, null, len(result["weights"])) if null else float("nan")
    return {"score": round(score, 4), "p_value": round(p, 6) if np.isfinite(p) else None,
            "normal_runs": len(null or [])}


# --------------------------------------------------------------------------- I/O shell


class DetectCache:
    """What detect derives from the history, shared by the targets of one process.

    ``frames`` is the shared load-scaled frame cache (``store.FrameStore``); the others
    hold what is computed from those frames: the reference runs encoded under a set of
    bin edges, the prior runs' rule models, the rule masks of pruning (:func:`prune_models`) and the change bands.
    """

    def __init__(self, frames: store.FrameStore):
        self.frames = frames
        self.encoded: dict[tuple[str, str], Encoded] = {}
        self.unstable: dict = {}
        self.bands: dict[tuple, pd.DataFrame] = {}
        self.models: dict[tuple, pd.DataFrame] = {}

    def model(self, run_id: str, edges: bins.Edges, mine_params: rule_mining.MiningParams, directory,
              reference: float | None, tag: str) -> pd.DataFrame:
        """The rule model of a prior run under the edges ``tag`` names, read from its file once
        (the stacking calibration reads every model once per held-out run)."""
        key = (tag, run_id, mine_params, str(directory))
        if key not in self.models:
            self.models[key] = rule_mining.mine_for_run(run_id, edges, mine_params, directory, reference)
        return self.models[key]

    def encoded_run(self, run_id: str, edges: bins.Edges, reference: float | None, tag: str) -> Encoded:
        """A run binned under ``edges`` (``tag`` names the edges and reference load)."""
        if (tag, run_id) not in self.encoded:
            self.encoded[(tag, run_id)] = Encoded.of(bins.apply_edges(self.frames.at(run_id, reference), edges))
        return self.encoded[(tag, run_id)]

    def levels(self, runs: list[str], reference: float | None) -> pd.DataFrame:
        """One row per run: its median of every counter (load-scaled)."""
        return self.frames.levels(runs, reference)

    def peaks(self, runs: list[str], reference: float | None) -> pd.DataFrame:
        """One row per run: its 95th percentile of every counter's ``|x|`` (load-scaled)."""
        return self.frames.peaks(runs, reference)

    def band(self, refs: list[str], reference: float | None, pct: tuple[float, float],
             counters: list[str]) -> pd.DataFrame:
        """Rows low / level / high: the ``pct`` percentiles and the median of each of ``counters``
        over the reference runs pooled (only the counters asked: at 2,000 counters and 40 runs
        the whole pool is 80 M values, and only the flagged counters need a band)."""
        key = (reference, tuple(refs), tuple(pct), tuple(counters))
        if key not in self.bands:
            pooled = pd.concat([self.frames.columns_at(r, reference, counters) for r in refs], ignore_index=True)
            q = pooled.quantile([pct[0] / 100.0, 0.5, pct[1] / 100.0])
            self.bands[key] = q.set_axis(["low", "level", "high"], axis=0)
        return self.bands[key]


def single_model(baseline: list[str], edges: bins.Edges, params: rule_mining.MiningParams, single_dir,
                 frames: store.FrameStore, reference: float | None) -> pd.DataFrame:
    """The pooled model of all baseline runs (cached by the baseline's content keys)."""
    import hashlib

    keys = [store.read_info(r)["key"] for r in baseline]
    digest = hashlib.sha256(json.dumps([keys, bins.edges_digest(edges), dict(params.block), reference,
                                        rule_mining.CODE_VERSION],
                                       sort_keys=True).encode()).hexdigest()
    path = single_dir / f"{digest[:16]}.parquet"
    if path.exists():
        return rule_mining.rules_from_frame(pd.read_parquet(path))
    binned = bins.apply_edges(pd.concat([frames.at(r, reference) for r in baseline], ignore_index=True), edges)
    rules = rule_mining.mine_model(binned, edges, params)      # the pooled values freed before the mining
    atomic.write_parquet_atomic(path, rule_mining.rules_to_frame(rules))
    return rules


@dataclass(frozen=True)
class DetectParams:
    """The ``detect`` block, typed: a rule's change (``delta_threshold``) over at least
    ``min_premise_intervals`` of its premise, stacking's ``stacking_threshold``, pruning rules the
    known-good runs break (``prune_unstable_rules``), abstaining on the counters that follow the
    environment for a target in a new one (``new_environment_abstain``), and the practical-change
    filter (``min_rel_change`` outside the reference runs' ``change_band_pct`` percentiles; none when
    0 or None); ``block`` is the block as validated (the input keys hash it)."""

    delta_threshold: float
    min_premise_intervals: int
    stacking_threshold: float
    prune_unstable_rules: bool
    new_environment_abstain: bool
    min_rel_change: float | None
    change_band_pct: tuple[float, float]
    block: Mapping[str, Any] = field(compare=False, repr=False)

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "DetectParams":
        change = block["min_rel_change"]
        return cls(delta_threshold=float(block["delta_threshold"]), min_premise_intervals=int(block["min_premise_intervals"]),
                   stacking_threshold=float(block["stacking_threshold"]),
                   prune_unstable_rules=bool(block["prune_unstable_rules"]),
                   new_environment_abstain=bool(block["new_environment_abstain"]),
                   min_rel_change=None if change is None else float(change),
                   change_band_pct=tuple(block["change_band_pct"]), block=dict(block))

    @classmethod
    def load(cls) -> "DetectParams":
        """The project's ``detect`` block (``config.load_params``), typed: the stages' one loading site."""
        return cls.of(config.load_params("detect"))

    def rule_kw(self) -> dict[str, float]:
        """How a rule is judged broken (:func:`prune_models`, :func:`detect_run`)."""
        return {"delta_threshold": self.delta_threshold, "min_premise_intervals": self.min_premise_intervals}


@dataclass(frozen=True)
class DetectContext:
    """What the ensembles need of a system besides the target and its baseline: the valid runs'
    index, the bin edges and the reference load they were learned at, the ``detect`` and
    ``mine_rules`` params, where the per-run and pooled models are cached, the labs' params
    (``labs.lab_params``) and the cache shared by the targets of one process."""
    index: ValidIndex
    edges: bins.Edges
    reference: float | None
    params: DetectParams
    mine_params: rule_mining.MiningParams
    models_dir: Path
    single_dir: Path
    cache: DetectCache
    lab_kw: labs.LabParams
    significance: effects.Significance

    @cached_property
    def tag(self) -> str:
        """Names the edges and reference load the cache's encodings and models were made under
        (computed once per context: a digest of every counter's edges, asked for per model and reference)."""
        return f"{bins.edges_digest(self.edges)}@{self.reference}"

    def environment(self, run_id: str) -> Environment:
        return self.index[run_id].get("environment") or {}

    def encoded(self, run_id: str) -> Encoded:
        """A run binned under the context's edges, at its reference load (kept in the cache)."""
        return self.cache.encoded_run(run_id, self.edges, self.reference, self.tag)

    @classmethod
    def of_system(cls, system: str, index: ValidIndex, spec: EdgesFile, cache: DetectCache,
                  params: DetectParams, mine_params: rule_mining.MiningParams, hist: history.HistoryParams,
                  significance: effects.Significance) -> "DetectContext":
        """A night's context for ``system``: its bin edges ``spec`` (``store.read_edges``), its
        model folders, the labs' params of ``hist`` (the ``history`` block) and the
        ``significance`` block."""
        return cls(index=index, edges=spec["counters"], reference=spec["reference_load"], params=params,
                   mine_params=mine_params, models_dir=config.models_dir(system),
                   single_dir=config.single_models_dir(system), cache=cache, lab_kw=labs.lab_params(hist),
                   significance=significance)


def prior_models(baseline: list[str], ctx: DetectContext) -> tuple[list[Model], set[str]]:
    """The model of each baseline run, judging the counters its run recorded (and the edges
    know); and every counter the baseline runs recorded."""
    models, recorded_any = [], set()
    for b in baseline:
        recorded = set(store.read_info(b)["counters"])
        recorded_any |= recorded
        models.append(Model(b, ctx.cache.model(b, ctx.edges, ctx.mine_params, ctx.models_dir, ctx.reference, ctx.tag),
                            ctx.environment(b), frozenset(recorded & set(ctx.edges))))
    return models, recorded_any


def without_counters(models: list[Model], counters) -> list[Model]:
    """The models abstaining on ``counters``."""
    return [Model(m.run_id, m.rules, m.environment, m.judges - frozenset(counters)) for m in models]


def environment_abstention(baseline: list[str], target_env: Environment, lab: labs.LabShift,
                           ctx: DetectContext, environment_from: list[str] | None) -> dict[str, float]:
    """The counters every model abstains on for a target in an environment no baseline run
    shares and whose lab's level is unknown: those whose level differs between the labs of
    ``environment_from`` (default: the baseline), ``labs.environment_dependent``."""
    envs = [ctx.environment(b) for b in baseline]
    if not (ctx.params.new_environment_abstain and baseline and target_env not in envs
            and lab["status"] != "adjusted"):
        return {}
    teachers = list(environment_from or baseline)
    return labs.environment_dependent(ctx.cache.levels(teachers, ctx.reference),
                                      [labs.lab_key(ctx.index[b].get("environment")) for b in teachers],
                                      alpha=ctx.lab_kw.environment_alpha,
                                      min_rel_change=ctx.params.min_rel_change or 0.0)


def run_effects(frame: pd.DataFrame, refs: list[str], ctx: DetectContext,
                counters: list[str] | None = None) -> dict[str, float]:
    """Each counter's relative change against the reference runs (``effects.effect_sizes``); of
    ``counters`` only, when given (each counter's change is its own: the others' are not needed)."""
    if not refs:
        return {}
    sig = ctx.significance
    if counters is not None:
        frame = frame[[c for c in counters if c in frame.columns]]
    return effects.effect_sizes(frame, ctx.cache.levels(refs, ctx.reference).median(),
                                ctx.cache.peaks(refs, ctx.reference).median(),
                                window_share=sig.window_share, min_window=sig.min_window,
                                floor_share=sig.floor_share)


def flagged_union(result: RulesResult) -> list[str]:
    """The counters any of the three combiners flagged, each once, in the combiners' order."""
    return list(dict.fromkeys(c for k in ("single", "bagging", "stacking") for c in result[k]))


def practical_changes(result: RulesResult, frame: pd.DataFrame, refs: list[str],
                      ctx: DetectContext) -> None:
    """The practical-change filters on ``result`` (in place): a flagged counter stays flagged when
    its change matters (``effects``: at least ``significance.min_effect_pct`` of its level; the
    others in ``small_effects``, with their change in %) and it sits far enough outside the band of
    the reference runs (:func:`change_magnitude` at least ``min_rel_change``; the others in
    ``small_changes``)."""
    flagged = {k: result[k] for k in ("single", "bagging", "stacking")}
    _, result["small_effects"] = effects.split_by_effect(flagged_union(result), result["effects"],
                                                         ctx.significance.min_effect_pct)
    result.update({k: [c for c in v if c not in result["small_effects"]] for k, v in flagged.items()})
    result["small_changes"] = {}
    if not (ctx.params.min_rel_change and refs):
        return
    flagged = set(flagged_union(result))
    q = ctx.cache.band(refs, ctx.reference, ctx.params.change_band_pct, sorted(flagged & set(frame.columns)))
    magnitude = {c: change_magnitude(frame[c].to_numpy(dtype=float), result["intervals"].get(c),
                                     float(q.at["low", c]), float(q.at["level", c]), float(q.at["high", c]))
                 for c in flagged if c in frame.columns and c in q.columns}
    kept, result["small_changes"] = practical_filter({k: result[k] for k in ("single", "bagging", "stacking")},
                                                     magnitude, ctx.params.min_rel_change)
    result.update(kept)


def analyse(run_id: str, baseline: list[str], ctx: DetectContext, *, lab_runs: dict[str, str],
            with_single: bool = True, environment_from: list[str] | None = None) -> tuple[RulesResult, RuleDetection]:
    """Detect on one run against a baseline; return (detect_run result, verdict document).

    Steps: the prior runs' models; when no run of the target's nearest lab shares its lab, the
    target moved by its lab's level (:func:`labs.lab_shift`, from ``lab_runs``: verified run ->
    verdict), or else abstention on environment-dependent counters
    (:func:`environment_abstention`); pruning of rules that the target environment's passed
    runs break; the three combiners; the practical-change filter.  ``with_single=False`` computes only
    what stacking's score needs, as the calibration does: no pooled model, and the effects of the
    flagged counters alone (the practical-change filter reads no other).  ``environment_from``
    (default: the baseline) are the runs whose labs teach which counters follow the
    environment: the cross-lab null (:func:`labs.cross_lab_null`) judges a normal run by the
    other labs only, on the counters a new-lab target is judged on (learned from the whole
    history, its own lab included)."""
    params, cache = ctx.params, ctx.cache
    target_env = ctx.environment(run_id)
    refs = history.most_similar({b: ctx.environment(b) for b in baseline}, target_env)  # the nearest lab's runs
    lab = labs.lab_shift(run_id, refs, {r: ctx.environment(r) for r in [run_id, *refs, *lab_runs]},
                         lab_runs, lambda runs: cache.levels(runs, ctx.reference), **ctx.lab_kw.shift_kw())
    frame = labs.shifted(cache.frames.at(run_id, ctx.reference), lab["shift"])
    models, model_counters = prior_models(baseline, ctx)
    env_dependent = environment_abstention(baseline, target_env, lab, ctx, environment_from)
    models = without_counters(models, [*env_dependent, *lab["unstable"]])
    dropped: dict[str, int] = {}
    if params.prune_unstable_rules and models:
        models, dropped = prune_models(models, refs, ctx.encoded, **params.rule_kw(), memo=cache.unstable,
                                       memo_tag=ctx.tag)
    single = (single_model(baseline, ctx.edges, ctx.mine_params, ctx.single_dir, cache.frames, ctx.reference)
              if baseline and with_single else None)
    result = detect_run(bins.apply_edges(frame, ctx.edges), target_env, models, single,
                        **params.rule_kw(), stacking_threshold=params.stacking_threshold)
    result["pruned_rules"] = dropped
    result["single"] = [c for c in result["single"] if c not in env_dependent and c not in set(lab["unstable"])]
    result["environment_dependent"] = env_dependent
    result["effects"] = run_effects(frame, refs, ctx, None if with_single else flagged_union(result))
    practical_changes(result, frame, refs, ctx)
    not_analysed = split_counters(frame, ctx.edges, model_counters)
    if env_dependent:
        not_analysed["environment_dependent_in_new_environment"] = sorted(env_dependent)
    if lab["unstable"]:
        not_analysed["wander_between_runs_of_this_lab"] = list(lab["unstable"])
    doc = verdict_document(run_id, ctx.index[run_id], result, interval_s=store.read_info(run_id)["interval_s"],
                           not_analysed=not_analysed)
    doc["details"]["lab"] = labs.summary(lab)
    return result, doc


def passed_runs_key(system: str, ctx: DetectContext, passed: list[str]) -> str:
    """The input key of what detect keeps of a system's ``passed`` runs between nights (``memo``),
    the pruning masks between them and their levels: the runs (their frames' keys: their models,
    encodings and levels), the edges and reference load (``ctx.tag``), the params of detection and
    mining, and the code."""
    return memo.input_key("detect", ctx.index, {"passed": passed}, system=system, tag=ctx.tag, detect=ctx.params.block,
                          mine_rules=ctx.mine_params.block)


def save_pruning(system: str, ctx: DetectContext, passed: list[str]) -> int:
    """Write the masks ``ctx.cache.unstable`` holds between ``passed`` (under :func:`passed_runs_key`),
    atomically, for the next night's targets, whose references and models are these runs; how many."""
    inside = set(passed)
    pairs = sorted((m, r) for (tag, m, r) in ctx.cache.unstable if tag == ctx.tag and m in inside and r in inside)
    masks = [np.asarray(ctx.cache.unstable[(ctx.tag, m, r)], dtype=bool) for m, r in pairs]
    atomic.write_keyed_npz(config.pruning_masks_path(system), passed_runs_key(system, ctx, passed),
                           pairs=np.array(pairs, dtype=str).reshape(-1, 2),
                           offsets=np.cumsum([0, *(len(x) for x in masks)]),
                           masks=np.concatenate(masks) if masks else np.zeros(0, dtype=bool))
    return len(pairs)


def load_pruning(system: str, ctx: DetectContext, passed: list[str]) -> int:
    """The masks :func:`save_pruning` wrote, into ``ctx.cache.unstable``, when written under the
    key of these runs, edges, params and code; how many (0: none, or another key's).  Read with
    ``allow_pickle=False``; a torn or foreign file is ignored (the masks are computed again)."""
    kept = atomic.read_keyed_npz(config.pruning_masks_path(system), passed_runs_key(system, ctx, passed),
                                 ("pairs", "offsets", "masks"))
    if kept is None:
        return 0
    pairs, offsets, masks = kept["pairs"], kept["offsets"], kept["masks"]
    for i, (m, r) in enumerate(pairs):
        ctx.cache.unstable.setdefault((ctx.tag, str(m), str(r)), masks[offsets[i]:offsets[i + 1]].copy())
    return len(pairs)


def save_summaries(system: str, ctx: DetectContext, passed: list[str]) -> int:
    """Write the medians and peaks the frame store holds of ``passed`` (``FrameStore.save_summaries``,
    under :func:`passed_runs_key`), for the next night's targets, whose reference runs these are:
    a new target's effects would otherwise read every reference run again; how many series."""
    return ctx.cache.frames.save_summaries(config.run_summaries_path(system), passed,
                                           passed_runs_key(system, ctx, passed))


def load_summaries(system: str, ctx: DetectContext, passed: list[str]) -> int:
    """The series :func:`save_summaries` wrote, into the frame store, when written under the key of
    these runs, edges, params and code; how many (0: none, or another key's)."""
    return ctx.cache.frames.load_summaries(config.run_summaries_path(system), passed_runs_key(system, ctx, passed))


def load_kept(system: str, ctx: DetectContext, passed: list[str]) -> tuple[int, int]:
    """What a night before kept of ``passed`` for this night's targets: the pruning masks
    (:func:`load_pruning`) and the runs' levels (:func:`load_summaries`); how many of each."""
    return load_pruning(system, ctx, passed), load_summaries(system, ctx, passed)


def calibrate_system(system: str, ctx: DetectContext, hist: history.HistoryParams) -> Calibration:
    """The stacking scores of the history's normal runs, each against the models of the others
    (the null of :func:`stacking_pvalue`); written to ``config.stacking_calibration_path``.
    With passed runs in several labs, also ``cross_lab_scores``: each normal run judged by the
    other labs' models only (:func:`labs.cross_lab_null`), the null of a target whose baseline
    does not share its lab (:func:`labs.matched_null`).  ``fault_pvalues``: each verified fault run
    whose baseline shares its lab, judged as a target is, and its p-value against that null (what
    ``headline.fault_weights`` learns each detector's share of the rate from); ``normal_pvalues``:
    each normal run's p-value against the others' scores (its record's false alarms, ``record``).

    The bin edges are the system's (learned with every passed run, the judged one included:
    a normal run looks slightly more normal than a new one would, so the null is a little
    low and the p-values a little strict, never lenient)."""
    index, params, mine_params = ctx.index, ctx.params, ctx.mine_params
    passed = hist.passed(index, system)
    verdicts = hist.verdicts(index, system)
    path = config.stacking_calibration_path(system)
    key = memo.input_key("detect", index, {"passed": passed, "verified": list(verdicts)}, system=system,
                         edges=memo.file_digest(config.edges_path(system)), detect=params.block, mine_rules=mine_params.block,
                         history=hist.block, significance=dataclasses.asdict(ctx.significance))
    kept_masks, kept_levels = load_kept(system, ctx, passed)     # kept by the night before, for this night's targets
    done = memo.reuse(path, key)
    if done is not None:        # the same normal runs, bins, params and code: the same scores
        log.info("detect calibration %s: %d normal runs unchanged, reused (%d pruning masks, %d run levels)",
                 system, len(passed), kept_masks, kept_levels)
        return done
    lab_of = {r: labs.lab_key(index[r].get("environment")) for r in {*passed, *verdicts}}
    faults = history.fault_runs(verdicts)
    progress = Progress(log, f"detect calibration {system}",
                        len(passed) + 2 * len(labs.judged_across(passed, lab_of)) + len(faults), what="analyses")

    def judge(run_id: str, baseline: list[str], lab_runs: dict[str, str], across: bool = True) -> tuple[str, float]:
        result, doc = analyse(run_id, baseline, ctx, lab_runs=lab_runs, with_single=False,
                              environment_from=[r for r in passed if r != run_id] if across else None)
        return doc["details"]["lab"]["status"], round(stacking_score(result), 6)

    for r in passed:            # loaded here once, before the processes fork: they share them, not load them again
        ctx.cache.model(r, ctx.edges, ctx.mine_params, ctx.models_dir, ctx.reference, ctx.tag)
        ctx.encoded(r)
    ctx.cache.levels(passed, ctx.reference)             # every run is some analysis' reference: its levels too
    ctx.cache.peaks(passed, ctx.reference)
    save_summaries(system, ctx, passed)
    # every pruning mask between the passed runs, each once, before the analyses fork (each process
    # would otherwise evaluate the pairs its analyses meet, the same pair in several processes); kept
    # for the next night's targets, whose models and references are these runs
    if params.prune_unstable_rules:
        masks = Progress(log, f"detect pruning {system}", len(passed), what="reference runs")
        fill_unstable(prior_models(passed, ctx)[0], passed, ctx.encoded, ctx.cache.unstable, memo_tag=ctx.tag,
                      **params.rule_kw(),
                      progress=masks.each())
        save_pruning(system, ctx, passed)

    def mapper(fn, jobs: list) -> list:       # every analysis on the stage's processes, counted here
        return parallel.map_ordered(fn, jobs, progress=progress.each())
    same = mapper(lambda r: judge(r, [b for b in passed if b != r], verdicts, across=False)[1], passed)
    scores = dict(zip(passed, same))
    cross = labs.cross_lab_null(passed, lab_of, verdicts, judge, mapper=mapper)

    def judge_fault(run_id: str) -> float | None:
        """A verified fault run judged as a target of its lab is: its stacking p-value (None outside its lab)."""
        baseline = hist.baseline(run_id, index)
        if not baseline:
            return None
        result, doc = analyse(run_id, baseline, ctx, lab_runs=verdicts, with_single=False)
        if doc["details"]["lab"]["status"] != "same_lab":
            return None
        return stacking_evidence(result, list(scores.values()))["p_value"]
    fault_p = dict(zip(faults, mapper(judge_fault, faults)))
    return memo.write(path, {"system": system, "runs": passed, "normal_scores": scores, "cross_lab_scores": cross,
                             "fault_pvalues": {r: p for r, p in fault_p.items() if p is not None},
                             "normal_pvalues": normal_pvalues(scores)}, key)
