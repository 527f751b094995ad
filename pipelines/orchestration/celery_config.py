"""The Celery configuration of a regresslab worker: Airflow's own, with the stages imported up front.

A Celery worker of Airflow forks its pool's processes, and each task's process is forked again from
one of them (Airflow's supervisor).  A module the worker imported before forking is in every task's
process already; one it did not is imported by each task anew (pandas, scikit-learn, SciPy, Great
Expectations and the stages: about two seconds of CPU a task).  Celery's ``imports`` setting names
the modules a worker imports when it starts, before its pool forks, so each task starts with them.

A worker uses it with ``AIRFLOW__CELERY__CELERY_CONFIG_OPTIONS=pipelines.orchestration.celery_config.CELERY_CONFIG``
(docs/operations/airflow.md, "Many machines").  Airflow and its Celery provider are imported here,
so only a worker imports this module.
"""
from __future__ import annotations

import pkgutil
from typing import Any

from airflow.providers.celery.executors.default_celery import DEFAULT_CELERY_CONFIG

import pipelines.stages

#: every stage module, and the tasks that run them: what a worker imports before it forks
WORKER_IMPORTS: tuple[str, ...] = ("pipelines.orchestration.tasks",) + tuple(
    f"pipelines.stages.{module.name}" for module in sorted(pkgutil.iter_modules(pipelines.stages.__path__),
                                                             key=lambda m: m.name))

CELERY_CONFIG: dict[str, Any] = {**DEFAULT_CELERY_CONFIG,
                                 "imports": tuple(DEFAULT_CELERY_CONFIG.get("imports") or ()) + WORKER_IMPORTS}
