"""A validated run normalised and stored: its load phase as equal intervals of counter medians
(:mod:`pipelines.preparation.intervals`) written beside the key of what it was made from (its
validation, the params, the normaliser's version), each run in a budgeted child
(``storage.budget``: one per process, started with its first run); a run that blows the budget is
left out of the analysis with the reason kept.
"""
from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing.util
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pandas as pd

from pipelines import config
from pipelines.preparation.intervals import normalize_run
from pipelines.storage import atomic, budget
from pipelines.storage.run_records import NormalizedInfo, RunRecord

log = logging.getLogger("regresslab.normalize")


CODE_VERSION = 2


@dataclass(frozen=True)
class NormalizeParams:
    """The ``normalize`` block, typed: the intervals' length (``interval_s``), the fewest a run
    needs (``min_intervals``), load scaling (``load_scaling``, a counter kept when it follows the
    load by at least ``min_load_correlation``), and the budget each run is held to; ``block`` is
    the block as validated (the runs' keys hash it, the budget aside)."""

    interval_s: float
    min_intervals: int
    load_scaling: bool
    min_load_correlation: float
    budget: budget.Budget
    block: Mapping[str, Any] = field(compare=False, repr=False)

    @classmethod
    def of(cls, block: Mapping[str, Any]) -> "NormalizeParams":
        return cls(interval_s=float(block["interval_s"]), min_intervals=int(block["min_intervals"]),
                   load_scaling=bool(block["load_scaling"]), min_load_correlation=float(block["min_load_correlation"]),
                   budget=budget.Budget.from_params(block), block=dict(block))

    @classmethod
    def load(cls) -> "NormalizeParams":
        """The project's ``normalize`` block (``config.load_params``), typed: the stage's one loading site."""
        return cls.of(config.load_params("normalize"))


def run_key(validation_key: str, params: NormalizeParams) -> str:
    """What a normalised run was made from: its validation, the params (its budget aside: it
    changes whether the work finishes, not what it gives) and the normaliser's version."""
    shaping = {k: v for k, v in params.block.items() if k not in budget.BUDGET_KEYS}
    blob = json.dumps({"v": validation_key, "p": shaping, "code": CODE_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def load_valid_run(run_id: str) -> tuple[dict[str, pd.DataFrame], RunRecord]:
    """A validated run's host frames and metadata (only this stage reads them)."""
    run_dir = config.valid_dir(run_id)
    meta = atomic.read_json(run_dir / "meta.json")
    frames = {h: atomic.read_parquet(run_dir / f"{h}.parquet") for h in meta["_hosts"]}
    return frames, meta


def normalize_one(run_id: str, params: NormalizeParams) -> NormalizedInfo:
    """Normalise one validated run unless its cached result is current; return its index row."""
    key = expected_key(run_id, params)
    if is_current(run_id, key):
        return atomic.read_json(config.info_path(run_id))
    frames, meta = load_valid_run(run_id)
    frame, info = normalize_run(frames, meta, interval_s=params.interval_s, min_intervals=params.min_intervals,
                                load_scaling=params.load_scaling, min_load_correlation=params.min_load_correlation)
    info.update({"key": key, "run_id": run_id, "system": meta["system"]})
    atomic.write_parquet_atomic(config.frame_path(run_id), frame)
    atomic.write_json_atomic(config.info_path(run_id), info)
    return info


def worker_for(params: NormalizeParams) -> budget.Worker:
    """The child that normalises runs, each held to ``normalize.max_memory_mb`` and
    ``max_seconds`` (``storage.budget``; forked when first given a run)."""
    return budget.Worker(params.budget, partial(normalize_one, params=params))


_WORKERS: dict[int, budget.Worker] = {}
_CLOSED_AT_EXIT: set[int] = set()


def process_worker(params: NormalizeParams) -> budget.Worker:
    """This process' budgeted child (:func:`worker_for`): one for the stage, or one for each
    process of its pool (``parallel``), each started with its first run."""
    pid = os.getpid()
    if pid not in _WORKERS:
        _WORKERS[pid] = worker_for(params)
        if pid not in _CLOSED_AT_EXIT:    # once per process, however many batches a long-lived worker runs
            _CLOSED_AT_EXIT.add(pid)
            # a pool's process asks its child to leave when it ends, before multiprocessing joins it
            multiprocessing.util.Finalize(None, close_workers, exitpriority=10)
    return _WORKERS[pid]


def close_workers() -> None:
    """Stop this process' budgeted child (a pool's processes stop theirs when they end)."""
    worker = _WORKERS.pop(os.getpid(), None)
    if worker is not None:
        worker.close()


def normalize_within_budget(run_id: str, params: NormalizeParams, worker: budget.Worker) -> NormalizedInfo | None:
    """:func:`normalize_one` in the ``worker``'s child (:func:`worker_for`), unless the run is
    current; None when the run blew its budget: it is then left out of the analysis, and the
    reason kept beside the frames (``config.normalize_failed_path``)."""
    failed = config.normalize_failed_path(run_id)
    if is_current(run_id, expected_key(run_id, params)):
        failed.unlink(missing_ok=True)
        return atomic.read_json(config.info_path(run_id))
    try:
        info = worker.run(f"normalising {run_id}", run_id)
    except (budget.BudgetExceeded, RuntimeError) as exc:
        reason = str(exc).splitlines()[0]
        log.error("%s could not be normalised: %s", run_id, reason)
        atomic.write_json_atomic(failed, {"run_id": run_id, "reason": f"could not be normalised: {reason}"})
        return None
    failed.unlink(missing_ok=True)
    return info


def expected_key(run_id: str, params: NormalizeParams) -> str:
    """The cache key a normalised run must carry: its validation's key and the params."""
    return run_key(atomic.read_json(config.valid_dir(run_id) / "meta.json")["_validation_key"], params)


def is_current(run_id: str, key: str) -> bool:
    """Whether the run's normalised frame exists and was made under ``key``."""
    info_file = config.info_path(run_id)
    return config.frame_path(run_id).exists() and info_file.exists() and atomic.read_json(info_file).get("key") == key
