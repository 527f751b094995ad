"""Leave-one-out on the labelled history: every detector judged as if each verified run were new.

Each verified run in turn is the target and the other passed runs of its system its history
(bin edges learned again without it when it is a passed run), for the association-rule
combiners (:func:`loo_system`), the control charts, each run charted against the other passed
runs and judged by a calibration without it (:func:`loo_charts`), the report's headline with
those same charts, and the cause classifier with its own leave-one-out fault scores
(:func:`loo_classified`, from the model's metadata), and each registered detector the night computes
whose class judges a held-out run (``held_out``: :func:`loo_registered`).  The anchors are judged the same way
(:func:`anchor_rows`).  The figures are :mod:`pipelines.evaluation.scores`'.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, cast

import logging

from pipelines import config, parallel
from pipelines.detection import registry, stage_results
from pipelines.detectors.charts import runs as chart_runs
from pipelines.verdict import cause_signatures, headline
from pipelines.stats import effects
from pipelines.systems import history, labs
from pipelines.detectors.charts import calibration as chart_calibration
from pipelines.detectors.charts import control_charts as charts
from pipelines.detectors.rules import detection as rule_detection
from pipelines.detectors.rules import verdict as rule_verdict
from pipelines.detectors.within_run import windows as within_run
from pipelines.detectors.rules.ensemble import RulesResult
from pipelines.detectors.rules.mining import MiningParams
from pipelines.evaluation import anchors
from pipelines.evaluation.scores import COMBINERS, ScoreRow, Truth, classifier_rows, score_rows
from pipelines.preparation import bins
from pipelines.progress import Progress
from pipelines.protocol import HeldOut, SystemHistory
from pipelines.storage import store
from pipelines.storage.run_records import RunRecord, ValidIndex
from pipelines.storage.stage_files import ClusterResult, RuleDetection
from pipelines.storage.cause_files import CauseModelMeta, CausePrediction
from pipelines.detectors.charts.files import ChartCalibration, ChartResult, CrossLabNull

log = logging.getLogger("regresslab.evaluate")


# --------------------------------------------------------------------------- pure core


def loo_charts(frames: store.FrameStore, index: ValidIndex, verified: list[str], passed: list[str],
               *, params: charts.ControlChartParams, lab_kw: labs.LabParams, significance: effects.Significance
               ) -> dict[str, ChartResult]:
    """Leave-one-out on the labelled history: each verified run charted against the other
    passed runs (most similar environment), judged by a calibration without it.

    The calibration without a held-out passed run drops its own chart and its repeat pairs;
    the other passed runs' charts are computed once, so a baseline of theirs may include
    the held-out run (it widens their limits a little: their scores, and so the threshold,
    can only be lower — the held-out run is judged slightly more strictly).  This keeps the
    cost linear in the history instead of quadratic.  A held-out run whose lab its baseline
    does not share is moved by its lab's level learned from the other verified runs
    (:func:`labs.lab_shift`), as the nightly chart does, and judged by the normal runs charted
    across labs (:func:`chart_calibration.matched_calibration`, charted once, the first time a run
    needs them; the held-out run's own score left out).  Each run is judged by the night's own
    judgement (:func:`~pipelines.detectors.charts.runs.judge_charts`) under that calibration.  Returns
    per run the :func:`charts.judge` result (with its ``counter_scores``), and under ``within_run`` the run
    against itself (``within_run.judge``, its limits and null without the held-out run, and its
    limits chosen on the record of the other verified runs: ``within_run.choose_limits``).
    """
    runs = list(dict.fromkeys(verified + passed))
    envs = {r: index[r].get("environment") or {} for r in runs}
    versions = {r: index[r].get("version") for r in runs}
    lab_runs = {r: str(index[r]["verdict"]) for r in verified}            # verified: pass or fail
    charter = charts.Charter(frames, params.chart)
    parts = chart_calibration.calibration_parts({r: frames[r] for r in passed}, envs, versions, params=params,
                                             charter=charter)
    kw = within_run.contrast_params(significance)
    contrasts = {r: within_run.window_contrasts(frames[r], **kw) for r in runs}
    rate = params.false_alarm_rate
    within_null = within_run.calibrate({r: contrasts[r] for r in passed}, **within_run.null_params(significance),
                                       false_alarm_rate=rate)
    judged_faults = {r: within_run.judge(contrasts[r], within_null, false_alarm_rate=rate).get("limits_p_values") or {}
                     for r in verified if index[r]["verdict"] == "fail"}
    within_faults = {by: {r: p[by] for r, p in judged_faults.items() if by in p} for by in within_run.LIMITS_BY}
    cross: dict[str, CrossLabNull] | None = None          # the cross-lab null, charted the first time a run needs it
    out = {}
    progress = Progress(log, "control_charts LOO", len(verified), every=8)
    for i, run_id in enumerate(verified, 1):
        others = [r for r in passed if r != run_id]
        calibration = chart_calibration.calibration_from(parts, params=params,
                                                      leave_out=run_id if run_id in passed else None)
        base = chart_calibration.chart_baseline({r: envs[r] for r in others}, envs[run_id], params.max_baseline_runs)

        def situation(status: str, calibration: ChartCalibration = calibration) -> ChartCalibration:
            nonlocal cross
            if status != "same_lab" and cross is None:
                independent = chart_calibration.calibration_from(parts, params=params)["load_independent"]
                cross = chart_calibration.cross_lab_calibration(passed, index, charter, independent, params,
                                                                lab_runs=lab_runs, lab_kw=lab_kw)
            return cast(ChartCalibration, {**calibration, "cross_lab": cross})     # None: judged in its lab
        judged = chart_runs.judge_charts(run_id, base, others, charter,
                                         chart_runs.JudgeContext(index, lab_runs, lab_kw, params), situation)
        result, lab = judged.result, judged.lab
        result["lab"] = labs.summary(lab)
        chosen = within_run.choose_limits(within_null, within_faults, false_alarm_rate=rate, leave_out=run_id)
        result["within_run"] = within_run.judge(contrasts[run_id], chosen, false_alarm_rate=rate,
                                                leave_out=run_id if run_id in passed else None)
        out[run_id] = result
        progress.step(i)
    return out


# --------------------------------------------------------------------------- I/O shell


@dataclass(frozen=True)
class LooSystem:
    """One system's leave-one-out: its valid-run index, frames, the runs left out of the history
    (``exclude``), and the params the ensembles use (``detect``, ``mine_rules``, ``discretize``,
    the labs' and ``significance``)."""

    system: str
    index: ValidIndex
    frames: store.FrameStore
    exclude: set[str]
    params: rule_detection.DetectParams
    mine_params: MiningParams
    disc_params: bins.DiscretizeParams
    lab_kw: labs.LabParams
    significance: effects.Significance


def loo_analyses(loo: LooSystem) -> tuple[dict[str, tuple[RulesResult, RuleDetection]], dict[str, float],
                                          dict[str, dict[str, float]] | None]:
    """Every verified run analysed by the ensembles against the passed runs without it:
    run -> (the combiners' result, its verdict document); the passed runs' stacking scores so
    obtained, the null of each held-out run's stacking p-value (its own score left out), as
    ``rule_detection.calibrate_system`` does for a night, at no extra cost; and, when a held-out
    run's baseline does not share its lab, the passed runs analysed across labs
    (:func:`labs.cross_lab_null`, under the bins of every passed run), else None."""
    system, index, frames, exclude = loo.system, loo.index, loo.frames, loo.exclude
    params, mine_params, disc_params, lab_kw, significance = (loo.params, loo.mine_params, loo.disc_params,
                                                              loo.lab_kw, loo.significance)
    passed = history.passed_runs(index, system, exclude=exclude)
    verified = history.verified_runs(index, system, exclude=exclude)
    directory = config.loo_cache_dir(system)
    all_ref = store.reference_load(passed)
    all_edges = bins.edges_for([frames.at(r, all_ref) for r in passed], disc_params)
    cache = rule_detection.DetectCache(frames)

    def context(edges: bins.Edges, reference: float | None) -> rule_detection.DetectContext:
        return rule_detection.DetectContext(index=index, edges=edges, reference=reference, params=params,
                                           mine_params=mine_params, models_dir=directory,
                                           single_dir=directory / "single", cache=cache, lab_kw=lab_kw,
                                           significance=significance)
    progress = Progress(log, f"evaluate {system}", len(verified), what="LOO targets")

    def held_out(run_id: str) -> tuple[RulesResult, RuleDetection]:
        baseline = [r for r in passed if r != run_id]
        if run_id in passed:          # learn the bins again without the held-out run
            ref = store.reference_load(baseline)
            edges = bins.edges_for([frames.at(r, ref) for r in baseline], disc_params)
        else:
            ref, edges = all_ref, all_edges
        analysis, doc = rule_detection.analyse(run_id, baseline, context(edges, ref),
                                              lab_runs={r: str(index[r]["verdict"]) for r in verified})
        kept: RulesResult = {"s": analysis["s"], "weights": analysis["weights"],
                             "small_changes": analysis["small_changes"]}
        for c in COMBINERS:
            kept[c] = analysis[c]
        return kept, doc
    analysed = dict(zip(verified, parallel.map_ordered(held_out, verified, progress=progress.each())))
    null = {r: rule_verdict.stacking_score(analysed[r][0]) for r in passed if r in analysed}
    if all(doc["details"]["lab"]["status"] == "same_lab" for _, doc in analysed.values()):
        return analysed, null, None
    every = context(all_edges, all_ref)

    def judge(run_id: str, base: list[str], lab_runs: dict[str, str]) -> tuple[str, float]:
        result, doc = rule_detection.analyse(run_id, base, every, lab_runs=lab_runs, with_single=False,
                                            environment_from=[r for r in passed if r != run_id])
        return doc["details"]["lab"]["status"], rule_verdict.stacking_score(result)
    cross = labs.cross_lab_null(passed, {r: labs.lab_key(index[r].get("environment")) for r in index},
                                {r: str(index[r]["verdict"]) for r in verified}, judge, mapper=parallel.map_ordered)
    return analysed, null, cross


def loo_system(loo: LooSystem, charts: dict[str, ChartResult] | None, rule: headline.HeadlineRule, *,
               clustered: dict[str, ClusterResult] | None = None, classified: dict[str, CausePrediction] | None = None,
               detectors: registry.Registry | None = None,
               registered: Mapping[str, Mapping[str, Any]] | None = None) -> list[ScoreRow]:
    """Leave-one-out rows of the three combiners (:func:`loo_analyses`), and of the headline
    under ``rule`` (the registered ``detectors``, the defaults file's when None) when ``charts`` holds the control charts' leave-one-out results of the same
    runs (with the cluster models' when ``clustered`` holds them, and the cause classifier's
    leave-one-out evidence when ``classified`` does, :func:`loo_classified`; and the registered
    detectors' held-out results when ``registered`` holds them, :func:`loo_registered`)."""
    analysed, null, cross = loo_analyses(loo)
    system, index = loo.system, loo.index
    rows = []
    for run_id, (result, doc) in analysed.items():
        matched, kind = labs.matched_null(doc["details"]["lab"]["status"], null, cross, run_id)
        doc["methods"]["association_rules_stacking"].update(
            rule_verdict.stacking_evidence(result, list(matched.values())), null=kind)
    faults = loo_history_faults([r for r in analysed if index[r]["verdict"] == "fail"], analysed, charts or {},
                                clustered or {}, classified or {})
    normals = loo_history_faults([r for r in analysed if index[r]["verdict"] == "pass"], analysed, charts or {},
                                 clustered or {}, {})
    lab_of = {r: labs.lab_key(row.get("environment")) for r, row in index.items() if row.get("system") == system}
    fault_labels = cause_signatures.fault_labels(index, system)
    classifier_normals = loo_normal_scores(classified or {})
    for run_id, (result, doc) in analysed.items():
        row = index[run_id]
        truth = Truth.of(run_id, system, row)
        rows += score_rows(truth, {c: result[c] for c in COMBINERS}, doc["counter_scores"], "loo")
        if charts is not None:            # the control charts alone, and the report's headline: both together
            rows += score_rows(truth, {"control_charts": charts[run_id]["flagged_counters"]},
                               charts[run_id]["counter_scores"], "loo")
            within = charts[run_id].get("within_run") or {}
            if within.get("verdict"):
                rows += score_rows(truth, {"within_run": within["flagged_counters"]}, within["counter_scores"], "loo",
                                   failed=within["verdict"] == "fail")
            doc["methods"]["association_rules_stacking"].update(history_faults=faults["stacking"],
                                                                history_normals=normals["stacking"])
            chart: ChartResult = {**charts[run_id], "baseline_runs": [], "history_faults": faults["control_charts"],
                     "history_normals": normals["control_charts"],
                     "within_run": {**(charts[run_id].get("within_run") or {}), "history_faults": faults["within_run"],
                                    "history_normals": normals["within_run"]}}
            cluster: ClusterResult | None = {**clustered[run_id], "history_faults": faults["clustered_regression"],
                       "history_normals": normals["clustered_regression"]} \
                if clustered and run_id in clustered else None
            predicted: CausePrediction | None = {**classified[run_id], "history_fault_scores": faults["cause_classifier"],
                         "history_normal_scores": classifier_normals} \
                if classified and run_id in classified else None
            stages = stage_results.StageDocs({**doc, "run_id": run_id}, chart, predicted, clustered=cluster,
                                             own=(registered or {}).get(run_id, {}))
            head = stage_results.verdict_of(stages, rule, lab_of=lab_of, fault_labels=fault_labels, detectors=detectors)
            rows += score_rows(truth, {"headline": head["flagged_counters"]}, head["counter_scores"], "loo",
                               failed=head["verdict"] == "fail")
            rows += classifier_rows(truth, head, "loo")
    return rows


def loo_registered(detectors: registry.Registry, seen: SystemHistory, verified: list[str]
                   ) -> dict[str, dict[str, Any]]:
    """Each verified run -> the result document of every registered detector the night computes whose
    class judges a held-out run (``held_out(run_id, history)``: judged by a calibration without it,
    nothing stored; :class:`~pipelines.protocol.HeldOut`).  A detector without it stays out of the
    leave-one-out headline, and the log says so."""
    out: dict[str, dict[str, Any]] = {r: {} for r in verified}
    for spec in registry.computed(detectors):
        assert spec.detector is not None
        detector = spec.detector()
        if not isinstance(detector, HeldOut):
            log.warning("%s: its class has no held_out(run_id, history): left out of the leave-one-out record",
                        spec.name)
            continue
        for r in verified:
            out[r][spec.name] = detector.held_out(r, seen)
    return out


def loo_normal_scores(classified: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """The classifier's leave-one-out fault score of each verified normal run (:func:`loo_classified`):
    the record of its false alarms (``record``, p-values against the others')."""
    return {r: float(v["fault_score"]) for r, v in classified.items() if v.get("truth") == "none"}


def loo_history_faults(faults: list[str], analysed: Mapping[str, tuple[Mapping[str, Any], Mapping[str, Any]]],
                       charts: Mapping[str, Mapping[str, Any]], clustered: Mapping[str, Mapping[str, Any]],
                       classified: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """What the headline learns each detector's record from in leave-one-out: each detector's p-value
    on each verified run of ``faults`` (the fault runs, or the normal runs: the record's false alarms)
    whose baseline shares its lab, from the held-out judgements themselves (the headline leaves the
    run judged out of them); the classifier's fault scores as they are."""
    def same_lab(result: Mapping[str, Any] | None) -> bool:
        return ((result or {}).get("lab") or {}).get("status") == "same_lab"
    out: dict[str, dict[str, float]] = {"stacking": {}, "control_charts": {}, "within_run": {},
                                        "clustered_regression": {}, "cause_classifier": {}}
    for r in faults:
        doc = analysed[r][1]
        if not same_lab(doc["details"]) or r not in charts:
            continue
        stacking = doc["methods"]["association_rules_stacking"].get("p_value")
        if stacking is not None:
            out["stacking"][r] = stacking
        if same_lab(charts[r]) and charts[r].get("p_value") is not None:
            out["control_charts"][r] = charts[r]["p_value"]
        if (charts[r].get("within_run") or {}).get("p_value") is not None:
            out["within_run"][r] = charts[r]["within_run"]["p_value"]
        if same_lab(clustered.get(r)) and clustered[r].get("p_value") is not None:
            out["clustered_regression"][r] = clustered[r]["p_value"]
        if r in classified:
            out["cause_classifier"][r] = classified[r]["fault_score"]
    return out


def loo_classified(meta: CauseModelMeta) -> dict[str, CausePrediction]:
    """The cause classifier's leave-one-out evidence per verified run, shaped as a prediction for
    ``stage_results.verdict_of``: the run's fault score from the model trained without it
    (``train_causes``), against the same scores of the other normal runs.  Those came from models
    that saw the held-out run; retraining every learner once per held-out run and per other run
    would cost the square of ``train_causes``' leave-one-out, for a null that moves by one run in
    ``n``.  Empty for a model without fault scores."""
    loo = meta.get("loo_predictions") or {}
    if not loo or any("fault_score" not in v for v in loo.values()):
        return {}
    normal = {r: v["fault_score"] for r, v in loo.items() if v["truth"] == "none"}
    return {r: {"label": None, "fault_score": v["fault_score"], "truth": v["truth"],
                "null_fault_scores": sorted(s for n, s in normal.items() if n != r)} for r, v in loo.items()}


def anchor_rows(system: str, index: ValidIndex, frames: store.FrameStore, exclude: set[str],
                labels: dict[str, RunRecord], *, params: anchors.AnchorParams, window: int,
                loo: bool = True) -> list[ScoreRow]:
    """The anchors (``anchors``) scored like the detectors: in leave-one-out on the verified runs
    (the other passed runs are the baseline; unless ``loo`` is false), and on the targets whose
    truth is known (their baseline as the pipeline chooses it; a target with no baseline is not
    judged).  Frames are the normalised ones, not load-scaled."""
    raw = {r: frames.at(r, None) for r in index if index[r]["system"] == system}
    kw = params.chart_kw()
    rows: list[ScoreRow] = []

    def score(run_id: str, baseline: list[str], threshold: float, truth: RunRecord, source: str) -> None:
        judged = anchors.judge_anchors([raw[b] for b in baseline], raw[run_id], threshold, params=params)
        for name, j in judged.items():
            rows.extend(score_rows(Truth.of(run_id, system, truth), {name: j["flagged_counters"]},
                                   j["counter_scores"], source))

    if loo:
        passed = history.passed_runs(index, system, exclude=exclude)
        null = anchors.plain_chart_null({r: raw[r] for r in passed}, **kw)
        for run_id in history.verified_runs(index, system, exclude=exclude):
            baseline = [r for r in passed if r != run_id]
            if baseline:
                score(run_id, baseline, max((v for r, v in null.items() if r != run_id), default=0.0),
                      index[run_id], "loo")
    nulls: dict[tuple, dict[str, float]] = {}
    for run_id, truth in labels.items():
        if index[run_id]["system"] != system:
            continue
        baseline = history.baseline_for(run_id, index, window=window, exclude=exclude)
        if not baseline:
            continue
        key = tuple(sorted(baseline))
        if key not in nulls:
            nulls[key] = anchors.plain_chart_null({r: raw[r] for r in baseline}, **kw)
        score(run_id, baseline, max(nulls[key].values(), default=0.0), truth, "targets")
    return rows
