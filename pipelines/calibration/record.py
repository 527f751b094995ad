"""record: which detectors to trust on this system, learned from its own verified history.

Each detector is right somewhere: the run against itself on a system whose labs move every
counter, the cause classifier on one whose faults repeat, the association rules where runs are
alike.  The run's verdict therefore follows the evidence that has worked *on the system at hand*:
every detector's **record** is its verdicts on the history's verified runs, each judged as a
target is (leave-one-out: a normal run against the others' null, a fault against a baseline of
its lab), at the run's false-alarm rate ``alpha``:

* the **normal runs it failed** are its false alarms.  A detector whose p-values are calibrated
  fails about ``alpha`` of them; one that fails more than that rate explains (the binomial tail
  ``P(X >= false alarms | n, alpha)`` at most ``level``) **loses its say**: its null is not the
  situation of this system's runs (TrainTicket's second day judged against a null of the first);
* the **faults it caught** give it its share of the rate among the trusted ones (``1 +`` its
  catches, Benjamini & Hochberg's weighted procedure, as ``headline.fault_weights``).

The record is read in the run's **situation**: the normal runs of the run's own lab when the
history holds at least ``min_runs`` of them (a second-day target is judged by how the detector
did on the second day's normal runs), else every normal run.

Then the **meta-decision** (:func:`choose`): each trusted detector alone, and the trusted ones
together (weighted Simes or Bonferroni) both with and without the detectors whose null needs no
other run (``SELF_CONTAINED``: the run against itself), are replayed on the same record — every verified run of
the situation, its own catches left out of the weights that judge it — and the one with the best
record decides: the share of normal runs passed (false alarms up to the rate are not charged: the
rate allows them, and one more normal run failed among forty says nothing of a detector) plus the
share of faults caught (either term alone when the history has no faults, or no normal run of the
situation).  Ties go to more
detectors (one run's odd p-value then moves the verdict less), then to fewer false alarms.  The
choice depends on the history alone, never on the run judged, so the chosen test keeps its level
(``pvalues.combined_pvalue``).  Nothing trusted at all (every detector failed this situation's
normal runs beyond the rate): the one with the fewest false alarms decides, and says so.

Pure: p-values in, a :class:`Choice` out.  Cited: the calibration of every detector against the
history's normal runs is Nguyen 2017 §7.5.3 (seed 004), the per-system weighting of models by
their past accuracy Foo et al. 2015 §3.3 (seed 003), applied to the detectors.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping

import numpy as np

from pipelines.calibration import pvalues

DETECTOR_NAMES = {"stacking": "association rules (stacking)", "control_charts": "control charts",
                  "clustered_regression": "cluster models", "within_run": "the run against itself",
                  "cause_classifier": "cause classifier"}


# Detectors whose null needs no other run (the run against itself): the record tries the trusted
# detectors together both with and without them, so naming one never takes away the combination of
# the others that the history showed right.
SELF_CONTAINED = ("within_run",)


def loo_pvalues(scores: Mapping[str, float], pvalue: Callable[[float, list[float]], float]) -> dict[str, float]:
    """Each normal run's p-value against the scores of the others (leave-one-out): the detector's
    verdicts on the history's normal runs.  ``pvalue(score, null)`` is the detector's own; runs
    whose p-value cannot be computed (too few others) are left out."""
    out = {}
    for run, score in scores.items():
        p = pvalue(float(score), [float(v) for r, v in scores.items() if r != run])
        if p is not None and np.isfinite(p):
            out[run] = round(float(p), 6)
    return out


@dataclass(frozen=True)
class Standing:
    """One detector's record in a run's situation."""
    detector: str
    normal_runs: int
    normal_failed: int
    faults: int
    faults_caught: int
    situation: str                   # "this lab" or "every lab"
    trusted: bool
    excess_p: float | None           # P(at least normal_failed false alarms | normal_runs, alpha)

    def sentence(self) -> str:
        """"within-run: 0 of 36 normal runs failed, 30 of 31 faults caught"."""
        name = DETECTOR_NAMES.get(self.detector, self.detector)
        parts = [f"{self.normal_failed} of {self.normal_runs} normal runs failed"
                 + (" (of its lab)" if self.situation == "this lab" else "")]
        if self.faults:
            parts.append(f"{self.faults_caught} of {self.faults} faults caught")
        return f"{name}: " + ", ".join(parts)

    def to_json(self) -> dict:
        return {"normal_runs": self.normal_runs, "normal_failed": self.normal_failed, "faults": self.faults,
                "faults_caught": self.faults_caught, "situation": self.situation, "trusted": self.trusted,
                "excess_p": None if self.excess_p is None else round(self.excess_p, 6),
                "sentence": self.sentence()}


@dataclass(frozen=True)
class Choice:
    """What decides the run: ``detectors`` (one, or several combined), their combined ``p_value``
    and ``weights`` (shares of the rate, None for one detector), every detector's standing and
    every candidate's record score; ``reason`` in words."""
    detectors: tuple[str, ...]
    p_value: float | None
    weights: dict[str, float] | None
    standings: dict[str, Standing]
    candidates: dict[str, float] = field(default_factory=dict)
    reason: str = ""

    def to_json(self) -> dict:
        return {"decided_by": list(self.detectors), "p_value": None if self.p_value is None else round(self.p_value, 6),
                "weights": self.weights, "reason": self.reason,
                "candidates": {k: round(v, 4) for k, v in self.candidates.items()},
                "record": {d: s.to_json() for d, s in self.standings.items()}}


@dataclass(frozen=True)
class History:
    """Every detector's record on the history's verified runs: detector -> run -> p-value, for the
    normal runs and the faults, and each run's lab (``labs.lab_key``)."""
    normals: Mapping[str, Mapping[str, float]]
    faults: Mapping[str, Mapping[str, float]]
    lab_of: Mapping[str, str] = field(default_factory=dict)

    def situation(self, lab: str | None, min_runs: int, leave_out: str | None = None) -> tuple[set[str], str]:
        """The normal runs a target of ``lab`` is judged by: those of its lab when at least
        ``min_runs`` of them have a record, else every one; and which ("this lab", "every lab")."""
        every = {r for runs in self.normals.values() for r in runs} - {leave_out}
        own = {r for r in every if lab is not None and self.lab_of.get(r) == lab}
        return (own, "this lab") if len(own) >= min_runs else (every, "every lab")

    def fault_runs(self, leave_out: str | None = None) -> set[str]:
        return {r for runs in self.faults.values() for r in runs} - {leave_out}


def standing(detector: str, history: History, normal_runs: set[str], fault_runs: set[str], situation: str, *,
             alpha: float, level: float) -> Standing:
    """A detector's false alarms on ``normal_runs`` and catches on ``fault_runs`` (those it judged),
    and whether it keeps its say: its false alarms are within what ``alpha`` explains at ``level``
    (a detector with no normal run on record keeps it: nothing charges it)."""
    from scipy.stats import binom

    normal = [p for r, p in (history.normals.get(detector) or {}).items() if r in normal_runs]
    faults = [p for r, p in (history.faults.get(detector) or {}).items() if r in fault_runs]
    failed = sum(p <= alpha for p in normal)
    excess = float(binom.sf(failed - 1, len(normal), alpha)) if normal else None
    return Standing(detector, len(normal), int(failed), len(faults), int(sum(p <= alpha for p in faults)), situation,
                    trusted=excess is None or excess > level, excess_p=excess)


def rate_shares(caught: Mapping[str, int]) -> dict[str, float]:
    """Each detector's share of the rate from the faults it caught: ``1 +`` its catches, scaled to
    a mean of 1 (a detector that caught nothing keeps a little, for a fault of a new kind)."""
    total = sum(1 + k for k in caught.values())
    return {d: round((1 + k) * len(caught) / total, 4) for d, k in caught.items()}


def catches(history: History, detectors: tuple[str, ...], faults: set[str], alpha: float) -> dict[str, set[str]]:
    """The faults of ``faults`` each detector caught (p at most ``alpha``)."""
    return {d: {r for r, p in (history.faults.get(d) or {}).items() if r in faults and p <= alpha} for d in detectors}


def shares(caught: Mapping[str, set[str]], faults: set[str], leave_out: str | None = None) -> dict[str, float] | None:
    """The shares of the rate (:func:`rate_shares`) learned from ``faults`` without ``leave_out``;
    None (equal shares) for one detector or no fault."""
    if len(caught) < 2 or not faults - {leave_out}:
        return None
    return rate_shares({d: len(runs - {leave_out}) for d, runs in caught.items()})


def combined(p_values: Mapping[str, float], weights: dict[str, float] | None, combination: str) -> float | None:
    """The p-value of ``p_values`` (those of one candidate's detectors that judged) combined."""
    finite = {d: float(p) for d, p in p_values.items() if p is not None and np.isfinite(p)}
    if not finite:
        return None
    if len(finite) == 1:
        return next(iter(finite.values()))
    return pvalues.combined_pvalue(list(finite.values()), combination,
                                   [weights[d] for d in finite] if weights else None)


def replay(candidate: tuple[str, ...], history: History, normal_runs: set[str], fault_runs: set[str], *,
           alpha: float, combination: str, allowed: float = 0.0) -> tuple[float, int]:
    """A candidate's record score on the situation's verified runs: the share of normal runs it
    passed (false alarms up to the ``allowed`` share not charged: the rate lets that many fail)
    plus the share of faults it caught (a term only where such runs exist); and its false alarms.
    Each run is judged by the candidate's detectors that judged it, their shares learned without
    it; a run none of them judged counts as passed."""
    caught_by = catches(history, candidate, fault_runs, alpha)

    def fails(run: str, source: Mapping[str, Mapping[str, float]]) -> bool:
        ps = {d: source[d][run] for d in candidate if run in (source.get(d) or {})}
        p = combined(ps, shares(caught_by, fault_runs, leave_out=run), combination)
        return p is not None and p <= alpha
    false_alarms = sum(fails(r, history.normals) for r in normal_runs)
    caught = sum(fails(r, history.faults) for r in fault_runs)
    score = (1.0 - max(0.0, false_alarms / len(normal_runs) - allowed) if normal_runs else 0.0) + \
        (caught / len(fault_runs) if fault_runs else 0.0)
    return score, false_alarms


@dataclass(frozen=True)
class TrustRule:
    """How the record is read (``report`` in params.yaml): ``alpha`` the false-alarm rate,
    ``level`` the binomial tail at which a detector's false alarms are more than the rate explains,
    ``min_runs`` the normal runs of a lab that make its own record, ``combination`` of the deciders'
    p-values, ``allowed`` the share of normal runs a candidate may fail uncharged (default
    ``alpha``, the rate's own); ``ties`` how equal records are decided: ``more`` detectors (one
    run's odd p-value then moves the verdict less), or ``fewer_with_faults``: fewer where the
    situation holds verified faults (a member that caught nothing more only adds false alarms),
    more where it holds none (a variant, measured in ``docs/results/robustness.md``)."""

    alpha: float = 0.05
    level: float = 0.05
    min_runs: int = 3
    combination: str = "simes"
    allowed: float | None = None
    ties: str = "more"


def choose(p_values: Mapping[str, float | None], history: History, rule: TrustRule, *, lab: str | None = None,
           leave_out: str | None = None) -> Choice:
    """The meta-decision (module docstring) over the detectors that judged the run (``p_values``,
    None = could not judge): which decide, and the p-value the verdict compares with ``rule.alpha``.
    ``lab``: the run's lab; ``leave_out``: the run itself when it is one of the history's
    (leave-one-out)."""
    alpha, level, min_runs, combination = rule.alpha, rule.level, rule.min_runs, rule.combination
    allowed = alpha if rule.allowed is None else rule.allowed
    judged = tuple(d for d, p in p_values.items() if p is not None and np.isfinite(p))
    normal_runs, situation = history.situation(lab, min_runs, leave_out)
    fault_runs = history.fault_runs(leave_out)
    standings = {d: standing(d, history, normal_runs, fault_runs, situation, alpha=alpha, level=level)
                 for d in judged}
    if not judged:
        return Choice((), None, None, standings, reason="no detector could judge the run")
    trusted = tuple(d for d in judged if standings[d].trusted)
    if not trusted:
        best = min(judged, key=lambda d: (standings[d].normal_failed / max(1, standings[d].normal_runs),
                                          -standings[d].faults_caught, d))
        return Choice((best,), float(p_values[best]), None, standings,
                      reason=("every detector failed more of this history's normal runs than the rate explains; "
                              "the one with the fewest false alarms decides"))
    others = tuple(d for d in trusted if d not in SELF_CONTAINED)
    candidates = [(d,) for d in trusted] + [c for c in dict.fromkeys((trusted, others)) if len(c) > 1]
    scored = {c: replay(c, history, normal_runs, fault_runs, alpha=alpha, combination=combination, allowed=allowed)
              for c in candidates}
    fewer = rule.ties == "fewer_with_faults" and bool(fault_runs)
    best = max(candidates, key=lambda c: (round(scored[c][0], 9), -len(c) if fewer else len(c), -scored[c][1]))
    weights = shares(catches(history, best, fault_runs, alpha), fault_runs)
    dropped = [d for d in judged if not standings[d].trusted]
    reason = ("the best record on this history's verified runs"
              + ("; left out for failing more normal runs than the rate explains: "
                 + "; ".join(standings[d].sentence() for d in dropped) if dropped else ""))
    return Choice(best, combined({d: p_values[d] for d in best}, weights, combination), weights, standings,
                  {"+".join(c): v[0] for c, v in scored.items()}, reason)
