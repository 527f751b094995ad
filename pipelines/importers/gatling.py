"""Gatling ``simulation.log`` (2.x, 3.0-3.3 and 3.4-3.7 text layouts): a request is read from
its two epoch-millisecond fields, whatever the layout; ``USER START/END`` give the active users.
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from pipelines.importers.common import FormatError

EPOCH_MS = re.compile(r"^\d{12,14}$")


def read_gatling(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """A text ``simulation.log`` of Gatling 2.x, 3.0-3.3 or 3.4-3.7 (tab-separated records).

    The layouts move fields around (2.x: scenario, user id, groups, name; 3.0-3.3: user id,
    groups, name; 3.4+: groups, name), so a REQUEST is read from its anchor: the first two
    consecutive epoch-millisecond fields are its start and end, the field before them its
    name, the one after its status (``OK``/``KO``). USER records give the active users."""
    events, changes = [], []
    with open(path, encoding="utf-8", errors="replace") as fh:
        first = fh.readline()
        if not first.startswith("RUN\t"):
            raise FormatError(f"{path.name}: a Gatling simulation.log starts with a RUN record")
        for number, line in enumerate(fh, 2):
            f = line.rstrip("\n").split("\t")
            kind = f[0]
            if kind == "REQUEST":
                at = next((i for i in range(1, len(f) - 1) if EPOCH_MS.match(f[i]) and EPOCH_MS.match(f[i + 1])), None)
                if at is None or at + 2 >= len(f) or f[at + 2] not in ("OK", "KO"):
                    raise FormatError(f"{path.name}, line {number}: a REQUEST record without start, end and "
                                      f"status (a truncated or garbled file?): {line[:120]!r}")
                start, end = int(f[at]) / 1000.0, int(f[at + 1]) / 1000.0
                events.append((start, 1000.0 * (end - start), f[at - 1], f[at + 2] == "OK"))
            elif kind == "USER":
                for i, token in enumerate(f):
                    if token in ("START", "END"):
                        stamp = next((x for x in f[i + 1:] if EPOCH_MS.match(x)), None)
                        if stamp is not None:
                            changes.append((int(stamp) / 1000.0, 1 if token == "START" else -1))
                        break
    events_df = pd.DataFrame(events, columns=["ts", "elapsed_ms", "label", "ok"])
    users = None
    if changes:
        ch = pd.DataFrame(changes, columns=["ts", "delta"]).sort_values("ts", kind="stable")
        users = pd.DataFrame({"ts": ch["ts"].to_numpy(), "users": ch["delta"].cumsum().to_numpy(float)})
    return events_df, users, None

