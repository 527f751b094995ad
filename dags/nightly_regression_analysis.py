"""
### Nightly regression analysis

Every night: pull the new test-run archives, validate them with Great Expectations,
normalise and discretise the counters, mine one association-rule model per prior passed
run, and write a verdict per unanalysed run to `reports/runs/<run_id>.json`.

Each task calls the `main()` of the DVC stage of the same name (`pipelines/<task>.py`),
so a night run by Airflow and a `dvc repro` afterwards compute the same files; per-run
work is cached by content, so neither redoes the other's work. Set `REGRESSLAB_ROOT` on
the workers to the checkout the stages should read and write.
"""
from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import dag, task

STAGES = ("pull", "validate", "normalize", "discretize", "mine_rules", "detect")


def _notify_failure(context) -> None:
    ti = context.get("task_instance")
    print(f"regresslab: stage {getattr(ti, 'task_id', '?')} failed in run {context.get('run_id')}: "
          f"{context.get('exception')}")


def _stage_task(name: str):
    @task(task_id=name, execution_timeout=timedelta(hours=2))
    def run_stage() -> None:
        import importlib

        importlib.import_module(f"pipelines.{name}").main()

    return run_stage


@dag(
    dag_id="nightly_regression_analysis",
    schedule="0 2 * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    doc_md=__doc__,
    tags=["regresslab", "nightly"],
    default_args={"retries": 2, "retry_delay": timedelta(minutes=5), "retry_exponential_backoff": True,
                  "on_failure_callback": _notify_failure},
)
def nightly_regression_analysis():
    previous = None
    for name in STAGES:
        current = _stage_task(name)()
        if previous is not None:
            previous >> current
        previous = current


nightly_regression_analysis()
