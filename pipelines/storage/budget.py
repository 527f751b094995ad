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
what it derived is written to files, atomically, as the stage would).
"""
from __future__ import annotations

import multiprocessing
import os
import resource
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable


BUDGET_KEYS = ("max_memory_mb", "max_seconds")     # a stage's params block names its budget so


@dataclass(frozen=True)
class Budget:
    """The memory (MB above what the process holds when it starts the work) and the wall time
    (seconds) one archive may take."""
    memory_mb: int
    seconds: float

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "Budget":
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


def _child(conn, fn: Callable[..., Any], args: tuple, memory_mb: int, what: str) -> None:
    try:
        cap = _address_space() + memory_mb * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (cap, resource.getrlimit(resource.RLIMIT_AS)[1]))
        conn.send(("ok", fn(*args)))
    except MemoryError:
        conn.send(("memory", f"exceeded {memory_mb} MB while {what}"))
    except BaseException as exc:      # noqa: BLE001 -- reported to the parent, which decides
        conn.send(("error", f"{type(exc).__name__}: {exc}"[:2000] + "\n" + traceback.format_exc()[-4000:]))
    finally:
        conn.close()


def run_within(budget: Budget, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a forked child held to ``budget``; its return value.

    Raises
    ------
    BudgetExceeded
        When the child ran out of memory (``exceeded N MB while <what>``), of time (``exceeded N s
        while <what>``), or died without a word (killed by the kernel, a crash in a library).
    RuntimeError
        When ``fn`` raised: its exception, named, with the child's traceback.
    """
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child, args=(child, fn, args, budget.memory_mb, what), daemon=True)
    start = time.monotonic()
    process.start()
    child.close()
    try:
        if not parent.poll(budget.seconds):
            raise BudgetExceeded(f"exceeded {budget.seconds:g} s while {what}")
        try:
            status, value = parent.recv()
        except EOFError as exc:
            raise BudgetExceeded(f"died while {what} after {time.monotonic() - start:.0f} s "
                                 f"(exit code {process.exitcode}; the memory cap was {budget.memory_mb} MB)") from exc
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        parent.close()
    if status == "memory":
        raise BudgetExceeded(value)
    if status == "error":
        raise RuntimeError(value)
    return value


def available() -> bool:
    """Whether forking is possible here (Linux; not inside a process that forbids it)."""
    return hasattr(os, "fork") and "fork" in multiprocessing.get_all_start_methods()
