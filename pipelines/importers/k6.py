"""k6 results: ``--out csv`` and ``--out json`` (NDJSON points).  A request fails when
``expected_response`` is false (or, in older files, its HTTP status is 0 or at least 400);
``vus`` gives the active users.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from pipelines.importers.common import FormatError


def read_k6_csv(path: Path) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    """k6 ``--out csv``: ``http_req_duration`` rows are the requests (label: the ``name`` tag);
    a request failed when ``expected_response`` is ``false`` (k6 >= 0.31) or, in older files
    without that column, when its HTTP status is 0 or >= 400; ``vus`` rows give the users."""
    try:
        frame = pd.read_csv(path, dtype={"metric_name": str, "timestamp": str}, low_memory=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise FormatError(f"{path.name}: not a readable k6 CSV: {exc}") from exc
    return _k6_events(frame, path.name)


UNIX_SCALES = ((1e17, 1e-9), (1e14, 1e-6), (1e11, 1e-3))   # nano, micro, milli: by magnitude (any date after 1973)


def epoch_seconds(stamps: pd.Series, name: str) -> pd.Series:
    """k6's CSV ``timestamp`` in seconds, whatever its ``timeFormat`` (k6 docs, results output,
    CSV options: ``unix`` (the default), ``unix_milli``, ``unix_micro``, ``unix_nano``,
    ``rfc3339``, ``rfc3339_nano``): numbers are scaled by their magnitude, text is parsed as
    RFC 3339."""
    numbers = pd.to_numeric(stamps, errors="coerce")
    if numbers.notna().all():
        size = float(numbers.abs().median()) if len(numbers) else 0.0
        scale = next((s for bound, s in UNIX_SCALES if size >= bound), 1.0)
        return numbers.astype(float) * scale
    parsed = pd.to_datetime(stamps, utc=True, format="ISO8601", errors="coerce")
    if parsed.isna().any():
        bad = stamps[parsed.isna()].iloc[0]
        raise FormatError(f"{name}: timestamp {str(bad)[:40]!r} is neither a unix time nor RFC 3339 "
                          "(k6's timeFormat: unix, unix_milli, unix_micro, unix_nano, rfc3339, rfc3339_nano)")
    return (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds()


def _k6_events(frame: pd.DataFrame, name: str) -> tuple[pd.DataFrame, pd.DataFrame, str | None]:
    req = frame[frame["metric_name"] == "http_req_duration"]
    if req.empty:
        raise FormatError(f"{name}: no http_req_duration sample")
    ts = epoch_seconds(req["timestamp"], name)
    if "expected_response" in req.columns and req["expected_response"].notna().any():
        ok = req["expected_response"].astype(str).str.lower().eq("true")
    else:
        status = pd.to_numeric(req.get("status"), errors="coerce").fillna(0)
        ok = (status > 0) & (status < 400)
    label = req["name"] if "name" in req.columns else req.get("url", "request")
    events = pd.DataFrame({"ts": ts.to_numpy(float), "elapsed_ms": pd.to_numeric(req["metric_value"]).to_numpy(float),
                           "label": label.astype(str).to_numpy(), "ok": ok.to_numpy(bool)})
    vus = frame[frame["metric_name"] == "vus"]
    users = pd.DataFrame({"ts": epoch_seconds(vus["timestamp"], name).to_numpy(float),
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

