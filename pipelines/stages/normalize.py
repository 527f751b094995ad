"""normalize: the load phase of each validated run as equal intervals of counter medians.

The method (Foo et al. 2015 phase 1, seed 003; Nguyen 2017 §5.2, seed 004) is
:mod:`pipelines.preparation.intervals`; a run normalised and stored, each in a budgeted child, is
:mod:`pipelines.preparation.normalized_runs`.  This stage normalises every validated run whose
stored result is not current and writes ``data/interim/normalized/<run_id>.parquet`` with
its ``.json`` (interval, load fits, cache key), and the index of normalised runs.
"""
from __future__ import annotations

import logging
from contextlib import contextmanager
from typing import Callable, Iterator

from pipelines import config, parallel
from pipelines.preparation.normalized_runs import (NormalizeParams, close_workers, expected_key, is_current,
                                                   normalize_within_budget, process_worker)
from pipelines.progress import Progress
from pipelines.storage import atomic, locks, manifest
from pipelines.storage.run_records import NormalizedInfo

log = logging.getLogger("regresslab.normalize")


def pending_runs() -> list[str]:
    """Validated runs not normalised yet (or normalised under other params): tonight's fan-out."""
    params = NormalizeParams.load()
    index = manifest.read_valid_index(every=True)
    return [r for r in sorted(index, key=lambda r: (index[r]["started_at"], r))
            if not is_current(r, expected_key(r, params))]


def run_one(run_id: str) -> NormalizedInfo | None:
    """Normalise one validated run; None when it could not be.  A batch of one (:func:`batch`)."""
    with batch() as one:
        return one(run_id)


@contextmanager
def batch() -> Iterator[Callable[[str], NormalizedInfo | None]]:
    """The per-run work of one nightly DAG task (:func:`run_one` is a batch of one): one shared hold of
    the data folder and one budgeted child per process for all its runs (a child per run costs a fork
    each)."""
    params = NormalizeParams.load()
    with locks.data_lock("normalize batch", shared=True):
        try:
            yield lambda run_id: normalize_within_budget(run_id, params, process_worker(params))
        finally:
            close_workers()


@locks.holding("normalize")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = NormalizeParams.load()
    index = manifest.read_valid_index(every=True)
    config.NORMALIZED.mkdir(parents=True, exist_ok=True)
    progress = Progress(log, "normalize", len(index), every=25)
    runs = sorted(index)
    try:
        done = parallel.map_ordered(lambda run_id: normalize_within_budget(run_id, params, process_worker(params)),
                                    runs, progress=progress.each())
    finally:
        close_workers()
    rows = {run_id: {k: v for k, v in info.items() if k != "counters"}
            for run_id, info in zip(runs, done) if info is not None}
    for stale in config.NORMALIZED.glob("*.failed.json"):
        if stale.name.removesuffix(".failed.json") not in index:
            stale.unlink()
    for stale in config.NORMALIZED.glob("*.parquet"):
        if stale.stem not in index:      # a run quarantined after a suite change
            stale.unlink()
            stale.with_suffix(".json").unlink(missing_ok=True)
    atomic.write_json_atomic(config.NORMALIZED_INDEX, rows)
    print(f"[normalize] {len(rows)} runs normalised")


if __name__ == "__main__":
    config.install_error_hook()
    main()

