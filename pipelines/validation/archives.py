"""Judging the archives of ``data/raw`` against the data contract: each archive's result stored
under the key of what it was made from (the archive, the suites' version, the params), the rest
read in ``compute.jobs`` worker children each held to the budget (``storage.budget``) and checked
by the suites together (one Great Expectations validation per suite for the night's archives,
``suites.check_reads``), a valid run's host frames swapped in by renames (a run killed at any
point leaves the old or the new run directory), a failed archive's quarantine file with its
reasons.  What is written does not depend on how many workers read.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import queue
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple, cast

from pipelines import config, parallel
from pipelines.progress import Progress
from pipelines.storage import atomic, budget, manifest
from pipelines.storage.run_records import DroppedCounter, RunRecord, ValidIndex
from pipelines.validation.checks import valid_host_frames
from pipelines.validation.suites import (
    SUITE_VERSION,
    Checked,
    Failure,
    Read,
    Validator,
    _uninterpretable,
    check_reads,
    describe_failure,
    read_archive,
    suites_from_params,
)

log = logging.getLogger("regresslab.validate")


def clean_stale(valid_dir: Path, max_age_s: float = 3600.0) -> None:
    """Remove the temporary run directories (``.<run_id>.*.tmp`` / ``.old``) of a validate that died
    more than ``max_age_s`` ago (a live one renames its own within seconds)."""
    now = time.time()
    for p in list(valid_dir.glob(".*.tmp")) + list(valid_dir.glob(".*.old")):
        if p.is_dir() and now - p.stat().st_mtime > max_age_s:
            shutil.rmtree(p, ignore_errors=True)


def cache_key(sha256: str, params: dict[str, Any]) -> str:
    """What a validation was made from: the archive, the suites' version and the params (the
    budget aside: it changes whether the work finishes, not what it gives)."""
    shaping = {k: v for k, v in params.items() if k not in budget.BUDGET_KEYS}
    blob = json.dumps({"sha": sha256, "suite": SUITE_VERSION, "params": shaping}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def stored_result(entry: manifest.ManifestEntry, key: str) -> tuple[str, Any] | None:
    """What an earlier night decided for this archive under the same key: (``valid``, its index
    row) or (``quarantined``, the reason); None when it must be validated."""
    marker = config.valid_dir(entry.run_id) / "meta.json"
    if marker.exists() and atomic.read_json(marker).get("_validation_key") == key:
        return "valid", _index_row(atomic.read_json(marker))
    q_path = config.quarantine_path(entry.run_id)
    if q_path.exists() and atomic.read_json(q_path).get("validation_key") == key:
        return "quarantined", atomic.read_json(q_path)["reason"]
    return None


def write_quarantine(entry: manifest.ManifestEntry, key: str, checked) -> str:
    """The quarantine file of a failed archive (its valid run, if any, removed); the reason."""
    reason = quarantine_reason(checked.failures, checked.dropped)
    atomic.write_json_atomic(config.quarantine_path(entry.run_id), {
        "run_id": entry.run_id, "archive": f"data/raw/{entry.file}", "sha256": entry.sha256, "reason": reason,
        "failed_expectations": checked.failures, "dropped_counters": checked.dropped, "validation_key": key})
    if config.valid_dir(entry.run_id).exists():
        shutil.rmtree(config.valid_dir(entry.run_id))
    log.warning("quarantined %s: %s", entry.run_id, reason[:300])
    return reason


class Staged(NamedTuple):
    """An archive read in a worker child: what the suites check (its frames left out), and the
    folder its host frames were written to, to become its run directory if it passes."""
    read: Read
    folder: Path | None


def stage_archive(entry: manifest.ManifestEntry, key: str, params: dict[str, Any]) -> Staged:
    """Read one archive (``suites.read_archive``) and write its host frames, in the form later
    stages read, to a folder of this process's own name in ``data/interim/valid``; what the suites
    check goes back to the parent, not the frames (at scale a run's frames are a hundred MB)."""
    read = read_archive(config.RAW / entry.file, params)
    if read.summary is None:
        return Staged(read, None)
    folder = Path(tempfile.mkdtemp(prefix=f".{entry.run_id}.", suffix=".tmp", dir=config.VALID))
    for host, frame in valid_host_frames(read.frames, read.summary).items():
        atomic.write_parquet_atomic(folder / f"{host}.parquet", frame)
    return Staged(read._replace(raw=None, frames={}), folder)


def stage_within_budget(worker: budget.Worker, entry: manifest.ManifestEntry, key: str) -> Staged:
    """:func:`stage_archive` in the worker's child, held to ``validate.max_memory_mb`` and
    ``max_seconds`` (``storage.budget``): an archive that blows either is quarantined with the
    budget named."""
    try:
        return worker.run(f"validating {entry.file}", entry, key)
    except (budget.BudgetExceeded, RuntimeError) as exc:
        log.error("%s: %s", entry.run_id, str(exc).splitlines()[0])
        failure: Failure = {"suite": "archive", "expectation": "within_budget",
                            "reason": f"could not be judged: {str(exc).splitlines()[0]}"}
        return Staged(Read(entry.run_id, None, [], [], None, None, [failure]), None)


def finish(entry: manifest.ManifestEntry, key: str, staged: Staged, failures: list[Failure],
           dropped: list[DroppedCounter]) -> tuple[str, Any, int]:
    """What the suites found for one staged archive, written: its quarantine file, or its run
    directory (the dropped counters taken out of its staged frames, ``meta.json`` beside them,
    swapped in by renames): (``valid``, its index row, the counters dropped) or (``quarantined``,
    the reason, 0)."""
    if failures:
        if staged.folder is not None:
            shutil.rmtree(staged.folder, ignore_errors=True)
        return "quarantined", write_quarantine(entry, key, Checked(None, {}, failures, dropped, None)), 0
    folder, read = staged.folder, staged.read
    assert folder is not None and read.meta is not None    # staged whole, its run.json read: no failure
    gone: dict[str, set[str]] = {}
    for d in dropped:
        gone.setdefault(d["host"], set()).add(d["counter"])
    for host, counters in gone.items():
        path = folder / f"{host}.parquet"
        frame = atomic.read_parquet(path)
        atomic.write_parquet_atomic(path, frame.drop(columns=[c for c in frame.columns if c in counters]))
    meta: dict[str, Any] = dict(read.meta, _validation_key=key, _sha256=entry.sha256, _archive=f"data/raw/{entry.file}",
                _hosts=sorted(read.hosts), _dropped_counters=dropped,
                **({"_set_aside": [dict(a) for a in entry.set_aside]} if entry.set_aside else {}))
    if dropped:
        log.warning("%s: %d counter(s) dropped: %s", entry.run_id, len(dropped),
                    "; ".join(d["reason"] for d in dropped[:3])[:500])
    atomic.write_json_atomic(folder / "meta.json", meta)
    swap_in(folder, config.valid_dir(entry.run_id))
    config.quarantine_path(entry.run_id).unlink(missing_ok=True)
    return "valid", _index_row(meta), len(dropped)


def swap_in(folder: Path, run_dir: Path) -> None:
    """``folder`` becomes ``run_dir`` by renames: a run killed at any point leaves either the old
    or the new run directory (or none: validated again)."""
    old = None
    if run_dir.exists():
        old = folder.with_suffix(".old")
        run_dir.rename(old)
    folder.rename(run_dir)
    if old is not None:
        shutil.rmtree(old)


def check_staged(staged: list[Staged], validator: Validator, run_name: str
                 ) -> list[tuple[list[Failure], list[DroppedCounter]]]:
    """The suites on every staged archive at once (``suites.check_reads``); should Great
    Expectations itself fail on the stack, each archive alone, and one it still cannot check is
    quarantined with the fault named: the night never stops for one archive."""
    reads = [s.read for s in staged]
    try:
        return check_reads(reads, validator, run_name)
    except Exception:                          # noqa: BLE001 -- found out archive by archive below
        log.exception("the suites failed on the night's archives together; checking them one by one")
    out = []
    for read in reads:
        try:
            out.append(check_reads([read], validator, f"{run_name}-{read.archive}")[0])
        except Exception as exc:               # noqa: BLE001 -- this archive's rows break the suites
            out.append((list(read.failures) + [_uninterpretable(exc)], []))
    return out


def new_validator(params: dict[str, Any]) -> Validator:
    return Validator(suites_from_params(params), project_dir=config.GX, docs_dir=config.VALIDATION_DOCS)


class Judged(NamedTuple):
    valid: ValidIndex                 # run_id -> its index row
    quarantined: dict[str, str]           # run_id -> the reason
    validator: Validator | None           # when one was made (an archive was validated now)
    judged_now: list[str]                 # the runs validated now (not taken from an earlier night)
    checked_as: list[str]                 # the names the suites' results were stored under now (Data Docs)


def judge_all(todo: list[manifest.ManifestEntry], params: dict[str, Any], *, jobs: int | None = None) -> Judged:
    """Every archive's result: the stored one when its key matches, else judged now.

    The archives to judge are read by ``jobs`` worker children (``storage.budget.Worker``, default
    ``compute.jobs``), each held to the budget archive by archive, which stage each one's frames;
    the parent's threads only wait on their pipes.  The suites then check every archive read at
    once, under one name for the night's results, and each archive's files are written (its run
    directory or its quarantine file); the index is assembled here in the archives' order, so what
    the stage writes is the same for any number of workers."""
    results: dict[str, tuple[str, Any, int]] = {}
    fresh: list[tuple[manifest.ManifestEntry, str]] = []
    for entry in todo:
        if not config.is_identifier(entry.run_id):    # pulled before the grammar was enforced: no file of it
            results[entry.run_id] = ("quarantined", "run_id is not an identifier ([A-Za-z0-9][A-Za-z0-9._-]{0,127});"
                                     " not analysed", 0)
            log.warning("skipped %r: run_id outside the identifier grammar", entry.run_id[:80])
            continue
        key = cache_key(entry.sha256, params)
        stored = stored_result(entry, key)
        if stored is None:
            fresh.append((entry, key))
        else:
            results[entry.run_id] = (stored[0], stored[1], 0)
    validator: Validator | None = None       # Great Expectations' context costs seconds: made when first needed
    checked_as: list[str] = []
    if fresh:
        staged = read_all(fresh, params, jobs)
        validator = new_validator(params)          # after the children fork: none of them needs it
        run_name = f"night-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{len(fresh)}-archives"
        t_check = time.monotonic()
        found = check_staged([staged[entry.run_id] for entry, _ in fresh], validator, run_name)
        checked_as.append(run_name)
        counts = {"quarantined": 0, "dropped": 0}
        for (entry, key), (failures, dropped) in zip(fresh, found):
            results[entry.run_id] = finish(entry, key, staged[entry.run_id], failures, dropped)
            counts["quarantined"] += results[entry.run_id][0] != "valid"
            counts["dropped"] += results[entry.run_id][2]
        log.info("validate: the suites checked %d archive(s) together in %.1fs: %d quarantined, %d counters dropped",
                 len(fresh), time.monotonic() - t_check, counts["quarantined"], counts["dropped"])
    index: ValidIndex = {}
    quarantined: dict[str, str] = {}
    for entry in todo:
        status, row, _ = results[entry.run_id]
        (index if status == "valid" else quarantined)[entry.run_id] = row
    return Judged(index, quarantined, validator, [entry.run_id for entry, _ in fresh], checked_as)


def read_all(fresh: list[tuple[manifest.ManifestEntry, str]], params: dict[str, Any],
             jobs: int | None) -> dict[str, Staged]:
    """Every archive of ``fresh`` read and staged by the budgeted worker children (run_id -> what it gave)."""
    n_workers = min(parallel.configured_jobs() if jobs is None else parallel.resolve(jobs), len(fresh))
    progress = Progress(log, "validate", len(fresh), what="archives read", every=10)
    staged: dict[str, Staged] = {}
    unreadable = 0
    with contextlib.ExitStack() as stack:
        idle: queue.SimpleQueue[budget.Worker] = queue.SimpleQueue()
        for _ in range(n_workers):
            idle.put(stack.enter_context(budget.Worker(budget.Budget.from_params(params), partial(
                stage_archive, params=params))))

        def read(item: tuple[manifest.ManifestEntry, str]) -> Staged:
            worker = idle.get()
            try:
                return stage_within_budget(worker, *item)
            finally:
                idle.put(worker)

        with ThreadPoolExecutor(n_workers, thread_name_prefix="validate") as pool:
            futures = {pool.submit(read, item): item[0].run_id for item in fresh}
            for done, future in enumerate(as_completed(futures), 1):
                staged[futures[future]] = future.result()
                unreadable += staged[futures[future]].read.summary is None
                progress.step(done, f"{unreadable} unreadable")
    return staged


def quarantine_reason(failures: list[Failure], dropped: list[DroppedCounter]) -> str:
    """The run-level failures as sentences; when too many counters went, the first of them too."""
    reason = "; ".join(describe_failure(f) for f in failures)
    if any(f.get("kwargs", {}).get("column") == "dropped_counter_share" for f in failures) and dropped:
        reason += f" ({len(dropped)} counters dropped, e.g. " + "; ".join(d["reason"] for d in dropped[:3]) + ")"
    return reason


def _index_row(meta: dict[str, Any]) -> RunRecord:
    row: dict[str, Any] = {k: meta.get(k) for k in ("system", "version", "started_at", "duration_s", "verdict", "cause",
                                    "environment", "baseline", "workload", "regressed_counters", "_hosts")}
    row["_dropped_counters"] = meta.get("_dropped_counters") or []
    if meta.get("_set_aside"):
        row["_set_aside"] = meta["_set_aside"]
    return cast(RunRecord, row)
