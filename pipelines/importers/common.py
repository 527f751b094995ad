"""What every reader shares: the samples frame, the names of hosts and counters, and the
aggregation of load-generator requests into the counters a performance team reads.

A reader turns one collector file into *samples*: a long frame ``host, counter, ts, value``
(``ts`` in epoch seconds, UTC; ``counter`` already ``<component>.<counter>``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

SAMPLE_COLUMNS = ["host", "counter", "ts", "value"]


class FormatError(ValueError):
    """A collector file that cannot be read as the format it claims: the message says where and why."""


class ForeignFile(FormatError):
    """A file that only looked like a collector's by its first bytes and turned out to be something
    else (a k6 summary in a JSON file, say): listed as ignored with this reason; the run goes on."""


@dataclass
class Parsed:
    """What one file gave: its samples, and facts about the hosts (``cores``) it states."""
    fmt: str
    samples: pd.DataFrame
    cores: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    load_generator: bool = False


def slug(text: str, limit: int = 60) -> str:
    """A counter-name fragment: lower case, ``%`` -> ``pct``, ``/s`` -> ``per_s``, other runs of
    characters outside ``[a-z0-9]`` -> ``_``; long text is cut and given a short hash."""
    t = str(text).strip().lower()
    t = t.replace("%", " pct ").replace("/sec", " per_s ").replace("/s", " per_s ")
    t = re.sub(r"[^a-z0-9]+", "_", t).strip("_") or "x"
    if t.startswith("pct_"):                    # "% Processor Time" -> processor_time_pct
        t = t[4:] + "_pct"
    if len(t) > limit:
        import hashlib
        t = t[: limit - 9] + "_" + hashlib.sha256(str(text).encode()).hexdigest()[:8]
    return t


def host_name(text: str) -> str:
    """A host name in the identifier grammar (contract §1), from what a collector wrote."""
    t = re.sub(r"[^A-Za-z0-9._-]+", "_", str(text).strip()).strip("._-") or "host"
    return t[:128]


def samples_frame(rows: list[pd.DataFrame]) -> pd.DataFrame:
    rows = [r for r in rows if len(r)]
    if not rows:
        return pd.DataFrame(columns=SAMPLE_COLUMNS)
    out = pd.concat(rows, ignore_index=True)[SAMPLE_COLUMNS]
    out["ts"] = out["ts"].astype(float)
    out["value"] = pd.to_numeric(out["value"], errors="coerce").astype(float)
    return out


def wide_tosamples_frame(frame: pd.DataFrame, host: str, ts: pd.Series) -> pd.DataFrame:
    """One host's wide frame (a column per counter) as samples."""
    long = frame.assign(ts=ts.values).melt(id_vars="ts", var_name="counter", value_name="value")
    long.insert(0, "host", host)
    return long


@dataclass(frozen=True)
class Aggregation:
    """How a load generator's requests become samples: per ``interval_s`` seconds, the overall
    ``percentiles`` of the response time, and per label (the ``max_labels`` busiest) its
    ``label_percentiles`` (``ingest`` params)."""
    interval_s: float
    percentiles: list[float]
    label_percentiles: list[float]
    max_labels: int


def aggregate_requests(events: pd.DataFrame, *, component: str, host: str, interval_s: float,
                       percentiles: list[float], label_percentiles: list[float], max_labels: int,
                       users: pd.DataFrame | None = None) -> pd.DataFrame:
    """Request events -> samples per interval, overall and per label.

    ``events``: ``ts`` (epoch s of the request's start), ``elapsed_ms``, ``label``, ``ok``.
    Counters: ``throughput_rps`` (requests / interval), ``error_rate_pct`` (failed share),
    ``response_time_ms`` (mean) and ``response_time_p<q>_ms``; per label (the ``max_labels``
    most requested) ``<label>_throughput_rps``, ``_error_rate_pct``, ``_response_time_ms`` and
    its ``label_percentiles``. ``users``: ``ts``, ``users`` (active threads or virtual users),
    reported as the interval's maximum in ``active_users``. A sample's time is its interval's
    end (collectors average backwards). An interval with no request has throughput 0 and no
    response time."""
    if events.empty:
        raise FormatError("no request in the file")
    t0 = np.floor(events["ts"].min() / interval_s) * interval_s
    slot = np.floor((events["ts"].to_numpy() - t0) / interval_s).astype(np.int64)
    n_slots = int(slot.max()) + 1
    ends = t0 + interval_s * (np.arange(n_slots) + 1)
    ev = pd.DataFrame({"slot": slot, "elapsed": events["elapsed_ms"].to_numpy(float),
                       "bad": ~events["ok"].to_numpy(bool), "label": events["label"].to_numpy()})
    rows = []

    def stats(group: pd.DataFrame, prefix: str, qs: list[float]) -> None:
        g = group.groupby("slot")
        count = g.size().reindex(range(n_slots), fill_value=0)
        cols = {f"{prefix}throughput_rps": count / interval_s,
                f"{prefix}error_rate_pct": (100.0 * g["bad"].mean()).reindex(range(n_slots)),
                f"{prefix}response_time_ms": g["elapsed"].mean().reindex(range(n_slots))}
        for q in qs:
            cols[f"{prefix}response_time_p{q:g}_ms"] = g["elapsed"].quantile(q / 100.0).reindex(range(n_slots))
        for name, series in cols.items():
            rows.append(pd.DataFrame({"host": host, "counter": f"{component}.{name}", "ts": ends,
                                      "value": series.to_numpy(float)}))

    stats(ev, "", percentiles)
    ev["label"] = ev["label"].astype("category")
    counts = ev["label"].value_counts()
    top = counts[counts > 0].index[:max_labels]
    used: set[str] = set()
    for label in top:
        name = slug(label, 40)
        while name in used:
            name = name + "_"
        used.add(name)
        stats(ev[ev["label"] == label], f"{name}_", label_percentiles)
    if users is not None and len(users):
        u = users.dropna()
        uslot = np.floor((u["ts"].to_numpy(float) - t0) / interval_s).astype(np.int64)
        inside = (uslot >= 0) & (uslot < n_slots)
        peak = pd.Series(u["users"].to_numpy(float)[inside]).groupby(uslot[inside]).max().reindex(range(n_slots))
        rows.append(pd.DataFrame({"host": host, "counter": f"{component}.active_users", "ts": ends,
                                  "value": peak.ffill().to_numpy(float)}))
    return samples_frame(rows)


# read whole, not line by line: their lines may be long
WHOLE_FILE_FORMATS = ("prometheus", "jmeter_xml", "sadf_json")
RECORD_FORMATS = ("gatling_binary",)     # binary records, mapped (never whole in memory): no lines to bound


def check_file_size(path: Path, fmt: str, *, max_file_bytes: int, max_line_bytes: int, max_whole_bytes: int) -> None:
    """Refuse, before a reader allocates for it, a collector file larger than ``max_file_bytes``, a
    file read whole (JSON, XML) larger than ``max_whole_bytes``, or a line of a line-oriented file
    longer than ``max_line_bytes`` (found streaming, in blocks of 1 MiB: a 1 GiB line never sits in
    memory)."""
    size = path.stat().st_size
    if size > max_file_bytes:
        raise FormatError(f"{path.name}: {size:,} bytes (more than {max_file_bytes:,})")
    if fmt in WHOLE_FILE_FORMATS:
        if size > max_whole_bytes:
            raise FormatError(f"{path.name}: {size:,} bytes, read whole (more than {max_whole_bytes:,})")
        return
    if fmt in RECORD_FORMATS:
        return
    if size <= max_line_bytes:
        return
    current, number = 0, 1
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            parts = block.split(b"\n")
            for i, part in enumerate(parts):
                current += len(part)
                if current > max_line_bytes:
                    raise FormatError(f"{path.name}, line {number}: longer than {max_line_bytes:,} bytes")
                if i < len(parts) - 1:
                    current, number = 0, number + 1
