"""parallel: a stage's per-run work on every core, with the results of one process.

The per-run analyses of a night (a target judged, a normal run judged for a null, a run held out
of a classifier) are independent of each other: each reads the night's inputs and returns its
result.  :func:`map_ordered` hands them to ``jobs`` worker processes and gives the results back
in the order of the items, so that whatever a stage writes is byte for byte what one process
writes.  The workers are forked from the stage: they inherit its inputs (frames, caches, the
function itself, closures included) without pickling them; only the results travel back.  A
worker's own nested call runs serially (a worker has no children).

``jobs`` comes from the ``compute`` block of params.yaml (null: the cores this process may use).
It changes no result, so no stage lists it as a DVC dependency: changing it re-runs nothing.

Every call of ``fn`` runs on a fresh Python stack (:func:`on_fresh_stack`), in a worker or
serially here, so its speed does not depend on how deep the caller's stack is.

Randomness stays identical because every piece of work that draws seeds its own generator (the
learners' ``random_state``); work that draws from one shared generator draws its plan first, in
the parent, and hands the drawn plan out (``causes.learning_curve``).
"""
from __future__ import annotations

import _thread
import contextvars
import multiprocessing
import os
import signal
import threading
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

from threadpoolctl import ThreadpoolController

_WORK: tuple[Callable[[Any], Any], Sequence[Any]] | None = None
_IN_WORKER = False
_JOBS: int | None = None
_OPENMP: tuple[Any, int] | None = None   # a worker's OpenMP libraries and its share of the cores (:func:`_initialise`)
_FRESH = threading.local()          # .on: this thread runs on a fresh stack (nested calls stay on it)
FIRST_FRAME_SLOTS = 1 << 16         # 512 KiB of evaluation stack in the first frame: a 1 MiB first chunk


def available_cores() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:          # not on Linux
        return max(1, os.cpu_count() or 1)


def resolve(jobs: int | None) -> int:
    """``jobs`` as a number of processes: null or 0 is every available core."""
    return available_cores() if not jobs else max(1, int(jobs))


def configured_jobs() -> int:
    """The processes of a call that names none: :func:`set_jobs`' when set, else ``compute.jobs``
    of the current params.yaml, resolved."""
    if _JOBS is not None:
        return _JOBS
    from pipelines import config
    return resolve(config.load_params("compute")["jobs"])


def set_jobs(jobs: int | None) -> None:
    """Fix the processes of this process' later calls (None: follow params.yaml again)."""
    global _JOBS
    _JOBS = None if jobs is None else resolve(jobs)


@contextmanager
def children_allowed() -> Iterator[None]:
    """Let this process start child processes although multiprocessing marks it a daemon.

    A Celery worker runs each task in a process forked from its pool's, a daemon, and that mark is
    inherited: ``Process.start`` then refuses ("daemonic processes are not allowed to have
    children"), which would stop every stage's pool and budgeted child on a Celery worker (found by
    tests/dags/test_celery_scale_out.py).  What the mark guards against, children left behind when
    their parent ends, the callers guard against themselves: the pool and ``storage.budget.Worker``
    join or kill their children before they return."""
    marks: dict[str, Any] = getattr(multiprocessing.current_process(), "_config")   # the process's private flags
    had, daemon = "daemon" in marks, marks.get("daemon")
    marks["daemon"] = False
    try:
        yield
    finally:
        if had:
            marks["daemon"] = daemon
        else:
            marks.pop("daemon", None)


def _first_frame(job: Callable[[], None]) -> None:
    """The first Python frame of a :func:`on_fresh_stack` thread; its code's evaluation stack is
    enlarged below, so that the thread's first stack chunk is large."""
    job()


_first_frame.__code__ = _first_frame.__code__.replace(co_stacksize=FIRST_FRAME_SLOTS)


def on_fresh_stack(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a new thread whose Python stack starts with a 1 MiB chunk; its result, or its exception.

    CPython 3.11, the version this project pins, keeps the frames of a thread in chunks of 16 KiB,
    maps a chunk when a call crosses into it and unmaps it when that call returns: a loop that
    calls across the boundary pays two system calls and fresh zeroed pages on every call
    (CPython gh-142183; later releases keep a spare chunk).  Where the boundary falls depends on
    how deep the caller's stack already is, so the same per-run work can be fast under ``dvc
    repro`` and far slower inside an Airflow task, whose stack the stage's workers inherit when
    forked (docs/operations/performance.md, "Python's stack chunks inside an Airflow task").
    A thread's first chunk is sized by its first frame, and that chunk is never freed:
    :func:`_first_frame` asks for 512 KiB, so the work starts at the same shallow depth in a
    chunk of 1 MiB, whoever called it, and never crosses a boundary short of thousands of
    frames.  The caller's context variables go with it (numpy's error state among them); a
    call made on a fresh stack already runs in place."""
    if getattr(_FRESH, "on", False):
        return fn(*args)
    context = contextvars.copy_context()
    out: dict[str, Any] = {}
    done = threading.Event()

    def job() -> None:
        _FRESH.on = True
        try:
            out["value"] = context.run(fn, *args)
        except BaseException as exc:      # noqa: BLE001 -- raised again in the caller
            out["error"] = exc
        finally:
            done.set()

    _thread.start_new_thread(_first_frame, (job,))
    done.wait()
    if "error" in out:
        raise out["error"]
    return out["value"]


def _initialise(threads: int) -> None:
    """A worker process: nested calls run serially, its BLAS and OpenMP pools get ``threads``
    threads (its share of the cores), and SIGTERM ends it.

    Without the thread limit each of ``n`` workers starts a BLAS pool as large as the machine:
    ``n × cores`` spinning threads on ``cores`` cores, and every matrix product of the clustered
    models (correlations, inverses, least squares) waits for threads that are not running (the
    clusters stage at 100 runs × 2,000 counters: 262 s with two workers of two BLAS threads each,
    see docs/operations/performance.md).  The stage's SIGTERM handler is not kept: an Airflow
    task's, inherited by the fork, would answer for the task, not end the worker, and its parent,
    joining it at exit, would wait for ever."""
    global _IN_WORKER, _OPENMP
    _IN_WORKER = True
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    libraries = ThreadpoolController()          # the libraries loaded now, found once (milliseconds)
    libraries.limit(limits=threads)
    _OPENMP = (libraries.select(user_api="openmp"), threads)


def worker_threads(workers: int) -> int:
    """The BLAS/OpenMP threads of each of ``workers`` processes: the available cores shared out, at least one."""
    return max(1, available_cores() // max(1, workers))


def _in_share(fn: Callable[[Any], Any], item: Any) -> Any:
    """``fn(item)`` with OpenMP held to the worker's share of the cores in this thread too: its
    thread count is kept per thread (BLAS's, for the whole process, is set once by :func:`_initialise`,
    which also found the OpenMP libraries: setting their count here costs microseconds)."""
    assert _OPENMP is not None, "a worker's share is set by its initializer"
    libraries, threads = _OPENMP
    libraries.limit(limits=threads)
    return fn(item)


def _call(i: int) -> Any:
    assert _WORK is not None, "the work is set before the pool forks"
    fn, items = _WORK
    return on_fresh_stack(_in_share, fn, items[i])


class _NotRun:
    """The result of an item :func:`map_ordered` did not compute because ``stop`` said so."""

    def __repr__(self) -> str:
        return "NOT_RUN"


NOT_RUN = _NotRun()


def map_ordered(fn: Callable[[Any], Any], items: Iterable[Any], *, jobs: int | None = None,
                progress: Callable[[int, Any, Any], None] | None = None,
                stop: Callable[[Any, Any, int], bool] | None = None) -> list[Any]:
    """``[fn(x) for x in items]``, computed by ``jobs`` processes (default :func:`configured_jobs`).

    ``progress(done, item, result)`` is called in this process as each result arrives (``done``
    counts them), for the stage's progress lines.  ``stop(item, result, left)``, when given, is
    called likewise with the items not yet arrived; once it returns True no further item is
    started, and the items not computed are :data:`NOT_RUN` (what a bound on the rest needs to
    know, the caller's ``stop`` keeps).  An exception of ``fn`` is raised here, as the serial loop
    would raise it, after the workers stop."""
    global _WORK
    items = list(items)
    n = 1 if _IN_WORKER else min(configured_jobs() if jobs is None else resolve(jobs), len(items))
    if n <= 1:
        out: list[Any] = []
        for i, item in enumerate(items, 1):
            out.append(on_fresh_stack(fn, item))
            if progress:
                progress(i, item, out[-1])
            if stop is not None and stop(item, out[-1], len(items) - i):
                return out + [NOT_RUN] * (len(items) - i)
        return out
    if _WORK is not None:
        raise RuntimeError("map_ordered is not re-entrant within one process")
    _WORK = (fn, items)
    results: list[Any] = [NOT_RUN] * len(items)
    try:
        with children_allowed(), ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork"),
                                                     initializer=_initialise,
                                                     initargs=(worker_threads(n),)) as pool:
            pending = {pool.submit(_call, i): i for i in range(len(items))}
            done, stopped = 0, False
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(finished, key=lambda f: pending[f]):
                    i = pending.pop(future)
                    if future.cancelled():
                        continue
                    try:
                        results[i] = future.result()
                    except BaseException:
                        for other in pending:
                            other.cancel()
                        raise
                    done += 1
                    if progress:
                        progress(done, items[i], results[i])
                    if stop is not None and not stopped and stop(items[i], results[i], len(items) - done):
                        stopped = True
                        for other in pending:      # those already running end; the others never start
                            other.cancel()
    finally:
        _WORK = None
    return results
