"""Work on one untrusted archive inside a budget of memory and time.

The limits of ``validate.limits`` refuse what they can count before anything is allocated, but an
archive can still find a path through a reader that costs far more than its size (a parser's
worst case, a library's copy of a value).  Without a cap, the kernel kills the whole stage before
it writes the quarantine file, and the same immutable raw archive then stops every night.  So the
work of one archive runs in a child process (forked: it inherits the loaded libraries, and the
Great Expectations context, at no cost) whose address space is capped (``RLIMIT_AS``: what the
process already holds plus ``memory_mb``) and which is killed after ``seconds``: a blow-up ends
that child with a reason that names the budget and what it was doing, and the night goes on.

The child hands back a small JSON-able result through a pipe (never data read from the archive:
what it derived is written to files, atomically, as the stage would).  A :class:`Worker` keeps
its child for the next archive, so a night pays the fork and the libraries' first-call costs once.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.process
from multiprocessing.connection import Connection
import os
import resource
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from pipelines import parallel


BUDGET_KEYS = ("max_memory_mb", "max_seconds")     # a stage's params block names its budget so
_STARTING = threading.Lock()     # workers driven from several threads (validate) start their children one at a time


@dataclass(frozen=True)
class Budget:
    """The memory (MB above what the process holds when it starts the work) and the wall time
    (seconds) one archive may take."""
    memory_mb: int
    seconds: float

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "Budget":
        return cls(memory_mb=int(params["max_memory_mb"]), seconds=float(params["max_seconds"]))


class BudgetExceeded(RuntimeError):
    """The work ran out of its memory or its time; the message says which, and what it was doing."""


def _address_space() -> int:
    """The bytes of address space this process holds (``VmSize``)."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _cap(memory_mb: int) -> None:
    """Hold this process's address space to what it holds now plus ``memory_mb``."""
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    cap = _address_space() + memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))


def _serve(conn, fn: Callable[..., Any], memory_mb: int) -> None:
    """The worker's loop: each task's arguments in, its answer out, each task capped afresh.  It
    ends after a failure (its state is not to be trusted then) or when it has grown by a whole
    budget over the tasks (what a library keeps between calls), and the parent forks a new one.
    SIGTERM ends it: the parent's handler (an Airflow task's, inherited by the fork) would answer
    for the task instead, and the parent, joining its children at exit, would wait for ever."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    parallel.on_fresh_stack(_serve_tasks, conn, fn, memory_mb)


def _serve_tasks(conn, fn: Callable[..., Any], memory_mb: int) -> None:
    """:func:`_serve`'s loop, on a fresh stack (``parallel.on_fresh_stack``: the child inherits
    its parent's stack, an Airflow task's among them), started before the first cap so that the
    thread's own stacks and allocator arena are not counted against a task's budget."""
    start = _address_space()
    while True:
        try:
            task = conn.recv()
        except EOFError:
            return
        if task is None:
            return
        what, args = task
        try:
            _cap(memory_mb)
            value = fn(*args)
            retire = _address_space() > start + memory_mb * 2**20
            conn.send(("ok", value, retire))
            if retire:
                return
        except MemoryError:
            conn.send(("memory", f"exceeded {memory_mb} MB while {what}", True))
            return
        except BaseException as exc:      # noqa: BLE001 -- reported to the parent, which decides
            conn.send(("error", f"{type(exc).__name__}: {exc}"[:2000] + "\n" + traceback.format_exc()[-4000:], True))
            return


class Worker:
    """``fn`` run on one task after another in a forked child, each task held to ``budget``.

    One child serves task after task, so what a library builds on its first call (Great
    Expectations' data sources, imports on first use, pages touched) is paid once, not once per
    archive; each task still gets the whole budget above what the child holds when it starts
    (the cap is set again before every task).  A task that runs out of time or memory, raises, or
    kills its child ends that child, and the next task starts a new one.  ``fn`` reaches the child
    by the fork, never pickled; only each task's arguments and its small result cross the pipe.
    Use as a context manager (the child is stopped on exit)."""

    def __init__(self, budget: Budget, fn: Callable[..., Any]):
        self.budget, self.fn = budget, fn
        self._process: multiprocessing.process.BaseProcess | None = None
        self._conn: Connection | None = None

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _start(self) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe()
        process = ctx.Process(target=_serve, args=(child, self.fn, self.budget.memory_mb), daemon=True)
        with _STARTING, parallel.children_allowed():        # a stage on a Celery worker runs in a daemon
            process.start()
        self._process = process
        child.close()

    def close(self) -> None:
        """Stop the child (asked to leave; killed when it does not at once)."""
        process, conn = self._process, self._conn
        if process is None or conn is None:
            return
        try:
            conn.send(None)
        except OSError:
            pass
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join()
        conn.close()
        self._process = self._conn = None

    def run(self, what: str, *args: Any) -> Any:
        """``fn(*args)`` in the child; its return value.

        Raises
        ------
        BudgetExceeded
            When the task ran out of memory (``exceeded N MB while <what>``), of time (``exceeded
            N s while <what>``), or its child died without a word (killed by the kernel, a crash
            in a library).
        RuntimeError
            When ``fn`` raised: its exception, named, with the child's traceback.
        """
        if self._process is None or not self._process.is_alive():
            self.close()
            self._start()
        process, conn = self._process, self._conn
        assert process is not None and conn is not None        # started above
        start = time.monotonic()
        try:
            conn.send((what, args))
            if not conn.poll(self.budget.seconds):
                raise BudgetExceeded(f"exceeded {self.budget.seconds:g} s while {what}")
            status, value, retire = conn.recv()
        except (EOFError, OSError) as exc:
            process.join(timeout=5)
            code = process.exitcode
            self.close()
            raise BudgetExceeded(f"died while {what} after {time.monotonic() - start:.0f} s "
                                 f"(exit code {code}; the memory cap was {self.budget.memory_mb} MB)") from exc
        except BudgetExceeded:
            process.kill()
            self.close()
            raise
        if retire:
            self.close()
        if status == "memory":
            raise BudgetExceeded(value)
        if status == "error":
            raise RuntimeError(value)
        return value


def run_within(budget: Budget, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a forked child held to ``budget``; its return value (a one-task
    :class:`Worker`: the same errors)."""
    with Worker(budget, lambda: fn(*args)) as worker:
        return worker.run(what)


def available() -> bool:
    """Whether forking is possible here (Linux; not inside a process that forbids it)."""
    return hasattr(os, "fork") and "fork" in multiprocessing.get_all_start_methods()
