"""Variants of the calibrated detectors measured on a labelled tree and not adopted.

    python bench/compare_detector_variants.py gap-null build/smd smd-1-6 --gap-days 3
    python bench/compare_detector_variants.py peak build/smd ../shared/data/smd/target_labels.json
    python bench/compare_detector_variants.py counter-fusion build/nezha ../shared/data/nezha/target_labels.json
    python bench/compare_detector_variants.py cross-lab-null . data/example/target_labels.json

Each tree is one of ``make real-<set>`` (``build/<set>``) or the checkout after ``dvc repro``
(``.`` with ``data/example/target_labels.json``), holding this code's outputs.

* ``gap-null``: is a drifting server's false alarm a matter of time?  Stacking's null is each
  normal run against the models of *all* the others, its neighbours in time included, while a
  target is judged only by runs before it, days earlier.  This judges each normal run only by
  runs at least ``--gap-days`` away from it and prints the largest scores: if drift grew with the
  gap, a null with the target's gap would hold the drifted normal targets' scores.
* ``peak``: a sparse window statistic for the control charts, the largest over counters of the
  strongest-window ratio over the counter's normal window maximum (a fault in 4 of 38 counters
  is diluted by the top-half average), calibrated in leave-one-out like the two others and
  Bonferroni-combined with them; prints the labelled targets' p-values and accuracies, charts
  and headline (Simes over the detectors' p-values of the verdict files), before and after.
* ``counter-fusion``: the headline's counter ranking (mean of stacking's and the charts' counter
  scores) against the charts' alone, the cluster models' alone, the mean of the three, and rank
  (Borda) fusions: counter ROC AUC averaged over the labelled failed targets, as ``evaluate``.
* ``cross-lab-null``: the null of a target judged across labs.  The nightly
  calibrations judge each normal run by the other labs only, on the counters a new-lab target is
  judged on (``labs.cross_lab_null``, environment dependence learned from every lab).  This
  prints, beside that matched null (read from the calibration files) and the same-lab one, the
  *unmatched* null — environment dependence learned from the other labs
  only, so a left-out lab whose component they never vary is judged on every counter it moves —
  and each new-lab target's stacking and chart p-values under it.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _root(tree: str) -> None:
    os.environ["REGRESSLAB_ROOT"] = str(Path(tree).resolve())


def gap_null(tree: str, system: str, gap_days: float) -> None:
    _root(tree)
    import pandas as pd

    from pipelines import config
    from pipelines.stats import effects
    from pipelines.systems import history
    from pipelines.detectors import rule_detection, rule_mining, rule_verdict
    from pipelines.storage import manifest, store
    index = manifest.read_valid_index()
    params, mine = rule_detection.DetectParams.load(), rule_mining.MiningParams.load()
    hist = history.HistoryParams.load()
    spec = store.read_edges(system)
    cache = rule_detection.DetectCache(store.FrameStore(spec["reference_load"]))
    ctx = rule_detection.DetectContext.of_system(system, index, spec, cache, params, mine, hist,
                                                effects.Significance.load())
    passed = hist.passed(index, system)
    verdicts = hist.verdicts(index, system)
    when = {r: pd.Timestamp(index[r]["started_at"]) for r in passed}
    scores = {}
    for r in passed:
        base = [b for b in passed if b != r and abs((when[b] - when[r]).total_seconds()) >= gap_days * 86400]
        if len(base) < 2:
            continue
        result, _ = rule_detection.analyse(r, base, ctx, lab_runs=verdicts, with_single=False)
        scores[r] = round(rule_verdict.stacking_score(result), 3)
    calibration = store.read_optional(config.stacking_calibration_path(system)) or {}
    loo = sorted((calibration.get("normal_scores") or {}).values())
    print(f"{system}: {len(scores)} normal runs judged by runs >= {gap_days} days away; largest stacking scores "
          f"{sorted(scores.values())[-6:]}; leave-one-out null's largest {loo[-6:]}")
    for run_id in [t for t in history.targets(index) if index[t]["system"] == system]:
        doc = store.read_optional(config.detection_path(run_id)) or {}
        stacking = (doc.get("methods") or {}).get("association_rules_stacking") or {}
        print(f"  target {run_id}: stacking score {stacking.get('score')}, p {stacking.get('p_value')}")


def cross_lab_null(tree: str, labels_path: str) -> None:
    _root(tree)
    from pipelines import config
    from pipelines.stats import effects
    from pipelines.systems import history, labs
    from pipelines.detectors import rule_ensemble, rule_mining
    from pipelines.storage import manifest, store
    labels = json.loads(Path(labels_path).read_text())
    index = manifest.read_valid_index()
    params, mine = rule_detection.DetectParams.load(), rule_mining.MiningParams.load()
    hist = history.HistoryParams.load()
    for system in history.systems(index):
        spec = store.read_edges(system)
        cache = rule_detection.DetectCache(store.FrameStore(spec["reference_load"]))
        ctx = rule_detection.DetectContext.of_system(system, index, spec, cache, params, mine, hist,
                                                effects.Significance.load())
        passed = hist.passed(index, system)
        verdicts = hist.verdicts(index, system)
        lab_of = {r: labs.lab_key(index[r].get("environment")) for r in index}

        def stacking(r: str, base: list[str], lab_runs: dict[str, str]) -> tuple[str, float]:
            result, doc = rule_detection.analyse(r, base, ctx, lab_runs=lab_runs, with_single=False)
            return doc["details"]["lab"]["status"], round(rule_verdict.stacking_score(result), 3)
        cross = labs.cross_lab_null(passed, lab_of, verdicts, stacking)      # unmatched: environment from the other labs
        same = (store.read_optional(config.stacking_calibration_path(system)) or {}).get("normal_scores") or {}
        matched = (store.read_optional(config.stacking_calibration_path(system)) or {}).get("cross_lab_scores") or {}
        print(f"{system}: {len({lab_of[r] for r in passed})} lab(s) with normal runs; same-lab null (n={len(same)}) "
              f"largest {sorted(round(v, 3) for v in same.values())[-5:]}; "
              + "".join(f"matched cross-lab null as {k} (n={len(v)}) largest {sorted(round(x, 3) for x in v.values())[-5:]}; "
                        for k, v in matched.items())
              + "unmatched: "
              + "; ".join(f"cross-lab null as {k} (n={len(v)}) largest {sorted(v.values())[-5:]}"
                          for k, v in cross.items()))
        for run_id, doc, status in _across_labs(index, system, config.detection_path,
                                                lambda doc: ((doc.get("details") or {}).get("lab") or {}).get("status")):
            score = ((doc.get("methods") or {}).get("association_rules_stacking") or {}).get("score")
            n_models = max(1, len(doc.get("baseline_runs") or []))     # one model per baseline run
            p_same = rule_verdict.stacking_pvalue(score, [v for k, v in same.items() if k != run_id], n_models)
            null = list(cross.get(status, {}).values())
            p_cross = rule_verdict.stacking_pvalue(score, null, n_models) if len(null) >= 2 else float("nan")
            print(f"  {run_id} ({(labels.get(run_id) or {}).get('verdict')}, {status}): score {score}, "
                  f"p same-lab {p_same:.4f}, unmatched cross-lab {p_cross:.4f}, nightly "
                  f"{(doc.get('methods') or {}).get('association_rules_stacking', {}).get('p_value')}"
                  + ("" if len(null) >= 2 else " (no cross-lab null: the history's normal runs share one lab)"))
        _charts_cross_lab(system, index, passed, verdicts, lab_of, labels, hist)


def _across_labs(index: dict, system: str, path_of, status_of):
    """The system's targets judged across labs: (run_id, the stage's result file, its lab status)."""
    from pipelines.systems import history
    from pipelines.storage import store
    for run_id in [t for t in history.targets(index) if index[t]["system"] == system]:
        doc = store.read_optional(path_of(run_id)) or {}
        status = status_of(doc)
        if status not in (None, "same_lab"):
            yield run_id, doc, status


def _charts_cross_lab(system, index, passed, verdicts, lab_of, labels, hist) -> None:
    """The same for the control charts: each normal run charted against the other labs' passed
    runs only (its lab's level learned, or unknown), its run and window scores; then every new-lab
    target's chart p-value (run and window, Bonferroni) under the same-lab calibration and under
    one whose null scores are those cross-lab ones."""
    from pipelines import config
    from pipelines.detection import chart_runs
    from pipelines.stats import effects
    from pipelines.systems import labs
    from pipelines.detectors import chart_calibration, charts
    from pipelines.storage import atomic, store
    params = charts.ControlChartParams.load()
    frames = store.FrameStore.of_system(system)
    calibration = atomic.read_json(config.calibration_path(system))

    significance = effects.Significance.load()

    def chart(r: str, base: list[str], lab_runs: dict[str, str]) -> tuple[str | None, dict[str, float]]:
        out = chart_runs.chart_run(r, base, chart_runs.SystemCharts(
            index, frames, calibration, params, labs.lab_params(hist), significance), lab_runs)
        return (out.get("lab") or {}).get("status"), {"run": out.get("violation_ratio"),
                                                       "window": out.get("window_ratio")}
    cross = labs.cross_lab_null(passed, lab_of, verdicts, chart)
    print(f"{system} charts: same-lab null largest run scores "
          f"{sorted(round(v, 3) for v in calibration['normal_scores'].values())[-5:]}; "
          + "; ".join(f"cross-lab as {k} (n={len(v)}) largest {sorted(x['run'] for x in v.values())[-5:]}"
                      for k, v in cross.items()))
    for run_id, doc, status in _across_labs(index, system, config.chart_path,
                                            lambda doc: (doc.get("lab") or {}).get("status")):
        null = cross.get(status, {})
        if len(null) < 2:
            print(f"  {run_id}: no cross-lab null for the charts")
            continue
        matched = dict(calibration, normal_scores={r: x["run"] for r, x in null.items()},
                       window_scores={r: x["window"] for r, x in null.items()}, cross_lab=None)
        baseline = hist.baseline(run_id, index)
        out = chart_runs.chart_run(run_id, baseline, chart_runs.SystemCharts(
            index, frames, matched, params, labs.lab_params(hist), significance), verdicts)
        print(f"  {run_id} ({(labels.get(run_id) or {}).get('verdict')}, {status}): run {doc.get('violation_ratio')}, "
              f"window {doc.get('window_ratio')}; chart p nightly ({doc.get('null')} null) {doc.get('p_value')}, "
              f"unmatched cross-lab {out['p_value']}")


def _verdict_pvalues(doc: dict) -> dict:
    return dict(doc["details"]["p_values"])


def peak(tree: str, labels_path: str) -> None:
    _root(tree)
    import pandas as pd

    from pipelines import config
    from pipelines.systems import history
    from pipelines.stats import pvalues
    from pipelines.detectors import charts
    from pipelines.storage import atomic, manifest, store
    labels = json.loads(Path(labels_path).read_text())
    index = manifest.read_valid_index()
    params, hist = charts.ControlChartParams.load(), history.HistoryParams.load()
    alpha = float(config.load_params("report")["false_alarm_rate"])
    combination = config.load_params("report")["combination"]
    floor = params.counter_flag_floor
    rows = []
    for system in history.systems(index):
        frames = store.FrameStore.of_system(system)
        passed = hist.passed(index, system)
        parts = chart_calibration.calibration_parts({r: frames[r] for r in passed}, {r: index[r].get("environment") or {} for r in passed},
                                     {r: index[r].get("version") for r in passed}, params=params)
        windows = pd.DataFrame({r: x["window"] for r, x in parts.runs.items()}).T
        null = [float((windows.loc[r] / windows.drop(index=r).max(axis=0).clip(lower=floor)).max()) for r in windows.index]
        for run_id, truth in labels.items():
            chart = store.read_optional(config.chart_path(run_id))
            if run_id not in index or index[run_id]["system"] != system or not chart or chart.get("verdict") is None:
                continue
            s = pd.Series(chart["counter_scores"], dtype=float)
            p_peak = pvalues.calibrated_pvalue(float((s / (1 - s)).max()), null, resolution=0.01)
            charts_new = pvalues.combined_pvalue([chart["p_run"], chart["p_window"], p_peak], "bonferroni")
            pv = _verdict_pvalues(atomic.read_json(config.run_report_path(run_id)))
            head_old = pvalues.combined_pvalue([v for v in pv.values() if v is not None], combination)
            pv["control_charts"] = charts_new
            head_new = pvalues.combined_pvalue([v for v in pv.values() if v is not None], combination)
            rows.append({"run": run_id, "truth": truth["verdict"], "p_peak": round(p_peak, 4),
                         "charts_old": chart["p_value"], "charts_new": round(charts_new, 4),
                         "headline_old": round(head_old, 4), "headline_new": round(head_new, 4)})
    frame = pd.DataFrame(rows)
    print(frame.to_string(index=False))
    for col in ("charts_old", "charts_new", "headline_old", "headline_new"):
        failed = frame[col] <= alpha
        right = (failed == (frame["truth"] == "fail")).mean()
        print(f"{col}: accuracy {right:.3f}, normal runs failed {int((failed & (frame.truth == 'pass')).sum())}"
              f"/{int((frame.truth == 'pass').sum())}, faults caught {int((failed & (frame.truth == 'fail')).sum())}"
              f"/{int((frame.truth == 'fail').sum())}")


def counter_fusion(tree: str, labels_path: str) -> None:
    _root(tree)
    import numpy as np
    import pandas as pd

    from pipelines import config
    from pipelines.evaluation.scores import roc_auc
    from pipelines.storage import atomic, store
    labels = json.loads(Path(labels_path).read_text())
    names = ("headline (now)", "stacking", "charts", "clusters", "mean of three", "rank of two", "rank of three")
    aucs: dict[str, list[float]] = {n: [] for n in names}
    for run_id, truth in labels.items():
        if truth["verdict"] != "fail" or not truth.get("regressed_counters") or not config.detection_path(run_id).exists():
            continue
        rules = atomic.read_json(config.detection_path(run_id))["counter_scores"]
        charts = (store.read_optional(config.chart_path(run_id)) or {}).get("counter_scores") or {}
        clusters = (store.read_optional(config.cluster_path(run_id)) or {}).get("counter_scores") or {}
        head = atomic.read_json(config.run_report_path(run_id))["counter_scores"]
        universe = sorted(set(rules) | set(charts) | set(clusters))
        ranks = [pd.Series({c: s.get(c, 0.0) for c in universe}).rank(pct=True) for s in (rules, charts, clusters) if s]
        candidates = {"headline (now)": head, "stacking": rules, "charts": charts, "clusters": clusters,
                      "mean of three": {c: float(np.mean([s[c] for s in (rules, charts, clusters) if c in s])) for c in universe},
                      "rank of two": {c: float(np.mean([r[c] for r in ranks[:2]])) for c in universe},
                      "rank of three": {c: float(np.mean([r[c] for r in ranks])) for c in universe}}
        for name, scores in candidates.items():
            auc = roc_auc(scores, set(truth["regressed_counters"])) if scores else None
            if auc is not None:
                aucs[name].append(auc)
    for name in names:
        print(f"{name:16s} counter ROC AUC {np.mean(aucs[name]):.4f} over {len(aucs[name])} failed targets"
              if aucs[name] else f"{name:16s} -")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    g = sub.add_parser("gap-null")
    g.add_argument("tree")
    g.add_argument("system")
    g.add_argument("--gap-days", type=float, default=3.0)
    for name in ("peak", "counter-fusion", "cross-lab-null"):
        p = sub.add_parser(name)
        p.add_argument("tree")
        p.add_argument("labels")
    args = parser.parse_args()
    if args.what == "gap-null":
        gap_null(args.tree, args.system, args.gap_days)
    elif args.what == "peak":
        peak(args.tree, args.labels)
    elif args.what == "cross-lab-null":
        cross_lab_null(args.tree, args.labels)
    else:
        counter_fusion(args.tree, args.labels)


if __name__ == "__main__":
    main()
