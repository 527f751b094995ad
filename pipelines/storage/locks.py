"""locks: one writer at a time on a data folder.

Two pulls, or an Airflow night beside ``dvc repro`` (DVC locks its own repository, not the
Airflow workers), would race on ``data/``: one would crash on a file the other had just
renamed, the other refuse archives it had itself half pulled.  Every entry point of a stage
holds a lock on the data folder (``data/.lock``, ``fcntl.flock``) while it runs:

- whole-stage work (``main()``, ``calibrate_all``, ``write_index``, triage) holds it
  *exclusively*;
- per-run work (``run_one``, which the nightly DAG maps over the night's runs and which writes
  only that run's files) holds it *shared*, so one night's mapped tasks still run side by
  side while nothing whole-stage can run beneath them.

A process that finds the lock taken waits, and says so: which stage waits, who took the lock
last (process, stage, since when) and how long it has waited.  It gives up after
``REGRESSLAB_LOCK_WAIT_S`` seconds (default 6 hours: a night must not die behind a long
retraining) with :class:`LockTimeout`, naming the holder.  The kernel releases a flock when
its process dies, so a killed night never leaves a stale lock; the first exclusive holder after
it removes the temporaries the killed process left (``atomic.sweep_stale_temporaries``).  Within one process the lock
is re-entrant (``main()`` calling ``run_one``).
"""
from __future__ import annotations

import fcntl
import functools
import json
import os
import socket
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

from pipelines import config
from pipelines.storage import atomic

DEFAULT_WAIT_S = 6 * 3600.0
_held: dict[str, Any] = {"fd": None, "mode": None, "depth": 0}


class LockTimeout(RuntimeError):
    """The data folder stayed locked by another process for longer than the wait allowed."""


def lock_path():
    return config.DATA / ".lock"


def holder_path():
    return config.DATA / ".lock.holder"


def _holder() -> str:
    """Who took the lock last, in words (best effort: the holder file is advisory)."""
    try:
        h = json.loads(holder_path().read_text())
        return f"pid {h['pid']} on {h['host']} ({h['what']}, {h['mode']}, since {h['since']})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


def _wait_s() -> float:
    raw = os.environ.get("REGRESSLAB_LOCK_WAIT_S")
    try:
        return float(raw) if raw else DEFAULT_WAIT_S
    except ValueError:
        raise ValueError(f"REGRESSLAB_LOCK_WAIT_S={raw!r} is not a number of seconds") from None


@contextmanager
def data_lock(what: str, *, shared: bool = False, wait_s: float | None = None, poll_s: float = 0.5,
              say: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold the data folder's lock (shared or exclusive) while the block runs.

    Parameters
    ----------
    what
        The stage (and run) taking the lock; the waiting message and the holder file name it.
    shared
        Per-run work that writes only its run's files; exclusive otherwise.
    wait_s
        Give up after this many seconds (default ``REGRESSLAB_LOCK_WAIT_S`` or 6 hours).
    say
        Where the waiting messages go (one when the wait starts, then one a minute).
    """
    if _held["depth"]:
        if _held["mode"] == "exclusive" or shared:
            _held["depth"] += 1
            try:
                yield
            finally:
                _held["depth"] -= 1
            return
        raise RuntimeError(f"{what}: needs the data folder exclusively inside a shared hold")
    wait_s = _wait_s() if wait_s is None else float(wait_s)
    say = say or (lambda line: print(line, flush=True))
    fd = _acquire(what, shared=shared, wait_s=wait_s, poll_s=poll_s, say=say)
    mode = "shared" if shared else "exclusive"
    _write_holder(what, mode)
    _held.update(fd=fd, mode=mode, depth=1)
    if not shared:                             # nobody else writes now: a killed run's leftovers go
        for stale in atomic.sweep_stale_temporaries(config.DATA, config.REPORTS, config.METRICS):
            say(f"{what}: removed {stale.relative_to(config.ROOT)}, left by a killed run")
    try:
        yield
    finally:
        _held.update(fd=None, mode=None, depth=0)
        os.close(fd)                           # closing the descriptor releases the flock


def _acquire(what: str, *, shared: bool, wait_s: float, poll_s: float, say: Callable[[str], None]) -> int:
    """The lock file's descriptor once ``flock`` is granted; :class:`LockTimeout` after ``wait_s``."""
    config.DATA.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path(), os.O_RDWR | os.O_CREAT, 0o644)
    op = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    start = time.monotonic()
    next_say = start
    try:
        while True:
            try:
                fcntl.flock(fd, op | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                now = time.monotonic()
                if now - start >= wait_s:
                    raise LockTimeout(f"{what}: gave up after {now - start:.0f} s waiting for the data folder "
                                      f"{config.DATA} (lock {lock_path().name}), held by {_holder()}; "
                                      f"raise REGRESSLAB_LOCK_WAIT_S to wait longer") from None
                if now >= next_say:
                    say(f"{what}: waiting for the data folder {config.DATA}, locked by {_holder()}; "
                        f"waited {now - start:.0f} s of at most {wait_s:.0f} s")
                    next_say = now + 60.0
                time.sleep(poll_s)
    except BaseException:
        os.close(fd)
        raise


def _write_holder(what: str, mode: str) -> None:
    """Who holds the lock, for those who wait (the file only informs them)."""
    try:
        holder = {"pid": os.getpid(), "host": socket.gethostname(), "what": what, "mode": mode,
                  "since": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        tmp = holder_path().with_name(f".lock.holder.{os.getpid()}")
        tmp.write_text(json.dumps(holder))
        os.replace(tmp, holder_path())
    except OSError:
        pass


def holding(what: str, *, shared: bool = False) -> Callable:
    """Decorator: run the function inside :func:`data_lock` (``what`` names it in messages; a
    shared per-run function adds its first argument, the run_id)."""
    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def locked(*args, **kwargs):
            name = f"{what} {args[0]}" if shared and args else what
            with data_lock(name, shared=shared):
                return fn(*args, **kwargs)
        return locked
    return wrap
