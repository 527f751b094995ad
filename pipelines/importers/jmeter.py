"""Apache JMeter results: the CSV ``.jtl`` (any column set with ``timeStamp``, ``elapsed``,
``label`` and ``success``) and the XML ``.jtl`` (top-level samples only: a transaction's nested
``httpSample`` elements are part of it).  One row per request, aggregated by
:func:`pipelines.importers.common.aggregate_requests`.
"""
from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pandas as pd

from pipelines.importers.common import FormatError

JMETER_COLUMNS = ["timeStamp", "elapsed", "label", "success", "allThreads", "Hostname", "responseMessage"]
# a Transaction Controller without "Generate parent sample" writes, after its children, a row of
# its own whose responseMessage is this (JMeter's TransactionController): counting it as a request
# would count every child twice
TRANSACTION_ROW = "Number of samples in transaction"
REQUIRED = ("timeStamp", "elapsed", "label", "success")
DELIMITERS = (",", ";", "\t", "|")      # jmeter.save.saveservice.default_delimiter: "," unless set
# jmeter.save.saveservice.timestamp_format: "ms" (epoch milliseconds, the default) or a
# java.text.SimpleDateFormat pattern, written in the JVM's local time.  The pattern letters
# regresslab translates, and the year-first forms it recognises without being told the pattern.
SIMPLE_DATE_FORMAT = (("yyyy", "%Y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"), ("mm", "%M"), ("ss", "%S"),
                      ("SSS", "%f"))
YEAR_FIRST = re.compile(r"^\d{4}[-/.]\d{2}[-/.]\d{2}[ T]\d{2}:\d{2}:\d{2}([.,]\d{1,6})?$")


def header_delimiter(header_line: str) -> str | None:
    """The delimiter of a JTL's header line: the one of :data:`DELIMITERS` that splits it into
    JMeter's required columns (``jmeter.save.saveservice.default_delimiter``), or None."""
    for d in DELIMITERS:
        if all(c in [x.strip().strip('"') for x in header_line.split(d)] for c in REQUIRED):
            return d
    return None


def read_jmeter_csv(path: Path, *, block_bytes: int = 64 << 20, timezone: str | None = None,
                    timestamp_format: str | None = None) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """A CSV JTL, streamed with pyarrow: events, active threads, and the load generator's host
    (the ``Hostname`` column when the writer saved it and it holds one value).

    Any column set JMeter writes is accepted as long as ``timeStamp``, ``elapsed``, ``label``
    and ``success`` are in it (``jmeter.save.saveservice.*``, JMeter 5.6 user manual, "Listeners",
    CSV log format); rows come in completion order.  A ``timeStamp`` written with
    ``jmeter.save.saveservice.timestamp_format`` set to a date pattern is a local time: read with
    the run's ``timezone`` and the pattern (``timestamp_format`` in run.yaml, the property's value;
    year-first forms such as ``yyyy/MM/dd HH:mm:ss.SSS`` are recognised without it)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    with open(path, "rb") as fh:
        line = fh.readline().decode("utf-8", "replace").strip()
    delimiter = header_delimiter(line) or ","
    header = line.split(delimiter)
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise FormatError(f"{path.name}: JMeter CSV without column(s) {missing} (header: {header[:8]}; "
                          f"delimiters tried: {' '.join(repr(d) for d in DELIMITERS)})")
    wanted = [c for c in JMETER_COLUMNS if c in header]
    stamp_format = date_pattern(path, delimiter, timezone, timestamp_format)
    types = {"timeStamp": pa.int64() if stamp_format is None else pa.string(), "elapsed": pa.float64(),
             "label": pa.string(), "success": pa.string(),
             "allThreads": pa.float64(), "Hostname": pa.string(), "responseMessage": pa.string()}
    ts_parts, el_parts, ok_parts, th_parts, label_codes, keep_parts = [], [], [], [], [], []
    labels: dict[str, int] = {}
    hosts: set[str] = set()
    try:
        # a quoted value may hold a newline (a multi-line failureMessage): parsed as one value
        reader = pacsv.open_csv(path, read_options=pacsv.ReadOptions(block_size=block_bytes),
                                parse_options=pacsv.ParseOptions(delimiter=delimiter, newlines_in_values=True),
                                convert_options=pacsv.ConvertOptions(
                                    include_columns=wanted, column_types={c: types[c] for c in wanted}))
        for batch in reader:
            stamps = batch.column("timeStamp")
            ts_parts.append(stamps.to_numpy(zero_copy_only=False) if stamp_format is None
                            else local_epoch_ms(path, stamps.to_pandas(), stamp_format, timezone))
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
            if "responseMessage" in wanted:             # per distinct message, not per row
                msg = batch.column("responseMessage").dictionary_encode()
                parent = np.array([str(v or "").startswith(TRANSACTION_ROW) for v in msg.dictionary.to_pylist()],
                                  dtype=bool)
                codes = msg.indices.to_numpy(zero_copy_only=False)
                keep_parts.append(~parent[np.where(np.isnan(codes.astype(float)), 0, codes).astype(int)]
                                  if parent.size else np.ones(len(codes), dtype=bool))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise FormatError(f"{path.name}: not a readable JMeter CSV: {str(exc).splitlines()[0][:300]}") from exc
    if not ts_parts:
        raise FormatError(f"{path.name}: JMeter CSV with a header and no sample")
    names: list[str | None] = [None] * len(labels)
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
    if keep_parts:
        events = events[np.concatenate(keep_parts)].reset_index(drop=True)
    return events, users, (hosts.pop() if len(hosts) == 1 else None)


def first_timestamp(path: Path, delimiter: str) -> str | None:
    """The ``timeStamp`` of the first sample row (None: no row)."""
    with open(path, newline="", encoding="utf-8", errors="replace") as fh:
        rows = csv.reader(fh, delimiter=delimiter)
        header = [h.strip() for h in next(rows, [])]
        row = next(rows, None)
    if row is None or "timeStamp" not in header or len(row) <= header.index("timeStamp"):
        return None
    return row[header.index("timeStamp")].strip()


def date_pattern(path: Path, delimiter: str, timezone: str | None, timestamp_format: str | None) -> str | None:
    """The strptime format of a JTL whose ``timeStamp`` is a date (None: epoch milliseconds)."""
    first = first_timestamp(path, delimiter)
    if first is None or first.isdigit():
        return None
    if timestamp_format:
        fmt = timestamp_format
        for java, c in SIMPLE_DATE_FORMAT:
            fmt = fmt.replace(java, c)
        if re.search(r"[A-Za-z]", re.sub(r"%[YmdHMSf]", "", fmt).replace("T", "")):
            raise FormatError(f"{path.name}: timestamp_format {timestamp_format!r} uses pattern letters other than "
                              "yyyy MM dd HH mm ss SSS; set jmeter.save.saveservice.timestamp_format=ms in "
                              "user.properties for epoch milliseconds")
    elif YEAR_FIRST.match(first):
        sep_date, sep_time = first[4], first[10]
        fraction = "" if len(first) == 19 else first[19] + "%f"
        fmt = f"%Y{sep_date}%m{sep_date}%d{sep_time}%H:%M:%S{fraction}"
    else:
        raise FormatError(f"{path.name}: timeStamp {first[:40]!r} is neither epoch milliseconds nor a year-first "
                          "date; set `timestamp_format` in run.yaml to the value of "
                          "jmeter.save.saveservice.timestamp_format, or set that property to ms")
    if not timezone:
        raise FormatError(f"{path.name}: timeStamp {first[:40]!r} is a local time (jmeter.save.saveservice."
                          "timestamp_format set to a date); set `timezone` in run.yaml (e.g. Europe/Berlin), "
                          "or set the property to ms (epoch milliseconds)")
    return fmt


def local_epoch_ms(path: Path, stamps: pd.Series, fmt: str, timezone: str | None) -> np.ndarray:
    """Epoch milliseconds of local date strings; one that does not parse, or a local time a DST
    change makes ambiguous, is refused."""
    clock = pd.to_datetime(stamps.str.strip().str.replace(",", ".", regex=False), format=fmt.replace(",", "."),
                           errors="coerce")
    if clock.isna().any():
        raise FormatError(f"{path.name}: timeStamp {str(stamps[clock.isna()].iloc[0])[:40]!r} does not match "
                          f"{fmt!r}")
    try:
        local = clock.dt.tz_localize(timezone, ambiguous="raise", nonexistent="raise")
    except Exception as exc:  # noqa: BLE001 -- zoneinfo and pytz raise several types for the same two faults
        raise FormatError(f"{path.name}: a local timeStamp is not unique in {timezone} ({exc}); a DST change "
                          "inside the run: set jmeter.save.saveservice.timestamp_format=ms") from exc
    return ((local.dt.tz_convert("UTC") - pd.Timestamp(0, tz="UTC")).dt.total_seconds() * 1000.0).to_numpy(float)


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

