"""The control charts calibrated on a system's history (Nguyen 2017, seed 004): each normal run charted
against the others for the threshold of the run verdict (§7.5.2-7.5.3) and its p-values, the
load-independent counters of repeated runs (§5.4), the null across labs for a run of a new lab, and
the calibration a target of a given lab status is judged with.  The charts themselves are
:mod:`pipelines.detectors.charts.control_charts`.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipelines.detectors.charts.control_charts import Charter, ControlChartParams, top_ratio_mean
from pipelines.stats import pvalues
from pipelines.storage.run_records import Environment, ValidIndex
from pipelines.detectors.charts.files import ChartCalibration, CrossLabNull
from pipelines.systems import history, labs


def load_independent_counters(pair_ratios: list[pd.Series], *, max_ratio: float, min_share: float) -> list[str]:
    """Counters whose violation ratio exceeds ``max_ratio`` in more than ``min_share`` of the
    normal-normal pairs of one version (Nguyen 2017 §5.4: 10 % on one such pair)."""
    if not pair_ratios:
        return []
    frame = pd.DataFrame(pair_ratios)
    share = (frame > max_ratio).sum(axis=0) / frame.notna().sum(axis=0).clip(lower=1)
    return sorted(share[share > min_share].index)

def chart_baseline(candidates: dict[str, Environment], target_env: Environment, max_runs: int | None
                   ) -> list[str]:
    """The baseline of a chart: the candidates (oldest first) in the environment most like the
    target's, the newest ``max_runs`` of them."""
    base = history.most_similar(candidates, target_env)
    return base[-max_runs:] if max_runs else base

def repeat_pairs(runs: list[str], envs: dict[str, Environment], versions: dict[str, str | None]
                 ) -> list[tuple[str, str]]:
    """"We run the same test again" (Nguyen 2017 §5.4): each run with the previous run (in
    ``runs`` order) of the same version in the same lab.  One pair per run, not every pair:
    a history of one long-lived version would otherwise cost n² charts."""
    last: dict[str, str] = {}
    pairs = []
    for run in runs:
        if versions.get(run) is None:
            continue
        key = json.dumps([versions[run], envs.get(run) or {}], sort_keys=True, default=str)
        if key in last:
            pairs.append((last[key], run))
        last[key] = run
    return pairs

@dataclass(frozen=True)
class CalibrationParts:
    """The charts a calibration is made of: each repeat pair's sum ratios (``pairs``: (earlier,
    later) -> counter -> ratio) and each passed run's ratios against the others (``runs``)."""

    pairs: dict[tuple[str, str], pd.Series]
    runs: dict[str, pd.DataFrame]

def calibration_parts(frames: dict[str, pd.DataFrame], envs: dict[str, Environment],
                      versions: dict[str, str | None], *, params: ControlChartParams,
                      charter: Charter | None = None) -> CalibrationParts:
    """The charts a calibration is made of: each passed run against the others (most similar
    environment, newest ``max_baseline_runs``), and each repeat pair (:func:`repeat_pairs`)."""
    charter = charter or Charter(frames, params.chart)
    pairs = {(a, b): charter([a], b)[0]["sum"] for a, b in repeat_pairs(list(frames), envs, versions)}
    runs = {}
    for run_id in frames:
        base = chart_baseline({r: envs[r] for r in frames if r != run_id}, envs[run_id], params.max_baseline_runs)
        if base:
            runs[run_id] = charter(base, run_id)[0][["average", "sum", "window"]]
    return CalibrationParts(pairs=pairs, runs=runs)

def capped_filter(removed: list[str], counters: int, *, max_share: float) -> tuple[list[str], str | None]:
    """A filter may set aside at most ``max_share`` of the counters; past that it is not applied
    (it would eat the evidence) and the reason says so."""
    if counters and len(removed) > max_share * counters:
        return [], (f"not applied: it would set aside {len(removed)} of {counters} counters "
                    f"(more than {max_share:.0%})")
    return removed, None

def calibration_from(parts: CalibrationParts, *, params: ControlChartParams, leave_out: str | None = None
                     ) -> ChartCalibration:
    """A calibration from its charts, optionally without one run (its own chart and its pairs).

    ``normal_scores`` and ``window_scores`` are the null distributions of the run score and of
    the strongest-window score (each normal run charted against the others); ``threshold``
    (the largest normal score, Nguyen 2017 §7.5.3) is kept for the report and for a fixed
    ``params.threshold``.
    """
    pairs = [v for (a, b), v in parts.pairs.items() if leave_out not in (a, b)]
    independent = load_independent_counters(pairs, max_ratio=params.load_independent_ratio,
                                            min_share=params.load_independent_share)
    runs = {r: x for r, x in parts.runs.items() if r != leave_out}
    counters = len(set().union(*(x.index for x in runs.values()))) if runs else 0
    independent, skipped = capped_filter(independent, counters, max_share=params.max_filtered_share)
    top = params.top_fraction
    scores = {r: top_ratio_mean(x["average"], top_fraction=top, exclude=independent) for r, x in runs.items()}
    windows = {r: top_ratio_mean(x["window"], top_fraction=top, exclude=independent) for r, x in runs.items()}
    counter_max = pd.DataFrame([x["sum"] for x in runs.values()]).max(axis=0) if runs else pd.Series(dtype=float)
    window_max = pd.DataFrame([x["window"] for x in runs.values()]).max(axis=0) if runs else pd.Series(dtype=float)
    threshold = params.threshold
    return ChartCalibration(
        threshold=threshold if threshold is not None else (max(scores.values()) if scores else 0.0),
        threshold_from="params" if threshold is not None else "max over normal runs",
        normal_scores=scores, window_scores=windows, load_independent=independent,
        load_independent_skipped=skipped,
        counter_normal_max={c: float(v) for c, v in counter_max.dropna().items()},
        counter_window_max={c: float(v) for c, v in window_max.dropna().items()},
        same_version_pairs=len(pairs))

def cross_lab_calibration(passed: list[str], index: ValidIndex, charter: Charter, independent: list[str],
                          params: ControlChartParams, *, lab_runs: dict[str, str], lab_kw: labs.LabParams
                          ) -> dict[str, CrossLabNull]:
    """The run and window scores of the normal runs charted the way a target whose baseline does
    not share its lab is (:func:`labs.cross_lab_null`): against the most similar passed runs of
    the other labs, moved by its lab's level (``adjusted``) or with the counters that follow the
    environment set aside (``insufficient``, learned from the other passed runs of every lab, as a
    new-lab target's are from the whole history), scored without ``independent`` counters as
    :func:`judge` scores a target.  ``{status: {"normal_scores", "window_scores"}}``."""
    envs = {r: index[r].get("environment") or {} for r in {*passed, *lab_runs}}
    top = params.top_fraction

    def chart_across(run_id: str, baseline: list[str], verified: dict[str, str]) -> tuple[str, dict[str, float]]:
        base = chart_baseline({b: envs[b] for b in baseline}, envs[run_id], params.max_baseline_runs)
        lab = charter.lab(run_id, base, index, verified, lab_kw, candidates=[r for r in passed if r != run_id])
        ratios = charter(base, run_id, lab["shift"])[0].drop(index=labs.not_judged(lab), errors="ignore")
        return lab["status"], {"run": top_ratio_mean(ratios["average"], top_fraction=top, exclude=independent),
                               "window": top_ratio_mean(ratios["window"], top_fraction=top, exclude=independent)}
    null = labs.cross_lab_null(passed, {r: labs.lab_key(e) for r, e in envs.items()}, lab_runs, chart_across)
    return {status: CrossLabNull(normal_scores={r: x["run"] for r, x in runs.items()},
                                 window_scores={r: x["window"] for r, x in runs.items()})
            for status, runs in null.items()}

def matched_calibration(calibration: ChartCalibration, status: str, run_id: str | None = None
                        ) -> tuple[ChartCalibration, str]:
    """The calibration a run is judged by: its null scores those of the normal runs charted across
    labs as ``status`` (:func:`cross_lab_calibration`, without ``run_id``) when the run's baseline
    is not of its lab and the history has them (:func:`labs.matched_null`), the threshold then their
    largest; else ``calibration`` itself.  Returns (calibration, ``"cross_lab"`` or ``"same_lab"``)."""
    cross = (calibration.get("cross_lab") or {}).get(status)
    scores, kind = labs.matched_null(status, calibration["normal_scores"],
                                     {status: cross["normal_scores"] if cross else {}}, run_id)
    if kind == "same_lab":
        return calibration, kind
    windows = {r: v for r, v in cross["window_scores"].items() if r in scores} if cross else {}
    threshold = calibration["threshold"] if calibration["threshold_from"] == "params" else max(scores.values())
    return {**calibration, "normal_scores": scores, "window_scores": windows, "threshold": threshold}, kind

def calibrate(frames: dict[str, pd.DataFrame], envs: dict[str, Environment], versions: dict[str, str | None],
              *, params: ControlChartParams, charter: Charter | None = None) -> ChartCalibration:
    """What normal runs of the history look like on control charts (Nguyen 2017 §5.4, §7.5.3).

    Each passed run is charted against the others (most similar environments); the run
    threshold is the maximum run score, each counter's limit its maximum sum ratio.
    Load-independent counters come from consecutive passed runs of one version in one
    environment (:func:`repeat_pairs`).
    """
    return calibration_from(calibration_parts(frames, envs, versions, params=params, charter=charter),
                            params=params)

def normal_pvalues(calibration: ChartCalibration, intervals: dict[str, int]) -> dict[str, float]:
    """Each normal run's charts p-value against the others' run and window scores, as
    :func:`judge` computes a target's (Bonferroni of the two; resolution one interval of the run):
    the charts' record of false alarms (``verdict.record``)."""
    runs, windows = calibration["normal_scores"], calibration["window_scores"]
    out = {}
    for r, score in runs.items():
        resolution = 1.0 / max(1, intervals.get(r, 1))
        p_run = pvalues.calibrated_pvalue(score, [v for q, v in runs.items() if q != r], resolution=resolution)
        p_window = pvalues.calibrated_pvalue(windows.get(r, 0.0), [v for q, v in windows.items() if q != r],
                                             resolution=resolution)
        p = pvalues.combined_pvalue([p_run, p_window])
        if np.isfinite(p):
            out[r] = round(float(p), 6)
    return out
