"""What a person reads first: each counter's change in its own unit, and the one-line summary of a run.

Medians of the baseline runs and of the run, the signed change in % of the baseline, and
``worse``, ``better`` or ``changed`` by ``report.directions`` (contract §2 ``counter_changes``);
values written in the counter's unit, read from its name; the sentence a release manager came
for; and what changed since the previous night.
"""
from __future__ import annotations

import re
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from pipelines.objectives.files import Criterion
from pipelines.storage.run_records import Environment
from pipelines.storage.stage_files import CounterChange, IndexRow, ObjectiveEntry, ObjectivesBlock, VerdictFile
from pipelines.detectors.charts.files import WindowChange


def environment_differences(target_env: Environment, other: Environment) -> list[str]:
    """``key: theirs -> ours`` for every environment component that differs."""
    keys = sorted(set(target_env) | set(other))
    return [f"{k}: {other.get(k, '—')} → {target_env.get(k, '—')}" for k in keys if other.get(k) != target_env.get(k)]


def novel_environment(target_env: Environment, baseline_envs: list[Environment]) -> Environment:
    """The environment components whose value no baseline run shares: the run is on a lab the
    history has not seen, so part of any difference may be the lab's, not the build's."""
    return {k: v for k, v in sorted(target_env.items()) if not any(env.get(k) == v for env in baseline_envs)}


def worse_direction(counter: str, directions: Sequence[Mapping[str, str]]) -> str | None:
    """``up`` or ``down``: which way the counter gets worse, by the first rule of
    ``report.directions`` whose regex ``counter`` it contains; ``None`` when no rule knows it."""
    for rule in directions:
        if re.search(rule["counter"], counter):
            return rule["worse"]
    return None


def counter_changes(counters: list[str], target: pd.Series, baseline: pd.Series,
                    directions: Sequence[Mapping[str, str]]) -> dict[str, CounterChange]:
    """What a person reads first (contract §2 ``counter_changes``): per counter, the baseline
    runs' median and this run's, in the counter's own unit, the signed change in % of the
    baseline (``None`` when the baseline is 0), and ``worse``, ``better`` or ``changed`` (the
    counter's direction unknown, or no change at the tenth of a percent shown)."""
    out: dict[str, CounterChange] = {}
    for c in counters:
        b, t = baseline.get(c), target.get(c)
        if b is None or t is None or not np.isfinite(b) or not np.isfinite(t):
            continue
        pct = None if b == 0 else 100.0 * (t - b) / abs(b)
        worse = worse_direction(c, directions)
        if worse is None or t == b or (pct is not None and round(pct, 1) == 0.0):
            direction = "changed"
        else:
            direction = "worse" if (t > b) == (worse == "up") else "better"
        out[c] = {"baseline": _round(b), "target": _round(t),
                  "change_pct": None if pct is None else round(pct, 1), "direction": direction}
    return out


def _round(x: float) -> float:
    """Four significant digits: what a reader uses, in the counter's unit."""
    return float(f"{float(x):.4g}")


UNITS = (("_ms", "ms"), ("_pct", "%"), ("_percent", "%"), ("_rps", "req/s"), ("_bytes_per_s", "B/s"),
         ("_bytes", "B"), ("_per_s", "/s"), ("_per_min", "/min"), ("_mb", "MB"), ("_kb", "kB"))


def with_unit(counter: str, value: float) -> str:
    """``value`` as text in the counter's unit, read from its name (``_ms`` -> ms, ``_pct`` -> %):
    three significant digits, thousands grouped (``13,700 MB``), bytes in KiB/MiB/GiB."""
    unit = next((u for suffix, u in UNITS if counter.endswith(suffix)), "")
    if unit in ("B", "B/s") and abs(value) >= 1024:
        for prefix in ("KiB", "MiB", "GiB", "TiB"):
            value /= 1024.0
            if abs(value) < 1024:
                return f"{value:.3g} {prefix}{'/s' if unit == 'B/s' else ''}"
    number = f"{float(f'{value:.3g}'):,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{number} {unit}".strip() if unit != "%" else f"{number} %"


def signed_pct(pct: float) -> str:
    """``+4.4 %``; a change under a tenth of a percent with two significant digits (``+0.03 %``),
    never a bare ``+0.0 %``."""
    return f"{pct:+.1f} %" if pct == 0 or abs(pct) >= 0.05 else f"{pct:+.2g} %"


def change_text(counter: str, change: CounterChange) -> str:
    """``app.response_time_ms 24 ms → 32 ms (+33 %, worse)``."""
    pct = "" if change["change_pct"] is None else f"{change['change_pct']:+.0f} %, "
    return (f"{counter} {with_unit(counter, change['baseline'])} → {with_unit(counter, change['target'])} "
            f"({pct}{change['direction']})")


def top_change(doc: Mapping[str, Any]) -> str | None:
    """A verdict file's first counter change in words (its ``counter_changes`` are written in the
    summary's order: the first is the top change); None when it has none."""
    return next((change_text(c, ch) for c, ch in (doc.get("counter_changes") or {}).items()), None)


def within_text(counter: str, change: WindowChange, directions: Sequence[Mapping[str, str]]) -> str:
    """``entry.latency_p95_s 0.21 → 0.84 in intervals 3–5 of the run (+300 %, worse)``: a change
    inside the run (``within_run``), the rest of the run against its strongest window."""
    rest, window = change["rest_median"], change["window_median"]
    worse = worse_direction(counter, directions)
    direction = "changed" if worse is None or window == rest else \
        ("worse" if (window > rest) == (worse == "up") else "better")
    first, last = change["window"]
    pct = 100.0 * (window - rest) / abs(rest) if rest else change["change_pct"]
    return (f"{counter} {with_unit(counter, rest)} → {with_unit(counter, window)} in intervals {first + 1}–{last + 1} "
            f"of the run ({pct:+.0f} %, {direction})")


def summary_order(flagged: list[str], changes: dict[str, CounterChange], *, user_facing: str,
                  lead: frozenset[str] = frozenset()) -> list[str]:
    """The flagged counters in the order a person reads them: the probable cause's own counters
    first (``lead``: its signature's counters, ``cause_signatures``), then what users feel
    (response times, throughput, errors: ``report.user_facing``), then the other worsened counters
    by the size of their change, then those that only changed, and the improved last."""
    rank = {"worse": 0, "changed": 1, "better": 2}

    def key(c: str) -> tuple:
        ch = changes[c]
        return (c not in lead, not re.search(user_facing, c), rank[ch["direction"]], -abs(ch["change_pct"] or 1e9))
    return sorted((c for c in flagged if c in changes), key=key)


def objective_text(o: ObjectiveEntry) -> str:
    """One objective as the summary names it: ``Response time P95 612 ms (<600 and <=+10 % of 540 ms
    violated, +13.3 %)``."""
    measured, compared = o["value"], o["compared_value"]
    value = "no value" if measured is None else with_unit(o["counter"], measured)
    violated = " and ".join(o.get("violated") or ())
    relative = any(Criterion.parse(c).relative for c in o.get("violated") or ())
    before = f" of {with_unit(o['counter'], compared)}" if compared is not None and relative else ""
    change = f", {o['change_pct']:+.1f} %" if o.get("change_pct") is not None else ""
    return f"{o['display_name']} {value}" + (f" ({violated}{before} violated{change})" if violated else "")


def objectives_text(gate: ObjectivesBlock, statuses: tuple[str, ...]) -> str:
    """The objectives with one of ``statuses``, each as :func:`objective_text` names it."""
    return "; ".join(objective_text(o) for o in gate["objectives"] if o["result"] in statuses)


def plain_summary(doc: VerdictFile, changes: dict[str, CounterChange], *, top: int = 3,
                  user_facing: str = "(response|latency|throughput|_rps$|error)",
                  directions: Sequence[Mapping[str, str]] = ()) -> str:
    """The sentence a release manager came for (:func:`detectors_summary`), with the team's
    objectives beside it: first when they decided the verdict, after it otherwise."""
    gate = doc.get("objectives")
    decision = (doc.get("details") or {}).get("decision") or {}
    if not gate:
        return detectors_summary(doc, changes, top=top, user_facing=user_facing, directions=directions)
    statistical = decision.get("statistical_verdict", doc["verdict"])
    detectors = detectors_summary({**doc, "verdict": statistical}, changes, top=top, user_facing=user_facing,
                                  directions=directions)
    score = f"score {gate['score_pct']:.0f} %"
    if decision.get("decided_by") == "objectives":
        return f"Objectives failed ({score}): {objectives_text(gate, ('fail',))}. Detectors: {detectors}"
    if decision.get("decided_by") == "objectives and detectors":
        return f"{detectors} Objectives failed too ({score}): {objectives_text(gate, ('fail',))}."
    if gate["result"] == "fail":
        return f"{detectors} Objectives fail, advisory ({score}): {objectives_text(gate, ('fail',))}."
    if gate["result"] == "warning":
        return (f"{detectors} Objectives warn ({score}): {objectives_text(gate, ('fail', 'warning'))}; "
                "a warning never fails a run.")
    return f"{detectors} Objectives pass ({score})."


def detectors_summary(doc: VerdictFile, changes: dict[str, CounterChange], *, top: int = 3,
                      user_facing: str = "(response|latency|throughput|_rps$|error)",
                      directions: Sequence[Mapping[str, str]] = ()) -> str:
    """The detectors' sentence: the verdict, the top changes in their units
    (:func:`summary_order`; inside the run, :func:`within_text`, when the run was judged against
    itself alone), the probable cause (or unknown), and whether a new lab makes the verdict
    uncertain."""
    details = doc.get("details") or {}
    basis = (details.get("trust") or {}).get("basis")
    within_only = details.get("combined_detectors") == ["within_run"] and (
        bool(details.get("set_aside_detectors")) or basis in ("small_history", "new_lab", "silent_null"))
    if doc["verdict"] == "no_baseline":
        text = "Not judged: " + (doc.get("details", {}).get("no_baseline") or "no baseline")
        return text + "."
    trust = details.get("trust") or {}
    if doc["verdict"] == "pass" and within_only and basis == "small_history" and trust.get("short"):
        text = f"No regression found within the run; judged against itself: {trust['short']}"
    elif doc["verdict"] == "pass" and within_only and basis in ("small_history", "silent_null"):
        text = ("No regression found within the run; it was not compared with other runs: "
                + trust.get("reason", "the history is too small").split(":")[0])
    elif doc["verdict"] == "pass" and within_only:
        text = ("No regression found within the run; it was not compared with other runs, whose detectors have "
                "no normal runs measured in a lab like its own")
    elif doc["verdict"] == "pass" and trust.get("uncorroborated"):
        text = f"No regression found: {trust['short']}"
    elif doc["verdict"] == "pass":
        text = "No regression found"
        small = list((doc.get("details", {}).get("set_aside_small") or {}).items())
        if small:
            text += (f" ({len(small)} unusual change(s) too small to matter; the largest, each at its strongest: "
                     + ", ".join(f"{c} {signed_pct(pct)}" for c, pct in small[:2] if pct is not None) + ")")
        pattern = doc.get("details", {}).get("fault_pattern")
        if pattern:
            text += (f", but the cause classifier sees the pattern of {pattern['label']} "
                     f"({100 * (pattern.get('probability') or 0):.0f} %): worth a look")
    elif within_only:
        inside = (doc["methods"].get("within_run") or {}).get("changes") or {}
        moved = [within_text(c, inside[c], directions) for c in doc["flagged_counters"] if c in inside][:top]
        text = "Regression within the run: " + ("; ".join(moved) if moved else "a part of the run differs from the rest")
    else:
        cause: Mapping[str, Any] = doc.get("cause") or {}
        known = doc["verdict"] == "fail" and bool(cause.get("label")) and bool(cause.get("known"))
        lead = frozenset((details.get("cause_signature") or {}).get("counters") or ()) if known else frozenset()
        ordered = summary_order(doc["flagged_counters"], changes, user_facing=user_facing, lead=lead)
        worse = [c for c in ordered if changes[c]["direction"] != "better"]
        moved = [change_text(c, changes[c]) for c in worse][:top]
        improved = [change_text(c, changes[c]) for c in ordered if changes[c]["direction"] == "better"]
        if moved and worse[0] in lead:         # where, in one line: the cause, then its own counter
            return _tail(f"Regression, probable cause {cause['label']} "
                         f"({100 * (cause.get('probability') or 0):.0f} %): " + "; ".join(moved), doc)
        if moved:
            text = "Regression: " + "; ".join(moved)
        elif improved:                  # a change for the better is never named as the regression
            text = ("Regression: the detectors' combined evidence; no flagged counter got worse (the largest "
                    "change was for the better: " + improved[0] + ")")
        else:
            text = "Regression: the detectors' combined evidence; no single counter stands out"
    if doc["verdict"] == "fail":
        cause = doc["cause"]
        if cause.get("label") and cause.get("known"):
            text += f". Probable cause: {cause['label']} ({100 * (cause.get('probability') or 0):.0f} %)"
        else:
            text += ". Cause unknown" + (f" (nearest: {cause['label']}, not certain)" if cause.get("label") else "")
    return _tail(text, doc)


def _tail(text: str, doc: VerdictFile) -> str:
    """What the baseline and the lab add to the summary's first sentence ``text``."""
    if doc.get("details", {}).get("baseline_origin") == "later":
        text += ". Compared with runs verified after it (none came before)"
    elif doc.get("details", {}).get("baseline_origin") == "later_lab":
        text += ". Compared with runs of its own lab verified after it (none of its lab came before)"
    if doc.get("baseline_status") == "insufficient":
        text += ". New lab with no baseline of its own: this verdict is uncertain"
    elif doc.get("details", {}).get("environment_not_in_baseline"):
        text += ". New lab environment: part of any difference may be the lab's"
    return text + "."


def night_changes(current: dict[str, IndexRow], previous: dict[str, IndexRow] | None) -> dict[str, str]:
    """Per run, what changed since the previous night's index: new, verdict changed, or unchanged."""
    out = {}
    for run_id, row in current.items():
        if previous is None or run_id not in previous:
            out[run_id] = "new"
        elif previous[run_id]["verdict"] != row["verdict"]:
            out[run_id] = f"{previous[run_id]['verdict']} → {row['verdict']}"
        elif previous[run_id].get("cause") != row.get("cause"):
            out[run_id] = f"cause {previous[run_id].get('cause')} → {row.get('cause')}"
        else:
            out[run_id] = "unchanged"
    return out

