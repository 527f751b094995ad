"""Apache JMeter results: the CSV ``.jtl`` (any column set with ``timeStamp``, ``elapsed``,
``label`` and ``success``) and the XML ``.jtl`` (top-level samples only: a transaction's nested
``httpSample`` elements are part of it).  One row per request, aggregated by
:func:`pipelines.importers.common.aggregate_requests`.
"""
from __future__ import annotations

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


def header_delimiter(header_line: str) -> str | None:
    """The delimiter of a JTL's header line: the one of :data:`DELIMITERS` that splits it into
    JMeter's required columns (``jmeter.save.saveservice.default_delimiter``), or None."""
    for d in DELIMITERS:
        if all(c in [x.strip().strip('"') for x in header_line.split(d)] for c in REQUIRED):
            return d
    return None


def read_jmeter_csv(path: Path, *, block_bytes: int = 64 << 20) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """A CSV JTL, streamed with pyarrow: events, active threads, and the load generator's host
    (the ``Hostname`` column when the writer saved it and it holds one value).

    Any column set JMeter writes is accepted as long as ``timeStamp``, ``elapsed``, ``label``
    and ``success`` are in it (``jmeter.save.saveservice.*``); rows come in completion order."""
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
    types = {"timeStamp": pa.int64(), "elapsed": pa.float64(), "label": pa.string(), "success": pa.string(),
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
    if keep_parts:
        events = events[np.concatenate(keep_parts)].reset_index(drop=True)
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

