"""evaluate: leave-one-out accuracy of the association-rule detectors on the labelled history.

Each verified run in turn is the target and the other passed runs of its system its
history (bin edges learned again without it when it is a passed run).  Counter-level
precision, recall and F as defined in Foo et al. 2015 §IV (seed 003):

* ``P = 1 - m_false / m_total`` (1 when nothing is flagged),
* ``R = (m_total - m_false) / m_expected`` (1 when nothing is expected),
* ``F`` = harmonic mean of P and R,

with ``m_expected`` the run's ``regressed_counters``.  Run-level accuracy counts a run
right when the combiner's verdict (fail = at least one flagged counter) equals the
analyst's.  Unanalysed targets whose truth is known (``evaluate.labels`` files, such as
the simulator's ``target_labels.json``) are scored from their verdict files.

The control charts (Nguyen 2017 §7.5, seed 004) are evaluated here too, once per
``dvc repro``: each verified run charted against the other passed runs and judged by a
calibration without it (:func:`loo_charts`), scored by run verdict and counter F / ROC AUC.
The report's **headline** (rules and control charts together, ``headline.compose``) is
scored with those same charts.  Targets are scored from their verdict files: the three
combiners from ``detect``'s, the headline from the report's.  The cause classifier joins the
headline's leave-one-out with its own leave-one-out fault scores (:func:`loo_classified`, from
``train_causes``' model metadata) and has its own row when it judged a run.

Writes ``metrics/detection.json`` and ``metrics/control_charts.json`` (DVC metrics),
``metrics/detection_runs.csv`` and ``metrics/control_charts_runs.csv`` (one row per run,
for ``dvc plots``).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipelines import anchors, archive, clusters, config, control_charts, detect, discretize, headline, history, labs, locks, store
from pipelines.progress import Progress

log = logging.getLogger("regresslab.evaluate")
COMBINERS = ("single", "bagging", "stacking")


# --------------------------------------------------------------------------- pure core


def counter_prf(flagged: list[str], expected: list[str]) -> tuple[float, float, float]:
    """Precision, recall and F of one run (Foo et al. 2015 §IV, with their edge cases)."""
    m_total = len(flagged)
    m_false = len(set(flagged) - set(expected))
    m_expected = len(expected)
    p = 1.0 - m_false / m_total if m_total > 0 else 1.0
    r = (m_total - m_false) / m_expected if m_expected > 0 else 1.0
    f = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return p, r, f


def roc_auc(scores: dict[str, float], positives: set[str]) -> float | None:
    """Area under the ROC curve of a counter ranking (Mann-Whitney, ties count half)."""
    pos = [v for c, v in scores.items() if c in positives]
    neg = [v for c, v in scores.items() if c not in positives]
    if not pos or not neg:
        return None
    pos_a, neg_a = np.asarray(pos)[:, None], np.asarray(neg)[None, :]
    return float(((pos_a > neg_a).sum() + 0.5 * (pos_a == neg_a).sum()) / (pos_a.size * neg_a.size))


def score_rows(run_id: str, system: str, truth_verdict: str, cause: str, expected: list[str],
               flagged_by: dict[str, list[str]], scores: dict[str, float], source: str,
               failed: bool | None = None) -> list[dict[str, Any]]:
    """One row per combiner; a combiner failed the run when it flagged a counter (or per ``failed``)."""
    rows = []
    auc = roc_auc(scores, set(expected))
    for combiner, flagged in flagged_by.items():
        p, r, f = counter_prf(flagged, expected)
        rows.append({"run_id": run_id, "system": system, "source": source, "cause": cause,
                     "truth": truth_verdict, "combiner": combiner, "flagged": len(flagged),
                     "expected": len(expected), "false": len(set(flagged) - set(expected)),
                     "precision": p, "recall": r, "f": f,
                     "verdict_correct": ((len(flagged) > 0) if failed is None else failed) == (truth_verdict == "fail"),
                     "roc_auc": auc})
    return rows


def summarize(rows: pd.DataFrame) -> dict[str, Any]:
    """Averages per combiner: counter F over failed runs, false counters on normal runs, run accuracy."""
    out: dict[str, Any] = {}
    for combiner, g in rows.groupby("combiner"):
        failed = g[g["truth"] == "fail"]
        normal = g[g["truth"] == "pass"]
        out[combiner] = {
            "runs": int(len(g)),
            "failed_runs": int(len(failed)),
            "precision": round(float(failed["precision"].mean()), 4) if len(failed) else None,
            "recall": round(float(failed["recall"].mean()), 4) if len(failed) else None,
            "f": round(float(failed["f"].mean()), 4) if len(failed) else None,
            "normal_runs": int(len(normal)),
            "normal_runs_with_flags": int((normal["flagged"] > 0).sum()),
            "false_counters_on_normal_runs": int(normal["flagged"].sum()),
            "run_accuracy": round(float(g["verdict_correct"].mean()), 4),
            "counter_roc_auc": round(float(failed["roc_auc"].dropna().mean()), 4)
            if failed["roc_auc"].notna().any() else None,
        }
    return out


def loo_charts(frames: store.FrameStore, index: dict[str, Any], verified: list[str], passed: list[str],
               *, params: dict[str, Any], lab_kw: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Leave-one-out on the labelled history: each verified run charted against the other
    passed runs (most similar environment), judged by a calibration without it.

    The calibration without a held-out passed run drops its own chart and its repeat pairs;
    the other passed runs' charts are computed once, so a baseline of theirs may include
    the held-out run (it widens their limits a little: their scores, and so the threshold,
    can only be lower — the held-out run is judged slightly more strictly).  This keeps the
    cost linear in the history instead of quadratic.  A held-out run whose lab its baseline
    does not share is moved by its lab's level learned from the other verified runs
    (:func:`labs.lab_shift`), as the nightly chart does, and judged by the normal runs charted
    across labs (:func:`control_charts.matched_calibration`, charted once, the first time a run
    needs them; the held-out run's own score left out).  Returns per run the
    :func:`control_charts.judge` result (with its ``counter_scores``).
    """
    runs = list(dict.fromkeys(verified + passed))
    envs = {r: index[r].get("environment") or {} for r in runs}
    versions = {r: index[r].get("version") for r in runs}
    lab_runs = {r: index[r]["verdict"] for r in verified}
    charter = control_charts.Charter(frames, params)
    parts = control_charts.calibration_parts({r: frames[r] for r in passed}, envs, versions, params=params,
                                             charter=charter)
    cross: dict[str, Any] | None = None          # the cross-lab null, charted the first time a run needs it
    out = {}
    progress = Progress(log, "control_charts LOO", len(verified), every=8)
    for i, run_id in enumerate(verified, 1):
        others = [r for r in passed if r != run_id]
        calibration = control_charts.calibration_from(parts, params=params,
                                                      leave_out=run_id if run_id in passed else None)
        base = control_charts.chart_baseline({r: envs[r] for r in others}, envs[run_id], params["max_baseline_runs"])
        lab = charter.lab(run_id, base, index, lab_runs, lab_kw, candidates=others)
        ratios, _, _ = charter(base, run_id, lab["shift"])
        ratios = ratios.drop(index=labs.not_judged(lab), errors="ignore")
        if lab["status"] != "same_lab" and cross is None:
            independent = control_charts.calibration_from(parts, params=params)["load_independent"]
            cross = control_charts.cross_lab_calibration(passed, index, charter, independent, params,
                                                         lab_runs=lab_runs, lab_kw=lab_kw)
        calibration, null = control_charts.matched_calibration({**calibration, "cross_lab": cross},
                                                               lab["status"], run_id)
        result = control_charts.judge(ratios, calibration, top_fraction=float(params["top_fraction"]),
                                      counter_flag_floor=float(params["counter_flag_floor"]),
                                      false_alarm_rate=float(params["false_alarm_rate"]))
        result["lab"], result["null"] = labs.summary(lab), null
        out[run_id] = result
        progress.step(i)
    return out


def chart_rows(charts: dict[str, dict[str, Any]], index: dict[str, Any]) -> list[dict[str, Any]]:
    """:func:`loo_charts` results scored against the truth: one row per run."""
    rows = []
    for run_id, result in charts.items():
        expected = index[run_id].get("regressed_counters") or []
        p, r, f = counter_prf(result["flagged_counters"], expected)
        rows.append({"run_id": run_id, "system": index[run_id]["system"], "cause": index[run_id].get("cause"),
                     "truth": index[run_id]["verdict"], "verdict": result["verdict"],
                     "score": result["violation_ratio"], "threshold": result["threshold"],
                     "flagged": len(result["flagged_counters"]), "precision": p, "recall": r, "f": f,
                     "roc_auc": roc_auc(result["counter_scores"], set(expected))})
    return rows


def summarize_runs(rows: pd.DataFrame) -> dict[str, Any]:
    """Run-verdict precision/recall/accuracy (fail = positive), counter F and ROC AUC on failed runs."""
    fail_t, fail_p = rows["truth"] == "fail", rows["verdict"] == "fail"
    tp = int((fail_t & fail_p).sum())
    failed = rows[fail_t]
    return {"runs": int(len(rows)), "failed_runs": int(fail_t.sum()),
            "run_precision": round(tp / int(fail_p.sum()), 4) if fail_p.any() else None,
            "run_recall": round(tp / int(fail_t.sum()), 4) if fail_t.any() else None,
            "run_accuracy": round(float((fail_t == fail_p).mean()), 4),
            "normal_runs_failed": int((~fail_t & fail_p).sum()),
            "counter_f": round(float(failed["f"].mean()), 4) if len(failed) else None,
            "counter_roc_auc": round(float(failed["roc_auc"].dropna().mean()), 4)
            if failed["roc_auc"].notna().any() else None}


# --------------------------------------------------------------------------- I/O shell


def loo_system(system: str, index: dict[str, Any], params: dict[str, Any], mine_params: dict[str, Any],
               disc_params: dict[str, Any], exclude: set[str], frames: store.FrameStore,
               charts: dict[str, dict] | None, report_params: dict[str, Any], *, lab_kw: dict[str, Any],
               clustered: dict[str, dict] | None = None,
               classified: dict[str, dict] | None = None) -> list[dict[str, Any]]:
    """Leave-one-out rows of the three combiners (and of the headline when ``charts`` holds
    the control charts' leave-one-out results of the same runs; with the cause classifier's
    leave-one-out evidence when ``classified`` holds it, :func:`loo_classified`).

    Every verified run is analysed against the passed runs without it; the passed runs'
    stacking scores so obtained are the null of each held-out run's stacking p-value (its own
    score left out), as ``detect.calibrate_system`` does for a night, at no extra cost.  A
    held-out run whose baseline does not share its lab is judged by the passed runs analysed
    across labs instead (:func:`labs.matched_null`; under the bins of every passed run), analysed
    only when such a run exists."""
    passed = history.passed_runs(index, system, exclude=exclude)
    verified = history.verified_runs(index, system, exclude=exclude)
    directory = config.loo_cache_dir(system)
    all_ref = store.reference_load(passed)
    all_edges = discretize.edges_for([frames.at(r, all_ref) for r in passed], disc_params)
    cache = detect.DetectCache(frames)
    analysed: dict[str, tuple[dict, dict]] = {}
    progress = Progress(log, f"evaluate {system}", len(verified), what="LOO targets")
    for i, run_id in enumerate(verified, 1):
        baseline = [r for r in passed if r != run_id]
        if run_id in passed:          # learn the bins again without the held-out run
            ref = store.reference_load(baseline)
            edges = discretize.edges_for([frames.at(r, ref) for r in baseline], disc_params)
        else:
            ref, edges = all_ref, all_edges
        result, doc = detect.analyse(run_id, baseline, index, edges, mine_params, params, directory, cache, ref,
                                     directory / "single", lab_runs={r: index[r]["verdict"] for r in verified},
                                     lab_kw=lab_kw)
        analysed[run_id] = ({c: result[c] for c in COMBINERS} | {"s": result["s"], "weights": result["weights"],
                                                                  "small_changes": result["small_changes"]}, doc)
        progress.step(i)
    null = {r: detect.stacking_score(analysed[r][0]) for r in passed if r in analysed}
    statuses = {r: doc["details"]["lab"]["status"] for r, (_, doc) in analysed.items()}
    cross = None
    if any(s != "same_lab" for s in statuses.values()):     # a held-out run judged across labs
        def judge(run_id: str, base: list[str], lab_runs: dict[str, str]) -> tuple[str, float]:
            result, doc = detect.analyse(run_id, base, index, all_edges, mine_params, params, directory, cache,
                                         all_ref, directory / "single", lab_runs=lab_runs, lab_kw=lab_kw,
                                         with_single=False, environment_from=[r for r in passed if r != run_id])
            return doc["details"]["lab"]["status"], detect.stacking_score(result)
        cross = labs.cross_lab_null(passed, {r: labs.lab_key(index[r].get("environment")) for r in index},
                                    {r: index[r]["verdict"] for r in verified}, judge)
    rows = []
    for run_id, (result, doc) in analysed.items():
        row = index[run_id]
        truth = (run_id, system, row["verdict"], row.get("cause") or "none", row.get("regressed_counters") or [])
        rows += score_rows(*truth, {c: result[c] for c in COMBINERS}, doc["counter_scores"], "loo")
        if charts is not None:            # the control charts alone, and the report's headline: both together
            rows += score_rows(*truth, {"control_charts": charts[run_id]["flagged_counters"]},
                               charts[run_id]["counter_scores"], "loo")
            matched, kind = labs.matched_null(statuses[run_id], null, cross, run_id)
            doc["methods"]["association_rules_stacking"].update(
                detect.stacking_evidence(result, list(matched.values())), null=kind)
            head = headline.compose({**doc, "run_id": run_id}, {**charts[run_id], "baseline_runs": []},
                                    (classified or {}).get(run_id),
                                    verdict_rule=report_params["verdict_rule"], flag_rule=report_params["flag_rule"],
                                    false_alarm_rate=float(report_params["false_alarm_rate"]),
                                    clustered=(clustered or {}).get(run_id),
                                    detectors=report_params["headline_detectors"],
                                    classifier_resolution=float(report_params["classifier_resolution"]),
                                    combination=report_params["combination"])
            rows += score_rows(*truth, {"headline": head["flagged_counters"]}, head["counter_scores"], "loo",
                               failed=head["verdict"] == "fail")
            rows += classifier_rows(*truth, head, "loo")
    return rows


def loo_classified(meta: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The cause classifier's leave-one-out evidence per verified run, shaped as a prediction for
    ``headline.compose``: the run's fault score from the model trained without it
    (``train_causes``), against the same scores of the other normal runs.  Those came from models
    that saw the held-out run; retraining every learner once per held-out run and per other run
    would cost the square of ``train_causes``' leave-one-out, for a null that moves by one run in
    ``n``.  Empty for a model without fault scores (older than issue 11)."""
    loo = meta.get("loo_predictions") or {}
    if not loo or any("fault_score" not in v for v in loo.values()):
        return {}
    normal = {r: v["fault_score"] for r, v in loo.items() if v["truth"] == "none"}
    return {r: {"label": None, "fault_score": v["fault_score"],
                "null_fault_scores": sorted(s for n, s in normal.items() if n != r)} for r, v in loo.items()}


def classifier_rows(run_id: str, system: str, truth_verdict: str, cause: str, expected: list[str],
                    head: dict[str, Any], source: str) -> list[dict[str, Any]]:
    """The cause classifier's own row, when it judged the run (not when it abstained): a failed
    run shows the headline's top counters (the classifier names a cause, not counters)."""
    evidence = head["methods"].get("cause_classifier") or {}
    if evidence.get("verdict") not in ("pass", "fail"):
        return []
    failed = evidence["verdict"] == "fail"
    shown = headline.top_counters(head["counter_scores"]) if failed else []
    return score_rows(run_id, system, truth_verdict, cause, expected, {"cause_classifier": shown},
                      head["counter_scores"], source, failed=failed)


def cluster_rows(clustered: dict[str, dict[str, Any]], index: dict[str, Any]) -> list[dict[str, Any]]:
    """Leave-one-out rows of the clustered regression models (``clusters.loo``)."""
    rows = []
    for run_id, res in clustered.items():
        if res.get("verdict") is None:
            continue
        row = index[run_id]
        rows += score_rows(run_id, row["system"], row["verdict"], row.get("cause") or "none",
                           row.get("regressed_counters") or [], {"clustered_regression": res["flagged_counters"]},
                           res["counter_scores"], "loo", failed=res["verdict"] == "fail")
    return rows


def anchor_rows(system: str, index: dict[str, Any], frames: store.FrameStore, exclude: set[str],
                labels: dict[str, dict[str, Any]], *, params: dict[str, Any], window: int) -> list[dict[str, Any]]:
    """The anchors (``anchors``) scored like the detectors: in leave-one-out on the verified runs
    (the other passed runs are the baseline), and on the targets whose truth is known (their
    baseline as the pipeline chooses it).  Frames are the normalised ones, not load-scaled."""
    raw = {r: frames.at(r, None) for r in index if index[r]["system"] == system}
    passed = history.passed_runs(index, system, exclude=exclude)
    kw = {k: params[k] for k in ("lower_pct", "upper_pct", "top_fraction")}
    null = anchors.plain_chart_null({r: raw[r] for r in passed}, **kw)
    rows = []

    def score(run_id: str, baseline: list[str], threshold: float, truth: dict[str, Any], source: str) -> None:
        judged = anchors.judge_anchors([raw[b] for b in baseline], raw[run_id], threshold, params=params)
        for name, j in judged.items():
            rows.extend(score_rows(run_id, system, truth["verdict"], truth.get("cause") or "none",
                                   truth.get("regressed_counters") or [], {name: j["flagged_counters"]},
                                   j["counter_scores"], source))

    for run_id in history.verified_runs(index, system, exclude=exclude):
        baseline = [r for r in passed if r != run_id]
        if baseline:
            score(run_id, baseline, max((v for r, v in null.items() if r != run_id), default=0.0), index[run_id],
                  "loo")
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


def labelled_targets(index: dict[str, Any], label_files: list[Path]):
    """``(run_id, truth)`` of every run of the index that a labels file knows the truth of."""
    for path in label_files:
        if path.exists():
            for run_id, truth in archive.read_json(path).items():
                if run_id in index:
                    yield run_id, truth


def target_rows(index: dict[str, Any], label_files: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for run_id, truth in labelled_targets(index, label_files):
        detection = config.detection_path(run_id)
        if not detection.exists():
            continue
        doc = archive.read_json(detection)
        flagged = {c: doc["methods"][f"association_rules_{c}"]["flagged_counters"] for c in COMBINERS}
        rows += score_rows(run_id, index[run_id]["system"], truth["verdict"], truth.get("cause") or "none",
                           truth.get("regressed_counters") or [], flagged, doc["counter_scores"], "targets")
        chart = store.read_optional(config.chart_path(run_id))
        if chart and chart.get("verdict"):
            rows += score_rows(run_id, index[run_id]["system"], truth["verdict"], truth.get("cause") or "none",
                               truth.get("regressed_counters") or [], {"control_charts": chart["flagged_counters"]},
                               chart["counter_scores"], "targets", failed=chart["verdict"] == "fail")
        clustered = store.read_optional(config.cluster_path(run_id))
        if clustered and clustered.get("verdict"):
            rows += score_rows(run_id, index[run_id]["system"], truth["verdict"], truth.get("cause") or "none",
                               truth.get("regressed_counters") or [], {"clustered_regression": clustered["flagged_counters"]},
                               clustered["counter_scores"], "targets", failed=clustered["verdict"] == "fail")
        verdict_file = config.run_report_path(run_id)
        if verdict_file.exists():
            head = archive.read_json(verdict_file)
            rows += score_rows(run_id, index[run_id]["system"], truth["verdict"], truth.get("cause") or "none",
                               truth.get("regressed_counters") or [], {"headline": head["flagged_counters"]},
                               head["counter_scores"], "targets", failed=head["verdict"] == "fail")
            rows += classifier_rows(run_id, index[run_id]["system"], truth["verdict"], truth.get("cause") or "none",
                                    truth.get("regressed_counters") or [], head, "targets")
    return rows


def target_cause_figures(index: dict[str, Any], label_files: list[Path]) -> dict[str, Any]:
    """How the targets' causes compare with the truth, on the targets that truly failed.

    The cause is judged whatever the headline said (issue 15: cause accuracy on failed targets):
    the cause the run would show failed (``headline.cause_of``: the nearest fault cause, and
    whether it is known) against the true cause.  For a cause seen in the history: whether that label is right (``nearest``), whether it
    was called known, and the same among the runs the headline failed (what a reader sees).  For
    an unseen cause: whether it was called unknown.  ``confusion`` is truth -> nearest -> runs."""
    seen = {(row["system"], row.get("cause")) for row in index.values() if row.get("verdict") == "fail"}
    known_rows, unseen_rows, confusion = [], [], {}
    for run_id, truth in labelled_targets(index, label_files):
        verdict_file = config.run_report_path(run_id)
        if truth.get("verdict") != "fail" or not verdict_file.exists():
            continue
        doc = archive.read_json(verdict_file)
        as_failed = headline.cause_of("fail", doc.get("details", {}).get("cause_prediction"))
        nearest, known = as_failed["label"], as_failed["known"]
        row = confusion.setdefault(str(truth.get("cause")), {})
        row[str(nearest)] = row.get(str(nearest), 0) + 1
        if (index[run_id]["system"], truth.get("cause")) in seen:
            known_rows.append((nearest == truth["cause"], known, doc["verdict"] == "fail"))
        else:
            unseen_rows.append(not known)

    def share(values: list[bool]) -> float | None:
        return round(float(np.mean(values)), 4) if values else None
    detected = [a for a, _, d in known_rows if d]
    return {"seen_cause_runs": len(known_rows),
            "seen_cause_label_correct": share([a for a, _, _ in known_rows]),
            "seen_cause_called_known": share([b for _, b, _ in known_rows]),
            "seen_cause_known_and_correct": share([a and b for a, b, _ in known_rows]),
            "seen_cause_runs_failed_by_headline": len(detected),
            "seen_cause_label_correct_when_failed": share(detected),
            "unseen_cause_runs": len(unseen_rows),
            "unseen_cause_called_unknown": share(unseen_rows),
            "confusion": {t: dict(sorted(r.items())) for t, r in sorted(confusion.items())}}


DETECTORS = ("headline", "control_charts", "clustered_regression", "cause_classifier") + COMBINERS + anchors.ANCHORS


def detector_table(metrics: dict[str, Any]) -> list[str]:
    """The detectors beside the anchors, one markdown row each: run accuracy, normal runs failed and
    counter F / ROC AUC, in leave-one-out and on the targets whose truth is known."""
    def cell(source: str, name: str) -> str:
        m = metrics.get(source, {}).get(name)
        if not m:
            return "— | — | — | —"
        fmt = lambda v: "—" if v is None else f"{v:.3f}"     # noqa: E731
        return (f"{fmt(m['run_accuracy'])} | {m['normal_runs_with_flags']}/{m['normal_runs']} | {fmt(m['f'])} | "
                f"{fmt(m['counter_roc_auc'])}")
    lines = ["| detector | LOO run accuracy | LOO normal failed | LOO counter F | LOO AUC | targets run accuracy "
             "| targets normal failed | targets counter F | targets AUC |", "|" + "---|" * 9]
    lines += [f"| {name} | {cell('loo', name)} | {cell('targets', name)} |" for name in DETECTORS
              if name in metrics.get("loo", {}) or name in metrics.get("targets", {})]
    return lines


def write_table(metrics: dict[str, Any], frame: pd.DataFrame, name: str) -> None:
    """``metrics/<name>.json`` and ``metrics/<name>_runs.csv``, atomically."""
    config.METRICS.mkdir(parents=True, exist_ok=True)
    archive.write_json_atomic(config.METRICS / f"{name}.json", metrics)
    with archive.atomic_path(config.METRICS / f"{name}_runs.csv") as tmp:
        frame.to_csv(tmp, index=False)


@locks.holding("evaluate")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("detect")
    mine_params = config.load_params("mine_rules")
    disc_params = config.load_params("discretize")
    ev_params = config.load_params("evaluate")
    cc_params = config.load_params("control_charts")
    cl_params = config.load_params("clusters")
    report_params = config.load_params("report")
    label_files = [config.ROOT / p for p in ev_params["labels"]]
    index = archive.read_valid_index()
    hist = config.load_params("history")
    exclude = set(hist["exclude"])
    labels = dict(labelled_targets(index, label_files))
    rows, cc_rows = [], []
    for system in history.systems(index):
        frames = store.FrameStore.of_system(system)
        verified = history.verified_runs(index, system, exclude=exclude)
        passed = history.passed_runs(index, system, exclude=exclude)
        charts = loo_charts(frames, index, verified, passed, params=cc_params,
                            lab_kw=labs.lab_params(hist))
        cc_rows += chart_rows(charts, index)
        clustered = clusters.loo(verified, passed, index, frames, cl_params, hist)
        rows += cluster_rows(clustered, index)
        rows += loo_system(system, index, params, mine_params, disc_params, exclude, frames, charts,
                           report_params, lab_kw=labs.lab_params(hist), clustered=clustered,
                           classified=loo_classified(store.latest_model_meta(system)))
        rows += anchor_rows(system, index, frames, exclude, labels, params=ev_params["anchors"], window=hist["window"])
    cc_frame = pd.DataFrame(cc_rows)
    cc_metrics = {"loo": summarize_runs(cc_frame)} if len(cc_frame) else {}
    for system, g in (cc_frame.groupby("system") if len(cc_frame) else []):
        cc_metrics[f"loo_{system}"] = summarize_runs(g)
    write_table(cc_metrics, cc_frame, "control_charts")
    print(f"[evaluate] control charts LOO {cc_metrics.get('loo')}")
    rows += target_rows(index, label_files)
    frame = pd.DataFrame(rows)
    metrics: dict[str, Any] = {}
    if len(frame):
        for source, g in frame.groupby("source"):
            metrics[source] = summarize(g)
            for system, gs in g.groupby("system"):
                metrics[f"{source}_{system}"] = summarize(gs)
    metrics["targets_causes"] = target_cause_figures(index, label_files)
    write_table(metrics, frame, "detection")
    for line in detector_table(metrics):
        print(f"[evaluate] {line}")
    print(f"[evaluate] target causes: {metrics['targets_causes']}")


if __name__ == "__main__":
    main()
