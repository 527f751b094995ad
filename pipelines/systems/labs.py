"""labs: how a target in a lab that none of its baseline runs used is still compared fairly.

Labs differ (hardware, database versions), and a counter's level moves with them for
reasons that are not regressions (Foo et al. 2015, seed 003 §3).  The
baseline of a target is the passed runs of the most similar lab (``history.most_similar``);
when the target's own lab is among them, nothing here applies.  When it is not — a new
lab, or a lab whose runs in the history all failed — charting the target against another
lab's runs fails every normal run of it (or, with wider limits, passes its regressions).

What the history can teach instead is the *lab's level*: the verified runs of the target's
own lab (passed or failed, never the target itself) give each counter's typical level there,
the baseline runs give it in the baseline's lab, and the difference is the shift that the
lab alone causes.  The target is moved by that shift into the baseline's lab before it is
charted or binned.  The level of a counter is the median, over the lab's runs, of each
run's median; a fault touches a few counters of one run, so the median over runs is not
moved by a minority of failed runs with different faults.  Passed runs of the lab are used
alone when there are ``min_runs`` of them.

A lab can also make a counter wander from run to run more than the baseline's lab does (a
pod's memory that grows through the day): moved by the median, the lab's own runs then
still fall outside the baseline's range.  A counter whose shifted level lies outside the
baseline runs' range (their smallest to largest run median) in more than ``unstable_share``
of the lab's runs cannot be judged against that baseline — the same reasoning as Nguyen's
load-independent counters (seed 004 §5.4: counters that most normal repeats violate) applied
to the lab's runs.  Those counters are ``unstable``: left out of the verdicts and listed.  A
fault moves a few counters of one run, so it is not in most of the lab's runs.  At most
``max_unstable_share`` of the counters are set aside; past that the filter is not applied
and the reason says so.

When the lab has fewer than ``min_runs`` verified runs, nothing can be learned about it:
the status is ``insufficient`` and the report says that the verdict rests on another lab's
runs ("insufficient baseline").  Pure: dicts and frames in, dicts out.

A target judged across labs needs a null judged across labs too.  The detectors'
p-values compare a run's score with the scores of the history's normal runs, each judged by
the others — its own lab's runs among them.  A target whose baseline does not share its lab is
judged without them, so :func:`cross_lab_null` judges each normal run the same way: by the
passed runs of the *other* labs only, with its lab's level learned from its lab's other
verified runs (``adjusted``) or unknown (``insufficient``), on the counters such a target is
judged on (``environment_from``: the whole history teaches which counters follow the
environment, as it does for the target).  :func:`matched_null` then picks, for a target, the
null of its own status when the history has one (Nguyen 2017 §7.5.3, seed 004: the threshold
comes from normal runs judged as the target is); the nulls side by side: docs/results/variants.md.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence, TypedDict, TypeVar

import numpy as np
import pandas as pd

from pipelines.systems.history import HistoryParams, lab_key
from pipelines.storage.run_records import Environment
from pipelines.storage.stage_files import LabSummary

#: A detector's score of a run judged across labs (a number, or the charts' run and window scores).
Score = TypeVar("Score")

STATUSES = ("same_lab", "adjusted", "insufficient")


@dataclass(frozen=True)
class LabParams:
    """What the stages need of the ``history`` params block about labs: :func:`lab_shift`'s
    thresholds (:meth:`shift_kw`) and ``environment_alpha`` (:func:`environment_dependent`)."""

    min_runs: int
    unstable_share: float
    max_unstable_share: float
    environment_alpha: float

    def shift_kw(self) -> dict[str, Any]:
        """The keyword arguments of :func:`lab_shift`."""
        return {"min_runs": self.min_runs, "unstable_share": self.unstable_share,
                "max_unstable_share": self.max_unstable_share}


def lab_params(hist: HistoryParams) -> LabParams:
    """The :class:`LabParams` of the ``history`` params block (its ``lab_*`` keys)."""
    block = hist.block
    return LabParams(min_runs=int(block["lab_min_runs"]), unstable_share=float(block["lab_unstable_share"]),
                     max_unstable_share=float(block["lab_max_unstable_share"]),
                     environment_alpha=float(block["lab_environment_alpha"]))


class LabShift(TypedDict, total=False):
    """What :func:`lab_shift` found (in memory): the lab ``status``, the verified runs of the lab that
    taught its level, why, the counters too ``unstable`` in the lab to judge, those whose level
    follows the environment (:func:`lab_for`), and the ``shift`` per counter (None: none)."""

    status: str
    lab_runs: list[str]
    reason: str | None
    unstable: list[str]
    environment_dependent: list[str]
    shift: pd.Series | None


def lab_shift(target: str, baseline: list[str], envs: dict[str, Environment], verdicts: dict[str, str],
              levels: Callable[[list[str]], pd.DataFrame], *, min_runs: int, unstable_share: float,
              max_unstable_share: float) -> LabShift:
    """The shift that moves ``target`` into its baseline's lab, or why there is none.

    Parameters
    ----------
    target, baseline
        The run judged and the runs it is compared with.
    envs
        Environment of every run named (target, baseline, and the verified runs).
    verdicts
        The verified runs that may teach a lab's level, with their verdict (``pass``/``fail``);
        the target is never used, even when it is listed.
    levels
        ``levels(runs)``: one row per run, its median of every counter.
    min_runs
        The fewest runs of the target's lab that make its level worth learning.
    unstable_share, max_unstable_share
        A counter is unstable when more than ``unstable_share`` of the lab's runs, shifted,
        fall outside the baseline runs' range; at most ``max_unstable_share`` of the counters.

    Returns ``{"status", "lab_runs", "shift", "unstable", "reason"}``: ``status`` is
    ``same_lab`` (a baseline run shares the target's lab: no shift), ``adjusted`` (``shift``
    is a Series per counter, target level minus baseline level, to subtract from the target;
    ``unstable`` the counters to leave out) or ``insufficient`` (``shift`` None).
    """
    key = lab_key(envs.get(target))
    if not baseline or any(lab_key(envs.get(b)) == key for b in baseline):
        return {"status": "same_lab", "lab_runs": [], "shift": None, "unstable": [], "reason": None}
    lab = sorted(r for r, v in verdicts.items() if r != target and lab_key(envs.get(r)) == key)
    passed = [r for r in lab if verdicts[r] == "pass"]
    use = passed if len(passed) >= min_runs else lab
    if len(use) < min_runs:
        return {"status": "insufficient", "lab_runs": use, "shift": None, "unstable": [],
                "reason": (f"no baseline run shares this run's lab, and the history has {len(use)} verified "
                           f"run(s) of it (at least {min_runs} teach its level): the verdict compares "
                           f"it with another lab's runs")}
    lab_levels, base_levels = levels(use), levels(list(baseline))
    shift = (lab_levels.median() - base_levels.median()).dropna()
    moved = lab_levels[shift.index] - shift
    low, high = base_levels[shift.index].min(), base_levels[shift.index].max()
    outside = ((moved.lt(low) | moved.gt(high)) & moved.notna()).sum() / moved.notna().sum().clip(lower=1)
    unstable = sorted(outside[outside > unstable_share].index)
    reason = (f"no baseline run shares this run's lab: its counters are moved by the lab's level, "
              f"learned from {len(use)} verified run(s) of the lab ({len(passed)} passed, "
              f"{len(lab) - len(passed)} failed)")
    if len(unstable) > max_unstable_share * max(1, len(shift)):
        reason += (f"; {len(unstable)} of {len(shift)} counters wander between the lab's runs more than "
                   f"in the baseline's, too many to set aside (more than {max_unstable_share:.0%}): all judged")
        unstable = []
    elif unstable:
        reason += f"; {len(unstable)} counter(s) that wander between the lab's runs are not judged"
    return {"status": "adjusted", "lab_runs": use, "shift": shift, "unstable": unstable, "reason": reason}


def lab_for(target: str, baseline: list[str], envs: dict[str, Environment], verdicts: dict[str, str],
            levels: Callable[[list[str]], pd.DataFrame], lab_kw: LabParams,
            candidates: Sequence[str] = ()) -> LabShift:
    """:func:`lab_shift`, and with an insufficient baseline also the counters whose level differs
    between the labs of ``candidates`` (the passed history, :func:`environment_dependent`):
    another lab's runs say nothing about them, so they are not judged either (``detect``'s rules
    abstain on them too).  ``lab_kw`` is :func:`lab_params`."""
    lab = lab_shift(target, baseline, envs, verdicts, levels, **lab_kw.shift_kw())
    lab["environment_dependent"] = []
    if lab["status"] == "insufficient" and len(candidates) > 1:
        dependent = environment_dependent(levels(list(candidates)), [lab_key(envs[r]) for r in candidates],
                                          alpha=lab_kw.environment_alpha, min_rel_change=0.0)
        lab["environment_dependent"] = sorted(dependent)
        if dependent:
            lab["reason"] = (lab["reason"] or "") + (f"; {len(dependent)} counter(s) whose level differs between the history's "
                              f"labs are not judged")
    return lab


def cross_lab_null(passed: list[str], lab_of: dict[str, str], verdicts: dict[str, str],
                   judge: Callable[[str, list[str], dict[str, str]], tuple[str | None, Score]], *,
                   min_baseline: int = 2, mapper: Callable[[Callable, list], list] | None = None
                   ) -> dict[str, dict[str, Score]]:
    """Each normal run judged the way a target in a lab no baseline run shares is.

    For every run of ``passed`` (normal runs; ``lab_of``: run -> :func:`lab_key`), the baseline is
    the passed runs of the other labs (at least ``min_baseline`` of them, else the run is
    skipped), judged twice: with every verified run of ``verdicts`` available to teach its lab's
    level (``adjusted``), and with none of its lab's (``insufficient``).  ``judge(run, baseline,
    lab_runs)`` returns (the lab status the detector found, its score); a score is kept only under
    the status it was meant to stand for (a lab with too few other runs is ``insufficient`` both
    times, and counts once).  Returns ``{"adjusted": {run: score}, "insufficient": {run: score}}``;
    both empty when the passed runs share one lab.  ``mapper(fn, jobs)`` computes ``[fn(j) for j
    in jobs]`` (``parallel.map_ordered`` spreads the judgements over processes)."""
    null: dict[str, dict[str, Score]] = {"adjusted": {}, "insufficient": {}}
    jobs = []
    for run in judged_across(passed, lab_of, min_baseline=min_baseline):
        baseline = [b for b in passed if lab_of[b] != lab_of[run]]
        unknown = {k: v for k, v in verdicts.items() if lab_of.get(k) != lab_of[run]}
        jobs += [(status, run, baseline, lab_runs) for status, lab_runs in (("adjusted", verdicts),
                                                                            ("insufficient", unknown))]
    judged = (mapper or (lambda fn, items: [fn(x) for x in items]))(lambda job: judge(*job[1:]), jobs)
    for (status, run, _, _), (seen, score) in zip(jobs, judged):
        if seen == status:
            null[status][run] = score
    return null


def judged_across(passed: list[str], lab_of: dict[str, str], *, min_baseline: int = 2) -> list[str]:
    """The runs :func:`cross_lab_null` judges: those with at least ``min_baseline`` passed runs in
    other labs (each is judged twice; a progress count)."""
    return [r for r in passed if sum(lab_of[b] != lab_of[r] for b in passed) >= min_baseline]


def matched_null(status: str, same_lab: dict[str, float], cross_lab: dict[str, dict[str, float]] | None,
                 run_id: str | None = None, *, min_runs: int = 2) -> tuple[dict[str, float], str]:
    """The null a run's score is judged against: the normal runs judged across labs as
    ``status`` (:func:`cross_lab_null`) when the run's baseline is not of its lab and the history
    has at least ``min_runs`` of them, else the same-lab null; ``run_id``'s own score is left
    out of either.  Returns (run -> score, ``"cross_lab"`` or ``"same_lab"``)."""
    matched = {r: v for r, v in ((cross_lab or {}).get(status) or {}).items() if r != run_id}
    if status != "same_lab" and len(matched) >= min_runs:
        return matched, "cross_lab"
    return {r: v for r, v in same_lab.items() if r != run_id}, "same_lab"


def shifted(frame: pd.DataFrame, shift: pd.Series | None) -> pd.DataFrame:
    """``frame`` moved by ``-shift`` (counters without a shift unchanged)."""
    if shift is None or shift.empty:
        return frame
    return frame - shift.reindex(frame.columns).fillna(0.0)


def not_judged(result: LabShift) -> list[str]:
    """The counters a :func:`lab_shift` result (with its ``environment_dependent``) leaves out."""
    return sorted(set(result["unstable"]) | set(result.get("environment_dependent") or []))


def summary(result: LabShift, *, top: int = 10) -> LabSummary:
    """What the verdict file keeps of a :func:`lab_shift` result (JSON-ready)."""
    shift = result.get("shift")
    largest = {}
    if shift is not None and len(shift):
        order = shift.abs().sort_values(ascending=False).index[:top]
        largest = {c: round(float(shift[c]), 6) for c in order}
    return {"status": result["status"], "lab_runs": list(result["lab_runs"]), "reason": result["reason"],
            "unstable_counters": list(result["unstable"]),
            "environment_dependent": list(result.get("environment_dependent") or []), "largest_shifts": largest}


def environment_dependent(levels: pd.DataFrame, env_keys: list[str], *, alpha: float,
                          min_rel_change: float) -> dict[str, float]:
    """Counters whose level differs between the environments of the history.

    ``levels``: one row per prior run (its median of every counter, load-scaled), and
    ``env_keys`` the environment of each row.  A counter depends on the environment when
    its run levels differ between environments (Kruskal-Wallis over the environment
    groups, ``p < alpha``) by at least ``min_rel_change`` of its overall level (range of
    the group medians).  Returns counter -> p-value for the dependent ones; nothing when
    the history has a single environment (nothing to compare).
    """
    from scipy.stats import kruskal

    codes, uniques = pd.factorize(pd.Series(env_keys, index=levels.index), sort=True)
    if len(uniques) < 2:
        return {}
    # one mask per environment, in the keys' order; each counter's groups are its measured values
    # (in the runs' order) under each mask: numpy on the columns, not a pandas groupby per counter
    members = [codes == k for k in range(len(uniques))]
    values = levels.to_numpy(dtype=float)
    out: dict[str, float] = {}
    for j, counter in enumerate(levels.columns):
        x = values[:, j]
        measured = ~np.isnan(x)
        seen = x[measured]
        groups = [g for g in (x[m & measured] for m in members) if g.size]
        if len(groups) < 2 or np.unique(seen).size < 2:
            continue
        medians = [float(np.median(g)) for g in groups]
        scale = abs(float(np.median(seen)))
        if scale <= 0 or (max(medians) - min(medians)) / scale < min_rel_change:
            continue
        p = float(kruskal(*groups).pvalue)
        if p < alpha:
            out[counter] = p
    return out
