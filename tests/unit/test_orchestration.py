"""The nightly DAG's batching (pipelines/orchestration/tasks.py): pure parts, without Airflow."""
from __future__ import annotations

import pytest

from pipelines.orchestration import tasks


def test_batches_are_as_even_as_possible_and_never_larger_than_asked():
    runs = [f"r{i}" for i in range(10)]
    out = tasks.batches(runs, 4)        # ceil(10 / 4) = 3 tasks: 4, 3, 3 (not 4, 4, 2)
    assert [len(b) for b in out] == [4, 3, 3] and sum(out, []) == runs
    assert tasks.batches(runs, 10) == [runs] and tasks.batches(runs, 1) == [[r] for r in runs]
    assert tasks.batches([], 8) == []
    assert [len(b) for b in tasks.batches(runs[:9], 8)] == [5, 4]
    with pytest.raises(ValueError, match="runs_per_task"):
        tasks.batches(runs, 0)


def test_one_failing_run_does_not_stop_its_batch_and_is_named():
    seen = []

    def run_one(name):
        seen.append(name)
        if name == "b":
            raise ValueError("boom")

    with pytest.raises(tasks.BatchFailed, match=r"1 of 3 run\(s\).*b: ValueError: boom") as err:
        tasks.run_batch(run_one, ["a", "b", "c"], stage="detect", jobs=1)
    assert seen == ["a", "b", "c"]                  # c still ran after b failed
    assert err.value.done == ["a", "c"] and err.value.failed == {"b": "ValueError: boom"}
    assert tasks.run_batch(lambda name: None, ["a", "c"], stage="detect", jobs=1) == ["a", "c"]


def test_a_batch_on_two_processes_runs_every_run_once_and_names_each_failure(tmp_path):
    """The runs spread over two processes: each ran exactly once (a file per run, written by the
    process that ran it), both processes took part, and the failures come back by run, in order."""
    import os
    import time

    def run_one(name):
        (tmp_path / name).write_text(str(os.getpid()))
        time.sleep(0.05)                            # long enough that both processes get runs
        if name in ("b", "e"):
            raise KeyError(name)

    runs = ["a", "b", "c", "d", "e", "f"]
    with pytest.raises(tasks.BatchFailed) as err:
        tasks.run_batch(run_one, runs, stage="clusters", jobs=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == runs
    pids = {(tmp_path / r).read_text() for r in runs}
    assert len(pids) == 2 and str(os.getpid()) not in pids
    assert err.value.done == ["a", "c", "d", "f"]
    assert err.value.failed == {"b": "KeyError: 'b'", "e": "KeyError: 'e'"}


def test_a_stage_with_a_batch_context_gives_its_runs_its_function_and_closes_it():
    events = []

    class WithBatch:
        @staticmethod
        def run_one(name):
            raise AssertionError("a stage with batch() is not called run by run")

        @staticmethod
        def batch():
            from contextlib import contextmanager

            @contextmanager
            def ctx():
                events.append("open")
                yield lambda name: events.append(name)
                events.append("closed")
            return ctx()

    class Plain:
        run_one = staticmethod(lambda name: events.append(f"plain {name}"))

    with tasks.per_run(WithBatch) as one:
        assert tasks.run_batch(one, ["x", "y"], stage="detect", jobs=1) == ["x", "y"]
    with tasks.per_run(Plain) as one:
        tasks.run_batch(one, ["z"], stage="report", jobs=1)
    assert events == ["open", "x", "y", "closed", "plain z"]
