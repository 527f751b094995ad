"""What both Airflow DAGs share: the failure callback, the stage tasks and the asset.

Kept here rather than in ``dags/`` because the scheduler parses every module of the DAG
folder as a DAG file; the DAGs stay wiring only (CONVENTIONS: thin DAGs).  Airflow is
imported inside the functions, so the pipeline itself never needs it.
"""
from __future__ import annotations

from datetime import timedelta

from pipelines import config


def notify_failure(context) -> None:
    """``on_failure_callback``: one line naming the stage, the mapped run (if any) and the DAG run."""
    ti = context.get("task_instance")
    index = getattr(ti, "map_index", -1)
    which = f" (mapped run #{index})" if index is not None and index >= 0 else ""
    print(f"regresslab: stage {getattr(ti, 'task_id', '?')}{which} failed in DAG run {context.get('run_id')}: "
          f"{context.get('exception')}")


def stage_task(name: str, *, timeout: timedelta, trigger_rule: str = "all_success", task_id: str | None = None):
    """A TaskFlow task that runs the whole stage ``pipelines.<name>.main()`` (task id = stage name,
    unless the DAG also maps the stage per run: then ``task_id`` names the whole-stage task)."""
    from airflow.sdk import task

    @task(task_id=task_id or name, execution_timeout=timeout, trigger_rule=trigger_rule)
    def run_stage() -> None:
        import importlib

        importlib.import_module(f"pipelines.{name}").main()

    return run_stage


def run_task(name: str, *, timeout: timedelta):
    """A TaskFlow task that runs ``pipelines.<name>.run_one(run_id)`` for one run (task id = stage
    name); ``.expand(run_name=...)`` maps it over the night's runs.  Returns the run_id (the
    results are files; XCom stays small).  The argument is not called ``run_id``: that is a key
    of Airflow's task context."""
    from airflow.sdk import task

    @task(task_id=name, execution_timeout=timeout)
    def run_stage_for(run_name: str) -> str:
        import importlib

        importlib.import_module(f"pipelines.{name}").run_one(run_name)
        return run_name

    return run_stage_for


def verified_runs_asset():
    """The asset the nightly DAG emits when the verified runs changed; the retraining DAG's schedule."""
    from airflow.sdk import Asset

    return Asset(config.VERIFIED_RUNS_ASSET)
