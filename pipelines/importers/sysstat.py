"""sysstat: ``sadf -d`` / ``sadf -dh`` (host-level counters named after the host) and
``pidstat`` with or without ``-h`` (per process, CPU at 100 per core; the banner's CPU count
gives the host's cores; local times need the run's ``timezone``).
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from pipelines.config import host_component
from pipelines.importers.common import SAMPLE_COLUMNS, FormatError, host_name, samples_frame, slug


def read_sadf(path: Path) -> tuple[pd.DataFrame, dict[str, float]]:
    """``sadf -d`` (one block per activity, each under its own ``# hostname;interval;timestamp;…``
    header) and ``sadf -dh`` (one wide row per interval). Times carry ``UTC`` (sadf's default
    without ``-t``). Host-level counters: the host's name is their component; a per-CPU row
    (``CPU`` 0, 1, …) is ``cpu<n>_…``, ``-1`` the whole machine; a per-device row
    (``IFACE``, ``DEV``) is ``<device>_…``."""
    rows = []
    header: list[str] | None = None
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, line in enumerate(fh, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if line.startswith("#"):
                header = [h.replace("[...]", "") for h in line.lstrip("# ").split(";")]
                continue
            if header is None:
                raise FormatError(f"{path.name}, line {number}: data before a '# hostname;interval;timestamp' header")
            cells = line.split(";")
            if len(cells) != len(header):
                raise FormatError(f"{path.name}, line {number}: {len(cells)} fields under a header of "
                                  f"{len(header)} (a truncated line?)")
            rows.append((tuple(header), cells))
    if not rows:
        raise FormatError(f"{path.name}: no sadf record")
    out = []
    for hdr, group in _group_by_header(rows):
        frame = pd.DataFrame(group, columns=list(hdr))
        stamp = frame["timestamp"].str.replace(r"\s+UTC$", "+00:00", regex=True)
        ts = pd.to_datetime(stamp, utc=True, format="ISO8601", errors="coerce")
        if ts.isna().any():
            bad = frame["timestamp"][ts.isna()].iloc[0]
            raise FormatError(f"{path.name}: timestamp {bad!r} is not 'YYYY-MM-DD HH:MM:SS UTC' (sadf -t writes "
                              "local times: run sadf without -t)")
        epoch = (ts - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
        keys = [k for k in ("CPU", "IFACE", "DEV", "TTY", "FILESYSTEM", "INTR") if k in frame.columns]
        values = [c for c in frame.columns if c not in ("hostname", "interval", "timestamp", *keys)]
        for (hostname, *keyvals), part in frame.groupby(["hostname", *keys], sort=False):
            host = host_name(hostname)
            prefix, cpu = "", None
            for k, v in zip(keys, keyvals):
                if k == "CPU":
                    cpu = "cpu_" if str(v) in ("-1", "all") else f"cpu{v}_"
                else:
                    prefix += f"{slug(v, 30)}_"
            for col in values:
                name = slug(col, 40)
                if cpu and col in SADF_CPU_FIELDS:       # -dh puts CPU and other activities on one row
                    name = cpu + name
                out.append(pd.DataFrame({"host": host, "counter": f"{host_component(host)}.{prefix}{name}",
                                         "ts": epoch[part.index].to_numpy(float), "value": part[col].to_numpy()}))
    return samples_frame(out), {}


SADF_CPU_FIELDS = {"%user", "%usr", "%nice", "%system", "%sys", "%iowait", "%steal", "%irq", "%soft", "%guest",
                   "%gnice", "%idle"}


def _group_by_header(rows: list[tuple[tuple, list[str]]]):
    groups: dict[tuple, list[list[str]]] = {}
    for hdr, cells in rows:
        groups.setdefault(hdr, []).append(cells)
    return groups.items()


PIDSTAT_NAMES = {"%usr": "user_pct", "%system": "system_pct", "%guest": "guest_pct", "%wait": "wait_pct",
                 "%CPU": "cpu_pct", "minflt/s": "minflt_per_s", "majflt/s": "majflt_per_s", "VSZ": "vsz_kb",
                 "RSS": "rss_kb", "%MEM": "mem_pct", "kB_rd/s": "read_kb_per_s", "kB_wr/s": "write_kb_per_s",
                 "kB_ccwr/s": "cancelled_write_kb_per_s", "iodelay": "iodelay_ticks",
                 "cswch/s": "context_switches_per_s", "nvcswch/s": "nonvoluntary_switches_per_s",
                 "StkSize": "stack_kb", "StkRef": "stack_ref_kb", "threads": "threads_count",
                 "fd-nr": "fd_count"}


def pidstat_banner(path: Path, first_line: str) -> tuple[str, pd.Timestamp, float]:
    """The host, the day and the CPU count of pidstat's ``Linux <kernel> (<host>) <date> <arch> (<n> CPU)``."""
    banner = re.match(r"Linux\s+\S+\s+\(([^)]+)\)\s+(\S+)\s+\S+\s+\((\d+)\s+CPU\)", first_line)
    if not banner:
        raise FormatError(f"{path.name}: no 'Linux <kernel> (<host>) <date> <arch> (<n> CPU)' banner")
    host, day, cores = host_name(banner.group(1)), banner.group(2), float(banner.group(3))
    date = pd.to_datetime(day, format="%m/%d/%y" if day.count("/") == 2 and len(day) == 8 else None, errors="coerce")
    if pd.isna(date):
        date = pd.to_datetime(day, errors="coerce")
    if pd.isna(date):
        raise FormatError(f"{path.name}: banner date {day!r} is not a date")
    return host, date, cores


def pidstat_records(path: Path, lines: list[str]) -> pd.DataFrame:
    """One row per sample line, under the ``#`` header above it (a 12-hour ``AM``/``PM`` time kept whole)."""
    header: list[str] | None = None
    records = []
    for number, line in enumerate(lines[1:], 2):
        if not line.strip() or line.startswith("Average:"):
            continue
        parts = line.split()
        if line.startswith("#"):
            header = parts[1:]
            continue
        if header is None:
            continue
        if len(parts) > 1 and parts[1] in ("AM", "PM"):
            parts = [f"{parts[0]} {parts[1]}"] + parts[2:]
        if len(parts) != len(header):
            raise FormatError(f"{path.name}, line {number}: {len(parts)} fields under a header of {len(header)} "
                              "(a truncated line?)")
        records.append(dict(zip(header, parts)))
    if not records:
        raise FormatError(f"{path.name}: no pidstat sample")
    return pd.DataFrame(records)


def pidstat_epochs(path: Path, times: pd.Series, date: pd.Timestamp, timezone: str) -> pd.Series:
    """Epoch seconds of local times of day from ``date`` on (a run past midnight moves to the next
    day); a time a DST change makes ambiguous or nonexistent is refused."""
    clock = pd.to_datetime(date.strftime("%Y-%m-%d ") + times, errors="coerce")
    if clock.isna().any():
        raise FormatError(f"{path.name}: time {times[clock.isna()].iloc[0]!r} is not a time of day")
    clock = clock + pd.to_timedelta((clock.diff().dt.total_seconds() < -43200).cumsum(), unit="D")
    try:
        local = clock.dt.tz_localize(timezone, ambiguous="raise", nonexistent="raise")
    except Exception as exc:  # noqa: BLE001 -- pytz/zoneinfo raise several types for the same two faults
        raise FormatError(f"{path.name}: local time not unique in {timezone} ({exc}); a DST change inside the "
                          "run: record with S_TIME_FORMAT=ISO or in UTC") from exc
    return (local.dt.tz_convert("UTC") - pd.Timestamp(0, tz="UTC")).dt.total_seconds()


def read_pidstat(path: Path, *, timezone: str | None) -> tuple[pd.DataFrame, dict[str, float]]:
    """``pidstat`` text (with or without ``-h``): per process (``Command``; several PIDs of one
    command are summed), host and CPU count from the banner. pidstat writes the local time of
    day without an offset, so the run's ``timezone`` must be given; an ambiguous or
    nonexistent local time (a DST change) is refused."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    lines = text.splitlines()
    host, date, cores = pidstat_banner(path, lines[0] if lines else "")
    if not timezone:
        raise FormatError(f"{path.name}: pidstat writes local times without an offset; set `timezone` in "
                          "run.yaml (e.g. UTC or Europe/Paris), or run it with S_TIME_FORMAT=ISO")
    frame = pidstat_records(path, lines)
    frame["ts"] = pidstat_epochs(path, frame["Time"], date, timezone)
    command = frame["Command"] if "Command" in frame.columns else pd.Series("process", index=frame.index)
    out = []
    for col, name in PIDSTAT_NAMES.items():
        if col not in frame.columns:
            continue
        vals = pd.to_numeric(frame[col], errors="coerce")
        summed = vals.groupby([command.map(lambda c: slug(c, 40)), frame["ts"]]).sum(min_count=1)
        for (proc, ts), v in summed.items():
            out.append((host, f"{proc}.{name}", ts, v))
    samples = pd.DataFrame(out, columns=SAMPLE_COLUMNS)
    return samples_frame([samples]), {host: cores}

