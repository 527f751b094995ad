"""
### Retrain the regression-cause classifiers

Runs when the nightly DAG announces that verified runs were added (an analyst confirmed a
verdict and a cause: Nguyen 2017's step S5), or by hand. Rebuilds the violation-ratio
features of the labelled history, retrains the classifiers (`pipelines/stages/features.py`,
`pipelines/stages/train_causes.py`, the DVC stages of the same names), then compares every learner
on the new history (`pipelines/stages/evaluate.py::learners_main`, model selection: it names a
learner better than the night's, `metrics/cause_learners.json`). A model version is named by the
hash of its training data; every version is kept with its metrics, and the nightly DAG uses the
latest from its next run on.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag

from pipelines.orchestration.tasks import function_task, notify_failure, stage_task, verified_runs_asset

VERIFIED_RUNS = verified_runs_asset()


def _stage(name: str):
    return stage_task(name, timeout=timedelta(hours=2))


@dag(
    dag_id="retrain_cause_models",
    schedule=[VERIFIED_RUNS],
    start_date=datetime(2026, 1, 1),
    catchup=False,
    doc_md=__doc__,
    tags=["regresslab", "retrain"],
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5), "retry_exponential_backoff": True,
                  "on_failure_callback": notify_failure},
)
def retrain_cause_models():
    (_stage("features")() >> _stage("train_causes")()
     >> function_task("compare_learners", "stages.evaluate", "learners_main", timeout=timedelta(hours=2))())


retrain_cause_models()
