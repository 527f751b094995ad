"""One decision per run from its detectors' evidence (:class:`Decision`): the p-values
combined at the false-alarm rate (Simes or Bonferroni), the detectors its lab sets aside, the
record's choice (:mod:`pipelines.verdict.record`), no baseline; then the team's objectives
(:func:`with_objectives`).  The argument: docs/methods/calibration.md and objectives.md."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, TypedDict

import numpy as np

from pipelines.objectives.gates import Evaluation
from pipelines.protocol import DetectorResult, RunJudged
from pipelines.stats import pvalues
from pipelines.storage.stage_files import WeightedRun
from pipelines.verdict import record
from pipelines.verdict.evidence import Evidence
from pipelines.verdict.rule import HeadlineRule


Verdict = Literal["pass", "fail", "no_baseline"]


def headline_verdict(verdicts: dict[str, str | None], rule: str) -> Verdict:
    """The run's verdict from the methods' verdicts (None = the method could not judge)."""
    judged: dict[str, Verdict] = {k: "fail" if v == "fail" else "pass" for k, v in verdicts.items()
                                  if v in ("pass", "fail")}
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
                       weights: dict[str, float] | None = None) -> tuple[Verdict, float | None]:
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


class FaultWeighting(TypedDict):
    """The detectors' shares of the false-alarm rate learned from the history's verified faults
    (:func:`fault_weights`): the faults every detector judged, how many each caught, the shares."""

    faults: int
    caught: dict[str, int]
    weights: dict[str, float]


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
           weighting: FaultWeighting | None = None) -> tuple[Verdict, float | None]:
    """The run's verdict and, under ``calibrated``, the combined p-value of ``used``
    (:func:`combined_detectors`), weighted by ``weighting`` (:func:`fault_weights`) when given."""
    if rule.verdict_rule != "calibrated":
        return headline_verdict(ev.verdicts, rule.verdict_rule), None
    return calibrated_verdict(ev.verdicts, used, rule.false_alarm_rate, rule.combination,
                              weighting["weights"] if weighting else None)


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
    """What decided one run, one immutable value made in three steps, each a new value: the
    detectors' decision (:func:`decide_run`), its counters explained (:meth:`explained`: practical
    significance), the team's objectives heard (:meth:`heard`).

    ``verdict`` and ``p_value``; the detectors whose p-values it rests on (``used``: detector ->
    p-value, None for one that could not judge) and those set aside for the run's lab
    (``set_aside``: detector -> why); the learned shares (``weighting``) or the record's choice
    (``choice``, under ``report.detector_trust: record``); why the run could not be judged
    (``unjudged``); the counters that explain a failed run (``flagged``); the detectors' verdict
    before the objectives were heard (``statistical``) and what the objectives made of it
    (``objectives``: the verdict file's ``details.decision``, None when the system has none)."""

    verdict: Verdict
    p_value: float | None
    used: dict[str, float | None]
    set_aside: dict[str, str]
    weighting: FaultWeighting | None = None
    choice: record.Choice | None = None
    unjudged: str | None = None
    flagged: tuple[str, ...] = ()
    objectives: dict[str, Any] | None = None

    def explained(self, flagged: list[str]) -> "Decision":
        """The decision with a failed run's counters (:func:`evidence.failed_counters`): a failure
        none of whose counters changed enough to matter (``significance.min_effect_pct``) passes,
        the one way the counters change the verdict."""
        if self.verdict != "fail":
            return replace(self, flagged=())
        return replace(self, verdict="fail" if flagged else "pass", flagged=tuple(flagged))

    def heard(self, evaluation: Evaluation | None) -> "Decision":
        """The decision once the team's objectives are heard (docs/methods/objectives.md): a failed
        evaluation that is not advisory fails the run, whatever the detectors found, its failed
        objectives' counters first among the flagged; a warning, an advisory failure or a pass
        leave the detectors' verdict as it is."""
        if evaluation is None:
            return self
        statistical, fails = self.verdict, evaluation.fails_run
        flagged = list(self.flagged)
        if fails:
            flagged = list(dict.fromkeys([o.counter for o in evaluation.failed()] + flagged))
        by = ("objectives and detectors" if fails and statistical == "fail" else "objectives" if fails
              else "detectors" if statistical in ("pass", "fail") else "none")
        return replace(self, verdict="fail" if fails else statistical, flagged=tuple(flagged),
                       objectives={"decided_by": by, "statistical_verdict": statistical,
                                   "objectives_result": evaluation.result, "advisory": evaluation.advisory})


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
