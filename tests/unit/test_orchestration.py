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
        tasks.run_batch(run_one, ["a", "b", "c"], stage="detect")
    assert seen == ["a", "b", "c"]                  # c still ran after b failed
    assert err.value.done == ["a", "c"] and err.value.failed == {"b": "ValueError: boom"}
    assert tasks.run_batch(lambda name: None, ["a", "c"], stage="detect") == ["a", "c"]
