"""headline: one decision per run from the detectors — verdict, score, flagged counters, cause.

The verdict file of the data contract §2 combines the association-rule ensembles
(``detect``, Foo et al. 2015, seed 003), the control charts (``control_charts``, Nguyen
2017 ch. 3, 6-7, seed 004), the clustered regression models (``clusters``, Shang et al.
2015, seed 000) and the probable cause (``predict_causes``, Nguyen 2017 ch. 8).
``report`` writes it for the night's targets and ``evaluate`` scores the same decision in
leave-one-out, so both use this module.  Pure: dicts in, dicts out.

* **verdict** (``report.verdict_rule``): ``calibrated`` turns each detector's run
  score into a p-value against the same score of the history's normal runs, each judged
  against the others (stacking: ``rule_verdict.stacking_pvalue``; control charts: their combined
  run and strongest-window p-value; cluster models: their largest excess error), combines
  them (``report.combination``: ``simes``, the default, or ``bonferroni``,
  ``pvalues.combined_pvalue``) and fails the run when the combined p-value is at most
  ``report.false_alarm_rate``, the one parameter: the share of normal runs allowed to fail.
  Simes' ``min_i m·p_(i)/i`` is Bonferroni's ``m·min p`` when one detector sees the fault, and
  less strict when several each see part of it (measured on the labelled sets, docs/results/index.md); it
  holds its level under the positive dependence of detectors that judge the same run
  against the same normal runs.
  No detector then vetoes another, and one odd normal run cannot silence every fault (the
  p-values fit a log-t tail with a hurdle for the normal runs that score 0, and are never
  below the share of normal runs that scored as much: ``pvalues``).  With no calibration at all (fewer than two
  normal runs) it falls back to ``all``.  ``all`` fails a run when every detector that could
  judge it fails it (the weakest decides); ``any``, ``stacking`` and ``control_charts`` are
  the other alternatives; each method's own verdict stays in ``methods``.
* **which detectors decide** (``report.detector_trust: record``, the default): the detectors'
  record on the history's own verified runs (their leave-one-out p-values on its normal runs and
  faults, read in the run's lab) leaves out those that fail more normal runs than the rate
  explains and lets the best of the trusted ones, alone or together, decide
  (:mod:`pipelines.verdict.record`, :func:`trusted`); ``none`` combines every named detector
  as below.
* **the cause classifier as a detector** (``cause_classifier``): a run's fault score
  ``1 − P(none)`` (``causes.fault_score``) against the leave-one-out fault scores of the
  history's normal runs, by the same ``pvalues.calibrated_pvalue``.  The unsupervised detectors
  miss faults the history has already labelled (HPC: the classifier separates 31 of 31 faulty
  targets from 24 normal ones, the three others together 12 of 31).  It **abstains** unless the
  run's baseline shares its lab (``baseline_status`` ``same_lab``): its ``none`` class was
  learned from the history's labs, and a new lab's normal run differs from them in every
  counter, which the classifier would read as a fault (Nezha: the normal runs of a day absent
  from the normal history were 18 of 24 called faults).
* **flagged counters** of a failed run (``report.flag_rule``): stacking's (``rules``: its
  precision is the higher, docs/results/rules.md) or the union with the control charts' (``union``).
* **score**: the mean of the methods' scores (stacking: the largest counter score; control
  charts: twice the top-50 % average violation ratio, both in [0, 1]); a counter's score is
  the mean of its stacked confidence change and its control-chart evidence (the strongest window against the counter's flag limit,
  ``charts.judge``).
* **the run against itself** (``within_run``, computed by ``control_charts``): a window of the run
  against the rest of it, calibrated on the normal runs' same contrasts; it needs no lab.  When
  the run's baseline is not of its lab and a detector comparing runs has only the same-lab null
  (the history's normal runs share one lab: :func:`uncalibrated`), that detector's p-value is set
  aside, and when none is left the run against itself decides alone (:func:`combined_detectors`);
  with nothing left at all the verdict is ``no_baseline``.  It joins every run's combination when
  ``report.headline_detectors`` names it.
* **baseline_status**: ``same_lab``, ``adjusted`` (no baseline run shares the run's lab; its
  counters were moved by the lab's level, ``labs``) or ``insufficient`` (nothing in the
  history teaches the run's lab: the verdict rests on another lab's runs and the report
  says "insufficient baseline").
* **cause**: a failed run gets its most probable fault cause, ``known`` only when the
  classifier's own top class is that cause with a probability of at least its ``tau``.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from pipelines import params_schema
from pipelines.objectives.gates import Evaluation
from pipelines.protocol import DetectorResult, RunJudged
from pipelines.stats import effects, pvalues
from pipelines.storage.stage_files import Cause, VerdictFile, WeightedRun
from pipelines.storage.cause_files import CausePrediction
from pipelines.verdict import cause_signatures, record

VERDICT_RULES = ("calibrated", "all", "any")     # or a detector's name: its own verdict decides
DETECTOR_WEIGHTS = ("equal", "faults")
DETECTOR_TRUST = ("record", "none")
FALLBACK_FLAGS = 5        # a failed run no counter-level method flagged shows its top counters, at most this many


def headline_verdict(verdicts: dict[str, str | None], rule: str) -> str:
    """The run's verdict from the methods' verdicts (None = the method could not judge)."""
    judged = {k: v for k, v in verdicts.items() if v in ("pass", "fail")}
    if not judged:
        return "pass"
    if rule in judged:
        return judged[rule]
    if rule == "any":
        return "fail" if "fail" in judged.values() else "pass"
    if rule == "all":
        return "fail" if all(v == "fail" for v in judged.values()) else "pass"
    raise ValueError(f"report.verdict_rule must be calibrated, all, any or the name of a detector that judged "
                     f"the run, not {rule!r}")


def calibrated_verdict(verdicts: dict[str, str | None], p_values: dict[str, float | None],
                       false_alarm_rate: float, combination: str = "simes",
                       weights: dict[str, float] | None = None) -> tuple[str, float | None]:
    """``calibrated``: fail when the detectors' p-values combined by ``combination``
    (``pvalues.combined_pvalue``: Simes or Bonferroni, each detector's share of the rate by
    ``weights`` when given, else equal) are at most ``false_alarm_rate``; (verdict, combined p).
    ``all`` of ``verdicts`` when no p-value exists."""
    finite = {k: float(p) for k, p in p_values.items() if p is not None and np.isfinite(p)}
    if not finite:
        return headline_verdict(verdicts, "all"), None
    p = pvalues.combined_pvalue(list(finite.values()), combination,
                                [weights[k] for k in finite] if weights else None)
    return ("fail" if p <= false_alarm_rate else "pass"), p


def combine_scores(*scores: dict[str, float]) -> dict[str, float]:
    """Per counter, the mean of the scores of the methods that scored it, most suspicious first."""
    counters = sorted({c for s in scores for c in s})
    out = {c: float(np.mean([s[c] for s in scores if c in s])) for c in counters}
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def cause_of(verdict: str, predicted: CausePrediction | None) -> Cause:
    """The contract's ``cause`` for the headline verdict.

    A failed run gets the most probable fault cause; it is ``known`` only when the
    classifier's own top class is that cause with a probability of at least its ``tau``.
    A passed run's cause is ``none``; a run with no baseline has none known.
    """
    if verdict == "no_baseline":
        return {"label": None, "probability": None, "known": False}
    if not predicted or predicted.get("label") is None:
        return {"label": None if verdict == "fail" else "none", "probability": None, "known": verdict != "fail"}
    if verdict == "pass":
        return {"label": "none", "probability": predicted.get("none_probability"), "known": True}
    fault = predicted.get("fault") or {}
    known = bool(predicted["known"] and predicted["label"] == fault.get("label"))
    return {"label": fault.get("label"), "probability": fault.get("probability"), "known": known}


class FaultPattern(TypedDict):
    """A fault the cause classifier sees in a passed run: its label, probability, and the training
    runs of that cause."""

    label: str | None
    probability: float | None
    runs_of_cause: int | None


class FaultWeighting(TypedDict):
    """The detectors' shares of the false-alarm rate learned from the history's verified faults
    (:func:`fault_weights`): the faults every detector judged, how many each caught, the shares."""

    faults: int
    caught: dict[str, int]
    weights: dict[str, float]


def fault_pattern(verdict: str, predicted: CausePrediction | None) -> FaultPattern | None:
    """A passed run in which the cause classifier nevertheless sees a fault it knows: its own top
    class is a fault with a probability of at least its ``tau``.  The verdict stays the
    detectors' (the contract's ``cause`` stays ``none``), but the report must not print "none" as
    if nothing were seen: this says which fault pattern, how probable, and from how many runs."""
    if verdict != "pass" or not predicted or predicted.get("label") in (None, "none") or not predicted.get("known"):
        return None
    # a top class other than none is also the most probable fault: ``fault`` describes it
    return {"label": predicted["label"], "probability": predicted.get("probability"),
            "runs_of_cause": (predicted.get("fault") or {}).get("runs_of_cause")}


def top_counters(counter_scores: dict[str, float]) -> list[str]:
    """What a failed run shows when no counter-level method flagged a counter: its top-scored
    counters (``counter_scores`` is most suspicious first), at most ``FALLBACK_FLAGS``, none at 0."""
    return [c for c, v in counter_scores.items() if v > 0][:FALLBACK_FLAGS]


# report's keys in params.yaml -> the rule's fields, with the type each is read as
PARAM_FIELDS: dict[str, tuple[str, Any]] = {
    "verdict_rule": ("verdict_rule", str), "flag_rule": ("flag_rule", str),
    "false_alarm_rate": ("false_alarm_rate", float),
    "headline_detectors": ("detectors", lambda v: None if v is None else tuple(v)),
    "classifier_resolution": ("classifier_resolution", float), "combination": ("combination", str),
    "detector_weights": ("detector_weights", str), "detector_trust": ("trust", str),
    "trust_level": ("trust_level", float), "trust_min_runs": ("trust_min_runs", int),
    "trust_reading": ("trust_reading", str),
    "trust_corroborate": ("trust_corroborate", bool),
    "trust_silent": ("trust_silent", str)}


@functools.lru_cache(maxsize=1)
def _defaults() -> dict[str, Any]:
    return params_schema.defaults()


def _default_of(name: str) -> Any:
    """The defaults file's value of the rule's field ``name``, read as :data:`PARAM_FIELDS` reads
    params.yaml (the practical floor: ``significance.min_effect_pct``)."""
    if name == "min_effect_pct":
        return float(_defaults()["significance"]["min_effect_pct"])
    key, read = next((key, read) for key, (field_name, read) in PARAM_FIELDS.items() if field_name == name)
    return read(_defaults()["report"][key])


def _param(name: str) -> Any:
    """A field of the rule whose default is the defaults file's (the one place it is written)."""
    return field(default_factory=functools.partial(_default_of, name))


@dataclass(frozen=True)
class HeadlineRule:
    """How the detectors' results become one verdict: the ``report`` block of ``params.yaml``,
    checked once; a setting left out is the defaults file's (``pipelines/params_defaults.yaml``:
    ``HeadlineRule()`` is the rule of a project that changed nothing).

    ``verdict_rule``: ``calibrated`` (the detectors' p-values combined by ``combination``, a run
    failing at ``false_alarm_rate``), ``all``, ``any``, or a detector's name (its own verdict decides).
    ``flag_rule`` names the flagged counters of a failed run: ``rules`` (stacking's when it
    failed the run, else the charts') or ``union``.  ``detectors`` names the p-values the
    calibrated decision combines (every one when None); ``classifier_resolution`` is the smallest
    difference of the cause classifier's probabilities that counts.  ``min_effect_pct``: a counter
    counts as regressed only when its change is at least this % of its level (``effects``); a run
    fails only with such a counter.  ``detector_weights``: ``equal`` shares of the rate, or
    ``faults``: shares learned from the history's verified faults (:func:`fault_weights`)."""
    verdict_rule: str = _param("verdict_rule")
    flag_rule: str = _param("flag_rule")
    false_alarm_rate: float = _param("false_alarm_rate")
    detectors: tuple[str, ...] | None = _param("detectors")
    classifier_resolution: float = _param("classifier_resolution")
    combination: str = _param("combination")
    min_effect_pct: float = _param("min_effect_pct")
    detector_weights: str = _param("detector_weights")
    trust: str = _param("trust")
    trust_level: float = _param("trust_level")
    trust_min_runs: int = _param("trust_min_runs")
    trust_reading: str = _param("trust_reading")
    trust_corroborate: bool = _param("trust_corroborate")
    trust_silent: str = _param("trust_silent")

    def __post_init__(self) -> None:
        if self.flag_rule not in ("union", "rules"):
            raise ValueError(f"report.flag_rule must be union or rules, not {self.flag_rule!r}")
        if not isinstance(self.verdict_rule, str) or not self.verdict_rule:
            raise ValueError(f"report.verdict_rule must be one of {', '.join(VERDICT_RULES)} or a detector's name, "
                             f"not {self.verdict_rule!r}")
        if self.detector_weights not in DETECTOR_WEIGHTS:
            raise ValueError(f"report.detector_weights must be one of {', '.join(DETECTOR_WEIGHTS)}, "
                             f"not {self.detector_weights!r}")
        if self.trust not in DETECTOR_TRUST:
            raise ValueError(f"report.detector_trust must be one of {', '.join(DETECTOR_TRUST)}, not {self.trust!r}")
        if self.detectors is not None:
            object.__setattr__(self, "detectors", tuple(self.detectors))

    @classmethod
    def from_params(cls, params: dict[str, Any], significance: effects.Significance | None = None) -> "HeadlineRule":
        """The rule of ``params.yaml: report``, and ``significance.min_effect_pct``; a key left
        out is the defaults file's."""
        kw: dict[str, Any] = {field_name: read(params[key]) for key, (field_name, read) in PARAM_FIELDS.items()
                              if key in params}
        if significance is not None:
            kw["min_effect_pct"] = significance.min_effect_pct
        return cls(**kw)


@dataclass
class Evidence:
    """What the detectors said of one run, gathered for the decision: every detector's result
    (``results``, in the registry's order), the page entries of those that judged it, the verdicts
    that vote, their p-values, run scores and records; ``flags`` and ``reserve`` each detector's
    counters as the verdict shows them (the changes too small to matter set aside:
    :func:`set_aside_small`)."""
    results: dict[str, DetectorResult]
    methods: dict[str, dict[str, Any]]
    verdicts: dict[str, str | None]
    p_values: dict[str, float | None]
    scores: list[float]
    flags: dict[str, list[str]] = field(default_factory=dict)
    reserve: dict[str, list[str]] = field(default_factory=dict)
    history_faults: dict[str, Mapping[str, float | None]] = field(default_factory=dict)
    history_normals: dict[str, Mapping[str, float]] = field(default_factory=dict)

    def judged(self, counters: str | None = None) -> list[str]:
        """The detectors that judged the run (whose counters play the role ``counters``, when given)."""
        return [k for k, r in self.results.items() if r.judged and (counters is None or r.counters == counters)]

    def self_contained(self) -> list[str]:
        """The detectors whose null needs no other run (:class:`~pipelines.protocol.DetectorResult`)."""
        return [k for k, r in self.results.items() if r.self_contained]

    def alone_inside(self, used: Mapping[str, float | None]) -> bool:
        """Whether the detectors that decided (``used``) are all self-contained: the run was judged
        against itself alone, its counters and its score are theirs."""
        inside = self.self_contained()
        return bool(used) and all(k in inside for k in used)

    def counter_scores(self) -> dict[str, float]:
        """The run's counter scores: per counter, the mean of the scoring detectors' scores."""
        return combine_scores(*(self.results[k].counter_scores for k in self.judged("scored")))


def gather_evidence(results: dict[str, DetectorResult]) -> Evidence:
    """What the decision reads of the detectors' results: each one's page entries, the verdicts
    that vote, the p-values of those that judged the run, the run scores, and their records."""
    ev = Evidence(results=results, methods={}, verdicts={}, p_values={}, scores=[])
    for name, result in results.items():
        if result.judged:
            taken = set(result.page) & set(ev.methods)
            if taken:
                raise ValueError(f"detector {name!r}: its page entries {sorted(taken)} are another detector's; "
                                 "name them after the detector")
            ev.methods.update(result.page)
            ev.p_values[name] = result.p_value
            if result.votes:
                ev.verdicts[name] = result.verdict
            if result.run_score is not None:
                ev.scores.append(result.run_score)
            ev.flags[name] = list(result.flagged_counters)
            ev.reserve[name] = list(result.reserve_counters)
    ev.history_faults = {k: r.history_faults for k, r in results.items() if r.history_faults is not None}
    ev.history_normals = {k: r.history_normals for k, r in results.items() if r.history_normals is not None}
    return ev


def uncalibrated(ev: Evidence, status: str) -> dict[str, str]:
    """The detectors comparing runs whose p-value was measured in another situation than the run's:
    its baseline is not of its lab (``status`` adjusted or insufficient) and the detector's null is
    the same-lab one — the history's normal runs share one lab, so none was ever judged across
    labs as this run is (``labs.matched_null``).  What such a p-value says depends on how far the
    run's lab is from the history's, which nothing in the history measures: detector -> why."""
    if status == "same_lab":
        return {}
    return {name: (f"its p-value compares this {status} run with normal runs judged inside their own lab: "
                   "the history has no normal runs judged across labs")
            for name, result in ev.results.items()
            if ev.p_values.get(name) is not None and result.null_kind == "same_lab"}


def combined_detectors(ev: Evidence, rule: HeadlineRule, set_aside: dict[str, str]) -> dict[str, float | None]:
    """The p-values the calibrated decision combines: those of the detectors the rule names, without
    the ``set_aside`` ones (:func:`uncalibrated`).  A self-contained detector (the run against
    itself) joins when the rule names it, and judges alone when every named detector that could
    judge the run was set aside: its null needs no lab."""
    named = {k: v for k, v in ev.p_values.items() if rule.detectors is None or k in rule.detectors}
    used = {k: v for k, v in named.items() if k not in set_aside}
    alone = {k: ev.p_values[k] for k in ev.self_contained() if ev.p_values.get(k) is not None}
    if alone and set_aside and not any(v is not None for v in used.values()):
        return alone
    return used


def fault_weights(history_faults: Mapping[str, Mapping[str, float | None]], used: list[str], *, alpha: float,
                  run_id: str | None = None) -> FaultWeighting | None:
    """Each detector's share of the false-alarm rate, learned from the history's verified faults.

    ``history_faults``: per detector, its p-value on each verified fault run of the history,
    judged as a target is (by the detectors' calibrations).  Over the fault runs every detector
    of ``used`` judged (``run_id`` left out: a leave-one-out run does not learn from itself), a
    detector's weight is ``1 + `` the faults it caught (p at most ``alpha``), scaled to a mean of 1:
    a detector that sees this system's faults gets more of the rate, one that sees none keeps a
    little (a fault of a new kind).  The weights depend on the history alone, never on the run
    judged, so the weighted combination keeps its level (``pvalues.combined_pvalue``).  None —
    equal shares — when a detector has no such record or no fault run was judged by all.  The
    faults were judged against baselines of their own lab, so the weights serve a run judged the
    same way (``same_lab``); a run whose lab is adjusted for or unknown gets equal shares."""
    if not used or any(d not in history_faults for d in used):
        return None
    common = set.intersection(*(set(history_faults[d]) for d in used)) - {run_id}
    if not common:
        return None
    caught = {d: sum(1 for f in common if (p := history_faults[d][f]) is not None and p <= alpha) for d in used}
    return {"faults": len(common), "caught": caught, "weights": record.rate_shares(caught)}


def decide(ev: Evidence, rule: HeadlineRule, used: dict[str, float | None],
           weighting: FaultWeighting | None = None) -> tuple[str, float | None]:
    """The run's verdict and, under ``calibrated``, the combined p-value of ``used``
    (:func:`combined_detectors`), weighted by ``weighting`` (:func:`fault_weights`) when given."""
    if rule.verdict_rule != "calibrated":
        return headline_verdict(ev.verdicts, rule.verdict_rule), None
    return calibrated_verdict(ev.verdicts, used, rule.false_alarm_rate, rule.combination,
                              weighting["weights"] if weighting else None)


def set_aside_small(ev: Evidence, changes: dict[str, float], min_effect_pct: float) -> dict[str, float]:
    """The flags of the detectors whose counters are scored or modelled (``DetectorResult.counters``)
    without the changes too small to matter, on their pages too (in place: the rules' are already, by
    ``detect``); those counters with their change in %."""
    small: dict[str, float] = {}

    def kept(counters: list[str]) -> list[str]:
        large, aside = effects.split_by_effect(counters, changes, min_effect_pct)
        small.update(aside)
        return large
    for name in ev.judged("scored") + ev.judged("models"):
        for entry in ev.results[name].page:
            if ev.methods[entry].get("flagged_counters"):
                ev.methods[entry]["flagged_counters"] = kept(ev.methods[entry]["flagged_counters"])
        ev.flags[name], ev.reserve[name] = kept(ev.flags[name]), kept(ev.reserve[name])
    return small


def failed_counters(ev: Evidence, counter_scores: dict[str, float], flag_rule: str,
                    changes: dict[str, float], min_effect_pct: float, used: dict[str, float | None],
                    only_deciders: bool = False) -> list[str]:
    """The counters a failed run shows, every one of them a change that matters; none when no such
    counter is in sight (the run then passes), each detector's read as its ``counters`` role says
    (:data:`~pipelines.protocol.COUNTER_ROLES`).  A calibrated failure may come from evidence no
    single detector turned into its own failure: then a scoring detector's reserve (the counters
    over their limits, bagging's) names what moved; when only the modelling detectors saw it, their
    counters; when a self-contained detector decided alone (``used``: the combined detectors), its
    counters (beyond their limit in a window of the run: their change matters by construction).
    ``only_deciders``: the detectors of ``used`` (those the record chose) name the counters; only
    when they name none do the others' flags, after the evidence of a deciding detector that
    carries evidence (the counters the classifier's predicted cause raises on this run).  The
    verdict is the same either way: the evidence never stands alone where the others' flags are
    empty; with nothing named, the counters that moved most."""
    if ev.alone_inside(used):
        return [c for k in used for c in ev.flags.get(k, [])]
    inside = ev.self_contained()
    speaks = (lambda name: name in used) if only_deciders else (lambda name: True)   # noqa: E731

    def playing(role: str) -> list[str]:        # a self-contained detector's counters follow its own rule
        return [k for k in ev.judged(role) if k not in inside and speaks(k)]
    scored = [set(ev.flags[k] or ev.reserve[k]) for k in playing("scored")]
    if flag_rule == "union":
        chosen = set().union(*scored)
    else:
        chosen = next((s for s in scored if s), set())
    moved = effects.split_by_effect([c for c, v in counter_scores.items() if v > 0], changes, min_effect_pct)[0]
    within = [c for k in inside if k in used for c in ev.flags.get(k, [])]
    models = [c for k in playing("models") for c in ev.flags[k]]
    named = [c for c in counter_scores if c in chosen] or models or within
    if not named:                   # a detector of another kind that decides names its own counters
        own = list(dict.fromkeys(c for k in playing("own") for c in ev.flags[k] if changes.get(c) is not None))
        named = effects.split_by_effect(own, changes, min_effect_pct)[0]
    if named:
        return named
    if only_deciders:       # the deciders name none (the classifier): what the other detectors flagged,
        others = failed_counters(ev, counter_scores, flag_rule, changes, min_effect_pct, used)
        carrying = playing("evidence")
        if not others or not carrying:      # ... after the deciders' own evidence
            return others
        carried = effects.split_by_effect([c for k in carrying for c in ev.flags[k] if c not in others
                                           and changes.get(c) is not None], changes, min_effect_pct)[0]
        return carried + others
    return moved[:FALLBACK_FLAGS]


def verdict_score(ev: Evidence, used: dict[str, float | None]) -> float:
    """The run's score: the mean of the detectors' run scores, or, when self-contained detectors
    decided alone, their ``alone_score``; when no detector gives a run score, one minus the
    deciders' smallest p-value (0 without any)."""
    if ev.alone_inside(used):
        return round(max(float(ev.results[k].alone_score or 0.0) for k in used), 4)
    if not ev.scores:
        ps = [float(p) for p in used.values() if p is not None and np.isfinite(p)]
        return round(1.0 - min(ps), 4) if ps else 0.0
    return round(float(np.mean(ev.scores)), 4)


def no_baseline_reason(baseline_runs: list[WeightedRun]) -> str | None:
    """Why the history holds nothing the run can honestly be judged against, or None: no passed run
    of its system at all (``history.baseline_choice``: none before it, none verified after it)."""
    if not baseline_runs:
        return "no verified passed run of this system, before or after this run, to compare it with"
    return None


def trusted(ev: Evidence, rule: HeadlineRule, used: dict[str, float | None], *, run_id: str,
            lab_of: dict[str, str] | None, verified: frozenset[str] = frozenset()) -> record.Choice:
    """The detectors this system's own record shows right, among those that judged the run
    (``used``): :func:`record.choose`, the record read in the run's lab (``lab_of``: run -> lab;
    ``verified``: the verified normal runs the run is compared with, counted whether or not a
    detector has a record of them)."""
    lab_of = lab_of or {}
    history = record.History(ev.history_normals, {d: {r: p for r, p in v.items() if p is not None}
                                                  for d, v in ev.history_faults.items()}, lab_of,
                             self_contained=tuple(ev.self_contained()),
                             titles={k: r.title for k, r in ev.results.items() if r.title}, verified=verified)
    trust = record.TrustRule(alpha=rule.false_alarm_rate, level=rule.trust_level, min_runs=rule.trust_min_runs,
                             combination=rule.combination, reading=rule.trust_reading,
                             corroborate=rule.trust_corroborate,
                             silent=rule.trust_silent)
    return record.choose(used, history, trust, lab=lab_of.get(run_id), leave_out=run_id, nulls=nulls_of(ev))


def nulls_of(ev: Evidence) -> dict[str, record.Null]:
    """What each detector judged the run against (``record.Null``): the normal runs of its null
    (its own count, else its record's) and whether they were judged across labs."""
    out = {}
    for name in ev.p_values:
        result = ev.results[name]
        runs = result.null_runs
        if runs is None and name in ev.history_normals:
            runs = len(ev.history_normals[name])
        out[name] = record.Null(runs, result.null_kind)
    return out


@dataclass(frozen=True)
class Decision:
    """What decided one run, before its counters are explained: its ``verdict`` (``pass``,
    ``fail`` or ``no_baseline``) and ``p_value``; the detectors whose p-values it rests on
    (``used``: detector -> p-value, None for one that could not judge) and those set aside for the
    run's lab (``set_aside``: detector -> why); the learned shares (``weighting``) or the record's
    choice (``choice``, under ``report.detector_trust: record``); why the run could not be judged
    (``unjudged``)."""

    verdict: str
    p_value: float | None
    used: dict[str, float | None]
    set_aside: dict[str, str]
    weighting: FaultWeighting | None = None
    choice: record.Choice | None = None
    unjudged: str | None = None


def decide_run(run: RunJudged, ev: Evidence, results: dict[str, DetectorResult], rule: HeadlineRule,
               lab_of: dict[str, str] | None) -> Decision:
    """The run's :class:`Decision` from its detectors' evidence under ``rule``: no baseline, the
    detectors set aside for its lab, then the record's choice (``trust: record``) or the p-values
    combined (:func:`decide`)."""
    lab = run.lab
    unjudged = no_baseline_reason(run.baseline_runs)
    set_aside = uncalibrated(ev, lab["status"]) if rule.verdict_rule == "calibrated" else {}
    used = combined_detectors(ev, rule, set_aside)
    weighting = fault_weights(ev.history_faults, [k for k, v in used.items() if v is not None],
                              alpha=rule.false_alarm_rate, run_id=run.run_id) \
        if rule.detector_weights == "faults" and rule.verdict_rule == "calibrated" and lab["status"] == "same_lab" \
        and rule.trust != "record" else None
    if unjudged is None and set_aside and not any(v is not None for v in used.values()):
        why = next((results[k].reason for k in ev.self_contained() if results[k].reason), None)
        unjudged = ("its lab has no verified normal run, the history's normal runs are all of another lab "
                    "(nothing measures how far labs differ), and the run cannot be compared with itself: "
                    + (why or "no within-run evidence"))
    if unjudged is not None:
        return Decision("no_baseline", None, used, set_aside, weighting, unjudged=unjudged)
    if rule.verdict_rule == "calibrated" and rule.trust == "record":
        choice = trusted(ev, rule, {k: v for k, v in used.items() if v is not None}, run_id=run.run_id,
                         lab_of=lab_of, verified=frozenset(b["run_id"] for b in run.baseline_runs))
        chosen: dict[str, float | None] = {d: ev.p_values[d] for d in choice.detectors}   # its shares: details["trust"]
        if choice.unjudged is not None:          # the history cannot judge it, and says why
            return Decision("no_baseline", None, chosen, set_aside, weighting, choice, choice.unjudged)
        if choice.p_value is None:
            return Decision(headline_verdict(ev.verdicts, "all"), None, chosen, set_aside, weighting, choice)
        return Decision("fail" if choice.p_value <= rule.false_alarm_rate else "pass", choice.p_value, chosen,
                        set_aside, weighting, choice)
    verdict, p_value = decide(ev, rule, used, weighting)
    return Decision(verdict, p_value, used, set_aside, weighting)


# the entries of a verdict file's details the verdict writes itself (no detector's may take one)
VERDICT_DETAILS = frozenset({"verdict_rule", "flag_rule", "false_alarm_rate", "p_values", "combination",
                             "cause_prediction", "fault_pattern", "no_baseline", "combined_detectors",
                             "set_aside_detectors", "detector_weights", "trust", "cause_signature", "set_aside_small",
                             "min_effect_pct", "counter_order", "environment_not_in_baseline"})


def detector_details(results: Mapping[str, DetectorResult], run_details: Mapping[str, Any]) -> dict[str, Any]:
    """The detectors' own entries of the verdict file's details, in the registry's order; a
    ValueError naming the detector when an entry would take the place of the verdict's own, the
    run's, or another detector's (one of them would be lost without a word)."""
    out: dict[str, Any] = {}
    for name, result in results.items():
        for key, value in result.details.items():
            if key in out or key in VERDICT_DETAILS or key in run_details:
                raise ValueError(f"detector {name!r}: its details entry {key!r} is already the verdict's, "
                                 "the run's or another detector's; name it after the detector")
            out[key] = value
    return out


def with_objectives(statistical: str, flagged: list[str], evaluation: Evaluation | None
                    ) -> tuple[str, list[str], dict[str, Any] | None]:
    """The verdict once the team's objectives are heard (docs/methods/objectives.md): a failed
    evaluation that is not advisory fails the run, whatever the detectors found, its failed
    objectives' counters first among the flagged; a warning, an advisory failure or a pass leave the
    statistical verdict as it is.  The verdict, the flagged counters, and what decided
    (``details.decision``)."""
    if evaluation is None:
        return statistical, flagged, None
    fails = evaluation.fails_run
    verdict = "fail" if fails else statistical
    if fails:
        flagged = list(dict.fromkeys([o.counter for o in evaluation.failed()] + flagged))
    by = ("objectives and detectors" if fails and statistical == "fail" else "objectives" if fails
          else "detectors" if statistical in ("pass", "fail") else "none")
    return verdict, flagged, {"decided_by": by, "statistical_verdict": statistical,
                              "objectives_result": evaluation.result, "advisory": evaluation.advisory}


def compose(run: RunJudged, results: dict[str, DetectorResult], rule: HeadlineRule, *,
            lab_of: dict[str, str] | None = None,
            fault_labels: Mapping[str, cause_signatures.FaultLabel] | None = None,
            objectives: Evaluation | None = None) -> VerdictFile:
    """The verdict file of one run (contract §2, its keys in the contract's order) from its
    detectors' results under ``rule``: decided (:func:`decide_run`), its counters explained, then
    assembled; the report adds the flagged counters' changes, the plain summary and the counters
    validation dropped once it has them.

    Every detector's own verdict is reported whatever the rule; the run's cause comes from its
    cause prediction (``run.cause_prediction``).  ``lab_of`` (run -> ``labs.lab_key``, the run's and
    its history's) reads the detectors' record in the run's lab (``report.detector_trust: record``,
    :func:`trusted`).  ``fault_labels`` (the system's verified faults and the counters their labels
    name) put a failed run's counters in the order that explains it
    (:func:`cause_signatures.explain_order`, the signature of its predicted cause).  A failed run
    none of whose counters changed enough to matter (``significance.min_effect_pct``) passes: the
    one way the counters change the verdict.  ``objectives``: the run's evaluation against its
    system's objectives (:func:`with_objectives`), the verdict file's ``objectives`` block."""
    ev = gather_evidence(results)
    lab, predicted = run.lab, run.cause_prediction
    decision = decide_run(run, ev, results, rule, lab_of)
    verdict, used, choice, unjudged = decision.verdict, decision.used, decision.choice, decision.unjudged
    counter_scores = ev.counter_scores()
    changes = (run.details or {}).get("effects") or {}
    small = set_aside_small(ev, changes, rule.min_effect_pct)
    small.update((run.details or {}).get("below_min_effect") or {})
    flagged = failed_counters(ev, counter_scores, rule.flag_rule, changes, rule.min_effect_pct, used,
                              only_deciders=choice is not None) if verdict == "fail" else []
    if verdict == "fail" and not flagged:           # unusual, but no change large enough to matter
        verdict = "pass"
    statistical = verdict
    verdict, flagged, decision_details = with_objectives(statistical, flagged, objectives)
    cause = cause_of(verdict, predicted)
    signature = cause_signatures.signature(fault_labels or {}, cause["label"], leave_out=run.run_id) \
        if verdict == "fail" else None
    if signature is not None:           # the cause's own counters the run moved enough: its evidence, shown
        moved = effects.split_by_effect([c for c in sorted(signature.counters) if counter_scores.get(c, 0) > 0
                                         and c not in flagged], changes, rule.min_effect_pct)[0]
        flagged = flagged + moved
    flagged = cause_signatures.explain_order(flagged, signature)
    details = {**run.details, "verdict_rule": rule.verdict_rule, "flag_rule": rule.flag_rule,
               "false_alarm_rate": rule.false_alarm_rate, "p_values": ev.p_values,
               "combination": rule.combination if rule.verdict_rule == "calibrated" else None,
               **detector_details(results, run.details),
               "cause_prediction": predicted, "fault_pattern": fault_pattern(verdict, predicted)}
    if unjudged is not None:
        details["no_baseline"] = unjudged
    if rule.verdict_rule == "calibrated":
        details["combined_detectors"] = sorted(k for k, v in used.items() if v is not None)
        details["set_aside_detectors"] = decision.set_aside
        details["detector_weights"] = decision.weighting
        if choice is not None:
            details["trust"] = choice.to_json()
    if signature is not None and any(signature.names(c) for c in flagged):
        details["cause_signature"] = signature.to_json()
    details["set_aside_small"] = dict(sorted(small.items(), key=lambda kv: (-abs(kv[1]), kv[0])))
    details["min_effect_pct"] = rule.min_effect_pct
    if decision_details is not None:
        details["decision"] = decision_details
    p_value = decision.p_value
    score = None if unjudged is not None else verdict_score(ev, used)
    if objectives is not None and objectives.fails_run:   # how far the objectives fell short orders it too
        score = round(max(score or 0.0, 1.0 - objectives.score_pct / 100.0), 4)
    doc: VerdictFile = {
        "schema_version": 2 if unjudged is not None or objectives is not None else 1, "run_id": run.run_id,
        "system": run.system, "verdict": verdict, "score": score, "flagged_counters": flagged,
        "counter_scores": {c: round(v, 4) for c, v in counter_scores.items()}, "cause": cause,
        "baseline_runs": run.baseline_runs, "baseline_status": "none" if not run.baseline_runs else lab["status"],
        "p_value": None if p_value is None else round(p_value, 6), "methods": ev.methods, "details": details}
    if objectives is not None:
        doc["objectives"] = objectives.to_json()
    return doc
