"""parallel.map_ordered: a stage's per-run work on several processes gives what one process gives."""
from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pandas as pd
import pytest

from pipelines import parallel
from pipelines.detectors.causes import features as cause_features
from pipelines.detectors.causes import classifiers as causes


@pytest.fixture(autouse=True)
def _jobs_from_params_again():
    yield
    parallel.set_jobs(None)


def test_results_come_back_in_the_items_order_computed_in_other_processes():
    items = list(range(12))
    seen = []
    out = parallel.map_ordered(lambda x: (x * x, os.getpid()), items, jobs=2,
                               progress=lambda done, item, result: seen.append((done, item)))
    assert [v for v, _ in out] == [x * x for x in items]
    assert {pid for _, pid in out} - {os.getpid()}          # the work ran in worker processes
    assert [d for d, _ in seen] == list(range(1, 13)) and sorted(i for _, i in seen) == items


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_stop_starts_no_further_item_and_marks_those_not_run(jobs):
    """``stop`` fires at the first result ≥ 3 (item 3, whose work sleeps less than the others'
    so that, on two processes, it arrives while most items are still queued): no further item is
    started; those already running finish; the rest are NOT_RUN, never a result."""
    import time

    def work(x):
        time.sleep(0.0 if x == 3 else 0.05)
        return x
    out = parallel.map_ordered(work, range(40), jobs=jobs, stop=lambda item, result, left: result >= 3)
    done = [v for v in out if v is not parallel.NOT_RUN]
    assert done[:4] == [0, 1, 2, 3] and all(v == i for i, v in enumerate(out) if v is not parallel.NOT_RUN)
    assert len(done) <= 4 + 2 * jobs + 1        # at most the items already handed to the workers
    assert out[-1] is parallel.NOT_RUN
    if jobs == 1:
        assert out == [0, 1, 2, 3] + [parallel.NOT_RUN] * 36


def test_one_job_runs_in_this_process_and_a_closure_sees_the_callers_state():
    big = np.arange(1000)               # inherited by the workers, never pickled
    serial = parallel.map_ordered(lambda i: (int(big[i] * 2), os.getpid()), [1, 5, 999], jobs=1)
    assert serial == [(2, os.getpid()), (10, os.getpid()), (1998, os.getpid())]
    assert [v for v, _ in parallel.map_ordered(lambda i: (int(big[i] * 2), 0), [1, 5, 999], jobs=2)] == [2, 10, 1998]


def test_an_error_in_a_worker_is_raised_in_the_caller():
    def fail_on_three(x):
        if x == 3:
            raise ValueError("run 3 is broken")
        return x
    with pytest.raises(ValueError, match="run 3 is broken"):
        parallel.map_ordered(fail_on_three, range(6), jobs=2)
    assert parallel.map_ordered(lambda x: x, [7], jobs=2) == [7]      # the next call works


def test_a_call_inside_a_worker_runs_serially():
    def inner(x):
        return parallel.map_ordered(lambda y: (y, os.getpid()), [x, x + 1], jobs=2)
    for pairs in parallel.map_ordered(inner, [0, 10], jobs=2):
        assert len({pid for _, pid in pairs}) == 1               # both in the one worker


def test_jobs_null_is_every_available_core():
    assert parallel.resolve(None) == parallel.resolve(0) == parallel.available_cores() >= 1
    assert parallel.resolve(3) == 3
    parallel.set_jobs(1)
    assert parallel.configured_jobs() == 1


def test_each_worker_gets_its_share_of_the_cores_for_blas_and_openmp(monkeypatch):
    """Two workers: each gets half the cores for BLAS and for OpenMP, not all of them (twice as
    many spinning threads as cores), in the thread the work runs on (OpenMP counts per thread)."""
    from threadpoolctl import threadpool_info, threadpool_limits
    import sklearn.ensemble  # noqa: F401 -- scikit-learn's OpenMP runtime loaded before the fork
    np.ones((2, 2)) @ np.ones((2, 2))                       # numpy's BLAS loaded before the fork
    share = (os.cpu_count() or 1) + 1                       # never a library's own default (the machine's cores)
    monkeypatch.setattr(parallel, "available_cores", lambda: 2 * share)
    with threadpool_limits(limits=1):                        # what the forks would inherit
        threads = parallel.map_ordered(lambda _: {api: sorted({p["num_threads"] for p in threadpool_info()
                                                               if p["user_api"] == api}) for api in ("blas", "openmp")},
                                       [0, 1], jobs=2)
    assert threads == [{"blas": [share], "openmp": [share]}] * 2
    assert parallel.worker_threads(2 * share + 1) == 1 and parallel.worker_threads(1) == 2 * share


def _toy(rng):
    rows = []
    for cause, shift in (("none", (0.0, 0.0)), ("cpu", (0.9, 0.0)), ("db", (0.0, 0.9))):
        for i in range(5):
            for b in range(2):
                rows.append({"target": f"{cause}-{i}", "baseline": f"base-{b}", "system": "s", "cause": cause,
                             "upper:cpu": shift[0] + rng.uniform(0, 0.3), "upper:db": shift[1] + rng.uniform(0, 0.3)})
    return pd.DataFrame(rows)


def test_leave_one_out_and_learning_curve_are_identical_on_one_and_two_processes():
    frame = _toy(np.random.default_rng(4))
    cols = cause_features.feature_columns(frame)
    # the project's forest with 20 trees, not 200: whether two processes reproduce one does not
    # depend on how many trees each fit grows, and 200 would make this the slowest unit test
    template = causes.learners(0)["random_forest"]
    template.set_params(**{f"{template.steps[-1][0]}__n_estimators": 20})
    got = {}
    for jobs in (1, 2):
        parallel.set_jobs(jobs)
        got[jobs] = (causes.loo_probabilities(template, frame, cols, True),
                     causes.learning_curve(template, frame, cols, max_runs=2, repeats=4, seed=3, balance=True),
                     causes.held_out_cause_probabilities(template, frame, cols, ["cpu", "db"]))
    assert got[1][0].equals(got[2][0]) and list(got[1][0].index) == sorted(frame["target"].unique())
    assert got[1][1] == got[2][1] and [r["trials"] for r in got[1][1]] == [4, 4]
    assert got[1][2].keys() == got[2][2].keys() and all(got[1][2][c].equals(got[2][2][c]) for c in got[1][2])


def _inside_a_daemon(out) -> None:
    """What a stage does on a Celery worker, whose task process multiprocessing marks a daemon."""
    from pipelines.storage import budget
    try:
        pooled = parallel.map_ordered(lambda x: x + 1, [1, 2, 3], jobs=2)
        with budget.Worker(budget.Budget(memory_mb=256, seconds=30), lambda x: x * 10) as worker:
            budgeted = worker.run("multiplying", 4)
        out.put((pooled, budgeted, multiprocessing.current_process().daemon))
    except BaseException as exc:     # noqa: BLE001 -- the test reads it
        out.put(repr(exc))


def test_a_daemon_process_still_runs_the_pool_and_the_budgeted_child():
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    daemon = ctx.Process(target=_inside_a_daemon, args=(out,), daemon=True)
    daemon.start()
    got = out.get(timeout=60)
    daemon.join(timeout=30)
    assert got == ([2, 3, 4], 40, True)          # and the daemon mark is back afterwards


def _down(n: int) -> int:
    return 0 if n == 0 else _down(n - 1)


def _stack_sweep(_: object = None) -> int:
    """Calls of every depth from 0 to 300 frames, 300 each (one frame of ``_down`` is about 120
    bytes: the depths span more than two of CPython's 16 KiB stack chunks, wherever the caller's
    stack ends); the minor page faults this thread took meanwhile."""
    import resource
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for depth in range(300):
        for _ in range(300):
            _down(depth)
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before


def test_per_run_work_never_pays_a_stack_chunk_per_call_whatever_the_callers_depth():
    """A call that crosses into a new stack chunk maps it, and its return unmaps it: on the
    caller's own stack the sweep crosses a boundary at some depth and faults on every call there
    (thousands of faults on the CPython this project pins); on a fresh stack, in this process or
    in a pool's worker, it stays in one chunk."""
    import sys
    plain = _stack_sweep()
    fresh = parallel.on_fresh_stack(_stack_sweep)
    assert fresh < 1_000
    if sys.version_info < (3, 13):                      # later CPythons keep a spare chunk
        assert plain > 10_000 and plain > 10 * fresh
    assert max(parallel.map_ordered(_stack_sweep, [0, 1], jobs=2)) < 1_000      # in forked workers
    assert max(parallel.map_ordered(_stack_sweep, [0], jobs=1)) < 1_000         # and serially here


def test_a_fresh_stack_gives_back_the_value_the_error_and_the_callers_context():
    import contextvars
    import threading
    night = contextvars.ContextVar("night", default=None)
    night.set("2026-11-22")
    assert parallel.on_fresh_stack(lambda a, b: (a + b, night.get()), 2, 3) == (5, "2026-11-22")
    assert parallel.on_fresh_stack(threading.get_ident) != threading.get_ident()   # another thread

    def nested():                       # a fresh stack's own calls run in place, on its thread
        return threading.get_ident(), parallel.on_fresh_stack(threading.get_ident)
    outer, inner = parallel.on_fresh_stack(nested)
    assert outer == inner

    def broken():
        raise KeyError("run_id")
    with pytest.raises(KeyError, match="run_id"):
        parallel.on_fresh_stack(broken)
