"""Work held to a budget of memory and time, in a forked child: its value, or why it stopped."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from pipelines.storage import budget


def _sum(n: int) -> int:
    return sum(range(n))


def _allocate(mb: int) -> int:
    return int(np.ones(mb * 2**20 // 8).sum())          # touches every page


def _fail() -> None:
    raise ValueError("a reader's own error")


def test_the_value_comes_back():
    assert budget.run_within(budget.Budget(memory_mb=256, seconds=30), "adding", _sum, 10) == 45


def test_memory_beyond_the_budget_stops_the_work_and_says_so():
    with pytest.raises(budget.BudgetExceeded, match="exceeded 64 MB while allocating"):
        budget.run_within(budget.Budget(memory_mb=64, seconds=30), "allocating", _allocate, 512)
    assert budget.run_within(budget.Budget(memory_mb=256, seconds=30), "allocating", _allocate, 16) == 16 * 2**17


def _note_pid_sleep_then_finish(folder: str, seconds: float) -> None:
    (Path(folder) / "pid").write_text(str(os.getpid()))
    time.sleep(seconds)
    (Path(folder) / "finished").write_text("")


def test_time_beyond_the_budget_stops_the_work_and_says_so(tmp_path):
    with pytest.raises(budget.BudgetExceeded, match="exceeded 0.5 s while sleeping"):
        budget.run_within(budget.Budget(memory_mb=256, seconds=0.5), "sleeping", _note_pid_sleep_then_finish,
                          str(tmp_path), 30)
    # the child was killed, not waited for: it is gone and never got to the end of its work
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "pid").read_text()), 0)
    assert not (tmp_path / "finished").exists()


def test_an_error_of_the_work_is_named():
    with pytest.raises(RuntimeError, match="ValueError: a reader's own error"):
        budget.run_within(budget.Budget(memory_mb=256, seconds=30), "reading", _fail)


def test_the_budget_params_and_keys():
    assert budget.Budget.from_params({"max_memory_mb": "512", "max_seconds": 30}) == budget.Budget(512, 30.0)
    assert set(budget.BUDGET_KEYS) == {"max_memory_mb", "max_seconds"}


def _pid_after(mb: int) -> int:
    _allocate(mb)
    return os.getpid()


_kept: list = []


def _keep(mb: int) -> int:
    _kept.append(np.ones(mb * 2**20 // 8))                # held by the child after the task
    return os.getpid()


def test_a_worker_serves_task_after_task_in_one_child_each_with_the_whole_budget():
    with budget.Worker(budget.Budget(memory_mb=96, seconds=30), _keep) as worker:
        pids = [worker.run("keeping", 40) for _ in range(4)]
    # tasks 1-3 in one child: the third fits because the cap is set again over what the child
    # holds (80 MB + 96), not once at its start (120 MB > 96); having grown by more than a
    # budget (120 MB), that child retires, and the fourth task runs in a new one
    assert pids[0] == pids[1] == pids[2] != pids[3] and os.getpid() not in pids
    assert not _kept                                       # the parent kept nothing


def test_a_worker_starts_a_new_child_after_a_task_blows_its_budget():
    with budget.Worker(budget.Budget(memory_mb=64, seconds=30), _pid_after) as worker:
        first = worker.run("allocating", 8)
        with pytest.raises(budget.BudgetExceeded, match="exceeded 64 MB while allocating 512"):
            worker.run("allocating 512", 512)
        after = worker.run("allocating", 8)
    assert first != after                                  # the failed child is not trusted again


def test_a_worker_starts_a_new_child_after_a_timeout_or_an_error():
    def task(kind: str) -> int:
        if kind == "sleep":
            time.sleep(30)
        if kind == "fail":
            raise ValueError("a reader's own error")
        return os.getpid()

    with budget.Worker(budget.Budget(memory_mb=64, seconds=0.5), task) as worker:
        first = worker.run("working", "ok")
        with pytest.raises(budget.BudgetExceeded, match="exceeded 0.5 s while sleeping"):
            worker.run("sleeping", "sleep")
        second = worker.run("working", "ok")
        with pytest.raises(RuntimeError, match="ValueError: a reader's own error"):
            worker.run("reading", "fail")
        third = worker.run("working", "ok")
    assert len({first, second, third}) == 3


def test_a_killed_child_is_reported_and_replaced():
    def task(kind: str) -> int:
        if kind == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        return os.getpid()

    with budget.Worker(budget.Budget(memory_mb=64, seconds=10), task) as worker:
        with pytest.raises(budget.BudgetExceeded, match=r"died while dying .*exit code -9"):
            worker.run("dying", "die")
        assert worker.run("working", "ok") != os.getpid()


def test_a_pool_under_a_parent_that_ignores_sigterm_still_ends_with_its_budgeted_children():
    """An Airflow task installs its own SIGTERM handler, inherited by every fork.  A pool's process
    that keeps a budgeted child (normalize's, one per process) ends at the pool's shutdown, and
    multiprocessing then terminates that child with SIGTERM and joins it: the child must die of it,
    not run the inherited handler and wait on its pipe for ever (the task would hang)."""
    import subprocess
    import sys
    code = (
        "import signal, os\n"
        "signal.signal(signal.SIGTERM, lambda *a: None)        # as Airflow's task runner does\n"
        "from pipelines import parallel\n"
        "from pipelines.storage import budget\n"
        "kept = {}\n"
        "def one(n):\n"
        "    w = kept.setdefault(os.getpid(), budget.Worker(budget.Budget(512, 30), abs))\n"
        "    return w.run('a task', -n)\n"
        "print(parallel.map_ordered(one, range(6), jobs=2))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[0, 1, 2, 3, 4, 5]"


def test_the_child_works_on_a_fresh_stack_whatever_its_parents_depth():
    """The child inherits the stack of the thread that forked it (an Airflow task's is deep); its
    tasks run on a fresh one, where calls across the sweep's depths take no stack chunk each."""
    from tests.unit.test_parallel import _stack_sweep

    def deep(n: int) -> int:             # fork the child from 200 frames down, then from the top
        if n:
            return deep(n - 1)
        with budget.Worker(budget.Budget(memory_mb=512, seconds=60), _stack_sweep) as worker:
            return worker.run("a sweep of call depths")
    assert deep(200) < 1_000
    assert deep(0) < 1_000
