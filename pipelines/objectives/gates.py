"""A quality gate evaluated as Keptn's lighthouse service evaluates one: each objective's criteria
against its indicator's value (and the aggregate of earlier results), each objective scored, the total
score against the pass and warning percentages (docs/methods/objectives.md).

* Criteria inside one list must all hold; the lists are alternatives (one list holding is enough).
* An objective whose ``pass`` criteria hold scores its weight; otherwise one whose ``warning``
  criteria hold scores half of it; otherwise it fails and scores 0, and a failed key indicator fails
  the whole evaluation.
* The score is the objectives' scores over the sum of the weights of those scored, in percent: at
  least ``total_score.pass`` passes, at least ``total_score.warning`` warns, below fails.
* Relative criteria compare with the ``comparison``'s aggregate of the indicator's values in the
  earlier results it chooses (the newest ``number_of_comparison_results``, or one, whose overall
  result ``include_result_with_score`` admits).

Where Keptn leaves a case open (the choices are written in docs/methods/objectives.md):

* a relative criterion with no earlier value to compare with is *not judged* (Keptn counts it as
  held): it is listed, and the objective's other criteria judge it; a list left with no criterion
  judges nothing;
* an objective none of whose ``pass`` lists can be judged is ``no_comparison`` and not scored, whatever
  its warning criteria say (a warning is the band below a pass that cannot be placed yet);
* an objective whose counter the run lacks is ``no_value`` and not scored (Keptn fails it);
* an objective without ``pass`` criteria is ``info``: its value is shown, not scored (as in Keptn);
* with nothing scored the evaluation passes with 100 % (as in Keptn), and says that nothing was judged.

Source: Keptn's lighthouse service, ``evaluate_sli_handler.go`` (``evaluateObjectives``,
``calculateScore``, ``evaluateComparison``, ``calculatePercentile``).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pipelines.objectives.files import Comparison, Criterion, Gate, Objective
from pipelines.storage.stage_files import ObjectiveEntry, ObjectivesBlock

Result = Literal["pass", "warning", "fail"]
ObjectiveStatus = Literal["pass", "warning", "fail", "no_comparison", "no_value", "info"]
SCORED = ("pass", "warning", "fail")


@dataclass(frozen=True)
class ObjectiveResult:
    """One objective judged on one run: its indicator's ``value``, the aggregate of earlier results it
    was compared with (``compared_value``) and the change from it, the criteria as written, those
    ``violated`` and those ``not_judged``, its ``result`` and ``score``."""

    sli: str
    display_name: str
    counter: str
    aggregate: str
    value: float | None
    compared_value: float | None
    change_pct: float | None
    key_sli: bool
    weight: int
    result: ObjectiveStatus
    score: float
    passes: tuple[tuple[str, ...], ...]
    warnings: tuple[tuple[str, ...], ...]
    violated: tuple[str, ...]
    not_judged: tuple[str, ...]
    targets: tuple[tuple[str, float], ...] = ()

    def to_json(self) -> ObjectiveEntry:
        """The contract's entry (§2 ``objectives.objectives[]``) and the bounds each criterion set."""
        return {"sli": self.sli, "display_name": self.display_name, "counter": self.counter,
                "aggregate": self.aggregate, "value": _round(self.value), "compared_value": _round(self.compared_value),
                "change_pct": None if self.change_pct is None else round(self.change_pct, 2),
                "key_sli": self.key_sli, "weight": self.weight, "result": self.result, "score": self.score,
                "pass": [list(c) for c in self.passes], "warning": [list(c) for c in self.warnings],
                "violated": list(self.violated), "not_judged": list(self.not_judged),
                "targets": {text: _round(bound) for text, bound in self.targets}}


@dataclass(frozen=True)
class Evaluation:
    """A run's evaluation: its ``result`` (pass, warning, fail), ``score_pct``, whether it only advises
    (``advisory``: it never fails the run), the earlier runs its relative criteria compared with,
    and each objective's result; ``judged``: how many objectives were scored."""

    result: Result
    score_pct: float
    advisory: bool
    compared_with: tuple[str, ...]
    objectives: tuple[ObjectiveResult, ...]
    judged: int
    key_failed: tuple[str, ...] = ()

    @property
    def fails_run(self) -> bool:
        """Whether this evaluation fails the run it judged (a failed evaluation that is not advisory)."""
        return self.result == "fail" and not self.advisory

    def failed(self) -> list[ObjectiveResult]:
        return [o for o in self.objectives if o.result == "fail"]

    def to_json(self) -> ObjectivesBlock:
        """The verdict file's ``objectives`` block (contract §2)."""
        return {"result": self.result, "score_pct": round(self.score_pct, 2), "advisory": self.advisory,
                "compared_with": list(self.compared_with), "judged": self.judged,
                "key_failed": list(self.key_failed), "objectives": [o.to_json() for o in self.objectives]}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Evaluation:
        return cls(result=doc["result"], score_pct=float(doc["score_pct"]), advisory=bool(doc["advisory"]),
                   compared_with=tuple(doc["compared_with"]), judged=int(doc.get("judged", 0)),
                   key_failed=tuple(doc.get("key_failed") or ()),
                   objectives=tuple(ObjectiveResult(
                       sli=o["sli"], display_name=o["display_name"], counter=o["counter"], aggregate=o["aggregate"],
                       value=o["value"], compared_value=o["compared_value"], change_pct=o["change_pct"],
                       key_sli=o["key_sli"], weight=o["weight"], result=o["result"], score=o["score"],
                       passes=tuple(tuple(c) for c in o["pass"]), warnings=tuple(tuple(c) for c in o["warning"]),
                       violated=tuple(o["violated"]), not_judged=tuple(o["not_judged"]),
                       targets=tuple((k, v) for k, v in (o.get("targets") or {}).items()))
                       for o in doc["objectives"]))


def _round(value: float | None) -> float | None:
    return None if value is None else float(f"{value:.6g}")


def keptn_percentile(values: Sequence[float], share: float) -> float:
    """Keptn's percentile of earlier values: the rank ``share * (n + 1)``, interpolated, clamped to
    the smallest and largest (lighthouse ``calculatePercentile``)."""
    ordered = sorted(values)
    rank = share * (len(ordered) + 1)
    if rank < 1.0:
        return ordered[0]
    if rank >= len(ordered):
        return ordered[-1]
    lower, upper = ordered[int(rank) - 1], ordered[int(rank)]
    return lower + (rank - math.floor(rank)) * (upper - lower)


def aggregate_earlier(values: Sequence[float], function: str) -> float:
    """The aggregate of earlier values relative criteria compare with (``comparison.aggregate_function``)."""
    if function == "avg":
        return sum(values) / len(values)
    return keptn_percentile(values, {"p50": 0.5, "p90": 0.9, "p95": 0.95}[function])


def chosen_earlier(comparison: Comparison, earlier: Sequence[tuple[str, Evaluation]]) -> list[tuple[str, Evaluation]]:
    """The earlier results relative criteria compare with: from ``earlier`` (newest first), those whose
    overall result ``include_result_with_score`` admits, the newest ``comparison.results`` of them."""
    admitted = {"pass": ("pass",), "pass_or_warn": ("pass", "warning"), "all": ("pass", "warning", "fail")}
    keep = admitted[comparison.include_result_with_score]
    return [(run, e) for run, e in earlier if e.result in keep][: comparison.results]


def _judge_lists(lists: tuple[tuple[Criterion, ...], ...], value: float, compared: float | None,
                 violated: list[str], not_judged: list[str], targets: dict[str, float]) -> bool | None:
    """Whether one of ``lists`` holds (each list: all its judged criteria); None when no list could be
    judged.  Fills the criteria violated, those not judged, and the bound each judged criterion set."""
    outcome: bool | None = None
    for criteria in lists:
        judged = [c for c in criteria if not c.relative or compared is not None]
        not_judged.extend(c.text for c in criteria if c not in judged)
        if not judged:
            continue
        holds = True
        for c in judged:
            bound = c.target(compared if compared is not None else 0.0)
            targets[c.text] = bound
            if not c.holds(value, bound):
                holds = False
                violated.append(c.text)
        outcome = holds or bool(outcome)
    return outcome


def judge_objective(objective: Objective, counter: str, aggregate: str, value: float | None,
                    earlier_values: Sequence[float], function: str) -> ObjectiveResult:
    """One objective on one run (module docstring), ``earlier_values`` the indicator's values in the
    earlier results chosen."""
    compared = aggregate_earlier(earlier_values, function) if earlier_values else None
    change = (100.0 * (value - compared) / abs(compared)) if value is not None and compared else None
    violated: list[str] = []
    not_judged: list[str] = []
    targets: dict[str, float] = {}
    status: ObjectiveStatus
    if value is None:
        status = "no_value"
    elif not objective.passes:
        status = "info"
    else:
        passed = _judge_lists(objective.passes, value, compared, violated, not_judged, targets)
        if passed is None:
            status = "no_comparison"
        elif passed:
            status = "pass"
        elif objective.warnings and _judge_lists(objective.warnings, value, compared, violated, not_judged, targets):
            status = "warning"
        else:
            status = "fail"
    score = {"pass": float(objective.weight), "warning": 0.5 * objective.weight}.get(status, 0.0)
    return ObjectiveResult(
        sli=objective.sli, display_name=objective.display_name, counter=counter, aggregate=aggregate, value=value,
        compared_value=compared, change_pct=change, key_sli=objective.key_sli, weight=objective.weight,
        result=status, score=score, passes=tuple(tuple(c.text for c in lst) for lst in objective.passes),
        warnings=tuple(tuple(c.text for c in lst) for lst in objective.warnings),
        violated=tuple(dict.fromkeys(violated)), not_judged=tuple(dict.fromkeys(not_judged)),
        targets=tuple(targets.items()))


def total(results: Sequence[ObjectiveResult], total_pass: float, total_warning: float | None) -> tuple[Result, float]:
    """The evaluation's result and score in percent from its objectives' (Keptn's ``calculateScore``)."""
    scored = [r for r in results if r.result in SCORED]
    maximum = sum(r.weight for r in scored)
    if maximum == 0:
        return "pass", 100.0
    pct = 100.0 * sum(r.score for r in scored) / maximum
    key_failed = any(r.key_sli and r.result == "fail" for r in scored)
    if pct >= total_pass and not key_failed:
        return "pass", pct
    if total_warning is not None and not key_failed and pct >= total_warning:
        return "warning", pct
    return "fail", pct


def evaluate(gate: Gate, values: Mapping[str, float | None], earlier: Sequence[tuple[str, Evaluation]], *,
             advisory: bool = False) -> Evaluation:
    """The run's evaluation from its indicators' ``values`` (indicator -> value, None where the run
    lacks the counter) and the system's ``earlier`` evaluations, newest first."""
    chosen = chosen_earlier(gate.comparison, earlier)
    results = []
    for objective in gate.objectives:
        indicator = gate.indicators[objective.sli]
        before = [v for _, e in chosen for o in e.objectives if o.sli == objective.sli
                  for v in (o.value,) if v is not None]
        results.append(judge_objective(objective, indicator.counter, indicator.aggregate, values.get(objective.sli),
                                       before, gate.comparison.aggregate_function))
    result, pct = total(results, gate.total_pass, gate.total_warning)
    return Evaluation(result=result, score_pct=pct, advisory=advisory, compared_with=tuple(r for r, _ in chosen),
                      objectives=tuple(results), judged=sum(r.result in SCORED for r in results),
                      key_failed=tuple(r.sli for r in results if r.key_sli and r.result == "fail"))
