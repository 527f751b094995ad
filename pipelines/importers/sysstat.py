"""sysstat: ``sadf -d`` / ``sadf -dh`` / ``sadf -dU`` / ``sadf -j`` (host-level counters named after the host) and
``pidstat`` with or without ``-h`` (per process, CPU at 100 per core; the banner's CPU count
gives the host's cores; local times need the run's ``timezone``).
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from pipelines.config import host_component
from pipelines.importers.common import SAMPLE_COLUMNS, FormatError, host_name, samples_frame, slug


def read_sadf(path: Path, *, timezone: str | None = None) -> tuple[pd.DataFrame, dict[str, float]]:
    """``sadf -d`` (one block per activity, each under its own ``# hostname;interval;timestamp;…``
    header) and ``sadf -dh`` (one wide row per interval), with times in UTC (sadf's default:
    ``YYYY-MM-DD HH:MM:SS UTC``) or in seconds since the epoch (``-U``). Host-level counters: the
    host's name is their component; a per-CPU row (``CPU`` 0, 1, …) is ``cpu<n>_…``, ``-1`` the
    whole machine; a per-device row (``IFACE``, ``DEV``) is ``<device>_…``.  (sysstat 12.6,
    sadf(1): ``-d`` database format, ``-h`` one line per record, ``-U`` epoch seconds, ``-t``
    local times, refused here: they carry no offset.)"""
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
    return sadf_samples(path, rows), {}


def sadf_epochs(path: Path, stamps: pd.Series) -> pd.Series:
    """sadf's ``timestamp`` column in epoch seconds: ``YYYY-MM-DD HH:MM:SS UTC`` or, with ``-U``,
    the seconds themselves."""
    numbers = pd.to_numeric(stamps, errors="coerce")
    if numbers.notna().all():
        return numbers.astype(float)
    ts = pd.to_datetime(stamps.str.replace(r"\s+UTC$", "+00:00", regex=True), utc=True, format="ISO8601",
                        errors="coerce")
    if ts.isna().any():
        bad = stamps[ts.isna()].iloc[0]
        raise FormatError(f"{path.name}: timestamp {bad!r} is not 'YYYY-MM-DD HH:MM:SS UTC' nor epoch seconds "
                          "(sadf -t writes local times: run sadf without -t, or with -U)")
    return (ts - pd.Timestamp(0, tz="UTC")).dt.total_seconds()


def sadf_samples(path: Path, rows: list[tuple[tuple, list[str]]]) -> pd.DataFrame:
    """Samples from sadf records, each ``(header, cells)`` as ``sadf -d`` writes them."""
    out = []
    for hdr, group in _group_by_header(rows):
        frame = pd.DataFrame(group, columns=list(hdr))
        epoch = sadf_epochs(path, frame["timestamp"].astype(str))
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
                                         "ts": epoch[part.index].to_numpy(float),
                                         "value": part[col].to_numpy()}))      # numbers: samples_frame
    return samples_frame(out)


# sadf -j names a value by the activity's JSON key; sadf -d by sar's column header.  Where they
# differ, the -d name (so both give the same counters).  Keys absent here keep their JSON name,
# ``-percent`` becoming ``%``.  sysstat 12.6 (sadf -j, the "sysstat" document of sysstat's DTD/XSD).
SADF_JSON_NAMES = {
    "memory": {"memfree": "kbmemfree", "avail": "kbavail", "memused": "kbmemused", "memused-percent": "%memused",
               "buffers": "kbbuffers", "cached": "kbcached", "commit": "kbcommit", "commit-percent": "%commit",
               "active": "kbactive", "inactive": "kbinact", "dirty": "kbdirty", "anonpg": "kbanonpg",
               "slab": "kbslab", "kstack": "kbkstack", "pgtbl": "kbpgtbl", "vmused": "kbvmused",
               "swpfree": "kbswpfree", "swpused": "kbswpused", "swpused-percent": "%swpused",
               "swpcad": "kbswpcad", "swpcad-percent": "%swpcad"},
    "io": {"bread": "bread/s", "bwrtn": "bwrtn/s", "bdscd": "bdscd/s"},
    "process-and-context-switch": {"proc": "proc/s", "cswch": "cswch/s"},
    "net-dev": {k: f"{k}/s" for k in ("rxpck", "txpck", "rxkB", "txkB", "rxcmp", "txcmp", "rxmcst")},
    "disk": {"rkB": "rkB/s", "wkB": "wkB/s", "dkB": "dkB/s"},
    "paging": {k: f"{k}/s" for k in ("pgpgin", "pgpgout", "fault", "majflt", "pgfree", "pgscank", "pgscand",
                                      "pgsteal")},
}
SADF_JSON_LEGACY = {"rd_sec", "wr_sec", "dc_sec", "avgrq-sz", "avgqu-sz"}     # older duplicates of rkB, wkB, …
SADF_JSON_KEYS = {"cpu-load": ("CPU", "cpu"), "cpu-load-all": ("CPU", "cpu"), "net-dev": ("IFACE", "iface"),
                  "net-edev": ("IFACE", "iface"), "disk": ("DEV", "disk-device")}


def _json_name(activity: str, key: str) -> str:
    name = SADF_JSON_NAMES.get(activity, {}).get(key)
    if name:
        return name
    if activity in ("cpu-load", "cpu-load-all"):
        return "%" + key
    return "%" + key[: -len("-percent")] if key.endswith("-percent") else key


def _json_records(activity: str, value):
    """(header suffix, cells suffix) per record of one activity of one statistics entry: a dict of
    numbers is one record; a list is one record per device/CPU (its key column first); a dict of
    dicts (``io``, ``network``) is flattened."""
    if isinstance(value, list):
        key_col, key_name = SADF_JSON_KEYS.get(activity, (activity.upper(), None))
        for item in value:
            if not isinstance(item, dict):
                raise ValueError(f"activity {activity!r}: a list of {type(item).__name__}, not of records")
            key = item.get(key_name) if key_name else None
            if key is None:
                key = next((v for v in item.values() if isinstance(v, str)), "")
            key = "-1" if (activity.startswith("cpu-load") and key == "all") else str(key)
            names = [(k, v) for k, v in item.items() if k != key_name and not isinstance(v, (str, dict, list))
                     and k not in SADF_JSON_LEGACY]
            yield (key_col, *(_json_name(activity, k) for k, _ in names)), (key, *(str(v) for _, v in names))
        return
    if isinstance(value, dict):
        flat = [(k, v) for k, v in value.items() if not isinstance(v, (dict, list)) and k not in SADF_JSON_LEGACY]
        if flat:
            yield tuple(_json_name(activity, k) for k, _ in flat), tuple(str(v) for _, v in flat)
        for k, v in value.items():
            if isinstance(v, list):
                yield from _json_records(k, v)
            elif isinstance(v, dict):      # io's io-reads / io-writes: their values belong to io
                sub = [(kk, vv) for kk, vv in v.items() if not isinstance(vv, (dict, list))]
                if sub:
                    yield (tuple(_json_name(activity, kk) for kk, _ in sub), tuple(str(vv) for _, vv in sub))


def read_sadf_json(path: Path, *, timezone: str | None) -> tuple[pd.DataFrame, dict[str, float]]:
    """``sadf -j``: sysstat's JSON document (``{"sysstat": {"hosts": [{"nodename", "number-of-cpus",
    "statistics": [{"timestamp": {"date", "time", "utc", "interval"}, <activity>: …}]}]}}``), read
    into the counters ``sadf -d`` gives for the same data file (:data:`SADF_JSON_NAMES`).  A
    timestamp with ``"utc": 0`` (``sadf -j -t``) is a local time: the run's ``timezone`` places it.
    The hosts' ``number-of-cpus`` gives their cores."""
    import json

    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path.name}: not a readable sadf -j document ({exc}); a truncated file?") from exc
    hosts = doc.get("sysstat", {}).get("hosts") if isinstance(doc, dict) and isinstance(doc.get("sysstat"), dict) \
        else None
    if not isinstance(hosts, list) or not hosts:
        raise FormatError(f"{path.name}: no sysstat.hosts list (a sadf -j document has one)")
    rows, cores = [], {}
    try:
        for h in hosts:
            node = str(h["nodename"])
            if h.get("number-of-cpus") is not None:
                cores[host_name(node)] = float(h["number-of-cpus"])
            for stat in h.get("statistics") or []:
                stamp = stat["timestamp"]
                epoch = _json_epoch(path, stamp, timezone)
                base = ("hostname", "interval", "timestamp")
                start = (node, str(stamp.get("interval", "")), repr(epoch))
                for activity, value in stat.items():
                    if activity == "timestamp":
                        continue
                    for hdr, cells in _json_records(activity, value):
                        rows.append(((*base, *hdr), [*start, *cells]))
    except FormatError:                         # _json_epoch's: it names the file
        raise
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise FormatError(f"{path.name}: a sadf -j record without its documented fields ({exc!r})") from exc
    if not rows:
        raise FormatError(f"{path.name}: no sadf -j statistics")
    return sadf_samples(path, rows), cores


def _json_epoch(path: Path, stamp: dict, timezone: str | None) -> float:
    """Epoch seconds of one ``sadf -j`` timestamp (``utc`` 1: UTC; 0: local, in ``timezone``)."""
    when = pd.Timestamp(f"{stamp['date']} {stamp['time']}")
    if int(stamp.get("utc", 1)) != 1:
        if not timezone:
            raise FormatError(f"{path.name}: sadf -j -t writes local times; set `timezone` in run.yaml, or run "
                              "sadf -j without -t (UTC times)")
        when = when.tz_localize(timezone)
    else:
        when = when.tz_localize("UTC")
    return (when - pd.Timestamp(0, tz="UTC")).total_seconds()


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

