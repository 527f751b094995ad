"""What the detectors said of one run, gathered for its decision (:class:`Evidence`), and the
counters a failed run shows (:func:`failed_counters`; docs/methods/calibration.md, "Practical
significance"; the counters' roles: :data:`~pipelines.protocol.COUNTER_ROLES`)."""
from __future__ import annotations

from collections.abc import Mapping
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pipelines.protocol import DetectorResult
from pipelines.stats import effects


FALLBACK_FLAGS = 5        # a failed run no counter-level method flagged shows its top counters, at most this many


def combine_scores(*scores: dict[str, float]) -> dict[str, float]:
    """Per counter, the mean of the scores of the methods that scored it, most suspicious first."""
    counters = sorted({c for s in scores for c in s})
    out = {c: float(np.mean([s[c] for s in scores if c in s])) for c in counters}
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def top_counters(counter_scores: dict[str, float]) -> list[str]:
    """What a failed run shows when no counter-level method flagged a counter: its top-scored
    counters (``counter_scores`` is most suspicious first), at most ``FALLBACK_FLAGS``, none at 0."""
    return [c for c, v in counter_scores.items() if v > 0][:FALLBACK_FLAGS]


@dataclass(frozen=True)
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
    methods: dict[str, dict[str, Any]] = {}
    verdicts: dict[str, str | None] = {}
    p_values: dict[str, float | None] = {}
    scores: list[float] = []
    flags: dict[str, list[str]] = {}
    reserve: dict[str, list[str]] = {}
    for name, result in results.items():
        if result.judged:
            taken = set(result.page) & set(methods)
            if taken:
                raise ValueError(f"detector {name!r}: its page entries {sorted(taken)} are another detector's; "
                                 "name them after the detector")
            methods.update({entry: dict(page) for entry, page in result.page.items()})
            p_values[name] = result.p_value
            if result.votes:
                verdicts[name] = result.verdict
            if result.run_score is not None:
                scores.append(result.run_score)
            flags[name] = list(result.flagged_counters)
            reserve[name] = list(result.reserve_counters)
    return Evidence(results=results, methods=methods, verdicts=verdicts, p_values=p_values, scores=scores,
                    flags=flags, reserve=reserve,
                    history_faults={k: r.history_faults for k, r in results.items() if r.history_faults is not None},
                    history_normals={k: r.history_normals for k, r in results.items() if r.history_normals is not None})


def set_aside_small(ev: Evidence, changes: dict[str, float], min_effect_pct: float
                    ) -> tuple[Evidence, dict[str, float]]:
    """The evidence with the flags of the detectors whose counters are scored or modelled
    (``DetectorResult.counters``) without the changes too small to matter, on their pages too (the
    rules' are already, by ``detect``); those counters with their change in %."""
    small: dict[str, float] = {}

    def kept(counters: list[str]) -> list[str]:
        large, aside = effects.split_by_effect(counters, changes, min_effect_pct)
        small.update(aside)
        return large
    methods, flags, reserve = dict(ev.methods), dict(ev.flags), dict(ev.reserve)
    for name in ev.judged("scored") + ev.judged("models"):
        for entry in ev.results[name].page:
            if methods[entry].get("flagged_counters"):
                methods[entry] = {**methods[entry], "flagged_counters": kept(methods[entry]["flagged_counters"])}
        flags[name], reserve[name] = kept(flags[name]), kept(reserve[name])
    return dataclasses.replace(ev, methods=methods, flags=flags, reserve=reserve), small


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
