"""The Celery configuration of a regresslab worker: Airflow's own, with the stages imported up front.

A Celery worker of Airflow forks its pool's processes, and each task's process is forked again from
one of them (Airflow's supervisor).  A module the worker imported before forking is in every task's
process already; one it did not is imported by each task anew (pandas, scikit-learn, SciPy, Great
Expectations and the stages: about two seconds of CPU a task).  Celery's ``imports`` setting names
the modules a worker imports when it starts, before its pool forks, so each task starts with them.
What every task computes first from the code and the defaults (:func:`compute_once`) is computed
on Celery's ``worker_init`` signal, which a worker sends after those imports and before its pool
forks; the scheduler, which reads this configuration too, sends none and computes nothing.

A worker uses it with ``AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS=pipelines.orchestration.celery_config.CELERY_CONFIG``
(docs/operations/airflow.md, "Many machines").  Airflow and its Celery provider are imported here,
so only the Airflow processes that read the Celery configuration import this module.
"""
from __future__ import annotations

import pkgutil
from typing import Any

from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG
from celery.signals import worker_init

import pipelines.stages
from pipelines import codebase, params_schema

STAGES: tuple[str, ...] = tuple(sorted(module.name for module in pkgutil.iter_modules(pipelines.stages.__path__)))

#: every stage module, and the tasks that run them: what a worker imports before it forks
WORKER_IMPORTS: tuple[str, ...] = ("pipelines.orchestration.tasks",) + tuple(
    codebase.stage_module(stage) for stage in STAGES)


@worker_init.connect
def compute_once(**_: Any) -> None:
    """What each task would otherwise compute first, computed once in the worker before it forks:
    every stage's code digest (part of its results' keys, :func:`pipelines.storage.memo.input_key`;
    the code as the worker imported it, which is the code its tasks run) and the params' schema
    and defaults (:mod:`pipelines.params_schema`)."""
    for stage in STAGES:
        codebase.code_digest(codebase.stage_module(stage))
    params_schema.schema()
    params_schema.defaults()


CELERY_CONFIG: dict[str, Any] = {**DEFAULT_CELERY_CONFIG,
                                 "imports": tuple(DEFAULT_CELERY_CONFIG.get("imports") or ()) + WORKER_IMPORTS}
