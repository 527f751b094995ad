"""validate: check every pulled archive against the data contract with Great Expectations.

Three suites run per archive (``DATA_CONTRACT.md`` §1):

* ``run_meta``: ``run.json`` flattened to one row — required fields, types, the
  run_id rule, a parseable ``started_at``, a plausible ``duration_s``;
* ``host_coverage``: one row per host — minimum samples in the load phase and the
  share of the planned duration its samples cover;
* ``counter_values``: every cell of every counter CSV in long form — parseable,
  strictly increasing timestamps per host, numeric values, percentages within
  their range, non-negative rates, sizes and counts.

Python only derives the columns that the expectations check (a parsed timestamp,
the step between samples, whether a cell parsed as a number); every verdict is
Great Expectations'.  A valid run goes to ``data/interim/valid/<run_id>/`` as one
Parquet file per host; an invalid one is quarantined under
``data/quarantine/<run_id>.json`` with the failed expectations; its archive stays in
``data/raw`` untouched.  GX Data Docs are written to ``reports/validation/``.
Results are cached per (run_id, archive sha256, suite version), so a night with one
new archive validates one archive.
"""
from __future__ import annotations

import collections
import hashlib
import json
import logging
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from pipelines import archive, config, ingest, locks, triage
from pipelines.progress import Progress

log = logging.getLogger("regresslab.validate")

SUITE_VERSION = 4   # bump when an expectation changes: every archive is validated again
REQUIRED_FIELDS = ("schema_version", "run_id", "system", "version", "started_at", "duration_s",
                   "workload", "environment", "verdict", "cause")


# --------------------------------------------------------------------------- pure core


def parse_timestamps(raw: pd.Series) -> pd.Series:
    """Epoch seconds (float) from ISO-8601-with-offset strings or epoch numbers; NaN when unparseable."""
    if pd.api.types.is_numeric_dtype(raw):
        return raw.astype(float)
    as_num = pd.to_numeric(raw, errors="coerce")
    if as_num.notna().all():
        return as_num.astype(float)
    parsed = pd.to_datetime(raw, errors="coerce", utc=True, format="ISO8601")
    out = (parsed - pd.Timestamp(0, tz="UTC")).dt.total_seconds()
    # an ISO string without an offset is ambiguous: the contract asks for one
    has_offset = raw.astype(str).str.contains(r"(?:Z|[+-]\d\d:?\d\d)$", regex=True)
    return out.where(has_offset)


def parse_started_at(value: Any) -> float | None:
    """Epoch seconds of ``started_at``: an ISO-8601 string with its offset (DATA_CONTRACT §1), never
    a number or a string of digits (``"1790000000"`` is not a date; sorting runs by it broke
    every later stage)."""
    if not isinstance(value, str) or not re.match(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}", value):
        return None
    ts = parse_timestamps(pd.Series([value]))
    return None if pd.isna(ts.iloc[0]) else float(ts.iloc[0])


def meta_frame(meta: dict[str, Any], *, archive_run_id: str, counters: set[str],
               dropped: set[str] = frozenset()) -> pd.DataFrame:
    """``run.json`` as one row, with derived columns for the checks that need Python to see types."""
    row: dict[str, Any] = {f: meta.get(f) for f in REQUIRED_FIELDS if f in meta}
    for key in ("workload", "environment", "baseline", "regressed_counters"):
        row.pop(key, None)
    for key in ("run_id", "system", "version", "started_at", "verdict", "cause"):
        if key in row and row[key] is not None and not isinstance(row[key], str):
            row[key] = repr(row[key])           # a non-string becomes a value no regex accepts
    workload = meta.get("workload")
    env = meta.get("environment")
    load_counter = workload.get("load_counter") if isinstance(workload, dict) else None
    row.update({
        "run_id_matches_archive": meta.get("run_id") == archive_run_id,
        # identifiers become file names: the contract's grammar, checked in Python (a regex
        # expectation's "$" would let a trailing newline through)
        "run_id_is_identifier": config.is_identifier(meta.get("run_id")),
        "system_is_identifier": config.is_identifier(meta.get("system")),
        "started_at_epoch": parse_started_at(meta.get("started_at")),
        "duration_is_number": isinstance(meta.get("duration_s"), (int, float))
        and not isinstance(meta.get("duration_s"), bool),
        "workload_is_object": isinstance(workload, dict) and isinstance(workload.get("profile"), str),
        "load_counter_recorded": load_counter is None or load_counter in counters,
        # the offered load is what normalisation scales by: without it the run is not comparable
        "load_counter_usable": load_counter is None or load_counter not in dropped,
        "dropped_counter_share": len(dropped) / len(counters) if counters else 0.0,
        "environment_is_flat_object": isinstance(env, dict)
        and all(isinstance(v, (str, int, float, bool)) or v is None for v in env.values()),
        "baseline_is_list_of_ids": "baseline" not in meta or (
            isinstance(meta["baseline"], list) and all(isinstance(b, str) for b in meta["baseline"])),
        "regressed_is_list_of_counters": "regressed_counters" not in meta or (
            isinstance(meta["regressed_counters"], list)
            and all(isinstance(c, str) for c in meta["regressed_counters"])),
    })
    if not row["duration_is_number"]:
        row["duration_s"] = None
    return pd.DataFrame([row])


def host_cores(environment: dict[str, Any] | None, host: str, *, cores_key: str) -> float | None:
    """The CPU count behind a per-process percentage on ``host`` (DATA_CONTRACT §1), from ``environment``.

    A key naming the host (``web01.cpu_cores``, ``web01_cpu_cores``) wins; otherwise the largest
    count any key gives (an environment often states the biggest machine's cores only, and a
    bound too low would drop good counters); ``None`` when no key gives one: no upper bound.
    ``cores_key`` is a regex that a key (after the host prefix) must fully match."""
    if not isinstance(environment, dict):
        return None
    own, anywhere = [], []
    for key, value in environment.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value) or value <= 0:
            continue
        key = str(key)
        for prefix in (f"{host}.", f"{host}_"):
            if key.startswith(prefix) and re.fullmatch(cores_key, key[len(prefix):]):
                own.append(float(value))
        tail = re.split(r"[._]", key, maxsplit=0)
        if any(re.fullmatch(cores_key, "_".join(tail[i:])) for i in range(len(tail))):
            anywhere.append(float(value))
    if own:
        return max(own)
    return max(anywhere) if anywhere else None


def counter_kind(counter: str, host: str, *, units: list[dict[str, str]], host_components: list[str]) -> str:
    """What a counter measures, by the first rule of ``units`` that matches it (``params.yaml``).

    A rule holds ``counter``, a regex fully matching the part after ``<component>.``, an
    optional ``scope`` (``host``: the component is the machine itself, i.e. the CSV's host name
    or one of ``host_components``; ``process``: any other component) and the ``kind``:
    ``share_pct`` (0-100), ``process_cpu_pct`` (0-100 x cores), ``nonneg`` (>= 0) or ``any``."""
    component, _, name = counter.partition(".")
    scope = "host" if component in (host, config.host_component(host)) or component.lower() in host_components \
        else "process"
    for rule in units:
        if rule.get("scope") not in (None, scope):
            continue
        if re.fullmatch(rule["counter"], name):
            return rule["kind"]
    return "any"


def kind_bounds(kind: str, cores: float | None, *, slack: float) -> tuple[float, float]:
    """The values possible for a counter kind: ``slack`` widens an upper bound (rounding, sampling)."""
    if kind == "share_pct":
        return 0.0, 100.0 * (1.0 + slack)
    if kind == "process_cpu_pct":
        return 0.0, (100.0 * cores * (1.0 + slack)) if cores else float("inf")
    if kind == "nonneg":
        return 0.0, float("inf")
    return float("-inf"), float("inf")


def _examples(values: pd.Series, limit: int = 5) -> str:
    return ", ".join(str(v)[:40] for v in values.head(limit).tolist())


SUMMARY_COLUMNS = ["host", "counter", "counter_name_ok", "kind", "lower_bound", "upper_bound", "samples",
                   "numeric_share", "finite_share", "in_range_share", "min_value", "max_value",
                   "non_numeric_examples", "out_of_range_examples"]
COUNTER_NAME = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.%/-]+")


def _shares(n_present: int, non_numeric: int, infinite: int, outside: int) -> dict[str, float]:
    if not n_present:
        return {"numeric_share": 1.0, "finite_share": 1.0, "in_range_share": 1.0}
    return {"numeric_share": 1.0 - non_numeric / n_present, "finite_share": 1.0 - infinite / n_present,
            "in_range_share": 1.0 - outside / n_present}


def _text_column_row(raw: pd.Series, low: float, high: float) -> dict[str, Any]:
    """The checks of one column pandas did not read as numbers (text cells among them)."""
    value = pd.to_numeric(raw, errors="coerce").astype(float)
    present = raw.notna() & (raw.astype(str).str.strip() != "")
    n_present = int(present.sum())
    non_numeric = present & value.isna()
    infinite = np.isinf(value)
    finite = value[np.isfinite(value)]
    outside = finite[(finite < low) | (finite > high)]
    return {"samples": n_present, **_shares(n_present, int(non_numeric.sum()), int(infinite.sum()), len(outside)),
            "min_value": float(finite.min()) if len(finite) else np.nan,
            "max_value": float(finite.max()) if len(finite) else np.nan,
            "non_numeric_examples": _examples(raw[non_numeric]),
            "out_of_range_examples": _examples(pd.concat([value[infinite], outside]))}


def _numeric_rows(values: np.ndarray, low: np.ndarray, high: np.ndarray) -> list[dict[str, Any]]:
    """:func:`_text_column_row` of every column of a numeric block at once (rows = samples):
    no cell is text, a missing sample is NaN.  The same figures, without a string per cell."""
    present = ~np.isnan(values)
    infinite = np.isinf(values)
    finite = present & ~infinite
    outside = finite & ((values < low) | (values > high))
    n_present, n_inf, n_out, n_finite = present.sum(0), infinite.sum(0), outside.sum(0), finite.sum(0)
    lo = np.where(finite, values, np.inf).min(0, initial=np.inf)
    hi = np.where(finite, values, -np.inf).max(0, initial=-np.inf)
    rows = []
    for j in range(values.shape[1]):
        examples = ""
        if n_inf[j] or n_out[j]:         # the infinite values first, then the out-of-range ones, as text
            col = values[:, j]
            examples = _examples(pd.Series(np.concatenate([col[infinite[:, j]], col[outside[:, j]]])))
        rows.append({"samples": int(n_present[j]), **_shares(int(n_present[j]), 0, int(n_inf[j]), int(n_out[j])),
                     "min_value": float(lo[j]) if n_finite[j] else np.nan,
                     "max_value": float(hi[j]) if n_finite[j] else np.nan,
                     "non_numeric_examples": "", "out_of_range_examples": examples})
    return rows


def counter_summary(frames: dict[str, pd.DataFrame], environment: dict[str, Any] | None, *,
                    units: list[dict[str, str]], host_components: list[str], cores_key: str,
                    slack: float) -> pd.DataFrame:
    """One row per (host, counter): its kind and bounds, and the shares of its samples that are
    numbers, finite and within the bounds, with example offending values; the ``counter_values``
    suite checks these shares, so a counter is judged alone (DATA_CONTRACT §1, "What is
    quarantined").  One row per counter, not per cell: the frame stays small at 2,000 counters
    over 8 hours.  The columns pandas read as numbers are checked together as one array
    (:func:`_numeric_rows`); only a column holding text is checked cell by cell
    (:func:`_text_column_row`): per column, that took 70 % of validating an archive."""
    rows = []
    for host, frame in frames.items():
        cores = host_cores(environment, host, cores_key=cores_key)
        heads, numeric, stats = [], [], {}
        for i, col in enumerate(frame.columns):
            if col == "timestamp":
                continue
            name = str(col)
            kind = counter_kind(name, host, units=units, host_components=host_components)
            low, high = kind_bounds(kind, cores, slack=slack)
            heads.append((i, {"host": host, "counter": name, "counter_name_ok": bool(COUNTER_NAME.fullmatch(name)),
                              "kind": kind, "lower_bound": low, "upper_bound": high}))
            raw = frame.iloc[:, i]
            if pd.api.types.is_numeric_dtype(raw.dtype):
                numeric.append(i)
            else:
                stats[i] = _text_column_row(raw, low, high)
        if numeric:
            bounds = {i: (h["lower_bound"], h["upper_bound"]) for i, h in heads}
            block = frame.iloc[:, numeric].to_numpy(dtype=float)
            stats.update(zip(numeric, _numeric_rows(block, np.array([bounds[i][0] for i in numeric]),
                                                    np.array([bounds[i][1] for i in numeric]))))
        rows += [{**head, **stats[i]} for i, head in heads]
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def host_coverage(frames: dict[str, pd.DataFrame], *, started_at: float | None, duration_s: float | None,
                  min_samples: int, min_coverage: float, min_samples_floor: int) -> pd.DataFrame:
    """Per host: its counters, its timestamps (parseable, strictly increasing), the samples inside
    the planned load phase, the share of it their span covers, and the samples it must have.

    The samples required follow the run's planned duration and the host's sampling period
    (issue 15): ``min(min_samples, floor(min_coverage x duration / period))``, never below
    ``min_samples_floor``; a 10-minute run sampled once a minute needs 9, not 10."""
    rows = []
    for host, frame in frames.items():
        if "timestamp" in frame.columns:
            ts = parse_timestamps(frame["timestamp"])
        else:
            ts = pd.Series(np.nan, index=frame.index)
        unparsed = ts.isna()
        step = ts.diff()
        backwards = step.notna() & (step <= 0)
        row = {"host": host, "counters": sum(1 for c in frame.columns if c != "timestamp"),
               "timestamp_column": "timestamp" in frame.columns,
               "ts_unparseable": int(unparsed.sum()), "ts_not_increasing": int(backwards.sum()),
               "ts_examples": _examples(frame["timestamp"][unparsed | backwards]) if "timestamp" in frame.columns
               else "no timestamp column",
               "load_samples": 0, "coverage": 0.0, "period_s": np.nan, "required_samples": min_samples}
        if started_at is not None and duration_s and duration_s > 0:
            end = started_at + duration_s
            inside = ts[(ts >= started_at) & (ts <= end)].dropna()
            if not inside.empty:
                period = float(np.nanmedian(np.diff(np.sort(inside.values)))) if len(inside) > 1 else 0.0
                # a sample covers the period before it (collectors average backwards), so the first
                # sample less than one period after the end still covers the phase's last seconds:
                # with one sample a minute, that sample is a tenth of a 10-minute run (issue 15)
                after = ts[(ts > end) & (ts < end + period)].dropna() if period > 0 else inside.iloc[:0]
                last = after.min() if not after.empty else inside.max()
                span = min(last, end) - max(inside.min() - period, started_at)
                row.update(load_samples=int(len(inside)), coverage=float(span / duration_s), period_s=period)
                if period > 0:
                    row["required_samples"] = max(min_samples_floor, min(
                        min_samples, int(np.floor(min_coverage * duration_s / period + 1e-9))))
        rows.append(row)
    return pd.DataFrame(rows)


def build_suites(*, min_coverage: float, max_duration_s: float, value_mostly: float,
                 max_dropped_share: float) -> dict[str, list]:
    """The three expectation suites; each expectation says what it guards.

    ``run_meta`` and ``host_coverage`` hold run-level faults: one quarantines the run.
    ``counter_values`` holds counter-level faults: a counter that fails one is dropped from the
    run's analysis with its reason (DATA_CONTRACT §1), and ``run_meta`` quarantines the run
    only when more than ``max_dropped_share`` of its counters went, or the load counter did."""
    import great_expectations.expectations as gxe

    meta = [gxe.ExpectColumnToExist(column=f) for f in  # schema: every field the contract requires
            ("schema_version", "run_id", "system", "version", "started_at", "duration_s", "verdict", "cause")]
    meta += [
        gxe.ExpectColumnValuesToBeInSet(column="schema_version", value_set=[1]),        # schema version we read
        gxe.ExpectColumnValuesToBeInSet(column="run_id_is_identifier", value_set=[True]),  # safe as a file name
        gxe.ExpectColumnValuesToBeInSet(column="run_id_matches_archive", value_set=[True]),  # id = archive stem
        gxe.ExpectColumnValuesToNotBeNull(column="system"),                              # runs compared per system
        gxe.ExpectColumnValuesToBeInSet(column="system_is_identifier", value_set=[True]),  # safe as a file name
        gxe.ExpectColumnValuesToNotBeNull(column="version"),
        gxe.ExpectColumnValuesToNotBeNull(column="started_at_epoch"),                    # ISO-8601 start, parseable
        gxe.ExpectColumnValuesToBeInSet(column="duration_is_number", value_set=[True]),  # units: seconds, a number
        gxe.ExpectColumnValuesToBeBetween(column="duration_s", min_value=1, max_value=max_duration_s),
        gxe.ExpectColumnValuesToBeInSet(column="workload_is_object", value_set=[True]),  # {"profile", "load_counter"}
        gxe.ExpectColumnValuesToBeInSet(column="load_counter_recorded", value_set=[True]),  # load counter exists
        gxe.ExpectColumnValuesToBeInSet(column="load_counter_usable", value_set=[True]),  # ... and was not dropped
        gxe.ExpectColumnValuesToBeInSet(column="environment_is_flat_object", value_set=[True]),  # flat env map
        gxe.ExpectColumnValuesToBeInSet(column="verdict", value_set=["pass", "fail"]),   # null allowed: a target
        gxe.ExpectColumnValuesToBeInSet(column="baseline_is_list_of_ids", value_set=[True]),
        gxe.ExpectColumnValuesToBeInSet(column="regressed_is_list_of_counters", value_set=[True]),
        gxe.ExpectColumnValuesToBeBetween(column="dropped_counter_share", max_value=max_dropped_share),  # enough left
    ]
    hosts = [
        gxe.ExpectTableRowCountToBeBetween(min_value=1),                                  # at least one machine
        gxe.ExpectColumnValuesToMatchRegex(column="host", regex=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z"),  # file stem
        gxe.ExpectColumnValuesToBeBetween(column="counters", min_value=1),                # each CSV has counters
        gxe.ExpectColumnValuesToBeInSet(column="timestamp_column", value_set=[True]),      # first column: timestamp
        gxe.ExpectColumnValuesToBeBetween(column="ts_unparseable", max_value=0),           # parseable timestamps
        gxe.ExpectColumnValuesToBeBetween(column="ts_not_increasing", max_value=0),        # strictly increasing
        gxe.ExpectColumnPairValuesAToBeGreaterThanB(column_A="load_samples", column_B="required_samples",
                                                    or_equal=True),                       # completeness
        gxe.ExpectColumnValuesToBeBetween(column="coverage", min_value=min_coverage),    # planned duration covered
    ]
    values = [
        gxe.ExpectColumnValuesToBeInSet(column="counter_name_ok", value_set=[True]),       # <component>.<counter>
        gxe.ExpectColumnValuesToBeBetween(column="numeric_share", min_value=value_mostly),  # numbers or empty cells
        gxe.ExpectColumnValuesToBeBetween(column="finite_share", min_value=value_mostly),   # inf is no measurement
        gxe.ExpectColumnValuesToBeBetween(column="in_range_share", min_value=value_mostly),  # units: percentages
    ]                                                                                      # in range, rates >= 0
    return {"run_meta": meta, "host_coverage": hosts, "counter_values": values}


def suites_from_params(params: dict[str, Any]) -> dict[str, list]:
    """:func:`build_suites` with the ``validate`` block of ``params.yaml``."""
    return build_suites(min_coverage=params["min_coverage"], max_duration_s=params["max_duration_s"],
                        value_mostly=params["value_mostly"], max_dropped_share=params["max_dropped_share"])


#: the columns that name the offending rows in each suite's results (GX ``unexpected_index_list``)
INDEX_COLUMNS = {"run_meta": [], "host_coverage": ["host"], "counter_values": ["host", "counter"]}

CHECK_WORDS = {
    "counter_name_ok": "name is not <component>.<counter>",
    "numeric_share": "values that are not numbers",
    "finite_share": "infinite values",
    "in_range_share": "values impossible for its unit",
}


def dropped_counters(summary: pd.DataFrame, failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The counters the ``counter_values`` suite failed, each with the checks, the host, the
    counter and example values: the run is analysed without them."""
    by_key: dict[tuple[str, str], list[str]] = {}
    for f in failures:
        column = f["kwargs"].get("column")
        for idx in f.get("unexpected_index_list") or []:
            by_key.setdefault((str(idx.get("host")), str(idx.get("counter"))), []).append(column)
    rows = summary.set_index(["host", "counter"])
    out = []
    for (host, counter), checks in sorted(by_key.items()):
        row = rows.loc[(host, counter)]
        parts = []
        for check in checks:
            words = CHECK_WORDS.get(check, check)
            if check == "numeric_share":
                words += f" ({1 - row['numeric_share']:.0%} of samples: {row['non_numeric_examples']})"
            elif check in ("finite_share", "in_range_share"):
                bound = (f"{row['kind']}, allowed {row['lower_bound']:g} to {row['upper_bound']:g}"
                         if check == "in_range_share" else "")
                share = 1 - row[check]
                words += f" ({bound + '; ' if bound else ''}{share:.0%} of samples: {row['out_of_range_examples']})"
            parts.append(words)
        out.append({"host": host, "counter": counter, "checks": checks,
                    "reason": f"host {host}, counter {counter}: " + "; ".join(parts)})
    return out


def describe_failure(f: dict[str, Any]) -> str:
    """One run-level failure as a sentence: the check, the column, the hosts and example values."""
    if f.get("reason"):
        return f["reason"]
    column = f["kwargs"].get("column") or ", ".join(
        str(f["kwargs"][k]) for k in ("column_A", "column_B") if k in f["kwargs"])
    text = f"{f['suite']}: {f['expectation']}({column})"
    where = [", ".join(f"{k}={v}" for k, v in idx.items()) for idx in (f.get("unexpected_index_list") or [])[:5]]
    if where:
        text += " failed for " + "; ".join(where)
    elif f.get("partial_unexpected_list"):
        text += " unexpected values: " + ", ".join(f["partial_unexpected_list"][:5])
    elif f.get("observed_value") is not None:
        text += f" observed {f['observed_value']}"
    return text


def failed_expectations(suite_name: str, result: Any) -> list[dict[str, Any]]:
    """The failed expectations of one GX validation result, in a JSON-ready form."""
    failed = []
    for r in result.results:
        if r.success:
            continue
        cfg = r.expectation_config
        res = r.result or {}
        failed.append({
            "suite": suite_name,
            "expectation": cfg.type,
            "kwargs": {k: v for k, v in cfg.kwargs.items() if k not in ("batch_id",)},
            "unexpected_count": res.get("unexpected_count"),
            "unexpected_percent": res.get("unexpected_percent"),
            "partial_unexpected_list": [str(v) for v in (res.get("partial_unexpected_list") or [])[:10]],
            # the rows that failed, by the suite's index columns (every counter, so it can be dropped)
            "unexpected_index_list": [{k: (v.item() if hasattr(v, "item") else v) for k, v in idx.items()}
                                      for idx in (res.get("unexpected_index_list") or [])
                                      if isinstance(idx, dict)],
            "observed_value": str(res.get("observed_value")) if "observed_value" in res else None,
            "exception": (r.exception_info or {}).get("exception_message") if isinstance(r.exception_info, dict)
            and r.exception_info.get("raised_exception") else None,
        })
    return failed


def valid_host_frames(frames: dict[str, pd.DataFrame], summary: pd.DataFrame | None = None,
                      dropped: list[dict[str, Any]] = ()) -> dict[str, pd.DataFrame]:
    """Host frames in the form later stages read: float ``ts`` column plus numeric counters.

    The dropped counters are left out; in the counters kept (``value_mostly`` < 1 tolerates a
    few), a value impossible for the counter's unit becomes a missing sample."""
    gone = {(d["host"], d["counter"]) for d in dropped}
    bounds = ({} if summary is None else
              {(r.host, r.counter): (r.lower_bound, r.upper_bound) for r in summary.itertuples()})
    out = {}
    for host, frame in frames.items():
        keep = [c for c in frame.columns if c != "timestamp" and (host, str(c)) not in gone]
        names = [str(c) for c in keep]
        values = np.empty((len(frame), len(keep)))            # one array: 2,000 counters, no per-column frames
        for j, c in enumerate(keep):
            col = frame[c]
            values[:, j] = (col.to_numpy(dtype=float) if pd.api.types.is_numeric_dtype(col)
                            else pd.to_numeric(col, errors="coerce").to_numpy(dtype=float, na_value=np.nan))
        low, high = np.array([bounds.get((host, n), (-np.inf, np.inf)) for n in names], dtype=float).reshape(-1, 2).T
        with np.errstate(invalid="ignore"):
            possible = np.isfinite(values) & (values >= low) & (values <= high)
        numeric = pd.DataFrame(np.where(possible, values, np.nan), columns=names)
        numeric.insert(0, "ts", parse_timestamps(frame["timestamp"]).values)
        out[host] = numeric
    return out


# --------------------------------------------------------------------------- GX runner


def result_format(suite_name: str) -> dict[str, Any]:
    """SUMMARY for the one-row ``run_meta``; COMPLETE with the index columns for the others, so
    every failing host and counter is named (the frames hold one row per host or counter)."""
    if not INDEX_COLUMNS.get(suite_name):
        return {"result_format": "SUMMARY", "partial_unexpected_count": 10}
    return {"result_format": "COMPLETE", "unexpected_index_column_names": INDEX_COLUMNS[suite_name],
            "partial_unexpected_count": 10}


class Validator:
    """A GX file context (results kept under ``data/interim/gx``) with the three suites.

    Results are stored as they come; :meth:`build_docs` renders the Data Docs site
    once at the end of the night (rendering after every archive is quadratic).
    """

    def __init__(self, suites: dict[str, list], *, project_dir: Path | None, docs_dir: Path | None):
        logging.getLogger("great_expectations").setLevel(logging.WARNING)
        import great_expectations as gx

        self.gx = gx
        if project_dir is None:
            self.context = gx.get_context(mode="ephemeral")
        else:
            project_dir.mkdir(parents=True, exist_ok=True)
            self.context = gx.get_context(mode="file", project_root_dir=str(project_dir))
        try:
            from great_expectations.data_context.types.base import ProgressBarsConfig

            self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        except Exception:  # progress bars are cosmetic; other GX versions may lack the knob
            pass
        self.docs = docs_dir is not None
        if docs_dir is not None:
            site = {
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend",
                                  "base_directory": str(docs_dir)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            }
            for name in list(self.context.get_site_names()):
                self.context.delete_data_docs_site(name)
            self.context.add_data_docs_site(site_name="regresslab", site_config=site)
        source = self.context.data_sources.add_or_update_pandas("regresslab")
        self.checkpoints = {}
        for name, expectations in suites.items():
            suite = self.context.suites.add_or_update(gx.ExpectationSuite(name=name, expectations=expectations))
            asset = source.add_dataframe_asset(name)
            batch = asset.add_batch_definition_whole_dataframe("whole")
            vd = self.context.validation_definitions.add_or_update(
                gx.ValidationDefinition(name=name, data=batch, suite=suite))
            self.checkpoints[name] = self.context.checkpoints.add_or_update(gx.Checkpoint(
                name=f"{name}_checkpoint", validation_definitions=[vd], actions=[],
                result_format=result_format(name)))

    def run(self, suite_name: str, frame: pd.DataFrame, run_id: str) -> list[dict[str, Any]]:
        result = self.checkpoints[suite_name].run(
            batch_parameters={"dataframe": frame},
            run_id=self.gx.RunIdentifier(run_name=f"{run_id}"))
        failed = []
        for vr in result.run_results.values():
            failed += failed_expectations(suite_name, vr)
        return failed

    def build_docs(self) -> None:
        if self.docs:
            self.context.build_data_docs(site_names=["regresslab"])


class Checked(NamedTuple):
    """What validating one archive found: the run, its host frames as read, the run-level
    failures (any quarantines the run), the counters dropped from it and the counter summary."""
    raw: archive.RawRun | None
    frames: dict[str, pd.DataFrame]
    failures: list[dict[str, Any]]
    dropped: list[dict[str, Any]]
    summary: pd.DataFrame | None


def validate_archive(path: Path, validator: Validator, params: dict[str, Any]) -> Checked:
    """Validate one archive; any fault of reading or interpreting it is a failure, never an exception."""
    try:
        return check_archive(path, validator, params)
    except archive.ArchiveError as exc:
        return Checked(None, {}, [{"suite": "archive", "expectation": "readable_safe_archive",
                                   "reason": str(exc)}], [], None)
    except (Exception, RecursionError, MemoryError) as exc:      # noqa: BLE001 -- any fault of one archive
        # raw data is immutable: an archive that breaks a reader would break every night; it is
        # quarantined with the fault named, and the night goes on (a fault of ours shows in the log)
        log.exception("could not read or interpret %s", path.name)
        return Checked(None, {}, [{"suite": "archive", "expectation": "readable_safe_archive",
                                   "reason": f"could not read or interpret the archive: {type(exc).__name__}: "
                                             f"{str(exc)[:300]}"}], [], None)


def check_archive(path: Path, validator: Validator, params: dict[str, Any]) -> Checked:
    """:func:`validate_archive` without the catch-all: read, parse and run the three suites.

    ``counter_values`` runs first: its failures drop counters, and ``run_meta`` then checks
    that enough of them (and the load counter) are left."""
    expected_id = archive.archive_stem(path) if path.is_file() else path.name
    raw = ingest.read_run(path, params["limits"], params.get("ingest") or {})
    archive.check_cells(raw.csv_bytes, params["limits"])
    frames = {h: archive.parse_counter_csv(b, h, params["limits"]) for h, b in sorted(raw.csv_bytes.items())}
    counts = collections.Counter(str(c) for f in frames.values() for c in f.columns if c != "timestamp")
    dupes = sorted(c for c, n in counts.items() if n > 1)
    failures: list[dict[str, Any]] = []
    if dupes:
        failures.append({"suite": "archive", "expectation": "unique_counter_names",
                         "reason": f"counter names repeated across hosts: {dupes[:10]}"})
    environment = raw.meta.get("environment") if isinstance(raw.meta, dict) else None
    summary = counter_summary(frames, environment, units=params["units"],
                              host_components=[c.lower() for c in params["host_components"]],
                              cores_key=params["cores_key"], slack=params["range_slack"])
    dropped = dropped_counters(summary, validator.run("counter_values", summary, expected_id))
    gone = {d["counter"] for d in dropped}
    meta = meta_frame(raw.meta, archive_run_id=expected_id, counters=set(counts), dropped=gone)
    failures += validator.run("run_meta", meta, expected_id)
    started = meta["started_at_epoch"].iloc[0]
    duration = meta["duration_s"].iloc[0] if meta["duration_is_number"].iloc[0] else None
    cover = host_coverage(frames, started_at=None if pd.isna(started) else float(started),
                          duration_s=None if duration is None or pd.isna(duration) else float(duration),
                          min_samples=params["min_samples_per_host"], min_coverage=params["min_coverage"],
                          min_samples_floor=params["min_samples_floor"])
    failures += validator.run("host_coverage", cover, expected_id)
    return Checked(raw, frames, failures, dropped, summary)


def clean_stale(valid_dir: Path, max_age_s: float = 3600.0) -> None:
    """Remove the temporary run directories (``.<run_id>.*.tmp`` / ``.old``) of a validate that died
    more than ``max_age_s`` ago (a live one renames its own within seconds)."""
    now = time.time()
    for p in list(valid_dir.glob(".*.tmp")) + list(valid_dir.glob(".*.old")):
        if p.is_dir() and now - p.stat().st_mtime > max_age_s:
            shutil.rmtree(p, ignore_errors=True)


def cache_key(sha256: str, params: dict[str, Any]) -> str:
    blob = json.dumps({"sha": sha256, "suite": SUITE_VERSION, "params": params}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


@locks.holding("validate")
def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    params = config.load_params("validate")
    params["ingest"] = config.load_params("ingest")      # run directories are converted when read
    manifest = archive.read_manifest()
    config.VALID.mkdir(parents=True, exist_ok=True)
    config.QUARANTINE.mkdir(parents=True, exist_ok=True)
    validator: Validator | None = None       # Great Expectations' context costs seconds: made when first needed
    clean_stale(config.VALID)
    index: dict[str, Any] = {}
    quarantined: dict[str, Any] = {}
    done = n_dropped = 0
    todo = sorted(manifest.values(), key=lambda e: e.run_id)
    progress = Progress(log, "validate", len(todo), what="archives", every=10)
    for i, entry in enumerate(todo, 1):
        if not config.is_identifier(entry.run_id):    # pulled before the grammar was enforced: no file of it
            quarantined[entry.run_id] = "run_id is not an identifier ([A-Za-z0-9][A-Za-z0-9._-]{0,127}); not analysed"
            log.warning("skipped %r: run_id outside the identifier grammar", entry.run_id[:80])
            continue
        key = cache_key(entry.sha256, params)
        run_dir = config.valid_dir(entry.run_id)
        q_path = config.quarantine_path(entry.run_id)
        marker = run_dir / "meta.json"
        if marker.exists() and archive.read_json(marker).get("_validation_key") == key:
            index[entry.run_id] = _index_row(archive.read_json(marker))
            continue
        if q_path.exists() and archive.read_json(q_path).get("validation_key") == key:
            quarantined[entry.run_id] = archive.read_json(q_path)["reason"]
            continue
        if validator is None:
            validator = Validator(suites_from_params(params), project_dir=config.GX, docs_dir=config.VALIDATION_DOCS)
        checked = validate_archive(config.RAW / entry.file, validator, params)
        raw, frames, failures, dropped = checked.raw, checked.frames, checked.failures, checked.dropped
        done += 1
        if failures:
            reason = quarantine_reason(failures, dropped)
            archive.write_json_atomic(q_path, {"run_id": entry.run_id, "archive": f"data/raw/{entry.file}",
                                               "sha256": entry.sha256, "reason": reason,
                                               "failed_expectations": failures, "dropped_counters": dropped,
                                               "validation_key": key})
            if run_dir.exists():
                shutil.rmtree(run_dir)
            quarantined[entry.run_id] = reason
            log.warning("quarantined %s: %s", entry.run_id, reason[:300])
        else:
            # a directory of this process's own name, swapped in by renames: a run killed at any
            # point leaves either the old or the new run directory (or none: validated again)
            tmp_dir = Path(tempfile.mkdtemp(prefix=f".{entry.run_id}.", suffix=".tmp", dir=config.VALID))
            for host, frame in valid_host_frames(frames, checked.summary, dropped).items():
                archive.write_parquet_atomic(tmp_dir / f"{host}.parquet", frame)
            meta = dict(raw.meta, _validation_key=key, _sha256=entry.sha256, _archive=f"data/raw/{entry.file}",
                        _hosts=sorted(frames), _dropped_counters=dropped)
            if dropped:
                log.warning("%s: %d counter(s) dropped: %s", entry.run_id, len(dropped),
                            "; ".join(d["reason"] for d in dropped[:3])[:500])
            archive.write_json_atomic(tmp_dir / "meta.json", meta)
            old = None
            if run_dir.exists():
                old = tmp_dir.with_suffix(".old")
                run_dir.rename(old)
            tmp_dir.rename(run_dir)
            if old is not None:
                shutil.rmtree(old)
            if q_path.exists():
                q_path.unlink()
            index[entry.run_id] = _index_row(meta)
            n_dropped += len(dropped)
        progress.step(i, f"{done} validated now, {len(quarantined)} quarantined, {n_dropped} counters dropped")
    if validator is None and not (config.VALIDATION_DOCS / "index.html").exists():
        validator = Validator(suites_from_params(params), project_dir=config.GX, docs_dir=config.VALIDATION_DOCS)
    if validator is not None:               # nothing validated and the site exists: it is current
        t_docs = time.monotonic()
        validator.build_docs()
        log.info("Data Docs rebuilt in %.1fs", time.monotonic() - t_docs)
    # the analysts' decisions win over the archives' verdicts (pipelines/triage.py): a triaged target joins the history
    decisions = triage.triage_state(triage.read_log())
    index = triage.apply_triage(index, decisions)
    # runs that left the manifest cannot exist (raw is append-only); stale dirs of other keys are replaced above
    archive.write_json_atomic(config.VALID_INDEX, {"valid": index, "quarantined": quarantined})
    print(f"[validate] {len(index)} valid, {len(quarantined)} quarantined ({done} validated this time; "
          f"{sum(r in index for r in decisions)} triaged); Data Docs: {config.VALIDATION_DOCS / 'index.html'}")


def quarantine_reason(failures: list[dict[str, Any]], dropped: list[dict[str, Any]]) -> str:
    """The run-level failures as sentences; when too many counters went, the first of them too."""
    reason = "; ".join(describe_failure(f) for f in failures)
    if any(f.get("kwargs", {}).get("column") == "dropped_counter_share" for f in failures) and dropped:
        reason += f" ({len(dropped)} counters dropped, e.g. " + "; ".join(d["reason"] for d in dropped[:3]) + ")"
    return reason


def _index_row(meta: dict[str, Any]) -> dict[str, Any]:
    row = {k: meta.get(k) for k in ("system", "version", "started_at", "duration_s", "verdict", "cause",
                                    "environment", "baseline", "workload", "regressed_counters", "_hosts")}
    row["_dropped_counters"] = meta.get("_dropped_counters") or []
    return row


if __name__ == "__main__":
    main()
