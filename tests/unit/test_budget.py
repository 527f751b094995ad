"""Work held to a budget of memory and time, in a forked child: its value, or why it stopped."""
from __future__ import annotations

import time

import numpy as np
import pytest

from pipelines.storage import budget


def _sum(n: int) -> int:
    return sum(range(n))


def _allocate(mb: int) -> int:
    return int(np.ones(mb * 2**20 // 8).sum())          # touches every page


def _sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "woke"


def _fail() -> None:
    raise ValueError("a reader's own error")


def test_the_value_comes_back():
    assert budget.run_within(budget.Budget(memory_mb=256, seconds=30), "adding", _sum, 10) == 45


def test_memory_beyond_the_budget_stops_the_work_and_says_so():
    with pytest.raises(budget.BudgetExceeded, match="exceeded 64 MB while allocating"):
        budget.run_within(budget.Budget(memory_mb=64, seconds=30), "allocating", _allocate, 512)
    assert budget.run_within(budget.Budget(memory_mb=256, seconds=30), "allocating", _allocate, 16) == 16 * 2**17


def test_time_beyond_the_budget_stops_the_work_and_says_so():
    started = time.monotonic()
    with pytest.raises(budget.BudgetExceeded, match="exceeded 0.5 s while sleeping"):
        budget.run_within(budget.Budget(memory_mb=256, seconds=0.5), "sleeping", _sleep, 30)
    assert time.monotonic() - started < 20                # the child was killed, not waited for


def test_an_error_of_the_work_is_named():
    with pytest.raises(RuntimeError, match="ValueError: a reader's own error"):
        budget.run_within(budget.Budget(memory_mb=256, seconds=30), "reading", _fail)


def test_the_budget_params_and_keys():
    assert budget.Budget.from_params({"max_memory_mb": "512", "max_seconds": 30}) == budget.Budget(512, 30.0)
    assert set(budget.BUDGET_KEYS) == {"max_memory_mb", "max_seconds"}
