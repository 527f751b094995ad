"""The nightly DAG's batching (pipelines/orchestration.py): pure parts, without Airflow."""
from __future__ import annotations

import pytest

from pipelines import orchestration


def test_batches_are_as_even_as_possible_and_never_larger_than_asked():
    runs = [f"r{i}" for i in range(10)]
    out = orchestration.batches(runs, 4)        # ceil(10 / 4) = 3 tasks: 4, 3, 3 (not 4, 4, 2)
    assert [len(b) for b in out] == [4, 3, 3] and sum(out, []) == runs
    assert orchestration.batches(runs, 10) == [runs] and orchestration.batches(runs, 1) == [[r] for r in runs]
    assert orchestration.batches([], 8) == []
    assert [len(b) for b in orchestration.batches(runs[:9], 8)] == [5, 4]
    with pytest.raises(ValueError, match="runs_per_task"):
        orchestration.batches(runs, 0)


def test_one_failing_run_does_not_stop_its_batch_and_is_named():
    seen = []

    def run_one(name):
        seen.append(name)
        if name == "b":
            raise ValueError("boom")

    with pytest.raises(orchestration.BatchFailed, match=r"1 of 3 run\(s\).*b: ValueError: boom") as err:
        orchestration.run_batch(run_one, ["a", "b", "c"], stage="detect")
    assert seen == ["a", "b", "c"]                  # c still ran after b failed
    assert err.value.done == ["a", "c"] and err.value.failed == {"b": "ValueError: boom"}
    assert orchestration.run_batch(lambda name: None, ["a", "c"], stage="detect") == ["a", "c"]
