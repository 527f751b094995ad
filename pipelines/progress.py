"""Progress lines for long stage loops: counts, elapsed time and ETA."""
from __future__ import annotations

import logging
import time


class Progress:
    """Log ``label: i/total <what>, <extra>, <elapsed>s, eta <eta>s`` every ``every`` items and at the end."""

    def __init__(self, log: logging.Logger, label: str, total: int, *, what: str = "runs", every: int = 1):
        self.log, self.label, self.total, self.what, self.every = log, label, total, what, every
        self.started = time.monotonic()
        self.done = 0

    def each(self, describe=None):
        """A ``parallel.map_ordered`` progress callback: one more item done, its line saying
        ``describe(item, result)`` when given.  The count runs on across calls (several systems)."""
        def done(_: int, item: object, result: object) -> None:
            self.done += 1
            self.step(self.done, describe(item, result) if describe else "")
        return done

    def step(self, i: int, extra: str = "") -> None:
        if i % self.every and i != self.total:
            return
        elapsed = time.monotonic() - self.started
        eta = elapsed / i * (self.total - i) if i else 0.0
        self.log.info("%s: %d/%d %s%s, %.1fs, eta %.0fs", self.label, i, self.total, self.what,
                      f" ({extra})" if extra else "", elapsed, eta)
