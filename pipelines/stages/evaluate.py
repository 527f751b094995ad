"""evaluate: accuracy of every detector and the anchors, in leave-one-out and on the labelled targets.

The leave-one-out machinery and the scores are :mod:`pipelines.evaluation.leave_one_out`;
this stage writes ``metrics/detection.json``, ``metrics/control_charts.json``, their
``*_runs.csv`` and the detectors-against-anchors table.  It also does the cause classifiers'
model selection, which no night waits on (:func:`compare_learners`): ``metrics/cause_learners.json``
and the learning curves ``metrics/causes_learning_curve.csv``.
"""
from __future__ import annotations

import logging
from typing import Any

import pandas as pd

from pipelines import config
from pipelines.calibration import headline, history, labs
from pipelines.detectors import causes, cluster_models
from pipelines.evaluation import anchors
from pipelines.evaluation.leave_one_out import COMBINERS, anchor_rows, loo_charts, loo_classified, loo_system
from pipelines.evaluation.scores import chart_rows, cluster_rows, summarize, summarize_runs
from pipelines.evaluation.targets import labelled_targets, target_cause_figures, target_rows
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest, store

log = logging.getLogger("regresslab.evaluate")


DETECTORS = ("headline", "control_charts", "clustered_regression", "cause_classifier", "within_run") + COMBINERS + anchors.ANCHORS


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
    atomic.write_json_atomic(config.METRICS / f"{name}.json", metrics)
    with atomic.atomic_path(config.METRICS / f"{name}_runs.csv") as tmp:
        frame.to_csv(tmp, index=False)


def compare_learners(index: dict[str, Any]) -> None:
    """Every learner of ``train_causes.learners`` in leave-one-run-out on the design each system's
    model uses, the night's own learner taken from its model (Nguyen 2017 §8.3-8.5,
    :func:`causes.compare_learners_of`); a learner better than the night's by more than
    ``learner_standard_errors`` is named, with how to adopt it."""
    params = config.load_params("train_causes")
    out: dict[str, Any] = {}
    curves = []
    for system in history.systems(index):
        meta = store.latest_model_meta(system)
        path = config.features_path(system)
        if not meta or not path.exists():
            continue
        prog = Progress(log, f"evaluate learners {system}", len(params["learners"]), what="learners")
        figures = causes.compare_learners_of(pd.read_parquet(path), meta["feature_blocks"], params,
                                             in_use=meta["learners"],
                                             progress=lambda i, n, name, acc: prog.step(i, f"{name} {acc:.3f}"))
        out[system] = {k: v for k, v in figures.items() if k != "learning_curve"}
        curves += [{"system": system, **row} for row in figures["learning_curve"]]
        if figures["chosen"] != figures["in_use"]:
            log.warning("evaluate %s: %s is better than the night's %s by more than %s standard error(s) in "
                        "leave-one-out; list it first in train_causes.learners to adopt it", system,
                        figures["chosen"], figures["in_use"], params["learner_standard_errors"])
    config.METRICS.mkdir(parents=True, exist_ok=True)
    atomic.write_json_atomic(config.METRICS / "cause_learners.json", out)
    with atomic.atomic_path(config.METRICS / "causes_learning_curve.csv") as tmp:
        columns = ["system", "learner", "runs_per_cause", "accuracy", "trials"]
        pd.DataFrame(curves, columns=columns).to_csv(tmp, index=False)


@locks.holding("compare_learners")
def learners_main() -> None:
    """:func:`compare_learners` alone (the retraining DAG's last task, after ``train_causes``)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    compare_learners(manifest.read_valid_index())


@locks.holding("evaluate")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("detect")
    mine_params = config.load_params("mine_rules")
    disc_params = config.load_params("discretize")
    ev_params = config.load_params("evaluate")
    cc_params = config.load_params("control_charts")
    cl_params = config.load_params("clusters")
    significance = config.load_params("significance")
    rule = headline.HeadlineRule.from_params(config.load_params("report"), significance)
    label_files = [config.ROOT / p for p in ev_params["labels"]]
    index = manifest.read_valid_index()
    hist = config.load_params("history")
    exclude = set(hist["exclude"])
    labels = dict(labelled_targets(index, label_files))
    rows, cc_rows = [], []
    for system in history.systems(index):
        frames = store.FrameStore.of_system(system)
        verified = history.verified_runs(index, system, exclude=exclude)
        passed = history.passed_runs(index, system, exclude=exclude)
        charts = loo_charts(frames, index, verified, passed, params=cc_params,
                            lab_kw=labs.lab_params(hist), significance=significance)
        cc_rows += chart_rows(charts, index)
        clustered = cluster_models.loo(verified, passed, index, frames, cl_params, hist)
        rows += cluster_rows(clustered, index)
        rows += loo_system(system, index, params, mine_params, disc_params, exclude, frames, charts,
                           rule, lab_kw=labs.lab_params(hist), significance=significance, clustered=clustered,
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
    compare_learners(index)
    for line in detector_table(metrics):
        print(f"[evaluate] {line}")
    print(f"[evaluate] target causes: {metrics['targets_causes']}")


if __name__ == "__main__":
    config.install_error_hook()
    main()

