"""Which collector wrote a file, and its reader: the files of a run directory, recognised by content.

Each reader (one module per tool in this package) turns one collector file into *samples*: a
long frame ``host, counter, ts, value`` (:mod:`pipelines.importers.common`).
:mod:`pipelines.importers.run_directory` gathers the samples of a run directory into a contract
archive (contract §1).

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
``sadf``                  ``# hostname;interval;timestamp;`` (``sadf -d``, ``-dh``, ``-dU``)
``sadf_json``             a JSON document opening ``{"sysstat":`` (``sadf -j``)
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

import contextlib
import gzip
import re
import tempfile
import zlib
from pathlib import Path
from typing import Callable, Iterator

import pandas as pd

from pipelines.importers.common import Aggregation, FormatError, Parsed, aggregate_requests, host_name
from pipelines.importers.gatling import is_binary_log, read_gatling, read_gatling_binary
from pipelines.importers.jmeter import header_delimiter, read_jmeter_csv, read_jmeter_xml
from pipelines.importers.k6 import read_k6_csv, read_k6_json
from pipelines.importers.locust import read_locust
from pipelines.importers.perfmon import read_perfmon
from pipelines.importers.prometheus import read_prometheus
from pipelines.importers.sysstat import read_pidstat, read_sadf, read_sadf_json


GZIP_MAGIC = b"\x1f\x8b"


@contextlib.contextmanager
def plain_file(path: Path, *, max_bytes: int) -> Iterator[tuple[Path | None, str | None]]:
    """``(path, None)`` for a plain file; for a gzip file (``k6 --out csv=x.csv.gz``, a collector's
    rotated ``.gz``), ``(a decompressed copy, None)`` in a temporary directory, named as the file
    without ``.gz``, removed on exit; ``(None, why)`` for a gzip file that does not decompress.
    Decompression stops past ``max_bytes``: a FormatError (a decompression bomb, or a file larger
    than a collector file may be).  The raw file is never changed."""
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic != GZIP_MAGIC:
        yield path, None
        return
    with tempfile.TemporaryDirectory(prefix="regresslab-gz-") as tmp:
        name = path.name[:-3] if path.name.endswith(".gz") and len(path.name) > 3 else path.name + ".plain"
        out, why, copied = Path(tmp) / name, None, 0
        try:
            with gzip.open(path, "rb") as src, open(out, "wb") as dst:
                while chunk := src.read(1 << 20):
                    copied += len(chunk)
                    if copied > max_bytes:
                        raise FormatError(f"{path.name}: decompresses to more than {max_bytes:,} bytes")
                    dst.write(chunk)
        except (OSError, EOFError, zlib.error) as exc:
            why = f"a gzip file that does not decompress ({exc})"
        yield (None, why) if why else (out, None)


def sniff(path: Path) -> str | None:
    """The format of one file, from its first bytes (``None``: not a collector file we read)."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if is_binary_log(head):
        return "gatling_binary"
    text = head.decode("utf-8", "replace").lstrip("\ufeff").lstrip("\r\n")     # blank lines before a header
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
    if {"timeStamp", "elapsed", "label"} <= set(cols) or header_delimiter(first):
        return "jmeter_csv"
    if {"Timestamp", "User Count", "Requests/s"} <= set(cols):
        return "locust"
    if first.startswith("{") and '"sysstat"' in text[:200]:
        return "sadf_json"
    if first.startswith("{") and '"type"' in first and ('"Point"' in first or '"Metric"' in first):
        return "k6_json"
    if first.startswith("{") or first.startswith("["):
        if '"metric"' in text or '"resultType"' in text or '"values"' in text:
            return "prometheus"
    return None


def unread_reason(path: Path) -> str:
    """Why a file :func:`sniff` does not recognise is not read: what a user of the tool that
    wrote it needs to know, or the general reason."""
    if path.name.endswith("simulation.log"):
        return ("a simulation.log that is neither Gatling's text log (3.11 and earlier: a RUN record first) nor "
                "its binary log (3.12 and later: a Run record, then the Gatling version): not read")
    return "not a collector file regresslab reads"


# the formats whose rows are requests, and the component of the counters aggregated from them
LOAD_GENERATORS = {"jmeter_csv": "jmeter", "jmeter_xml": "jmeter", "gatling": "gatling", "gatling_binary": "gatling",
                   "k6_csv": "k6", "k6_json": "k6"}


def read_file(path: Path, fmt: str, *, host: str | None, timezone: str | None, aggregation: Aggregation,
              timestamp_format: str | None = None) -> Parsed:
    """One collector file of a known format as samples (``aggregation``: how a load generator's
    requests are summed up; ``timestamp_format``: a JMeter JTL's
    ``jmeter.save.saveservice.timestamp_format``, when it is a date pattern).

    Whatever is wrong with the file, the caller gets a :class:`FormatError` naming it: the
    readers raise their own, specific ones where they check; a damaged file that trips a parser
    elsewhere (a cut in a UTF-8 sequence, an empty file, a value of the wrong type) gets the
    parser's words, prefixed with the file and the format it was read as."""
    try:
        return _read_file(path, fmt, host=host, timezone=timezone, aggregation=aggregation,
                          timestamp_format=timestamp_format)
    except FormatError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, AttributeError, ArithmeticError, UnicodeError,
            EOFError) as exc:
        words = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise FormatError(f"{path.name}: not readable as {fmt} ({type(exc).__name__}{': ' + words if words else ''}); "
                          "a truncated or damaged file?") from exc


def _read_file(path: Path, fmt: str, *, host: str | None, timezone: str | None, aggregation: Aggregation,
               timestamp_format: str | None) -> Parsed:
    interval_s, percentiles = aggregation.interval_s, aggregation.percentiles
    label_percentiles, max_labels = aggregation.label_percentiles, aggregation.max_labels
    if fmt in LOAD_GENERATORS:
        requests: dict[str, Callable[[], tuple[pd.DataFrame, pd.DataFrame | None, str | None]]] = {
            "jmeter_csv": lambda: read_jmeter_csv(path, timezone=timezone, timestamp_format=timestamp_format),
            "jmeter_xml": lambda: read_jmeter_xml(path),
            "gatling": lambda: read_gatling(path),
            "gatling_binary": lambda: read_gatling_binary(path),
            "k6_csv": lambda: read_k6_csv(path),
            "k6_json": lambda: read_k6_json(path),
        }
        events, users, written_host = requests[fmt]()
        lg_host = host or (host_name(written_host) if written_host else "loadgen")
        samples = aggregate_requests(events, component=LOAD_GENERATORS[fmt], host=lg_host, interval_s=interval_s,
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
        "sadf_json": lambda: read_sadf_json(path, timezone=timezone),
        "pidstat": lambda: read_pidstat(path, timezone=timezone),
        "prometheus": lambda: read_prometheus(path, name_hint=path.name.split(".")[0]),
        "perfmon": lambda: read_perfmon(path, timezone=timezone),
    }
    samples, cores = readers[fmt]()
    return Parsed(fmt, samples, cores=cores)
