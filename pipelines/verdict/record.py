"""record: which detectors decide a run, read from their record on the system's own verified runs.

Every detector's record is its verdicts on the history's verified runs, each judged as a target is
(:mod:`pipelines.verdict.record_stats`).  :func:`choose` reads it into a :class:`Choice`: a detector
that fails more normal runs than the rate explains loses its say; each trusted detector alone and
the trusted ones together are replayed on the record and the best decides, the candidates it
cannot tell from the best beyond chance named beside it; a history too small to weigh the
detectors, a lab it has never seen, a null that finds nothing and a p-value beyond what its null
can calibrate each have their own reading.  Why, and what was measured: docs/methods/calibration.md,
"Which detectors decide" and "How much the record knows".

Pure: p-values in, a :class:`Choice` out.  Cited: the calibration of every detector against the
history's normal runs is Nguyen 2017 §7.5.3 (seed 004), the per-system weighting of models by
their past accuracy Foo et al. 2015 §3.3 (seed 003), applied to the detectors.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from pipelines.verdict.record_stats import (Counted, History, Null, Standing, _named, beyond_calibration, better,
                                            catches, combined, n_min, rate_bounds, rate_shares, replay, right_on,
                                            runs_of, shares, silent_null, standing)

__all__ = ["Choice", "Counted", "History", "Null", "Standing", "TrustRule", "better", "choose", "n_min",
           "rate_bounds", "rate_shares", "silent_null"]


@dataclass(frozen=True)
class Choice:
    """What decides the run: ``detectors`` (one, or several combined), their combined ``p_value``
    and ``weights`` (shares of the rate, None for one detector), every detector's standing and
    every candidate's record score; ``reason`` in words.  ``basis``: ``record`` (the record chose),
    ``small_history`` (too few verified normal runs to weigh the detectors), ``new_lab`` (no verified
    normal run of the run's lab), ``silent_null`` (no verified fault, and the best record is a null's
    that finds nothing: :func:`unweighed`) or ``none`` (no detector); ``normal_runs`` the verified normal
    runs the record is read on (the run's lab's where it is read there); ``equals`` the candidates the record could not tell from the chosen one;
    ``beyond`` each detector whose p-value lies below what its null's runs can support (its floor);
    ``unjudged`` why the run is not judged, when it is not."""
    detectors: tuple[str, ...]
    p_value: float | None
    weights: dict[str, float] | None
    standings: dict[str, Standing]
    candidates: dict[str, float] = field(default_factory=dict)
    reason: str = ""
    basis: str = "record"
    normal_runs: int | None = None
    equals: tuple[str, ...] = ()
    beyond: dict[str, float] = field(default_factory=dict)
    unjudged: str | None = None
    silent: dict[str, str] = field(default_factory=dict)
    short: str = ""
    uncorroborated: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out: dict[str, Any] = {
            "decided_by": list(self.detectors), "p_value": None if self.p_value is None else round(self.p_value, 6),
            "weights": self.weights, "reason": self.reason, "basis": self.basis,
            "normal_runs": self.normal_runs, "equals": list(self.equals),
            "beyond_calibration": {d: round(f, 6) for d, f in self.beyond.items()},
            "candidates": {k: round(v, 4) for k, v in self.candidates.items()},
            "record": {d: s.to_json() for d, s in self.standings.items()}}
        if self.silent:
            out["silent_nulls"] = dict(self.silent)
        if self.short:
            out["short"] = self.short
        if self.uncorroborated:
            out["uncorroborated"] = list(self.uncorroborated)
        return out


@dataclass(frozen=True)
class TrustRule:
    """How the record is read (``report`` in params.yaml): ``alpha`` the false-alarm rate,
    ``level`` the binomial tail at which a detector's false alarms are more than the rate explains,
    ``min_runs`` the normal runs of a lab that make its own record, ``combination`` of the deciders'
    p-values, ``allowed`` the share of normal runs a candidate may fail uncharged (default
    ``alpha``, the rate's own); equal scores go to more detectors (one run's odd p-value then moves
    the verdict less); ``reading``:
    ``uncertain`` (how much the record knows decides how it is read: its size, a new lab, equal
    records) or ``point`` (every candidate by its record's score alone, as measured before).

    ``level`` is also the McNemar level at which one candidate's record is better than another's."""

    alpha: float = 0.05
    level: float = 0.05
    min_runs: int = 3
    combination: str = "simes"
    allowed: float | None = None
    reading: str = "uncertain"          # uncertain: the record's size and noise read (module docstring) | point
    corroborate: bool = True            # a failure resting on a p-value its null is too small to calibrate at the
                                        # rate needs a second witness (:func:`corroborated`)
    silent: str = "within"              # no verified fault: a best record from a silent null does not decide; the
                                        # run against itself does (within) | keep (it decides; the page says so)
    small: bool = True                  # too few verified normal runs: the run against itself, or not judged
    new_lab: bool = True                # no verified normal run of the run's lab: the detectors judged across labs


@dataclass(frozen=True)
class Reading:
    """One run as a history large enough to weigh the detectors reads it: the detectors' p-values
    (``p_values``, those that judged it: ``judged``), their standings, the p-values beyond their
    null (``beyond``), and the verified runs the record is read on (``normal_runs``, ``fault_runs``;
    ``normals`` of them normal, of the run's lab when ``of_lab``)."""

    p_values: Mapping[str, float]
    judged: tuple[str, ...]
    standings: dict[str, Standing]
    beyond: dict[str, float]
    normal_runs: set[str]
    fault_runs: set[str]
    normals: int
    of_lab: bool = False


def choose(p_values: Mapping[str, float | None], history: History, rule: TrustRule, *, lab: str | None = None,
           leave_out: str | None = None, nulls: Mapping[str, Null] | None = None) -> Choice:
    """The meta-decision (module docstring) over the detectors that judged the run (``p_values``,
    None = could not judge): which decide, and the p-value the verdict compares with ``rule.alpha``.
    ``lab``: the run's lab; ``leave_out``: the run itself when it is one of the history's
    (leave-one-out); ``nulls``: what each detector judged the run against (its floor, a null
    across labs)."""
    alpha, level, min_runs, combination = rule.alpha, rule.level, rule.min_runs, rule.combination
    allowed = alpha if rule.allowed is None else rule.allowed
    judged_p = {d: float(p) for d, p in p_values.items() if p is not None and np.isfinite(p)}
    judged = tuple(judged_p)
    normal_runs, situation = history.situation(lab, min_runs, leave_out)
    fault_runs = history.fault_runs(leave_out)
    standings = {d: standing(d, history, normal_runs, fault_runs, situation, alpha=alpha, level=level)
                 for d in judged}
    if not judged:
        return Choice((), None, None, standings, reason="no detector could judge the run", basis="none")
    if rule.reading == "uncertain":
        nulls = nulls or {}
        beyond = beyond_calibration({d: judged_p[d] for d in judged}, nulls)
        counted = history.counted(lab, min_runs, leave_out)
        if rule.new_lab and lab is not None and history.lab_of and not counted.lab_has_runs:
            return new_lab(judged_p, judged, standings, nulls, rule, beyond, counted.normals, history.self_contained)
        if rule.small and not counted.can_weigh(rule.level):
            return small_history(judged_p, judged, standings, rule, beyond, counted, history.self_contained)
        return read_record(Reading(judged_p, judged, standings, beyond, normal_runs, fault_runs, counted.normals,
                                   of_lab=counted.of_lab), history, rule)
    trusted = tuple(d for d in judged if standings[d].trusted)
    if not trusted:
        return fewest_false_alarms(judged_p, judged, standings)
    candidates = candidates_of(trusted, history.self_contained)
    scored = {c: replay(c, history, normal_runs, fault_runs, alpha=alpha, combination=combination, allowed=allowed)
              for c in candidates}
    best = max(candidates, key=lambda c: (round(scored[c][0], 9), len(c), -scored[c][1]))
    weights = shares(catches(history, best, fault_runs, alpha), fault_runs)
    dropped = [d for d in judged if not standings[d].trusted]
    reason = ("the best record on this history's verified runs"
              + ("; left out for failing more normal runs than the rate explains: "
                 + "; ".join(standings[d].sentence() for d in dropped) if dropped else ""))
    return Choice(best, combined({d: judged_p[d] for d in best}, weights, combination), weights, standings,
                  {"+".join(c): v[0] for c, v in scored.items()}, reason)


def candidates_of(trusted: tuple[str, ...], self_contained: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """What the record weighs: each trusted detector alone, and the trusted ones together both with
    and without the detectors whose null needs no other run (``self_contained``)."""
    others = tuple(d for d in trusted if d not in self_contained)
    return [(d,) for d in trusted] + [c for c in dict.fromkeys((trusted, others)) if len(c) > 1]


def fewest_false_alarms(p_values: Mapping[str, float], judged: tuple[str, ...],
                        standings: dict[str, Standing], **extra: Any) -> Choice:
    """Nothing trusted at all: the detector with the fewest false alarms decides, and says so."""
    best = min(judged, key=lambda d: (standings[d].normal_failed / max(1, standings[d].normal_runs),
                                      -standings[d].faults_caught, d))
    return Choice((best,), float(p_values[best]), None, standings, **extra,
                  reason=("every detector failed more of this history's normal runs than the rate explains; "
                          "the one with the fewest false alarms decides"))


def _within(p_values: Mapping[str, float], standings: Mapping[str, Standing],
            self_contained: tuple[str, ...]) -> str | None:
    """The self-contained detector that can decide: it judged the run and keeps its say."""
    for d in self_contained:
        if p_values.get(d) is not None and np.isfinite(p_values[d]) and (d not in standings or standings[d].trusted):
            return d
    return None


def small_history(p_values: Mapping[str, float], judged: tuple[str, ...], standings: dict[str, Standing],
                  rule: TrustRule, beyond: dict[str, float], counted: Counted | int,
                  self_contained: tuple[str, ...] = ()) -> Choice:
    """A history too small to weigh the detectors (module docstring): the run against itself
    decides, or the run is not judged.  ``counted``: what the record is read on (:class:`Counted`;
    a number: the system's verified normal runs)."""
    if isinstance(counted, int):
        counted = Counted(counted, 0, on_lab=False, of_lab=False, lab_has_runs=True)
    need, normals = n_min(rule.level), counted.normals
    short = f"{counted.words()}, too few to weigh the detectors ({need} needed)"
    head = (f"{counted.words()}: too few to weigh the detectors ({need} are needed before a detector right on "
            "all of them is told from a coin)")
    within = _within(p_values, standings, self_contained)
    if within is not None:
        return Choice((within,), float(p_values[within]), None, standings, basis="small_history",
                      normal_runs=normals, beyond=beyond, short=short,
                      reason=(f"{head}; judged against itself: the run against itself decides, because its null "
                              "compares the run with itself and does not assume that it is like the history's other "
                              "runs, which so few runs cannot check"))
    why = ("the run cannot be compared with itself" if not any(d in judged for d in self_contained) else
           "the run against itself failed more of them than the rate explains")
    return Choice((), None, None, standings, basis="small_history", normal_runs=normals, beyond=beyond, short=short,
                  reason=f"{head}, and {why}", unjudged=f"{head}, and {why}")


def new_lab(p_values: Mapping[str, float], judged: tuple[str, ...], standings: dict[str, Standing],
            nulls: Mapping[str, Null], rule: TrustRule, beyond: dict[str, float], normals: int,
            self_contained: tuple[str, ...] = ()) -> Choice:
    """A lab the history has never seen (module docstring): the detectors judged against normal
    runs across labs decide; with none, the run against itself; with neither, the run is not judged."""
    head = "a lab with no verified normal run in the history: the record read on other labs is not this run's"
    across = tuple(d for d in judged if (nulls.get(d) or Null()).kind == "cross_lab")
    if across:
        p = combined({d: p_values[d] for d in across}, None, rule.combination)
        return Choice(across, p, None, standings, basis="new_lab", normal_runs=normals, beyond=beyond,
                      reason=f"{head}; decided by the detectors whose null judges normal runs across labs")
    within = _within(p_values, standings, self_contained)
    if within is not None:
        return Choice((within,), float(p_values[within]), None, standings, basis="new_lab", normal_runs=normals,
                      beyond=beyond, reason=(f"{head}; no detector has a null across labs: decided by the run "
                                             "against itself, which compares the run with itself"))
    why = f"{head}, no detector has a null across labs and the run cannot be compared with itself"
    return Choice((), None, None, standings, basis="new_lab", normal_runs=normals, beyond=beyond, reason=why,
                  unjudged=why)


def unweighed(run: Reading, within: str, best: tuple[str, ...], silent: dict[str, str], candidates: dict[str, float],
              equals: tuple[str, ...]) -> Choice:
    """No verified fault in the history, and the best record is a silent null's (module docstring): the
    record cannot weigh what that detector would catch, so, as on a history too small to weigh the
    detectors, the run against itself decides."""
    p_values, standings, normals, beyond = run.p_values, run.standings, run.normals, run.beyond
    names = _named(best, standings, " and ")
    head = (f"no verified fault in the history, and the best record on its {normals} normal runs ({names}) comes "
            "from a null that finds nothing unusual in nearly every normal run, so the record cannot show what it "
            "would catch")
    return Choice((within,), float(p_values[within]), None, standings, candidates,
                  reason=(f"{head}: decided by the run against itself, as on a history too small to weigh the "
                          "detectors, because its null compares the run with itself and needs no record"),
                  basis="silent_null", normal_runs=normals, equals=equals, beyond=beyond, silent=silent)


def read_record(run: Reading, history: History, rule: TrustRule) -> Choice:
    """A history large enough to weigh the detectors (module docstring): the candidates no other is
    better than beyond chance are equal, the best record among them decides and
    the others are named beside it.  ``normals``: the verified normal runs the record is read on
    (the run's lab's, ``of_lab``, where it is read there).  A failure that rests on a p-value its
    null is too small to calibrate at the rate needs a second witness (:func:`corroborated`)."""
    p_values, judged, standings, beyond = run.p_values, run.judged, run.standings, run.beyond
    normal_runs, fault_runs, normals, of_lab = run.normal_runs, run.fault_runs, run.normals, run.of_lab
    alpha, combination = rule.alpha, rule.combination
    allowed = alpha if rule.allowed is None else rule.allowed
    trusted = tuple(d for d in judged if standings[d].trusted)
    if not trusted:
        return fewest_false_alarms(p_values, judged, standings, normal_runs=normals, beyond=beyond)
    candidates = candidates_of(trusted, history.self_contained)
    scored = {c: replay(c, history, normal_runs, fault_runs, alpha=alpha, combination=combination, allowed=allowed)
              for c in candidates}
    records = {c: right_on(c, history, normal_runs, fault_runs, alpha=alpha, combination=combination)
               for c in candidates}
    equals = [c for c in candidates if not any(better(records[o], records[c], rule.level) for o in candidates
                                               if o != c)] or candidates
    best = max(equals, key=lambda c: (round(scored[c][0], 9), len(c), -scored[c][1]))
    scores = {"+".join(c): v[0] for c, v in scored.items()}
    equal_names = tuple("+".join(c) for c in equals)
    silent = {d: why for d in best if not fault_runs
              and (why := silent_null(d, history, normal_runs, rule.level)) is not None}
    if silent and rule.silent == "within":
        within = _within(p_values, standings, history.self_contained)
        if within is not None and within not in best:
            return unweighed(run, within, best, silent, scores, equal_names)
    weights = shares(catches(history, best, fault_runs, alpha), fault_runs)
    p_best = combined({d: p_values[d] for d in best}, weights, combination)
    alone: tuple[str, ...] = ()
    if rule.corroborate and p_best is not None and p_best <= alpha:
        p_best, alone = corroborated(p_values, best, trusted, weights, beyond, alpha=alpha, combination=combination)
    dropped = [d for d in judged if not standings[d].trusted]
    named = [_named(c, standings, " + ") for c in equals if c != best]
    size = runs_of(normals, of_lab)
    reason = (f"the best record on this history's verified runs ({size})"
              + (f"; not told apart from it beyond chance: {', '.join(named)}" if named else "")
              + ("; left out for failing more normal runs than the rate explains: "
                 + "; ".join(standings[d].sentence() for d in dropped) if dropped else ""))
    short = ""
    if alone:                           # the failure rests on evidence its null cannot calibrate: not enough
        nulls = sorted({round(1 / beyond[d] - 1) for d in alone if d in beyond})
        short = (f"{_named(alone, standings, ' and ')}'s evidence beyond what "
                 f"{' or '.join(str(n) for n in nulls)} normal runs can calibrate; not corroborated")
        reason += (f"; {short}: its p-value lies beyond every run of its null, which is too small to calibrate a "
                   f"p-value at the rate ({math.ceil(1 / alpha - 1)} runs are needed), and no second detector "
                   "finds the run at the rate, so it passes")
    return Choice(best, p_best, weights, standings, scores, reason, basis="record", normal_runs=normals,
                  equals=equal_names, beyond=beyond, silent=silent, short=short, uncorroborated=alone)


def corroborated(p_values: Mapping[str, float], best: tuple[str, ...], trusted: tuple[str, ...],
                 weights: dict[str, float] | None, beyond: Mapping[str, float], *, alpha: float, combination: str
                 ) -> tuple[float | None, tuple[str, ...]]:
    """A failure at ``alpha`` that needs a second witness (docs/methods/calibration.md, "A second
    witness"): where a deciding detector's null is too small to calibrate a p-value at the rate at all
    (its floor ``1/(n + 1)`` above ``alpha``) and its p-value lies beyond every run of that null, the
    run fails only if, with those p-values read at their floor, it still fails, or a second trusted
    detector (the run against itself among them) finds it at the rate too.  The p-value the verdict
    compares with the rate, and the detectors whose uncorroborated evidence was set down to its floor."""
    uncalibrated = {d: beyond[d] for d in best if d in beyond and beyond[d] > alpha}
    p_best = combined({d: p_values[d] for d in best}, weights, combination)
    if not uncalibrated:
        return p_best, ()
    floored = combined({d: max(float(p_values[d]), uncalibrated.get(d, 0.0)) for d in best}, weights, combination)
    seen = [d for d in trusted if p_values[d] <= alpha]
    if (floored if floored is not None else 1.0) <= alpha or len(seen) >= 2:
        return p_best, ()
    return floored, tuple(seen) or tuple(uncalibrated)
