"""evaluate: accuracy of every detector and the anchors, in leave-one-out and on the labelled targets.

The leave-one-out machinery and the scores are :mod:`pipelines.evaluation.leave_one_out`;
this stage writes ``metrics/detection.json``, ``metrics/control_charts.json``, their
``*_runs.csv`` and the detectors-against-anchors table.  It also does the cause classifiers'
model selection, which no night waits on (``evaluation.learners.compare_learners``): ``metrics/cause_learners.json``
and the learning curves ``metrics/causes_learning_curve.csv``.
"""
from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from pipelines import config
from pipelines.stats import effects
from pipelines.verdict import headline
from pipelines.detection import registry
from pipelines.systems import history, labs
from pipelines.detectors.clusters import models as cluster_models
from pipelines.detectors.rules import detection as rule_detection
from pipelines.detectors.rules.mining import MiningParams
from pipelines.detectors.charts.control_charts import ControlChartParams
from pipelines.evaluation.anchors import AnchorParams
from pipelines.preparation.bins import DiscretizeParams
from pipelines.evaluation.leave_one_out import (LooSystem, anchor_rows, loo_charts, loo_classified, loo_registered,
                                                loo_system)
from pipelines.protocol import SystemHistory
from pipelines.evaluation.learners import compare_learners
from pipelines.evaluation.scores import chart_rows, cluster_rows, summarize, summarize_runs
from pipelines.evaluation.tables import detector_table, write_table
from pipelines.evaluation.targets import labelled_targets, target_cause_figures, target_rows
from pipelines.storage import locks, manifest, store

log = logging.getLogger("regresslab.evaluate")


@locks.holding("compare_learners")
def learners_main() -> None:
    """:func:`compare_learners` alone (the retraining DAG's last task, after ``train_causes``)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    compare_learners(manifest.read_valid_index())


@locks.holding("evaluate")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = rule_detection.DetectParams.load()
    mine_params = MiningParams.load()
    disc_params = DiscretizeParams.load()
    ev_params = config.load_params("evaluate")
    cc_params = ControlChartParams.load()
    cl_params = cluster_models.ClusterParams.of(config.load_params("clusters"))
    significance = effects.Significance.load()
    report_block = config.load_params("report")
    rule = headline.HeadlineRule.from_params(report_block, significance)
    detectors = registry.registry(report_block["detectors"])
    label_files = [config.ROOT / p for p in ev_params["labels"]]
    index = manifest.read_valid_index()
    hist = history.HistoryParams.load()
    exclude = set(hist.exclude)
    labels = dict(labelled_targets(index, label_files))
    rows, cc_rows = [], []
    for system in history.systems(index):
        frames = store.FrameStore.of_system(system)
        verified = hist.verified(index, system)
        passed = history.passed_runs(index, system, exclude=exclude)
        charts = loo_charts(frames, index, verified, passed, params=cc_params,
                            lab_kw=labs.lab_params(hist), significance=significance)
        cc_rows += chart_rows(charts, index)
        clustered = cluster_models.loo(verified, passed, index, frames, cl_params, hist)
        rows += cluster_rows(clustered, index)
        loo = LooSystem(system, index, frames, exclude, params, mine_params, disc_params, labs.lab_params(hist),
                        significance)
        registered = loo_registered(detectors, SystemHistory(system, index, frames, hist, significance), verified)
        rows += loo_system(loo, charts, rule, clustered=clustered,
                           classified=loo_classified(store.latest_model_meta(system)), detectors=detectors,
                           registered=registered)
        rows += anchor_rows(system, index, frames, exclude, labels, params=AnchorParams.of(ev_params["anchors"]),
                            window=hist.window)
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
    compare_learners(index)
    for line in detector_table(metrics):
        print(f"[evaluate] {line}")
    print(f"[evaluate] target causes: {metrics['targets_causes']}")


if __name__ == "__main__":
    config.install_error_hook()
    main()

