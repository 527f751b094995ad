"""The control charts of a system's runs, stored: the system calibrated once on its history (its
normal runs charted against each other, the cross-lab null, the run-against-itself null, and the
record: each verified fault and normal run judged as a target is), each target charted against its
baseline under that calibration (Nguyen 2017 ch. 3, 6-7, seed 004; the charts themselves are
:mod:`pipelines.detectors.charts.control_charts`, the run against itself :mod:`pipelines.detectors.within_run.windows`).
A result computed under the same input key (``memo``) is kept.
"""
from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, cast

import pandas as pd

from pipelines import config, parallel
from pipelines.stats import effects
from pipelines.systems import history, labs
from pipelines.detectors.within_run import windows as within_run
from pipelines.detectors.charts.control_charts import RATIO_COLUMNS, Charter, ControlChartParams, chart_series, judge
from pipelines.detectors.charts.calibration import (calibrate, chart_baseline, cross_lab_calibration,
                                                   matched_calibration, normal_pvalues)
from pipelines.protocol import SystemHistory
from pipelines.progress import Progress
from pipelines.storage import atomic, memo, store
from pipelines.storage.run_records import ValidIndex
from pipelines.detectors.charts.files import ChartCalibration, ChartResult, WithinRunCalibration, WithinRunResult

log = logging.getLogger("regresslab.control_charts")


def within_evidence(run_id: str, frames: store.FrameStore, calibration: ChartCalibration, params: ControlChartParams,
                    significance: effects.Significance) -> WithinRunResult:
    """The run against itself (``within_run``): its strongest windows against the rest of it, judged
    by the normal runs' same contrasts; needs no baseline and no lab."""
    contrasts = within_run.window_contrasts(frames[run_id], **within_run.contrast_params(significance))
    return within_run.judge(contrasts, calibration["within_run"], false_alarm_rate=params.false_alarm_rate)


@dataclass(frozen=True)
class SystemCharts:
    """What charting any run of one system reads: the valid-run index, the runs' frames, the
    system's calibration, the ``control_charts`` params, the lab params (``labs.lab_params``) and
    the ``significance`` block."""
    index: ValidIndex
    frames: store.FrameStore
    calibration: ChartCalibration
    params: ControlChartParams
    lab_kw: labs.LabParams
    significance: effects.Significance


@dataclass(frozen=True)
class JudgeContext:
    """What judging a run's charts reads besides the run: the valid-run index, the lab's verified
    runs (run -> verdict), the lab params and the ``control_charts`` params."""
    index: ValidIndex
    lab_runs: dict[str, str]
    lab_kw: labs.LabParams
    params: ControlChartParams


class Judged(NamedTuple):
    """A run's charts judged (:func:`judge_charts`): the judgement, the run's lab as found, its
    violation ratios, the limits and the baseline's minor modes."""
    result: ChartResult
    lab: labs.LabShift
    ratios: pd.DataFrame
    limits: pd.DataFrame
    modes: Any


def judge_charts(run_id: str, base: list[str], candidates: list[str], charter: Charter, ctx: JudgeContext,
                 calibration_for: Callable[[str], ChartCalibration]) -> Judged:
    """The control charts' judgement of one run against its chart baseline ``base``: its lab found
    among ``candidates`` (moved by the lab's level when no baseline run shares it), its violation
    ratios, judged under the calibration of its situation (``calibration_for(status)``, then
    ``matched_calibration``: the null of its lab's situation).  The one judgement both the night
    (:func:`chart_run`) and the evaluation's leave-one-out (``evaluation.leave_one_out.loo_charts``,
    a calibration without the held-out run) make, so the two cannot drift apart."""
    lab = charter.lab(run_id, base, ctx.index, ctx.lab_runs, ctx.lab_kw, candidates=candidates)
    ratios, limits, modes = charter(base, run_id, lab["shift"])
    ratios = ratios.drop(index=labs.not_judged(lab), errors="ignore")
    matched, null = matched_calibration(calibration_for(lab["status"]), lab["status"], run_id)
    out = judge(ratios, matched, **ctx.params.judge_kw())
    out["null"] = null
    return Judged(out, lab, ratios, limits, modes)


def chart_run(run_id: str, baseline: list[str], system: SystemCharts, lab_runs: dict[str, str]) -> ChartResult:
    """Control charts of one target against the most similar runs of its baseline, and the run
    against itself (:func:`within_evidence`); the result file.

    A target whose lab none of those runs shares is moved by its lab's level first
    (:func:`labs.lab_shift`, from ``lab_runs``: verified run -> verdict)."""
    index, frames, calibration, params = system.index, system.frames, system.calibration, system.params
    lab_kw, significance = system.lab_kw, system.significance
    env = index[run_id].get("environment") or {}
    base = chart_baseline({b: index[b].get("environment") or {} for b in baseline}, env, params.max_baseline_runs)
    within = within_evidence(run_id, frames, calibration, params, significance)
    if not base:
        return {"run_id": run_id, "verdict": None, "reason": "no passed run in the baseline", "within_run": within}
    charter = Charter(frames, params.chart)
    out, lab, ratios, limits, modes = judge_charts(run_id, base, baseline, charter,
                                                   JudgeContext(index, lab_runs, lab_kw, params), lambda status: calibration)
    target = labs.shifted(frames[run_id], lab["shift"])
    within["history_faults"] = calibration["within_run"].get("fault_pvalues")
    within["history_normals"] = calibration["within_run"].get("normal_pvalues")
    out.update({
        "history_faults": calibration.get("fault_pvalues"), "history_normals": calibration.get("normal_pvalues"),
        "run_id": run_id, "system": index[run_id]["system"], "baseline_runs": base, "lab": labs.summary(lab),
        "ratios": {c: {k: (None if pd.isna(row[k]) else round(float(row[k]), 4)) for k in RATIO_COLUMNS}
                   for c, row in ratios.sort_values(["average", "sum"], ascending=False).iterrows()},
        "multimodal": modes,
        "charts": chart_series(ratios, limits, target, top=params.plot_top),
        "within_run": within,
    })
    return out


def within_calibration(passed: list[str], frames: store.FrameStore, significance: effects.Significance,
                       false_alarm_rate: float) -> WithinRunCalibration:
    """The within-run null (``within_run.calibrate``): every passed run against itself, on the
    stage's processes; ``within_run.choose_limits`` then reads its record."""
    kw = within_run.contrast_params(significance)
    progress = Progress(log, "within-run calibration", len(passed), what="normal runs")
    contrasts = parallel.map_ordered(lambda r: within_run.window_contrasts(frames[r], **kw), passed,
                                     progress=progress.each())
    return within_run.calibrate(dict(zip(passed, contrasts)), **within_run.null_params(significance),
                                false_alarm_rate=false_alarm_rate)


def calibrate_system(system: str, index: ValidIndex, frames: store.FrameStore, params: ControlChartParams,
                     hist: history.HistoryParams, significance: effects.Significance) -> ChartCalibration:
    """Calibrate one system on its history and write the calibration file; an unchanged one
    (``memo``: the same passed runs, params and code) is kept."""
    passed = hist.passed(index, system)
    verdicts = hist.verdicts(index, system)
    path = config.calibration_path(system)
    key = memo.input_key("control_charts", index, {"passed": passed, "verified": list(verdicts)}, system=system,
                         control_charts=params.block, history=hist.block, reference=frames.reference,
                         significance=dataclasses.asdict(significance))
    done = memo.reuse_as(path, key, ChartCalibration)
    if done is not None:
        log.info("control_charts calibration %s: %d normal runs unchanged, reused", system, len(passed))
        return done
    charter = Charter(frames, params.chart)
    calibration = calibrate({r: frames[r] for r in passed}, {r: index[r].get("environment") or {} for r in passed},
                            {r: index[r].get("version") for r in passed}, params=params, charter=charter)
    calibration["cross_lab"] = cross_lab_calibration(passed, index, charter, calibration["load_independent"], params,
                                                     lab_runs=verdicts, lab_kw=labs.lab_params(hist))
    rate = params.false_alarm_rate
    calibration["within_run"] = within_calibration(passed, frames, significance, rate)
    calibration["fault_pvalues"], within_faults = fault_pvalues(index, frames, calibration, params, hist,
                                                                significance, verdicts)
    calibration["within_run"] = within_run.choose_limits(calibration["within_run"], within_faults, false_alarm_rate=rate)
    calibration["normal_pvalues"] = normal_pvalues(calibration, {r: len(frames[r]) for r in calibration["normal_scores"]})
    return memo.write(path, cast(ChartCalibration, {"system": system, "runs": passed, **calibration}), key)


def fault_pvalues(index: ValidIndex, frames: store.FrameStore, calibration: ChartCalibration, params: ControlChartParams,
                  hist: history.HistoryParams, significance: effects.Significance, verdicts: dict[str, str]
                  ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Each verified fault run whose baseline shares its lab, charted as a target is: the charts'
    p-value, and the within-run one under each of its limits (``within_run.LIMITS_BY``: limits ->
    run -> p); ``decision.fault_weights`` learns each detector's share of the rate from them, and
    ``within_run.choose_limits`` the limits; on the stage's processes."""
    faults = history.fault_runs(verdicts)
    progress = Progress(log, "control_charts calibration faults", len(faults), what="fault runs")
    charting = SystemCharts(index, frames, calibration, params, labs.lab_params(hist), significance)

    def chart_fault(run_id: str) -> tuple[float | None, dict[str, float]]:
        baseline = hist.baseline(run_id, index)
        out = chart_run(run_id, baseline, charting, verdicts)
        if out.get("verdict") is None or (out.get("lab") or {}).get("status") != "same_lab":
            return None, {}
        return out.get("p_value"), (out.get("within_run") or {}).get("limits_p_values") or {}
    judged = dict(zip(faults, parallel.map_ordered(chart_fault, faults, progress=progress.each())))
    return ({r: v[0] for r, v in judged.items() if v[0] is not None},
            {by: {r: v[1][by] for r, v in judged.items() if by in v[1]} for by in within_run.LIMITS_BY})


def chart_key(run_id: str, index: ValidIndex, frames: store.FrameStore, params: ControlChartParams,
              hist: history.HistoryParams, significance: effects.Significance, calibration: ChartCalibration) -> str:
    """The input key of a target's charts (``memo``): the run, its baseline, the lab's verified runs,
    the calibration, the params and the code."""
    lab_runs = hist.verdicts(index, index[run_id]["system"])
    return memo.input_key("control_charts", index, {"target": [run_id], "baseline": hist.baseline(run_id, index),
                                                    "verified": list(lab_runs)},
                          control_charts=params.block, history=hist.block, reference=frames.reference,
                          significance=dataclasses.asdict(significance),
                          calibration=calibration.get(memo.KEY_FIELD) or calibration)


def chart_one(run_id: str, index: ValidIndex, frames: store.FrameStore, params: ControlChartParams,
              hist: history.HistoryParams, significance: effects.Significance, calibration: ChartCalibration
              ) -> ChartResult:
    """Chart one target against its baseline with its system's calibration and write the result
    under its :func:`chart_key`."""
    key = chart_key(run_id, index, frames, params, hist, significance, calibration)
    result = chart_run(run_id, hist.baseline(run_id, index),
                       SystemCharts(index, frames, calibration, params, labs.lab_params(hist), significance),
                       hist.verdicts(index, index[run_id]["system"]))
    return memo.write(config.chart_path(run_id), result, key)


@dataclass(frozen=True)
class ControlCharts:
    """The control charts, with the run against itself inside, as a
    :class:`~pipelines.protocol.Detector` (the ``control_charts`` stage's)."""

    params: ControlChartParams
    name: str = "control_charts"

    def calibrate(self, seen: SystemHistory) -> ChartCalibration:
        """The system calibrated and stored; returned as stored (JSON's types), as a DAG batch reads it."""
        calibrate_system(seen.system, seen.index, seen.frames, self.params, seen.hist, seen.significance_block())
        return atomic.read_json(config.calibration_path(seen.system))

    def stored(self, seen: SystemHistory) -> ChartCalibration:
        path = config.calibration_path(seen.system)
        return atomic.read_json(path) if path.exists() else self.calibrate(seen)

    def kept(self, run_id: str, seen: SystemHistory, calibration: ChartCalibration) -> ChartResult | None:
        return memo.reuse_as(config.chart_path(run_id), chart_key(run_id, seen.index, seen.frames, self.params,
                                                                  seen.hist, seen.significance_block(), calibration),
                             ChartResult)

    def judge(self, run_id: str, seen: SystemHistory, calibration: ChartCalibration) -> ChartResult:
        return chart_one(run_id, seen.index, seen.frames, self.params, seen.hist, seen.significance_block(), calibration)
