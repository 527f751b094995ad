"""Gatling ``simulation.log``: the text layouts of 2.x, 3.0-3.3 and 3.4-3.11 (a request is read
from its two epoch-millisecond fields, whatever the layout; ``USER START/END`` give the active
users) and the binary log of 3.12 and later (:func:`read_gatling_binary`, read as Gatling's own
``LogFileReader`` reads it: gatling/gatling, gatling-charts ``io.gatling.charts.stats.LogFileReader``
and gatling-core ``io.gatling.core.stats.writer.RecordHeader``, 3.12-3.14).
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from pipelines.importers.common import FormatError

EPOCH_MS = re.compile(r"^\d{12,14}$")


def active_users(changes: list[tuple[float, int]]) -> pd.DataFrame | None:
    """Active users over time from the users' starts (+1) and ends (-1); None without any."""
    if not changes:
        return None
    ch = pd.DataFrame(changes, columns=["ts", "delta"]).sort_values("ts", kind="stable")
    return pd.DataFrame({"ts": ch["ts"].to_numpy(), "users": ch["delta"].cumsum().to_numpy(float)})


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
    return events_df, active_users(changes), None



# Gatling 3.12 and later: a binary simulation.log (record headers of io.gatling.core.stats.writer.
# RecordHeader: Run 0, Request 1, User 2, Group 3, Error 4), read the way Gatling's own
# io.gatling.charts.stats.LogFileReader reads it: big-endian ints and longs (java.io.DataInputStream),
# a string as its length, its bytes and a coder byte (0 Latin-1, 1 UTF-16), repeated strings as an
# index into the strings seen so far (negative: a repeat), times as int milliseconds from the run's start.
RUN, REQUEST, USER, GROUP, ERROR = 0, 1, 2, 3, 4
MAX_STRING = 1 << 20            # one name or message: beyond this the file is not a Gatling log
MAX_COUNT = 10_000              # groups of a request, scenarios, assertions


def is_binary_log(head: bytes) -> bool:
    """A binary ``simulation.log``: a Run record (0), then the Gatling version as a string
    (a 4-byte length of 1-32, ``digits.digits…``, a coder byte 0)."""
    if len(head) < 9 or head[0] != RUN:
        return False
    size = int.from_bytes(head[1:5], "big")
    if not 1 <= size <= 32 or len(head) < 6 + size:
        return False
    return re.fullmatch(rb"\d+\.\d+[0-9A-Za-z.\-]*", head[5:5 + size]) is not None and head[5 + size] == 0


class _Binary:
    """A bounds-checked reader of one binary log held in memory (``mmap``)."""

    def __init__(self, data, name: str):
        self.data, self.pos, self.name = data, 0, name
        self.cache: dict[int, str] = {}

    def fail(self, what: str) -> FormatError:
        return FormatError(f"{self.name}, byte {self.pos}: {what} (a truncated or garbled binary Gatling log?)")

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise self.fail(f"{n} more byte(s) needed, {len(self.data) - self.pos} left")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def int32(self) -> int:
        return int.from_bytes(self.take(4), "big", signed=True)

    def int64(self) -> int:
        return int.from_bytes(self.take(8), "big", signed=True)

    def boolean(self) -> bool:
        b = self.take(1)[0]
        if b > 1:
            raise self.fail(f"a boolean byte of {b}")
        return b == 1

    def count(self) -> int:
        n = self.int32()
        if not 0 <= n <= MAX_COUNT:
            raise self.fail(f"a count of {n}")
        return n

    def block_size(self) -> int:
        n = self.int32()
        if not 0 <= n <= MAX_STRING:
            raise self.fail(f"a block of {n} bytes")
        return n

    def string(self) -> str:
        size = self.int32()
        if size == 0:
            return ""
        if not 0 < size <= MAX_STRING:
            raise self.fail(f"a string of {size} bytes")
        raw, coder = self.take(size), self.take(1)[0]
        if coder not in (0, 1):
            raise self.fail(f"a string coder of {coder}")
        return bytes(raw).decode("latin-1" if coder == 0 else "utf-16-le", "replace")

    def cached(self) -> str:
        index = self.int32()
        if index >= 0:
            self.cache[index] = self.string()
            return self.cache[index]
        if -index not in self.cache:
            raise self.fail(f"a repeat of string {-index}, never written")
        return self.cache[-index]


def read_gatling_binary(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """A binary ``simulation.log`` of Gatling 3.12 or later: REQUEST records are the requests
    (label: the request's name; ``ok``: its status), USER records the active users."""
    import mmap

    events, changes = [], []
    with open(path, "rb") as fh:
        if fh.seek(0, 2) == 0:
            raise FormatError(f"{path.name}: empty")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as data:
            r = _Binary(data, path.name)
            if r.take(1)[0] != RUN:
                raise r.fail("no Run record first")
            r.string()                                   # Gatling version
            r.string()                                   # simulation class
            start = r.int64()
            r.string()                                   # run description
            scenarios = [r.string() for _ in range(r.count())]
            for _ in range(r.count()):                   # assertions: pickled bytes, skipped
                r.take(r.block_size())
            while r.pos < len(data):
                kind = r.take(1)[0]
                if kind == REQUEST:
                    for _ in range(r.count()):
                        r.cached()
                    name = r.cached()
                    begin, end = r.int32(), r.int32()
                    ok = r.boolean()
                    r.cached()                           # message
                    events.append(((start + begin) / 1000.0, float(end - begin), name, ok))
                elif kind == USER:
                    scenario = r.int32()
                    if not 0 <= scenario < max(1, len(scenarios)):
                        raise r.fail(f"a user of scenario {scenario}, of {len(scenarios)}")
                    began = r.boolean()
                    changes.append(((start + r.int32()) / 1000.0, 1 if began else -1))
                elif kind == GROUP:
                    for _ in range(r.count()):
                        r.cached()
                    r.take(12)
                    r.boolean()
                elif kind == ERROR:
                    r.cached()
                    r.int32()
                else:
                    r.pos -= 1
                    raise r.fail(f"an unknown record type {kind}")
    if not events:
        raise FormatError(f"{path.name}: a binary Gatling log without a request")
    return pd.DataFrame(events, columns=["ts", "elapsed_ms", "label", "ok"]), active_users(changes), None
