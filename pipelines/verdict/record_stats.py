"""What a detector's record on a system's verified runs shows (Nguyen 2017 §7.5.3, seed 004; Foo et
al. 2015 §3.3, seed 003): its standing in a run's situation (false alarms on the normal runs, faults
caught, their Clopper–Pearson bounds), a candidate replayed on the record, two records compared
(exact McNemar), a null that finds nothing, a p-value beyond its null.  How the record is read into
the detectors that decide: :mod:`pipelines.verdict.record`; the argument:
docs/methods/calibration.md, "Which detectors decide" and "How much the record knows"."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

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


def runs_of(count: int, of_lab: bool) -> str:
    """``4 verified normal runs of this lab``: the one count the record is read on."""
    return f"{count} verified normal run{'s' * (count != 1)}" + (" of this lab" if of_lab else "")
