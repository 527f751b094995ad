"""What both Airflow DAGs share: the failure callback, the stage and batch tasks, the batching and the asset.

Kept here rather than in ``dags/`` because the scheduler parses every module of the DAG
folder as a DAG file; the DAGs stay wiring only (CONVENTIONS: thin DAGs).  Airflow is
imported inside the functions, so the pipeline itself never needs it.
"""
from __future__ import annotations

import logging
import math
from datetime import timedelta
from contextlib import contextmanager
from typing import Callable, Iterator

from pipelines import config

log = logging.getLogger("regresslab.orchestration")


class BatchFailed(RuntimeError):
    """Some runs of a batch failed; the others were done.  Names each failed run and its error."""

    def __init__(self, stage: str, failed: dict[str, str], done: list[str]):
        self.failed, self.done = failed, done
        lines = "; ".join(f"{r}: {e}" for r, e in failed.items())
        super().__init__(f"{stage}: {len(failed)} of {len(failed) + len(done)} run(s) of the batch failed ({lines}); "
                         f"the other {len(done)} were done")


def batches(runs: list[str], runs_per_task: int) -> list[list[str]]:
    """The runs in consecutive batches of at most ``runs_per_task``, as even as possible: 10 runs
    at 4 per task give 4, 3, 3 (three tasks, none nearly empty).  Nothing for no run."""
    if not runs:
        return []
    if runs_per_task < 1:
        raise ValueError(f"orchestration.runs_per_task must be at least 1, not {runs_per_task}")
    n = math.ceil(len(runs) / runs_per_task)
    size, extra = divmod(len(runs), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(list(runs[start:end]))
        start = end
    return out


def night_batches(runs: list[str]) -> list[list[str]]:
    """:func:`batches` sized by ``orchestration.runs_per_task`` (params.yaml)."""
    return batches(runs, int(config.load_params("orchestration")["runs_per_task"]))


def run_batch(run_one: Callable[[str], object], runs: list[str], *, stage: str, jobs: int | None = None) -> list[str]:
    """``run_one`` on every run of a batch, each on its own: a run that fails does not stop the
    others; the batch then fails with :class:`BatchFailed`, naming each failed run and its error,
    so the task's retry runs the batch again (every ``run_one`` is idempotent and writes its files
    atomically, so the runs already done come out the same).  The runs are spread over ``jobs``
    processes (default ``compute.jobs``, as the stage spreads them: :func:`parallel.map_ordered`),
    so a batch keeps the cores busy as ``dvc repro`` does.  Returns the runs done."""
    from pipelines import parallel

    def guarded(run_name: str) -> str | None:
        try:
            run_one(run_name)
            return None
        except Exception as exc:          # noqa: BLE001 - one run's failure is reported, the others go on
            log.exception("%s failed on %s", stage, run_name)
            return f"{type(exc).__name__}: {exc}"

    errors = parallel.map_ordered(guarded, list(runs), jobs=jobs)
    failed = {r: e for r, e in zip(runs, errors) if e is not None}
    done = [r for r, e in zip(runs, errors) if e is None]
    if failed:
        raise BatchFailed(stage, failed, done)
    return done


@contextmanager
def per_run(module) -> Iterator[Callable[[str], object]]:
    """The function a batch task calls on each of its runs: the stage's ``batch()`` (a context that
    loads once what every run of the batch reads, the history's models and frames, and yields the
    per-run function) when it has one, else its ``run_one``."""
    if hasattr(module, "batch"):
        with module.batch() as one:
            yield one
    else:
        yield module.run_one


def notify_failure(context) -> None:
    """``on_failure_callback`` (after the retries): one line naming the stage, the mapped run (if
    any) and the DAG run, and the alert of a night that failed or was skipped (``alerts``)."""
    ti = context.get("task_instance")
    index = getattr(ti, "map_index", -1)
    which = f" (mapped run #{index})" if index is not None and index >= 0 else ""
    exc = context.get("exception")
    from pipelines.safe_text import mask_urls

    reason = mask_urls(f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else str(exc or ""))
    stage = f"{getattr(ti, 'task_id', '?')}{which}"
    print(f"regresslab: stage {stage} failed in DAG run {context.get('run_id')}: {reason}")
    from pipelines.reporting import alerts

    where = f"DAG run {context.get('run_id')}"
    if not alerts.is_skip(reason):
        from pipelines.reporting.pages import write_failed_night
        print(f"regresslab: the night index says the night failed: {write_failed_night(stage, reason)}")
    print(f"regresslab: {alerts.notify_stopped(stage, reason, where=where, context=context)}")


def params_or_fail() -> None:
    """params.yaml checked before a task runs its stage: a configuration error fails the task at
    once, without its retries (they would find the same file), and the night with it.  The
    task's log records have a location's credentials masked from here on (``safe_text``)."""
    from pipelines import config, params_schema
    from pipelines.safe_text import mask_logging

    mask_logging()

    try:
        config.load_params()
    except params_schema.ConfigError as exc:
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(f"configuration error, not retried: {exc}") from exc


def stage_task(name: str, *, timeout: timedelta, trigger_rule: str = "all_success", task_id: str | None = None):
    """A TaskFlow task that runs the whole stage ``pipelines.<name>.main()`` (task id = stage name,
    unless the DAG also maps the stage per run: then ``task_id`` names the whole-stage task)."""
    from airflow.sdk import task

    @task(task_id=task_id or name, execution_timeout=timeout, trigger_rule=trigger_rule)
    def run_stage() -> None:
        import importlib

        params_or_fail()
        importlib.import_module(f"pipelines.stages.{name}").main()

    return run_stage


def function_task(task_id: str, module: str, function: str, *, timeout: timedelta):
    """A TaskFlow task that runs ``pipelines.<module>.<function>()``: a part of a stage that a DAG
    runs on its own (the learner comparison of ``evaluate`` after a retraining)."""
    from airflow.sdk import task

    @task(task_id=task_id, execution_timeout=timeout)
    def run_function() -> None:
        import importlib

        params_or_fail()
        getattr(importlib.import_module(f"pipelines.{module}"), function)()

    return run_function


def batch_task(name: str, *, timeout: timedelta, trigger_rule: str = "all_success"):
    """A TaskFlow task that runs ``pipelines.<name>.run_one`` on each run of a batch
    (:func:`run_batch`, through the stage's ``batch()`` when it has one: :func:`per_run`; task id =
    stage name); ``.expand(run_names=...)`` maps it over the night's
    batches (:func:`batches`, ``orchestration.runs_per_task``).  One task instance per batch rather
    than per run: each instance pays a process start and the imports (~200 instances
    made a night 2.5x slower than ``dvc repro``).  Returns the runs done."""
    from airflow.sdk import task

    @task(task_id=name, execution_timeout=timeout, trigger_rule=trigger_rule)
    def run_stage_for_batch(run_names: list[str]) -> list[str]:
        import importlib

        params_or_fail()
        with per_run(importlib.import_module(f"pipelines.stages.{name}")) as one:
            return run_batch(one, list(run_names), stage=name)

    return run_stage_for_batch


def verified_runs_asset():
    """The asset the nightly DAG emits when the verified runs changed; the retraining DAG's schedule."""
    from airflow.sdk import Asset

    return Asset(config.VERIFIED_RUNS_ASSET)
