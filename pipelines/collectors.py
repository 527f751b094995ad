"""Readers of the files that load generators and system collectors write (issue 13, part 3).

Each reader turns one collector file into *samples*: a long frame ``host, counter, ts, value``
(``ts`` in epoch seconds, UTC; ``counter`` already ``<component>.<counter>``). ``ingest``
gathers the samples of a run directory into a contract archive (``DATA_CONTRACT.md`` §1).

Files are recognised by their content (:func:`sniff`), never by their name alone:

========================  =====================================================================
format                    recognised by
========================  =====================================================================
``jmeter_csv``            a CSV header with ``timeStamp``, ``elapsed`` and ``label``
``jmeter_xml``            ``<testResults`` near the top
``gatling``               a tab-separated ``RUN`` record on the first line (2.x, 3.0-3.3, 3.4+)
``k6_csv``                a CSV header starting ``metric_name,timestamp,metric_value``
``k6_json``               NDJSON lines with ``"type": "Point"`` / ``"Metric"`` (k6 ``--out json``)
``locust``                a CSV header with ``Timestamp``, ``User Count``, ``Requests/s``
``sadf``                  ``# hostname;interval;timestamp;`` (``sadf -d`` and ``-dh``)
``pidstat``               a ``Linux … (host) date … (N CPU)`` banner and ``# Time … PID`` headers
``prometheus``            JSON: a ``query_range`` response, a bare ``result`` matrix, or an
                          object of such matrices keyed by query
``perfmon``               a CSV whose first header cell starts ``(PDH-CSV 4.0)``
========================  =====================================================================

Load-generator events (one row per request) are aggregated per interval into what a
performance team reads — throughput, error rate, mean and percentile response times, active
users — overall and per label (the labels with most requests, ``max_labels``). System
collectors keep their own samples. Names follow the collectors' conventions so that the
``validate.units`` table judges them (host-level counters carry the host's name as their
component; per-process ones the process's).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from pipelines.config import host_component

SAMPLE_COLUMNS = ["host", "counter", "ts", "value"]


class FormatError(ValueError):
    """A collector file that cannot be read as the format it claims: the message says where and why."""


@dataclass
class Parsed:
    """What one file gave: its samples, and facts about the hosts (``cores``) it states."""
    fmt: str
    samples: pd.DataFrame
    cores: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    load_generator: bool = False


# --------------------------------------------------------------------------- names


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
    """A host name in the identifier grammar (``DATA_CONTRACT`` §1), from what a collector wrote."""
    t = re.sub(r"[^A-Za-z0-9._-]+", "_", str(text).strip()).strip("._-") or "host"
    return t[:128]


def _samples(rows: list[pd.DataFrame]) -> pd.DataFrame:
    rows = [r for r in rows if len(r)]
    if not rows:
        return pd.DataFrame(columns=SAMPLE_COLUMNS)
    out = pd.concat(rows, ignore_index=True)[SAMPLE_COLUMNS]
    out["ts"] = out["ts"].astype(float)
    out["value"] = pd.to_numeric(out["value"], errors="coerce").astype(float)
    return out


def wide_to_samples(frame: pd.DataFrame, host: str, ts: pd.Series) -> pd.DataFrame:
    """One host's wide frame (a column per counter) as samples."""
    long = frame.assign(ts=ts.values).melt(id_vars="ts", var_name="counter", value_name="value")
    long.insert(0, "host", host)
    return long


# --------------------------------------------------------------------------- load generators


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
    return _samples(rows)


JMETER_COLUMNS = ["timeStamp", "elapsed", "label", "success", "allThreads", "Hostname"]


def read_jmeter_csv(path: Path, *, block_bytes: int = 64 << 20) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """A CSV JTL, streamed with pyarrow: events, active threads, and the load generator's host
    (the ``Hostname`` column when the writer saved it and it holds one value).

    Any column set JMeter writes is accepted as long as ``timeStamp``, ``elapsed``, ``label``
    and ``success`` are in it (``jmeter.save.saveservice.*``); rows come in completion order."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    with open(path, "rb") as fh:
        header = fh.readline().decode("utf-8", "replace").strip().split(",")
    missing = [c for c in ("timeStamp", "elapsed", "label", "success") if c not in header]
    if missing:
        raise FormatError(f"{path.name}: JMeter CSV without column(s) {missing} (header: {header[:8]})")
    wanted = [c for c in JMETER_COLUMNS if c in header]
    types = {"timeStamp": pa.int64(), "elapsed": pa.float64(), "label": pa.string(), "success": pa.string(),
             "allThreads": pa.float64(), "Hostname": pa.string()}
    ts_parts, el_parts, ok_parts, th_parts, label_codes = [], [], [], [], []
    labels: dict[str, int] = {}
    hosts: set[str] = set()
    try:
        reader = pacsv.open_csv(path, read_options=pacsv.ReadOptions(block_size=block_bytes),
                                convert_options=pacsv.ConvertOptions(
                                    include_columns=wanted, column_types={c: types[c] for c in wanted}))
        for batch in reader:
            ts_parts.append(batch.column("timeStamp").to_numpy(zero_copy_only=False))
            el_parts.append(batch.column("elapsed").to_numpy(zero_copy_only=False))
            ok_parts.append(np.asarray(batch.column("success").to_pylist(), dtype=object) == "true")
            if "allThreads" in wanted:
                th_parts.append(batch.column("allThreads").to_numpy(zero_copy_only=False))
            enc = batch.column("label").dictionary_encode()
            mapping = np.array([labels.setdefault(str(v), len(labels)) for v in enc.dictionary.to_pylist()],
                               dtype=np.int64)
            label_codes.append(mapping[enc.indices.to_numpy(zero_copy_only=False)])
            if "Hostname" in wanted:
                hosts.update(v for v in batch.column("Hostname").unique().to_pylist() if v)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise FormatError(f"{path.name}: not a readable JMeter CSV: {str(exc).splitlines()[0][:300]}") from exc
    if not ts_parts:
        raise FormatError(f"{path.name}: JMeter CSV with a header and no sample")
    names = [None] * len(labels)
    for k, v in labels.items():
        names[v] = k
    ts = np.concatenate(ts_parts) / 1000.0
    events = pd.DataFrame({"ts": ts, "elapsed_ms": np.concatenate(el_parts),
                           "label": pd.Categorical.from_codes(np.concatenate(label_codes), categories=names),
                           "ok": np.concatenate(ok_parts)})
    if events["ts"].isna().any() or events["elapsed_ms"].isna().any():
        raise FormatError(f"{path.name}: {int(events['ts'].isna().sum() + events['elapsed_ms'].isna().sum())} "
                          "row(s) without a timeStamp or elapsed value (a truncated or garbled file?)")
    users = pd.DataFrame({"ts": ts, "users": np.concatenate(th_parts)}) if th_parts else None
    return events, users, (hosts.pop() if len(hosts) == 1 else None)


def read_jmeter_xml(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """An XML JTL (``<testResults version="1.2">``), streamed: the top-level ``sample`` /
    ``httpSample`` elements (a transaction's nested samples belong to it, not counted again)."""
    import xml.etree.ElementTree as ET

    rows, hosts = [], set()
    depth = 0
    try:
        for event, elem in ET.iterparse(path, events=("start", "end")):
            if event == "start":
                depth += 1
                continue
            depth -= 1
            if depth == 1 and elem.tag in ("sample", "httpSample"):
                a = elem.attrib
                rows.append((float(a["ts"]) / 1000.0, float(a.get("t", "nan")), a.get("lb", ""),
                             a.get("s", "true") == "true", float(a.get("na", "nan"))))
                if a.get("hn"):
                    hosts.add(a["hn"])
            if depth <= 1:
                elem.clear()
    except ET.ParseError as exc:
        raise FormatError(f"{path.name}: not well-formed JMeter XML ({exc}); a truncated file?") from exc
    except (KeyError, ValueError) as exc:
        raise FormatError(f"{path.name}: a sample without a usable ts/t attribute ({exc})") from exc
    frame = pd.DataFrame(rows, columns=["ts", "elapsed_ms", "label", "ok", "users"])
    return frame[["ts", "elapsed_ms", "label", "ok"]], frame[["ts", "users"]], (hosts.pop() if len(hosts) == 1 else None)


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


def read_k6_csv(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """k6 ``--out csv``: ``http_req_duration`` rows are the requests (label: the ``name`` tag);
    a request failed when ``expected_response`` is ``false`` (k6 >= 0.31) or, in older files
    without that column, when its HTTP status is 0 or >= 400; ``vus`` rows give the users."""
    try:
        frame = pd.read_csv(path, dtype={"metric_name": str}, low_memory=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path.name}: not a readable k6 CSV: {exc}") from exc
    return _k6_events(frame, path.name)


def _k6_events(frame: pd.DataFrame, name: str) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    req = frame[frame["metric_name"] == "http_req_duration"]
    if req.empty:
        raise FormatError(f"{name}: no http_req_duration sample")
    ts = pd.to_numeric(req["timestamp"], errors="coerce")
    if ts.isna().any():
        raise FormatError(f"{name}: {int(ts.isna().sum())} http_req_duration row(s) without a numeric timestamp")
    if "expected_response" in req.columns and req["expected_response"].notna().any():
        ok = req["expected_response"].astype(str).str.lower().eq("true")
    else:
        status = pd.to_numeric(req.get("status"), errors="coerce").fillna(0)
        ok = (status > 0) & (status < 400)
    label = req["name"] if "name" in req.columns else req.get("url", "request")
    events = pd.DataFrame({"ts": ts.to_numpy(float), "elapsed_ms": pd.to_numeric(req["metric_value"]).to_numpy(float),
                           "label": label.astype(str).to_numpy(), "ok": ok.to_numpy(bool)})
    vus = frame[frame["metric_name"] == "vus"]
    users = pd.DataFrame({"ts": pd.to_numeric(vus["timestamp"]).to_numpy(float),
                          "users": pd.to_numeric(vus["metric_value"]).to_numpy(float)}) if len(vus) else None
    return events, users, None


def read_k6_json(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """k6 ``--out json`` (one JSON object per line; documented layout: ``{"type": "Point",
    "metric": …, "data": {"time": <RFC 3339>, "value": …, "tags": {…}}}``)."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise FormatError(f"{path.name}, line {number}: not JSON ({exc.msg}); a truncated file?") from exc
            if obj.get("type") != "Point":
                continue
            data = obj.get("data") or {}
            tags = data.get("tags") or {}
            rows.append({"metric_name": obj.get("metric"), "time": data.get("time"), "metric_value": data.get("value"),
                         "name": tags.get("name") or tags.get("url"), "status": tags.get("status"),
                         "expected_response": tags.get("expected_response")})
    frame = pd.DataFrame(rows)
    if frame.empty:
        raise FormatError(f"{path.name}: no k6 Point")
    stamp = pd.to_datetime(frame["time"], utc=True, format="ISO8601", errors="coerce")
    if stamp.isna().any():
        raise FormatError(f"{path.name}: {int(stamp.isna().sum())} point(s) without an RFC 3339 time")
    frame["timestamp"] = (stamp - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    return _k6_events(frame, path.name)


def read_locust(path: Path, *, component: str, host: str, percentiles: list[float],
                label_percentiles: list[float], max_labels: int) -> pd.DataFrame:
    """Locust ``--csv`` ``*_stats_history.csv``: already one row per second per name; the
    ``Aggregated`` rows give the overall counters, the others the per-name ones. ``N/A``
    (no request yet) is a missing sample."""
    try:
        frame = pd.read_csv(path, na_values=["N/A", ""], keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path.name}: not a readable Locust CSV: {exc}") from exc
    need = ["Timestamp", "User Count", "Name", "Requests/s", "Failures/s"]
    if any(c not in frame.columns for c in need):
        raise FormatError(f"{path.name}: a Locust stats history needs columns {need}")
    ts = pd.to_numeric(frame["Timestamp"], errors="coerce")
    if ts.isna().any():
        raise FormatError(f"{path.name}: {int(ts.isna().sum())} row(s) without a numeric Timestamp")
    rows = []
    names = frame.loc[frame["Name"] != "Aggregated", "Name"].value_counts().index[:max_labels]
    for name, group in frame.groupby("Name", sort=False):
        overall = name == "Aggregated"
        if not overall and name not in names:
            continue
        prefix = "" if overall else f"{slug(name, 40)}_"
        t = ts[group.index]
        rps = pd.to_numeric(group["Requests/s"], errors="coerce")
        cols = {f"{prefix}throughput_rps": rps,
                f"{prefix}error_rate_pct": 100.0 * pd.to_numeric(group["Failures/s"], errors="coerce") / rps.where(rps > 0),
                f"{prefix}response_time_ms": pd.to_numeric(group.get("Total Average Response Time"), errors="coerce")
                if "Total Average Response Time" in group else None}
        for q in (percentiles if overall else label_percentiles):
            column = f"{q:g}%"
            if column in group.columns:
                cols[f"{prefix}response_time_p{q:g}_ms"] = pd.to_numeric(group[column], errors="coerce")
        if overall:
            cols["active_users"] = pd.to_numeric(group["User Count"], errors="coerce")
        for cname, series in cols.items():
            if series is not None:
                rows.append(pd.DataFrame({"host": host, "counter": f"{component}.{cname}", "ts": t.to_numpy(float),
                                          "value": series.to_numpy(float)}))
    if not rows:
        raise FormatError(f"{path.name}: no row")
    return _samples(rows)


# --------------------------------------------------------------------------- system collectors


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
    return _samples(out), {}


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


def read_pidstat(path: Path, *, timezone: str | None) -> tuple[pd.DataFrame, dict[str, float]]:
    """``pidstat`` text (with or without ``-h``): per process (``Command``; several PIDs of one
    command are summed), host and CPU count from the banner. pidstat writes the local time of
    day without an offset, so the run's ``timezone`` must be given; an ambiguous or
    nonexistent local time (a DST change) is refused."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    lines = text.splitlines()
    banner = re.match(r"Linux\s+\S+\s+\(([^)]+)\)\s+(\S+)\s+\S+\s+\((\d+)\s+CPU\)", lines[0] if lines else "")
    if not banner:
        raise FormatError(f"{path.name}: no 'Linux <kernel> (<host>) <date> <arch> (<n> CPU)' banner")
    if not timezone:
        raise FormatError(f"{path.name}: pidstat writes local times without an offset; set `timezone` in "
                          "run.yaml (e.g. UTC or Europe/Paris), or run it with S_TIME_FORMAT=ISO")
    host, day, cores = host_name(banner.group(1)), banner.group(2), float(banner.group(3))
    date = pd.to_datetime(day, format="%m/%d/%y" if day.count("/") == 2 and len(day) == 8 else None, errors="coerce")
    if pd.isna(date):
        date = pd.to_datetime(day, errors="coerce")
    if pd.isna(date):
        raise FormatError(f"{path.name}: banner date {day!r} is not a date")
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
        ampm = len(parts) > 1 and parts[1] in ("AM", "PM")
        if ampm:
            parts = [f"{parts[0]} {parts[1]}"] + parts[2:]
        if len(parts) != len(header):
            raise FormatError(f"{path.name}, line {number}: {len(parts)} fields under a header of {len(header)} "
                              "(a truncated line?)")
        records.append(dict(zip(header, parts)))
    if not records:
        raise FormatError(f"{path.name}: no pidstat sample")
    frame = pd.DataFrame(records)
    clock = pd.to_datetime(date.strftime("%Y-%m-%d ") + frame["Time"], errors="coerce")
    if clock.isna().any():
        raise FormatError(f"{path.name}: time {frame['Time'][clock.isna()].iloc[0]!r} is not a time of day")
    # a run past midnight: the time of day goes back, the day moves on
    clock = clock + pd.to_timedelta((clock.diff().dt.total_seconds() < -43200).cumsum(), unit="D")
    try:
        local = clock.dt.tz_localize(timezone, ambiguous="raise", nonexistent="raise")
    except Exception as exc:  # noqa: BLE001 -- pytz/zoneinfo raise several types for the same two faults
        raise FormatError(f"{path.name}: local time not unique in {timezone} ({exc}); a DST change inside the "
                          "run: record with S_TIME_FORMAT=ISO or in UTC") from exc
    frame["ts"] = (local.dt.tz_convert("UTC") - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
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
    return _samples([samples]), {host: cores}


def read_prometheus(path: Path, *, name_hint: str, drop_port: bool = True) -> tuple[pd.DataFrame, dict[str, float]]:
    """Prometheus range data: a full ``/api/v1/query_range`` response, a bare ``result`` matrix
    (a list of ``{"metric", "values"}``), or an object of such matrices keyed by query.

    The host is the ``instance`` label (its port dropped); a ``node_*`` metric is host level
    (component: the host), any other series' component is its ``container``, ``job`` or
    ``name`` label. The counter is ``__name__`` (or, when the query dropped it, as ``rate()``
    does, the file's or the key's name), plus the labels that tell the series apart."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{path.name}: not JSON ({exc.msg} at line {exc.lineno}); a truncated file?") from exc
    matrices: list[tuple[str, list]] = []
    if isinstance(doc, dict) and "data" in doc:
        if doc.get("status") != "success":
            raise FormatError(f"{path.name}: a query_range response with status {doc.get('status')!r}: "
                              f"{doc.get('error', '')}")
        data = doc["data"]
        if data.get("resultType") != "matrix":
            raise FormatError(f"{path.name}: resultType {data.get('resultType')!r}, not a matrix (use query_range)")
        matrices.append((name_hint, data.get("result") or []))
    elif isinstance(doc, list):
        matrices.append((name_hint, doc))
    elif isinstance(doc, dict) and all(isinstance(v, list) for v in doc.values()):
        matrices.extend((str(k), v) for k, v in doc.items())
    else:
        raise FormatError(f"{path.name}: neither a query_range response nor a result matrix")
    out = []
    for query, series_list in matrices:
        if not series_list:
            continue
        labels = [s.get("metric") or {} for s in series_list if isinstance(s, dict)]
        varying = sorted({k for lab in labels for k in lab
                          if k not in ("__name__", "instance") and len({str(x.get(k)) for x in labels}) > 1})
        for s in series_list:
            if not isinstance(s, dict) or "values" not in s:
                raise FormatError(f"{path.name}: a series without 'values' (a vector, not a matrix?)")
            metric = s.get("metric") or {}
            instance = str(metric.get("instance", "prometheus"))
            host = host_name(instance.rsplit(":", 1)[0] if drop_port and ":" in instance else instance)
            base = metric.get("__name__") or query
            node = str(base).startswith("node_")
            component = host_component(host) if node else slug(metric.get("container") or metric.get("job") or
                                               metric.get("name") or host, 40)
            extra = "_".join(f"{slug(k, 20)}_{slug(metric[k], 30)}" for k in varying
                             if k in metric and k not in ("container", "job", "name"))
            counter = slug(base, 60) + (f"_{extra}" if extra else "")
            try:
                vals = np.asarray(s["values"], dtype=object)
                ts = vals[:, 0].astype(float)
                v = pd.to_numeric(pd.Series(vals[:, 1]), errors="coerce").to_numpy(float)
            except (IndexError, ValueError, TypeError) as exc:
                raise FormatError(f"{path.name}: values are not [timestamp, \"value\"] pairs ({exc})") from exc
            out.append(pd.DataFrame({"host": host, "counter": f"{component}.{counter}", "ts": ts, "value": v}))
    if not out:
        raise FormatError(f"{path.name}: an empty result")
    samples = _samples(out)
    # a job's series on several instances (``up`` of every target): the component names the host too,
    # since counter names are unique across a run's hosts (DATA_CONTRACT §1)
    owners = samples.groupby("counter")["host"].nunique()
    own = np.array([c.startswith(host_component(h) + ".") for h, c in zip(samples["host"], samples["counter"])],
                   dtype=bool)
    shared = samples["counter"].isin(owners[owners > 1].index).to_numpy() & ~own
    samples.loc[shared, "counter"] = samples.loc[shared, "host"].map(host_component) + "_" + \
        samples.loc[shared, "counter"]
    # one series per (host, counter): labels no series differs by are dropped, so two left are the same
    return samples.groupby(["host", "counter", "ts"], as_index=False)["value"].sum(min_count=1), {}


PDH = re.compile(r"^\(PDH-CSV 4\.0\) \((?P<zone>[^)]*)\)\((?P<bias>-?\d+)\)")
PERFMON_COLUMN = re.compile(r"^\\\\(?P<host>[^\\]+)\\(?P<object>[^\\(]+)(?:\((?P<instance>[^)]*)\))?\\(?P<counter>.+)$")
HOST_OBJECTS = {"processor", "memory", "physicaldisk", "logicaldisk", "network interface", "system",
                "paging file", "processor information", "tcpv4", "tcpv6", "cache", "server"}


def read_perfmon(path: Path, *, timezone: str | None) -> tuple[pd.DataFrame, dict[str, float]]:
    """Windows Performance Monitor CSV (``relog -f csv`` / ``typeperf -f CSV``): the first
    header cell ``(PDH-CSV 4.0) (<time zone>)(<bias minutes>)``, then one column per counter
    path ``\\\\HOST\\Object(instance)\\Counter`` (Microsoft's documented layout; no public
    sample with a licence exists, so the test file is written from that documentation).

    Times are local: ``timezone`` (run.yaml) when given, else the header's bias (UTC = local +
    bias). ``Process(<name>)`` columns become ``<name>.<counter>`` (per-process, 100 per core
    for ``% Processor Time``); host objects (Processor, Memory, PhysicalDisk, …) become
    ``<HOST>.<object>_<instance>_<counter>``. PerfMon's blank cell (``" "``) is a missing sample."""
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path.name}: not a readable PerfMon CSV: {exc}") from exc
    first = frame.columns[0]
    m = PDH.match(first)
    if not m:
        raise FormatError(f"{path.name}: the first header cell is not '(PDH-CSV 4.0) (<zone>)(<bias>)'")
    clock = pd.to_datetime(frame[first], format="%m/%d/%Y %H:%M:%S.%f", errors="coerce")
    if clock.isna().any():
        raise FormatError(f"{path.name}: time {frame[first][clock.isna()].iloc[0]!r} is not 'MM/DD/YYYY HH:MM:SS.fff'")
    if timezone:
        try:
            local = clock.dt.tz_localize(timezone, ambiguous="raise", nonexistent="raise")
        except Exception as exc:  # noqa: BLE001
            raise FormatError(f"{path.name}: local time not unique in {timezone} ({exc})") from exc
        epoch = (local.dt.tz_convert("UTC") - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    else:
        epoch = (clock - pd.Timestamp(0)).dt.total_seconds() + 60.0 * int(m.group("bias"))
    out = []
    for col in frame.columns[1:]:
        cm = PERFMON_COLUMN.match(col)
        if not cm:
            raise FormatError(f"{path.name}: column {col[:80]!r} is not \\\\HOST\\Object(instance)\\Counter")
        host = host_name(cm.group("host"))
        obj, inst, cnt = cm.group("object"), cm.group("instance"), cm.group("counter")
        if obj.lower() == "process" and inst:
            name = f"{slug(inst.split('#')[0] + ('_' + inst.split('#')[1] if '#' in inst else ''), 40)}.{slug(cnt)}"
        else:
            name = f"{host_component(host)}.{slug(obj, 30)}_{slug(inst, 20) + '_' if inst else ''}{slug(cnt)}"
        values = pd.to_numeric(frame[col].str.strip().replace("", np.nan), errors="coerce")
        out.append(pd.DataFrame({"host": host, "counter": name, "ts": epoch.to_numpy(float), "value": values.to_numpy()}))
    return _samples(out), {}


# --------------------------------------------------------------------------- recognising a file


def sniff(path: Path) -> str | None:
    """The format of one file, from its first bytes (``None``: not a collector file we read)."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    text = head.decode("utf-8", "replace").lstrip("\ufeff")
    first = text.split("\n", 1)[0].strip()
    if first.startswith('"(PDH-CSV 4.0)') or first.startswith("(PDH-CSV 4.0)"):
        return "perfmon"
    if first.startswith("RUN\t"):
        return "gatling"
    if first.startswith("# hostname;interval;timestamp"):
        return "sadf"
    if re.match(r"Linux\s+\S+\s+\([^)]+\)", first) and "PID" in text:
        return "pidstat"
    if "<testResults" in text[:500]:
        return "jmeter_xml"
    cols = [c.strip().strip('"') for c in first.split(",")]
    if cols[:3] == ["metric_name", "timestamp", "metric_value"]:
        return "k6_csv"
    if {"timeStamp", "elapsed", "label"} <= set(cols):
        return "jmeter_csv"
    if {"Timestamp", "User Count", "Requests/s"} <= set(cols):
        return "locust"
    if first.startswith("{") and '"type"' in first and ('"Point"' in first or '"Metric"' in first):
        return "k6_json"
    if first.startswith("{") or first.startswith("["):
        if '"metric"' in text or '"resultType"' in text or '"values"' in text:
            return "prometheus"
    return None


LOAD_GENERATORS = {"jmeter_csv": (read_jmeter_csv, "jmeter"), "jmeter_xml": (read_jmeter_xml, "jmeter"),
                   "gatling": (read_gatling, "gatling"), "k6_csv": (read_k6_csv, "k6"), "k6_json": (read_k6_json, "k6")}


def read_file(path: Path, fmt: str, *, host: str | None, timezone: str | None, interval_s: float,
              percentiles: list[float], label_percentiles: list[float], max_labels: int) -> Parsed:
    """One collector file of a known format as samples."""
    if fmt in LOAD_GENERATORS:
        reader, component = LOAD_GENERATORS[fmt]
        events, users, written_host = reader(path)
        lg_host = host or (host_name(written_host) if written_host else "loadgen")
        samples = aggregate_requests(events, component=component, host=lg_host, interval_s=interval_s,
                                     percentiles=percentiles, label_percentiles=label_percentiles,
                                     max_labels=max_labels, users=users)
        return Parsed(fmt, samples, load_generator=True,
                      notes=[f"{len(events)} requests, {events['label'].nunique()} labels"])
    if fmt == "locust":
        samples = read_locust(path, component="locust", host=host or "loadgen", percentiles=percentiles,
                              label_percentiles=label_percentiles, max_labels=max_labels)
        return Parsed(fmt, samples, load_generator=True)
    readers: dict[str, Callable[[], tuple[pd.DataFrame, dict[str, float]]]] = {
        "sadf": lambda: read_sadf(path),
        "pidstat": lambda: read_pidstat(path, timezone=timezone),
        "prometheus": lambda: read_prometheus(path, name_hint=path.name.split(".")[0]),
        "perfmon": lambda: read_perfmon(path, timezone=timezone),
    }
    samples, cores = readers[fmt]()
    return Parsed(fmt, samples, cores=cores)
