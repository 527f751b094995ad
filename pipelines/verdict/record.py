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
other run (``History.self_contained``: the run against itself), are replayed on the same record — every verified run of
the situation, its own catches left out of the weights that judge it — and the one with the best
record decides: the share of normal runs passed (false alarms up to the rate are not charged: the
rate allows them, and one more normal run failed among forty says nothing of a detector) plus the
share of faults caught (either term alone when the history has no faults, or no normal run of the
situation).  Ties go to more
detectors (one run's odd p-value then moves the verdict less), then to fewer false alarms.  The
choice depends on the history alone, never on the run judged, so the chosen test keeps its level
(``pvalues.combined_pvalue``).  Nothing trusted at all (every detector failed this situation's
normal runs beyond the rate): the one with the fewest false alarms decides, and says so.

**How much the record knows** (``TrustRule.reading: "uncertain"``, the default).  A record of 4
normal runs cannot tell a detector with a 5 % false-alarm rate from one with 40 %, and one of 12
cannot tell 0 false alarms from 2; choosing the best of seven candidates on such a record picks the
luckiest.  So:

* **the size at which the record decides** is derived from its level, not tuned: ``n_min`` verified
  normal runs of the system, the fewest in which a detector that failed none of them is shown (at
  ``level``, one-sided) to fail fewer than half of the normal runs: ``0.5^n ≤ level``, 5 at 5 %.
  Below that the record cannot tell a detector from one that fails normal runs as often as a coin;
* **with fewer** (:func:`small_history`) no record weighs the detectors.  The run against itself decides: its
  null compares the run with itself, so it does not assume that this run is like the history's other
  runs (of other days, builds and labs), the one assumption so few runs cannot check; when it cannot
  judge the run, or failed more of the normal runs than the rate explains, the run is not judged
  (``no_baseline``, with the reason), never passed in silence;
* **a lab the history has never seen** (no verified normal run of the run's lab) is a history of
  zero runs for that situation: the record read on the other labs is not this run's.  The detectors
  whose p-value comes from a null of normal runs judged across labs (``labs.cross_lab_null``) decide,
  as they are built for a lab shift; with none, the run against itself; with neither, ``no_baseline``;
* **with enough**, candidates the record cannot tell apart are equal: one candidate is better than
  another only when, over the situation's verified runs both judged, the runs only it got right
  outnumber those only the other got right beyond chance (exact McNemar, one-sided, at ``level``);
  the candidates no other is better than are the equals, and the page names them beside the one
  that decides, so a reader sees how little separated them.  Among the equals the best record
  decides: each is a valid test, so any keeps the rate, and the best record is still the likeliest
  to be right (the largest of them, measured, brings back false alarms: docs/results/robustness.md);
* **a clean record from a null that finds nothing** (:func:`silent_null`): where the history holds no
  verified fault, a record shows only false alarms, and a detector whose p-values on the normal runs lie
  above 1/2 on more of them than ``Binomial(n, 1/2)`` allows at ``level`` (its score is 0 on nearly every
  run) has a clean record by construction: the record cannot weigh what it would catch, as a record
  of fewer than ``n_min`` runs cannot.  When such a detector's record is the best, the run against
  itself decides, as on a small history (``silent: "within"``; :func:`unweighed`); when the run cannot
  be compared with itself the best record decides and the page says what its record cannot show;
* whatever the size, a p-value below ``1/(n + 1)`` of its null's ``n`` normal runs lies beyond every
  run of that null: how far beyond is the fitted tail's assumption, which those runs cannot check, and
  the page says so beside the detector's record (:func:`beyond_calibration`).

Pure: p-values in, a :class:`Choice` out.  Cited: the calibration of every detector against the
history's normal runs is Nguyen 2017 §7.5.3 (seed 004), the per-system weighting of models by
their past accuracy Foo et al. 2015 §3.3 (seed 003), applied to the detectors.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from pipelines.stats import pvalues

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
    title: str = ""                  # how the page calls the detector (its name when empty)
    false_alarms_at_most: float | None = None   # what the record shows of the rate (rate_bounds)
    catches_at_least: float | None = None

    @property
    def name(self) -> str:
        """How the page calls the detector: its title, else its name."""
        return self.title or self.detector

    def sentence(self) -> str:
        """"the run against itself: 0 of 36 normal runs failed (false alarms at most 8 %), 30 of 31
        faults caught (at least 85 %)": each count with what it shows of the rate behind it."""
        parts = [f"{self.normal_failed} of {self.normal_runs} normal runs"
                 + (" of its lab" if self.situation == "this lab" else "") + " failed"
                 + (f" (false alarms at most {_percent(self.false_alarms_at_most)})"
                    if self.false_alarms_at_most is not None else "")]
        if self.faults:
            parts.append(f"{self.faults_caught} of {self.faults} faults caught"
                         + (f" (at least {_percent(self.catches_at_least)})" if self.catches_at_least is not None else ""))
        return f"{self.name}: " + ", ".join(parts)

    def to_json(self) -> dict:
        return {"normal_runs": self.normal_runs, "normal_failed": self.normal_failed, "faults": self.faults,
                "faults_caught": self.faults_caught, "situation": self.situation, "trusted": self.trusted,
                "excess_p": None if self.excess_p is None else round(self.excess_p, 6),
                "false_alarms_at_most": None if self.false_alarms_at_most is None else round(self.false_alarms_at_most, 4),
                "catches_at_least": None if self.catches_at_least is None else round(self.catches_at_least, 4),
                "title": self.name, "sentence": self.sentence()}


def _named(detectors: tuple[str, ...], standings: Mapping[str, Standing], sep: str) -> str:
    """The detectors as the page calls them (:attr:`Standing.name`; a name with no standing as it is)."""
    return sep.join(standings[d].name if d in standings else d for d in detectors)


def _percent(share: float) -> str:
    """A share as the page writes it: 0.221 -> "22 %"."""
    return f"{100 * share:.0f} %"


def rate_bounds(failed: int, runs: int, caught: int, faults: int, level: float) -> tuple[float | None, float | None]:
    """What a record shows of the rates behind its counts, one-sided at ``level`` (Clopper & Pearson's
    exact bounds): the false-alarm rate is at most the ``1 - level`` quantile of ``Beta(failed + 1,
    runs - failed)`` (``1 - level^(1/n)`` when none failed: 22 % from 0 of 12, 8 % from 0 of 36), the
    catch rate at least the ``level`` quantile of ``Beta(caught, faults - caught + 1)``.  None where
    the record holds no such run."""
    from scipy.stats import beta

    upper = (1.0 if failed >= runs else float(beta.ppf(1.0 - level, failed + 1, runs - failed))) if runs else None
    lower = (0.0 if caught <= 0 else float(beta.ppf(level, caught, faults - caught + 1))) if faults else None
    return upper, lower


@dataclass(frozen=True)
class Null:
    """What a detector judged the run against: the normal runs of its null and whether they were
    judged across labs (``cross_lab``) or inside their own (``same_lab``)."""
    runs: int | None = None
    kind: str | None = None

    def floor(self) -> float | None:
        """The smallest p-value ``runs`` normal runs can support without a fitted tail: ``1/(n + 1)``."""
        return 1.0 / (self.runs + 1) if self.runs else None


def n_min(level: float) -> int:
    """The verified normal runs a record needs before it weighs the detectors (module docstring):
    the fewest in which a detector that failed none of them is shown, at ``level``, to fail fewer
    than half of the normal runs: ``0.5^n <= level``, 5 at 5 %."""
    return max(1, math.ceil(math.log(level) / math.log(0.5) - 1e-9))


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
class History:
    """Every detector's record on the history's verified runs: detector -> run -> p-value, for the
    normal runs and the faults, and each run's lab (``labs.lab_key``); the detectors whose null
    needs no other run (``self_contained``: the run against itself; the record tries the trusted
    detectors together both with and without them, so naming one never takes away the combination
    of the others that the history showed right) and how the page calls each (``titles``)."""
    normals: Mapping[str, Mapping[str, float]]
    faults: Mapping[str, Mapping[str, float]]
    lab_of: Mapping[str, str] = field(default_factory=dict)
    self_contained: tuple[str, ...] = ()
    titles: Mapping[str, str] = field(default_factory=dict)
    verified: frozenset[str] = frozenset()

    def counted(self, lab: str | None, min_runs: int, leave_out: str | None = None) -> Counted:
        """What the record is read on for a run of ``lab`` (:class:`Counted`).  A verified normal run
        counts whether or not a detector has a record of it (``verified``: the system's passed runs
        the run is compared with; two passed runs leave no run to hold out, yet they are two runs
        of the lab)."""
        recorded = {r for runs in self.normals.values() for r in runs} - {leave_out}
        every = (recorded | set(self.verified)) - {leave_out}
        own_recorded = {r for r in recorded if lab is not None and self.lab_of.get(r) == lab}
        own = {r for r in every if lab is not None and self.lab_of.get(r) == lab}
        if len(own_recorded) >= min_runs:
            return Counted(len(own), len(self.fault_runs(leave_out)), on_lab=True, of_lab=True, lab_has_runs=True)
        return Counted(len(every), 0, on_lab=False, of_lab=bool(own) and own == every, lab_has_runs=bool(own))


    def situation(self, lab: str | None, min_runs: int, leave_out: str | None = None) -> tuple[set[str], str]:
        """The normal runs a target of ``lab`` is judged by: those of its lab when at least
        ``min_runs`` of them have a record, else every one; and which ("this lab", "every lab")."""
        every = {r for runs in self.normals.values() for r in runs} - {leave_out}
        own = {r for r in every if lab is not None and self.lab_of.get(r) == lab}
        return (own, "this lab") if len(own) >= min_runs else (every, "every lab")

    def fault_runs(self, leave_out: str | None = None) -> set[str]:
        return {r for runs in self.faults.values() for r in runs} - {leave_out}


@dataclass(frozen=True)
class Counted:
    """The verified runs a run's record is read on: its ``normals`` (the run's lab's when the record
    is read there, ``on_lab``; else the system's), the verified ``faults`` a lab's record reads beside
    them (every fault of the history), whether the normals are all of the run's lab (``of_lab``, for
    the page) and whether its lab has any verified normal run.

    Whether the record can weigh the detectors (:func:`n_min`): read on the system, by its normal
    runs, whose nulls every detector's p-value rests on; read on one lab, by the runs of that record,
    its lab's normal runs and the history's faults (a detector right on all of them is told from a
    coin).  A lab of 4 normal runs in a history of faults can weigh them; 4 normal runs alone cannot."""

    normals: int
    faults: int
    on_lab: bool
    of_lab: bool
    lab_has_runs: bool

    def can_weigh(self, level: float) -> bool:
        return (self.normals + self.faults if self.on_lab else self.normals) >= n_min(level)

    def words(self) -> str:
        """``4 verified normal runs of this lab`` (and its faults, when a lab's record reads them)."""
        return runs_of(self.normals, self.of_lab) + (
            f" and {self.faults} verified fault{'s' * (self.faults != 1)}" if self.faults else "")


def standing(detector: str, history: History, normal_runs: set[str], fault_runs: set[str], situation: str, *,
             alpha: float, level: float) -> Standing:
    """A detector's false alarms on ``normal_runs`` and catches on ``fault_runs`` (those it judged),
    and whether it keeps its say: its false alarms are within what ``alpha`` explains at ``level``
    (a detector with no normal run on record keeps it: nothing charges it)."""
    from scipy.stats import binom

    normal = [p for r, p in (history.normals.get(detector) or {}).items() if r in normal_runs]
    faults = [p for r, p in (history.faults.get(detector) or {}).items() if r in fault_runs]
    failed = sum(p <= alpha for p in normal)
    caught = int(sum(p <= alpha for p in faults))
    excess = float(binom.sf(failed - 1, len(normal), alpha)) if normal else None
    at_most, at_least = rate_bounds(int(failed), len(normal), caught, len(faults), level)
    return Standing(detector, len(normal), int(failed), len(faults), caught, situation,
                    trusted=excess is None or excess > level, excess_p=excess, title=history.titles.get(detector, ""),
                    false_alarms_at_most=at_most, catches_at_least=at_least)


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


def right_on(candidate: tuple[str, ...], history: History, normal_runs: set[str], fault_runs: set[str], *,
             alpha: float, combination: str) -> dict[str, bool]:
    """Per verified run of the situation a detector of ``candidate`` judged: whether the candidate
    was right (passed a normal run, failed a fault), judged as :func:`replay` judges it."""
    caught_by = catches(history, candidate, fault_runs, alpha)
    out = {}
    for runs, source, truth in ((normal_runs, history.normals, False), (fault_runs, history.faults, True)):
        for run in runs:
            ps = {d: source[d][run] for d in candidate if run in (source.get(d) or {})}
            if not ps:
                continue
            p = combined(ps, shares(caught_by, fault_runs, leave_out=run), combination)
            out[run] = (p is not None and p <= alpha) == truth
    return out


def better(a: Mapping[str, bool], b: Mapping[str, bool], level: float) -> bool:
    """Whether the record ``a`` (run -> right) is better than ``b`` beyond chance: over the runs
    both judged, those only ``a`` got right outnumber those only ``b`` got right, at ``level``
    (exact McNemar, one-sided: ``P(X >= k | n, 1/2)``)."""
    from scipy.stats import binom

    common = set(a) & set(b)
    only_a = sum(a[r] and not b[r] for r in common)
    only_b = sum(b[r] and not a[r] for r in common)
    n = only_a + only_b
    return n > 0 and only_a > only_b and float(binom.sf(only_a - 1, n, 0.5)) <= level


def silent_null(detector: str, history: History, normal_runs: set[str], level: float) -> str | None:
    """Why a detector's clean record says little of what it would catch, or None: its p-values on the
    situation's normal runs lie too high to be those of a detector that could fail a run (under the
    null a valid p-value is at most 1/2 half the time; fewer such runs than ``Binomial(n, 1/2)`` gives
    at ``level``): its null says "nothing unusual" of nearly every run, as a score of 0 does."""
    from scipy.stats import binom

    ps = [p for r, p in (history.normals.get(detector) or {}).items() if r in normal_runs]
    low = sum(p <= 0.5 for p in ps)
    if not ps or float(binom.cdf(low, len(ps), 0.5)) > level:
        return None
    return (f"its p-value is above 1/2 on {len(ps) - low} of its {len(ps)} normal runs: a clean record from a null "
            "that finds nothing unusual in nearly every run, which cannot show what it would catch")


def beyond_calibration(p_values: Mapping[str, float | None], nulls: Mapping[str, Null]) -> dict[str, float]:
    """The detectors whose p-value lies below what its null's runs can support: detector -> the floor."""
    out = {}
    for d, p in p_values.items():
        floor = (nulls.get(d) or Null()).floor()
        if p is not None and floor is not None and np.isfinite(p) and p < floor:
            out[d] = floor
    return out


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
        return read_record(judged_p, judged, standings, history, normal_runs, fault_runs, rule, beyond,
                           counted.normals, of_lab=counted.of_lab)
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


def runs_of(count: int, of_lab: bool) -> str:
    """``4 verified normal runs of this lab``: the one count the record is read on."""
    return f"{count} verified normal run{'s' * (count != 1)}" + (" of this lab" if of_lab else "")


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


def unweighed(p_values: Mapping[str, float], within: str, best: tuple[str, ...], standings: dict[str, Standing],
              silent: dict[str, str], normals: int, beyond: dict[str, float], candidates: dict[str, float],
              equals: tuple[str, ...]) -> Choice:
    """No verified fault in the history, and the best record is a silent null's (module docstring): the
    record cannot weigh what that detector would catch, so, as on a history too small to weigh the
    detectors, the run against itself decides."""
    names = _named(best, standings, " and ")
    head = (f"no verified fault in the history, and the best record on its {normals} normal runs ({names}) comes "
            "from a null that finds nothing unusual in nearly every normal run, so the record cannot show what it "
            "would catch")
    return Choice((within,), float(p_values[within]), None, standings, candidates,
                  reason=(f"{head}: decided by the run against itself, as on a history too small to weigh the "
                          "detectors, because its null compares the run with itself and needs no record"),
                  basis="silent_null", normal_runs=normals, equals=equals, beyond=beyond, silent=silent)


def read_record(p_values: Mapping[str, float], judged: tuple[str, ...], standings: dict[str, Standing],
                history: History, normal_runs: set[str], fault_runs: set[str], rule: TrustRule,
                beyond: dict[str, float], normals: int, *, of_lab: bool = False) -> Choice:
    """A history large enough to weigh the detectors (module docstring): the candidates no other is
    better than beyond chance are equal, the best record among them decides and
    the others are named beside it.  ``normals``: the verified normal runs the record is read on
    (the run's lab's, ``of_lab``, where it is read there).  A failure that rests on a p-value its
    null is too small to calibrate at the rate needs a second witness (:func:`corroborated`)."""
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
            return unweighed(p_values, within, best, standings, silent, normals, beyond, scores, equal_names)
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
