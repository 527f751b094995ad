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

import math
from dataclasses import dataclass
from typing import Any, Callable, TypedDict

import numpy as np
import pandas as pd

from pipelines import parallel
from pipelines.detectors.rules import mining as rule_mining
from pipelines.stats import effects
from pipelines.storage import memo
from pipelines.storage.run_records import Environment



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
